/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The schedule engine: runs what coll/ builds.
 *
 * Event driven: a step is looked at only when something it waits for
 * changed (a predecessor advanced, one of its transfers completed, or the
 * transport said "again"), so a schedule of S steps costs O(S + chunks)
 * whatever the order in which completions arrive. See schedule.h for the model.
 */
#define _GNU_SOURCE
#include "schedule.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#define XFER_BLOCK 64

void sched_init(struct sched *s, fc_datatype_t dt, fc_op_t op, int nranks)
{
    memset(s, 0, sizeof(*s));
    s->dt = dt;
    s->op = op;
    s->esize = fc_datatype_size(dt);
    if (s->esize == 0)
        s->esize = 1;
    s->nranks = nranks;
    s->coll_name = "?";
    s->algo_name = "?";
}

static int grow(void **arr, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    uint32_t nc = *cap ? *cap * 2 : 16;
    while (nc < need)
        nc *= 2;
    void *p = realloc(*arr, (size_t)nc * elem);
    if (!p)
        return -1;
    *arr = p;
    *cap = nc;
    return 0;
}

static int add_step(struct sched *s, int op, size_t len)
{
    if (s->build_err)
        return -1;
    if (grow((void **)&s->steps, &s->cap_steps, s->nsteps + 1, sizeof(*s->steps))) {
        s->build_err = FC_ERR(FC_ERR_NO_MEMORY, "out of memory building a %s schedule of %u steps",
                              s->coll_name, s->nsteps + 1);
        return -1;
    }
    struct sched_step *st = &s->steps[s->nsteps];
    memset(st, 0, sizeof(*st));
    st->op = (uint8_t)op;
    st->len = len;
    st->peer = -1;
    return (int)s->nsteps++;
}

int sched_send(struct sched *s, int peer, uint32_t tag, struct sched_buf src, size_t len)
{
    if (tag > TAG_STEP_MAX) {
        s->build_err = FC_ERR(FC_ERR_INTERNAL, "%s/%s: step tag %u exceeds %u", s->coll_name,
                              s->algo_name, tag, TAG_STEP_MAX);
        return -1;
    }
    int i = add_step(s, SOP_SEND, len);
    if (i >= 0) {
        s->steps[i].peer = peer;
        s->steps[i].tag = tag;
        s->steps[i].a = src;
    }
    return i;
}

int sched_recv(struct sched *s, int peer, uint32_t tag, struct sched_buf dst, size_t len)
{
    if (tag > TAG_STEP_MAX) {
        s->build_err = FC_ERR(FC_ERR_INTERNAL, "%s/%s: step tag %u exceeds %u", s->coll_name,
                              s->algo_name, tag, TAG_STEP_MAX);
        return -1;
    }
    int i = add_step(s, SOP_RECV, len);
    if (i >= 0) {
        s->steps[i].peer = peer;
        s->steps[i].tag = tag;
        s->steps[i].dst = dst;
    }
    return i;
}

int sched_signal(struct sched *s, int peer, uint32_t tag)
{
    int i = sched_send(s, peer, tag, sbuf(R_NONE, 0), 0);
    if (i >= 0)
        s->steps[i].zmsg = 1;
    return i;
}

int sched_wait_signal(struct sched *s, int peer, uint32_t tag)
{
    int i = sched_recv(s, peer, tag, sbuf(R_NONE, 0), 0);
    if (i >= 0)
        s->steps[i].zmsg = 1;
    return i;
}

static int with_value(struct sched *s, int i, uint64_t v, int what)
{
    if (i >= 0) {
        s->steps[i].value = (uint8_t)what;
        s->steps[i].val = v;
    }
    return i;
}

int sched_send_value(struct sched *s, int peer, uint32_t tag, uint64_t v, int what)
{
    return with_value(s, sched_send(s, peer, tag, sbuf(R_NONE, 0), sizeof(uint64_t)), v, what);
}

int sched_expect_value(struct sched *s, int peer, uint32_t tag, uint64_t v, int what)
{
    return with_value(s, sched_recv(s, peer, tag, sbuf(R_NONE, 0), sizeof(uint64_t)), v, what);
}

fc_result_t sched_sign(struct sched *s, int rank, uint64_t sig, size_t gate_min)
{
    return sched_sign_pairs(s, rank, sig, NULL, NULL, gate_min);
}

