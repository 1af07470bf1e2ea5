/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The stream executor: one persistent kernel (fc_exec in gpu_kernels.cu)
 * queued on the caller's stream, which runs the copies and reductions the
 * host posts to a ring of commands in pinned memory, so a stream-ordered
 * collective needs one kernel launch, not one per step (gpu_exec.h has the
 * ring's layout).
 *
 * This file owns the ring and its control words. It posts commands and
 * launches the kernel; what the commands are for is the device
 * transport's business, and streams.c routes an executor stream's work
 * here.
 */
#define _GNU_SOURCE
#include "gpu_driver.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gpu_exec.h"
#include "log.h"

fc_result_t gpu_exec_create(int device, gpu_stream_t **out)
{
    fc_result_t rc = gpu_device_init(device);
    if (rc != FC_SUCCESS)
        return rc;
    struct gpu_stream *s = calloc(1, sizeof(*s));
    struct gpu_exec *x = calloc(1, sizeof(*x));
    if (!s || !x) {
        free(s);
        free(x);
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    }
    s->device = device;
    s->x = x;
    x->ring = gpu_host_alloc(device, EXEC_RING * EXEC_WORDS * 8);
    x->ctl = gpu_host_alloc(device, 64);
    if (!x->ring || !x->ctl) {
        rc =
            FC_ERR(FC_ERR_CUDA, "no memory for a stream executor on GPU %d: %s", device, err_get());
        gpu_host_free(x->ring);
        gpu_host_free((void *)x->ctl);
        free(x);
        free(s);
        return rc;
    }
    memset(x->ring, 0, EXEC_RING * EXEC_WORDS * 8);
    memset((void *)x->ctl, 0, 64);
    gpu_cu.cuCtxPushCurrent_v2(gpu_cu.ctx[device]);
    CUresult r = gpu_cu.cuEventCreate(&x->probe, CU_EVENT_DISABLE_TIMING);
    gpu_ctx_pop();
    if (r != CUDA_SUCCESS) {
        x->probe = NULL;
        FC_WARN(LOG_COLL,
                "cuEventCreate failed: %s: a CUDA error during a stream-ordered "
                "collective on GPU %d will show as a timeout",
                gpu_cu_err(r), device);
    }
    *out = s;
    return FC_SUCCESS;
}

fc_result_t gpu_exec_launch(gpu_stream_t *s, void *cuda_stream, uint32_t *launch)
{
    struct gpu_exec *x = s->x;
    fc_result_t rc = gpu_ctx_push(s->device);
    if (rc != FC_SUCCESS)
        return rc;
    CUdeviceptr pr = (CUdeviceptr)(uintptr_t)x->ring, pc = (CUdeviceptr)(uintptr_t)x->ctl;
    uint32_t l = x->launched + 1;
    void *args[] = {&pr, &pc, &l};
    CUresult r = gpu_cu.cuLaunchKernel(gpu_cu.exe[s->device], 1, 1, 1, EXEC_THREADS, 1, 1, 0,
                                       (CUstream)cuda_stream, args, NULL);
    gpu_ctx_pop();
    if (r != CUDA_SUCCESS)
        return FC_ERR(FC_ERR_CUDA,
                      "queueing the stream-ordered executor kernel on the caller's "
                      "stream (GPU %d) failed: %s (is the stream on this buffer's device?)",
                      s->device, gpu_cu_err(r));
    x->launched = *launch = l;
    return FC_SUCCESS;
}

int gpu_exec_started(gpu_stream_t *s, uint32_t launch)
{
    return (int32_t)(__atomic_load_n(&s->x->ctl[C_STARTED], __ATOMIC_ACQUIRE) - launch) >= 0;
}

int gpu_exec_idle(gpu_stream_t *s)
{
    return (int32_t)(__atomic_load_n(&s->x->ctl[C_LEFT], __ATOMIC_ACQUIRE) - s->x->launched) >= 0;
}

/* 0, or -1 with the error recorded when the context has failed (the
 * executor's kernel faulted, or another one did): its commands never end */
int gpu_exec_probe(struct gpu_exec *x, int device)
{
    if (!x->probe)
        return 0;
    gpu_cu.cuCtxPushCurrent_v2(gpu_cu.ctx[device]);
    CUresult r = gpu_cu.cuEventQuery(x->probe);
    gpu_ctx_pop();
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_READY)
        return 0;
    FC_ERR(FC_ERR_CUDA, "GPU %d failed while a stream-ordered collective's kernel ran: %s (%d)",
           device, gpu_cu_err(r), (int)r);
    return -1;
}

