/* SPDX-License-Identifier: BSD-3-Clause */
/* The device-memory transport (see gpu_tp.c): wraps the fabric's transport
 * with staging through pinned bounce buffers (or passes device pointers
 * straight through in the gdr tier) and runs local steps as CUDA kernels. */
#ifndef FC_GPU_TP_H
#define FC_GPU_TP_H

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
struct transport *gpu_tp_transport(struct gpu_tp *g);
/* Orders the transport's streams after the work the caller queued on the
 * legacy default stream (called at the start of each blocking collective). */
fc_result_t gpu_tp_order_after_default(struct gpu_tp *g);
int gpu_tp_device(const struct gpu_tp *g);
/* After the inner transport has stopped (no callback can come). */
void gpu_tp_destroy(struct gpu_tp *g);

#endif /* FC_GPU_TP_H */
