/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Allgatherv, Bruck et al. with blocks of their own sizes.
 *
 * Idea: as allgather_bruck, rank r keeps a scratch array tmp holding the
 * blocks of ranks r, r+1, ... (mod n) one after the other, each taking its
 * own count: tmp offset of the j-th is the sum of the counts before it. In
 * round k (dist = 2^k) it sends its first m = min(dist, n - dist) blocks
 * to rank r - dist in one message and receives the first m blocks of rank
 * r + dist, which are its blocks dist .. dist+m-1: both sides compute the
 * same length from the counts every rank shares. A round whose message is
 * empty (its blocks are all 0) sends nothing. After ceil(log2 n) rounds
 * the blocks are copied to their places (rdispls), runs of blocks that are
 * adjacent in both arrays in one copy.
 *
 * Steps: ceil(log2 n) sends and receives, one copy per run. Latency
 * ceil(log2 n) alpha: for small totals at any n; with skewed counts a large
 * block travels in several rounds' messages, so rings take over sooner.
 * Scratch: the total. Sends read tmp from its start, so they wait for the
 * own block's copy and the receives before them (chunked where ranges
 * allow); receives write disjoint ranges; the final copies wait for what
 * they read. In place the own block is not copied back.
 */
#include <stdlib.h>

#include "coll.h"
#include "log.h"

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks, r = a->rank;
    const size_t es = a->esize;
    const size_t *cnt = a->rcounts, *dsp = a->rdispls;
    if (!a->in_place && cnt[r])
        sched_copy(s, sbuf(R_RECV, dsp[r] * es), sbuf(R_SEND, 0), cnt[r] * es);
    if (n == 1)
        return s->build_err;
    /* off[j]: tmp offset of block r+j; off[n]: the total */
    size_t *off = malloc(sizeof(size_t) * ((size_t)n + 1));
    if (!off)
        return s->build_err = FC_ERR(FC_ERR_NO_MEMORY, "allgatherv bruck: out of memory");
    off[0] = 0;
    for (int j = 0; j < n; j++)
        off[j + 1] = off[j] + cnt[mod(r + j, n)] * es;
    const size_t tmp = sched_scratch(s, off[n]);
    const struct sched_buf own = a->in_place ? sbuf(R_RECV, dsp[r] * es) : sbuf(R_SEND, 0);
    int wr[40];
    size_t wat[40];
    int nwr = 0;
    if (cnt[r]) {
        wr[nwr] = sched_copy(s, sbuf(R_SCRATCH, tmp), own, cnt[r] * es);
        wat[nwr++] = 0;
    }
    for (int k = 0, dist = 1; dist < n; k++, dist <<= 1) {
        const int m = dist < n - dist ? dist : n - dist;
        const size_t out = off[m]; /* our first m blocks */
        size_t in = 0;             /* rank r+dist's first m: our blocks dist .. dist+m-1 */
        for (int j = 0; j < m; j++)
            in += cnt[mod(r + dist + j, n)] * es;
        if (out) {
            int snd = sched_send(s, mod(r - dist, n), (uint32_t)k, sbuf(R_SCRATCH, tmp), out);
            for (int j = 0; j < nwr; j++)
                sched_dep_at(s, snd, 0, wr[j], wat[j]);
        }
        if (in) {
            wr[nwr] =
                sched_recv(s, mod(r + dist, n), (uint32_t)k, sbuf(R_SCRATCH, tmp + off[dist]), in);
            wat[nwr++] = off[dist];
        }
    }
    /* blocks 1 .. n-1 of tmp to their places, adjacent runs at once */
    for (int j = 1; j < n;) {
        int b = mod(r + j, n);
        if (!cnt[b]) {
            j++;
            continue;
        }
        int e = j + 1;
        size_t end = (dsp[b] + cnt[b]) * es;
        while (e < n) {
            int nb = mod(r + e, n);
            if (cnt[nb] && dsp[nb] * es != end)
                break;
            end += cnt[nb] * es;
            e++;
        }
        int cp = sched_copy(s, sbuf(R_RECV, dsp[b] * es), sbuf(R_SCRATCH, tmp + off[j]),
                            off[e] - off[j]);
        for (int w = 0; w < nwr; w++)
            sched_dep_at(s, cp, off[j], wr[w], wat[w]);
        j = e;
    }
    free(off);
    return s->build_err;
}

/* The largest message of the round at distance dist: the most bytes m
 * consecutive blocks (cyclically) hold, from prefix sums p[0 .. n]. */
static double round_max(const double *p, int n, int m)
{
    double best = 0;
    for (int i = 0; i < n; i++) {
        int e = i + m;
        double v = e <= n ? p[e] - p[i] : p[n] - p[i] + p[e - n];
        best = v > best ? v : best;
    }
    return best;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    const int n = a->nranks;
    if (n == 1)
        return 0;
    double *p = malloc(sizeof(double) * ((size_t)n + 1));
    if (!p)
        return 1e30;
    p[0] = 0;
    for (int i = 0; i < n; i++)
        p[i + 1] = p[i] + (double)a->rcounts[i] * (double)a->esize;
    double t = p[n] * c->gamma; /* the copies out of tmp: a local pass */
    for (int dist = 1; dist < n; dist <<= 1) {
        double b = round_max(p, n, dist < n - dist ? dist : n - dist);
        t += c->alpha + b * c->beta + coll_hs(c, b);
    }
    free(p);
    return t;
}

const struct coll_algo coll_allgatherv_bruck = {
    .name = "bruck",
    .kind = COLL_ALLGATHERV,
    .check = coll_any,
    .build = build,
    .cost = cost,
};
