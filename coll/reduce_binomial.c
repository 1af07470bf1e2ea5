/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reduce, binomial tree.
 *
 * Idea: with ranks renumbered so the root is 0 (v = rank - root mod n),
 * rank v receives the partial results of its children v + 1, v + 2, v + 4,
 * ... (every 2^k below the lowest set bit of v, and below n), adds each to
 * its own, then sends the sum to its parent v minus its lowest set bit.
 * ceil(log2 n) rounds; any n (the tree is just cut at n).
 *
 * Steps: up to log2(n) receives and reductions, one send (none at the
 * root). Bytes sent per rank: size; latency ceil(log2 n) (alpha + size beta
 * + size gamma): best for small messages. Chunked dependencies pipeline a
 * long vector up the tree (the parent's reduction of chunk k follows the
 * arrival of chunk k).
 * Scratch: two receive slots, alternating (the receive from the third child
 * waits for the reduction that read the first one's slot), plus, at
 * non-roots with children, one vector for the partial sum: a non-root's
 * receive buffer is NULL and its send buffer must not be written. The root
 * accumulates in its receive buffer; the first reduction reads the input
 * directly, so no initial copy. Leaves send straight from the send buffer.
 * FC_AVG: the root scales the total once at the end.
 */
#include "coll.h"

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks;
    const size_t bytes = a->count * a->esize;
    const int v = mod(a->rank - a->root, n), is_root = v == 0;
    const int src = is_root && a->in_place ? R_RECV : R_SEND;
    int nchild = 0, m = 1;
    while (m < n && !(v & m)) {
        if (v + m < n)
            nchild++;
        m <<= 1;
    }
    /* m: the lowest set bit of v (the distance to the parent); >= n at the root */
    struct sched_buf acc = sbuf(R_RECV, 0), cur = sbuf(src, 0);
    size_t slot[2] = {0, 0};
    if (nchild > 0) {
        if (!is_root)
            acc = sbuf(R_SCRATCH, sched_scratch(s, bytes));
        slot[0] = sched_scratch(s, bytes);
        slot[1] = nchild > 1 ? sched_scratch(s, bytes) : slot[0];
    }
    int last = -1, prev2 = -1;
    for (int c = 1, i = 0; c < m && v + c < n; c <<= 1, i++) {
        struct sched_buf in = sbuf(R_SCRATCH, slot[i % 2]);
        int rcv = sched_recv(s, mod(v + c + a->root, n), 0, in, bytes);
        sched_dep(s, rcv, prev2, 1); /* it read this slot */
        int red = sched_reduce(s, acc, cur, in, bytes);
        sched_dep(s, red, rcv, 1);
        sched_dep(s, red, last, 1);
        prev2 = last;
        last = red;
        cur = acc;
    }
    if (!is_root) {
        int snd = sched_send(s, mod(v - m + a->root, n), 0, cur, bytes);
        sched_dep(s, snd, last, 1);
        return s->build_err;
    }
    if (nchild == 0 && !a->in_place) /* n == 1 */
        last = sched_copy(s, sbuf(R_RECV, 0), sbuf(R_SEND, 0), bytes);
    if (a->op == FC_AVG)
        sched_dep(s, sched_scale(s, sbuf(R_RECV, 0), bytes), last, 1);
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    double bytes = (double)a->count * (double)a->esize;
    if (!(c->oversub > 1))
        return ceil_log2(a->nranks) *
               (c->alpha + coll_hs1(c, bytes) + bytes * c->beta + bytes * c->gamma);
    /* ranks outnumber CPUs: a round's receivers share them (half the ranks
     * in the first round, one in the last) */
    double t = 0;
    for (int mask = 1; mask < a->nranks; mask *= 2)
        t += c->alpha + coll_hs1(c, bytes) + bytes * (c->beta + c->gamma) *
                            coll_share(c, a->nranks, binomial_receivers(a->nranks, mask));
    return t;
}

const struct coll_algo coll_reduce_binomial = {
    .name = "binomial",
    .kind = COLL_REDUCE,
    .check = coll_any,
    .build = build,
    .cost = cost,
    .shares = 1,
};
