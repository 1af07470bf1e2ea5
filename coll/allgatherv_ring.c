/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Allgatherv, ring.
 *
 * Idea: allgather's ring with blocks of their own sizes: in step t (t = 0
 * .. n-2) rank r sends block r-t to its right neighbour and receives block
 * r-t-1 from its left one, each block in its place in the receive buffer
 * (rdispls); the block it forwards in step t+1 is the one it just
 * received, chunk by chunk, so a large block is pipelined around the ring
 * while the others pass. A block of 0 elements sends nothing (every rank
 * knows every count). Works for any n and any counts.
 *
 * Steps: up to n-1 sends and receives per rank. The link into rank x
 * carries every block but x's: total - count_x elements; latency (n-1)
 * alpha: for large totals. No scratch; every block of the receive buffer
 * is written once.
 */
#include "coll.h"

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks, r = a->rank;
    const size_t es = a->esize;
    const size_t *cnt = a->rcounts, *dsp = a->rdispls;
#define BLK(b) sbuf(R_RECV, dsp[b] * es)
    const struct sched_buf own = a->in_place ? BLK(r) : sbuf(R_SEND, 0);
    if (!a->in_place && cnt[r])
        sched_copy(s, BLK(r), sbuf(R_SEND, 0), cnt[r] * es);
    const int left = mod(r - 1, n), right = mod(r + 1, n);
    int prev_rcv = -1;
    for (int t = 0; t < n - 1; t++) {
        int sb = mod(r - t, n), rb = mod(r - t - 1, n);
        if (cnt[sb]) {
            int snd = sched_send(s, right, (uint32_t)t, t == 0 ? own : BLK(sb), cnt[sb] * es);
            sched_dep(s, snd, prev_rcv, 1);
        }
        prev_rcv = cnt[rb] ? sched_recv(s, left, (uint32_t)t, BLK(rb), cnt[rb] * es) : -1;
    }
#undef BLK
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    const int n = a->nranks;
    if (n == 1)
        return 0;
    double total = 0, cmin = -1, cmax = 0, hs = 0;
    for (int i = 0; i < n; i++) {
        double b = (double)a->rcounts[i] * (double)a->esize;
        total += b;
        cmin = cmin < 0 || b < cmin ? b : cmin;
        cmax = b > cmax ? b : cmax;
        hs += coll_hs(c, b);
    }
    /* the busiest link carries all but the smallest block; the largest
     * block crosses n-1 links, pipelined in chunks where there are any */
    double pipe = c->chunk > 0 && c->chunk < cmax ? c->chunk : cmax;
    double bytes = total - cmin > cmax + (n - 2) * pipe ? total - cmin : cmax + (n - 2) * pipe;
    return (n - 1) * c->alpha + bytes * c->beta + hs * (n - 1) / n;
}

const struct coll_algo coll_allgatherv_ring = {
    .name = "ring",
    .kind = COLL_ALLGATHERV,
    .check = coll_any,
    .build = build,
    .cost = cost,
};
