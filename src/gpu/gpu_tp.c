/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The device-memory transport: a struct transport that wraps the fabric's
 * and adds what device buffers need, chunk by chunk, so the engine and the
 * algorithms stay the same for host and device memory.
 *
 *  - gdr tier (the provider registers device memory, FI_HMEM): sends and
 *    receives pass straight through with device pointers;
 *  - staged tier: a send from device memory first copies the chunk into a
 *    pinned host bounce buffer (D2H on its own stream), then sends the
 *    bounce buffer; a receive into device memory lands in a bounce buffer
 *    and is copied up (H2D on another stream). With the engine's window of
 *    chunks in flight, the copies of one chunk overlap the transfers of the
 *    others (ping-pong buffers);
 *  - local steps (reduce, copy, scale) touching device memory run as CUDA
 *    kernels on a compute stream and complete when their event does;
 *    device data is never reduced on the host. Host operands of a mixed
 *    step are copied to device temporaries first.
 * Scratch memory of device collectives is device memory.
 *
 * Completion in stream order (chunks of at most EARLY_MAX bytes): the host
 * waits for the GPU only where the fabric needs the bytes (before a staged
 * send or a gdr post of device memory) and at the end of a collective.
 * A staged receive's H2D copy and a local step on device operands are
 * queued on the compute stream and reported done at once; whatever the
 * engine starts next on the device is ordered after them by the GPU:
 * later compute work by the stream itself, copies on the other streams by
 * a stream wait on the newest such event, and fabric posts of device
 * memory wait for that event on the host. A collective finishes only when
 * the transport is idle (gt_idle). Each small step then costs the GPU's
 * queue, not a host round trip per step: on an H200 a copy or kernel seen
 * done by the host takes 6-9 us, the same chained on the GPU adds ~3-5.
 *
 * Deferred copies (staged receives of at most DEFER_MAX bytes): the bytes
 * stay in the pinned bounce buffer, which kernels read in place (pinned
 * memory has the same address on the device under UVA), and the H2D copy
 * is made only when something needs the device copy: a staged send or gdr
 * post of it, a read not wholly inside it, or, when the collective ends,
 * the caller's buffer. A receive into scratch that only a reduction reads
 * (2-rank allreduce) is never copied up: 1.3 us of API call and ~2 us on
 * the GPU less per step on an H200. Deferred ranges never overlap: a write
 * over one drops it (wholly covered) or copies it up first (partly).
 *
 * Lanes (stream-ordered requests, comm_gpu.c): a lane is a gpu_tp of its
 * own per caller stream whose d2h, h2d and comp streams are one executor
 * stream (gpu.h): its copies and kernels become commands that one kernel
 * of ours, on the caller's stream, runs in order. Everything above holds
 * with the three streams merged (waits between them are no-ops). Lanes
 * share their parent's inner transport; the parent's progress and wait
 * drive them. A lane has pools of its own, filled at each call for what
 * the request can hold at once (gpu_tp_lane_reserve): the progress thread
 * makes no CUDA allocation for it (an application's cuMemFree, which waits
 * for the whole device, holds the lock such a call needs, and the device
 * would wait for the progress thread: a deadlock).
 */
#define _GNU_SOURCE
#include "gpu_tp.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "reduce.h"

enum pkind {
    P_SEND_D2H,
    P_SEND_POSTED,
    P_RECV_POSTED,
    P_RECV_H2D,
    P_LOCAL,
    P_HOST_DONE,
    P_DIRECT_WAIT, /* a fabric post of device memory waiting for queued GPU work */
    P_DEFERRED,    /* a staged receive whose H2D copy is deferred (see above) */
};

/* chunks up to this complete in stream order (see above) */
#define EARLY_MAX ((size_t)256 << 10)
/* staged receives up to this stay in their bounce buffer (see above) */
#define DEFER_MAX ((size_t)64 << 10)
/* scratch allocations tracked for deferred receives (more: copied up) */
#define SCRATCH_MAX 16

struct pend {
    int kind;
    struct gpu_tp *g;
    struct xfer *x;       /* the engine's */
    struct xfer ix;       /* ours, for the inner transport */
    gpu_event_t *ev;
    void *bounce;         /* pinned host */
    struct bpool *bpool;  /* where it goes back */
    void *tmp[3];         /* device temporaries of a mixed local step */
    size_t tmplen;
    void *dst;            /* H2D target */
    void *buf;            /* P_DIRECT_WAIT: the device buffer to post */
    size_t len;
    int peer;
    uint64_t tag;
    fc_result_t status;
    struct pend *next;
};

#define SMALL_BOUNCE ((size_t)64 << 10)
struct bpool {
    void **v;
    int n, cap;
};

/* device temporaries by power-of-two size class; never freed while the
 * transport lives: cuMemFree waits for the whole device, where the
 * executor kernels of stream-ordered requests wait for this very thread */
#define POOL_CLASSES 64

struct gpu_tp {
    struct transport base;
    struct transport *inner;
    int device;
    int hmem;
    size_t direct_min;     /* gdr tier: device chunks from this size go direct */
    size_t bounce_size;
    gpu_stream_t *d2h, *h2d, *comp;
    struct pend *pending;  /* waiting for the GPU or for the inner transport */
    struct pend *early;    /* reported done, still running on comp */
    struct pend *deferred; /* P_DEFERRED, disjoint ranges */
    struct {
        uintptr_t base;
        size_t len;
    } scratch[SCRATCH_MAX]; /* live scratch from mem_alloc */
    int nscratch;
    gpu_event_t *tail;     /* the newest event among them */
    fc_result_t failed;    /* an early step failed on the GPU */
    struct pend *free_pend;
    struct bpool bbig, bsmall;
    struct bpool dev[POOL_CLASSES];
    char errbuf[512];
    /* lanes (gpu_tp_lane): a lane's inner progress is its parent's; its
     * three streams are one executor stream */
    struct gpu_tp *parent, *lanes, *lane_next;
    void *caller;
    uint64_t owner; /* the calling thread's token on CUDA's per-thread stream */
    int nlanes;
    /* a lane's staging block for the host buffer of a mixed call
     * (gpu_tp_lane_stage): pinned and device, stage_len bytes each; blocks
     * outgrown stay allocated (earlier calls may still use them) */
    void *stage_h, *stage_d;
    size_t stage_len;
    struct stage_old {
        void *h, *d;
        struct stage_old *next;
    } *stage_old;
    gpu_event_t *stage_tail; /* after the last copy out of the block */
};

