/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Allgather across nodes: every block crosses to every other node once,
 * then spreads inside each node.
 *
 * Idea (Open MPI's HAN, NCCL's node-aware rings): a rank's block has to
 * reach every node, but only once per node; the node's own path (shm under
 * per-peer paths) carries it from there. Every rank of a node takes part
 * in the network traffic, so every NIC of the node is busy.
 *   1. Across: rank q, the i-th of its node, sends its block to one rank of
 *      every other node y: the (i mod L_y)-th, L_y the ranks of y. That
 *      rank is the block's forwarder on y.
 *   2. Inside: every rank sends its own block, and each block it forwards
 *      (as it arrives, chunk by chunk), to the other ranks of its node.
 * Uneven nodes (3, 2, 4, 1 ranks) work: on a node of fewer ranks a rank
 * forwards the blocks of several ranks of a larger node.
 *
 * Bytes across per node: its blocks times (nodes - 1), against the flat
 * ring's (ranks - 1) blocks through every rank. Messages: nnodes - 1 per
 * rank across, about nnodes x (L - 1) inside; direct, so for the few nodes
 * and ranks per node of a node-aware collective's usual job.
 * Tags: 0 across; 1 + q for block q inside (a forwarder may pass several
 * blocks to one peer), so the ranks must fit the tag range.
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
    const struct sched_buf own = a->in_place ? sbuf(R_RECV, (size_t)r * bc) : sbuf(R_SEND, 0);
    if (!a->in_place)
        sched_copy(s, sbuf(R_RECV, (size_t)r * bc), own, bc); /* nothing reads it */
    if (!bc)
        return s->build_err;
    struct coll_nodes N;
    int *idx = malloc((size_t)n * sizeof(int)); /* every rank's place on its node */
    if (!idx || coll_nodes_make(a, &N) != 0) {
        free(idx);
        return FC_ERR(FC_ERR_NO_MEMORY, "allgather hier: out of memory for %d ranks", n);
    }
    for (int x = 0; x < m; x++)
        for (int i = N.first[x]; i < N.first[x + 1]; i++)
            idx[N.ranks[i]] = i - N.first[x];
    const int *mine = N.ranks + N.first[k];
    const int L = N.first[k + 1] - N.first[k], j = idx[r];
    /* 1: my block to its forwarder on every other node */
    for (int y = 0; y < m; y++) {
        if (y == k)
            continue;
        const int Ly = N.first[y + 1] - N.first[y];
        sched_send(s, N.ranks[N.first[y] + j % Ly], 0, own, bc);
    }
    /* 2: my block, and each one I forward, to my node; the rest from it */
    for (int q = 0; q < n; q++) {
        const struct sched_buf blk = sbuf(R_RECV, (size_t)q * bc);
        const int fwd = a->node[q] == k ? q : mine[idx[q] % L];
        if (fwd != r) {
            sched_recv(s, fwd, 1u + (uint32_t)q, blk, bc);
            continue;
        }
        int have = q == r ? -1 : sched_recv(s, q, 0, blk, bc);
        for (int i = 0; i < L; i++) {
            if (mine[i] == r)
                continue;
            int snd = sched_send(s, mine[i], 1u + (uint32_t)q, q == r ? own : blk, bc);
            sched_dep(s, snd, have, 1);
        }
    }
    coll_nodes_free(&N);
    free(idx);
    return s->build_err;
}

static int check(const struct coll_args *a)
{
    return coll_nodes_apply(a) && (unsigned)a->nranks < TAG_STEP_MAX;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    const int m = a->nnodes;
    const double L = (double)a->nranks / m; /* ranks per node, on average */
    const double bc = (double)a->count * (double)a->esize;
    double an, bn;
    coll_node_link(c, &an, &bn);
    return (m - 1) * (c->alpha + bc * c->beta + coll_hs(c, bc)) +
           m * (L - 1) * (an + bc * bn);
}

const struct coll_algo coll_allgather_hier = {
    .name = "hier",
    .kind = COLL_ALLGATHER,
    .check = check,
    .build = build,
    .cost = cost,
};
