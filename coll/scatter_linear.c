/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Scatter, linear.
 *
 * Idea: the root sends each rank its block straight from its send buffer
 * (its own is a local copy, none in place); every other rank receives once,
 * into its receive buffer. One round.
 *
 * Steps: n-1 sends at the root, all posted at once; one receive elsewhere.
 * Bytes out of the root: (n-1) * block, with no copies and no scratch: for
 * large blocks, or few ranks.
 */
#include "coll.h"

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks, root = a->root;
    const size_t bc = a->count * a->esize;
    if (a->rank != root) {
        sched_recv(s, root, 0, sbuf(R_RECV, 0), bc);
        return s->build_err;
    }
    if (!a->in_place)
        sched_copy(s, sbuf(R_RECV, 0), sbuf(R_SEND, (size_t)root * bc), bc);
    for (int k = 1; k < n; k++) {
        const int r = mod(root + k, n);
        sched_send(s, r, 0, sbuf(R_SEND, (size_t)r * bc), bc);
    }
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    const double bc = (double)a->count * (double)a->esize;
    const int m = a->nranks - 1;
    return m > 0 ? m * (c->alpha + bc * c->beta) + coll_hs1(c, bc) : 0;
}

const struct coll_algo coll_scatter_linear = {
    .name = "linear",
    .kind = COLL_SCATTER,
    .check = coll_any,
    .build = build,
    .cost = cost,
};
