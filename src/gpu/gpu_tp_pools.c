/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The device transport's reusable memory: pinned bounce buffers (a small
 * and a large class), device temporaries by power-of-two size class, and
 * the pending records of steps in flight. Nothing is freed while the
 * transport lives (gpu_tp_destroy frees it all): cuMemFree waits for the
 * whole device, where stream-ordered kernels may wait for this very thread.
 *
 * This file owns the pools and nothing else; it decides no order and
 * starts no copy.
 */
#define _GNU_SOURCE
#include "gpu_tp_int.h"

#include <stdlib.h>
#include <string.h>

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

int gpu_tp_size_class(size_t len)
{
    int c = 12;
    while (((size_t)1 << c) < len && c < 62)
        c++;
    return c;
}

/* A lane's scratch block was set aside at the call (gpu_tp_lane_reserve);
 * it allocates here only past that (a block still held by a failed
 * request's posted transfers). */
void *gpu_tp_dev_get(struct gpu_tp *g, size_t len)
{
    int c = gpu_tp_size_class(len);
    if (g->dev[c].n > 0)
        return g->dev[c].v[--g->dev[c].n];
    return gpu_dev_alloc(g->device, (size_t)1 << c);
}

void gpu_tp_dev_put(struct gpu_tp *g, void *p, size_t len)
{
    if (!p)
        return;
    int c = gpu_tp_size_class(len);
    if (!bpool_push(&g->dev[c], p))
        gpu_dev_free(g->device, p);
}

/* Pinned bounce buffers: chunk-sized ones, and small ones for small
 * messages (in the gdr tier chunks are megabytes, staged messages small). */
int gpu_tp_is_small(const struct gpu_tp *g, size_t len)
{
    return len <= SMALL_BOUNCE && g->bounce_size > SMALL_BOUNCE;
}

static struct bpool *bpool_of(struct gpu_tp *g, size_t len)
{
    return gpu_tp_is_small(g, len) ? &g->bsmall : &g->bbig;
}

/* NULL when out of memory, or (a lane) when its reserved buffers are all
 * in use: the step then waits for one to come back (FC_AGAIN) */
void *gpu_tp_bounce_get(struct gpu_tp *g, struct pend *p, size_t len)
{
    struct bpool *b = bpool_of(g, len);
    p->bpool = b;
    if (b->n > 0)
        return b->v[--b->n];
    if (g->parent)
        return NULL;
    return gpu_host_alloc(g->device, b == &g->bsmall ? SMALL_BOUNCE : g->bounce_size);
}

void gpu_tp_bounce_put(struct bpool *b, void *buf)
{
    if (buf && !bpool_push(b, buf))
        gpu_host_free(buf);
}

struct pend *gpu_tp_pend_get(struct gpu_tp *g)
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

void gpu_tp_pend_put(struct gpu_tp *g, struct pend *p)
{
    if (p->ev)
        gpu_event_put(p->ev);
    if (p->bounce)
        gpu_tp_bounce_put(p->bpool, p->bounce);
    for (int i = 0; i < 3; i++)
        gpu_tp_dev_put(g, p->tmp[i], p->tmplen);
    p->next = g->free_pend;
    g->free_pend = p;
}
