/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Reductions in rank order (FC_REPRODUCIBLE): allreduce, reduce-scatter and
 * reduce whose every element is ((v0 op v1) op v2) ... op v(n-1), the
 * ranks' contributions in rank order with one rounding per step, as the
 * engine's reductions store it: the same bits whatever the message size,
 * chunking, rails, provider or tier, and the same as allreduce gather's, so
 * the tuner may pick either.
 *
 * Idea: a direct reduce-scatter. Rank r owns block r (blk_count's blocks,
 * or reduce-scatter's). Every rank sends block j of its input to rank j,
 * all at once, going round from r+1 so no rank is everyone's first target;
 * rank r copies its own block into slot r of a scratch array of n slots,
 * receives block r of every other rank into its slot, and reduces the
 * slots in rank order. Then allreduce passes the blocks round a ring (each
 * of its own size, as allgatherv's ring), reduce sends every block to the
 * root, and reduce-scatter is done.
 *
 * Steps: n-1 sends and receives of a block, n-1 reductions of a block;
 * allreduce n-1 ring steps more, reduce one send per rank (n-1 receives at
 * the root). Bytes sent per rank: (n-1)/n of the vector, twice for
 * allreduce, as a ring; latency one round (reduce-scatter), two (reduce)
 * or n (allreduce), with n-1 messages arriving at once at every rank.
 * Scratch: n blocks (and one more at a reduce's other ranks).
 * Hazards: the own block's copy comes before the first reduction (in place
 * the result overwrites it); in place, a block is received over in the
 * second phase only after the first phase sent it.
 */
#include <stdlib.h>

#include "coll.h"
#include "log.h"

struct blocks {
    int src;    /* the region of the n input blocks */
    size_t per; /* reduce-scatter's block (elements); 0: blk_count of count */
};

static size_t boff(const struct coll_args *a, const struct blocks *b, int j)
{
    return (b->per ? (size_t)j * b->per : blk_first(a->count, a->nranks, j)) * a->esize;
}

static size_t blen(const struct coll_args *a, const struct blocks *b, int j)
{
    return (b->per ? b->per : blk_count(a->count, a->nranks, j)) * a->esize;
}

/* Block `rank` of every rank reduced in rank order into dst (FC_AVG's
 * division included); sent[j]: the send of block j (-1: none). Returns the
 * step that writes dst last (-1: nothing written). */
static int reduce_blocks(struct sched *s, const struct coll_args *a, const struct blocks *b,
                         struct sched_buf dst, int *sent)
{
    const int n = a->nranks, r = a->rank;
    for (int j = 0; j < n; j++)
        sent[j] = -1;
    for (int k = 1; k < n; k++) {
        int j = mod(r + k, n);
        if (blen(a, b, j))
            sent[j] = sched_send(s, j, 0, sbuf(b->src, boff(a, b, j)), blen(a, b, j));
    }
    const size_t bc = blen(a, b, r);
    if (!bc)
        return -1;
    const struct sched_buf own = sbuf(b->src, boff(a, b, r));
    if (n == 1) {
        int last =
            own.region == dst.region && own.off == dst.off ? -1 : sched_copy(s, dst, own, bc);
        if (a->op == FC_AVG) {
            int sc = sched_scale(s, dst, bc);
            sched_dep(s, sc, last, 1);
            last = sc;
        }
        return last;
    }
    const size_t tmp = sched_scratch(s, (size_t)n * bc);
#define SLOT(j) sbuf(R_SCRATCH, tmp + (size_t)(j)*bc)
    /* the own block first: in place the first reduction overwrites it */
    const int mine = sched_copy(s, SLOT(r), own, bc);
    int w0 = -1, last = -1;
    for (int j = 0; j < n; j++) {
        int w = j == r ? mine : sched_recv(s, j, 0, SLOT(j), bc);
        if (j == 0) {
            w0 = w;
            continue;
        }
        int red = j == 1 ? sched_reduce(s, dst, SLOT(0), SLOT(1), bc)
                         : sched_reduce(s, dst, dst, SLOT(j), bc);
        sched_dep(s, red, w, 1);
        sched_dep(s, red, j == 1 ? w0 : last, 1);
        sched_dep(s, red, mine, 1);
        last = red;
    }
#undef SLOT
    if (a->op == FC_AVG) {
        int sc = sched_scale(s, dst, bc);
        sched_dep(s, sc, last, 1);
        last = sc;
    }
    return last;
}

static fc_result_t allreduce_steps(struct sched *s, const struct coll_args *a, int *sent)
{
    const int n = a->nranks, r = a->rank;
    const struct blocks b = {.src = a->in_place ? R_RECV : R_SEND};
    const struct blocks out = {.src = R_RECV};
#define BLK(j) sbuf(R_RECV, boff(a, &out, (j)))
    int last = reduce_blocks(s, a, &b, BLK(r), sent);
    /* the blocks round the ring: step t sends block r-t, receives r-t-1 */
    const int left = mod(r - 1, n), right = mod(r + 1, n);
    /* In place the ring's receives wait for the first phase's sends of
     * their blocks. Where sends complete in posting order (libfabric 1.17's
     * shm) a ring send posted among those would wait for a peer's ring
     * receive, which waits for that peer's first phase, and so on round:
     * so the ring sends only once this rank's first phase is out (a fence
     * on its sends). */
    int out1 = -1;
    if (a->in_place && n > 1) {
        out1 = sched_nop(s);
        for (int j = 0; j < n; j++)
            sched_dep(s, out1, sent[j], 0);
    }
    int prev = last;
    for (int t = 0; t < n - 1; t++) {
        int sb = mod(r - t, n), rb = mod(r - t - 1, n);
        if (blen(a, &out, sb)) {
            int snd = sched_send(s, right, 1u + (uint32_t)t, BLK(sb), blen(a, &out, sb));
            sched_dep(s, snd, prev, 1);
            sched_dep(s, snd, out1, 0);
        }
        prev = -1;
        if (blen(a, &out, rb)) {
            prev = sched_recv(s, left, 1u + (uint32_t)t, BLK(rb), blen(a, &out, rb));
            if (a->in_place)
                sched_dep(s, prev, sent[rb], 0);
        }
    }
#undef BLK
    return s->build_err;
}

static fc_result_t reduce_scatter_steps(struct sched *s, const struct coll_args *a, int *sent)
{
    const struct blocks b = {.src = R_SEND, .per = a->count};
    reduce_blocks(s, a, &b, sbuf(R_RECV, 0), sent);
    return s->build_err;
}

static fc_result_t reduce_steps(struct sched *s, const struct coll_args *a, int *sent)
{
    const int n = a->nranks, r = a->rank, root = a->root;
    const int is_root = r == root;
    const struct blocks b = {.src = is_root && a->in_place ? R_RECV : R_SEND};
    const struct blocks out = {.src = R_RECV};
    const size_t bc = blen(a, &b, r);
    /* the root reduces its block in place in its result, the others in
     * scratch, then send it to the root */
    struct sched_buf dst =
        is_root ? sbuf(R_RECV, boff(a, &out, r)) : sbuf(R_SCRATCH, bc ? sched_scratch(s, bc) : 0);
    int last = reduce_blocks(s, a, &b, dst, sent);
    if (!is_root) {
        if (bc) {
            int snd = sched_send(s, root, 1, dst, bc);
            sched_dep(s, snd, last, 1);
        }
        return s->build_err;
    }
    for (int j = 0; j < n; j++) {
        if (j == r || !blen(a, &out, j))
            continue;
        int rcv = sched_recv(s, j, 1, sbuf(R_RECV, boff(a, &out, j)), blen(a, &out, j));
        if (a->in_place)
            sched_dep(s, rcv, sent[j], 0);
    }
    return s->build_err;
}

/* A builder with the array of the first phase's sends (one per rank). */
static fc_result_t with_sent(struct sched *s, const struct coll_args *a,
                             fc_result_t (*steps)(struct sched *, const struct coll_args *, int *))
{
    int *sent = malloc(sizeof(int) * (size_t)a->nranks);
    if (!sent)
        return s->build_err = FC_ERR(FC_ERR_NO_MEMORY, "%s ordered: out of memory for %d ranks",
                                     coll_kind_name(a->kind), a->nranks);
    fc_result_t rc = steps(s, a, sent);
    free(sent);
    return rc;
}

static fc_result_t build_allreduce(struct sched *s, const struct coll_args *a)
{
    return with_sent(s, a, allreduce_steps);
}

static fc_result_t build_reduce_scatter(struct sched *s, const struct coll_args *a)
{
    return with_sent(s, a, reduce_scatter_steps);
}

static fc_result_t build_reduce(struct sched *s, const struct coll_args *a)
{
    return with_sent(s, a, reduce_steps);
}

/* Two passes over the bytes (the direct reduce-scatter, then the ring or
 * the gather), n-1 reductions of a block. */
static double cost_rs(const struct coll_args *a, const struct coll_cost *c, double bytes)
{
    const int n = a->nranks;
    if (n == 1)
        return 0;
    double blk = bytes / n;
    /* n-1 messages leave and arrive at once: the NIC takes them in turn */
    return c->alpha + (n - 1) * (blk * c->beta + coll_hs1(c, blk)) + (n - 1) * blk * c->gamma;
}

static double cost_allreduce(const struct coll_args *a, const struct coll_cost *c)
{
    const int n = a->nranks;
    double bytes = (double)a->count * (double)a->esize, blk = bytes / (n > 0 ? n : 1);
    return cost_rs(a, c, bytes) + (n - 1) * (c->alpha + blk * c->beta + coll_hs(c, blk));
}

static double cost_reduce_scatter(const struct coll_args *a, const struct coll_cost *c)
{
    return cost_rs(a, c, (double)a->count * (double)a->esize * a->nranks);
}

static double cost_reduce(const struct coll_args *a, const struct coll_cost *c)
{
    const int n = a->nranks;
    double bytes = (double)a->count * (double)a->esize, blk = bytes / (n > 0 ? n : 1);
    return cost_rs(a, c, bytes) + (n > 1 ? c->alpha + (n - 1) * blk * c->beta : 0);
}

const struct coll_algo coll_allreduce_ordered = {
    .name = "ordered",
    .kind = COLL_ALLREDUCE,
    .check = coll_any,
    .build = build_allreduce,
    .cost = cost_allreduce,
    .rank_order = 1,
    .reproducible_only = 1,
};

const struct coll_algo coll_reduce_scatter_ordered = {
    .name = "ordered",
    .kind = COLL_REDUCE_SCATTER,
    .check = coll_any,
    .build = build_reduce_scatter,
    .cost = cost_reduce_scatter,
    .rank_order = 1,
    .reproducible_only = 1,
};

const struct coll_algo coll_reduce_ordered = {
    .name = "ordered",
    .kind = COLL_REDUCE,
    .check = coll_any,
    .build = build_reduce,
    .cost = cost_reduce,
    .rank_order = 1,
    .reproducible_only = 1,
};
