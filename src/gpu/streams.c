/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * CUDA streams and events, and the kernels and copies queued on them:
 * fabcoll's own streams (or executor streams, whose work is posted to
 * exec.c), asynchronous copies, reductions and scaling, the fused small
 * allreduce's launch, and a pool of events per device.
 *
 * This file owns the stream and event handles of gpu.h. It does not decide
 * what a collective queues (the device transport and the fused allreduce
 * do) and it loads nothing (gpu.c).
 */
#define _GNU_SOURCE
#include "gpu_driver.h"

#include <stdlib.h>
#include <string.h>

#include "gpu_exec.h"
#include "log.h"

static struct gpu_event *event_pool[GPU_MAXDEV];

/* e's CUDA event, made on first use (context current): see gpu_event_get */
static CUresult ev_make(struct gpu_event *e)
{
    if (e->e)
        return CUDA_SUCCESS;
    CUresult r = gpu_cu.cuEventCreate(&e->e, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS)
        e->e = NULL;
    return r;
}

fc_result_t gpu_stream_create(int device, gpu_stream_t **out)
{
    struct gpu_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    s->device = device;
    fc_result_t rc = gpu_device_init(device);
    if (rc == FC_SUCCESS) {
        gpu_cu.cuCtxPushCurrent_v2(gpu_cu.ctx[device]);
        CUresult r = gpu_cu.cuStreamCreate(&s->s, CU_STREAM_NON_BLOCKING);
        CUcontext old;
        gpu_cu.cuCtxPopCurrent_v2(&old);
        if (r != CUDA_SUCCESS)
            rc = FC_ERR(FC_ERR_CUDA, "cuStreamCreate on device %d failed: %s", device,
                        gpu_cu_err(r));
    }
    if (rc != FC_SUCCESS) {
        free(s);
        return rc;
    }
    *out = s;
    return FC_SUCCESS;
}

void gpu_stream_destroy(gpu_stream_t *s)
{
    if (!s)
        return;
    if (s->x) {
        gpu_exec_destroy(s);
        return;
    }
    gpu_cu.cuCtxPushCurrent_v2(gpu_cu.ctx[s->device]);
    gpu_cu.cuStreamSynchronize(s->s);
    gpu_cu.cuStreamDestroy_v2(s->s);
    CUcontext old;
    gpu_cu.cuCtxPopCurrent_v2(&old);
    free(s);
}

void *gpu_stream_raw(gpu_stream_t *s)
{
    return s->s;
}

fc_result_t gpu_memcpy_async(void *dst, const void *src, size_t len, gpu_stream_t *s)
{
    if (!len)
        return FC_SUCCESS;
    if (s->x)
        return gpu_exec_post(s, X_COPY, dst, src, NULL, len, 0, 0, 0);
    fc_result_t rc = gpu_ctx_push(s->device);
    if (rc != FC_SUCCESS)
        return rc;
    CUresult r =
        gpu_cu.cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, len, s->s);
    if (r != CUDA_SUCCESS)
        rc = FC_ERR(FC_ERR_CUDA, "cuMemcpyAsync(%p <- %p, %zu bytes) failed: %s", dst, src, len,
                    gpu_cu_err(r));
    gpu_ctx_pop();
    return rc;
}

static unsigned grid_for(int d, size_t n)
{
    size_t blocks = (n + 255) / 256;
    size_t cap = (size_t)(gpu_cu.nsm[d] > 0 ? gpu_cu.nsm[d] : 16) * 8;
    if (blocks > cap)
        blocks = cap;
    return (unsigned)(blocks ? blocks : 1);
}

