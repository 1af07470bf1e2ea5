/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Alltoall, pairwise exchange.
 *
 * Idea: n-1 steps; in step s each rank sends one block and receives one.
 * For a power of two the partner is rank ^ s (both directions, a perfect
 * matching each step); otherwise rank r sends block r+s to rank r+s and
 * receives block r-s from rank r-s (mod n). Step s starts once step s-1
 * has completed, so a rank has one exchange in flight and no receiver is
 * flooded. The own block is a local copy.
 *
 * Steps: n-1 sends and receives. Bytes sent per rank: (n-1) * count *
 * esize; latency (n-1) alpha: for large blocks (Bruck for small ones).
 * No scratch out of place; every step is independent of the buffers of the
 * others.
 * In place (one buffer): the block received in step s, block b = the
 * sender's rank, is also the block this rank sends to b, in step s_b (s_b
 * = s for xor, n-s otherwise). If that send is already done (s_b < s) the
 * receive goes straight into the buffer (after that send); otherwise it is
 * staged in scratch and copied in once the send has read the block. Xor
 * stages every step through two alternating slots; rank +- s stages the
 * steps s <= n/2, each in its own slot (they wait until step n-s): up to
 * n/2 blocks of scratch.
 */
#include <stdlib.h>

#include "coll.h"
#include "log.h"

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks, r = a->rank;
    const size_t bc = a->count * a->esize;
    const int pow2 = (n & (n - 1)) == 0, ip = a->in_place;
#define BLK(b) ((size_t)(b)*bc)
    if (!ip)
        sched_copy(s, sbuf(R_RECV, BLK(r)), sbuf(R_SEND, BLK(r)), bc);
    if (n == 1)
        return s->build_err;
    const int src = ip ? R_RECV : R_SEND;
    int *snd = NULL, *rcv = NULL;
    size_t xor_slot[2] = {0, 0}, stage = 0;
    if (ip) {
        snd = malloc((size_t)n * sizeof(int));
        rcv = malloc((size_t)n * sizeof(int));
        if (!snd || !rcv) {
            free(snd);
            free(rcv);
            return FC_ERR(FC_ERR_NO_MEMORY, "alltoall pairwise: out of memory for %d ranks", n);
        }
        if (pow2) {
            xor_slot[0] = sched_scratch(s, bc);
            xor_slot[1] = sched_scratch(s, bc);
        } else {
            stage = sched_scratch(s, (size_t)(n / 2) * bc); /* slot s-1 for step s */
        }
    }
    int ps = -1, pr = -1, copy2 = -1, copy1 = -1;
    for (int st = 1; st < n; st++) {
        int to = pow2 ? r ^ st : mod(r + st, n);
        int from = pow2 ? r ^ st : mod(r - st, n);
        int s1 = sched_send(s, to, (uint32_t)st, sbuf(src, BLK(to)), bc);
        sched_dep(s, s1, ps, 0);
        sched_dep(s, s1, pr, 0);
        if (!ip) {
            int r1 = sched_recv(s, from, (uint32_t)st, sbuf(R_RECV, BLK(from)), bc);
            sched_dep(s, r1, ps, 0);
            sched_dep(s, r1, pr, 0);
            ps = s1;
            pr = r1;
            continue;
        }
        snd[st] = s1;
        int sb = pow2 ? st : n - st; /* step whose send reads block `from` */
        struct sched_buf to_buf;
        if (sb < st)
            to_buf = sbuf(R_RECV, BLK(from));
        else if (pow2)
            to_buf = sbuf(R_SCRATCH, xor_slot[st % 2]);
        else
            to_buf = sbuf(R_SCRATCH, stage + BLK(st - 1));
        int r1 = sched_recv(s, from, (uint32_t)st, to_buf, bc);
        rcv[st] = r1;
        sched_dep(s, r1, ps, 0);
        sched_dep(s, r1, pr, 0);
        if (sb < st)
            sched_dep(s, r1, snd[sb], 1);
        if (pow2) {
            sched_dep(s, r1, copy2, 1); /* it read this slot */
            int cp = sched_copy(s, sbuf(R_RECV, BLK(from)), to_buf, bc);
            sched_dep(s, cp, r1, 1);
            sched_dep(s, cp, s1, 1);
            copy2 = copy1;
            copy1 = cp;
        } else if (2 * st >= n) {
            /* this step's send read block `to`; the receive of step n-st,
             * staged, is that block */
            int so = n - st;
            int cp = sched_copy(s, sbuf(R_RECV, BLK(to)), sbuf(R_SCRATCH, stage + BLK(so - 1)), bc);
            sched_dep(s, cp, rcv[so], 1);
            sched_dep(s, cp, s1, 1);
        }
        ps = s1;
        pr = r1;
    }
#undef BLK
    free(snd);
    free(rcv);
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    int n = a->nranks;
    double bc = (double)a->count * (double)a->esize;
    return (n - 1) * (c->alpha + bc * c->beta + coll_hs(c, bc));
}

const struct coll_algo coll_alltoall_pairwise = {
    .name = "pairwise",
    .kind = COLL_ALLTOALL,
    .check = coll_any,
    .build = build,
    .cost = cost,
};
