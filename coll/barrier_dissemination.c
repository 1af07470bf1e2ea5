/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Barrier, dissemination (Hensgen, Finkel and Manber).
 *
 * Idea: in round k (k = 0 .. ceil(log2 n) - 1) every rank signals rank
 * r + 2^k and waits for the signal of rank r - 2^k (mod n). After round k
 * a rank has heard, directly or through the chain, from the 2^(k+1) ranks
 * below it, so after ceil(log2 n) rounds it knows every rank has entered.
 * Works for any n: no pairing, no fold.
 *
 * Steps: ceil(log2 n) zero-byte signals and waits per rank. The signal of
 * round k+1 depends on the wait of round k and on the signal of round k,
 * hence on every earlier wait: that is what carries the knowledge (a
 * signal that followed only the latest wait could leave before an older
 * round's news arrived). Every wait is posted at once, so an early signal
 * finds its receive. Round k uses step tag k, so two rounds that hit the same peer
 * (n not a power of two) never match each other. No data, no scratch.
 */
#include "coll.h"

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks, r = a->rank;
    int prev_wait = -1, prev_sig = -1;
    for (int k = 0, dist = 1; dist < n; k++, dist <<= 1) {
        int sig = sched_signal(s, mod(r + dist, n), (uint32_t)k);
        sched_dep(s, sig, prev_wait, 0);
        sched_dep(s, sig, prev_sig, 0);
        prev_sig = sig;
        prev_wait = sched_wait_signal(s, mod(r - dist, n), (uint32_t)k);
    }
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    return ceil_log2(a->nranks) * c->alpha;
}

const struct coll_algo coll_barrier_dissemination = {
    .name = "dissemination",
    .kind = COLL_BARRIER,
    .check = coll_any,
    .build = build,
    .cost = cost,
};
