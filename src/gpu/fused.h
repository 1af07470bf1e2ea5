/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fused small allreduce (fused.c) as the rest of the device branch
 * sees it: the memory route's choice, the kernel's launch for a blocking or
 * nonblocking call, the stream-ordered form, and its end.
 */
#ifndef FC_GPU_FUSED_H
#define FC_GPU_FUSED_H

#include "comm.h"

/* The memory route (memory.c) for an allreduce on device buffers of GPU
 * dev: 1 when the fused transport takes it (r->tp, r->tp_call, r->on_end
 * set; call->algo becomes gather's fused form), 0 when it is not for this
 * call (not gather, too big, off, or the family's fused state busy). */
int gpu_fused_route(struct fc_comm *c, struct comm_call *call, int dev, const void *sendbuf,
                    void *recvbuf, struct fc_request *r);
/* r is the fused transport's call. */
int gpu_fused_call(const struct fc_request *r);
/* The call's kernel: a blocking call's on the family's own stream after the
 * caller's work on the legacy default stream (its order_after_caller), a
 * stream-ordered call's on its stream (gpu_fused_enqueue). */
fc_result_t gpu_fused_launch_call(struct fc_comm *c, struct fc_request *r);
/* A stream-ordered call's kernel on stream, and its request queued for the
 * progress thread: r is the queue's on success, the caller's to free
 * otherwise. */
fc_result_t gpu_fused_enqueue(struct fc_comm *c, struct fc_request *r, void *stream,
                              uint64_t tagbase, const void *sendbuf, void *recvbuf);
/* The family's fused state, at its end (after its last request). */
void gpu_fused_free(struct comm_shared *sh);

#endif /* FC_GPU_FUSED_H */
