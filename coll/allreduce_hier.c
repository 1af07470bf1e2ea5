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
 *   2. Across nodes, for each slice, among its holders (one per node, in
 *      node order): a ring (reduce-scatter, then allgather of the slice's
 *      m blocks) where there are at most 3 nodes or the blocks are large,
 *      else a binomial tree (reduce to the first node's holder, broadcast
 *      back). Either way each block is reduced once, on one holder, and
 *      copied to the others, so every holder ends with the same bytes.
 *   3. Inside the node: the holder sends the result (divided by n for
 *      FC_AVG) to the other ranks of its node.
 * Steps 1 and 3 are direct (L - 1 messages per slice): a node's ranks are
 * few. Step 2 sends 2 (m - 1) / m of a slice per holder (ring) or
 * log2(m) slices (tree), not the (m - 1) slices of a direct exchange,
 * so the hierarchy still pays at hundreds of nodes.
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

/* Step 2's shape for a slice of len bytes across m nodes (build and cost
 * agree on it): a ring at few nodes or large blocks, else a tree. */
static int cross_ring(int m, size_t len)
{
    return m <= 3 || len >= (size_t)m * 8192;
}

/* Step 2 as a ring among the slice's holders H[0 .. m-1] (this rank is
 * H[k]): the slice at byte off of the receive buffer, cnt elements, holds
 * this node's partial once step `after` is done. Tags tag .. tag + 2(m-1).
 * Returns the step after which the slice holds the result (a NOP that
 * depends on the whole allgather). */
static int cross_by_ring(struct sched *s, const struct coll_args *a, const int *H, int m,
                         int k, size_t off, size_t cnt, uint32_t tag, int after)
{
    const size_t es = a->esize;
    const int left = H[mod(k - 1, m)], right = H[mod(k + 1, m)];
    const size_t maxblk = blk_count(cnt, m, 0) * es;
    const size_t slot[2] = {sched_scratch(s, maxblk), sched_scratch(s, maxblk)};
    /* the reduce-scatter's sends, then the allgather's sends and receives */
    int steps[3 * 64], *rs_send = steps;
    if (m - 1 > 64 && !(rs_send = malloc(3 * (size_t)(m - 1) * sizeof(int)))) {
        s->build_err = FC_ERR(FC_ERR_NO_MEMORY, "allreduce hier: out of memory");
        return -1;
    }
    int prev_red = after, prev2_red = after;
    for (int st = 0; st < m - 1; st++) { /* reduce-scatter */
        int sb = mod(k - st, m), rb = mod(k - st - 1, m);
        size_t so = off + blk_first(cnt, m, sb) * es, sl = blk_count(cnt, m, sb) * es;
        size_t ro = off + blk_first(cnt, m, rb) * es, rl = blk_count(cnt, m, rb) * es;
        int snd = sched_send(s, right, tag + (uint32_t)st, sbuf(R_RECV, so), sl);
        sched_dep(s, snd, prev_red, st > 0);
        int rcv = sched_recv(s, left, tag + (uint32_t)st, sbuf(R_SCRATCH, slot[st % 2]), rl);
        sched_dep(s, rcv, prev2_red, st > 1);
        int red = sched_reduce(s, sbuf(R_RECV, ro), sbuf(R_RECV, ro),
                               sbuf(R_SCRATCH, slot[st % 2]), rl);
        sched_dep(s, red, rcv, 1);
        sched_dep(s, red, after, 0);
        rs_send[st] = snd;
        prev2_red = prev_red;
        prev_red = red;
    }
    int *ag_send = rs_send + (m - 1), *ag_recv = ag_send + (m - 1), prev = prev_red;
    for (int t = 0; t < m - 1; t++) { /* allgather */
        int sb = mod(k + 1 - t, m), rb = mod(k - t, m);
        size_t so = off + blk_first(cnt, m, sb) * es, sl = blk_count(cnt, m, sb) * es;
        size_t ro = off + blk_first(cnt, m, rb) * es, rl = blk_count(cnt, m, rb) * es;
        uint32_t tg = tag + (uint32_t)(m - 1 + t);
        int snd = sched_send(s, right, tg, sbuf(R_RECV, so), sl);
        sched_dep(s, snd, prev, 1);
        ag_send[t] = snd;
        int rcv = sched_recv(s, left, tg, sbuf(R_RECV, ro), rl);
        sched_dep(s, rcv, rs_send[t], 0); /* that block went out in step t */
        ag_recv[t] = rcv;
        prev = rcv;
    }
    /* done once every block is in and every send has read its block (the
     * slice may be scaled or overwritten next) */
    int done = sched_nop(s);
    sched_dep(s, done, prev_red, 0);
    for (int t = 0; t < m - 1; t++) {
        sched_dep(s, done, ag_send[t], 0);
        sched_dep(s, done, ag_recv[t], 0);
    }
    if (rs_send != steps)
        free(rs_send);
    return done;
}

/* Step 2 as a binomial tree among the holders: reduce to H[0] (each
 * parent adds its children's partials in increasing distance), then
 * broadcast from H[0]. Tags tag (reduce) and tag + 1 (broadcast). */
