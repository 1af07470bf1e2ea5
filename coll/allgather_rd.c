/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Allgather, recursive doubling.
 *
 * Idea: in round i every rank exchanges everything it has gathered so far
 * with the rank whose (virtual) number differs in bit i; the gathered
 * blocks always form one contiguous range of the receive buffer, which
 * doubles each round. log2(n) rounds for a power of two.
 *
 * Non-powers of two (n = p + rem, p the largest power of two <= n): the
 * 2*rem lowest ranks pair up; the even one gives its block to the odd one
 * (rank r+1) and takes no part in the doubling. The odd ones and the ranks
 * >= 2*rem run the doubling as p virtual ranks v; virtual rank v holds the
 * real blocks [start(v), start(v+1)) (two blocks for v < rem, one above),
 * so the range a group of virtual ranks holds is still contiguous, only of
 * uneven size. At the end each odd rank sends its even partner everything
 * but the partner's own block (two messages: the blocks below and above).
 *
 * Steps: log2(p) exchanges (+1 receive and 2 sends at the pairs).
 * Bytes sent per rank: (n-1) * count * esize in the doubling, plus n blocks
 * for the fold; latency log2(p) alpha (+3 at the pairs): for small blocks.
 * No scratch. Every region is written once; a send depends on every step
 * that wrote part of what it sends (chunked where the written range does
 * not start before the sent one, in full otherwise). Out of place the own
 * block is copied into place beside everything else and the first round
 * sends it from the send buffer.
 */
#include "coll.h"

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks, r = a->rank;
    const size_t bc = a->count * a->esize;
    const struct sched_buf own = a->in_place ? sbuf(R_RECV, (size_t)r * bc) : sbuf(R_SEND, 0);
    int cp = -1;
    if (!a->in_place)
        cp = sched_copy(s, sbuf(R_RECV, (size_t)r * bc), sbuf(R_SEND, 0), bc);
    if (n == 1)
        return s->build_err;
    const int p = floor_pow2(n), rem = n - p, rounds = ilog2(p);
    const uint32_t tag_lo = (uint32_t)rounds + 1, tag_hi = (uint32_t)rounds + 2;

    if (r < 2 * rem && r % 2 == 0) {
        sched_send(s, r + 1, 0, own, bc);
        sched_recv(s, r + 1, tag_lo, sbuf(R_RECV, 0), (size_t)r * bc);
        sched_recv(s, r + 1, tag_hi, sbuf(R_RECV, (size_t)(r + 1) * bc), (size_t)(n - r - 1) * bc);
        return s->build_err;
    }
    /* steps that wrote the range I hold, with where each started */
    int wr[40];
    size_t wat[40];
    int nwr = 0;
    if (cp >= 0) {
        wr[nwr] = cp;
        wat[nwr++] = (size_t)r * bc;
    }
    if (r < 2 * rem) {
        wr[nwr] = sched_recv(s, r - 1, 0, sbuf(R_RECV, (size_t)(r - 1) * bc), bc);
        wat[nwr++] = (size_t)(r - 1) * bc;
    }
    const int v = r < 2 * rem ? r / 2 : r - rem;
    for (int i = 0; i < rounds; i++) {
        int mask = 1 << i, partner = v ^ mask;
        int mylo = v & ~(mask - 1), plo = partner & ~(mask - 1);
        size_t at = (size_t)fold_start(mylo, rem) * bc;
        size_t len = (size_t)fold_start(mylo + mask, rem) * bc - at;
        size_t pat = (size_t)fold_start(plo, rem) * bc;
        size_t plen = (size_t)fold_start(plo + mask, rem) * bc - pat;
        int peer = fold_real(partner, rem);
        if (i == 0 && r >= 2 * rem && !a->in_place) {
            sched_send(s, peer, (uint32_t)i + 1, sbuf(R_SEND, 0), len);
        } else {
            int snd = sched_send(s, peer, (uint32_t)i + 1, sbuf(R_RECV, at), len);
            for (int j = 0; j < nwr; j++)
                sched_dep_at(s, snd, at, wr[j], wat[j]);
        }
        wr[nwr] = sched_recv(s, peer, (uint32_t)i + 1, sbuf(R_RECV, pat), plen);
        wat[nwr++] = pat;
    }
    if (r < 2 * rem) {
        size_t hat = (size_t)r * bc;
        int lo = sched_send(s, r - 1, tag_lo, sbuf(R_RECV, 0), (size_t)(r - 1) * bc);
        int hi = sched_send(s, r - 1, tag_hi, sbuf(R_RECV, hat), (size_t)(n - r) * bc);
        for (int j = 0; j < nwr; j++) {
            sched_dep_at(s, lo, 0, wr[j], wat[j]);
            sched_dep_at(s, hi, hat, wr[j], wat[j]);
        }
    }
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    int n = a->nranks;
    if (n == 1)
        return 0;
    double bc = (double)a->count * (double)a->esize;
    int p = floor_pow2(n);
    double t = ilog2(p) * c->alpha + (n - 1) * bc * c->beta;
    for (int k = 1; k < p; k *= 2) /* step k exchanges k ranks' blocks */
        t += coll_hs(c, (double)k * n / p * bc);
    if (n != p) /* fold in, and the result back out */
        t += 2 * c->alpha + n * bc * c->beta + coll_hs(c, bc) + coll_hs(c, n * bc);
    return t;
}

const struct coll_algo coll_allgather_rd = {
    .name = "rd",
    .kind = COLL_ALLGATHER,
    .check = coll_any,
    .build = build,
    .cost = cost,
};