/* 0 when out of memory */
static int bpool_push(struct bpool *b, void *buf)
{
    if (b->n == b->cap) {
        int nc = b->cap ? b->cap * 2 : 16;
        void **n = realloc(b->v, (size_t)nc * sizeof(void *));
        if (!n)
            return 0;
        b->v = n;
        b->cap = nc;
    }
    b->v[b->n++] = buf;
    return 1;
}

static int size_class(size_t len)
{
    int c = 12;
    while (((size_t)1 << c) < len && c < 62)
        c++;
    return c;
}

/* A lane's scratch block was set aside at the call (gpu_tp_lane_reserve);
 * it allocates here only past that (a block still held by a failed
 * request's posted transfers). */
static void *dev_get(struct gpu_tp *g, size_t len)
{
    int c = size_class(len);
    if (g->dev[c].n > 0)
        return g->dev[c].v[--g->dev[c].n];
    return gpu_dev_alloc(g->device, (size_t)1 << c);
}

static void dev_put(struct gpu_tp *g, void *p, size_t len)
{
    if (!p)
        return;
    int c = size_class(len);
    if (!bpool_push(&g->dev[c], p))
        gpu_dev_free(g->device, p);
}

/* Pinned bounce buffers: chunk-sized ones, and small ones for small
 * messages (in the gdr tier chunks are megabytes, staged messages small). */
static int is_small(const struct gpu_tp *g, size_t len)
{
    return len <= SMALL_BOUNCE && g->bounce_size > SMALL_BOUNCE;
}

static struct bpool *bpool_of(struct gpu_tp *g, size_t len)
{
    return is_small(g, len) ? &g->bsmall : &g->bbig;
}

/* NULL when out of memory, or (a lane) when its reserved buffers are all
 * in use: the step then waits for one to come back (FC_AGAIN) */
static void *bounce_get(struct gpu_tp *g, struct pend *p, size_t len)
{
    struct bpool *b = bpool_of(g, len);
    p->bpool = b;
    if (b->n > 0)
        return b->v[--b->n];
    if (g->parent)
        return NULL;
    return gpu_host_alloc(g->device, b == &g->bsmall ? SMALL_BOUNCE : g->bounce_size);
}

static void bounce_put(struct bpool *b, void *buf)
{
    if (buf && !bpool_push(b, buf))
        gpu_host_free(buf);
}

static struct pend *pend_get(struct gpu_tp *g)
{
    struct pend *p = g->free_pend;
    if (p)
        g->free_pend = p->next;
    else if (!(p = malloc(sizeof(*p))))
        return NULL;
    memset(p, 0, sizeof(*p));
    p->g = g;
    return p;
}

static void pend_put(struct gpu_tp *g, struct pend *p)
{
    if (p->ev)
        gpu_event_put(p->ev);
    if (p->bounce)
        bounce_put(p->bpool, p->bounce);
    for (int i = 0; i < 3; i++)
        dev_put(g, p->tmp[i], p->tmplen);
    p->next = g->free_pend;
    g->free_pend = p;
}

static void push(struct gpu_tp *g, struct pend *p)
{
    p->next = g->pending;
    g->pending = p;
}

static void unlink_pending(struct gpu_tp *g, struct pend *p)
{
    for (struct pend **pp = &g->pending; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            return;
        }
}

/* The newest event of work reported done but still queued on comp, or
 * NULL when there is none left (then the early list is released: events of
 * one stream complete in order). */
static gpu_event_t *early_tail(struct gpu_tp *g)
{
    if (!g->early)
        return NULL;
    int d = gpu_event_done(g->tail);
    if (d == 0)
        return g->tail;
    if (d < 0 && g->failed == FC_SUCCESS) {
        g->failed = FC_ERR_CUDA;
        snprintf(g->errbuf, sizeof(g->errbuf), "a copy or kernel of an earlier step failed: %s",
                 err_get());
    }
    while (g->early) {
        struct pend *p = g->early;
        g->early = p->next;
        pend_put(g, p);
    }
    g->tail = NULL;
    return NULL;
}

/* p's work is queued on comp and recorded in p->ev: keep p until it is done */
static void early_add(struct gpu_tp *g, struct pend *p)
{
    p->next = g->early;
    g->early = p;
    g->tail = p->ev;
}

/* Orders the next work on s after the early work on comp. */
static fc_result_t after_early(struct gpu_tp *g, gpu_stream_t *s)
{
    gpu_event_t *t = early_tail(g);
    return t ? gpu_stream_wait_event(s, t) : FC_SUCCESS;
}

static fc_result_t record(struct gpu_tp *g, struct pend *p, gpu_stream_t *s);

static int overlaps(const struct pend *d, const void *b, size_t len)
{
    uintptr_t d0 = (uintptr_t)d->dst, b0 = (uintptr_t)b;
    return b0 < d0 + d->len && d0 < b0 + len;
}

static int inside(const void *b, size_t len, uintptr_t base, size_t blen)
{
    uintptr_t b0 = (uintptr_t)b;
    return b0 >= base && b0 + len <= base + blen;
}

/* Where the bytes of [b, b+len) are, when one deferred receive holds them
 * all: its bounce buffer; else b. */
static const void *alias(struct gpu_tp *g, const void *b, size_t len)
{
    for (struct pend *d = g->deferred; d; d = d->next)
        if (inside(b, len, (uintptr_t)d->dst, d->len))
            return (const char *)d->bounce + ((uintptr_t)b - (uintptr_t)d->dst);
    return b;
}

/* Ends deferral of d (unlinked): copies it up when copy, and keeps its
 * bounce buffer until the compute stream is past every kernel that read it. */