fc_result_t sched_sign_pairs(struct sched *s, int rank, uint64_t sig, const uint64_t *to,
                             const uint64_t *from, size_t gate_min)
{
    if (s->build_err != FC_SUCCESS || s->nranks <= 1)
        return s->build_err;
    /* the peers, in the order the builder first meets them; expect[peer]:
     * the index of the value step that receives the peer's signature */
    int *expect = malloc(sizeof(int) * (size_t)s->nranks);
    if (!expect)
        return s->build_err = FC_ERR(FC_ERR_NO_MEMORY, "out of memory for a signature");
    for (int r = 0; r < s->nranks; r++)
        expect[r] = -1;
    uint32_t n = s->nsteps, k = 0;
    for (uint32_t i = 0; i < n; i++) {
        int op = s->steps[i].op, peer = s->steps[i].peer;
        if ((op == SOP_SEND || op == SOP_RECV) && !s->steps[i].value && peer >= 0 &&
            peer < s->nranks && expect[peer] < 0) {
            expect[peer] = (int)k + 1;
            k += 2;
        }
    }
    /* per pair: every other rank, whether or not a message goes between
     * them (a count that is 0 on one side only is a disagreement too) */
    for (int r = 0; to && from && r < s->nranks; r++)
        if (r != rank && expect[r] < 0) {
            expect[r] = (int)k + 1;
            k += 2;
        }
    /* and the ranks next to this one: any disagreement then has two
     * neighbours that disagree, so at least two ranks name it, whatever
     * the algorithm's peers */
    for (int d = -1; k > 0 && d <= 1 && rank >= 0 && rank < s->nranks; d += 2) {
        int peer = (rank + d + s->nranks) % s->nranks;
        if (peer != rank && expect[peer] < 0) {
            expect[peer] = (int)k + 1;
            k += 2;
        }
    }
    if (k == 0) {
        free(expect);
        return FC_SUCCESS;
    }
    /* the value steps go first (a step depends only on earlier ones): the
     * builder's steps and edges move up by k */
    if (grow((void **)&s->steps, &s->cap_steps, n + k, sizeof(*s->steps))) {
        free(expect);
        return s->build_err = FC_ERR(FC_ERR_NO_MEMORY, "out of memory for a signature");
    }
    memmove(s->steps + k, s->steps, (size_t)n * sizeof(*s->steps));
    memset(s->steps, 0, (size_t)k * sizeof(*s->steps));
    s->nsteps = n + k;
    for (uint32_t e = 0; e < s->nedges; e++) {
        s->edges[e].step += k;
        s->edges[e].pred += k;
    }
    for (int r = 0; r < s->nranks; r++) {
        if (expect[r] < 0)
            continue;
        for (int j = expect[r] - 1; j <= expect[r]; j++) {
            struct sched_step *st = &s->steps[j];
            st->op = j == expect[r] ? SOP_RECV : SOP_SEND;
            st->len = sizeof(uint64_t);
            st->peer = r;
            st->tag = 0;
            st->value = SV_SIGNATURE;
            st->val = !to || !from ? sig : j == expect[r] ? from[r] : to[r];
        }
    }
    for (uint32_t i = k; i < n + k; i++)
        if (s->steps[i].op == SOP_SEND && s->steps[i].len > gate_min && s->steps[i].peer >= 0 &&
            s->steps[i].peer < s->nranks && expect[s->steps[i].peer] >= 0)
            sched_dep(s, (int)i, expect[s->steps[i].peer], 0);
    free(expect);
    return s->build_err;
}

int sched_reduce(struct sched *s, struct sched_buf dst, struct sched_buf a, struct sched_buf b,
                 size_t len)
{
    int i = add_step(s, SOP_REDUCE, len);
    if (i >= 0) {
        s->steps[i].dst = dst;
        s->steps[i].a = a;
        s->steps[i].b = b;
    }
    return i;
}

int sched_copy(struct sched *s, struct sched_buf dst, struct sched_buf src, size_t len)
{
    int i = add_step(s, SOP_COPY, len);
    if (i >= 0) {
        s->steps[i].dst = dst;
        s->steps[i].a = src;
    }
    return i;
}

int sched_scale(struct sched *s, struct sched_buf buf, size_t len)
{
    int i = add_step(s, SOP_SCALE, len);
    if (i >= 0) {
        s->steps[i].dst = buf;
        s->steps[i].a = buf;
    }
    return i;
}

/* Moves every step k places up (to make room at the front: a step depends
 * only on earlier ones), the edges' indices with them. */
static int shift_steps(struct sched *s, uint32_t k)
{
    const uint32_t n0 = s->nsteps;
    for (uint32_t i = 0; i < k; i++)
        if (add_step(s, SOP_NOP, 0) < 0)
            return -1;
    memmove(&s->steps[k], &s->steps[0], sizeof(*s->steps) * n0);
    memset(&s->steps[0], 0, sizeof(*s->steps) * k);
    for (uint32_t i = 0; i < k; i++)
        s->steps[i].peer = -1;
    for (uint32_t e = 0; e < s->nedges; e++)
        s->edges[e].step += k, s->edges[e].pred += k;
    return 0;
}