fc_result_t gpu_reduce_async(void *dst, const void *a, const void *b, size_t n, fc_datatype_t dt,
                             fc_op_t op, gpu_stream_t *s)
{
    if (!n)
        return FC_SUCCESS;
    int o = op == FC_AVG ? FC_SUM : (int)op;
    if (s->x)
        return gpu_exec_post(s, X_REDUCE, dst, a, b, n, dt, o, 0);
    fc_result_t rc = gpu_ctx_push(s->device);
    if (rc != FC_SUCCESS)
        return rc;
    CUdeviceptr pd = (CUdeviceptr)(uintptr_t)dst, pa = (CUdeviceptr)(uintptr_t)a,
                pb = (CUdeviceptr)(uintptr_t)b;
    size_t cnt = n;
    void *args[] = {&pd, &pa, &pb, &cnt};
    CUresult r = gpu_cu.cuLaunchKernel(gpu_cu.red[s->device][dt][o], grid_for(s->device, n), 1, 1,
                                       256, 1, 1, 0, s->s, args, NULL);
    if (r != CUDA_SUCCESS)
        rc = FC_ERR(FC_ERR_CUDA, "launching the %s %s reduction kernel failed: %s",
                    gpu_dt_names[dt], gpu_op_names[o], gpu_cu_err(r));
    gpu_ctx_pop();
    return rc;
}

fc_result_t gpu_scale_async(void *dst, const void *src, size_t n, fc_datatype_t dt,
                            uint32_t divisor, gpu_stream_t *s)
{
    if (!n)
        return FC_SUCCESS;
    if (s->x)
        return gpu_exec_post(s, X_SCALE, dst, src, NULL, n, dt, 0, divisor);
    fc_result_t rc = gpu_ctx_push(s->device);
    if (rc != FC_SUCCESS)
        return rc;
    CUdeviceptr pd = (CUdeviceptr)(uintptr_t)dst, ps = (CUdeviceptr)(uintptr_t)src;
    size_t cnt = n;
    uint32_t dv = divisor;
    void *args[] = {&pd, &ps, &cnt, &dv};
    CUresult r = gpu_cu.cuLaunchKernel(gpu_cu.scl[s->device][dt], grid_for(s->device, n), 1, 1, 256,
                                       1, 1, 0, s->s, args, NULL);
    if (r != CUDA_SUCCESS)
        rc = FC_ERR(FC_ERR_CUDA, "launching the %s scale kernel failed: %s", gpu_dt_names[dt],
                    gpu_cu_err(r));
    gpu_ctx_pop();
    return rc;
}

fc_result_t gpu_premul_async(void *dst, const void *src, size_t n, fc_datatype_t dt,
                             const void *scalar, gpu_stream_t *s)
{
    if (!n)
        return FC_SUCCESS;
    uint64_t m = 0; /* the scalar's bytes, at most 8 */
    memcpy(&m, scalar, fc_datatype_size(dt));
    if (s->x) /* the executor takes the scalar's bytes in place of b */
        return gpu_exec_post(s, X_PREMUL, dst, src, (const void *)(uintptr_t)m, n, dt, 0, 0);
    fc_result_t rc = gpu_ctx_push(s->device);
    if (rc != FC_SUCCESS)
        return rc;
    CUdeviceptr pd = (CUdeviceptr)(uintptr_t)dst, ps = (CUdeviceptr)(uintptr_t)src;
    size_t cnt = n;
    void *args[] = {&pd, &ps, &cnt, &m};
    CUresult r = gpu_cu.cuLaunchKernel(gpu_cu.pre[s->device][dt], grid_for(s->device, n), 1, 1,
                                       256, 1, 1, 0, s->s, args, NULL);
    if (r != CUDA_SUCCESS)
        rc = FC_ERR(FC_ERR_CUDA, "launching the %s pre-scaling kernel failed: %s",
                    gpu_dt_names[dt], gpu_cu_err(r));
    gpu_ctx_pop();
    return rc;
}

