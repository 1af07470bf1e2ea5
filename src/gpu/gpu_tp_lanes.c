/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Lanes of the device transport, for stream-ordered requests.
 *
 * Lanes (stream-ordered requests, stream.c): a lane is a gpu_tp of its
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
 *
 * This file owns a lane's life before it is destroyed (gpu_tp_destroy, in
 * gpu_tp.c, frees lanes with their parent), its reservations and its
 * staging block; it runs no step (the transport's ops do, as for any
 * gpu_tp).
 */
#define _GNU_SOURCE
#include "gpu_tp_int.h"

#include <stdlib.h>

#include "log.h"

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
    if (gpu_tp_is_small(n->lane, chunk_len))
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
    int c = scratch ? gpu_tp_size_class(scratch) : -1;
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
        gpu_tp_bounce_put(&l->bsmall, v[i]);
    for (int i = 0; i < gb; i++)
        gpu_tp_bounce_put(&l->bbig, v[gs + i]);
    if (gd)
        gpu_tp_dev_put(l, v[gs + gb], (size_t)1 << c);
    pthread_mutex_unlock(lock);
    free(v);
    return rc;
}

fc_result_t gpu_tp_lane_stage(struct gpu_tp *l, size_t len, void **dev)
{
    if (len > l->stage_len) {
        size_t sz = (size_t)1 << gpu_tp_size_class(len);
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
