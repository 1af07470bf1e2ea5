/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Broadcast, pipelined chain.
 *
 * Idea: ranks form a chain starting at the root (v = rank - root mod n);
 * each rank receives from v-1 and forwards to v+1. The engine cuts the
 * message into chunks and forwards chunk k as soon as it has arrived, so
 * after the pipeline fills every link carries data at once.
 *
 * Steps: one receive and one send per rank. Bytes sent per rank: size.
 * Time ~ (n - 1) * (alpha + chunk * beta) + (chunks - 1) * chunk * beta: for large messages
 * close to size * beta whatever n is; for small ones the n-1 hops of latency
 * make the binomial tree better. No scratch; root copy as in binomial.
 */
#include <math.h>

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
    } else {
        have = sched_recv(s, mod(a->rank - 1, n), 0, sbuf(R_RECV, 0), bytes);
    }
    if (v + 1 < n) {
        int snd = sched_send(s, mod(a->rank + 1, n), 0, sbuf(src_region, 0), bytes);
        sched_dep(s, snd, have, 1);
    }
    return s->build_err;
}

/* Pipeline model: the engine's chunks flow down the chain, one hop per
 * chunk time once the pipe is full. */
static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    int n = a->nranks;
    if (n == 1)
        return 0;
    double bytes = (double)a->count * (double)a->esize;
    double chunk = c->chunk > 0 && c->chunk < bytes ? c->chunk : bytes;
    double nchunks = chunk > 0 ? ceil(bytes / chunk) : 1;
    /* the first chunk crosses n-1 hops; each later one leaves the root a
     * chunk's wire time after the previous (latency overlaps: several
     * chunks are in flight) */
    /* ranks outnumbering CPUs: once the pipe is full all n-1 receivers
     * copy at once and share them */
    return (n - 1) * (c->alpha + chunk * c->beta + coll_hs1(c, chunk)) +
           (nchunks - 1) * chunk * c->beta * coll_share(c, n, n - 1);
}

const struct coll_algo coll_bcast_chain = {
    .name = "chain",
    .kind = COLL_BCAST,
    .check = coll_any,
    .build = build,
    .cost = cost,
    .shares = 1,
};
