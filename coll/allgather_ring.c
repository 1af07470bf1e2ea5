/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Allgather, ring.
 *
 * Idea: in step t (t = 0 .. n-2) rank r sends block r-t to its right
 * neighbour and receives block r-t-1 from its left one; the block it
 * forwards in step t+1 is the one it just received, so every block travels
 * once around the ring. Works for any n.
 *
 * Steps: n-1 sends and receives per rank. Bytes sent per rank: (n-1) *
 * count * esize (bandwidth optimal); latency (n-1) alpha, so it is for
 * large blocks. The send of step t+1 follows the receive of step t chunk by
 * chunk, so large blocks are pipelined around the ring.
 * No scratch. Out of place, step 0 sends straight from the send buffer and
 * the copy into block r of the receive buffer runs beside the ring (nothing
 * reads that block). In place the own block is already where it belongs.
 * Every block of the receive buffer is written once: no WAR hazard.
 */
#include "coll.h"

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks, r = a->rank;
    const size_t bc = a->count * a->esize;
    const struct sched_buf own = a->in_place ? sbuf(R_RECV, (size_t)r * bc) : sbuf(R_SEND, 0);
    if (!a->in_place)
        sched_copy(s, sbuf(R_RECV, (size_t)r * bc), sbuf(R_SEND, 0), bc);
    const int left = mod(r - 1, n), right = mod(r + 1, n);
    int prev_rcv = -1;
    for (int t = 0; t < n - 1; t++) {
        int sb = mod(r - t, n), rb = mod(r - t - 1, n);
        int snd =
            sched_send(s, right, (uint32_t)t, t == 0 ? own : sbuf(R_RECV, (size_t)sb * bc), bc);
        sched_dep(s, snd, prev_rcv, 1);
        prev_rcv = sched_recv(s, left, (uint32_t)t, sbuf(R_RECV, (size_t)rb * bc), bc);
    }
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    int n = a->nranks;
    double bc = (double)a->count * (double)a->esize;
    return (n - 1) * (c->alpha + bc * c->beta + coll_hs(c, bc));
}

const struct coll_algo coll_allgather_ring = {
    .name = "ring",
    .kind = COLL_ALLGATHER,
    .check = coll_any,
    .build = build,
    .cost = cost,
};
