/* SPDX-License-Identifier: BSD-3-Clause */
/* The device-memory transport (see gpu_tp.c): wraps the fabric's transport
 * with staging through pinned bounce buffers (or passes device pointers
 * straight through in the gdr tier) and runs local steps as CUDA kernels. */
#ifndef FC_GPU_TP_H
#define FC_GPU_TP_H

#include <pthread.h>

#include "gpu.h"
#include "transport.h"

struct gpu_tp;

/* hmem: the inner transport takes device pointers itself (gdr tier), for
 * chunks of direct_min bytes and more (0: none); smaller ones are staged,
 * so that device memory only ever travels by the provider's rendezvous
 * (give the endpoint's rendezvous threshold). bounce_size: the largest
 * chunk staged at once. */
fc_result_t gpu_tp_create(struct transport *inner, int device, int hmem, size_t direct_min,
                          size_t bounce_size, struct gpu_tp **out);
/* Per-peer paths (src/paths.c): where the inner transport reaches some
 * peers through a provider that registers device memory and others through
 * one that does not (shm with CUDA inside a node, tcp across), each peer's
 * chunks go direct or are staged as its own path says, instead of as
 * gpu_tp_create's hmem and direct_min say for all. paths: npeers entries,
 * copied. */
struct gpu_tp_path {
    int hmem;
    size_t direct_min;
};
fc_result_t gpu_tp_set_paths(struct gpu_tp *g, int npeers, const struct gpu_tp_path *paths);
struct transport *gpu_tp_transport(struct gpu_tp *g);
/* Orders the transport's streams after the work the caller queued on the
 * legacy default stream (called at the start of each blocking collective). */
fc_result_t gpu_tp_order_after_default(struct gpu_tp *g);
int gpu_tp_device(const struct gpu_tp *g);
/* 1 when some peer's device chunks go direct (gdr tier, or a path of it):
 * device memory then crosses by the provider's own CUDA copies. */
int gpu_tp_any_direct(const struct gpu_tp *g);
/* Lanes: the stream-ordered requests of one caller stream (a CUDA stream)
 * share a transport of their own (gpu_tp_transport) whose GPU work runs
 * inside one kernel per request on that stream; the parent's progress
 * drives them. Requests of a lane run one at a time: each launches its
 * kernel (queued on the caller's stream) at the call, starts once
 * gpu_tp_lane_started (then gpu_tp_lane_open), and closes it when
 * finished.
 * A lane is keyed by the caller's stream and, on CUDA's per-thread
 * default stream (a different stream in each thread under one handle), a
 * token of the calling thread (owner; else 0).
 * gpu_tp_lane finds caller's lane (lock held); gpu_tp_lane_room says
 * whether another may be added (at most 32); gpu_tp_lane_new makes one
 * (CUDA allocations: call it without the family's lock, which spinning
 * kernels may need meanwhile; NULL with the error recorded) and
 * gpu_tp_lane_add adds it (lock held). gpu_tp_lane_reuse hands an idle
 * lane (its kernels all gone, its staging copies done) to another stream
 * (lock held), or NULL: callers must launch on the lane they get before
 * another caller may look for one (the family's launch lock). */
struct gpu_tp *gpu_tp_lane(struct gpu_tp *g, void *caller, uint64_t owner);
int gpu_tp_lane_room(const struct gpu_tp *g);
struct gpu_tp *gpu_tp_lane_new(const struct gpu_tp *g, void *caller, uint64_t owner);
void gpu_tp_lane_add(struct gpu_tp *g, struct gpu_tp *lane);
struct gpu_tp *gpu_tp_lane_reuse(struct gpu_tp *g, void *caller, uint64_t owner);
/* A host buffer among a lane's request's buffers (the other on the
 * device) goes through the lane's staging block: gpu_tp_lane_stage gives
 * its device half of len bytes or more (made or grown in the caller's
 * thread); gpu_tp_lane_stage_copy queues on the caller's stream the copy
 * of host into it (in, before the kernel's launch) or out of it into host
 * (after the launch). The request then runs on device memory only. */
fc_result_t gpu_tp_lane_stage(struct gpu_tp *lane, size_t len, void **dev);
fc_result_t gpu_tp_lane_stage_copy(struct gpu_tp *lane, void *host, size_t len, int in);
fc_result_t gpu_tp_lane_launch(struct gpu_tp *lane, uint32_t *launch);
int gpu_tp_lane_started(struct gpu_tp *lane, uint32_t launch);
/* At the start of a request of the lane (once started): GPU work is posted
 * to its kernel until the close; anything posted after the close (a late
 * receive of a failed request) is dropped, not left to the next kernel. */
void gpu_tp_lane_open(struct gpu_tp *lane);
fc_result_t gpu_tp_lane_close(struct gpu_tp *lane);
/* What a request of a lane stages at most at once: gpu_tp_need_add, given
 * as sched_xfer_shapes' callback, adds each transfer step to a need of the
 * lane (window set, counts zero); then gpu_tp_lane_reserve, in the
 * caller's thread before the kernel is launched, tops the lane's own pools
 * up to it (pinned bounce buffers and one device block of the scratch's
 * size), taking `lock` (the family's) only to add them. Once its kernel
 * runs, a lane makes no CUDA allocation: the progress thread that drives
 * it must not wait for the CUDA context's lock, which an application's
 * cuMemFree holds while it waits for the device, kernels included. */
struct gpu_tp_need {
    const struct gpu_tp *lane;
    int window;        /* chunks in flight per step */
    size_t small, big; /* bounce buffers of each size */
};
void gpu_tp_need_add(void *need, size_t chunk_len, uint32_t nchunks, int recv);
fc_result_t gpu_tp_lane_reserve(struct gpu_tp *lane, const struct gpu_tp_need *n,
                                size_t scratch, pthread_mutex_t *lock);
/* After the inner transport has stopped (no callback can come). */
void gpu_tp_destroy(struct gpu_tp *g);

#endif /* FC_GPU_TP_H */