fc_result_t gpu_fused_launch(gpu_stream_t *s, gpu_event_t *ev, void *const *caller,
                             const void *send, void *recv, uint64_t *out, const uint64_t *in,
                             volatile uint32_t *flags, uint32_t seq, int n, int rank, size_t count,
                             fc_datatype_t dt, fc_op_t op, int *queued)
{
    const int device = s->device;
    int o = op == FC_AVG ? FC_SUM : (int)op;
    fc_result_t rc = gpu_ctx_push(device);
    if (rc != FC_SUCCESS)
        return rc;
    CUdeviceptr ps = (CUdeviceptr)(uintptr_t)send, pr = (CUdeviceptr)(uintptr_t)recv,
                po = (CUdeviceptr)(uintptr_t)out, pi = (CUdeviceptr)(uintptr_t)in,
                pf = (CUdeviceptr)(uintptr_t)flags;
    uint32_t sq = seq, div = op == FC_AVG ? (uint32_t)n : 0;
    size_t cnt = count;
    void *args[] = {&ps, &pr, &po, &pi, &pf, &sq, &n, &rank, &cnt, &div};
    /* after the caller's work on the legacy stream, on our own stream: a
     * kernel that spins must not hold back later work of other threads
     * (another communicator's kernel among it). Nothing queued there (the
     * usual case in a loop of calls): nothing to wait for. */
    const char *what = "cuStreamQuery on the legacy default stream";
    CUstream on = caller ? (CUstream)*caller : s->s;
    CUresult r = caller ? CUDA_SUCCESS : gpu_cu.cuStreamQuery(CU_STREAM_LEGACY);
    if (queued)
        *queued = r != CUDA_SUCCESS;
    if (r == CUDA_ERROR_NOT_READY) {
        what = "cuEventCreate";
        r = ev_make(ev);
        if (r == CUDA_SUCCESS) {
            what = "cuEventRecord on the legacy default stream";
            r = gpu_cu.cuEventRecord(ev->e, CU_STREAM_LEGACY);
        }
        if (r == CUDA_SUCCESS) {
            what = "cuStreamWaitEvent";
            r = gpu_cu.cuStreamWaitEvent(s->s, ev->e, 0);
        }
    }
    if (r == CUDA_SUCCESS) {
        what = "cuLaunchKernel";
        r = gpu_cu.cuLaunchKernel(gpu_cu.fus[device][dt][o], 1, 1, 1, 1024, 1, 1, 0, on, args,
                                  NULL);
    }
    if (r != CUDA_SUCCESS)
        rc = FC_ERR(FC_ERR_CUDA,
                    "launching the fused %s %s allreduce kernel on GPU %d%s: %s "
                    "failed: %s",
                    gpu_dt_names[dt], gpu_op_names[o], device,
                    caller ? " on the caller's stream" : "", what, gpu_cu_err(r));
    gpu_ctx_pop();
    return rc;
}

/* An event from the pool, or a new one without its CUDA event: that is
 * made when it is first recorded on a CUDA stream (ev_record). Events of an
 * executor stream are command numbers and never need one, so the progress
 * thread, which records them while stream-ordered kernels run, makes no
 * CUDA call that takes the context's lock for writing (cuEventCreate):
 * such a call waits while the application's cuMemFree waits for the
 * device, and the device would wait for this thread. */
fc_result_t gpu_event_get(int device, gpu_event_t **out)
{
    fc_result_t rc = gpu_device_init(device);
    if (rc != FC_SUCCESS)
        return rc;
    pthread_mutex_lock(&gpu_cu.lock);
    struct gpu_event *e = event_pool[device];
    if (e)
        event_pool[device] = e->next;
    pthread_mutex_unlock(&gpu_cu.lock);
    if (!e) {
        e = calloc(1, sizeof(*e));
        if (!e)
            return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
        e->device = device;
    }
    e->x = NULL;
    *out = e;
    return FC_SUCCESS;
}

void gpu_event_put(gpu_event_t *e)
{
    if (!e)
        return;
    e->x = NULL;
    pthread_mutex_lock(&gpu_cu.lock);
    e->next = event_pool[e->device];
    event_pool[e->device] = e;
    pthread_mutex_unlock(&gpu_cu.lock);
}

