/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Gather, binomial tree.
 *
 * Idea: with ranks renumbered so the root is 0 (v = rank - root mod n),
 * rank v collects the blocks of its subtree, virtual ranks v .. e-1 (e =
 * v plus its lowest set bit, at most n), in virtual order: its own, then
 * each child's subtree as the child sends it, smallest first; once all are
 * in, it sends the lot to its parent in one message. A leaf sends its block
 * straight from its send buffer. The root receives each child's subtree
 * straight into its place in the receive buffer, or, where the subtree's
 * real ranks wrap past n - 1, into scratch and then in two copies.
 * ceil(log2 n) rounds.
 *
 * Steps: one send (none at the root), one receive per child. Bytes into
 * the root: (n-1) * block, as linear; latency ceil(log2 n) alpha instead
 * of n-1 messages at one rank: best for small and medium blocks. Scratch:
 * (e - v) blocks at ranks with children (the root: the wrapping subtree).
 * In place at the root: its block is already in the receive buffer.
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
            sched_copy(s, sbuf(R_RECV, (size_t)root * bc), sbuf(R_SEND, 0), bc);
        for (int mask = 1; mask < n; mask *= 2) {
            const int c = mask, ce = c + mask < n ? c + mask : n;
            const int from = mod(c + root, n), nb = ce - c;
            if (from + nb <= n) {
                sched_recv(s, from, 0, sbuf(R_RECV, (size_t)from * bc), (size_t)nb * bc);
                continue;
            }
            /* real ranks from .. n-1, then 0 .. rest-1 */
            const int first = n - from, rest = nb - first;
            size_t off = sched_scratch(s, (size_t)nb * bc);
            int rcv = sched_recv(s, from, 0, sbuf(R_SCRATCH, off), (size_t)nb * bc);
            int c1 = sched_copy(s, sbuf(R_RECV, (size_t)from * bc), sbuf(R_SCRATCH, off),
                                (size_t)first * bc);
            int c2 = sched_copy(s, sbuf(R_RECV, 0), sbuf(R_SCRATCH, off + (size_t)first * bc),
                                (size_t)rest * bc);
            sched_dep(s, c1, rcv, 1);
            sched_dep(s, c2, rcv, 0);
        }
        return s->build_err;
    }
    const int parent = mod(v - (v & -v) + root, n);
    if (e == v + 1) { /* a leaf */
        sched_send(s, parent, 0, sbuf(R_SEND, 0), bc);
        return s->build_err;
    }
    const size_t off = sched_scratch(s, (size_t)(e - v) * bc);
    const int first = sched_copy(s, sbuf(R_SCRATCH, off), sbuf(R_SEND, 0), bc);
    int deps[32], nd = 0;
    deps[nd++] = first;
    for (int mask = 1; v + mask < e; mask *= 2) {
        const int c = v + mask, ce = c + mask < e ? c + mask : e;
        deps[nd++] = sched_recv(s, mod(c + root, n), 0,
                                sbuf(R_SCRATCH, off + (size_t)mask * bc), (size_t)(ce - c) * bc);
    }
    const int snd = sched_send(s, parent, 0, sbuf(R_SCRATCH, off), (size_t)(e - v) * bc);
    for (int i = 0; i < nd; i++)
        sched_dep(s, snd, deps[i], 0);
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    const double bc = (double)a->count * (double)a->esize;
    double t = 0;
    /* round k: subtrees of 2^k blocks move one level up */
    for (int mask = 1; mask < a->nranks; mask *= 2)
        t += c->alpha + mask * bc * c->beta + coll_hs1(c, mask * bc);
    return t;
}

const struct coll_algo coll_gather_binomial = {
    .name = "binomial",
    .kind = COLL_GATHER,
    .check = coll_any,
    .build = build,
    .cost = cost,
};
