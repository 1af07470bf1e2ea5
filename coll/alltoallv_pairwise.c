/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Alltoallv, pairwise exchange.
 *
 * Idea: alltoall's pairwise exchange with a count per pair: n-1 steps; in
 * step t rank r sends scounts[to] elements from sdispls[to] and receives
 * rcounts[from] into rdispls[from], with to = from = r ^ t for a power of
 * two and to = r + t, from = r - t (mod n) otherwise. A direction whose
 * count is 0 sends nothing. Step t starts once step t-1's transfers have
 * completed, so a rank has one exchange in flight and no receiver is
 * flooded, whatever the skew. The own block is a local copy.
 *
 * Steps: up to n-1 sends and receives. Bytes: each rank's own; latency
 * (n-1) alpha. No scratch; no in-place form (the API refuses it).
 * Every rank knows only its own counts: the tuner's choice must not
 * depend on them, and this is the one alltoallv algorithm.
 */
#include "coll.h"

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks, r = a->rank;
    const size_t es = a->esize;
    const int pow2 = (n & (n - 1)) == 0;
    if (a->scounts[r])
        sched_copy(s, sbuf(R_RECV, a->rdispls[r] * es), sbuf(R_SEND, a->sdispls[r] * es),
                   a->scounts[r] * es);
    int ps = -1, pr = -1;
    for (int t = 1; t < n; t++) {
        const int to = pow2 ? r ^ t : mod(r + t, n);
        const int from = pow2 ? r ^ t : mod(r - t, n);
        int s1 = -1, r1 = -1;
        if (a->scounts[to]) {
            s1 = sched_send(s, to, (uint32_t)t, sbuf(R_SEND, a->sdispls[to] * es),
                            a->scounts[to] * es);
            sched_dep(s, s1, ps, 0);
            sched_dep(s, s1, pr, 0);
        }
        if (a->rcounts[from]) {
            r1 = sched_recv(s, from, (uint32_t)t, sbuf(R_RECV, a->rdispls[from] * es),
                            a->rcounts[from] * es);
            sched_dep(s, r1, ps, 0);
            sched_dep(s, r1, pr, 0);
        }
        if (s1 >= 0 || r1 >= 0) {
            ps = s1;
            pr = r1;
        }
    }
    return s->build_err;
}

/* From this rank's counts: each step costs its larger direction. */
static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    const int n = a->nranks, r = a->rank, pow2 = (n & (n - 1)) == 0;
    double t = 0;
    for (int k = 1; k < n; k++) {
        const int to = pow2 ? r ^ k : mod(r + k, n), from = pow2 ? r ^ k : mod(r - k, n);
        double sb = (double)a->scounts[to] * (double)a->esize;
        double rb = (double)a->rcounts[from] * (double)a->esize;
        double b = sb > rb ? sb : rb;
        t += c->alpha + b * c->beta + coll_hs(c, b);
    }
    return t;
}

const struct coll_algo coll_alltoallv_pairwise = {
    .name = "pairwise",
    .kind = COLL_ALLTOALLV,
    .check = coll_any,
    .build = build,
    .cost = cost,
};
