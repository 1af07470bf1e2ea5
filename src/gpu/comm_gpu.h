/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The device branch as the layer above the core (api.c) sees it: the hooks
 * a family gets at creation (the memory route, the ordering after the
 * caller's stream: api.c reaches them through the family, never by name)
 * and the stream-ordered collectives. Nothing in the core includes this file.
 */
#ifndef FC_GPU_COMM_GPU_H
#define FC_GPU_COMM_GPU_H

#include "comm.h"

/* The hooks comm_create takes for a family with device memory. */
extern const struct comm_device gpu_device_hooks;

/* Sends r through the device-memory transport when a buffer is on a GPU
 * (gpu_device_hooks.route). */
fc_result_t gpu_memory_route(struct fc_comm *c, struct comm_call *call, const void *sendbuf,
                             const void *recvbuf, struct fc_request *r);
/* A blocking or nonblocking operation on device buffers starts after the
 * caller's work on the legacy default stream (stream-ordered ones are
 * ordered by their stream instead). */
fc_result_t gpu_order_after_caller(struct fc_comm *c, struct fc_request *r);
/* The stream-ordered form of a collective: queued behind the work already
 * on stream, and later work on stream waits for it (stream.c). */
fc_result_t gpu_stream_collective(struct fc_comm *c, const struct coll_args *a,
                                  const void *sendbuf, void *recvbuf, void *stream);

#endif /* FC_GPU_COMM_GPU_H */