fc_result_t sched_premul_input(struct sched *s, int from, size_t bytes, const void *scalar,
                               int in_place)
{
    if (s->build_err)
        return s->build_err;
    memcpy(s->premul, scalar, s->esize <= sizeof(s->premul) ? s->esize : sizeof(s->premul));
    const uint32_t n0 = s->nsteps;
    /* a copy of the input becomes the scaling itself (no extra pass, its
     * chunks as pipelined as the copy's were); whatever else reads the
     * input reads a scaled copy in scratch */
    uint32_t nread = 0;
    int global = in_place;
    for (uint32_t i = 0; i < n0; i++) {
        struct sched_step *st = &s->steps[i];
        const int reads = st->a.region == R_SEND || (st->op == SOP_REDUCE && st->b.region == R_SEND);
        if (!reads)
            continue;
        if (!in_place && st->op == SOP_COPY) {
            st->op = SOP_PREMUL;
            continue;
        }
        if (!in_place && st->op == SOP_REDUCE && (st->a.region == R_SEND) != (st->b.region == R_SEND)) {
            st->pmul = st->a.region == R_SEND ? 1 : 2; /* scaled as it is read */
            continue;
        }
        nread++;
        if (st->op == SOP_REDUCE_ALL) /* reads several vectors: scale all first */
            global = 1;
    }
    if (!nread)
        return FC_SUCCESS;
    /* the readers and the ranges they read (each scaled once) */
    uint32_t *who = malloc(sizeof(uint32_t) * 2 * nread), *rng = who ? who + nread : NULL;
    size_t *roff = malloc(sizeof(size_t) * 2 * nread), *rlen = roff ? roff + nread : NULL;
    uint8_t *has_pred = calloc(n0, 1);
    if (!who || !roff || !has_pred) {
        free(who), free(roff), free(has_pred);
        return s->build_err = FC_ERR(FC_ERR_NO_MEMORY, "out of memory for a pre-scaled sum");
    }
    uint32_t nw = 0, nr = 0;
    for (uint32_t i = 0; i < n0 && !global; i++) {
        const struct sched_step *st = &s->steps[i];
        const struct sched_buf *in = st->a.region == R_SEND ? &st->a
                                     : st->op == SOP_REDUCE && st->b.region == R_SEND ? &st->b
                                                                                      : NULL;
        if (!in || st->op == SOP_PREMUL || st->pmul)
            continue;
        uint32_t q = 0;
        while (q < nr && (roff[q] != in->off || rlen[q] != st->len))
            q++;
        if (q == nr)
            roff[nr] = in->off, rlen[nr++] = st->len;
        who[nw] = i, rng[nw++] = q;
        if (st->op == SOP_REDUCE && st->a.region == R_SEND && st->b.region == R_SEND &&
            st->a.off != st->b.off)
            global = 1; /* two input ranges in one step: scale all first */
    }
    for (uint32_t e = 0; e < s->nedges; e++)
        has_pred[s->edges[e].step] = 1;
    const size_t off = sched_scratch(s, bytes);
    for (uint32_t i = 0; i < n0; i++) {
        if (s->steps[i].op == SOP_PREMUL || s->steps[i].pmul)
            continue; /* a converted copy, a scaling reduction: they read the input itself */
        struct sched_buf *b[3] = {&s->steps[i].dst, &s->steps[i].a, &s->steps[i].b};
        for (int k = 0; k < 3; k++)
            if (b[k]->region == R_SEND)
                *b[k] = sbuf(R_SCRATCH, off + b[k]->off);
    }
    if (global) {
        /* one step first, and every step without a predecessor after it, so
         * nothing is written over an in-place input before it is read */
        if (shift_steps(s, 1) == 0) {
            s->steps[0].op = SOP_PREMUL;
            s->steps[0].len = bytes;
            s->steps[0].dst = sbuf(R_SCRATCH, off);
            s->steps[0].a = sbuf(from, 0);
            for (uint32_t i = 0; i < n0; i++)
                if (!has_pred[i])
                    sched_dep(s, (int)i + 1, 0, 0);
        }
    } else if (shift_steps(s, nr) == 0) {
        /* a step per range read, each reader after it chunk by chunk (same
         * start, same length), so the scaling pipelines with the sends */
        for (uint32_t q = 0; q < nr; q++) {
            s->steps[q].op = SOP_PREMUL;
            s->steps[q].len = rlen[q];
            s->steps[q].dst = sbuf(R_SCRATCH, off + roff[q]);
            s->steps[q].a = sbuf(R_SEND, roff[q]);
        }
        for (uint32_t w = 0; w < nw; w++)
            sched_dep(s, (int)(who[w] + nr), (int)rng[w], 1);
    }
    free(who), free(roff), free(has_pred);
    return s->build_err;
}

int sched_reduce_all(struct sched *s, struct sched_buf dst, struct sched_buf vecs, int first,
                     size_t len)
{
    int i = add_step(s, SOP_REDUCE_ALL, len);
    if (i >= 0) {
        s->steps[i].dst = dst;
        s->steps[i].a = vecs;
        s->steps[i].peer = first;
    }
    return i;
}

int sched_nop(struct sched *s)
{
    return add_step(s, SOP_NOP, 0);
}

void sched_dep(struct sched *s, int step, int pred, int chunked)
{
    if (step < 0 || pred < 0 || s->build_err)
        return;
    if (pred >= step) {
        s->build_err = FC_ERR(FC_ERR_INTERNAL, "%s/%s: step %d depends on later step %d",
                              s->coll_name, s->algo_name, step, pred);
        return;
    }
    if (grow((void **)&s->edges, &s->cap_edges, s->nedges + 1, sizeof(*s->edges))) {
        s->build_err = FC_ERR(FC_ERR_NO_MEMORY, "out of memory building a schedule");
        return;
    }
    s->edges[s->nedges].step = (uint32_t)step;
    s->edges[s->nedges].pred = (uint32_t)pred;
    s->edges[s->nedges].chunked = (uint8_t)(chunked != 0);
    s->nedges++;
}

