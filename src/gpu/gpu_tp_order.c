/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * GPU-side ordering in the device transport: which GPU work a step must
 * come after, and copies deferred until something needs them.
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
 * This file owns the pending, early and deferred lists of struct gpu_tp;
 * it posts nothing to the fabric and allocates only through
 * gpu_tp_pools.c.
 */
#define _GNU_SOURCE
#include "gpu_tp_int.h"

#include <stdio.h>

#include "log.h"

void gpu_tp_pend_push(struct gpu_tp *g, struct pend *p)
{
    p->next = g->pending;
    g->pending = p;
}

void gpu_tp_pend_unlink(struct gpu_tp *g, struct pend *p)
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
gpu_event_t *gpu_tp_early_tail(struct gpu_tp *g)
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
        gpu_tp_pend_put(g, p);
    }
    g->tail = NULL;
    return NULL;
}

/* p's work is queued on comp and recorded in p->ev: keep p until it is done */
void gpu_tp_early_add(struct gpu_tp *g, struct pend *p)
{
    p->next = g->early;
    g->early = p;
    g->tail = p->ev;
}

/* Orders the next work on s after the early work on comp. */
fc_result_t gpu_tp_after_early(struct gpu_tp *g, gpu_stream_t *s)
{
    gpu_event_t *t = gpu_tp_early_tail(g);
    return t ? gpu_stream_wait_event(s, t) : FC_SUCCESS;
}

static int overlaps(const struct pend *d, const void *b, size_t len)
{
    uintptr_t d0 = (uintptr_t)d->dst, b0 = (uintptr_t)b;
    return b0 < d0 + d->len && d0 < b0 + len;
}

int gpu_tp_inside(const void *b, size_t len, uintptr_t base, size_t blen)
{
    uintptr_t b0 = (uintptr_t)b;
    return b0 >= base && b0 + len <= base + blen;
}

/* Where the bytes of [b, b+len) are, when one deferred receive holds them
 * all: its bounce buffer; else b. */
const void *gpu_tp_alias(struct gpu_tp *g, const void *b, size_t len)
{
    for (struct pend *d = g->deferred; d; d = d->next)
        if (gpu_tp_inside(b, len, (uintptr_t)d->dst, d->len))
            return (const char *)d->bounce + ((uintptr_t)b - (uintptr_t)d->dst);
    return b;
}

/* Ends deferral of d (unlinked): copies it up when copy, and keeps its
 * bounce buffer until the compute stream is past every kernel that read it. */
fc_result_t gpu_tp_retire(struct gpu_tp *g, struct pend *d, int copy)
{
    fc_result_t rc = copy ? gpu_memcpy_async(d->dst, d->bounce, d->len, g->comp) : FC_SUCCESS;
    if (rc == FC_SUCCESS)
        rc = gpu_tp_record(g, d, g->comp);
    if (rc != FC_SUCCESS) {
        if (g->failed == FC_SUCCESS) {
            g->failed = rc;
            snprintf(g->errbuf, sizeof(g->errbuf), "%s", err_get());
        }
        return rc; /* the context is broken: d stays unreleased */
    }
    d->kind = P_RECV_H2D;
    gpu_tp_early_add(g, d);
    return FC_SUCCESS;
}

/* Before [b, b+len) is read other than by a kernel through gpu_tp_alias(): every
 * deferred receive overlapping it is copied up. */
fc_result_t gpu_tp_settle_read(struct gpu_tp *g, const void *b, size_t len)
{
    fc_result_t rc = FC_SUCCESS;
    for (struct pend **pp = &g->deferred; *pp && rc == FC_SUCCESS;) {
        struct pend *d = *pp;
        if (overlaps(d, b, len)) {
            *pp = d->next;
            rc = gpu_tp_retire(g, d, 1);
        } else {
            pp = &d->next;
        }
    }
    return rc;
}

/* Around a write of [b, b+len): before it (!after), deferred receives it
 * covers only partly are copied up; after it, those it covers wholly are
 * dropped (their bytes are dead). */
fc_result_t gpu_tp_settle_write(struct gpu_tp *g, const void *b, size_t len, int after)
{
    fc_result_t rc = FC_SUCCESS;
    for (struct pend **pp = &g->deferred; *pp && rc == FC_SUCCESS;) {
        struct pend *d = *pp;
        int whole = gpu_tp_inside(d->dst, d->len, (uintptr_t)b, len);
        if (overlaps(d, b, len) && whole == after) {
            *pp = d->next;
            rc = gpu_tp_retire(g, d, !whole);
        } else {
            pp = &d->next;
        }
    }
    return rc;
}

/* A receive landing on [b, b+len) (not a kernel of ours, which reads
 * through gpu_tp_alias() first): both sides of settle_write at once. */
fc_result_t gpu_tp_settle_overwrite(struct gpu_tp *g, const void *b, size_t len)
{
    fc_result_t rc = gpu_tp_settle_write(g, b, len, 0);
    return rc == FC_SUCCESS ? gpu_tp_settle_write(g, b, len, 1) : rc;
}

/* GPU_HOST, GPU_DEVICE or GPU_MANAGED */
static int kind_of(const void *p)
{
    struct gpu_ptr pi;
    if (!p || gpu_ptr_info(p, &pi) != FC_SUCCESS)
        return GPU_HOST;
    return pi.kind;
}

/* Straight to the fabric: host memory, and device memory where the peer's
 * path is in the gdr tier (managed memory is always staged: providers
 * register device memory). 2: device memory, which early work on the GPU
 * may still be using. */
int gpu_tp_direct(const struct gpu_tp *g, int peer, const void *buf, size_t len,
                  const struct xfer *x)
{
    if (len == 0)
        return 1;
    int k = kind_of(buf);
    if (k == GPU_HOST)
        return 1;
    int hmem = g->hmem;
    size_t min = g->direct_min;
    if (g->paths && peer >= 0 && peer < g->npaths) {
        hmem = g->paths[peer].hmem;
        min = g->paths[peer].direct_min;
    }
    if (!hmem || k != GPU_DEVICE)
        return 0;
    /* below direct_min the provider's eager path would carry it: staged */
    return x->delivery || (min && len >= min) ? 2 : 0;
}

fc_result_t gpu_tp_record(struct gpu_tp *g, struct pend *p, gpu_stream_t *s)
{
    fc_result_t rc = gpu_event_get(g->device, &p->ev);
    if (rc == FC_SUCCESS)
        rc = gpu_event_record(p->ev, s);
    return rc;
}