/* Records e on a CUDA stream, its CUDA event made on first use; where and
 * hint: which stream and what to check, for the message */
static fc_result_t ev_record(gpu_event_t *e, CUstream stream, const char *where, const char *hint)
{
    fc_result_t rc = gpu_ctx_push(e->device);
    if (rc != FC_SUCCESS)
        return rc;
    CUresult r = ev_make(e);
    if (r != CUDA_SUCCESS)
        rc = FC_ERR(FC_ERR_CUDA, "cuEventCreate failed: %s", gpu_cu_err(r));
    else if ((r = gpu_cu.cuEventRecord(e->e, stream)) != CUDA_SUCCESS)
        rc = FC_ERR(FC_ERR_CUDA, "cuEventRecord%s failed: %s%s", where, gpu_cu_err(r), hint);
    gpu_ctx_pop();
    return rc;
}

fc_result_t gpu_event_record(gpu_event_t *e, gpu_stream_t *s)
{
    e->x = s->x;
    if (s->x) {
        e->seq = s->x->next; /* done with the last command posted */
        return FC_SUCCESS;
    }
    return ev_record(e, s->s, "", "");
}

fc_result_t gpu_event_record_raw(gpu_event_t *e, void *stream)
{
    return ev_record(e, (CUstream)stream, " on the caller's stream",
                     " (is it a stream of this buffer's device?)");
}

int gpu_event_done(gpu_event_t *e)
{
    if (e->x) {
        uint32_t done = __atomic_load_n(&e->x->ctl[C_DONE], __ATOMIC_ACQUIRE);
        if ((int32_t)(done - e->seq) >= 0)
            return 1;
        return ++e->x->polls % 4096 ? 0 : gpu_exec_probe(e->x, e->device);
    }
    if (!e->e)
        return 1; /* never recorded (cuEventQuery says the same) */
    gpu_cu.cuCtxPushCurrent_v2(gpu_cu.ctx[e->device]);
    CUresult r = gpu_cu.cuEventQuery(e->e);
    gpu_ctx_pop();
    if (r == CUDA_SUCCESS)
        return 1;
    if (r == CUDA_ERROR_NOT_READY)
        return 0;
    FC_ERR(FC_ERR_CUDA, "cuEventQuery failed: %s (%d): a kernel or copy on the GPU failed",
           gpu_cu_err(r), (int)r);
    return -1;
}

fc_result_t gpu_stream_wait_event_raw(void *stream, gpu_event_t *e)
{
    if (!e->e)
        return FC_SUCCESS; /* never recorded: nothing to wait for */
    fc_result_t rc = gpu_ctx_push(e->device);
    if (rc != FC_SUCCESS)
        return rc;
    CUresult r = gpu_cu.cuStreamWaitEvent((CUstream)stream, e->e, 0);
    if (r != CUDA_SUCCESS)
        rc = FC_ERR(FC_ERR_CUDA, "cuStreamWaitEvent failed: %s", gpu_cu_err(r));
    gpu_ctx_pop();
    return rc;
}

fc_result_t gpu_stream_wait_event(gpu_stream_t *s, gpu_event_t *e)
{
    if (s->x || e->x) {
        /* one executor runs its commands in order */
        if (s->x == e->x)
            return FC_SUCCESS;
        return FC_ERR(FC_ERR_INTERNAL, "an executor stream cannot wait for another stream's "
                                       "event");
    }
    return gpu_stream_wait_event_raw(s->s, e);
}

fc_result_t gpu_stream_sync(gpu_stream_t *s)
{
    fc_result_t rc = gpu_ctx_push(s->device);
    if (rc != FC_SUCCESS)
        return rc;
    CUresult r = gpu_cu.cuStreamSynchronize(s->s);
    if (r != CUDA_SUCCESS)
        rc = FC_ERR(FC_ERR_CUDA, "cuStreamSynchronize failed: %s", gpu_cu_err(r));
    gpu_ctx_pop();
    return rc;
}
