/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Broadcast, binomial tree.
 *
 * Idea: with ranks renumbered so the root is 0 (v = rank - root mod n), the
 * rank v receives from v minus its lowest set bit, then sends to v + 2^k for
 * every 2^k below that bit, largest first, so the data reaches the far half
 * of the tree early. ceil(log2 n) rounds.
 *
 * Steps: one receive (none at the root), up to log2(n) sends. Bytes sent by
 * the root: log2(n) * size; latency ceil(log2 n) alpha: best for small
 * messages. The engine's chunked dependencies let a rank forward chunk k
 * while chunk k+1 is still arriving, so large messages are pipelined down
 * the tree too. No scratch. The root's own recvbuf gets a copy (none in
 * place); the root sends from its send buffer, so the copy overlaps the
 * sends.
 */
#include "coll.h"

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks;
    const size_t bytes = a->count * a->esize;
    const int v = mod(a->rank - a->root, n);
    int src_region = R_RECV, have = -1;
    if (v == 0) {
        src_region = R_SEND;
        if (!a->in_place)
            sched_copy(s, sbuf(R_RECV, 0), sbuf(R_SEND, 0), bytes);
    }
    int mask = 1;
    while (mask < n) {
        if (v & mask) {
            int parent = mod(v - mask + a->root, n);
            have = sched_recv(s, parent, 0, sbuf(R_RECV, 0), bytes);
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1) {
        if (v + mask < n) {
            int child = mod(v + mask + a->root, n);
            int snd = sched_send(s, child, 0, sbuf(src_region, 0), bytes);
            sched_dep(s, snd, have, 1);
        }
    }
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    double bytes = (double)a->count * (double)a->esize;
    if (!(c->oversub > 1))
        return ceil_log2(a->nranks) * (c->alpha + bytes * c->beta + coll_hs1(c, bytes));
    /* ranks outnumber CPUs: a round's receivers share them (the first
     * rounds leave most ranks idle) */
    double t = 0;
    for (int mask = 1; mask < a->nranks; mask *= 2)
        t += c->alpha + coll_hs1(c, bytes) +
             bytes * c->beta * coll_share(c, a->nranks, binomial_receivers(a->nranks, mask));
    return t;
}

const struct coll_algo coll_bcast_binomial = {
    .name = "binomial",
    .kind = COLL_BCAST,
    .check = coll_any,
    .build = build,
    .cost = cost,
    .shares = 1,
};