void sched_dep_at(struct sched *s, int step, size_t at, int pred, size_t pat)
{
    sched_dep(s, step, pred, at <= pat);
}

size_t sched_scratch(struct sched *s, size_t bytes)
{
    size_t off = s->scratch_bytes;
    s->scratch_bytes += (bytes + 63) & ~(size_t)63;
    return off;
}

int sched_fence(struct sched *s, int from)
{
    int n = sched_nop(s);
    for (int i = from; i >= 0 && i < n; i++)
        sched_dep(s, n, i, 0);
    return n;
}

void sched_fail(struct sched *s, fc_result_t rc, const char *fmt, ...)
{
    if (s->status != FC_SUCCESS)
        return;
    s->status = rc;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->errmsg, sizeof(s->errmsg), fmt, ap);
    va_end(ap);
}

/* ---- running ------------------------------------------------------------- */

static inline int is_xfer(const struct sched_step *st)
{
    return st->op == SOP_SEND || st->op == SOP_RECV;
}

static void push(struct sched *s, uint32_t i)
{
    struct sched_step *st = &s->steps[i];
    if (st->queued || st->complete)
        return;
    st->queued = 1;
    if (st->op == SOP_SEND)
        s->swork[s->nswork++] = i;
    else
        s->work[s->nwork++] = i;
}

static void complete_step(struct sched *s, uint32_t i)
{
    struct sched_step *st = &s->steps[i];
    st->complete = 1;
    s->ndone++;
    if (s->env.prof && is_xfer(st) && st->issued > 0)
        s->env.prof(s->env.prof_ctx, 0, s, i);
    for (uint32_t e = st->succ_first; e < st->succ_first + st->nsucc; e++) {
        struct sched_step *succ = &s->steps[s->succs[e].step];
        if (!s->succs[e].chunked)
            succ->nfull_unmet--;
        push(s, s->succs[e].step);
    }
}

static void chunk_done(struct sched *s, uint32_t i, uint32_t k)
{
    struct sched_step *st = &s->steps[i];
    uint32_t bit = k - st->prefix;
    st->winmask |= 1ull << bit;
    uint32_t old = st->prefix;
    while (st->winmask & 1) {
        st->winmask >>= 1;
        st->prefix++;
    }
    if (st->prefix == old)
        return;
    if (st->prefix == st->nchunks) {
        complete_step(s, i);
        return;
    }
    for (uint32_t e = st->succ_first; e < st->succ_first + st->nsucc; e++)
        if (s->succs[e].chunked)
            push(s, s->succs[e].step);
}

/* The chunk the engine cuts with: a multiple of 64 bytes, at least 64 (0:
 * no chunking). Whoever predicts the engine's chunks uses it too. */
static size_t chunk_round(size_t chunk)
{
    if (!chunk)
        return 0;
    return chunk < 64 ? 64 : chunk & ~(size_t)63;
}

/* chunks of a step of len > 0 bytes cut at chunk bytes (0: whole) */
static inline uint32_t nchunks_of(size_t len, size_t chunk)
{
    size_t c = chunk ? chunk : len;
    return (uint32_t)((len + c - 1) / c);
}

static inline size_t chunk_len(const struct sched *s, const struct sched_step *st, uint32_t k)
{
    size_t c = s->env.chunk_bytes ? s->env.chunk_bytes : st->len;
    size_t off = (size_t)k * c;
    size_t l = st->len - off;
    return l < c ? l : c;
}

static inline size_t done_bytes(const struct sched *s, const struct sched_step *p)
{
    if (p->complete)
        return p->len;
    size_t c = s->env.chunk_bytes ? s->env.chunk_bytes : p->len;
    return (size_t)p->prefix * c;
}

static int chunk_ready(const struct sched *s, const struct sched_step *st, uint32_t k)
{
    size_t c = s->env.chunk_bytes ? s->env.chunk_bytes : st->len;
    size_t need = (size_t)(k + 1) * c;
    if (need > st->len)
        need = st->len;
    for (uint32_t e = st->pred_first; e < st->pred_first + st->npred; e++) {
        if (!s->preds[e].chunked)
            continue;
        const struct sched_step *p = &s->steps[s->preds[e].step];
        size_t n = need < p->len ? need : p->len;
        if (done_bytes(s, p) < n)
            return 0;
    }
    return 1;
}

static inline char *ptr_of(const struct sched *s, struct sched_buf b, size_t extra)
{
    if (b.region == R_NONE)
        return NULL;
    return (char *)s->base[b.region] + b.off + extra;
}

static void xfer_done(struct xfer *x, fc_result_t status, size_t len);