static int cross_by_tree(struct sched *s, const int *H, int m,
                         int k, size_t off, size_t len, uint32_t tag, int after)
{
    const struct sched_buf mine = sbuf(R_RECV, off);
    int acc = after, up = -1, mask = 1;
    for (; mask < m; mask <<= 1) {
        if (k & mask) { /* to the parent, then done reducing */
            up = sched_send(s, H[k - mask], tag, mine, len);
            sched_dep(s, up, acc, 1);
            break;
        }
        if (k + mask < m) {
            size_t tmp = sched_scratch(s, len);
            int rcv = sched_recv(s, H[k + mask], tag, sbuf(R_SCRATCH, tmp), len);
            int red = sched_reduce(s, mine, mine, sbuf(R_SCRATCH, tmp), len);
            sched_dep(s, red, rcv, 1);
            sched_dep(s, red, acc, 1);
            acc = red;
        }
    }
    /* broadcast: from the parent (the mask this rank sent at), then to the
     * children below that mask, farthest first */
    if (k != 0) {
        int rcv = sched_recv(s, H[k - mask], tag + 1, mine, len);
        sched_dep(s, rcv, up, 0);
        acc = rcv;
    }
    int sends[32], ns = 0;
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (k + mask < m) {
            int snd = sched_send(s, H[k + mask], tag + 1, mine, len);
            sched_dep(s, snd, acc, 1);
            sends[ns++] = snd;
        }
    /* done once the children have been sent the result (it may be scaled
     * next) */
    int done = sched_nop(s);
    sched_dep(s, done, acc, 0);
    for (int i = 0; i < ns; i++)
        sched_dep(s, done, sends[i], 0);
    return done;
}

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int r = a->rank, m = a->nnodes, k = a->node[r];
    const int src = a->in_place ? R_RECV : R_SEND;
    struct coll_nodes N;
    int *H = malloc((size_t)m * sizeof(int)); /* a slice's holders, node order */
    if (!H || coll_nodes_make(a, &N) != 0) {
        free(H);
        return FC_ERR(FC_ERR_NO_MEMORY, "allreduce hier: out of memory for %d ranks", a->nranks);
    }
    const int L = N.first[k + 1] - N.first[k], lmax = N.lmax;
    /* tags: step 1 one per slice, step 2 W per slice, step 3 one per slice */
    const uint32_t W = 2u * (uint32_t)(m - 1), T1 = 0, T2 = (uint32_t)lmax,
                   T3 = T2 + (uint32_t)lmax * W;
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
        /* 1: my slice first, then the node's other ranks' in rank order;
         * out of place, the first reduction reads my slice from the send
         * buffer (no copy of it first), and a rank alone copies it */
        int acc = -1, first = !a->in_place;
        if (L > 1) {
            const size_t tmp = sched_scratch(s, (size_t)(L - 1) * len);
            for (int i = 0, slot = 0; i < L; i++) {
                int q = N.ranks[N.first[k] + i];
                if (q == r)
                    continue;
                struct sched_buf b = sbuf(R_SCRATCH, tmp + (size_t)slot++ * len);
                int rcv = sched_recv(s, q, T1 + (uint32_t)sl, b, len);
                int red = sched_reduce(s, mine, first ? sbuf(src, off) : mine, b, len);
                first = 0;
                sched_dep(s, red, rcv, 1);
                sched_dep(s, red, acc, 1);
                acc = red;
            }
        } else if (first) {
            acc = sched_copy(s, mine, sbuf(src, off), len);
        }
        /* 2: across the nodes, among the slice's holders */
        if (m > 1) {
            for (int x = 0; x < m; x++)
                H[x] = holder(&N, x, sl);
            const uint32_t tag = T2 + (uint32_t)sl * W;
            acc = cross_ring(m, len)
                      ? cross_by_ring(s, a, H, m, k, off, len / a->esize, tag, acc)
                      : cross_by_tree(s, H, m, k, off, len, tag, acc);
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
    free(H);
    return s->build_err;
}

static int check(const struct coll_args *a)
{
    if (!coll_nodes_apply(a))
        return 0;
    /* tags: lmax slices times 2 + 2 (m - 1), at most 2 nranks^2: counted
     * only where that could exceed the range (the tuner asks at every
     * call) */
    if (2ull * (unsigned)a->nranks * (unsigned)a->nranks <= TAG_STEP_MAX)
        return 1;
    struct coll_nodes N;
    if (coll_nodes_make(a, &N) != 0)
        return 0;
    int ok = 2ull * (unsigned)N.lmax * (unsigned)a->nnodes <= TAG_STEP_MAX;
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
    const double bytes = (double)a->count * (double)a->esize, share = bytes / L;
    /* 1 and 3: (L - 1) messages of a slice each way inside the node */
    double t = 2 * ((L - 1) * an + (L - 1) / L * bytes * bn) + (L - 1) / L * bytes * c->gamma;
    /* 2: a rank's share across the nodes, by ring or tree */
    if (m > 1) {
        if (cross_ring(m, (size_t)share))
            t += 2.0 * (m - 1) * (c->alpha + coll_hs(c, share / m)) +
                 2.0 * (m - 1) / m * share * c->beta + (double)(m - 1) / m * share * c->gamma;
        else
            t += 2.0 * ceil_log2(m) * (c->alpha + coll_hs(c, share) + share * c->beta) +
                 ceil_log2(m) * share * c->gamma;
    }
    return t;
}

const struct coll_algo coll_allreduce_hier = {
    .name = "hier",
    .kind = COLL_ALLREDUCE,
    .check = check,
    .build = build,
    .cost = cost,
};
