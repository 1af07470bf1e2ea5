/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reduce across nodes: a binomial reduction inside every node to its leader
 * (the root on its node, the lowest rank elsewhere), then one over the
 * leaders to the root.
 *
 * The mirror of bcast_hier.c: each node sends one vector over the network,
 * not one per rank. Every rank reduces its own vector first, then its
 * children's in the tree's order, so the result does not depend on timing.
 * A rank's partial lives in scratch (recvbuf exists on the root only); a
 * rank without children sends its input as it is.
 *
 * Needs the node of every rank (coll_args.node).
 */
#include <stdlib.h>

#include "coll.h"
#include "log.h"

/* The binomial tree over list[0 .. c) to list[0], in which this rank is
 * list[me]: its children's partials are reduced into acc after `ready`
 * (tmp: scratch for one), then acc goes to its parent. Returns the step
 * after which acc holds the subtree's reduction. */
static int tree_reduce(struct sched *s, const int *list, int c, int me, uint32_t tag,
                       struct sched_buf acc, int ready, size_t len)
{
    int low = 1;
    if (me > 0)
        while (!(me & low))
            low <<= 1;
    else
        while (low < c)
            low <<= 1;
    for (int d = 1; d < low && me + d < c; d <<= 1) {
        const size_t tmp = sched_scratch(s, len);
        int rcv = sched_recv(s, list[me + d], tag, sbuf(R_SCRATCH, tmp), len);
        int red = sched_reduce(s, acc, acc, sbuf(R_SCRATCH, tmp), len);
        sched_dep(s, red, rcv, 1);
        sched_dep(s, red, ready, 1);
        ready = red;
    }
    if (me > 0) {
        int snd = sched_send(s, list[me - low], tag, acc, len);
        sched_dep(s, snd, ready, 1);
    }
    return ready;
}

static int has_children(int me, int c)
{
    return me == 0 ? c > 1 : !(me & 1) && me + 1 < c;
}

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const size_t bytes = a->count * a->esize;
    const int m = a->nnodes;
    struct coll_nodes N;
    int *lead = malloc((size_t)m * sizeof(int));
    int *local = malloc((size_t)a->nranks * sizeof(int));
    if (!lead || !local || coll_nodes_make(a, &N) != 0) {
        free(lead);
        free(local);
        return FC_ERR(FC_ERR_NO_MEMORY, "reduce hier: out of memory for %d ranks", a->nranks);
    }
    int me_lead, me_local = 0, L;
    coll_nodes_trees(a, &N, lead, &me_lead, local, &me_local, &L);
    const int src = a->in_place && a->rank == a->root ? R_RECV : R_SEND;
    struct sched_buf acc = sbuf(src, 0);
    int ready = -1;
    if (a->rank == a->root) {
        acc = sbuf(R_RECV, 0);
        if (!a->in_place)
            ready = sched_copy(s, acc, sbuf(R_SEND, 0), bytes);
    } else if (has_children(me_local, L) || (me_lead >= 0 && has_children(me_lead, m))) {
        acc = sbuf(R_SCRATCH, sched_scratch(s, bytes));
        ready = sched_copy(s, acc, sbuf(R_SEND, 0), bytes);
    }
    ready = tree_reduce(s, local, L, me_local, 0, acc, ready, bytes);
    if (me_lead >= 0)
        ready = tree_reduce(s, lead, m, me_lead, 1, acc, ready, bytes);
    if (a->rank == a->root && a->op == FC_AVG)
        sched_dep(s, sched_scale(s, acc, bytes), ready, 1);
    coll_nodes_free(&N);
    free(lead);
    free(local);
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    const double bytes = (double)a->count * (double)a->esize;
    double an, bn;
    coll_node_link(c, &an, &bn);
    const int L = (a->nranks + a->nnodes - 1) / a->nnodes;
    return ceil_log2(a->nnodes) * (c->alpha + coll_hs1(c, bytes) + bytes * (c->beta + c->gamma)) +
           ceil_log2(L) * (an + bytes * (bn + c->gamma));
}

const struct coll_algo coll_reduce_hier = {
    .name = "hier",
    .kind = COLL_REDUCE,
    .check = coll_nodes_apply,
    .build = build,
    .cost = cost,
    .shares = 1,
};
