/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Broadcast, scatter + allgather (van de Geijn).
 *
 * Idea: with ranks renumbered so the root is 0 (v = rank - root mod n) and
 * the message cut into n blocks, block v belonging to virtual rank v:
 *  1. binomial scatter: v receives from its parent (v minus its lowest set
 *     bit) the blocks of its subtree, [v, min(v + lowbit(v), n)), one
 *     contiguous range, and passes each child c its subtree's range,
 *     farthest child first;
 *  2. ring allgather: in step t (0 .. n-2) v sends block v-t to v+1 and
 *     receives block v-t-1 from v-1. A block the receiver already got in
 *     the scatter (its subtree; everything, at the root) is neither sent
 *     nor received: both sides skip it by the same rule, and the receiver
 *     forwards it from its subtree copy next step. Any n.
 *
 * Steps: one scatter receive, up to log2(n) scatter sends, n-1 ring steps.
 * Bytes sent by the root: (n-1)/n of the message in the scatter; per rank
 * at most (n-1)/n in the ring; latency (log2 n + n - 1) alpha: for large
 * messages at moderate n (2 size beta instead of log2(n) size beta).
 * No scratch. Every byte of a non-root's receive buffer is written once
 * (its subtree by the scatter, the rest by the ring), and the root
 * receives nothing, so the only hazards are reads after writes: a ring
 * send depends chunked on the receive of the previous step (same block),
 * or on the scatter receive when the block is in its subtree. The root
 * sends from its send buffer; out of place its own copy into the receive
 * buffer runs beside.
 */
#include "coll.h"

static int in_sub(int b, int v, int n)
{
    return b >= v && b < binomial_sub_end(v, n);
}

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks, root = a->root;
    const size_t es = a->esize, cnt = a->count;
    const int v = mod(a->rank - root, n);
#define BOFF(b) (blk_first(cnt, n, (b)) * es)
#define REAL(u) mod((u) + root, n)
    int src = R_RECV, have = -1;
    if (v == 0) {
        if (!a->in_place) {
            src = R_SEND;
            sched_copy(s, sbuf(R_RECV, 0), sbuf(R_SEND, 0), cnt * es);
        }
    } else {
        int parent = v - (v & -v);
        have = sched_recv(s, REAL(parent), 0, sbuf(R_RECV, BOFF(v)), BOFF(binomial_sub_end(v, n)) - BOFF(v));
    }
    if (n == 1)
        return s->build_err;
    /* scatter: children v + m, m below the lowest set bit, farthest first */
    int top = v == 0 ? floor_pow2(n - 1) : (v & -v) / 2;
    for (int m = top; m >= 1; m >>= 1) {
        int c = v + m;
        if (c >= n)
            continue;
        int snd = sched_send(s, REAL(c), 0, sbuf(src, BOFF(c)), BOFF(binomial_sub_end(c, n)) - BOFF(c));
        sched_dep_at(s, snd, BOFF(c), have, BOFF(v));
    }
    /* ring allgather, step tags 1 .. n-1 */
    const int next = mod(v + 1, n);
    int prev_rcv = -1;
    for (int t = 0; t < n - 1; t++) {
        int sb = mod(v - t, n), rb = mod(v - t - 1, n);
        uint32_t tag = (uint32_t)t + 1;
        if (!in_sub(sb, next, n)) {
            int snd = sched_send(s, REAL(next), tag, sbuf(src, BOFF(sb)), BOFF(sb + 1) - BOFF(sb));
            if (in_sub(sb, v, n))
                sched_dep_at(s, snd, BOFF(sb), have, BOFF(v));
            else
                sched_dep(s, snd, prev_rcv, 1); /* received in step t-1 */
        }
        prev_rcv = -1;
        if (!in_sub(rb, v, n))
            prev_rcv =
                sched_recv(s, REAL(v - 1), tag, sbuf(R_RECV, BOFF(rb)), BOFF(rb + 1) - BOFF(rb));
    }
#undef BOFF
#undef REAL
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    int n = a->nranks;
    if (n == 1)
        return 0;
    double bytes = (double)a->count * (double)a->esize, part = (double)(n - 1) / n * bytes;
    if (!(c->oversub > 1))
        return (ceil_log2(n) + n - 1) * c->alpha + 2 * part * c->beta +
               coll_hs_ring_tree(c, n, bytes);
    /* ranks outnumber CPUs: the scatter's rounds have few receivers, each
     * a subtree's blocks; in the ring every non-root receives at once */
    double t = (n - 1) * (c->alpha + coll_hs(c, bytes / n)) +
               part * c->beta * coll_share(c, n, n - 1);
    for (int mask = 1; mask < n; mask *= 2)
        t += c->alpha + coll_hs1(c, bytes * mask / n) +
             bytes * mask / n * c->beta * coll_share(c, n, binomial_receivers(n, mask));
    return t;
}

const struct coll_algo coll_bcast_scatter_allgather = {
    .name = "scatter_allgather",
    .kind = COLL_BCAST,
    .check = coll_any,
    .build = build,
    .cost = cost,
    .shares = 1,
};
