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
 */
#define _GNU_SOURCE
#include "gpu_tp.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "reduce.h"

enum pkind { P_SEND_D2H, P_SEND_POSTED, P_RECV_POSTED, P_RECV_H2D, P_LOCAL, P_HOST_DONE };

struct pend {
    int kind;
    struct gpu_tp *g;
    struct xfer *x;       /* the engine's */
    struct xfer ix;       /* ours, for the inner transport */
    gpu_event_t *ev;
    void *bounce;         /* pinned host */
    void *tmp[3];         /* device temporaries of a mixed local step */
    size_t tmplen;
    void *dst;            /* H2D target */
    size_t len;
    int peer;
    uint64_t tag;
    fc_result_t status;
    struct pend *next;
};

#define POOL_CLASSES 64
struct pool {
    int n;
    void *buf[8];
};

struct gpu_tp {
    struct transport base;
    struct transport *inner;
    int device;
    int hmem;
    size_t bounce_size;
    gpu_stream_t *d2h, *h2d, *comp;
    struct pend *pending;  /* waiting for the GPU or for the inner transport */
    struct pend *free_pend;
    void **bounces;
    int nbounce, capbounce;
    struct pool dev[POOL_CLASSES];
    char errbuf[512];
};

static int size_class(size_t len)
{
    int c = 12;
    while (((size_t)1 << c) < len && c < 62)
        c++;
    return c;
}

static void *dev_get(struct gpu_tp *g, size_t len)
{
    int c = size_class(len);
    if (g->dev[c].n > 0)
        return g->dev[c].buf[--g->dev[c].n];
    return gpu_dev_alloc(g->device, (size_t)1 << c);
}

static void dev_put(struct gpu_tp *g, void *p, size_t len)
{
    if (!p)
        return;
    int c = size_class(len);
    if (g->dev[c].n < 8)
        g->dev[c].buf[g->dev[c].n++] = p;
    else
        gpu_dev_free(g->device, p);
}

static void *bounce_get(struct gpu_tp *g)
{
    if (g->nbounce > 0)
        return g->bounces[--g->nbounce];
    return gpu_host_alloc(g->device, g->bounce_size);
}