static fc_result_t retire(struct gpu_tp *g, struct pend *d, int copy)
{
    fc_result_t rc = copy ? gpu_memcpy_async(d->dst, d->bounce, d->len, g->comp) : FC_SUCCESS;
    if (rc == FC_SUCCESS)
        rc = record(g, d, g->comp);
    if (rc != FC_SUCCESS) {
        if (g->failed == FC_SUCCESS) {
            g->failed = rc;
            snprintf(g->errbuf, sizeof(g->errbuf), "%s", err_get());
        }
        return rc; /* the context is broken: d stays unreleased */
    }
    d->kind = P_RECV_H2D;
    early_add(g, d);
    return FC_SUCCESS;
}

/* Before [b, b+len) is read other than by a kernel through alias(): every
 * deferred receive overlapping it is copied up. */
static fc_result_t settle_read(struct gpu_tp *g, const void *b, size_t len)
{
    fc_result_t rc = FC_SUCCESS;
    for (struct pend **pp = &g->deferred; *pp && rc == FC_SUCCESS;) {
        struct pend *d = *pp;
        if (overlaps(d, b, len)) {
            *pp = d->next;
            rc = retire(g, d, 1);
        } else {
            pp = &d->next;
        }
    }
    return rc;
}

/* Around a write of [b, b+len): before it (!after), deferred receives it
 * covers only partly are copied up; after it, those it covers wholly are
 * dropped (their bytes are dead). */
static fc_result_t settle_write(struct gpu_tp *g, const void *b, size_t len, int after)
{
    fc_result_t rc = FC_SUCCESS;
    for (struct pend **pp = &g->deferred; *pp && rc == FC_SUCCESS;) {
        struct pend *d = *pp;
        int whole = inside(d->dst, d->len, (uintptr_t)b, len);
        if (overlaps(d, b, len) && whole == after) {
            *pp = d->next;
            rc = retire(g, d, !whole);
        } else {
            pp = &d->next;
        }
    }
    return rc;
}

/* A receive landing on [b, b+len) (not a kernel of ours, which reads
 * through alias() first): both sides of settle_write at once. */
static fc_result_t settle_overwrite(struct gpu_tp *g, const void *b, size_t len)
{
    fc_result_t rc = settle_write(g, b, len, 0);
    return rc == FC_SUCCESS ? settle_write(g, b, len, 1) : rc;
}

/* GPU_HOST, GPU_DEVICE or GPU_MANAGED */
static int kind_of(const void *p)
{
    struct gpu_ptr pi;
    if (!p || gpu_ptr_info(p, &pi) != FC_SUCCESS)
        return GPU_HOST;
    return pi.kind;
}

/* Straight to the fabric: host memory, and device memory in the gdr tier
 * (managed memory is always staged: providers register device memory).
 * 2: device memory, which early work on the GPU may still be using. */
static int direct(const struct gpu_tp *g, const void *buf, size_t len, const struct xfer *x)
{
    if (len == 0)
        return 1;
    int k = kind_of(buf);
    if (k == GPU_HOST)
        return 1;
    if (!g->hmem || k != GPU_DEVICE)
        return 0;
    /* below direct_min the provider's eager path would carry it: staged */
    return x->delivery || (g->direct_min && len >= g->direct_min) ? 2 : 0;
}

static fc_result_t record(struct gpu_tp *g, struct pend *p, gpu_stream_t *s)
{
    fc_result_t rc = gpu_event_get(g->device, &p->ev);
    if (rc == FC_SUCCESS)
        rc = gpu_event_record(p->ev, s);
    return rc;
}

/* ---- inner-transport callbacks -------------------------------------------- */

static void ix_send_done(struct xfer *ix, fc_result_t st, size_t len)
{
    struct pend *p = ix->owner;
    p->x->errmsg = ix->errmsg;
    struct xfer *x = p->x;
    struct gpu_tp *g = p->g;
    /* unlink: it is on the pending list as P_SEND_POSTED */
    unlink_pending(g, p);
    pend_put(g, p);
    x->done(x, st, len);
}

static void ix_recv_done(struct xfer *ix, fc_result_t st, size_t len)
{
    struct pend *p = ix->owner;
    struct gpu_tp *g = p->g;
    if (st != FC_SUCCESS) {
        unlink_pending(g, p);
        struct xfer *x = p->x;
        x->errmsg = ix->errmsg;
        x->truncated = ix->truncated;
        pend_put(g, p);
        x->done(x, st, 0);
        return;
    }
    /* the chunk is in the bounce buffer: copy it up; a small one completes
     * in stream order on comp, a large one on its event (h2d overlaps) */
    p->len = len;
    if (len <= DEFER_MAX) {
        /* kept in the bounce buffer; it replaces older deferred bytes */
        unlink_pending(g, p);
        struct xfer *x = p->x;
        fc_result_t rc = settle_overwrite(g, p->dst, len);
        if (rc != FC_SUCCESS) {
            x->errmsg = g->errbuf;
            pend_put(g, p);
            x->done(x, rc, 0);
            return;
        }
        p->kind = P_DEFERRED;
        p->next = g->deferred;
        g->deferred = p;
        x->done(x, FC_SUCCESS, len);
        return;
    }
    int early = len <= EARLY_MAX;
    gpu_stream_t *s = early ? g->comp : g->h2d;
    p->status = FC_SUCCESS;
    if (g->deferred) /* deferred bytes there: dead, or partly copied up first */
        p->status = settle_overwrite(g, p->dst, len);
    if (!early && p->status == FC_SUCCESS)
        p->status = after_early(g, s); /* early kernels may read dst */
    if (p->status == FC_SUCCESS)
        p->status = gpu_memcpy_async(p->dst, p->bounce, len, s);
    if (p->status == FC_SUCCESS)
        p->status = record(g, p, s);
    p->kind = P_RECV_H2D;
    if (p->status != FC_SUCCESS) {
        snprintf(g->errbuf, sizeof(g->errbuf), "%s", err_get());
        return;
    }
    if (early) {
        unlink_pending(g, p);
        struct xfer *x = p->x;
        early_add(g, p);
        x->done(x, FC_SUCCESS, len);
    }
}

