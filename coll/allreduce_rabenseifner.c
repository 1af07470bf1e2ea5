/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * AllReduce, Rabenseifner: reduce-scatter by recursive halving, then
 * allgather by recursive doubling.
 *
 * Idea: among p (a power of two) ranks, with the vector cut into p blocks:
 * in halving round i (mask = p/2 .. 1) a rank and its partner v ^ mask
 * split the block range they share, each sends the half the other keeps
 * and adds the half it receives to its own; after log2(p) rounds virtual
 * rank v holds the total of block v. Then the doubling rounds (mask =
 * 1 .. p/2) exchange the totals back, the ranges growing the way they
 * shrank.
 *
 * Non-powers of two (n = p + rem, p the largest power of two <= n), as in
 * allreduce_rd: the 2*rem lowest ranks pair up, the even one sends its
 * whole vector to the odd one, which adds it (even's data on the left) and
 * takes part as virtual rank r/2; the ranks >= 2*rem are virtual r - rem.
 * At the end each odd rank sends the result back to its even partner.
 *
 * Steps: 2 log2(p) exchanges (+2 at the pairs). Bytes sent per rank:
 * 2 (p-1)/p of the vector (+ the vector twice at the pairs); latency
 * 2 log2(p) alpha: between recursive doubling (small) and the ring (large).
 * Each block's total is computed by exactly one rank (its owner), always
 * with the lower virtual rank's partial sum as the left operand, and only
 * copied from there: all ranks get bit-identical results.
 * Scratch: one slot per halving round for the half received (n/2, n/4, ...
 * blocks: less than one vector), plus a vector at the odd pair ranks for
 * the fold. Partial sums go into the receive buffer; out of place the first
 * round reads the send buffer, which is never written. The doubling's
 * receive into a range waits for the halving send that read that range
 * (in place, or after the first round; out of place the first round's
 * send read the send buffer, and waiting for it would only post the
 * receive late). FC_AVG: the owner scales its block once,
 * before the doubling.
 */
#include "coll.h"

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks, r = a->rank;
    const size_t es = a->esize, cnt = a->count, bytes = cnt * es;
    const int src_region = a->in_place ? R_RECV : R_SEND;
    if (n == 1) {
        if (!a->in_place)
            sched_copy(s, sbuf(R_RECV, 0), sbuf(R_SEND, 0), bytes);
        return s->build_err;
    }
    const int p = floor_pow2(n), rem = n - p, rounds = ilog2(p);
    const uint32_t tag_unfold = 2 * (uint32_t)rounds + 1;
#define BOFF(b) (blk_first(cnt, p, (b)) * es)
    if (r < 2 * rem && r % 2 == 0) {
        int snd = sched_send(s, r + 1, 0, sbuf(src_region, 0), bytes);
        int rcv = sched_recv(s, r + 1, tag_unfold, sbuf(R_RECV, 0), bytes);
        if (a->in_place)
            sched_dep(s, rcv, snd, 1); /* the send reads what it overwrites */
        return s->build_err;
    }
    int cur = src_region; /* where my partial sums are */
    int prev = -1;        /* the step that wrote them */
    size_t prev_at = 0;   /* from where */
    if (r < 2 * rem) {
        size_t fold = sched_scratch(s, bytes);
        int rcv = sched_recv(s, r - 1, 0, sbuf(R_SCRATCH, fold), bytes);
        prev = sched_reduce(s, sbuf(R_RECV, 0), sbuf(R_SCRATCH, fold), sbuf(src_region, 0), bytes);
        sched_dep(s, prev, rcv, 1);
        cur = R_RECV;
    }
    const int v = r < 2 * rem ? r / 2 : r - rem;
    int hsend[32];
    int hsend_region[32]; /* what each halving send read */
    int lo = 0, hi = p;
    for (int i = 0, mask = p / 2; mask > 0; i++, mask /= 2) {
        int partner = v ^ mask, mid = lo + mask, lower = v < partner;
        int klo = lower ? lo : mid, khi = lower ? mid : hi;
        int slo = lower ? mid : lo, shi = lower ? hi : mid;
        size_t kat = BOFF(klo), klen = BOFF(khi) - kat;
        size_t sat = BOFF(slo), slen = BOFF(shi) - sat;
        int peer = fold_real(partner, rem);
        uint32_t tag = (uint32_t)i + 1;
        hsend[i] = sched_send(s, peer, tag, sbuf(cur, sat), slen);
        hsend_region[i] = cur;
        sched_dep_at(s, hsend[i], sat, prev, prev_at);
        size_t slot = sched_scratch(s, klen);
        int rcv = sched_recv(s, peer, tag, sbuf(R_SCRATCH, slot), klen);
        struct sched_buf mine = sbuf(cur, kat), theirs = sbuf(R_SCRATCH, slot);
        int red =
            sched_reduce(s, sbuf(R_RECV, kat), lower ? mine : theirs, lower ? theirs : mine, klen);
        sched_dep(s, red, rcv, 1);
        sched_dep_at(s, red, kat, prev, prev_at);
        prev = red;
        prev_at = kat;
        cur = R_RECV;
        lo = klo;
        hi = khi;
    }
    /* I own block v, written by prev */
    if (a->op == FC_AVG) {
        int sc = sched_scale(s, sbuf(R_RECV, BOFF(v)), BOFF(v + 1) - BOFF(v));
        sched_dep(s, sc, prev, 1);
        prev = sc;
    }
    int wr[40];
    size_t wat[40];
    int nwr = 0;
    wr[nwr] = prev;
    wat[nwr++] = BOFF(v);
    for (int j = 0, mask = 1; mask < p; j++, mask *= 2) {
        int partner = v ^ mask;
        int mylo = v & ~(mask - 1), plo = partner & ~(mask - 1);
        size_t at = BOFF(mylo), len = BOFF(mylo + mask) - at;
        size_t pat = BOFF(plo), plen = BOFF(plo + mask) - pat;
        int peer = fold_real(partner, rem);
        uint32_t tag = (uint32_t)(rounds + j + 1);
        int snd = sched_send(s, peer, tag, sbuf(R_RECV, at), len);
        for (int k = 0; k < nwr; k++)
            sched_dep_at(s, snd, at, wr[k], wat[k]);
        int rcv = sched_recv(s, peer, tag, sbuf(R_RECV, pat), plen);
        /* the halving round with this mask sent exactly this range (out
         * of place the first one read the send buffer: no hazard) */
        if (hsend_region[rounds - 1 - j] == R_RECV)
            sched_dep(s, rcv, hsend[rounds - 1 - j], 1);
        wr[nwr] = rcv;
        wat[nwr++] = pat;
    }
    if (r < 2 * rem) {
        int snd = sched_send(s, r - 1, tag_unfold, sbuf(R_RECV, 0), bytes);
        for (int k = 0; k < nwr; k++)
            sched_dep(s, snd, wr[k], 1);
    }
#undef BOFF
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    int n = a->nranks;
    if (n == 1)
        return 0;
    double bytes = (double)a->count * (double)a->esize;
    int p = floor_pow2(n);
    double part = (double)(p - 1) / p * bytes;
    double t = 2 * ilog2(p) * c->alpha + 2 * part * c->beta + part * c->gamma;
    for (int k = 2; k <= p; k *= 2) /* halves, quarters ... both ways */
        t += 2 * coll_hs(c, bytes / k);
    if (n != p)
        t += 2 * (c->alpha + bytes * c->beta + coll_hs(c, bytes)) + bytes * c->gamma;
    return t;
}

const struct coll_algo coll_allreduce_rabenseifner = {
    .name = "rabenseifner",
    .kind = COLL_ALLREDUCE,
    .check = coll_any,
    .build = build,
    .cost = cost,
};
