/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE
#include "gpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_config.h"
#include "gpu_exec.h"
#include "log.h"

#ifdef HAVE_CUDA
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

extern const unsigned char fc_gpu_fatbin[];
extern const size_t fc_gpu_fatbin_len;

#define MAXDEV 64

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

#define DECL(name, ret, args) ret(*name) args;

static struct {
    pthread_once_t once;
    int ok;
    char why[256];
    void *lib;
    CU_FUNCS(DECL)
    int ndev;
    pthread_mutex_t lock;
    CUcontext ctx[MAXDEV];
    CUmodule mod[MAXDEV];
    int nsm[MAXDEV];
    CUfunction red[MAXDEV][10][4], scl[MAXDEV][10], fus[MAXDEV][10][4], exe[MAXDEV];
    int loaded[MAXDEV];
} cu = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

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

static struct gpu_event *event_pool[MAXDEV];

/* e's CUDA event, made on first use (context current): see gpu_event_get */
static CUresult ev_make(struct gpu_event *e)
{
    if (e->e)
        return CUDA_SUCCESS;
    CUresult r = cu.cuEventCreate(&e->e, CU_EVENT_DISABLE_TIMING);
    if (r != CUDA_SUCCESS)
        e->e = NULL;
    return r;
}

static const char *cu_err(CUresult r)
{
    const char *s = NULL;
    if (cu.cuGetErrorString && cu.cuGetErrorString(r, &s) == CUDA_SUCCESS && s)
        return s;
    return "unknown CUDA error";
}

#define CU_TRY(call, what)                                                                     \
    do {                                                                                       \
        CUresult r_ = (call);                                                                  \
        if (r_ != CUDA_SUCCESS)                                                                \
            return FC_ERR(FC_ERR_CUDA, "%s failed: %s (%d)", what, cu_err(r_), (int)r_);      \
    } while (0)

static void load(void)
{
    cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!cu.lib) {
        snprintf(cu.why, sizeof(cu.why), "the CUDA driver (libcuda.so.1) is not installed: %s",
                 dlerror());
        return;
    }