/* A fabric post of device memory after early GPU work: waits (on the host)
 * for an event recorded behind that work. */
static fc_result_t direct_after_early(struct gpu_tp *g, int is_send, int peer, uint64_t tag,
                                      void *buf, size_t len, struct xfer *x)
{
    struct pend *p = pend_get(g);
    if (!p)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    p->kind = P_DIRECT_WAIT;
    p->x = x;
    p->ix.is_send = is_send;
    p->peer = peer;
    p->tag = tag;
    p->buf = buf;
    p->len = len;
    fc_result_t rc = record(g, p, g->comp);
    if (rc != FC_SUCCESS) {
        pend_put(g, p);
        return rc;
    }
    push(g, p);
    return FC_SUCCESS;
}

/* ---- transport ops ----------------------------------------------------------- */

static fc_result_t gt_send(struct transport *t, int peer, uint64_t tag, const void *buf,
                           size_t len, struct xfer *x)
{
    struct gpu_tp *g = (struct gpu_tp *)t;
    int dir = direct(g, buf, len, x);
    if (dir != 1 && g->deferred) {
        fc_result_t rc = settle_read(g, buf, len);
        if (rc != FC_SUCCESS)
            return rc;
    }
    if (dir == 2 && early_tail(g))
        return direct_after_early(g, 1, peer, tag, (void *)buf, len, x);
    if (dir)
        return g->inner->ops->send(g->inner, peer, tag, buf, len, x);
    if (len > g->bounce_size)
        return FC_ERR(FC_ERR_INTERNAL, "a %zu-byte chunk exceeds the %zu-byte bounce buffers", len,
                      g->bounce_size);
    struct pend *p = pend_get(g);
    if (!p || !(p->bounce = bounce_get(g, p, len))) {
        if (p)
            pend_put(g, p);
        if (p && g->parent)
            return FC_AGAIN;
        return FC_ERR(FC_ERR_NO_MEMORY, "out of pinned memory for staging a send (%zu bytes)",
                      len);
    }
    p->kind = P_SEND_D2H;
    p->x = x;
    p->len = len;
    p->peer = peer;
    p->tag = tag;
    p->ix.delivery = x->delivery;
    fc_result_t rc = after_early(g, g->d2h);
    if (rc == FC_SUCCESS)
        rc = gpu_memcpy_async(p->bounce, buf, len, g->d2h);
    if (rc == FC_SUCCESS)
        rc = record(g, p, g->d2h);
    if (rc != FC_SUCCESS) {
        pend_put(g, p);
        return rc;
    }
    push(g, p);
    return FC_SUCCESS;
}

static fc_result_t gt_recv(struct transport *t, int peer, uint64_t tag, void *buf, size_t len,
                           struct xfer *x)
{
    struct gpu_tp *g = (struct gpu_tp *)t;
    int dir = direct(g, buf, len, x);
    if (dir == 2 && g->deferred) {
        /* the fabric writes it: deferred bytes there are dead or go first */
        fc_result_t rc = settle_overwrite(g, buf, len);
        if (rc != FC_SUCCESS)
            return rc;
    }
    if (dir == 2 && early_tail(g))
        return direct_after_early(g, 0, peer, tag, buf, len, x);
    if (dir)
        return g->inner->ops->recv(g->inner, peer, tag, buf, len, x);
    if (len > g->bounce_size)
        return FC_ERR(FC_ERR_INTERNAL, "a %zu-byte chunk exceeds the %zu-byte bounce buffers", len,
                      g->bounce_size);
    struct pend *p = pend_get(g);
    if (!p || !(p->bounce = bounce_get(g, p, len))) {
        if (p)
            pend_put(g, p);
        if (p && g->parent)
            return FC_AGAIN;
        return FC_ERR(FC_ERR_NO_MEMORY, "out of pinned memory for staging a receive");
    }
    p->kind = P_RECV_POSTED;
    p->x = x;
    p->dst = buf;
    p->ix.done = ix_recv_done;
    p->ix.owner = p;
    p->ix.peer = peer;
    p->ix.is_send = 0;
    p->ix.len = x->len; /* expected; len is what the buffer takes */
    p->ix.delivery = x->delivery;
    fc_result_t rc = g->inner->ops->recv(g->inner, peer, tag, p->bounce, len, &p->ix);
    if (rc != FC_SUCCESS) {
        pend_put(g, p);
        return rc;
    }
    push(g, p);
    return FC_SUCCESS;
}

static void host_local(const struct local_op *lo)
{
    size_t cnt = lo->len / fc_datatype_size(lo->dt);
    if (lo->kind == LOCAL_REDUCE)
        reduce_fn_get(lo->dt, lo->op)(lo->dst, lo->a, lo->b, cnt);
    else if (lo->kind == LOCAL_COPY) {
        if (lo->dst != lo->a)
            memmove(lo->dst, lo->a, lo->len);
    } else
        reduce_scale_get(lo->dt)(lo->dst, lo->a, cnt, lo->divisor);
}