static struct xfer *xfer_get(struct sched *s)
{
    if (!s->free_xfers) {
        /* small operations use a few descriptors: the first block is small,
         * so an 8-byte allreduce does not clear 64 of them (~10 KB) */
        int nb = s->nxfer_blocks ? XFER_BLOCK : XFER_BLOCK / 8;
        struct xfer *blk = calloc((size_t)nb, sizeof(*blk));
        void *arr = realloc(s->xfer_blocks, (s->nxfer_blocks + 1) * sizeof(*s->xfer_blocks));
        if (!blk || !arr) {
            free(blk);
            if (arr)
                s->xfer_blocks = arr;
            return NULL;
        }
        s->xfer_blocks = arr;
        s->xfer_blocks[s->nxfer_blocks++] = blk;
        for (int i = 0; i < nb; i++) {
            blk[i].next = s->free_xfers;
            s->free_xfers = &blk[i];
        }
    }
    struct xfer *x = s->free_xfers;
    s->free_xfers = x->next;
    x->next = NULL;
    x->done = xfer_done;
    x->owner = s;
    return x;
}

static void xfer_put(struct sched *s, struct xfer *x)
{
    x->next = s->free_xfers;
    s->free_xfers = x;
}

static void peer_desc(const struct sched *s, int rank, char *buf, size_t len)
{
    int tp = s->env.peer_map ? s->env.peer_map[rank] : rank;
    if (s->env.tp) {
        char name[160];
        s->env.tp->ops->peer_name(s->env.tp, tp, name, sizeof(name));
        snprintf(buf, len, "rank %d (%s)", rank, name);
    } else {
        snprintf(buf, len, "rank %d", rank);
    }
}

static void xfer_done(struct xfer *x, fc_result_t status, size_t len)
{
    struct sched *s = x->owner;
    struct sched_step *st = &s->steps[x->step];
    s->xfers_out--;
    st->inflight--;
    s->progress_events++;
    if (s->status != FC_SUCCESS) {
        /* a failed schedule only drains (it may belong to a communicator
         * already aborted and freed, whose peers are no longer there to name) */
        xfer_put(s, x);
        return;
    }
    if (status == FC_SUCCESS && x->is_send == 0 && len != x->len) {
        char pd[200];
        peer_desc(s, st->peer, pd, sizeof(pd));
        sched_fail(s, FC_ERR_INVALID_ARGUMENT,
                   "%s (%s): %s sent %zu bytes where %zu were expected (step %u, chunk %u): do "
                   "all ranks pass the same count, datatype and root?",
                   s->coll_name, s->algo_name, pd, len, x->len, x->step, x->chunk);
        status = FC_ERR_INVALID_ARGUMENT;
    } else if (status != FC_SUCCESS) {
        char pd[200];
        peer_desc(s, st->peer, pd, sizeof(pd));
        s->truncated |= s->status == FC_SUCCESS && x->truncated;
        if (x->is_send == 2)
            sched_fail(s, status, "%s (%s): local step %u on the GPU failed: %s", s->coll_name,
                       s->algo_name, x->step,
                       x->errmsg && *x->errmsg ? x->errmsg : fc_strerror(status));
        else
            sched_fail(s, status, "%s (%s): %s %s failed: %s", s->coll_name, s->algo_name,
                       x->is_send ? "send to" : "receive from", pd,
                       x->errmsg && *x->errmsg ? x->errmsg : fc_strerror(status));
    }
    if (status == FC_SUCCESS && x->is_send == 0 && st->value && st->got != st->val) {
        char pd[200];
        peer_desc(s, st->peer, pd, sizeof(pd));
        int sends = st->value == SV_SEND_COUNT;
        if (st->value == SV_SIGNATURE) {
            char mine[160], theirs[160];
            if (s->sig_desc) {
                s->sig_desc(st->val, mine, sizeof(mine));
                s->sig_desc(st->got, theirs, sizeof(theirs));
            } else {
                snprintf(mine, sizeof(mine), "%#llx", (unsigned long long)st->val);
                snprintf(theirs, sizeof(theirs), "%#llx", (unsigned long long)st->got);
            }
            sched_fail(s, FC_ERR_INVALID_ARGUMENT,
                       "%s: %s called %s where this rank called %s: every rank must make the "
                       "same call (collective, count, datatype, op and root)",
                       s->coll_name, pd, theirs, mine);
        } else
        sched_fail(s, FC_ERR_INVALID_ARGUMENT,
                   "%s: %s %s %llu bytes where this %s %llu: the counts (times the datatypes' "
                   "sizes) of a send and its receive must be equal",
                   s->coll_name, pd, sends ? "sends" : "expects", (unsigned long long)st->got,
                   sends ? "receive expects" : "send has", (unsigned long long)st->val);
        status = FC_ERR_INVALID_ARGUMENT;
    }
    uint32_t step = x->step, chunk = x->chunk;
    xfer_put(s, x);
    if (status != FC_SUCCESS)
        return;
    chunk_done(s, step, chunk);
    push(s, step);
}

