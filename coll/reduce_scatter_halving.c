/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reduce-scatter, recursive halving.
 *
 * Idea: in round i (mask = p/2, p/4, ..., 1) a rank and its partner
 * v ^ mask split the range of blocks they are both responsible for in two;
 * each sends the half the other keeps and adds the half it receives to its
 * own. After log2(p) rounds virtual rank v holds the total of its own
 * blocks.
 *
 * Non-powers of two (n = p + rem, p the largest power of two <= n): the
 * 2*rem lowest ranks pair up first; the even one sends its whole input to
 * the odd one (r+1), which adds it to its own. The odd ones and the ranks
 * >= 2*rem are the p virtual ranks; virtual rank v is responsible for the
 * real blocks [start(v), start(v+1)) (blocks 2v and 2v+1 for v < rem, block
 * v+rem above), so every range halved is contiguous, just uneven. At the
 * end the odd rank sends block r-1's total back to its even partner.
 *
 * Steps: log2(p) exchanges and reductions (+2 messages at the pairs).
 * Bytes sent per rank: (1 - 1/p) of the input (+ all of it, and one block,
 * at the pairs); latency log2(p) alpha: for small and medium messages.
 * Scratch: one slot per round for the half received, the partial sums of a
 * round stay in that slot (dst == b) and the next round sends and reduces
 * from it, so nothing in scratch is written twice; the folding rank needs
 * one more input-sized buffer. The send buffer is only read; in place the
 * final reduction writes block r of it, which only that reduction (or, at
 * p = 2, the same one) reads, and the folded-out even rank receives its
 * block only after its send of the whole input is done. The lower virtual
 * rank's data is always the left operand. FC_AVG: each owner scales its
 * block once, before it is sent back to a folded rank.
 */
#include "coll.h"

/* Where the partial sums live: byte x of the full vector is at region
 * `reg`, offset off + x - lo. */
struct loc {
    int reg;
    size_t off, lo;
};
static struct sched_buf at_loc(struct loc l, size_t x)
{
    return sbuf(l.reg, l.off + x - l.lo);
}

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks, r = a->rank;
    const size_t bc = a->count * a->esize;
    const int avg = a->op == FC_AVG;
    if (n == 1) {
        int last = -1;
        if (!a->in_place)
            last = sched_copy(s, sbuf(R_RECV, 0), sbuf(R_SEND, 0), bc);
        if (avg)
            sched_dep(s, sched_scale(s, sbuf(R_RECV, 0), bc), last, 1);
        return s->build_err;
    }
    const int p = floor_pow2(n), rem = n - p, rounds = ilog2(p);
    const uint32_t tag_unfold = (uint32_t)rounds + 1;
    if (r < 2 * rem && r % 2 == 0) {
        int snd = sched_send(s, r + 1, 0, sbuf(R_SEND, 0), (size_t)n * bc);
        int rcv = sched_recv(s, r + 1, tag_unfold, sbuf(R_RECV, 0), bc);
        if (a->in_place) /* it overwrites block r of what is sent */
            sched_dep(s, rcv, snd, 0);
        return s->build_err;
    }
    struct loc cur = {R_SEND, 0, 0};
    int prev = -1;      /* step that wrote cur */
    size_t prev_at = 0; /* where it started writing, in vector bytes */
    if (r < 2 * rem) {
        size_t fb = sched_scratch(s, (size_t)n * bc);
        int rcv = sched_recv(s, r - 1, 0, sbuf(R_SCRATCH, fb), (size_t)n * bc);
        prev = sched_reduce(s, sbuf(R_SCRATCH, fb), sbuf(R_SCRATCH, fb), sbuf(R_SEND, 0),
                            (size_t)n * bc);
        sched_dep(s, prev, rcv, 1);
        cur = (struct loc){R_SCRATCH, fb, 0};
    }
    const int v = r < 2 * rem ? r / 2 : r - rem;
    int lo = 0, hi = p; /* virtual ranks whose blocks I am responsible for */
    for (int i = 0, mask = p / 2; mask > 0; i++, mask /= 2) {
        int partner = v ^ mask, mid = lo + mask;
        int klo = v < mid ? lo : mid, khi = v < mid ? mid : hi;
        int slo = v < mid ? mid : lo, shi = v < mid ? hi : mid;
        size_t kat = (size_t)fold_start(klo, rem) * bc, klen = (size_t)fold_start(khi, rem) * bc - kat;
        size_t sat = (size_t)fold_start(slo, rem) * bc, slen = (size_t)fold_start(shi, rem) * bc - sat;
        int peer = fold_real(partner, rem);
        uint32_t tag = (uint32_t)i + 1;
        int snd = sched_send(s, peer, tag, at_loc(cur, sat), slen);
        sched_dep_at(s, snd, sat, prev, prev_at);
        size_t slot = sched_scratch(s, klen);
        struct sched_buf in = sbuf(R_SCRATCH, slot);
        int rcv = sched_recv(s, peer, tag, in, klen);
        int lower = v < partner;
        if (mask > 1) {
            struct sched_buf mine = at_loc(cur, kat);
            int red = sched_reduce(s, in, lower ? mine : in, lower ? in : mine, klen);
            sched_dep(s, red, rcv, 1);
            sched_dep_at(s, red, kat, prev, prev_at);
            cur = (struct loc){R_SCRATCH, slot, kat};
            prev = red;
            prev_at = kat;
            lo = klo;
            hi = khi;
            continue;
        }
        /* last round: what I keep is my own block (or, folding, blocks r-1 and r) */
        size_t mine_at = (size_t)r * bc, off = mine_at - kat;
        if (r < 2 * rem) {
            struct sched_buf e = at_loc(cur, kat);
            int red = sched_reduce(s, in, lower ? e : in, lower ? in : e, bc);
            sched_dep(s, red, rcv, 1);
            sched_dep_at(s, red, kat, prev, prev_at);
            if (avg) {
                int sc = sched_scale(s, in, bc);
                sched_dep(s, sc, red, 1);
                red = sc;
            }
            int back = sched_send(s, r - 1, tag_unfold, in, bc);
            sched_dep(s, back, red, 1);
        }
        struct sched_buf m = at_loc(cur, mine_at), t = sbuf(R_SCRATCH, slot + off);
        int red = sched_reduce(s, sbuf(R_RECV, 0), lower ? m : t, lower ? t : m, bc);
        sched_dep(s, red, rcv, off == 0);
        sched_dep_at(s, red, mine_at, prev, prev_at);
        if (avg)
            sched_dep(s, sched_scale(s, sbuf(R_RECV, 0), bc), red, 1);
    }
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    int n = a->nranks;
    if (n == 1)
        return 0;
    double bytes = (double)n * (double)a->count * (double)a->esize;
    int p = floor_pow2(n);
    double t = ilog2(p) * c->alpha + (1.0 - 1.0 / p) * bytes * (c->beta + c->gamma);
    for (int k = 2; k <= p; k *= 2) /* halves, quarters ... */
        t += coll_hs(c, bytes / k);
    if (n != p) /* the whole input in, one block back */
        t += 2 * c->alpha + bytes * (c->beta + c->gamma) + bytes / n * c->beta +
             coll_hs(c, bytes) + coll_hs(c, bytes / n);
    return t;
}

const struct coll_algo coll_reduce_scatter_halving = {
    .name = "halving",
    .kind = COLL_REDUCE_SCATTER,
    .check = coll_any,
    .build = build,
    .cost = cost,
};
