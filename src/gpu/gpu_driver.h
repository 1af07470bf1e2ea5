/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the CUDA files of the device branch share (CUDA builds only): the
 * driver's entry points, loaded at run time (gpu.c), and the insides of
 * the stream, event and executor handles that gpu.h keeps opaque.
 *
 * gpu.c owns the driver and the devices' contexts; streams.c the CUDA
 * streams, events and the kernels queued on them; exec.c the stream
 * executor; hostcopy.c the staged copies of pageable host memory. Calls
 * point one way: streams.c -> exec.c -> gpu.c, hostcopy.c -> gpu.c. Nothing
 * outside src/gpu/ includes this header.
 */
#ifndef FC_GPU_DRIVER_H
#define FC_GPU_DRIVER_H

#include <cuda.h>
#include <pthread.h>
#include <stdint.h>

#include "gpu.h"

#define GPU_MAXDEV 64
#define GPU_NDT 12 /* fc_datatype_t's values */

/* The driver entry points we use, resolved with dlsym by their versioned
 * names (cuda.h maps e.g. cuMemAlloc to cuMemAlloc_v2). */
#define CU_FUNCS(X)                                                                            \
    X(cuInit, CUresult, (unsigned))                                                            \
    X(cuDriverGetVersion, CUresult, (int *))                                                   \
    X(cuGetErrorString, CUresult, (CUresult, const char **))                                   \
    X(cuDeviceGetCount, CUresult, (int *))                                                     \
    X(cuDeviceGet, CUresult, (CUdevice *, int))                                                \
    X(cuDeviceGetAttribute, CUresult, (int *, CUdevice_attribute, CUdevice))                   \
    X(cuDeviceGetPCIBusId, CUresult, (char *, int, CUdevice))                                  \
    X(cuDevicePrimaryCtxRetain, CUresult, (CUcontext *, CUdevice))                             \
    X(cuCtxPushCurrent_v2, CUresult, (CUcontext))                                              \
    X(cuCtxPopCurrent_v2, CUresult, (CUcontext *))                                             \
    X(cuCtxSetCurrent, CUresult, (CUcontext))                                                  \
    X(cuPointerGetAttributes, CUresult, (unsigned, CUpointer_attribute *, void **, CUdeviceptr)) \
    X(cuMemAlloc_v2, CUresult, (CUdeviceptr *, size_t))                                        \
    X(cuMemFree_v2, CUresult, (CUdeviceptr))                                                   \
    X(cuMemHostAlloc, CUresult, (void **, size_t, unsigned))                                   \
    X(cuMemFreeHost, CUresult, (void *))                                                       \
    X(cuMemcpyAsync, CUresult, (CUdeviceptr, CUdeviceptr, size_t, CUstream))                   \
    X(cuMemcpy, CUresult, (CUdeviceptr, CUdeviceptr, size_t))                                  \
    X(cuMemsetD8_v2, CUresult, (CUdeviceptr, unsigned char, size_t))                           \
    X(cuStreamCreate, CUresult, (CUstream *, unsigned))                                        \
    X(cuStreamDestroy_v2, CUresult, (CUstream))                                                \
    X(cuStreamSynchronize, CUresult, (CUstream))                                               \
    X(cuStreamQuery, CUresult, (CUstream))                                                     \
    X(cuStreamWaitEvent, CUresult, (CUstream, CUevent, unsigned))                              \
    X(cuLaunchHostFunc, CUresult, (CUstream, CUhostFn, void *))                                \
    X(cuEventCreate, CUresult, (CUevent *, unsigned))                                          \
    X(cuEventDestroy_v2, CUresult, (CUevent))                                                  \
    X(cuEventRecord, CUresult, (CUevent, CUstream))                                            \
    X(cuEventQuery, CUresult, (CUevent))                                                       \
    X(cuModuleLoadData, CUresult, (CUmodule *, const void *))                                  \
    X(cuModuleGetFunction, CUresult, (CUfunction *, CUmodule, const char *))                   \
    X(cuLaunchKernel, CUresult,                                                                \
      (CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,       \
       CUstream, void **, void **))

#define GPU_CU_DECL(name, ret, args) ret(*name) args;

struct gpu_driver {
    pthread_once_t once;
    int ok;
    char why[256];
    void *lib;
    CU_FUNCS(GPU_CU_DECL)
    int ndev;
    pthread_mutex_t lock;
    CUcontext ctx[GPU_MAXDEV];
    CUmodule mod[GPU_MAXDEV];
    int nsm[GPU_MAXDEV];
    CUfunction red[GPU_MAXDEV][GPU_NDT][4], scl[GPU_MAXDEV][GPU_NDT], fus[GPU_MAXDEV][GPU_NDT][4];
    CUfunction pre[GPU_MAXDEV][GPU_NDT];
    CUfunction exe[GPU_MAXDEV];
    int loaded[GPU_MAXDEV];
};

/* The driver, loaded once (gpu.c): ok says it is usable, why what it is. */
extern struct gpu_driver gpu_cu;

struct gpu_exec;

struct gpu_stream {
    CUstream s;
    int device;
    struct gpu_exec *x; /* an executor stream (gpu_exec_create): s is unused */
};

struct gpu_event {
    CUevent e;
    int device;
    struct gpu_exec *x; /* recorded on an executor stream: done once command seq is */
    uint32_t seq;
    struct gpu_event *next;
};

#define EXEC_THREADS 1024 /* one block (gpu_kernels.cu says why) */

struct gpu_exec {
    uint64_t *ring;         /* pinned host, EXEC_WORDS per command */
    volatile uint32_t *ctl; /* pinned host */
    uint32_t next;          /* the last command posted */
    uint32_t launched;      /* the last launch number */
    int closed;             /* posts are dropped (gpu_exec_open ends it) */
    unsigned polls;         /* events polled not done: now and then, probe */
    CUevent probe;          /* never recorded: its query tells a context error */
};

/* ---- gpu.c ---------------------------------------------------------------------- */

/* The driver's message for r. */
const char *gpu_cu_err(CUresult r);
/* Retains device d's primary context and loads our kernels into it (once). */
fc_result_t gpu_device_init(int d);
/* Makes device d's context current on top of the caller's (gpu_ctx_pop
 * puts the caller's back): the application's own current context is never
 * changed behind its back. */
fc_result_t gpu_ctx_push(int d);
void gpu_ctx_pop(void);
/* The kernels' names of datatypes and ops, by their enum values. */
extern const char *const gpu_dt_names[GPU_NDT];
extern const char *const gpu_op_names[4];

/* ---- exec.c --------------------------------------------------------------------- */

/* Posts one command to s's executor; waits (bounded) while its ring is full. */
fc_result_t gpu_exec_post(struct gpu_stream *s, uint32_t kind, void *dst, const void *a,
                          const void *b, size_t n, int dt, int op, uint32_t div);
/* 0, or -1 with the error recorded when the context has failed. */
int gpu_exec_probe(struct gpu_exec *x, int device);
/* Frees an executor stream (gpu_stream_destroy of one). */
void gpu_exec_destroy(struct gpu_stream *s);

#endif /* FC_GPU_DRIVER_H */
