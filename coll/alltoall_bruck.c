/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Alltoall, Bruck et al. (index algorithm), for small blocks.
 *
 * Idea: number rank r's outgoing blocks by distance, index i = the block
 * for rank r - i (mod n). In phase k (dist = 2^k, k < ceil(log2 n)) every
 * rank sends all blocks whose index has bit k set to rank r - dist, as one
 * message, and receives the same indices from rank r + dist, which replace
 * its own. A block with index i thus moves down by i in total and ends at
 * its destination; there index i holds the block from rank r + i, copied
 * to block (r + i) mod n of the receive buffer. Works for any n.
 *
 * Steps: ceil(log2 n) messages (instead of n-1) of about n/2 blocks each:
 * latency ceil(log2 n) alpha, bytes ceil(log2 n) n/2 * count * esize: it
 * wins when alpha dominates.
 * Packing: the blocks of a phase are not contiguous, so they are copied
 * into a pack buffer first (one copy per contiguous run). Received blocks
 * are not unpacked: each index records where its block now is (the user's
 * buffer, or position j of phase h's receive buffer), and later packs and
 * the final copies read from there. Both sides pack in increasing index
 * order (rank-independent, so they agree on the layout); a run of indices
 * whose blocks lie one after the other is one copy. Phase k takes runs of
 * up to 2^k indices, split by where their blocks lie: about 2n copies in
 * all (n/2 in phase 0, where every block leaves the user's buffer alone:
 * inherent with contiguous copies), and ceil(log2 n) + 2 final copies,
 * since the indices in [2^h, 2^(h+1)) end up at the start of phase h's
 * receive buffer, in order.
 * Scratch: one pack buffer (the largest phase; a pack waits for the
 * previous phase's send) plus every phase's receive buffer, about
 * (log2(n)/2 + 1/2) n blocks. In place (one buffer) the final copies wait
 * for a fence over everything, since packs read the input to the end.
 */
#include <stdlib.h>

#include "coll.h"
#include "log.h"

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks, r = a->rank;
    const size_t bc = a->count * a->esize;
    const int src = a->in_place ? R_RECV : R_SEND;
#define BLK(b) ((size_t)(b)*bc)
    if (n == 1) {
        if (!a->in_place)
            sched_copy(s, sbuf(R_RECV, 0), sbuf(R_SEND, 0), bc);
        return s->build_err;
    }
    const int phases = ceil_log2(n);
    int *sid = malloc((size_t)n * sizeof(int));
    size_t *pos = malloc((size_t)n * sizeof(size_t));
    if (!sid || !pos) {
        free(sid);
        free(pos);
        return FC_ERR(FC_ERR_NO_MEMORY, "alltoall bruck: out of memory for %d ranks", n);
    }
    for (int i = 0; i < n; i++) {
        sid[i] = 0;
        pos[i] = (size_t)i;
    }
    int rcv[32];
    size_t rbuf[32];
    /* region and offset of index i's block now, and the step that put it there */
#define REG(i) (sid[i] ? R_SCRATCH : src)
#define OFF(i) (sid[i] ? rbuf[sid[i] - 1] + pos[i] * bc : BLK(mod(r - (i), n)))
#define PROD(i) (sid[i] ? rcv[sid[i] - 1] : -1)
#define PAT(i) (sid[i] ? rbuf[sid[i] - 1] : 0)
    size_t maxcnt = 0;
    for (int k = 0; k < phases; k++) {
        size_t c = 0;
        for (int i = 0; i < n; i++)
            c += (size_t)((i >> k) & 1);
        maxcnt = c > maxcnt ? c : maxcnt;
    }
    const size_t pk = sched_scratch(s, maxcnt * bc);
    int prev_snd = -1;
    for (int k = 0; k < phases; k++) {
        int dist = 1 << k, cnt = 0;
        int first_copy = (int)s->nsteps, ncopy = 0;
        /* pack the indices with bit k set, in increasing order */
        for (int i0 = dist, i1; i0 < n; i0 = i1) {
            for (i1 = i0 + 1; i1 < n && (i1 & dist); i1++)
                if (sid[i1] != sid[i1 - 1] || OFF(i1) != OFF(i1 - 1) + bc)
                    break;
            int cp =
                sched_copy(s, sbuf(R_SCRATCH, pk + BLK(cnt)), sbuf(REG(i0), OFF(i0)), BLK(i1 - i0));
            sched_dep_at(s, cp, pk + BLK(cnt), prev_snd, pk); /* that send reads the pack buffer */
            sched_dep_at(s, cp, OFF(i0), PROD(i0), PAT(i0));
            ncopy++;
            cnt += i1 - i0;
            if (i1 < n && !(i1 & dist)) /* skip to the next index with bit k set */
                i1 = (i1 | (dist - 1)) + 1;
        }
        int snd = sched_send(s, mod(r - dist, n), (uint32_t)k, sbuf(R_SCRATCH, pk), BLK(cnt));
        for (int c = 0; c < ncopy; c++)
            sched_dep(s, snd, first_copy + c, 1); /* each wrote at or after the start */
        rbuf[k] = sched_scratch(s, BLK(cnt));
        rcv[k] = sched_recv(s, mod(r + dist, n), (uint32_t)k, sbuf(R_SCRATCH, rbuf[k]), BLK(cnt));
        for (int i = dist, j = 0; i < n; i++)
            if (i & dist) {
                sid[i] = k + 1;
                pos[i] = (size_t)j++;
            }
        prev_snd = snd;
    }
    /* index i -> block (r + i) mod n; in place the packs read the input
     * until the last phase, and index 0 is already in place */
    int fence = a->in_place ? sched_fence(s, 0) : -1;
    for (int i0 = a->in_place ? 1 : 0, i1; i0 < n; i0 = i1) {
        for (i1 = i0 + 1; i1 < n; i1++)
            if (mod(r + i1, n) == 0 || sid[i1] != sid[i1 - 1] || OFF(i1) != OFF(i1 - 1) + bc)
                break;
        size_t dat = BLK(mod(r + i0, n));
        int cp = sched_copy(s, sbuf(R_RECV, dat), sbuf(REG(i0), OFF(i0)), BLK(i1 - i0));
        sched_dep(s, cp, fence, 0);
        sched_dep_at(s, cp, OFF(i0), PROD(i0), PAT(i0)); /* a run has one source */
    }
#undef BLK
#undef REG
#undef OFF
#undef PROD
#undef PAT
    free(sid);
    free(pos);
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    int n = a->nranks;
    if (n == 1)
        return 0;
    double bc = (double)a->count * (double)a->esize, half = (double)(n / 2) * bc;
    /* each phase: pack, send about n/2 blocks; the copies are local passes */
    return ceil_log2(n) * (c->alpha + coll_hs(c, half) + half * c->beta + half * c->gamma) +
           n * bc * c->gamma;
}

const struct coll_algo coll_alltoall_bruck = {
    .name = "bruck",
    .kind = COLL_ALLTOALL,
    .check = coll_any,
    .build = build,
    .cost = cost,
};