static fc_result_t gt_local(struct transport *t, const struct local_op *lo, struct xfer *x)
{
    struct gpu_tp *g = (struct gpu_tp *)t;
    struct pend *p = pend_get(g);
    if (!p)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    p->x = x;
    p->len = lo->len;
    int dd = gpu_on_device(lo->dst), da = gpu_on_device(lo->a);
    int db = lo->kind == LOCAL_REDUCE ? gpu_on_device(lo->b) : dd;
    if (!dd && !da && !db) {
        /* all host memory: run it now, report it at the next progress */
        host_local(lo);
        p->kind = P_HOST_DONE;
        push(g, p);
        return FC_SUCCESS;
    }
    fc_result_t rc = FC_SUCCESS;
    p->kind = P_LOCAL;
    /* device operands only, small: done in stream order (host operands are
     * read or written by the copies, so the host waits for those) */
    int early = dd && da && db && lo->len <= EARLY_MAX;
    struct pend *report = NULL;
    if (early) {
        if (!(report = pend_get(g))) {
            pend_put(g, p);
            return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
        }
        report->kind = P_HOST_DONE;
        report->x = x;
        report->len = lo->len;
    }
    /* device operands held by deferred receives are read from their bounce
     * buffers; what the step writes replaces deferred bytes */
    const void *a = lo->a, *b = lo->b;
    if (g->deferred) {
        if (da)
            a = alias(g, a, lo->len);
        if (lo->kind == LOCAL_REDUCE && db)
            b = alias(g, b, lo->len);
        if (da && a == lo->a)
            rc = settle_read(g, a, lo->len);
        if (rc == FC_SUCCESS && lo->kind == LOCAL_REDUCE && db && b == lo->b)
            rc = settle_read(g, b, lo->len);
        if (rc == FC_SUCCESS && dd)
            rc = settle_write(g, lo->dst, lo->len, 0);
    }
    if (rc != FC_SUCCESS) {
    } else if (lo->kind == LOCAL_COPY) {
        rc = gpu_memcpy_async(lo->dst, a, lo->len, g->comp);
    } else {
        /* host operands of a step on the GPU go to device temporaries */
        void *dst = lo->dst;
        p->tmplen = lo->len;
        if (!da && rc == FC_SUCCESS) {
            p->tmp[0] = dev_get(g, lo->len);
            rc = p->tmp[0] ? gpu_memcpy_async(p->tmp[0], a, lo->len, g->comp)
                           : FC_ERR(FC_ERR_CUDA, "no device memory for a temporary");
            a = p->tmp[0];
        }
        if (lo->kind == LOCAL_REDUCE && !db && rc == FC_SUCCESS) {
            p->tmp[1] = dev_get(g, lo->len);
            rc = p->tmp[1] ? gpu_memcpy_async(p->tmp[1], b, lo->len, g->comp)
                           : FC_ERR(FC_ERR_CUDA, "no device memory for a temporary");
            b = p->tmp[1];
        }
        if (!dd && rc == FC_SUCCESS) {
            p->tmp[2] = dev_get(g, lo->len);
            if (!p->tmp[2])
                rc = FC_ERR(FC_ERR_CUDA, "no device memory for a temporary");
            dst = p->tmp[2];
        }
        size_t cnt = lo->len / fc_datatype_size(lo->dt);
        if (rc == FC_SUCCESS)
            rc = lo->kind == LOCAL_REDUCE
                     ? gpu_reduce_async(dst, a, b, cnt, lo->dt, lo->op, g->comp)
                     : gpu_scale_async(dst, a, cnt, lo->dt, lo->divisor, g->comp);
        if (rc == FC_SUCCESS && !dd)
            rc = gpu_memcpy_async(lo->dst, dst, lo->len, g->comp);
    }
    if (rc == FC_SUCCESS && dd && g->deferred)
        rc = settle_write(g, lo->dst, lo->len, 1);
    if (rc == FC_SUCCESS)
        rc = record(g, p, g->comp);
    if (rc != FC_SUCCESS) {
        pend_put(g, p);
        if (report)
            pend_put(g, report);
        return rc;
    }
    if (early) {
        early_add(g, p);
        push(g, report);
    } else {
        push(g, p);
    }
    return FC_SUCCESS;
}

/* Moves g's pending work on: GPU work done, staged sends posted. */
static int walk(struct gpu_tp *g)
{
    int n = 0;
    /* collect finished GPU work first, then complete: callbacks may not see
     * a half-walked list */
    struct pend *done = NULL, **pp = &g->pending;
    while (*pp) {
        struct pend *p = *pp;
        int fin = 0;
        switch (p->kind) {
        case P_HOST_DONE: fin = 1; break;
        case P_SEND_D2H: {
            int d = gpu_event_done(p->ev);
            if (d < 0) {
                p->status = FC_ERR_CUDA;
                snprintf(g->errbuf, sizeof(g->errbuf), "%s", err_get());
                fin = 1;
            } else if (d) {
                p->ix.done = ix_send_done;
                p->ix.owner = p;
                p->ix.peer = p->peer;
                p->ix.is_send = 1;
                p->ix.len = p->len;
                fc_result_t r = g->inner->ops->send(g->inner, p->peer, p->tag, p->bounce, p->len,
                                                    &p->ix);
                if (r == FC_SUCCESS) {
                    p->kind = P_SEND_POSTED;
                } else if (r != FC_AGAIN) {
                    p->status = r;
                    snprintf(g->errbuf, sizeof(g->errbuf), "%s", err_get());
                    fin = 1;
                }
            }
            break;
        }
        case P_DIRECT_WAIT: {
            int d = gpu_event_done(p->ev);
            fc_result_t r = FC_SUCCESS;
            if (d < 0)
                r = FC_ERR_CUDA;
            else if (d)
                r = p->ix.is_send ? g->inner->ops->send(g->inner, p->peer, p->tag, p->buf,
                                                        p->len, p->x)
                                  : g->inner->ops->recv(g->inner, p->peer, p->tag, p->buf,
                                                        p->len, p->x);
            if (d && r == FC_SUCCESS) {
                /* posted: the inner transport completes the engine's xfer */
                *pp = p->next;
                pend_put(g, p);
                continue;
            }
            if (r != FC_SUCCESS && r != FC_AGAIN) {
                p->status = r;
                snprintf(g->errbuf, sizeof(g->errbuf), "%s", err_get());
                fin = 1;
            }
            break;
        }
        case P_RECV_H2D:
        case P_LOCAL: {
            if (p->status != FC_SUCCESS) {
                fin = 1;
                break;
            }
            int d = gpu_event_done(p->ev);
            if (d < 0) {
                p->status = FC_ERR_CUDA;
                snprintf(g->errbuf, sizeof(g->errbuf), "%s", err_get());
            }
            fin = d != 0;
            break;
        }
        default: break; /* posted to the inner transport: its callback finishes it */
        }
        if (fin) {
            *pp = p->next;
            p->next = done;
            done = p;
        } else {
            pp = &p->next;
        }
    }
    while (done) {
        struct pend *p = done;
        done = p->next;
        struct xfer *x = p->x;
        fc_result_t st = p->status;
        size_t len = p->len;
        if (st != FC_SUCCESS)
            x->errmsg = g->errbuf;
        pend_put(g, p);
        x->done(x, st, st == FC_SUCCESS ? len : 0);
        n++;
    }
    return n;
}

