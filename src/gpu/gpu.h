/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA without a hard dependency.
 *
 * CUDA builds load the driver (libcuda.so.1) at run time and use the
 * driver API only: memory types, streams and events, pinned and device
 * memory, and the reduction kernels of gpu_kernels.cu, embedded in the
 * library as a fatbin. On a machine without a GPU (or a build without
 * CUDA) gpu_available() says why, every pointer is host memory, and device
 * pointers cannot even be recognised: callers get FC_ERR_UNSUPPORTED /
 * FC_ERR_CUDA with that reason when they need CUDA.
 *
 * Nothing here is tied to a communicator; streams are created per device
 * by whoever needs them.
 */
#ifndef FC_GPU_H
#define FC_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "fabcoll.h"

enum gpu_kind { GPU_HOST = 0, GPU_DEVICE = 1, GPU_MANAGED = 2 };

struct gpu_ptr {
    int kind;        /* enum gpu_kind */
    int device;      /* ordinal, for device/managed memory */
    uint64_t buffer_id; /* unique per allocation (CU_POINTER_ATTRIBUTE_BUFFER_ID) */
    uintptr_t base;  /* start and size of the allocation */
    size_t size;
    int pinned;      /* GPU_HOST: page-locked by CUDA (cuMemHostAlloc, cuMemHostRegister) */
};

/* 1 when the driver is loaded and a device exists; else *why says why. */
int gpu_available(const char **why);
/* Classifies p. Without CUDA everything is host memory. */
fc_result_t gpu_ptr_info(const void *p, struct gpu_ptr *out);
/* 1 when p is device or managed memory (0 for NULL, host and pinned host memory). */
int gpu_on_device(const void *p);
int gpu_device_count(void);

typedef struct gpu_stream gpu_stream_t; /* a CUstream on a device's primary context */
typedef struct gpu_event gpu_event_t;

fc_result_t gpu_stream_create(int device, gpu_stream_t **out);
void gpu_stream_destroy(gpu_stream_t *s);
/* Makes the device's primary context current in this thread. */
fc_result_t gpu_set_device(int device);

/* Asynchronous work on s. */
fc_result_t gpu_memcpy_async(void *dst, const void *src, size_t len, gpu_stream_t *s);
fc_result_t gpu_reduce_async(void *dst, const void *a, const void *b, size_t n, fc_datatype_t dt,
                             fc_op_t op, gpu_stream_t *s);
fc_result_t gpu_scale_async(void *dst, const void *src, size_t n, fc_datatype_t dt,
                            uint32_t divisor, gpu_stream_t *s);
/* dst = src * *scalar (a value of dt), as the host's reduce_premul_get. */
fc_result_t gpu_premul_async(void *dst, const void *src, size_t n, fc_datatype_t dt,
                             const void *scalar, gpu_stream_t *s);

/* The fused small allreduce, one block on stream s, ordered after the
 * caller's work on the legacy default stream (through ev, a pooled event
 * of the same device, when work is queued there), or, when caller is not
 * NULL, on the caller's stream *caller (stream-ordered calls, which that
 * stream orders): writes send to out as
 * W = ceil(bytes / 4) words of (seq << 32 | 4 bytes of data); waits for
 * the (n - 1) * W words of in (vector j - 1: rank rank + j mod n's) to
 * carry seq, or gives up once (int32_t)(flags[3] - seq) >= 0 (the host's
 * abort watermark); reduces the n vectors in rank order into recv,
 * divides by n for FC_AVG; writes seq to flags[2]. out, in and flags:
 * pinned host memory (gpu_host_alloc); (n - 1) * W * 4 <= 33 KiB. queued
 * (may be NULL): set to 1 when the legacy stream still had work at the
 * launch. See gpu_kernels.cu. */
fc_result_t gpu_fused_launch(gpu_stream_t *s, gpu_event_t *ev, void *const *caller,
                             const void *send, void *recv, uint64_t *out, const uint64_t *in,
                             volatile uint32_t *flags, uint32_t seq, int n, int rank,
                             size_t count, fc_datatype_t dt, fc_op_t op, int *queued);
/* 1 when contexts on the device are shared through MPS. */
int gpu_device_mps(int device);