static void bounce_put(struct gpu_tp *g, void *b)
{
    if (!b)
        return;
    if (g->nbounce == g->capbounce) {
        int nc = g->capbounce ? g->capbounce * 2 : 16;
        void **n = realloc(g->bounces, (size_t)nc * sizeof(void *));
        if (!n) {
            gpu_host_free(b);
            return;
        }
        g->bounces = n;
        g->capbounce = nc;
    }
    g->bounces[g->nbounce++] = b;
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
    bounce_put(g, p->bounce);
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

/* GPU_HOST, GPU_DEVICE or GPU_MANAGED */
static int kind_of(const void *p)
{
    struct gpu_ptr pi;
    if (!p || gpu_ptr_info(p, &pi) != FC_SUCCESS)
        return GPU_HOST;
    return pi.kind;
}

static int on_device(const void *p)
{
    return kind_of(p) != GPU_HOST;
}

/* Straight to the fabric: host memory, and device memory in the gdr tier
 * (managed memory is always staged: providers register device memory). */
static int direct(const struct gpu_tp *g, const void *buf, size_t len)
{
    if (len == 0)
        return 1;
    int k = kind_of(buf);
    return k == GPU_HOST || (g->hmem && k == GPU_DEVICE);
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
    for (struct pend **pp = &g->pending; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    pend_put(g, p);
    x->done(x, st, len);
}

static void ix_recv_done(struct xfer *ix, fc_result_t st, size_t len)
{
    struct pend *p = ix->owner;
    struct gpu_tp *g = p->g;
    if (st != FC_SUCCESS) {
        for (struct pend **pp = &g->pending; *pp; pp = &(*pp)->next)
            if (*pp == p) {
                *pp = p->next;
                break;
            }
        struct xfer *x = p->x;
        x->errmsg = ix->errmsg;
        pend_put(g, p);
        x->done(x, st, 0);
        return;
    }
    /* the chunk is in the bounce buffer: copy it up, complete on the event */
    p->len = len;
    p->status = gpu_memcpy_async(p->dst, p->bounce, len, g->h2d);
    if (p->status == FC_SUCCESS)
        p->status = record(g, p, g->h2d);
    if (p->status != FC_SUCCESS)
        snprintf(g->errbuf, sizeof(g->errbuf), "%s", err_get());
    p->kind = P_RECV_H2D;
}

/* ---- transport ops ----------------------------------------------------------- */

static fc_result_t gt_send(struct transport *t, int peer, uint64_t tag, const void *buf,
                           size_t len, struct xfer *x)
{
    struct gpu_tp *g = (struct gpu_tp *)t;
    if (direct(g, buf, len))
        return g->inner->ops->send(g->inner, peer, tag, buf, len, x);
    if (len > g->bounce_size)
        return FC_ERR(FC_ERR_INTERNAL, "a %zu-byte chunk exceeds the %zu-byte bounce buffers", len,
                      g->bounce_size);
    struct pend *p = pend_get(g);
    if (!p || !(p->bounce = bounce_get(g))) {
        if (p)
            pend_put(g, p);
        return FC_ERR(FC_ERR_NO_MEMORY, "out of pinned memory for staging a send (%zu bytes)",
                      len);
    }
    p->kind = P_SEND_D2H;
    p->x = x;
    p->len = len;
    p->peer = peer;
    p->tag = tag;
    p->ix.delivery = x->delivery;
    fc_result_t rc = gpu_memcpy_async(p->bounce, buf, len, g->d2h);
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
    if (direct(g, buf, len))
        return g->inner->ops->recv(g->inner, peer, tag, buf, len, x);
    if (len > g->bounce_size)
        return FC_ERR(FC_ERR_INTERNAL, "a %zu-byte chunk exceeds the %zu-byte bounce buffers", len,
                      g->bounce_size);
    struct pend *p = pend_get(g);
    if (!p || !(p->bounce = bounce_get(g))) {
        if (p)
            pend_put(g, p);
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
    int dd = on_device(lo->dst), da = on_device(lo->a);
    int db = lo->kind == LOCAL_REDUCE ? on_device(lo->b) : dd;
    if (!dd && !da && !db) {
        /* all host memory: run it now, report it at the next progress */
        host_local(lo);
        p->kind = P_HOST_DONE;
        push(g, p);
        return FC_SUCCESS;
    }
    fc_result_t rc = FC_SUCCESS;
    p->kind = P_LOCAL;
    if (lo->kind == LOCAL_COPY) {
        rc = gpu_memcpy_async(lo->dst, lo->a, lo->len, g->comp);
    } else {
        /* host operands of a step on the GPU go to device temporaries */
        const void *a = lo->a, *b = lo->b;
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
    if (rc == FC_SUCCESS)
        rc = record(g, p, g->comp);
    if (rc != FC_SUCCESS) {
        pend_put(g, p);
        return rc;
    }
    push(g, p);
    return FC_SUCCESS;
}

static fc_result_t gt_progress(struct transport *t, int *ncomp)
{
    struct gpu_tp *g = (struct gpu_tp *)t;
    int n = 0;
    fc_result_t rc = g->inner->ops->progress(g->inner, &n);
    if (rc != FC_SUCCESS) {
        *ncomp = n;
        return rc;
    }
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
    *ncomp = n;
    return FC_SUCCESS;
}

static void gt_wait(struct transport *t, int timeout_us)
{
    struct gpu_tp *g = (struct gpu_tp *)t;
    for (struct pend *p = g->pending; p; p = p->next)
        if (p->kind != P_SEND_POSTED && p->kind != P_RECV_POSTED) {
            sched_yield(); /* the GPU signals no file descriptor: poll again soon */
            return;
        }
    g->inner->ops->wait(g->inner, timeout_us);
}

static void gt_peer_name(struct transport *t, int peer, char *buf, size_t len)
{
    struct gpu_tp *g = (struct gpu_tp *)t;
    g->inner->ops->peer_name(g->inner, peer, buf, len);
}

static void *gt_mem_alloc(struct transport *t, size_t len)
{
    return dev_get((struct gpu_tp *)t, len);
}

static void gt_mem_free(struct transport *t, void *p, size_t len)
{
    dev_put((struct gpu_tp *)t, p, len);
}

static const struct transport_ops gpu_ops = {
    .name = "gpu",
    .send = gt_send,
    .recv = gt_recv,
    .progress = gt_progress,
    .wait = gt_wait,
    .peer_name = gt_peer_name,
    .mem_alloc = gt_mem_alloc,
    .mem_free = gt_mem_free,
    .local = gt_local,
};

fc_result_t gpu_tp_create(struct transport *inner, int device, int hmem, size_t bounce_size,
                          struct gpu_tp **out)
{
    struct gpu_tp *g = calloc(1, sizeof(*g));
    if (!g)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    g->base.ops = &gpu_ops;
    g->inner = inner;
    g->device = device;
    g->hmem = hmem;
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
     * with it by themselves */
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
    gpu_stream_destroy(g->d2h);
    gpu_stream_destroy(g->h2d);
    gpu_stream_destroy(g->comp);
    while (g->pending) {
        struct pend *p = g->pending;
        g->pending = p->next;
        pend_put(g, p);
    }
    while (g->free_pend) {
        struct pend *p = g->free_pend;
        g->free_pend = p->next;
        free(p);
    }
    for (int i = 0; i < g->nbounce; i++)
        gpu_host_free(g->bounces[i]);
    free(g->bounces);
    for (int c = 0; c < POOL_CLASSES; c++)
        while (g->dev[c].n > 0)
            gpu_dev_free(g->device, g->dev[c].buf[--g->dev[c].n]);
    free(g);
}