static fc_result_t gt_progress(struct transport *t, int *ncomp)
{
    struct gpu_tp *g = (struct gpu_tp *)t;
    int n = 0;
    for (struct gpu_tp *l = g; l; l = l == g ? g->lanes : l->lane_next)
        if (l->failed != FC_SUCCESS) {
            *ncomp = 0;
            return FC_ERR_QUIET(l->failed, "%s", l->errbuf);
        }
    fc_result_t rc = g->parent ? FC_SUCCESS : g->inner->ops->progress(g->inner, &n);
    if (rc != FC_SUCCESS) {
        *ncomp = n;
        return rc;
    }
    n += walk(g);
    for (struct gpu_tp *l = g->lanes; l; l = l->lane_next)
        n += walk(l);
    *ncomp = n;
    return FC_SUCCESS;
}

/* GPU work that no file descriptor will announce (under the family's
 * lock, from wait_prepare). */
static int gpu_waiting(struct gpu_tp *g)
{
    gpu_event_t *t = g->early ? g->tail : NULL;
    if (t && gpu_event_done(t) == 0)
        return 1;
    for (struct pend *p = g->pending; p; p = p->next)
        if (p->kind != P_SEND_POSTED && p->kind != P_RECV_POSTED)
            return 1;
    return 0;
}

static int gt_wait_prepare(struct transport *t, struct transport_wait *w)
{
    struct gpu_tp *g = (struct gpu_tp *)t;
    for (struct gpu_tp *l = g; l; l = l == g ? g->lanes : l->lane_next)
        if (gpu_waiting(l))
            return 0; /* the GPU signals no descriptor: yield, look again soon */
    w->layers |= TRANSPORT_LAYER_GPU;
    return transport_wait_prepare(g->inner, w);
}

static void gt_wait_end(struct transport *t, struct transport_wait *w)
{
    struct gpu_tp *g = (struct gpu_tp *)t;
    if (w->layers & TRANSPORT_LAYER_GPU) {
        w->layers &= ~TRANSPORT_LAYER_GPU;
        transport_wait_end(g->inner, w);
    }
}

/* Work reported done has finished on the GPU too: a collective may end. */
static int gt_idle(struct transport *t)
{
    struct gpu_tp *g = (struct gpu_tp *)t;
    /* deferred bytes of the caller's buffers go up now; those in scratch
     * are read by their own collective or dropped when it frees it */
    for (struct pend **pp = &g->deferred; *pp && g->failed == FC_SUCCESS;) {
        struct pend *d = *pp;
        int scratch = 0;
        for (int i = 0; i < g->nscratch && !scratch; i++)
            scratch = inside(d->dst, d->len, g->scratch[i].base, g->scratch[i].len);
        if (scratch) {
            pp = &d->next;
        } else {
            *pp = d->next;
            retire(g, d, 1);
        }
    }
    return early_tail(g) == NULL && g->failed == FC_SUCCESS;
}

static void gt_peer_name(struct transport *t, int peer, char *buf, size_t len)
{
    struct gpu_tp *g = (struct gpu_tp *)t;
    g->inner->ops->peer_name(g->inner, peer, buf, len);
}

static void *gt_mem_alloc(struct transport *t, size_t len)
{
    struct gpu_tp *g = (struct gpu_tp *)t;
    void *p = dev_get(g, len);
    if (p && g->nscratch < SCRATCH_MAX) {
        g->scratch[g->nscratch].base = (uintptr_t)p;
        g->scratch[g->nscratch++].len = len;
    }
    return p;
}

static void gt_mem_free(struct transport *t, void *p, size_t len)
{
    struct gpu_tp *g = (struct gpu_tp *)t;
    for (int i = 0; i < g->nscratch; i++)
        if (g->scratch[i].base == (uintptr_t)p) {
            g->scratch[i] = g->scratch[--g->nscratch];
            break;
        }
    /* deferred receives into it are dead */
    if (p && g->deferred)
        settle_write(g, p, len, 1);
    dev_put(g, p, len);
}

static const struct transport_ops gpu_ops = {
    .name = "gpu",
    .send = gt_send,
    .recv = gt_recv,
    .progress = gt_progress,
    .wait_prepare = gt_wait_prepare,
    .wait_end = gt_wait_end,
    .peer_name = gt_peer_name,
    .mem_alloc = gt_mem_alloc,
    .mem_free = gt_mem_free,
    .local = gt_local,
    .idle = gt_idle,
};

fc_result_t gpu_tp_create(struct transport *inner, int device, int hmem, size_t direct_min,
                          size_t bounce_size, struct gpu_tp **out)
{
    struct gpu_tp *g = calloc(1, sizeof(*g));
    if (!g)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    g->base.ops = &gpu_ops;
    g->inner = inner;
    g->device = device;
    g->hmem = hmem;
    g->direct_min = direct_min;
    g->bounce_size = bounce_size;
    fc_result_t rc = gpu_stream_create(device, &g->d2h);
    if (rc == FC_SUCCESS)
        rc = gpu_stream_create(device, &g->h2d);
    if (rc == FC_SUCCESS)
        rc = gpu_stream_create(device, &g->comp);
    if (rc != FC_SUCCESS) {
        gpu_tp_destroy(g);
        return rc;
    }
    *out = g;
    return FC_SUCCESS;
}