static void do_local(struct sched *s, struct sched_step *st, uint32_t k)
{
    size_t c = s->env.chunk_bytes ? s->env.chunk_bytes : st->len;
    size_t off = (size_t)k * c;
    size_t len = chunk_len(s, st, k);
    char *dst = ptr_of(s, st->dst, off);
    switch (st->op) {
    case SOP_REDUCE:
        if (st->pmul)
            reduce_premul_sum(s->dt, st->pmul, dst, ptr_of(s, st->a, off), ptr_of(s, st->b, off),
                              len / s->esize, s->premul);
        else
            s->rfn(dst, ptr_of(s, st->a, off), ptr_of(s, st->b, off), len / s->esize);
        break;
    case SOP_COPY: {
        char *src = ptr_of(s, st->a, off);
        if (src != dst)
            memmove(dst, src, len);
        break;
    }
    case SOP_SCALE:
        s->sfn(dst, dst, len / s->esize, (uint32_t)s->nranks);
        break;
    case SOP_PREMUL:
        s->pfn(dst, ptr_of(s, st->a, off), len / s->esize, s->premul);
        break;
    case SOP_REDUCE_ALL: {
        /* the one loop over n vectors, the transports' too */
        struct local_op lo = {.kind = LOCAL_REDUCE_ALL, .dst = dst, .a = ptr_of(s, st->a, off),
                              .len = len, .dt = s->dt, .op = s->op, .nvec = s->nranks,
                              .first = st->peer, .stride = st->len};
        transport_local_host(&lo);
        break;
    }
    default:
        break;
    }
}

static void try_issue(struct sched *s, uint32_t i)
{
    struct sched_step *st = &s->steps[i];
    if (st->complete || st->nfull_unmet > 0)
        return;
    if (st->nchunks == 0) {
        complete_step(s, i);
        return;
    }
    while (st->issued < st->nchunks && s->status == FC_SUCCESS) {
        uint32_t k = st->issued;
        /* the window bounds chunks in flight, and the distance to the
         * oldest unfinished chunk (winmask has 64 bits; tags wrap at 2048) */
        if (is_xfer(st) && (st->inflight >= (uint32_t)s->env.window || k - st->prefix >= 64))
            return;
        if (!chunk_ready(s, st, k))
            return;
        struct transport *tp = s->env.tp;
        int tp_local = tp && (tp->ops->flags & TRANSPORT_RUNS_LOCAL) && st->op != SOP_NOP;
        if (!is_xfer(st) && !tp_local) {
            do_local(s, st, k);
            st->issued++;
            chunk_done(s, i, k);
            continue;
        }
        if (!is_xfer(st) && k - st->prefix >= 64)
            return; /* asynchronous local chunks share the 64-chunk bitmap */
        struct xfer *x = xfer_get(s);
        if (!x) {
            sched_fail(s, FC_ERR_NO_MEMORY, "%s: out of memory for transfer descriptors",
                       s->coll_name);
            return;
        }
        size_t c = s->env.chunk_bytes ? s->env.chunk_bytes : st->len;
        size_t off = (size_t)k * c;
        x->step = i;
        x->chunk = k;
        x->len = chunk_len(s, st, k);
        x->peer = st->peer < 0 ? -1 : s->env.peer_map ? s->env.peer_map[st->peer] : st->peer;
        uint64_t base = s->env.tag_base;
        if (st->value == SV_SIGNATURE)
            base = (base & ~(3ull << 46)) | (TAG_KIND_SIG << 46);
        x->tag = base | ((uint64_t)st->tag << 12) | (k & XFER_TAG_CHUNK_MASK);
        x->is_send = st->op == SOP_SEND;
        x->delivery = s->env.delivery;
        x->errmsg = NULL;
        x->truncated = 0;
        fc_result_t rc;
        if (!is_xfer(st)) {
            /* an asynchronous local step (the transport runs it on a GPU) */
            struct local_op lo = {
                .kind = st->op == SOP_REDUCE       ? LOCAL_REDUCE
                        : st->op == SOP_COPY       ? LOCAL_COPY
                        : st->op == SOP_REDUCE_ALL ? LOCAL_REDUCE_ALL
                        : st->op == SOP_PREMUL     ? LOCAL_PREMUL
                                                   : LOCAL_SCALE,
                .dst = ptr_of(s, st->dst, off),
                .a = ptr_of(s, st->a, off),
                .b = st->op == SOP_REDUCE ? ptr_of(s, st->b, off) : NULL,
                .len = x->len,
                .dt = s->dt,
                .op = s->op,
                .divisor = (uint32_t)s->nranks,
                .nvec = st->op == SOP_REDUCE_ALL ? s->nranks : 0,
                .first = st->op == SOP_REDUCE_ALL ? st->peer : 0,
                .stride = st->len,
                .scalar = s->premul,
                .pmul = st->op == SOP_REDUCE ? st->pmul : 0,
                .call = s->env.call,
            };
            x->is_send = 2;
            x->peer = -1;
            x->buf = lo.dst;
            rc = tp->ops->local(tp, &lo, x);
        } else if (x->is_send) {
            x->buf = st->value ? (void *)&st->val : ptr_of(s, st->a, off);
            rc = tp->ops->send(tp, x->peer, x->tag, x->buf, x->len, x);
        } else {
            x->buf = st->value ? (void *)&st->got : ptr_of(s, st->dst, off);
            size_t plen = st->nchunks == 1 && st->post_len > x->len ? st->post_len : x->len;
            rc = tp->ops->recv(tp, x->peer, x->tag, x->buf, plen, x);
        }
        if (rc == FC_AGAIN) {
            xfer_put(s, x);
            s->stalled[s->nstalled++] = i;
            return;
        }
        if (rc != FC_SUCCESS) {
            xfer_put(s, x);
            char pd[200];
            if (!is_xfer(st)) {
                sched_fail(s, rc, "%s (%s): starting local step %u failed: %s", s->coll_name,
                           s->algo_name, i, err_get());
                return;
            }
            peer_desc(s, st->peer, pd, sizeof(pd));
            sched_fail(s, rc, "%s (%s): posting %s %s failed: %s", s->coll_name, s->algo_name,
                       st->op == SOP_SEND ? "send to" : "receive from", pd, err_get());
            return;
        }
        s->xfers_out++;
        st->inflight++;
        if (st->issued == 0 && s->env.prof && is_xfer(st))
            s->env.prof(s->env.prof_ctx, 1, s, i);
        st->issued++;
    }
}

