/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Scatter, binomial tree: gather's tree run backwards.
 *
 * Idea: with ranks renumbered so the root is 0 (v = rank - root mod n),
 * rank v receives from its parent the blocks of its whole subtree, virtual
 * ranks v .. e-1 (e = v plus its lowest set bit, at most n), keeps the
 * first and sends each child its subtree's part, largest first, so the
 * far half of the tree starts early. The root sends straight from its send
 * buffer where a subtree's real ranks do not wrap past n - 1, else from
 * scratch it fills with two copies. A leaf receives its block straight into
 * its receive buffer. ceil(log2 n) rounds.
 *
 * Steps: one receive (none at the root), one send per child. Bytes out of
 * the root: (n-1) * block; latency ceil(log2 n) alpha. Scratch: (e - v)
 * blocks at ranks with children (the root: the wrapping subtree). In place
 * at the root: its block already sits in the send buffer.
 */
#include "coll.h"

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks, root = a->root;
    const size_t bc = a->count * a->esize;
    const int v = mod(a->rank - root, n);
    const int e = binomial_sub_end(v, n);
    if (v == 0) {
        if (!a->in_place)
            sched_copy(s, sbuf(R_RECV, 0), sbuf(R_SEND, (size_t)root * bc), bc);
        for (int mask = floor_pow2(n > 1 ? n - 1 : 1); mask >= 1 && n > 1; mask /= 2) {
            const int c = mask, ce = c + mask < n ? c + mask : n;
            const int to = mod(c + root, n), nb = ce - c;
            if (to + nb <= n) {
                sched_send(s, to, 0, sbuf(R_SEND, (size_t)to * bc), (size_t)nb * bc);
                continue;
            }
            const int first = n - to, rest = nb - first;
            size_t off = sched_scratch(s, (size_t)nb * bc);
            int c1 = sched_copy(s, sbuf(R_SCRATCH, off), sbuf(R_SEND, (size_t)to * bc),
                                (size_t)first * bc);
            int c2 = sched_copy(s, sbuf(R_SCRATCH, off + (size_t)first * bc), sbuf(R_SEND, 0),
                                (size_t)rest * bc);
            int snd = sched_send(s, to, 0, sbuf(R_SCRATCH, off), (size_t)nb * bc);
            sched_dep(s, snd, c1, 1);
            sched_dep(s, snd, c2, 0);
        }
        return s->build_err;
    }
    const int parent = mod(v - (v & -v) + root, n);
    if (e == v + 1) { /* a leaf */
        sched_recv(s, parent, 0, sbuf(R_RECV, 0), bc);
        return s->build_err;
    }
    const size_t off = sched_scratch(s, (size_t)(e - v) * bc);
    const int rcv = sched_recv(s, parent, 0, sbuf(R_SCRATCH, off), (size_t)(e - v) * bc);
    const int own = sched_copy(s, sbuf(R_RECV, 0), sbuf(R_SCRATCH, off), bc);
    sched_dep(s, own, rcv, 1);
    int mask = 1;
    while (v + mask * 2 < e)
        mask *= 2;
    for (; mask >= 1; mask /= 2) {
        const int c = v + mask, ce = c + mask < e ? c + mask : e;
        if (c >= e)
            continue;
        int snd = sched_send(s, mod(c + root, n), 0, sbuf(R_SCRATCH, off + (size_t)mask * bc),
                             (size_t)(ce - c) * bc);
        sched_dep(s, snd, rcv, 0);
    }
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    const double bc = (double)a->count * (double)a->esize;
    double t = 0;
    for (int mask = 1; mask < a->nranks; mask *= 2)
        t += c->alpha + mask * bc * c->beta + coll_hs1(c, mask * bc);
    return t;
}

const struct coll_algo coll_scatter_binomial = {
    .name = "binomial",
    .kind = COLL_SCATTER,
    .check = coll_any,
    .build = build,
    .cost = cost,
};