fc_result_t gpu_tp_order_after_default(struct gpu_tp *g)
{
    /* CUDA-aware-MPI semantics: what the caller queued on the legacy
     * default stream (cudaMemcpy from pageable memory returns before its
     * DMA is done) happens before our streams, which do not synchronize
     * with it by themselves. (Asking first whether that stream is idle
     * costs more: cuStreamQuery 1.5-1.9 us on an H200, against 0.5 us for
     * the record and the three waits.) */
    gpu_event_t *ev;
    fc_result_t rc = gpu_event_get(g->device, &ev);
    if (rc != FC_SUCCESS)
        return rc;
    rc = gpu_event_record_raw(ev, NULL);
    if (rc == FC_SUCCESS)
        rc = gpu_stream_wait_event_raw(gpu_stream_raw(g->d2h), ev);
    if (rc == FC_SUCCESS)
        rc = gpu_stream_wait_event_raw(gpu_stream_raw(g->h2d), ev);
    if (rc == FC_SUCCESS)
        rc = gpu_stream_wait_event_raw(gpu_stream_raw(g->comp), ev);
    gpu_event_put(ev); /* a recorded event may be reused: waits already queued hold */
    return rc;
}

struct transport *gpu_tp_transport(struct gpu_tp *g)
{
    return &g->base;
}

int gpu_tp_device(const struct gpu_tp *g)
{
    return g->device;
}


void gpu_tp_destroy(struct gpu_tp *g)
{
    if (!g)
        return;
    while (g->lanes) {
        struct gpu_tp *l = g->lanes;
        g->lanes = l->lane_next;
        gpu_tp_destroy(l);
    }
    gpu_stream_destroy(g->d2h);
    if (g->h2d != g->d2h)
        gpu_stream_destroy(g->h2d);
    if (g->comp != g->d2h)
        gpu_stream_destroy(g->comp);
    while (g->pending) {
        struct pend *p = g->pending;
        g->pending = p->next;
        pend_put(g, p);
    }
    while (g->early) {
        struct pend *p = g->early;
        g->early = p->next;
        pend_put(g, p);
    }
    while (g->deferred) {
        struct pend *p = g->deferred;
        g->deferred = p->next;
        pend_put(g, p);
    }
    while (g->free_pend) {
        struct pend *p = g->free_pend;
        g->free_pend = p->next;
        free(p);
    }
    if (g->stage_tail) {
        /* the copy out of the staging block may still be queued on the
         * caller's stream */
        for (int i = 0; i < 20000 && gpu_event_done(g->stage_tail) == 0; i++)
            usleep(100);
        if (gpu_event_done(g->stage_tail) == 0) {
            FC_WARN(LOG_COLL, "a stream-ordered collective's copy to a host buffer on GPU %d "
                    "has not run after 2 s: its staging memory (%zu bytes pinned, as many on "
                    "the device) is left allocated", g->device, g->stage_len);
            g->stage_h = g->stage_d = NULL;
            g->stage_old = NULL; /* left too: earlier blocks may be behind it */
        }
    }
    while (g->stage_old) {
        struct stage_old *o = g->stage_old;
        g->stage_old = o->next;
        gpu_host_free(o->h);
        gpu_dev_free(g->device, o->d);
        free(o);
    }
    gpu_host_free(g->stage_h);
    gpu_dev_free(g->device, g->stage_d);
    gpu_event_put(g->stage_tail);
    struct bpool *pools[] = {&g->bbig, &g->bsmall};
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < pools[k]->n; i++)
            gpu_host_free(pools[k]->v[i]);
        free(pools[k]->v);
    }
    for (int c = 0; c < POOL_CLASSES; c++) {
        while (g->dev[c].n > 0)
            gpu_dev_free(g->device, g->dev[c].v[--g->dev[c].n]);
        free(g->dev[c].v);
    }
    free(g);
}

/* ---- lanes: stream-ordered requests -----------------------------------------
 * The stream-ordered requests of one caller stream share a lane: a
 * gpu_tp whose copies and kernels are commands to an executor (gpu.h),
 * which one of our kernels per request runs on the caller's stream. The
 * requests of a lane run one after another, as their kernels do. */
#define LANES_MAX 32

struct gpu_tp *gpu_tp_lane(struct gpu_tp *g, void *caller, uint64_t owner)
{
    for (struct gpu_tp *l = g->lanes; l; l = l->lane_next)
        if (l->caller == caller && l->owner == owner)
            return l;
    return NULL;
}

/* Idle: every kernel it launched has left (so every request it ran has
 * finished), nothing of a failed request is still posted, and the copy
 * out of its staging block is done. */
static int lane_idle(struct gpu_tp *l)
{
    return gpu_exec_idle(l->comp) && !l->pending && !l->deferred &&
           (!l->stage_tail || gpu_event_done(l->stage_tail) > 0);
}

struct gpu_tp *gpu_tp_lane_reuse(struct gpu_tp *g, void *caller, uint64_t owner)
{
    for (struct gpu_tp *l = g->lanes; l; l = l->lane_next)
        if (lane_idle(l)) {
            FC_TRACE(LOG_COLL, "the stream executor of stream %p (idle) now serves stream %p",
                     l->caller, caller);
            l->caller = caller;
            l->owner = owner;
            return l;
        }
    return NULL;
}

int gpu_tp_lane_room(const struct gpu_tp *g)
{
    return g->nlanes < LANES_MAX;
}

struct gpu_tp *gpu_tp_lane_new(const struct gpu_tp *g, void *caller, uint64_t owner)
{
    struct gpu_tp *l = calloc(1, sizeof(*l));
    if (!l) {
        FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
        return NULL;
    }
    /* hmem 0: a lane stages every transfer through pinned memory with the
     * executor's copies, even in the gdr tier. A provider that moves
     * device memory itself does so with CUDA copies on streams of its own
     * (libfabric's shm: cudaMemcpy), which a waiting caller stream can
     * hold back in a shared hardware queue as it could ours */
    *l = (struct gpu_tp){.base = g->base, .inner = g->inner, .device = g->device,
                         .hmem = 0, .direct_min = g->direct_min,
                         .bounce_size = g->bounce_size, .parent = (struct gpu_tp *)g,
                         .caller = caller, .owner = owner};
    if (gpu_exec_create(g->device, &l->d2h) != FC_SUCCESS) {
        free(l);
        return NULL;
    }
    l->h2d = l->comp = l->d2h;
    return l;
}

