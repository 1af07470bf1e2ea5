/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * AllReduce for small vectors: gather every contribution, then reduce.
 *
 * Idea: the ranks first exchange their raw vectors (Bruck's allgather, see
 * allgather_bruck.c: tmp[j] holds the vector of rank r+j mod n, round k
 * sends tmp[0 .. cnt) to r - 2^k and receives tmp[2^k .. 2^k+cnt) from
 * r + 2^k), then every rank reduces the n vectors itself, in rank order:
 * ((v0 op v1) op v2) ... The result is bit for bit the same on every rank
 * for every type and op, and nothing is reduced before the last message
 * has arrived, so the reduction is one local step at the end.
 *
 * That is what makes it the small-message algorithm for device buffers:
 * the data to send is the caller's vector itself, and the whole reduction
 * comes after the exchange, so one CUDA kernel can copy the vector out,
 * wait for the exchange and reduce, with no round trip to the GPU in
 * between. coll_allreduce_gather_fused is that form: the own vector copied
 * to tmp[0] first (the kernel putting it out), the same messages, and the n
 * vectors reduced in one step (sched_reduce_all: the kernel's reduction);
 * src/gpu/fused.c is the transport that runs it so. The messages are
 * gather's, so ranks on host and device buffers can be mixed in one call.
 *
 * Steps: ceil(log2 n) exchanges (latency of recursive doubling at a power
 * of two, two rounds fewer elsewhere), (n-1) vectors sent per rank, n-1
 * local reductions. Scratch: n vectors.
 */
#include "coll.h"

/* The exchange: tmp (n vectors, own vector already at tmp[0] unless own is
 * elsewhere) receives every other vector. Returns a NOP step that follows
 * every send and receive of it. */
static int exchange(struct sched *s, const struct coll_args *a, struct sched_buf own,
                    struct sched_buf tmp, int own_copy)
{
    int steps[40]; /* sends and receives, for the fence */
    const int n = a->nranks, r = a->rank;
    const size_t bc = a->count * a->esize;
    int nr = 0;
    for (int k = 0, dist = 1; dist < n; k++, dist <<= 1) {
        int cnt = dist < n - dist ? dist : n - dist;
        /* round 0 sends the own vector (from where it is); later rounds
         * send tmp[0 .. cnt), which holds it and what came before */
        struct sched_buf src = k == 0 ? own : tmp;
        int snd = sched_send(s, mod(r - dist, n), (uint32_t)k, src, (size_t)cnt * bc);
        if (k > 0 || (own.region == tmp.region && own.off == tmp.off)) {
            sched_dep(s, snd, own_copy, 0);
            for (int j = 0; j < nr; j++)
                sched_dep(s, snd, steps[j], 0); /* (and earlier sends: harmless) */
        }
        steps[nr++] = sched_recv(s, mod(r + dist, n), (uint32_t)k,
                                 sbuf(tmp.region, tmp.off + (size_t)dist * bc), (size_t)cnt * bc);
        /* the fence: after this send (a reduction may overwrite what it
         * reads, in place) and every receive */
        steps[nr++] = snd;
    }
    int fence = sched_nop(s);
    for (int j = 0; j < nr; j++)
        sched_dep(s, fence, steps[j], 0);
    return fence;
}

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks, r = a->rank;
    const size_t bc = a->count * a->esize;
    const int src_region = a->in_place ? R_RECV : R_SEND;
    if (n == 1) {
        if (!a->in_place)
            sched_copy(s, sbuf(R_RECV, 0), sbuf(R_SEND, 0), bc);
        return s->build_err;
    }
    const size_t tmp = sched_scratch(s, (size_t)n * bc);
    /* rounds after the first send the own vector from tmp[0] */
    int own_copy = n > 2 ? sched_copy(s, sbuf(R_SCRATCH, tmp), sbuf(src_region, 0), bc) : -1;
    int fence = exchange(s, a, sbuf(src_region, 0), sbuf(R_SCRATCH, tmp), own_copy);
    sched_dep(s, fence, own_copy, 0);
    /* rank j's vector is at tmp[(j - r) mod n]; at 2 ranks my own is read
     * where it is (no copy was made; the one reduction reads each element
     * before it writes it, in place too) */
    struct sched_buf vec[64];
    for (int j = 0; j < n; j++)
        vec[j] = j == r && own_copy < 0 ? sbuf(src_region, 0)
                                        : sbuf(R_SCRATCH, tmp + (size_t)mod(j - r, n) * bc);
    int last = sched_reduce(s, sbuf(R_RECV, 0), vec[0], vec[1], bc);
    sched_dep(s, last, fence, 0);
    for (int j = 2; j < n; j++) {
        int red = sched_reduce(s, sbuf(R_RECV, 0), sbuf(R_RECV, 0), vec[j], bc);
        sched_dep(s, red, last, 0);
        last = red;
    }
    if (a->op == FC_AVG) {
        int sc = sched_scale(s, sbuf(R_RECV, 0), bc);
        sched_dep(s, sc, last, 0);
    }
    return s->build_err;
}

/* The fused form: the own vector copied to tmp[0] (at every n), every
 * round sending from tmp, and one reduction of the n vectors (tmp[j] holds
 * rank r+j's). The same messages as build(). */
static fc_result_t build_fused(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks, r = a->rank;
    const size_t bc = a->count * a->esize;
    const size_t tmp = sched_scratch(s, (size_t)n * bc);
    int own_copy = sched_copy(s, sbuf(R_SCRATCH, tmp), sbuf(a->in_place ? R_RECV : R_SEND, 0), bc);
    int last = own_copy;
    if (n > 1) {
        last = exchange(s, a, sbuf(R_SCRATCH, tmp), sbuf(R_SCRATCH, tmp), own_copy);
        sched_dep(s, last, own_copy, 0);
    }
    int red = sched_reduce_all(s, sbuf(R_RECV, 0), sbuf(R_SCRATCH, tmp), r, bc);
    sched_dep(s, red, last, 0);
    return s->build_err;
}

static int check(const struct coll_args *a)
{
    return a->nranks <= 64; /* n vectors of scratch, n-1 reductions: small n only */
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    int n = a->nranks;
    if (n == 1)
        return 0;
    double bc = (double)a->count * (double)a->esize;
    /* Bruck's rounds: ceil(log2 n) messages, the later ones of several
     * vectors, so past the provider's size sooner */
    return ceil_log2(n) * c->alpha + coll_hs_bruck(c, n, bc) + (n - 1) * bc * (c->beta + c->gamma);
}

const struct coll_algo coll_allreduce_gather = {
    .name = "gather",
    .kind = COLL_ALLREDUCE,
    .check = check,
    .build = build,
    .cost = cost,
    /* At 2 ranks the same exchange and reduction as rd; at 4, 8 ... ranks as
     * many rounds with more bytes, which for small vectors the model puts
     * within a few percent of rd (and real runs cannot tell apart on host
     * buffers). Those ties are gather's: its exchange is what small device
     * allreduces run as one kernel (src/gpu/fused.c), 2.5x faster than staged. */
    .tie_margin = 0.02,
    .rank_order = 1,
};

/* Not in the table (FC_ALGO cannot pick it): the device branch's route
 * picks it for the calls its fused transport runs (src/gpu/fused.c). */
const struct coll_algo coll_allreduce_gather_fused = {
    .name = "gather-fused",
    .kind = COLL_ALLREDUCE,
    .check = check,
    .build = build_fused,
    .cost = cost,
};