/* Events from a pool (created without timing); record on a stream, query. */
fc_result_t gpu_event_get(int device, gpu_event_t **out);
void gpu_event_put(gpu_event_t *e);
fc_result_t gpu_event_record(gpu_event_t *e, gpu_stream_t *s);
fc_result_t gpu_event_record_raw(gpu_event_t *e, void *cuda_stream); /* a user's stream */
/* 1 done, 0 not yet, <0: error (message recorded) */
int gpu_event_done(gpu_event_t *e);
fc_result_t gpu_stream_wait_event_raw(void *cuda_stream, gpu_event_t *e);
fc_result_t gpu_stream_sync(gpu_stream_t *s);
/* Makes s wait for e; on an executor stream only its own events (in order). */
fc_result_t gpu_stream_wait_event(gpu_stream_t *s, gpu_event_t *e);

/* Executor streams: the GPU work of stream-ordered collectives on the
 * caller's stream itself (NCCL's model). gpu_exec_launch queues one of our
 * kernels on a caller's stream; it runs the copies, reductions and scales
 * posted to the executor stream (gpu_memcpy_async, gpu_reduce_async,
 * gpu_scale_async, in order; events recorded on it are done when the work
 * posted before them is), until gpu_exec_close. Launches of one executor
 * go on one caller stream, whose order runs them one after the other; post
 * nothing for a launch before gpu_exec_started says it runs, then
 * gpu_exec_open: between a close and the next open posts are dropped.
 * Events on it report a CUDA error of the context (a faulted kernel).
 * gpu_stream_destroy aborts kernels still queued. Why: a stream that waits
 * (cuStreamWaitValue32, or a kernel that spins) holds back whatever CUDA
 * maps onto the same hardware queue (CUDA_DEVICE_MAX_CONNECTIONS, 8 by
 * default), our own streams' copies among it. */
fc_result_t gpu_exec_create(int device, gpu_stream_t **out);
fc_result_t gpu_exec_launch(gpu_stream_t *s, void *cuda_stream, uint32_t *launch);
int gpu_exec_started(gpu_stream_t *s, uint32_t launch);
/* 1 when every kernel launched so far has left (none queued or running):
 * the executor may then serve another stream. */
int gpu_exec_idle(gpu_stream_t *s);
void gpu_exec_open(gpu_stream_t *s);
fc_result_t gpu_exec_close(gpu_stream_t *s);
/* Waits for the legacy default stream of the calling thread's context:
 * providers copy device memory with cudaMemcpy, which returns before a
 * device-to-device copy is done (libfabric's shm, CUDA IPC). */
void gpu_legacy_sync(void);
void *gpu_stream_raw(gpu_stream_t *s);

/* Memory. Pinned host memory is portable (usable from every context). */
void *gpu_host_alloc(int device, size_t len);
void gpu_host_free(void *p);
void *gpu_dev_alloc(int device, size_t len);
void gpu_dev_free(int device, void *p);
fc_result_t gpu_memset(void *dev, int byte, size_t len);
fc_result_t gpu_copy_sync(void *dst, const void *src, size_t len);

/* Stream-ordered copy between host memory of any kind (pageable too) and
 * device memory through `pinned` (gpu_host_alloc, len bytes), queued on
 * cuda_stream without the calling thread waiting (a cuMemcpyAsync from or
 * to pageable memory would wait for the stream). to_device: a host
 * function on the stream copies src into pinned, then the DMA to dst;
 * else the DMA from src into pinned, then a host function copies it to
 * dst. The host memory is read or written when the stream gets there.
 * Host memory that CUDA has page-locked over the whole range goes by DMA
 * alone, without `pinned`; a pageable copy from 1 MiB is split over the
 * copy helpers (gpu_copy_ways). */
fc_result_t gpu_stage_copy(int device, void *cuda_stream, void *dst, const void *src,
                           void *pinned, size_t len, int to_device);
/* How many threads copy pageable memory in a stream-ordered host function
 * (1-4: the function's own and up to 3 helper threads, "fc-copy", started
 * at the first split copy); 1 where ranks outnumber CPUs. Process-wide:
 * the last communicator set up for device memory decides. */
void gpu_copy_ways(int ways);

/* The device's PCI bus id, for logs. */
void gpu_pci_id(int device, char *buf, size_t len);
/* The PCI bus id ("0000:41:00.0") of the device whose context is current in
 * the calling thread, "" when none is (or CUDA is not in use). Never loads
 * or initialises the driver, nor creates or changes a context: a process
 * that has not used CUDA stays without it. */
void gpu_current_pci_id(char *buf, size_t len);

#endif /* FC_GPU_H */