void gpu_exec_open(gpu_stream_t *s)
{
    s->x->closed = 0;
}

/* Posts one command; waits (bounded) while the ring is full: the kernel
 * runs when commands are posted (gpu_exec_started), so it empties it. */
fc_result_t gpu_exec_post(struct gpu_stream *s, uint32_t kind, void *dst, const void *a,
                          const void *b, size_t n, int dt, int op, uint32_t div)
{
    struct gpu_exec *x = s->x;
    if (x->closed && kind != X_EXIT)
        return FC_SUCCESS; /* a late post of a closed request: dropped */
    uint32_t seq = x->next + 1;
    double t0 = 0;
    for (unsigned spin = 0; (int32_t)(seq - EXEC_RING - x->ctl[C_DONE]) > 0; spin++) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        double now = ts.tv_sec + ts.tv_nsec * 1e-9;
        if (!spin)
            t0 = now;
        else if (now - t0 > 30)
            return FC_ERR(FC_ERR_CUDA,
                          "the stream executor on GPU %d took no command for 30 s "
                          "(%u queued): the GPU is stuck or the caller's stream is held",
                          s->device, EXEC_RING);
        sched_yield();
    }
    uint64_t *slot = x->ring + (size_t)(seq % EXEC_RING) * EXEC_WORDS;
    uint64_t d = (uintptr_t)dst, pa = (uintptr_t)a, pb = (uintptr_t)b, nn = n;
    const uint32_t w[12] = {(uint32_t)d,  (uint32_t)(d >> 32),  (uint32_t)pa, (uint32_t)(pa >> 32),
                            (uint32_t)pb, (uint32_t)(pb >> 32), (uint32_t)nn, (uint32_t)(nn >> 32),
                            kind,         (uint32_t)dt,         (uint32_t)op, div};
    /* each word valid on its own (its seq); release: what the host wrote
     * for the command (a bounce buffer's bytes) goes before it */
    for (int i = 0; i < 12; i++)
        __atomic_store_n(&slot[i], (uint64_t)seq << 32 | w[i], __ATOMIC_RELEASE);
    x->next = seq;
    return FC_SUCCESS;
}

fc_result_t gpu_exec_close(gpu_stream_t *s)
{
    fc_result_t rc = gpu_exec_post(s, X_EXIT, NULL, NULL, NULL, 0, 0, 0, 0);
    s->x->closed = 1;
    return rc;
}

void gpu_exec_destroy(struct gpu_stream *s)
{
    struct gpu_exec *x = s->x;
    x->ctl[C_ABORT] = 1;
    /* kernels still queued read the ring when they run: wait a while */
    for (int i = 0; i < 20000 && (int32_t)(x->ctl[C_LEFT] - x->launched) < 0; i++)
        usleep(100);
    if ((int32_t)(x->ctl[C_LEFT] - x->launched) < 0) {
        FC_WARN(LOG_COLL,
                "a stream-ordered executor kernel on GPU %d has not run yet after 2 s: "
                "its %zu bytes of pinned memory are left allocated",
                s->device, (size_t)EXEC_RING * EXEC_WORDS * 8 + 64);
    } else {
        gpu_host_free(x->ring);
        gpu_host_free((void *)x->ctl);
    }
    if (x->probe) {
        gpu_cu.cuCtxPushCurrent_v2(gpu_cu.ctx[s->device]);
        gpu_cu.cuEventDestroy_v2(x->probe);
        gpu_ctx_pop();
    }
    free(x);
    free(s);
}