/* The run state of every step from the dependency arrays (first run and
 * every restart alike), and the steps without predecessors queued. */
static void begin_run(struct sched *s)
{
    s->ndone = s->nwork = s->nswork = s->nstalled = 0;
    for (uint32_t i = 0; i < s->nsteps; i++) {
        struct sched_step *st = &s->steps[i];
        st->queued = st->complete = 0;
        st->issued = st->inflight = st->prefix = 0;
        st->winmask = 0;
        st->nfull_unmet = 0;
        for (uint32_t e = st->pred_first; e < st->pred_first + st->npred; e++)
            if (!s->preds[e].chunked)
                st->nfull_unmet++;
    }
    for (uint32_t i = 0; i < s->nsteps; i++)
        if (s->steps[i].npred == 0)
            push(s, i);
}

fc_result_t sched_start(struct sched *s, const struct sched_env *env, void *sendbuf, void *recvbuf)
{
    if (s->build_err)
        return s->build_err;
    s->env = *env;
    if (s->env.window < 1)
        s->env.window = 1;
    if (s->env.window > 64)
        s->env.window = 64;
    s->env.chunk_bytes = chunk_round(s->env.chunk_bytes);
    s->rfn = reduce_fn_get(s->dt, s->op);
    s->sfn = reduce_scale_get(s->dt);
    s->pfn = reduce_premul_get(s->dt);
    s->base[R_SEND] = sendbuf;
    s->base[R_RECV] = recvbuf;
    s->status = FC_SUCCESS;
    s->truncated = 0;
    uint32_t n = s->nsteps;
    /* zero-length steps wait for chunked predecessors in full */
    /* a chunked edge needs data on both ends: with an empty step (or a
     * signal) on either side it means "after", i.e. a full dependency */
    for (uint32_t e = 0; e < s->nedges; e++) {
        const struct sched_step *d = &s->steps[s->edges[e].step], *p = &s->steps[s->edges[e].pred];
        if (d->len == 0 || p->len == 0 || p->zmsg)
            s->edges[e].chunked = 0;
    }
    s->preds = malloc(((size_t)s->nedges + 1) * sizeof(*s->preds));
    s->succs = malloc(((size_t)s->nedges + 1) * sizeof(*s->succs));
    s->work = malloc(((size_t)n + 1) * sizeof(*s->work));
    s->swork = malloc(((size_t)n + 1) * sizeof(*s->swork));
    s->stalled = malloc(((size_t)n + 1) * sizeof(*s->stalled));
    if (!s->preds || !s->succs || !s->work || !s->swork || !s->stalled)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory starting a %u-step schedule", n);
    for (uint32_t e = 0; e < s->nedges; e++) {
        s->steps[s->edges[e].step].npred++;
        s->steps[s->edges[e].pred].nsucc++;
    }
    uint32_t pf = 0, sf = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct sched_step *st = &s->steps[i];
        st->pred_first = pf;
        st->succ_first = sf;
        pf += st->npred;
        sf += st->nsucc;
        st->npred = st->nsucc = 0;
        st->nchunks = st->len == 0 ? st->zmsg : nchunks_of(st->len, s->env.chunk_bytes);
    }
    for (uint32_t e = 0; e < s->nedges; e++) {
        struct sched_step *dep = &s->steps[s->edges[e].step];
        struct sched_step *pred = &s->steps[s->edges[e].pred];
        s->preds[dep->pred_first + dep->npred].step = s->edges[e].pred;
        s->preds[dep->pred_first + dep->npred].chunked = s->edges[e].chunked;
        dep->npred++;
        s->succs[pred->succ_first + pred->nsucc].step = s->edges[e].step;
        s->succs[pred->succ_first + pred->nsucc].chunked = s->edges[e].chunked;
        pred->nsucc++;
    }
    if (s->scratch_bytes) {
        struct transport *tp = s->env.tp;
        if (tp) {
            s->scratch = tp->ops->mem_alloc(tp, s->scratch_bytes);
            s->scratch_from_tp = s->scratch != NULL;
        }
        if (!s->scratch && posix_memalign(&s->scratch, 64, s->scratch_bytes) != 0)
            s->scratch = NULL;
        if (!s->scratch)
            return FC_ERR(FC_ERR_NO_MEMORY, "%s: cannot allocate %zu bytes of scratch",
                          s->coll_name, s->scratch_bytes);
    }
    s->base[R_SCRATCH] = s->scratch;
    begin_run(s);
    return FC_SUCCESS;
}

