/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Allgather, Bruck et al.
 *
 * Idea: each rank keeps a scratch array tmp of n blocks, tmp[j] = block of
 * rank r+j (mod n). It starts with tmp[0] = its own block. In round k
 * (dist = 2^k) it sends tmp[0 .. cnt) to rank r - dist and receives
 * tmp[dist .. dist+cnt) from rank r + dist, cnt = min(dist, n - dist): the
 * sender's tmp[j] is block r+dist+j, exactly the receiver's tmp[dist+j].
 * After ceil(log2 n) rounds tmp is full; two copies rotate it into the
 * receive buffer (tmp[0 .. n-r) -> blocks r .. n-1, the rest -> 0 .. r-1).
 * Works for any n: the last round just sends fewer blocks.
 *
 * Steps: ceil(log2 n) sends and receives, three local copies.
 * Bytes sent per rank: (n-1) * count * esize; latency ceil(log2 n) alpha:
 * the allgather for small blocks at any n. Scratch: n blocks.
 * A send reads tmp from its start, so it depends chunked on the copy of the
 * own block and the receives before it (they write at or after its
 * start); receives write disjoint, never yet read ranges. The rotation
 * copies wait for what they read. In place the first rotation copy
 * overwrites block r with itself after the first copy has read it (an
 * explicit dependency).
 */
#include "coll.h"

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks, r = a->rank;
    const size_t bc = a->count * a->esize;
    const struct sched_buf own = a->in_place ? sbuf(R_RECV, (size_t)r * bc) : sbuf(R_SEND, 0);
    if (n == 1) {
        if (!a->in_place)
            sched_copy(s, sbuf(R_RECV, 0), sbuf(R_SEND, 0), bc);
        return s->build_err;
    }
    const size_t tmp = sched_scratch(s, (size_t)n * bc);
    int wr[40];
    size_t wat[40];
    int nwr = 0;
    wr[nwr] = sched_copy(s, sbuf(R_SCRATCH, tmp), own, bc);
    wat[nwr++] = 0;
    for (int k = 0, dist = 1; dist < n; k++, dist <<= 1) {
        int cnt = dist < n - dist ? dist : n - dist;
        int snd =
            sched_send(s, mod(r - dist, n), (uint32_t)k, sbuf(R_SCRATCH, tmp), (size_t)cnt * bc);
        for (int j = 0; j < nwr; j++)
            sched_dep_at(s, snd, 0, wr[j], wat[j]);
        wr[nwr] = sched_recv(s, mod(r + dist, n), (uint32_t)k,
                             sbuf(R_SCRATCH, tmp + (size_t)dist * bc), (size_t)cnt * bc);
        wat[nwr++] = (size_t)dist * bc;
    }
    size_t split = (size_t)(n - r) * bc;
    int hi = sched_copy(s, sbuf(R_RECV, (size_t)r * bc), sbuf(R_SCRATCH, tmp), split);
    int lo = sched_copy(s, sbuf(R_RECV, 0), sbuf(R_SCRATCH, tmp + split), (size_t)r * bc);
    for (int j = 0; j < nwr; j++) {
        sched_dep_at(s, hi, 0, wr[j], wat[j]);
        sched_dep_at(s, lo, split, wr[j], wat[j]);
    }
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    int n = a->nranks;
    if (n == 1)
        return 0;
    double bc = (double)a->count * (double)a->esize;
    /* the rotation is a local pass over the result: counted like gamma */
    return ceil_log2(n) * c->alpha + coll_hs_bruck(c, n, bc) + (n - 1) * bc * c->beta +
           n * bc * c->gamma;
}

const struct coll_algo coll_allgather_bruck = {
    .name = "bruck",
    .kind = COLL_ALLGATHER,
    .check = coll_any,
    .build = build,
    .cost = cost,
};
