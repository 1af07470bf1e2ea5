/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Gather, linear.
 *
 * Idea: every rank sends its block straight to the root, which receives
 * each one into its place in the receive buffer (its own is a local copy,
 * none in place). One round.
 *
 * Steps: one send per rank; n-1 receives at the root, all posted at once.
 * Bytes into the root: (n-1) * block, with no copies on the way and no
 * scratch; the root's NIC takes n-1 messages: for large blocks, or few
 * ranks.
 */
#include "coll.h"

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks, root = a->root;
    const size_t bc = a->count * a->esize;
    if (a->rank != root) {
        sched_send(s, root, 0, sbuf(R_SEND, 0), bc);
        return s->build_err;
    }
    if (!a->in_place)
        sched_copy(s, sbuf(R_RECV, (size_t)root * bc), sbuf(R_SEND, 0), bc);
    for (int r = 0; r < n; r++)
        if (r != root)
            sched_recv(s, r, 0, sbuf(R_RECV, (size_t)r * bc), bc);
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    const double bc = (double)a->count * (double)a->esize;
    const int m = a->nranks - 1;
    return m > 0 ? m * (c->alpha + bc * c->beta) + coll_hs1(c, bc) : 0;
}

const struct coll_algo coll_gather_linear = {
    .name = "linear",
    .kind = COLL_GATHER,
    .check = coll_any,
    .build = build,
    .cost = cost,
};
