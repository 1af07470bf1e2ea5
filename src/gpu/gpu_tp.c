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
 * Completion in stream order and deferred copies are gpu_tp_order.c's,
 * buffer pools gpu_tp_pools.c's, lanes gpu_tp_lanes.c's. This file owns
 * the transport's ops and its life; it never touches the fabric except
 * through the inner transport it wraps.
 */
#define _GNU_SOURCE
#include "gpu_tp_int.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "reduce.h"


/* ---- inner-transport callbacks -------------------------------------------- */

static void ix_send_done(struct xfer *ix, fc_result_t st, size_t len)
{
    struct pend *p = ix->owner;
    p->x->errmsg = ix->errmsg;
    struct xfer *x = p->x;
    struct gpu_tp *g = p->g;
    /* unlink: it is on the pending list as P_SEND_POSTED */
    gpu_tp_pend_unlink(g, p);
    gpu_tp_pend_put(g, p);
    x->done(x, st, len);
}

static void ix_recv_done(struct xfer *ix, fc_result_t st, size_t len)
{
    struct pend *p = ix->owner;
    struct gpu_tp *g = p->g;
    if (st != FC_SUCCESS) {
        gpu_tp_pend_unlink(g, p);
        struct xfer *x = p->x;
        x->errmsg = ix->errmsg;
        x->truncated = ix->truncated;
        gpu_tp_pend_put(g, p);
        x->done(x, st, 0);
        return;
    }
    /* the chunk is in the bounce buffer: copy it up; a small one completes
     * in stream order on comp, a large one on its event (h2d overlaps) */
    p->len = len;
    if (len <= DEFER_MAX) {
        /* kept in the bounce buffer; it replaces older deferred bytes */
        gpu_tp_pend_unlink(g, p);
        struct xfer *x = p->x;
        fc_result_t rc = gpu_tp_settle_overwrite(g, p->dst, len);
        if (rc != FC_SUCCESS) {
            x->errmsg = g->errbuf;
            gpu_tp_pend_put(g, p);
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
        p->status = gpu_tp_settle_overwrite(g, p->dst, len);
    if (!early && p->status == FC_SUCCESS)
        p->status = gpu_tp_after_early(g, s); /* early kernels may read dst */
    if (p->status == FC_SUCCESS)
        p->status = gpu_memcpy_async(p->dst, p->bounce, len, s);
    if (p->status == FC_SUCCESS)
        p->status = gpu_tp_record(g, p, s);
    p->kind = P_RECV_H2D;
    if (p->status != FC_SUCCESS) {
        snprintf(g->errbuf, sizeof(g->errbuf), "%s", err_get());
        return;
    }
    if (early) {
        gpu_tp_pend_unlink(g, p);
        struct xfer *x = p->x;
        gpu_tp_early_add(g, p);
        x->done(x, FC_SUCCESS, len);
    }
}

/* A fabric post of device memory after early GPU work: waits (on the host)
 * for an event recorded behind that work. */
static fc_result_t direct_after_early(struct gpu_tp *g, int is_send, int peer, uint64_t tag,
                                      void *buf, size_t len, struct xfer *x)
{
    struct pend *p = gpu_tp_pend_get(g);
    if (!p)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    p->kind = P_DIRECT_WAIT;
    p->x = x;
    p->ix.is_send = is_send;
    p->peer = peer;
    p->tag = tag;
    p->buf = buf;
    p->len = len;
    fc_result_t rc = gpu_tp_record(g, p, g->comp);
    if (rc != FC_SUCCESS) {
        gpu_tp_pend_put(g, p);
        return rc;
    }
    gpu_tp_pend_push(g, p);
    return FC_SUCCESS;
}

/* ---- transport ops ----------------------------------------------------------- */

static fc_result_t gt_send(struct transport *t, int peer, uint64_t tag, const void *buf,
                           size_t len, struct xfer *x)
{
    struct gpu_tp *g = (struct gpu_tp *)t;
    int dir = gpu_tp_direct(g, peer, buf, len, x);
    if (dir != 1 && g->deferred) {
        fc_result_t rc = gpu_tp_settle_read(g, buf, len);
        if (rc != FC_SUCCESS)
            return rc;
    }
    if (dir == 2 && gpu_tp_early_tail(g))
        return direct_after_early(g, 1, peer, tag, (void *)buf, len, x);
    if (dir)
        return g->inner->ops->send(g->inner, peer, tag, buf, len, x);
    if (len > g->bounce_size)
        return FC_ERR(FC_ERR_INTERNAL, "a %zu-byte chunk exceeds the %zu-byte bounce buffers", len,
                      g->bounce_size);
    struct pend *p = gpu_tp_pend_get(g);
    if (!p || !(p->bounce = gpu_tp_bounce_get(g, p, len))) {
        if (p)
            gpu_tp_pend_put(g, p);
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
    fc_result_t rc = gpu_tp_after_early(g, g->d2h);
    if (rc == FC_SUCCESS)
        rc = gpu_memcpy_async(p->bounce, buf, len, g->d2h);
    if (rc == FC_SUCCESS)
        rc = gpu_tp_record(g, p, g->d2h);
    if (rc != FC_SUCCESS) {
        gpu_tp_pend_put(g, p);
        return rc;
    }
    gpu_tp_pend_push(g, p);
    return FC_SUCCESS;
}

static fc_result_t gt_recv(struct transport *t, int peer, uint64_t tag, void *buf, size_t len,
                           struct xfer *x)
{
    struct gpu_tp *g = (struct gpu_tp *)t;
    int dir = gpu_tp_direct(g, peer, buf, len, x);
    if (dir == 2 && g->deferred) {
        /* the fabric writes it: deferred bytes there are dead or go first */
        fc_result_t rc = gpu_tp_settle_overwrite(g, buf, len);
        if (rc != FC_SUCCESS)
            return rc;
    }
    if (dir == 2 && gpu_tp_early_tail(g))
        return direct_after_early(g, 0, peer, tag, buf, len, x);
    if (dir)
        return g->inner->ops->recv(g->inner, peer, tag, buf, len, x);
    if (len > g->bounce_size)
        return FC_ERR(FC_ERR_INTERNAL, "a %zu-byte chunk exceeds the %zu-byte bounce buffers", len,
                      g->bounce_size);
    struct pend *p = gpu_tp_pend_get(g);
    if (!p || !(p->bounce = gpu_tp_bounce_get(g, p, len))) {
        if (p)
            gpu_tp_pend_put(g, p);
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
        gpu_tp_pend_put(g, p);
        return rc;
    }
    gpu_tp_pend_push(g, p);
    return FC_SUCCESS;
}

static fc_result_t gt_local(struct transport *t, const struct local_op *lo, struct xfer *x)
{
    struct gpu_tp *g = (struct gpu_tp *)t;
    if (lo->kind == LOCAL_REDUCE_ALL && (gpu_on_device(lo->dst) || gpu_on_device(lo->a)))
        return FC_ERR(FC_ERR_INTERNAL, "the device transport reduces two vectors at a time: "
                      "a reduction of %d vectors on device memory is the fused path's",
                      lo->nvec);
    struct pend *p = gpu_tp_pend_get(g);
    if (!p)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    p->x = x;
    p->len = lo->len;
    int dd = gpu_on_device(lo->dst), da = gpu_on_device(lo->a);
    int db = lo->kind == LOCAL_REDUCE ? gpu_on_device(lo->b) : dd;
    if (!dd && !da && !db) {
        /* all host memory: run it now, report it at the next progress */
        transport_local_host(lo);
        p->kind = P_HOST_DONE;
        gpu_tp_pend_push(g, p);
        return FC_SUCCESS;
    }
    fc_result_t rc = FC_SUCCESS;
    p->kind = P_LOCAL;
    /* device operands only, small: done in stream order (host operands are
     * read or written by the copies, so the host waits for those) */
    int early = dd && da && db && lo->len <= EARLY_MAX;
    struct pend *report = NULL;
    if (early) {
        if (!(report = gpu_tp_pend_get(g))) {
            gpu_tp_pend_put(g, p);
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
            a = gpu_tp_alias(g, a, lo->len);
        if (lo->kind == LOCAL_REDUCE && db)
            b = gpu_tp_alias(g, b, lo->len);
        if (da && a == lo->a)
            rc = gpu_tp_settle_read(g, a, lo->len);
        if (rc == FC_SUCCESS && lo->kind == LOCAL_REDUCE && db && b == lo->b)
            rc = gpu_tp_settle_read(g, b, lo->len);
        if (rc == FC_SUCCESS && dd)
            rc = gpu_tp_settle_write(g, lo->dst, lo->len, 0);
    }
    if (rc != FC_SUCCESS) {
    } else if (lo->kind == LOCAL_COPY) {
        rc = gpu_memcpy_async(lo->dst, a, lo->len, g->comp);
    } else {
        /* host operands of a step on the GPU go to device temporaries */
        void *dst = lo->dst;
        p->tmplen = lo->len;
        if (!da && rc == FC_SUCCESS) {
            p->tmp[0] = gpu_tp_dev_get(g, lo->len);
            rc = p->tmp[0] ? gpu_memcpy_async(p->tmp[0], a, lo->len, g->comp)
                           : FC_ERR(FC_ERR_CUDA, "no device memory for a temporary");
            a = p->tmp[0];
        }
        if (lo->kind == LOCAL_REDUCE && !db && rc == FC_SUCCESS) {
            p->tmp[1] = gpu_tp_dev_get(g, lo->len);
            rc = p->tmp[1] ? gpu_memcpy_async(p->tmp[1], b, lo->len, g->comp)
                           : FC_ERR(FC_ERR_CUDA, "no device memory for a temporary");
            b = p->tmp[1];
        }
        if (!dd && rc == FC_SUCCESS) {
            p->tmp[2] = gpu_tp_dev_get(g, lo->len);
            if (!p->tmp[2])
                rc = FC_ERR(FC_ERR_CUDA, "no device memory for a temporary");
            dst = p->tmp[2];
        }
        size_t cnt = lo->len / fc_datatype_size(lo->dt);
        if (lo->kind == LOCAL_REDUCE && lo->pmul && rc == FC_SUCCESS) {
            /* a pre-scaled sum's input operand, scaled first: in its
             * temporary, or in a new one (the caller's input stays as it is) */
            const int k = lo->pmul == 1 ? 0 : 1;
            const void **in = k == 0 ? &a : &b;
            if (!p->tmp[k] && !(p->tmp[k] = gpu_tp_dev_get(g, lo->len)))
                rc = FC_ERR(FC_ERR_CUDA, "no device memory for a temporary");
            if (rc == FC_SUCCESS)
                rc = gpu_premul_async(p->tmp[k], *in, cnt, lo->dt, lo->scalar, g->comp);
            *in = p->tmp[k];
        }
        if (rc == FC_SUCCESS)
            rc = lo->kind == LOCAL_REDUCE
                     ? gpu_reduce_async(dst, a, b, cnt, lo->dt, lo->op, g->comp)
                 : lo->kind == LOCAL_PREMUL
                     ? gpu_premul_async(dst, a, cnt, lo->dt, lo->scalar, g->comp)
                     : gpu_scale_async(dst, a, cnt, lo->dt, lo->divisor, g->comp);
        if (rc == FC_SUCCESS && !dd)
            rc = gpu_memcpy_async(lo->dst, dst, lo->len, g->comp);
    }
    if (rc == FC_SUCCESS && dd && g->deferred)
        rc = gpu_tp_settle_write(g, lo->dst, lo->len, 1);
    if (rc == FC_SUCCESS)
        rc = gpu_tp_record(g, p, g->comp);
    if (rc != FC_SUCCESS) {
        gpu_tp_pend_put(g, p);
        if (report)
            gpu_tp_pend_put(g, report);
        return rc;
    }
    if (early) {
        gpu_tp_early_add(g, p);
        gpu_tp_pend_push(g, report);
    } else {
        gpu_tp_pend_push(g, p);
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
                gpu_tp_pend_put(g, p);
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
        gpu_tp_pend_put(g, p);
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
            scratch = gpu_tp_inside(d->dst, d->len, g->scratch[i].base, g->scratch[i].len);
        if (scratch) {
            pp = &d->next;
        } else {
            *pp = d->next;
            gpu_tp_retire(g, d, 1);
        }
    }
    return gpu_tp_early_tail(g) == NULL && g->failed == FC_SUCCESS;
}

static void gt_peer_name(struct transport *t, int peer, char *buf, size_t len)
{
    struct gpu_tp *g = (struct gpu_tp *)t;
    g->inner->ops->peer_name(g->inner, peer, buf, len);
}

static void *gt_mem_alloc(struct transport *t, size_t len)
{
    struct gpu_tp *g = (struct gpu_tp *)t;
    void *p = gpu_tp_dev_get(g, len);
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
        gpu_tp_settle_write(g, p, len, 1);
    gpu_tp_dev_put(g, p, len);
}

static const struct transport_ops gpu_ops = {
    .name = "gpu",
    .flags = TRANSPORT_RUNS_LOCAL,
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

fc_result_t gpu_tp_set_paths(struct gpu_tp *g, int npeers, const struct gpu_tp_path *paths)
{
    struct gpu_tp_path *c = malloc((size_t)npeers * sizeof(*c) + 1);
    if (!c)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory for %d peers' device paths", npeers);
    memcpy(c, paths, (size_t)npeers * sizeof(*c));
    free(g->paths);
    g->paths = c;
    g->npaths = npeers;
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

int gpu_tp_any_direct(const struct gpu_tp *g)
{
    if (!g->paths)
        return g->hmem && g->direct_min > 0;
    for (int i = 0; i < g->npaths; i++)
        if (g->paths[i].hmem && g->paths[i].direct_min > 0)
            return 1;
    return 0;
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
        gpu_tp_pend_put(g, p);
    }
    while (g->early) {
        struct pend *p = g->early;
        g->early = p->next;
        gpu_tp_pend_put(g, p);
    }
    while (g->deferred) {
        struct pend *p = g->deferred;
        g->deferred = p->next;
        gpu_tp_pend_put(g, p);
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
    free(g->paths);
    free(g);
}
