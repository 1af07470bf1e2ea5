/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * AllReduce, recursive doubling.
 *
 * Idea: in round i every rank exchanges its whole partial result with the
 * rank whose number differs in bit i, and both combine the two halves of
 * the sum; after log2(n) rounds everyone holds the total.
 *
 * Non-powers of two (n = p + rem, p the largest power of two <= n): first
 * the 2*rem lowest ranks pair up (even sends its vector to odd, odd adds it),
 * the odd ones and the ranks >= 2*rem run the doubling among p ranks, then
 * each odd rank sends the result back to its even partner.
 *
 * Steps: log2(p) exchanges (+2 for the fold). Bytes sent per rank:
 * log2(p) * size: latency optimal, so it wins for small vectors.
 * Both partners compute a op b and b op a, which is bit-identical for
 * commutative IEEE sum/prod; results agree on every rank. Scratch: three
 * vectors (fold, and two alternating round buffers).
 */
#include "coll.h"

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks, r = a->rank;
    const size_t bytes = a->count * a->esize;
    const int src_region = a->in_place ? R_RECV : R_SEND;
    if (n == 1) {
        if (!a->in_place)
            sched_copy(s, sbuf(R_RECV, 0), sbuf(R_SEND, 0), bytes);
        return s->build_err;
    }
    const int p = floor_pow2(n), rem = n - p, rounds = ilog2(p);
    const uint32_t tag_unfold = (uint32_t)rounds + 1;

    if (r < 2 * rem && r % 2 == 0) {
        /* folded out: give my vector to r+1, get the result back */
        int snd = sched_send(s, r + 1, 0, sbuf(src_region, 0), bytes);
        int rcv = sched_recv(s, r + 1, tag_unfold, sbuf(R_RECV, 0), bytes);
        sched_dep(s, rcv, snd, 1);
        return s->build_err;
    }

    size_t fold = sched_scratch(s, bytes);
    size_t slot[2];
    slot[0] = sched_scratch(s, bytes);
    slot[1] = sched_scratch(s, bytes);
    int cur_region = src_region; /* where my partial result is */
    int last = -1;               /* step that produced it */
    if (r < 2 * rem) {
        int rcv = sched_recv(s, r - 1, 0, sbuf(R_SCRATCH, fold), bytes);
        int red = sched_reduce(s, sbuf(R_RECV, 0), sbuf(R_SCRATCH, fold), sbuf(src_region, 0),
                               bytes);
        sched_dep(s, red, rcv, 1);
        cur_region = R_RECV;
        last = red;
    }
    const int v = r < 2 * rem ? r / 2 : r - rem;
    int prev2 = -1;
    for (int i = 0; i < rounds; i++) {
        int partner = fold_real(v ^ (1 << i), rem);
        uint32_t tag = (uint32_t)i + 1;
        int snd = sched_send(s, partner, tag, sbuf(cur_region, 0), bytes);
        sched_dep(s, snd, last, 1);
        int rcv = sched_recv(s, partner, tag, sbuf(R_SCRATCH, slot[i % 2]), bytes);
        sched_dep(s, rcv, prev2, 1);
        /* lower virtual rank's data first: a op b on one side, b op a on
         * the other would also agree, but a fixed order keeps MIN/MAX of
         * signed zeros and NaN payloads identical too */
        struct sched_buf mine = sbuf(cur_region, 0), theirs = sbuf(R_SCRATCH, slot[i % 2]);
        int lower_first = v < (v ^ (1 << i));
        int red = sched_reduce(s, sbuf(R_RECV, 0), lower_first ? mine : theirs,
                               lower_first ? theirs : mine, bytes);
        sched_dep(s, red, rcv, 1);
        sched_dep(s, red, snd, 1); /* it overwrites what the send reads */
        sched_dep(s, red, last, 1);
        prev2 = last;
        last = red;
        cur_region = R_RECV;
    }
    if (a->op == FC_AVG) {
        int sc = sched_scale(s, sbuf(R_RECV, 0), bytes);
        sched_dep(s, sc, last, 1);
        last = sc;
    }
    if (r < 2 * rem) {
        int snd = sched_send(s, r - 1, tag_unfold, sbuf(R_RECV, 0), bytes);
        sched_dep(s, snd, last, 1);
    }
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    int n = a->nranks;
    if (n == 1)
        return 0;
    double bytes = (double)a->count * (double)a->esize;
    int p = floor_pow2(n), rounds = ilog2(p) + (n != p ? 2 : 0);
    return rounds * (c->alpha + bytes * c->beta + coll_hs(c, bytes)) +
           (ilog2(p) + (n != p)) * bytes * c->gamma;
}

const struct coll_algo coll_allreduce_rd = {
    .name = "rd",
    .kind = COLL_ALLREDUCE,
    .check = coll_any,
    .build = build,
    .cost = cost,
};