fc_result_t sched_restart(struct sched *s, uint64_t tag_base, void *sendbuf, void *recvbuf)
{
    if (s->status != FC_SUCCESS || s->xfers_out != 0 || !sched_done(s))
        return FC_ERR(FC_ERR_INTERNAL, "%s: restarting a schedule that did not finish cleanly",
                      s->coll_name);
    s->env.tag_base = tag_base;
    s->base[R_SEND] = sendbuf;
    s->base[R_RECV] = recvbuf;
    s->progress_events = 0;
    s->errmsg[0] = '\0';
    begin_run(s);
    return FC_SUCCESS;
}

fc_result_t sched_advance(struct sched *s)
{
    if (s->status != FC_SUCCESS)
        return s->status;
    uint32_t nst = s->nstalled;
    s->nstalled = 0;
    for (uint32_t j = 0; j < nst; j++)
        push(s, s->stalled[j]);
    /* Sends first: posting a receive can complete it inline (libfabric shm
     * copies a matching unexpected message inside fi_trecv), and a peer
     * waiting for our send would wait for that copy too. */
    while ((s->nswork > 0 || s->nwork > 0) && s->status == FC_SUCCESS) {
        uint32_t i = s->nswork > 0 ? s->swork[--s->nswork] : s->work[--s->nwork];
        s->steps[i].queued = 0;
        try_issue(s, i);
        if (s->nstalled)
            break; /* out of transport resources: progress first */
    }
    /* steps still in the worklist stay queued for the next call */
    return s->status;
}

void sched_xfer_shapes(const struct sched *s, size_t chunk,
                       void (*fn)(void *arg, size_t chunk_len, uint32_t nchunks, int recv),
                       void *arg)
{
    chunk = chunk_round(chunk); /* as sched_start will cut */
    for (uint32_t i = 0; i < s->nsteps; i++) {
        const struct sched_step *st = &s->steps[i];
        if (!is_xfer(st) || st->len == 0)
            continue;
        int recv = st->op == SOP_RECV;
        uint32_t n = nchunks_of(st->len, chunk);
        if (n == 1) {
            fn(arg, st->post_len > st->len ? st->post_len : st->len, 1, recv);
            continue;
        }
        /* The last chunk of a length that is not a multiple of the chunk
         * is shorter, and a stager may hold a short chunk in a buffer of
         * another kind than the full ones (gpu_tp: pinned buffers of 64 KiB
         * for chunks up to 64 KiB, of the chunk size above). So it is
         * reported as one chunk of its own length: a stream-ordered
         * request, which may not allocate once its kernel runs, would
         * otherwise wait for ever for a buffer of a kind nothing set aside
         * (every size whose steps end in a chunk of 64 KiB or less). */
        size_t tail = st->len - (size_t)(n - 1) * chunk;
        if (tail == chunk) {
            fn(arg, chunk, n, recv);
        } else {
            fn(arg, chunk, n - 1, recv);
            fn(arg, tail, 1, recv);
        }
    }
}

void sched_describe_wait(const struct sched *s, char *buf, size_t len)
{
    size_t o = 0;
    int shown = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < s->nsteps && o + 80 < len; i++) {
        const struct sched_step *st = &s->steps[i];
        if (!is_xfer(st) || st->complete || st->inflight == 0)
            continue;
        if (shown == 8) {
            o += (size_t)snprintf(buf + o, len - o, ", ...");
            break;
        }
        o += (size_t)snprintf(buf + o, len - o, "%srank %d (%s, step %u)", shown ? ", " : "",
                              st->peer, st->op == SOP_SEND ? "send" : "recv", i);
        shown++;
    }
    if (!shown)
        snprintf(buf, len, "no transfer posted (%u of %u steps done)", s->ndone, s->nsteps);
}

int sched_waiting_for(const struct sched *s, int *peers, int max)
{
    int n = 0;
    for (uint32_t i = 0; i < s->nsteps; i++) {
        const struct sched_step *st = &s->steps[i];
        if (!is_xfer(st) || st->complete || st->inflight == 0)
            continue;
        int seen = 0;
        for (int k = 0; k < n && !seen; k++)
            seen = peers[k] == st->peer;
        if (!seen && n < max)
            peers[n++] = st->peer;
    }
    return n;
}

void sched_release(struct sched *s)
{
    if (s->scratch) {
        if (s->scratch_from_tp)
            s->env.tp->ops->mem_free(s->env.tp, s->scratch, s->scratch_bytes);
        else
            free(s->scratch);
    }
    for (uint32_t i = 0; i < s->nxfer_blocks; i++)
        free(s->xfer_blocks[i]);
    free(s->xfer_blocks);
    free(s->steps);
    free(s->edges);
    free(s->preds);
    free(s->succs);
    free(s->work);
    free(s->swork);
    free(s->stalled);
    memset(s, 0, sizeof(*s));
}