#define RESOLVE(name, ret, args)                                                               \
    cu.name = (ret(*) args)dlsym(cu.lib, #name);                                               \
    if (!cu.name) {                                                                            \
        snprintf(cu.why, sizeof(cu.why), "the CUDA driver lacks %s (too old?)", #name);       \
        return;                                                                                \
    }
    CU_FUNCS(RESOLVE)
    CUresult r = cu.cuInit(0);
    if (r != CUDA_SUCCESS) {
        snprintf(cu.why, sizeof(cu.why), "cuInit failed: %s (%d)", cu_err(r), (int)r);
        return;
    }
    if (cu.cuDeviceGetCount(&cu.ndev) != CUDA_SUCCESS || cu.ndev <= 0) {
        snprintf(cu.why, sizeof(cu.why), "no CUDA device");
        return;
    }
    if (cu.ndev > MAXDEV)
        cu.ndev = MAXDEV;
    int v = 0;
    cu.cuDriverGetVersion(&v);
    cu.ok = 1;
    snprintf(cu.why, sizeof(cu.why), "CUDA driver %d.%d, %d device%s", v / 1000, (v % 1000) / 10,
             cu.ndev, cu.ndev > 1 ? "s" : "");
}

int gpu_available(const char **why)
{
    pthread_once(&cu.once, load);
    if (why)
        *why = cu.why;
    return cu.ok;
}

int gpu_device_count(void)
{
    return gpu_available(NULL) ? cu.ndev : 0;
}

static const char *const dt_names[10] = {"int8",    "uint8",    "int32",   "uint32",  "int64",
                                         "uint64",  "float16",  "bfloat16", "float32", "float64"};
static const char *const op_names[4] = {"sum", "prod", "min", "max"};

/* Retains the device's primary context and loads our kernels into it. */
static fc_result_t device_init(int d)
{
    if (!gpu_available(NULL))
        return FC_ERR(FC_ERR_UNSUPPORTED, "CUDA is not usable here: %s", cu.why);
    if (d < 0 || d >= cu.ndev)
        return FC_ERR(FC_ERR_CUDA, "CUDA device %d does not exist (%d devices)", d, cu.ndev);
    pthread_mutex_lock(&cu.lock);
    fc_result_t rc = FC_SUCCESS;
    if (!cu.loaded[d]) {
        CUdevice dev;
        CUresult r = cu.cuDeviceGet(&dev, d);
        if (r == CUDA_SUCCESS)
            r = cu.cuDevicePrimaryCtxRetain(&cu.ctx[d], dev);
        if (r == CUDA_SUCCESS)
            r = cu.cuCtxPushCurrent_v2(cu.ctx[d]);
        if (r == CUDA_SUCCESS) {
            CUresult lr = cu.cuModuleLoadData(&cu.mod[d], fc_gpu_fatbin);
            for (int t = 0; lr == CUDA_SUCCESS && t < 10; t++) {
                char name[64];
                for (int o = 0; lr == CUDA_SUCCESS && o < 4; o++) {
                    snprintf(name, sizeof(name), "fc_reduce_%s_%s", dt_names[t], op_names[o]);
                    lr = cu.cuModuleGetFunction(&cu.red[d][t][o], cu.mod[d], name);
                    snprintf(name, sizeof(name), "fc_fused_%s_%s", dt_names[t], op_names[o]);
                    if (lr == CUDA_SUCCESS)
                        lr = cu.cuModuleGetFunction(&cu.fus[d][t][o], cu.mod[d], name);
                }
                snprintf(name, sizeof(name), "fc_scale_%s", dt_names[t]);
                if (lr == CUDA_SUCCESS)
                    lr = cu.cuModuleGetFunction(&cu.scl[d][t], cu.mod[d], name);
            }
            if (lr == CUDA_SUCCESS)
                lr = cu.cuModuleGetFunction(&cu.exe[d], cu.mod[d], "fc_exec");
            cu.cuDeviceGetAttribute(&cu.nsm[d], CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
            /* With lazy module loading (the default since CUDA 12) a kernel
             * is loaded at its first launch, which synchronizes the context:
             * a first launch while a caller's stream waits for this very
             * collective (stream-ordered calls) would deadlock. Launch each
             * kernel once now, on nothing. */
            CUstream warm = NULL;
            if (lr == CUDA_SUCCESS)
                lr = cu.cuStreamCreate(&warm, CU_STREAM_NON_BLOCKING);
            for (int t = 0; lr == CUDA_SUCCESS && t < 10; t++) {
                CUdeviceptr z = 0;
                size_t zn = 0;
                uint32_t one = 1;
                int zi = 0;
                void *ra[] = {&z, &z, &z, &zn}, *sa[] = {&z, &z, &zn, &one};
                void *fa[] = {&z, &z, &z, &z, &z, &one, &zi, &zi, &zn, &one}; /* no flags */
                for (int o = 0; lr == CUDA_SUCCESS && o < 4; o++) {
                    lr = cu.cuLaunchKernel(cu.red[d][t][o], 1, 1, 1, 32, 1, 1, 0, warm, ra, NULL);
                    if (lr == CUDA_SUCCESS)
                        lr = cu.cuLaunchKernel(cu.fus[d][t][o], 1, 1, 1, 32, 1, 1, 0, warm, fa,
                                               NULL);
                }
                if (lr == CUDA_SUCCESS)
                    lr = cu.cuLaunchKernel(cu.scl[d][t], 1, 1, 1, 32, 1, 1, 0, warm, sa, NULL);
            }
            if (lr == CUDA_SUCCESS) {
                CUdeviceptr z = 0;
                uint32_t zl = 0;
                void *xa[] = {&z, &z, &zl}; /* no ring */
                lr = cu.cuLaunchKernel(cu.exe[d], 1, 1, 1, 32, 1, 1, 0, warm, xa, NULL);
            }
            if (warm) {
                if (lr == CUDA_SUCCESS)
                    lr = cu.cuStreamSynchronize(warm);
                cu.cuStreamDestroy_v2(warm);
            }
            CUcontext old;
            cu.cuCtxPopCurrent_v2(&old);
            r = lr;
        }
        if (r != CUDA_SUCCESS)
            rc = FC_ERR(FC_ERR_CUDA,
                        "preparing CUDA device %d (primary context, fabcoll's kernels) failed: "
                        "%s (%d)%s",
                        d, cu_err(r), (int)r,
                        r == CUDA_ERROR_NO_BINARY_FOR_GPU
                            ? ". Fix: rebuild with NVCC_ARCH naming this GPU's architecture"
                            : "");
        else
            cu.loaded[d] = 1;
    }
    pthread_mutex_unlock(&cu.lock);
    return rc;
}

/* Makes device d's context current on top of the caller's (ctx_pop puts
 * the caller's back): the application's own current context is never
 * changed behind its back. */
static fc_result_t ctx_push(int d)
{
    fc_result_t rc = device_init(d);
    if (rc == FC_SUCCESS)
        cu.cuCtxPushCurrent_v2(cu.ctx[d]);
    return rc;
}

static void ctx_pop(void)
{
    CUcontext old;
    cu.cuCtxPopCurrent_v2(&old);
}

fc_result_t gpu_set_device(int device)
{
    fc_result_t rc = device_init(device);
    if (rc == FC_SUCCESS)
        CU_TRY(cu.cuCtxSetCurrent(cu.ctx[device]), "cuCtxSetCurrent");
    return rc;
}

fc_result_t gpu_ptr_info(const void *p, struct gpu_ptr *out)
{
    memset(out, 0, sizeof(*out));
    if (!p || !gpu_available(NULL))
        return FC_SUCCESS;
    unsigned int mtype = 0;
    int ordinal = -1;
    unsigned int managed = 0;
    unsigned long long bid = 0;
    CUdeviceptr start = 0;
    size_t size = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                   CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_BUFFER_ID,
                                   CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    void *vals[] = {&mtype, &ordinal, &managed, &bid, &start, &size};
    CUresult r = cu.cuPointerGetAttributes(6, attrs, vals, (CUdeviceptr)(uintptr_t)p);
    if (r != CUDA_SUCCESS || mtype == 0)
        return FC_SUCCESS; /* not CUDA memory: plain host memory */
    if (managed)
        out->kind = GPU_MANAGED;
    else if (mtype == CU_MEMORYTYPE_DEVICE)
        out->kind = GPU_DEVICE;
    else {
        out->kind = GPU_HOST; /* pinned host memory from CUDA: still host memory */
        out->pinned = 1;
    }
    out->device = ordinal < 0 ? 0 : ordinal;
    out->buffer_id = bid;
    out->base = (uintptr_t)start;
    out->size = size;
    return FC_SUCCESS;
}

fc_result_t gpu_stream_create(int device, gpu_stream_t **out)
{
    struct gpu_stream *s = calloc(1, sizeof(*s));
    if (!s)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    s->device = device;
    fc_result_t rc = device_init(device);
    if (rc == FC_SUCCESS) {
        cu.cuCtxPushCurrent_v2(cu.ctx[device]);
        CUresult r = cu.cuStreamCreate(&s->s, CU_STREAM_NON_BLOCKING);
        CUcontext old;
        cu.cuCtxPopCurrent_v2(&old);
        if (r != CUDA_SUCCESS)
            rc = FC_ERR(FC_ERR_CUDA, "cuStreamCreate on device %d failed: %s", device, cu_err(r));
    }
    if (rc != FC_SUCCESS) {
        free(s);
        return rc;
    }
    *out = s;
    return FC_SUCCESS;
}

static void exec_destroy(struct gpu_stream *s);

void gpu_stream_destroy(gpu_stream_t *s)
{
    if (!s)
        return;
    if (s->x) {
        exec_destroy(s);
        return;
    }
    cu.cuCtxPushCurrent_v2(cu.ctx[s->device]);
    cu.cuStreamSynchronize(s->s);
    cu.cuStreamDestroy_v2(s->s);
    CUcontext old;
    cu.cuCtxPopCurrent_v2(&old);
    free(s);
}

void *gpu_stream_raw(gpu_stream_t *s)
{
    return s->s;
}

static fc_result_t exec_post(struct gpu_stream *s, uint32_t kind, void *dst, const void *a,
                             const void *b, size_t n, int dt, int op, uint32_t div);

fc_result_t gpu_memcpy_async(void *dst, const void *src, size_t len, gpu_stream_t *s)
{
    if (!len)
        return FC_SUCCESS;
    if (s->x)
        return exec_post(s, X_COPY, dst, src, NULL, len, 0, 0, 0);
    fc_result_t brc_ = ctx_push(s->device);
    if (brc_ != FC_SUCCESS)
        return brc_;
    {
        CUresult r = cu.cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src,
                                      len, s->s);
        if (r != CUDA_SUCCESS)
            brc_ = FC_ERR(FC_ERR_CUDA, "cuMemcpyAsync(%p <- %p, %zu bytes) failed: %s", dst, src,
                          len, cu_err(r));}
    ctx_pop();
    if (brc_ != FC_SUCCESS)
        return brc_;
    return FC_SUCCESS;
}

static unsigned grid_for(int d, size_t n)
{
    size_t blocks = (n + 255) / 256;
    size_t cap = (size_t)(cu.nsm[d] > 0 ? cu.nsm[d] : 16) * 8;
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
        return exec_post(s, X_REDUCE, dst, a, b, n, dt, o, 0);
    fc_result_t brc_ = ctx_push(s->device);
    if (brc_ != FC_SUCCESS)
        return brc_;
    {
        CUdeviceptr pd = (CUdeviceptr)(uintptr_t)dst, pa = (CUdeviceptr)(uintptr_t)a,
                    pb = (CUdeviceptr)(uintptr_t)b;
        size_t cnt = n;
        void *args[] = {&pd, &pa, &pb, &cnt};
        CUresult r = cu.cuLaunchKernel(cu.red[s->device][dt][o], grid_for(s->device, n), 1, 1,
                                       256, 1, 1, 0, s->s, args, NULL);
        if (r != CUDA_SUCCESS)
            brc_ = FC_ERR(FC_ERR_CUDA, "launching the %s %s reduction kernel failed: %s",
                          dt_names[dt], op_names[o], cu_err(r));}
    ctx_pop();
    if (brc_ != FC_SUCCESS)
        return brc_;
    return FC_SUCCESS;
}

fc_result_t gpu_scale_async(void *dst, const void *src, size_t n, fc_datatype_t dt,
                            uint32_t divisor, gpu_stream_t *s)
{
    if (!n)
        return FC_SUCCESS;
    if (s->x)
        return exec_post(s, X_SCALE, dst, src, NULL, n, dt, 0, divisor);
    fc_result_t brc_ = ctx_push(s->device);
    if (brc_ != FC_SUCCESS)
        return brc_;
    {
        CUdeviceptr pd = (CUdeviceptr)(uintptr_t)dst, ps = (CUdeviceptr)(uintptr_t)src;
        size_t cnt = n;
        uint32_t dv = divisor;
        void *args[] = {&pd, &ps, &cnt, &dv};
        CUresult r = cu.cuLaunchKernel(cu.scl[s->device][dt], grid_for(s->device, n), 1, 1, 256,
                                       1, 1, 0, s->s, args, NULL);
        if (r != CUDA_SUCCESS)
            brc_ = FC_ERR(FC_ERR_CUDA, "launching the %s scale kernel failed: %s", dt_names[dt],
                          cu_err(r));}
    ctx_pop();
    if (brc_ != FC_SUCCESS)
        return brc_;
    return FC_SUCCESS;
}

fc_result_t gpu_fused_allreduce(gpu_stream_t *s, gpu_event_t *ev, void *const *caller,
                                const void *send, void *recv, uint64_t *out, const uint64_t *in,
                                volatile uint32_t *flags, uint32_t seq, int n, int rank,
                                size_t count, fc_datatype_t dt, fc_op_t op, int *queued)
{
    const int device = s->device;
    int o = op == FC_AVG ? FC_SUM : (int)op;
    fc_result_t rc = ctx_push(device);
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
    CUresult r = caller ? CUDA_SUCCESS : cu.cuStreamQuery(CU_STREAM_LEGACY);
    if (queued)
        *queued = r != CUDA_SUCCESS;
    if (r == CUDA_ERROR_NOT_READY) {
        what = "cuEventCreate";
        r = ev_make(ev);
        if (r == CUDA_SUCCESS) {
            what = "cuEventRecord on the legacy default stream";
            r = cu.cuEventRecord(ev->e, CU_STREAM_LEGACY);
        }
        if (r == CUDA_SUCCESS) {
            what = "cuStreamWaitEvent";
            r = cu.cuStreamWaitEvent(s->s, ev->e, 0);
        }
    }
    if (r == CUDA_SUCCESS) {
        what = "cuLaunchKernel";
        r = cu.cuLaunchKernel(cu.fus[device][dt][o], 1, 1, 1, 1024, 1, 1, 0, on, args, NULL);
    }
    if (r != CUDA_SUCCESS)
        rc = FC_ERR(FC_ERR_CUDA, "launching the fused %s %s allreduce kernel on GPU %d%s: %s "
                    "failed: %s", dt_names[dt], op_names[o], device,
                    caller ? " on the caller's stream" : "", what, cu_err(r));
    ctx_pop();
    return rc;
}

/* CU_DEVICE_ATTRIBUTE_MPS_ENABLED by number: headers before CUDA 12.4 lack
 * the name, and older drivers answer CUDA_ERROR_INVALID_VALUE */
#define FC_CU_ATTR_MPS_ENABLED ((CUdevice_attribute)133)

int gpu_device_mps(int device)
{
    CUdevice dev;
    int v = 0;
    if (device_init(device) != FC_SUCCESS || cu.cuDeviceGet(&dev, device) != CUDA_SUCCESS ||
        cu.cuDeviceGetAttribute(&v, FC_CU_ATTR_MPS_ENABLED, dev) != CUDA_SUCCESS)
        return 0; /* older drivers do not know the attribute */
    return v;
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
    fc_result_t rc = device_init(device);
    if (rc != FC_SUCCESS)
        return rc;
    pthread_mutex_lock(&cu.lock);
    struct gpu_event *e = event_pool[device];
    if (e)
        event_pool[device] = e->next;
    pthread_mutex_unlock(&cu.lock);
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
    pthread_mutex_lock(&cu.lock);
    e->next = event_pool[e->device];
    event_pool[e->device] = e;
    pthread_mutex_unlock(&cu.lock);
}

/* Records e on a CUDA stream, its CUDA event made on first use; where and
 * hint: which stream and what to check, for the message */
static fc_result_t ev_record(gpu_event_t *e, CUstream stream, const char *where,
                             const char *hint)
{
    fc_result_t rc = ctx_push(e->device);
    if (rc != FC_SUCCESS)
        return rc;
    CUresult r = ev_make(e);
    if (r != CUDA_SUCCESS)
        rc = FC_ERR(FC_ERR_CUDA, "cuEventCreate failed: %s", cu_err(r));
    else if ((r = cu.cuEventRecord(e->e, stream)) != CUDA_SUCCESS)
        rc = FC_ERR(FC_ERR_CUDA, "cuEventRecord%s failed: %s%s", where, cu_err(r), hint);
    ctx_pop();
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

static int exec_probe(struct gpu_exec *x, int device);

int gpu_event_done(gpu_event_t *e)
{
    if (e->x) {
        uint32_t done = __atomic_load_n(&e->x->ctl[C_DONE], __ATOMIC_ACQUIRE);
        if ((int32_t)(done - e->seq) >= 0)
            return 1;
        return ++e->x->polls % 4096 ? 0 : exec_probe(e->x, e->device);
    }
    if (!e->e)
        return 1; /* never recorded (cuEventQuery says the same) */
    cu.cuCtxPushCurrent_v2(cu.ctx[e->device]);
    CUresult r = cu.cuEventQuery(e->e);
    ctx_pop();
    if (r == CUDA_SUCCESS)
        return 1;
    if (r == CUDA_ERROR_NOT_READY)
        return 0;
    FC_ERR(FC_ERR_CUDA, "cuEventQuery failed: %s (%d): a kernel or copy on the GPU failed",
           cu_err(r), (int)r);
    return -1;
}

fc_result_t gpu_stream_wait_event_raw(void *stream, gpu_event_t *e)
{
    if (!e->e)
        return FC_SUCCESS; /* never recorded: nothing to wait for */
    fc_result_t brc_ = ctx_push(e->device);
    if (brc_ != FC_SUCCESS)
        return brc_;
    {
        CUresult r = cu.cuStreamWaitEvent((CUstream)stream, e->e, 0);
        if (r != CUDA_SUCCESS)
            brc_ = FC_ERR(FC_ERR_CUDA, "cuStreamWaitEvent failed: %s", cu_err(r));}
    ctx_pop();
    if (brc_ != FC_SUCCESS)
        return brc_;
    return FC_SUCCESS;
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

/* ---- the executor (gpu_kernels.cu fc_exec) ------------------------------- */

fc_result_t gpu_exec_create(int device, gpu_stream_t **out)
{
    fc_result_t rc = device_init(device);
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
        rc = FC_ERR(FC_ERR_CUDA, "no memory for a stream executor on GPU %d: %s", device,
                    err_get());
        gpu_host_free(x->ring);
        gpu_host_free((void *)x->ctl);
        free(x);
        free(s);
        return rc;
    }
    memset(x->ring, 0, EXEC_RING * EXEC_WORDS * 8);
    memset((void *)x->ctl, 0, 64);
    cu.cuCtxPushCurrent_v2(cu.ctx[device]);
    CUresult r = cu.cuEventCreate(&x->probe, CU_EVENT_DISABLE_TIMING);
    ctx_pop();
    if (r != CUDA_SUCCESS) {
        x->probe = NULL;
        FC_WARN(LOG_COLL, "cuEventCreate failed: %s: a CUDA error during a stream-ordered "
                "collective on GPU %d will show as a timeout", cu_err(r), device);
    }
    *out = s;
    return FC_SUCCESS;
}

fc_result_t gpu_exec_launch(gpu_stream_t *s, void *cuda_stream, uint32_t *launch)
{
    struct gpu_exec *x = s->x;
    fc_result_t rc = ctx_push(s->device);
    if (rc != FC_SUCCESS)
        return rc;
    CUdeviceptr pr = (CUdeviceptr)(uintptr_t)x->ring, pc = (CUdeviceptr)(uintptr_t)x->ctl;
    uint32_t l = x->launched + 1;
    void *args[] = {&pr, &pc, &l};
    CUresult r = cu.cuLaunchKernel(cu.exe[s->device], 1, 1, 1, EXEC_THREADS, 1, 1, 0,
                                   (CUstream)cuda_stream, args, NULL);
    ctx_pop();
    if (r != CUDA_SUCCESS)
        return FC_ERR(FC_ERR_CUDA, "queueing the stream-ordered executor kernel on the caller's "
                      "stream (GPU %d) failed: %s (is the stream on this buffer's device?)",
                      s->device, cu_err(r));
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
static int exec_probe(struct gpu_exec *x, int device)
{
    if (!x->probe)
        return 0;
    cu.cuCtxPushCurrent_v2(cu.ctx[device]);
    CUresult r = cu.cuEventQuery(x->probe);
    ctx_pop();
    if (r == CUDA_SUCCESS || r == CUDA_ERROR_NOT_READY)
        return 0;
    FC_ERR(FC_ERR_CUDA, "GPU %d failed while a stream-ordered collective's kernel ran: %s (%d)",
           device, cu_err(r), (int)r);
    return -1;
}

void gpu_exec_open(gpu_stream_t *s)
{
    s->x->closed = 0;
}

/* Posts one command; waits (bounded) while the ring is full: the kernel
 * runs when commands are posted (gpu_exec_started), so it empties it. */
static fc_result_t exec_post(struct gpu_stream *s, uint32_t kind, void *dst, const void *a,
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
            return FC_ERR(FC_ERR_CUDA, "the stream executor on GPU %d took no command for 30 s "
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
    fc_result_t rc = exec_post(s, X_EXIT, NULL, NULL, NULL, 0, 0, 0, 0);
    s->x->closed = 1;
    return rc;
}

static void exec_destroy(struct gpu_stream *s)
{
    struct gpu_exec *x = s->x;
    x->ctl[C_ABORT] = 1;
    /* kernels still queued read the ring when they run: wait a while */
    for (int i = 0; i < 20000 && (int32_t)(x->ctl[C_LEFT] - x->launched) < 0; i++)
        usleep(100);
    if ((int32_t)(x->ctl[C_LEFT] - x->launched) < 0) {
        FC_WARN(LOG_COLL, "a stream-ordered executor kernel on GPU %d has not run yet after 2 s: "
                "its %zu bytes of pinned memory are left allocated",
                s->device, (size_t)EXEC_RING * EXEC_WORDS * 8 + 64);
    } else {
        gpu_host_free(x->ring);
        gpu_host_free((void *)x->ctl);
    }
    if (x->probe) {
        cu.cuCtxPushCurrent_v2(cu.ctx[s->device]);
        cu.cuEventDestroy_v2(x->probe);
        ctx_pop();
    }
    free(x);
    free(s);
}

void gpu_legacy_sync(void)
{
    if (!cu.ok)
        return;
    /* in the calling thread's current context; none current: nothing of
     * ours can be queued there */
    (void)cu.cuStreamSynchronize(CU_STREAM_LEGACY);
}

fc_result_t gpu_stream_sync(gpu_stream_t *s)
{
    fc_result_t brc_ = ctx_push(s->device);
    if (brc_ != FC_SUCCESS)
        return brc_;
    {
        CUresult r = cu.cuStreamSynchronize(s->s);
        if (r != CUDA_SUCCESS)
            brc_ = FC_ERR(FC_ERR_CUDA, "cuStreamSynchronize failed: %s", cu_err(r));}
    ctx_pop();
    if (brc_ != FC_SUCCESS)
        return brc_;
    return FC_SUCCESS;
}

void *gpu_host_alloc(int device, size_t len)
{
    if (device_init(device) != FC_SUCCESS)
        return NULL;
    void *p = NULL;
    cu.cuCtxPushCurrent_v2(cu.ctx[device]);
    CUresult r = cu.cuMemHostAlloc(&p, len ? len : 1,
                                   CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    CUcontext old;
    cu.cuCtxPopCurrent_v2(&old);
    if (r != CUDA_SUCCESS) {
        FC_ERR(FC_ERR_CUDA, "cuMemHostAlloc(%zu bytes) failed: %s", len, cu_err(r));
        return NULL;
    }
    return p;
}

void gpu_host_free(void *p)
{
    if (p)
        cu.cuMemFreeHost(p);
}

void *gpu_dev_alloc(int device, size_t len)
{
    if (device_init(device) != FC_SUCCESS)
        return NULL;
    CUdeviceptr p = 0;
    cu.cuCtxPushCurrent_v2(cu.ctx[device]);
    CUresult r = cu.cuMemAlloc_v2(&p, len ? len : 1);
    CUcontext old;
    cu.cuCtxPopCurrent_v2(&old);
    if (r != CUDA_SUCCESS) {
        FC_ERR(FC_ERR_CUDA, "cuMemAlloc(%zu bytes) on device %d failed: %s", len, device,
               cu_err(r));
        return NULL;
    }
    return (void *)(uintptr_t)p;
}

void gpu_dev_free(int device, void *p)
{
    if (!p)
        return;
    cu.cuCtxPushCurrent_v2(cu.ctx[device]);
    cu.cuMemFree_v2((CUdeviceptr)(uintptr_t)p);
    CUcontext old;
    cu.cuCtxPopCurrent_v2(&old);
}

fc_result_t gpu_memset(void *dev, int byte, size_t len)
{
    struct gpu_ptr pi;
    gpu_ptr_info(dev, &pi);
    fc_result_t brc_ = ctx_push(pi.device);
    if (brc_ != FC_SUCCESS)
        return brc_;
    {
        CUresult r = cu.cuMemsetD8_v2((CUdeviceptr)(uintptr_t)dev, (unsigned char)byte, len);
        if (r != CUDA_SUCCESS)
            brc_ = FC_ERR(FC_ERR_CUDA, "cuMemsetD8 failed: %s", cu_err(r));}
    ctx_pop();
    if (brc_ != FC_SUCCESS)
        return brc_;
    return FC_SUCCESS;
}

fc_result_t gpu_copy_sync(void *dst, const void *src, size_t len)
{
    struct gpu_ptr a, b;
    gpu_ptr_info(dst, &a);
    gpu_ptr_info(src, &b);
    int d = a.kind != GPU_HOST ? a.device : b.device;
    fc_result_t brc_ = ctx_push(d);
    if (brc_ != FC_SUCCESS)
        return brc_;
    {
        CUresult r = cu.cuMemcpy((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, len);
        /* a device-to-device cuMemcpy returns before the copy ends: wait
         * for it (the legacy stream) so that the bytes are there for every
         * stream, as the name promises */
        if (r == CUDA_SUCCESS && a.kind != GPU_HOST && b.kind != GPU_HOST)
            r = cu.cuStreamSynchronize(CU_STREAM_LEGACY);
        if (r != CUDA_SUCCESS)
            brc_ = FC_ERR(FC_ERR_CUDA, "cuMemcpy failed: %s", cu_err(r));}
    ctx_pop();
    if (brc_ != FC_SUCCESS)
        return brc_;
    return FC_SUCCESS;
}

/* Copies between host memory of any kind and the device in stream order,
 * through a pinned block: a host function copies what it must on the
 * stream, the DMA the rest (see gpu.h). */
struct host_copy {
    void *dst;
    const void *src;
    size_t len;
    int ways; /* threads to split it over (copy_prepare) */
};

/* Pageable copies in host functions, split over helper threads: one core
 * copies ~5.6 GB/s on a 16-core H200 node, a tenth of a DMA's speed, and a
 * mixed stream-ordered call copies in series with its collective (2
 * ranks on one H200, 16 MiB allreduce from pageable memory: 6.6-8.7 ms
 * with one thread, 4.6-5.0 with four, no faster with eight). One split
 * copy at a time (host functions of several contexts may run at once);
 * the host function's thread takes a part too. */
#define COPY_SPLIT_MIN ((size_t)1 << 20)
#define COPY_HELPERS_MAX 3
static struct {
    pthread_mutex_t job;  /* one split copy at a time */
    pthread_mutex_t lock; /* the fields below */
    pthread_cond_t go, done;
    int ways;             /* gpu_copy_ways */
    int helpers;          /* threads started */
    char *dst;
    const char *src;
    size_t len, part;
    int parts, next, left;
} cp = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
        PTHREAD_COND_INITIALIZER, 1, 0, NULL, NULL, 0, 0, 0, 0, 0};

/* with cp.lock held: copies parts until none is left to take */
static void copy_parts_locked(void)
{
    while (cp.next < cp.parts) {
        int i = cp.next++;
        size_t off = (size_t)i * cp.part;
        size_t n = off + cp.part <= cp.len ? cp.part : cp.len - off;
        char *d = cp.dst + off;
        const char *sp = cp.src + off;
        pthread_mutex_unlock(&cp.lock);
        memcpy(d, sp, n);
        pthread_mutex_lock(&cp.lock);
        if (--cp.left == 0)
            pthread_cond_broadcast(&cp.done);
    }
}

static void *copy_helper(void *arg)
{
    (void)arg;
    log_thread_name("fc-copy");
    pthread_mutex_lock(&cp.lock);
    for (;;) {
        while (cp.next >= cp.parts)
            pthread_cond_wait(&cp.go, &cp.lock);
        copy_parts_locked();
    }
    return NULL;
}

/* a child of fork has none of its parent's helpers */
static void copy_atfork_child(void)
{
    pthread_mutex_init(&cp.job, NULL);
    pthread_mutex_init(&cp.lock, NULL);
    pthread_cond_init(&cp.go, NULL);
    pthread_cond_init(&cp.done, NULL);
    cp.helpers = 0;
    cp.parts = cp.next = cp.left = 0;
}

void gpu_copy_ways(int ways)
{
    pthread_mutex_lock(&cp.lock);
    cp.ways = ways < 1 ? 1 : ways > COPY_HELPERS_MAX + 1 ? COPY_HELPERS_MAX + 1 : ways;
    pthread_mutex_unlock(&cp.lock);
}

/* In the caller's thread (never in a host function): starts the helpers
 * a split copy of len bytes will use; how many parts it may make. */
static int copy_prepare(size_t len)
{
    if (len < COPY_SPLIT_MIN)
        return 1;
    pthread_mutex_lock(&cp.lock);
    static int atfork;
    if (!atfork) {
        pthread_atfork(NULL, NULL, copy_atfork_child);
        atfork = 1;
    }
    while (cp.helpers < cp.ways - 1) {
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        int e = pthread_create(&t, &at, copy_helper, NULL);
        pthread_attr_destroy(&at);
        if (e != 0)
            break; /* fewer helpers: the copy splits less */
        cp.helpers++;
    }
    int ways = cp.helpers + 1 < cp.ways ? cp.helpers + 1 : cp.ways;
    pthread_mutex_unlock(&cp.lock);
    return ways;
}

static void split_copy(void *dst, const void *src, size_t len, int ways)
{
    pthread_mutex_lock(&cp.job);
    pthread_mutex_lock(&cp.lock);
    if (ways > cp.helpers + 1)
        ways = cp.helpers + 1; /* a fork's child, or helpers that did not start */
    size_t part = (len + (size_t)ways - 1) / (size_t)ways;
    part = (part + 4095) & ~(size_t)4095; /* whole pages each */
    cp.dst = dst;
    cp.src = src;
    cp.len = len;
    cp.part = part;
    cp.left = cp.parts = (int)((len + part - 1) / part);
    cp.next = 0;
    pthread_cond_broadcast(&cp.go);
    copy_parts_locked();
    while (cp.left > 0)
        pthread_cond_wait(&cp.done, &cp.lock);
    cp.parts = cp.next = 0;
    pthread_mutex_unlock(&cp.lock);
    pthread_mutex_unlock(&cp.job);
}

static void CUDA_CB host_copy_fn(void *arg)
{
    struct host_copy *h = arg;
    if (h->ways > 1)
        split_copy(h->dst, h->src, h->len, h->ways);
    else
        memcpy(h->dst, h->src, h->len);
    free(h);
}

static CUresult host_copy(CUstream stream, void *dst, const void *src, size_t len)
{
    struct host_copy *h = malloc(sizeof(*h));
    if (!h)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *h = (struct host_copy){.dst = dst, .src = src, .len = len, .ways = copy_prepare(len)};
    CUresult r = cu.cuLaunchHostFunc(stream, host_copy_fn, h);
    if (r != CUDA_SUCCESS)
        free(h);
    return r;
}

fc_result_t gpu_stage_copy(int device, void *cuda_stream, void *dst, const void *src,
                           void *pinned, size_t len, int to_device)
{
    if (!len)
        return FC_SUCCESS;
    fc_result_t rc = ctx_push(device);
    if (rc != FC_SUCCESS)
        return rc;
    CUstream st = (CUstream)cuda_stream;
    CUresult r;
    const char *what;
    const void *host = to_device ? src : dst;
    struct gpu_ptr a, b;
    gpu_ptr_info(host, &a);
    if (a.pinned)
        gpu_ptr_info((const char *)host + len - 1, &b);
    if (a.pinned && b.pinned && a.buffer_id == b.buffer_id && a.device == device) {
        /* page-locked already (through this GPU's context: memory pinned
         * through another's without CU_MEMHOSTREGISTER_PORTABLE counts as
         * pageable here, and a cuMemcpyAsync with it would read at the call
         * or wait for the stream): the DMA reads or writes it in place */
        what = to_device ? "copying a pinned host buffer in" : "copying to a pinned host buffer";
        r = cu.cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, len, st);
    } else if (to_device) {
        what = "copying a host buffer in";
        r = host_copy(st, pinned, src, len);
        if (r == CUDA_SUCCESS)
            r = cu.cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)pinned,
                                 len, st);
    } else {
        what = "copying to a host buffer";
        r = cu.cuMemcpyAsync((CUdeviceptr)(uintptr_t)pinned, (CUdeviceptr)(uintptr_t)src, len,
                             st);
        if (r == CUDA_SUCCESS)
            r = host_copy(st, dst, pinned, len);
    }
    ctx_pop();
    if (r != CUDA_SUCCESS)
        return FC_ERR(FC_ERR_CUDA, "%s on the caller's stream (%zu bytes, GPU %d) failed: %s",
                      what, len, device, cu_err(r));
    return FC_SUCCESS;
}

void gpu_pci_id(int device, char *buf, size_t len)
{
    CUdevice dev;
    snprintf(buf, len, "?");
    if (gpu_available(NULL) && cu.cuDeviceGet(&dev, device) == CUDA_SUCCESS)
        cu.cuDeviceGetPCIBusId(buf, (int)len, dev);
}

#else /* !HAVE_CUDA */

int gpu_available(const char **why)
{
    if (why)
        *why = "this fabcoll was built without CUDA (configure --with-cuda)";
    return 0;
}

int gpu_device_count(void)
{
    return 0;
}

fc_result_t gpu_ptr_info(const void *p, struct gpu_ptr *out)
{
    (void)p;
    memset(out, 0, sizeof(*out));
    return FC_SUCCESS;
}

static fc_result_t nocuda(void)
{
    return FC_ERR(FC_ERR_UNSUPPORTED, "this fabcoll was built without CUDA");
}

fc_result_t gpu_stream_create(int d, gpu_stream_t **o) { (void)d; (void)o; return nocuda(); }
void gpu_stream_destroy(gpu_stream_t *s) { (void)s; }
fc_result_t gpu_set_device(int d) { (void)d; return nocuda(); }
fc_result_t gpu_memcpy_async(void *d, const void *s, size_t l, gpu_stream_t *st)
{ (void)d; (void)s; (void)l; (void)st; return nocuda(); }
fc_result_t gpu_reduce_async(void *d, const void *a, const void *b, size_t n, fc_datatype_t dt,
                             fc_op_t op, gpu_stream_t *s)
{ (void)d; (void)a; (void)b; (void)n; (void)dt; (void)op; (void)s; return nocuda(); }
fc_result_t gpu_scale_async(void *d, const void *s, size_t n, fc_datatype_t dt, uint32_t v,
                            gpu_stream_t *st)
{ (void)d; (void)s; (void)n; (void)dt; (void)v; (void)st; return nocuda(); }
fc_result_t gpu_fused_allreduce(gpu_stream_t *st, gpu_event_t *e, void *const *cs, const void *s,
                                void *r, uint64_t *o, const uint64_t *i, volatile uint32_t *f,
                                uint32_t q, int n, int k, size_t c, fc_datatype_t dt, fc_op_t op,
                                int *w)
{ (void)st; (void)e; (void)cs; (void)s; (void)r; (void)o; (void)i; (void)f; (void)q; (void)n;
  (void)k; (void)c; (void)dt; (void)op; (void)w; return nocuda(); }
int gpu_device_mps(int d) { (void)d; return 0; }
fc_result_t gpu_event_get(int d, gpu_event_t **o) { (void)d; (void)o; return nocuda(); }
void gpu_event_put(gpu_event_t *e) { (void)e; }
fc_result_t gpu_event_record(gpu_event_t *e, gpu_stream_t *s)
{ (void)e; (void)s; return nocuda(); }
fc_result_t gpu_event_record_raw(gpu_event_t *e, void *s) { (void)e; (void)s; return nocuda(); }
int gpu_event_done(gpu_event_t *e) { (void)e; return -1; }
fc_result_t gpu_stream_wait_event_raw(void *s, gpu_event_t *e)
{ (void)s; (void)e; return nocuda(); }
fc_result_t gpu_stream_wait_event(gpu_stream_t *s, gpu_event_t *e)
{ (void)s; (void)e; return nocuda(); }
fc_result_t gpu_exec_create(int d, gpu_stream_t **o) { (void)d; (void)o; return nocuda(); }
fc_result_t gpu_exec_launch(gpu_stream_t *s, void *c, uint32_t *l)
{ (void)s; (void)c; (void)l; return nocuda(); }
int gpu_exec_started(gpu_stream_t *s, uint32_t l) { (void)s; (void)l; return 0; }
int gpu_exec_idle(gpu_stream_t *s) { (void)s; return 1; }
void gpu_exec_open(gpu_stream_t *s) { (void)s; }
fc_result_t gpu_exec_close(gpu_stream_t *s) { (void)s; return nocuda(); }
void gpu_legacy_sync(void) {}
fc_result_t gpu_stream_sync(gpu_stream_t *s) { (void)s; return nocuda(); }
void *gpu_stream_raw(gpu_stream_t *s) { (void)s; return NULL; }
void *gpu_host_alloc(int d, size_t l) { (void)d; (void)l; return NULL; }
void gpu_host_free(void *p) { (void)p; }
void *gpu_dev_alloc(int d, size_t l) { (void)d; (void)l; return NULL; }
void gpu_dev_free(int d, void *p) { (void)d; (void)p; }
fc_result_t gpu_memset(void *d, int b, size_t l) { (void)d; (void)b; (void)l; return nocuda(); }
fc_result_t gpu_copy_sync(void *d, const void *s, size_t l)
{ (void)d; (void)s; (void)l; return nocuda(); }
void gpu_copy_ways(int w) { (void)w; }
fc_result_t gpu_stage_copy(int d, void *s, void *t, const void *f, void *p, size_t l, int i)
{ (void)d; (void)s; (void)t; (void)f; (void)p; (void)l; (void)i; return nocuda(); }
void gpu_pci_id(int d, char *b, size_t l) { (void)d; snprintf(b, l, "-"); }
#endif

/* Built either way: gpu_ptr_info answers GPU_HOST for every pointer where
 * there is no CUDA, so callers outside the GPU files need no HAVE_CUDA. */
int gpu_on_device(const void *p)
{
    struct gpu_ptr g;
    return gpu_ptr_info(p, &g) == FC_SUCCESS && g.kind != GPU_HOST;
}
