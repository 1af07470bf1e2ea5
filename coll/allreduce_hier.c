/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * AllReduce across nodes: reduce-scatter inside each node, an allreduce of
 * each slice across the nodes among the ranks that hold it, allgather
 * inside each node.
 *
 * Idea (Open MPI's HAN, NCCL's trees and rings over nodes): the bytes that
 * cross the network are the slices, not the vectors. Every rank of a node
 * holds some slices, so every rank (and every NIC of the node) carries
 * part of the network traffic, and none of the node's own bytes go on the
 * network when ranks of a node talk over shared memory (paths.c).
 *
 * The vector is cut into Lmax slices, Lmax the number of ranks on the
 * fullest node; on a node of L ranks the slice s belongs to its
 * (s mod L)-th rank, so uneven nodes (3, 2, 4, 1 ranks) work and a rank
 * alone on its node holds every slice.
 *   1. Inside the node: every rank sends each slice it does not hold to
 *      the rank that does, which reduces them, its own first, then in rank
 *      order.
 *   2. Across nodes, for each slice, among its holders (one per node): each
 *      sends its partial to the others, and each reduces the partials in
 *      node order, so every holder computes the same bytes.
 *   3. Inside the node: the holder sends the result (divided by n for
 *      FC_AVG) to the other ranks of its node.
 * Steps 1 and 3 are direct (L - 1 messages per slice), step 2 is a direct
 * exchange (nnodes - 1 messages per slice): fine at the few nodes and
 * ranks per node of a node-aware collective's usual job; rings inside and
 * across would carry fewer bytes at many.
 *
 * Needs the node of every rank (coll_args.node).
 */
#include <stdlib.h>

#include "coll.h"
#include "log.h"

static int holder(const struct coll_nodes *N, int x, int slice)
{
    int L = N->first[x + 1] - N->first[x];
    return N->ranks[N->first[x] + slice % L];
}

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int r = a->rank, m = a->nnodes, k = a->node[r];
    const int src = a->in_place ? R_RECV : R_SEND;
    struct coll_nodes N;
    int *prcv = malloc((size_t)m * sizeof(int)); /* the partials' receives (step 2) */
    if (!prcv || coll_nodes_make(a, &N) != 0) {
        free(prcv);
        return FC_ERR(FC_ERR_NO_MEMORY, "allreduce hier: out of memory for %d ranks", a->nranks);
    }
    const int L = N.first[k + 1] - N.first[k], lmax = N.lmax;
    const uint32_t T1 = 0, T2 = (uint32_t)lmax, T3 = 2u * (uint32_t)lmax;
    for (int sl = 0; sl < lmax; sl++) {
        const size_t off = a->count * (size_t)sl / (size_t)lmax * a->esize;
        const size_t len = a->count * (size_t)(sl + 1) / (size_t)lmax * a->esize - off;
        if (!len)
            continue;
        const int h = holder(&N, k, sl);
        const struct sched_buf mine = sbuf(R_RECV, off);
        if (h != r) {
            /* 1: to its holder; 3: the result back (after the send, in place) */
            int snd = sched_send(s, h, T1 + (uint32_t)sl, sbuf(src, off), len);
            int rcv = sched_recv(s, h, T3 + (uint32_t)sl, mine, len);
            sched_dep(s, rcv, snd, 0);
            continue;
        }
        /* 1: my slice first, then the node's other ranks' in rank order */
        int acc = a->in_place ? -1 : sched_copy(s, mine, sbuf(src, off), len);
        if (L > 1) {
            const size_t tmp = sched_scratch(s, (size_t)(L - 1) * len);
            for (int i = 0, slot = 0; i < L; i++) {
                int q = N.ranks[N.first[k] + i];
                if (q == r)
                    continue;
                struct sched_buf b = sbuf(R_SCRATCH, tmp + (size_t)slot++ * len);
                int rcv = sched_recv(s, q, T1 + (uint32_t)sl, b, len);
                int red = sched_reduce(s, mine, mine, b, len);
                sched_dep(s, red, rcv, 1);
                sched_dep(s, red, acc, 1);
                acc = red;
            }
        }
        /* 2: the partials of every node, reduced in node order */
        if (m > 1) {
            const size_t part = sched_scratch(s, (size_t)m * len);
            struct sched_buf own = sbuf(R_SCRATCH, part + (size_t)k * len);
            int cp = sched_copy(s, own, mine, len);
            sched_dep(s, cp, acc, 1);
            for (int x = 0; x < m; x++) {
                prcv[x] = cp;
                if (x == k)
                    continue;
                int o = holder(&N, x, sl);
                int snd = sched_send(s, o, T2 + (uint32_t)sl, own, len);
                sched_dep(s, snd, cp, 1);
                prcv[x] = sched_recv(s, o, T2 + (uint32_t)sl,
                                     sbuf(R_SCRATCH, part + (size_t)x * len), len);
            }
            /* (the sends read own only, which nothing writes) */
            acc = sched_reduce(s, mine, sbuf(R_SCRATCH, part), sbuf(R_SCRATCH, part + len), len);
            for (int x = 0; x < m; x++)
                sched_dep(s, acc, prcv[x], 0);
            for (int x = 2; x < m; x++) {
                int red = sched_reduce(s, mine, mine,
                                       sbuf(R_SCRATCH, part + (size_t)x * len), len);
                sched_dep(s, red, acc, 1);
                acc = red;
            }
        }
        if (a->op == FC_AVG) {
            int sc = sched_scale(s, mine, len);
            sched_dep(s, sc, acc, 1);
            acc = sc;
        }
        /* 3: the result to the node's other ranks */
        for (int i = 0; i < L; i++) {
            int q = N.ranks[N.first[k] + i];
            if (q == r)
                continue;
            int snd = sched_send(s, q, T3 + (uint32_t)sl, mine, len);
            sched_dep(s, snd, acc, 1);
        }
    }
    coll_nodes_free(&N);
    free(prcv);
    return s->build_err;
}

static int check(const struct coll_args *a)
{
    if (!coll_nodes_apply(a))
        return 0;
    /* slices of the fullest node times three tag ranges: counted only
     * where the ranks could exceed them (the tuner asks at every call) */
    if (3u * (unsigned)a->nranks <= TAG_STEP_MAX)
        return 1;
    struct coll_nodes N;
    if (coll_nodes_make(a, &N) != 0)
        return 0;
    int ok = 3u * (unsigned)N.lmax <= TAG_STEP_MAX;
    coll_nodes_free(&N);
    return ok;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    if (!a->node || a->nranks == 1)
        return 1e30;
    const int m = a->nnodes;
    const double L = (double)a->nranks / m; /* ranks per node, on average */
    double an, bn;
    coll_node_link(c, &an, &bn);
    const double bytes = (double)a->count * (double)a->esize;
    /* 1 and 3: (L - 1) messages of a slice each way inside the node;
     * 2: (m - 1) exchanges of a rank's share (bytes / L) across */
    double t = 2 * ((L - 1) * an + (L - 1) / L * bytes * bn);
    t += (m - 1) * c->alpha + (m - 1) * bytes / L * c->beta;
    t += ((L - 1) + (m - 1)) / L * bytes * c->gamma;
    return t;
}

const struct coll_algo coll_allreduce_hier = {
    .name = "hier",
    .kind = COLL_ALLREDUCE,
    .check = check,
    .build = build,
    .cost = cost,
};
