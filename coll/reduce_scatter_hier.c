/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reduce-scatter across nodes: each node reduces every block inside the
 * node first, and only the node's partial of a block crosses the network,
 * once, to the rank that owns the block.
 *
 * The mirror of allgather_hier.c. Block q (of rank q, the i-th of its node)
 * has one collector on every node x: q itself on q's node, else the
 * (i mod L_x)-th rank of x (L_x the ranks of x).
 *   1. Inside: every rank sends each block of its input to that block's
 *      collector on its node; a collector reduces its own input of the
 *      block first, then the others' in rank order.
 *   2. Across: each collector sends its node's partial of a block to the
 *      block's owner, which reduces the partials after its own node's, in
 *      node order (the result does not depend on timing).
 * Uneven nodes work as in allgather_hier.c.
 *
 * Bytes across per node: the other nodes' blocks, once each, against the
 * flat ring's (ranks - 1) blocks through every rank; the rest goes over
 * the node's own path. Messages: about nnodes - 1 per rank across, ranks
 * - 1 inside. Tags: q for block q inside (a rank sends a collector several
 * blocks), nranks across, so the ranks must fit the tag range.
 * Scratch: a collector's partial and its node's blocks of each block it
 * collects for another node; the owner's node's partials.
 *
 * Needs the node of every rank (coll_args.node).
 */
#include <stdlib.h>

#include "coll.h"
#include "log.h"

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks, r = a->rank, m = a->nnodes, k = a->node[r];
    const size_t bc = a->count * a->esize;
    if (!bc)
        return s->build_err;
    struct coll_nodes N;
    int *idx = malloc((size_t)n * sizeof(int));
    int *part = malloc((size_t)m * sizeof(int)); /* the partials' receives (step 2) */
    if (!idx || !part || coll_nodes_make(a, &N) != 0) {
        free(idx);
        free(part);
        return FC_ERR(FC_ERR_NO_MEMORY, "reduce_scatter hier: out of memory for %d ranks", n);
    }
    for (int x = 0; x < m; x++)
        for (int i = N.first[x]; i < N.first[x + 1]; i++)
            idx[N.ranks[i]] = i - N.first[x];
    const int *mine = N.ranks + N.first[k];
    const int L = N.first[k + 1] - N.first[k];
    const uint32_t T2 = (uint32_t)n;
    int final = -1;
    for (int q = 0; q < n; q++) {
        const struct sched_buf in = sbuf(R_SEND, (size_t)q * bc);
        const int col = a->node[q] == k ? q : mine[idx[q] % L];
        if (col != r) { /* 1: my input of block q to its collector */
            sched_send(s, col, (uint32_t)q, in, bc);
            continue;
        }
        /* 1: my node's inputs of block q, mine first, then in rank order */
        const struct sched_buf acc =
            q == r ? sbuf(R_RECV, 0) : sbuf(R_SCRATCH, sched_scratch(s, bc));
        struct sched_buf from = in; /* where the node's partial is (L == 1: my input) */
        int ready = -1;
        if (L > 1) {
            const size_t tmp = sched_scratch(s, (size_t)(L - 1) * bc);
            for (int i = 0, slot = 0; i < L; i++) {
                if (mine[i] == r)
                    continue;
                const struct sched_buf b = sbuf(R_SCRATCH, tmp + (size_t)slot * bc);
                int rcv = sched_recv(s, mine[i], (uint32_t)q, b, bc);
                int red = sched_reduce(s, acc, slot == 0 ? in : acc, b, bc);
                sched_dep(s, red, rcv, 1);
                sched_dep(s, red, ready, 1);
                ready = red;
                slot++;
            }
            from = acc;
        }
        if (q != r) { /* 2: my node's partial of block q to its owner */
            int snd = sched_send(s, q, T2, from, bc);
            sched_dep(s, snd, ready, 1);
            continue;
        }
        if (L == 1 && !a->in_place)
            ready = sched_copy(s, acc, in, bc);
        /* 2: the other nodes' partials of my block, in node order */
        const size_t parts = sched_scratch(s, (size_t)m * bc);
        for (int x = 0; x < m; x++) {
            if (x == k)
                continue;
            const int Lx = N.first[x + 1] - N.first[x];
            part[x] = sched_recv(s, N.ranks[N.first[x] + idx[r] % Lx], T2,
                                 sbuf(R_SCRATCH, parts + (size_t)x * bc), bc);
        }
        for (int x = 0; x < m; x++) {
            if (x == k)
                continue;
            int red = sched_reduce(s, acc, acc, sbuf(R_SCRATCH, parts + (size_t)x * bc), bc);
            sched_dep(s, red, part[x], 1);
            sched_dep(s, red, ready, 1);
            ready = red;
        }
        final = ready;
    }
    if (a->op == FC_AVG)
        sched_dep(s, sched_scale(s, sbuf(R_RECV, 0), bc), final, 1);
    coll_nodes_free(&N);
    free(idx);
    free(part);
    return s->build_err;
}

static int check(const struct coll_args *a)
{
    return coll_nodes_apply(a) && (unsigned)a->nranks < TAG_STEP_MAX;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    const int n = a->nranks, m = a->nnodes;
    const double bc = (double)a->count * (double)a->esize;
    double an, bn;
    coll_node_link(c, &an, &bn);
    return (n - 1) * (an + bc * bn + bc * c->gamma) +
           (m - 1) * (c->alpha + bc * c->beta + coll_hs(c, bc));
}

const struct coll_algo coll_reduce_scatter_hier = {
    .name = "hier",
    .kind = COLL_REDUCE_SCATTER,
    .check = check,
    .build = build,
    .cost = cost,
};
