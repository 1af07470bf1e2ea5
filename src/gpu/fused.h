/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fused small allreduce (fused.c) as the rest of the device branch
 * sees it: its stream-ordered form and its end.
 */
#ifndef FC_GPU_FUSED_H
#define FC_GPU_FUSED_H

#include "comm.h"

/* A blocking allreduce of a small vector in device memory, as one CUDA
 * kernel around gather's exchange (gpu_device_hooks.take_allreduce). 0:
 * not for this call (run it the usual way); 1: done, *rc its result. */
int gpu_fused_run(struct fc_comm *c, const struct coll_args *a, const void *sendbuf,
                  void *recvbuf, fc_result_t *rc);
/* A stream-ordered allreduce as one fused kernel on stream (device
 * buffers, a vector small enough). 0: not for this call (take the lanes);
 * 1: taken, *rc its result. */
int gpu_fused_stream(struct fc_comm *c, const struct coll_args *a, const void *sendbuf,
                     void *recvbuf, void *stream, fc_result_t *rc);
/* The family's fused state, at its end (after its last request). */
void gpu_fused_free(struct comm_shared *sh);

#endif /* FC_GPU_FUSED_H */
