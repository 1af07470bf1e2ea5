/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reduce, reduce-scatter + gather (Rabenseifner's reduce).
 *
 * Idea: with ranks renumbered so the root is 0 (v = rank - root mod n) and
 * the vector cut into n blocks, block v belonging to virtual rank v:
 *  1. ring reduce-scatter: in step st (0 .. n-2) rank v sends the partial
 *     sum of block v-st-1 to v+1, receives that of block v-st-2 from v-1 and
 *     adds its own input; the last block received is block v, whose total
 *     it then holds. Any n.
 *  2. binomial gather: v receives from its children v+1, v+2, v+4, ...
 *     (below its lowest set bit) the totals of their subtrees, blocks
 *     [c, min(c + lowbit(c), n)), contiguous because blocks go by virtual
 *     rank; then sends its own subtree's blocks to its parent. Any n.
 *
 * Steps: n-1 ring steps, then up to log2(n) receives and one send. Bytes
 * sent per rank: (n-1)/n of the vector in the ring, the subtree's share in
 * the gather (the root receives (n-1)/n); latency (n-1 + log2 n) alpha:
 * for large vectors, where the binomial tree's log2(n) full-size reductions
 * cost more.
 * Scratch: two ring slots (a partial sum is reduced in the slot it arrived
 * in and sent on from there, so the receive two steps later waits for that
 * send); at a non-root, whose receive buffer is NULL, a buffer for its
 * subtree's blocks; the root gathers into its receive buffer. The send
 * buffer is only read. In place at the root the gather's receives go to
 * scratch (they would overwrite input blocks the ring reads) and are copied
 * into place after a fence over the ring. FC_AVG: every rank scales its own block's total once,
 * before the gather.
 */
#include "coll.h"

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks, root = a->root;
    const size_t es = a->esize, cnt = a->count;
    const int v = mod(a->rank - root, n), is_root = v == 0;
    const int src = is_root && a->in_place ? R_RECV : R_SEND;
#define BOFF(b) (blk_first(cnt, n, (b)) * es)
#define BLEN(b) (blk_count(cnt, n, (b)) * es)
    if (n == 1) {
        int last = -1;
        if (!a->in_place)
            last = sched_copy(s, sbuf(R_RECV, 0), sbuf(R_SEND, 0), cnt * es);
        if (a->op == FC_AVG)
            sched_dep(s, sched_scale(s, sbuf(R_RECV, 0), cnt * es), last, 1);
        return s->build_err;
    }
    /* where the gathered blocks go: work_reg, block b at work_off + BOFF(b) - base */
    const size_t base = BOFF(v), sub_len = BOFF(binomial_sub_end(v, n)) - base;
    int work_reg = R_RECV;
    size_t work_off = 0;
    if (!is_root) {
        work_reg = R_SCRATCH;
        work_off = sched_scratch(s, sub_len) - base;
    }
#define WORK(b) sbuf(work_reg, work_off + BOFF(b))
    const int first = (int)s->nsteps;
    const int right = mod(v + 1 + root, n), left = mod(v - 1 + root, n);
    size_t slot[2];
    slot[0] = sched_scratch(s, BLEN(0));
    slot[1] = sched_scratch(s, BLEN(0));
    int prev_red = -1, prev_snd = -1;
    for (int st = 0; st < n - 1; st++) {
        int sb = mod(v - st - 1, n), rb = mod(v - st - 2, n);
        struct sched_buf from = st == 0 ? sbuf(src, BOFF(sb)) : sbuf(R_SCRATCH, slot[(st - 1) % 2]);
        int snd = sched_send(s, right, (uint32_t)st, from, BLEN(sb));
        sched_dep(s, snd, prev_red, 1);
        struct sched_buf in = sbuf(R_SCRATCH, slot[st % 2]);
        int rcv = sched_recv(s, left, (uint32_t)st, in, BLEN(rb));
        if (st >= 2)
            sched_dep(s, rcv, prev_snd, 1); /* that send still reads this slot */
        struct sched_buf dst = st == n - 2 ? WORK(v) : in;
        int red = sched_reduce(s, dst, sbuf(src, BOFF(rb)), in, BLEN(rb));
        sched_dep(s, red, rcv, 1);
        prev_red = red;
        prev_snd = snd;
    }
    int own = prev_red; /* wrote block v */
    if (a->op == FC_AVG) {
        int sc = sched_scale(s, WORK(v), BLEN(v));
        sched_dep(s, sc, own, 1);
        own = sc;
    }
    /* In place at the root the gathered blocks would overwrite input the
     * ring still reads: they land in scratch and are copied over after the
     * ring. (Receiving them into place after a fence over the ring posts
     * those receives late; where a fabric completes each rank's sends in
     * order, as libfabric 1.17 shm does, a child's early gather send then
     * holds up its ring sends, and the ring never ends.) */
    const int stage = is_root && a->in_place;
    size_t stage_off = 0;
    if (stage)
        stage_off = sched_scratch(s, BOFF(n) - BOFF(1)) - BOFF(1);
    int fence = stage ? sched_fence(s, first) : -1;
    /* gather: the ring used step tags 0 .. n-2 */
    const uint32_t tag = (uint32_t)n - 1;
    int gr[32], ngr = 0;
    for (int m = 1; m < n && !(v & m) && v + m < n; m <<= 1) {
        int c = v + m;
        size_t glen = BOFF(binomial_sub_end(c, n)) - BOFF(c);
        struct sched_buf at = stage ? sbuf(R_SCRATCH, stage_off + BOFF(c)) : WORK(c);
        gr[ngr] = sched_recv(s, mod(c + root, n), tag, at, glen);
        if (stage) {
            int cp = sched_copy(s, WORK(c), at, glen);
            sched_dep(s, cp, gr[ngr], 1);
            sched_dep(s, cp, fence, 0);
        }
        ngr++;
    }
    if (!is_root) {
        int snd = sched_send(s, mod(v - (v & -v) + root, n), tag, WORK(v), sub_len);
        sched_dep(s, snd, own, 1);
        for (int j = 0; j < ngr; j++) /* they wrote later parts of the range */
            sched_dep(s, snd, gr[j], 1);
    }
#undef WORK
#undef BOFF
#undef BLEN
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    int n = a->nranks;
    if (n == 1)
        return 0;
    double bytes = (double)a->count * (double)a->esize, part = (double)(n - 1) / n * bytes;
    if (!(c->oversub > 1))
        return (n - 1 + ceil_log2(n)) * c->alpha + part * (2 * c->beta + c->gamma) +
               coll_hs_ring_tree(c, n, bytes);
    /* ranks outnumber CPUs: every rank works in the ring; the gather's
     * rounds have fewer receivers, each a subtree's blocks */
    double t = (n - 1) * (c->alpha + coll_hs(c, bytes / n)) +
               part * (c->beta + c->gamma) * coll_share(c, n, n);
    for (int mask = 1; mask < n; mask *= 2)
        t += c->alpha + coll_hs1(c, bytes * mask / n) +
             bytes * mask / n * c->beta * coll_share(c, n, binomial_receivers(n, mask));
    return t;
}

const struct coll_algo coll_reduce_rsgather = {
    .name = "rsgather",
    .kind = COLL_REDUCE,
    .check = coll_any,
    .build = build,
    .cost = cost,
    .shares = 1,
};