void gpu_tp_lane_add(struct gpu_tp *g, struct gpu_tp *l)
{
    l->lane_next = g->lanes;
    g->lanes = l;
    g->nlanes++;
}

fc_result_t gpu_tp_lane_launch(struct gpu_tp *l, uint32_t *launch)
{
    return gpu_exec_launch(l->comp, l->caller, launch);
}

int gpu_tp_lane_started(struct gpu_tp *l, uint32_t launch)
{
    return gpu_exec_started(l->comp, launch);
}

void gpu_tp_lane_open(struct gpu_tp *l)
{
    gpu_exec_open(l->comp);
}

fc_result_t gpu_tp_lane_close(struct gpu_tp *l)
{
    return gpu_exec_close(l->comp);
}

/* A step's bounce buffers held at once: a send's, its window's (a chunk's
 * buffer returns when it is sent); a receive of chunks up to DEFER_MAX, all
 * of them (deferred, they keep the bytes until the collective ends); a
 * larger receive, twice the window's (an early chunk keeps its buffer
 * until the executor has copied it up, which needs nothing from us: a
 * request that finds none waits, it does not block). */
void gpu_tp_need_add(void *need, size_t chunk_len, uint32_t nchunks, int recv)
{
    struct gpu_tp_need *n = need;
    size_t k = nchunks, w = n->window > 0 ? (size_t)n->window : 1;
    if (!recv)
        k = k < w ? k : w;
    else if (chunk_len > DEFER_MAX)
        k = k < 2 * w ? k : 2 * w;
    if (is_small(n->lane, chunk_len))
        n->small += k;
    else
        n->big += k;
}

/* Allocates up to `want` buffers of `size` bytes into v (host: pinned,
 * else device); returns how many. */
static int alloc_some(int device, int host, size_t size, void **v, int want)
{
    int got = 0;
    while (got < want && (v[got] = host ? gpu_host_alloc(device, size)
                                        : gpu_dev_alloc(device, size)) != NULL)
        got++;
    return got;
}

fc_result_t gpu_tp_lane_reserve(struct gpu_tp *l, const struct gpu_tp_need *n, size_t scratch,
                                pthread_mutex_t *lock)
{
    int c = scratch ? size_class(scratch) : -1;
    pthread_mutex_lock(lock);
    /* short of what one request holds at most: the lane's requests run
     * one after another, each handing back all it took */
    size_t ws = n->small > (size_t)l->bsmall.n ? n->small - (size_t)l->bsmall.n : 0;
    size_t wb = n->big > (size_t)l->bbig.n ? n->big - (size_t)l->bbig.n : 0;
    int wd = c >= 0 && l->dev[c].n == 0;
    pthread_mutex_unlock(lock);
    if (!ws && !wb && !wd)
        return FC_SUCCESS;
    void **v = calloc(ws + wb + 1, sizeof(void *));
    if (!v)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    int gs = alloc_some(l->device, 1, SMALL_BOUNCE, v, (int)ws);
    int gb = gs == (int)ws ? alloc_some(l->device, 1, l->bounce_size, v + gs, (int)wb) : 0;
    int gd = gs == (int)ws && gb == (int)wb && wd ? alloc_some(l->device, 0, (size_t)1 << c,
                                                                v + gs + gb, 1)
                                                  : 0;
    fc_result_t rc = FC_SUCCESS;
    if (gs < (int)ws || gb < (int)wb || gd < wd)
        rc = FC_ERR(FC_ERR_NO_MEMORY, "cannot set aside staging memory for a stream-ordered "
                    "collective on GPU %d (%zu pinned buffers of %zu bytes, %zu of %zu, %s): %s",
                    l->device, ws, (size_t)SMALL_BOUNCE, wb, l->bounce_size,
                    wd ? "a device block" : "no device block", err_get());
    pthread_mutex_lock(lock);
    for (int i = 0; i < gs; i++)
        bounce_put(&l->bsmall, v[i]);
    for (int i = 0; i < gb; i++)
        bounce_put(&l->bbig, v[gs + i]);
    if (gd)
        dev_put(l, v[gs + gb], (size_t)1 << c);
    pthread_mutex_unlock(lock);
    free(v);
    return rc;
}

fc_result_t gpu_tp_lane_stage(struct gpu_tp *l, size_t len, void **dev)
{
    if (len > l->stage_len) {
        size_t sz = (size_t)1 << size_class(len);
        if (sz < ((size_t)64 << 10))
            sz = (size_t)64 << 10;
        void *h = gpu_host_alloc(l->device, sz), *d = h ? gpu_dev_alloc(l->device, sz) : NULL;
        struct stage_old *o = d && l->stage_h ? malloc(sizeof(*o)) : NULL;
        if (!d || (l->stage_h && !o)) {
            fc_result_t rc = FC_ERR(FC_ERR_NO_MEMORY, "cannot allocate %zu bytes of pinned and "
                                    "device memory on GPU %d to stage a host buffer of a "
                                    "stream-ordered collective: %s", sz, l->device, err_get());
            gpu_host_free(h);
            gpu_dev_free(l->device, d);
            return rc;
        }
        if (o) { /* earlier calls on the stream may still use it */
            *o = (struct stage_old){.h = l->stage_h, .d = l->stage_d, .next = l->stage_old};
            l->stage_old = o;
        }
        l->stage_h = h;
        l->stage_d = d;
        l->stage_len = sz;
    }
    *dev = l->stage_d;
    return FC_SUCCESS;
}

fc_result_t gpu_tp_lane_stage_copy(struct gpu_tp *l, void *host, size_t len, int in)
{
    if (in)
        return gpu_stage_copy(l->device, l->caller, l->stage_d, host, l->stage_h, len, 1);
    fc_result_t rc = gpu_stage_copy(l->device, l->caller, host, l->stage_d, l->stage_h, len, 0);
    if (rc == FC_SUCCESS && !l->stage_tail)
        rc = gpu_event_get(l->device, &l->stage_tail);
    if (rc == FC_SUCCESS)
        rc = gpu_event_record_raw(l->stage_tail, l->caller);
    return rc;
}
