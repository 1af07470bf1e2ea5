/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The stream-ordered queue: the requests of fc_*_stream calls, waiting in
 * the order they were made for their stream to reach them. The progress
 * thread (started with the first) starts each once its stream has, and
 * ends it when its schedule is over: nobody waits for such a request, so
 * its end releases its stream and frees it. Two paths queue requests here,
 * each with its own way of meeting the stream (struct gpu_stream_path):
 * the executor lanes (stream.c) and the fused small allreduce (fused.c).
 * The queue itself lives in the family's shared state (comm.h: stream_q).
 */
#ifndef FC_GPU_QUEUE_H
#define FC_GPU_QUEUE_H

#include <stdint.h>

#include "comm.h"

/* How a queued request meets its stream. */
struct gpu_stream_path {
    /* Lock held. > 0: the stream has reached it (its transfers may start);
     * 0: not yet; < 0: the stream's earlier work failed (error set). */
    int (*ready)(struct fc_request *r);
    /* Lock held: it ended (r->result); it is freed next. */
    void (*done)(struct fc_request *r);
    /* What it still waits for, for the note after FC_TIMEOUT. */
    const char *(*waits_for)(struct fc_request *r);
};

/* Room for one more stream-ordered request in the family, and the
 * progress thread to drive it. Lock held. */
fc_result_t gpu_queue_prepare(struct comm_shared *sh);
/* Queues the built request r, to start on its buffers with its tag base
 * once path says its stream has reached it. Lock held, after
 * gpu_queue_prepare; r is the progress thread's from now on. */
void gpu_queue_add_locked(struct comm_shared *sh, struct fc_request *r,
                          const struct gpu_stream_path *path, void *stream, uint64_t tagbase,
                          const void *sendbuf, void *recvbuf);
/* Both, taking c's family lock. */
fc_result_t gpu_queue_add(struct fc_comm *c, struct fc_request *r,
                          const struct gpu_stream_path *path, void *stream, uint64_t tagbase,
                          const void *sendbuf, void *recvbuf);
/* Progress (lock held): starts the requests whose stream has reached them,
 * in order (the family's comm_device.stream_start_ready). */
void gpu_queue_start_ready(struct comm_shared *sh);
/* The calling thread's token where stream is CUDA's per-thread default
 * stream (one handle, a different stream in each thread), else 0. */
uint64_t gpu_stream_owner(void *stream);

#endif /* FC_GPU_QUEUE_H */
