/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * AllReduce, ring: reduce-scatter around the ring, then allgather.
 *
 * Idea: cut the vector into n blocks. In n-1 reduce-scatter steps every
 * rank sends one block to its right neighbour, receives one from its left
 * and adds it to its own copy; afterwards rank r holds the total of block
 * r+1. In n-1 allgather steps the totals travel once around the ring.
 *
 * Steps: 2(n-1) sends and receives, n-1 reductions of a block.
 * Bytes sent per rank: 2(n-1)/n * size (bandwidth optimal); latency
 * 2(n-1) alpha, so it wins for large vectors.
 * Every block is reduced by exactly one chain of ranks, in one order, then
 * copied: all ranks get bit-identical results even for floating point.
 * Needs a commutative op (all of fabcoll's are). Scratch: two blocks (the
 * receive of step s+1 overlaps the reduction of step s). Out of place, the
 * first step sends from the send buffer and each reduction writes
 * recv = send op scratch, so no initial copy is made. The engine's chunked
 * dependencies pipeline the ring: the send of step s+1 follows the
 * reduction of step s chunk by chunk.
 */
#include "coll.h"

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks, r = a->rank;
    const size_t es = a->esize;
    const int src_region = a->in_place ? R_RECV : R_SEND;
    if (n == 1) {
        if (!a->in_place)
            sched_copy(s, sbuf(R_RECV, 0), sbuf(R_SEND, 0), a->count * es);
        return s->build_err;
    }
    const int left = mod(r - 1, n), right = mod(r + 1, n);
    size_t maxblk = blk_count(a->count, n, 0) * es;
    size_t slot[2];
    slot[0] = sched_scratch(s, maxblk);
    slot[1] = sched_scratch(s, maxblk);

    /* reduce-scatter */
    /* The allgather's receive into block r-t must follow the reduce-scatter
     * send that read block r-t (its step t); each ring step emits exactly
     * three steps (send, recv, reduce), so that send is rs_send0 + 3t. */
    int rs_send0 = -1, prev_red = -1, prev2_red = -1;
    for (int st = 0; st < n - 1; st++) {
        int sb = mod(r - st, n), rb = mod(r - st - 1, n);
        size_t sboff = blk_first(a->count, n, sb) * es, sblen = blk_count(a->count, n, sb) * es;
        size_t rboff = blk_first(a->count, n, rb) * es, rblen = blk_count(a->count, n, rb) * es;
        int snd = sched_send(s, right, (uint32_t)st,
                             sbuf(st == 0 ? src_region : R_RECV, sboff), sblen);
        sched_dep(s, snd, prev_red, 1);
        int rcv = sched_recv(s, left, (uint32_t)st, sbuf(R_SCRATCH, slot[st % 2]), rblen);
        sched_dep(s, rcv, prev2_red, 1);
        int red = sched_reduce(s, sbuf(R_RECV, rboff), sbuf(src_region, rboff),
                               sbuf(R_SCRATCH, slot[st % 2]), rblen);
        sched_dep(s, red, rcv, 1);
        if (st == 0)
            rs_send0 = snd;
        prev2_red = prev_red;
        prev_red = red;
    }
    int owned = mod(r + 1, n);
    size_t ooff = blk_first(a->count, n, owned) * es, olen = blk_count(a->count, n, owned) * es;
    int last = prev_red;
    if (a->op == FC_AVG) {
        int sc = sched_scale(s, sbuf(R_RECV, ooff), olen);
        sched_dep(s, sc, last, 1);
        last = sc;
    }
    /* allgather */
    int prev_rcv = -1;
    for (int t = 0; t < n - 1; t++) {
        int sb = mod(r + 1 - t, n), rb = mod(r - t, n);
        size_t sboff = blk_first(a->count, n, sb) * es, sblen = blk_count(a->count, n, sb) * es;
        size_t rboff = blk_first(a->count, n, rb) * es, rblen = blk_count(a->count, n, rb) * es;
        uint32_t tag = (uint32_t)(n - 1 + t);
        int snd = sched_send(s, right, tag, sbuf(R_RECV, sboff), sblen);
        sched_dep(s, snd, t == 0 ? last : prev_rcv, 1);
        int rcv = sched_recv(s, left, tag, sbuf(R_RECV, rboff), rblen);
        /* (out of place, the first reduce-scatter send read the send
         * buffer: nothing to wait for) */
        if (t > 0 || a->in_place)
            sched_dep(s, rcv, rs_send0 + 3 * t, 1);
        prev_rcv = rcv;
    }
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    int n = a->nranks;
    double bytes = (double)a->count * (double)a->esize;
    if (n == 1)
        return 0;
    return 2.0 * (n - 1) * (c->alpha + coll_hs(c, bytes / n)) + 2.0 * (n - 1) / n * bytes * c->beta +
           (double)(n - 1) / n * bytes * c->gamma;
}

const struct coll_algo coll_allreduce_ring = {
    .name = "ring",
    .kind = COLL_ALLREDUCE,
    .check = coll_any,
    .build = build,
    .cost = cost,
};
