/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reduce-scatter, ring.
 *
 * Idea: the n blocks of the send buffer circulate around the ring, each
 * picking up one rank's contribution per hop. In step st (st = 0 .. n-2)
 * rank r sends its partial sum of block r-st-1 to the right, receives the
 * partial sum of block r-st-2 from the left and adds its own input of that
 * block; in the last step the block received is block r itself, whose total
 * goes straight into the receive buffer. Works for any n.
 *
 * Steps: n-1 sends, receives and reductions of one block per rank. Bytes
 * sent per rank: (n-1) * count * esize (bandwidth optimal); latency
 * (n-1) alpha, so it is for large blocks. The send of step st+1 follows the
 * reduction of step st chunk by chunk (pipelined ring).
 * Scratch: two blocks, alternating; the partial sum is reduced in place in
 * the slot it arrived in (dst == b) and sent on from there, so the receive
 * of step st+2 into the same slot waits for the send of step st+1.
 * The send buffer is only read, except in place, where the final reduction
 * writes block r of it (the receive buffer), read by nothing else; FC_AVG
 * scales that one block once at the end.
 */
#include "coll.h"

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks, r = a->rank;
    const size_t bc = a->count * a->esize;
    if (n == 1) {
        int last = -1;
        if (!a->in_place)
            last = sched_copy(s, sbuf(R_RECV, 0), sbuf(R_SEND, 0), bc);
        if (a->op == FC_AVG)
            sched_dep(s, sched_scale(s, sbuf(R_RECV, 0), bc), last, 1);
        return s->build_err;
    }
    const int left = mod(r - 1, n), right = mod(r + 1, n);
    size_t slot[2];
    slot[0] = sched_scratch(s, bc);
    slot[1] = sched_scratch(s, bc);
    int prev_red = -1, prev_snd = -1;
    for (int st = 0; st < n - 1; st++) {
        int sb = mod(r - st - 1, n), rb = mod(r - st - 2, n);
        struct sched_buf from =
            st == 0 ? sbuf(R_SEND, (size_t)sb * bc) : sbuf(R_SCRATCH, slot[(st - 1) % 2]);
        int snd = sched_send(s, right, (uint32_t)st, from, bc);
        sched_dep(s, snd, prev_red, 1);
        struct sched_buf in = sbuf(R_SCRATCH, slot[st % 2]);
        int rcv = sched_recv(s, left, (uint32_t)st, in, bc);
        if (st >= 2)
            sched_dep(s, rcv, prev_snd, 1); /* that send still reads this slot */
        struct sched_buf dst = st == n - 2 ? sbuf(R_RECV, 0) : in;
        int red = sched_reduce(s, dst, sbuf(R_SEND, (size_t)rb * bc), in, bc);
        sched_dep(s, red, rcv, 1);
        prev_red = red;
        prev_snd = snd;
    }
    if (a->op == FC_AVG)
        sched_dep(s, sched_scale(s, sbuf(R_RECV, 0), bc), prev_red, 1);
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    int n = a->nranks;
    double bc = (double)a->count * (double)a->esize;
    return (n - 1) * (c->alpha + bc * c->beta + coll_hs(c, bc) + bc * c->gamma);
}

const struct coll_algo coll_reduce_scatter_ring = {
    .name = "ring",
    .kind = COLL_REDUCE_SCATTER,
    .check = coll_any,
    .build = build,
    .cost = cost,
};
