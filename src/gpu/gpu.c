/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The CUDA driver, without a hard dependency (CUDA builds only; nocuda.c
 * stands in without CUDA): libcuda.so.1 loaded with dlopen on first use,
 * each device's primary context with fabcoll's kernels loaded, pointer
 * classification, pinned and device memory, and synchronous copies.
 *
 * This file owns the driver table (gpu_cu) and the contexts. It knows
 * nothing of streams, events, executors or collectives (streams.c, exec.c
 * and the device transport build on it), and it never changes the
 * application's current context except in gpu_set_device, which is asked
 * to.
 */
#define _GNU_SOURCE
#include "gpu_driver.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_config.h"
#include "log.h"

extern const unsigned char fc_gpu_fatbin[];
extern const size_t fc_gpu_fatbin_len;

struct gpu_driver gpu_cu = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

const char *gpu_cu_err(CUresult r)
{
    const char *s = NULL;
    if (gpu_cu.cuGetErrorString && gpu_cu.cuGetErrorString(r, &s) == CUDA_SUCCESS && s)
        return s;
    return "unknown CUDA error";
}

static void load(void)
{
    gpu_cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!gpu_cu.lib) {
        snprintf(gpu_cu.why, sizeof(gpu_cu.why),
                 "the CUDA driver (libcuda.so.1) is not installed: %s", dlerror());
        return;
    }
    /* each entry point in turn; the first one missing stops the rest */
#define RESOLVE(name, ret, args)                                                                   \
    if (!gpu_cu.why[0] && !(gpu_cu.name = (ret(*) args)dlsym(gpu_cu.lib, #name)))                  \
        snprintf(gpu_cu.why, sizeof(gpu_cu.why), "the CUDA driver lacks %s (too old?)", #name);
    CU_FUNCS(RESOLVE)
#undef RESOLVE
    if (gpu_cu.why[0])
        return;
    CUresult r = gpu_cu.cuInit(0);
    if (r != CUDA_SUCCESS) {
        snprintf(gpu_cu.why, sizeof(gpu_cu.why), "cuInit failed: %s (%d)", gpu_cu_err(r), (int)r);
        return;
    }
    if (gpu_cu.cuDeviceGetCount(&gpu_cu.ndev) != CUDA_SUCCESS || gpu_cu.ndev <= 0) {
        snprintf(gpu_cu.why, sizeof(gpu_cu.why), "no CUDA device");
        return;
    }
    if (gpu_cu.ndev > GPU_MAXDEV)
        gpu_cu.ndev = GPU_MAXDEV;
    int v = 0;
    gpu_cu.cuDriverGetVersion(&v);
    gpu_cu.ok = 1;
    snprintf(gpu_cu.why, sizeof(gpu_cu.why), "CUDA driver %d.%d, %d device%s", v / 1000,
             (v % 1000) / 10, gpu_cu.ndev, gpu_cu.ndev > 1 ? "s" : "");
}

int gpu_available(const char **why)
{
    pthread_once(&gpu_cu.once, load);
    if (why)
        *why = gpu_cu.why;
    return gpu_cu.ok;
}

int gpu_device_count(void)
{
    return gpu_available(NULL) ? gpu_cu.ndev : 0;
}

const char *const gpu_dt_names[GPU_NDT] = {
    "int8",    "uint8",    "int32",   "uint32",  "int64",       "uint64",
    "float16", "bfloat16", "float32", "float64", "float8_e4m3", "float8_e5m2"};
const char *const gpu_op_names[4] = {"sum", "prod", "min", "max"};

/* Retains the device's primary context and loads our kernels into it. */
fc_result_t gpu_device_init(int d)
{
    if (!gpu_available(NULL))
        return FC_ERR(FC_ERR_UNSUPPORTED, "CUDA is not usable here: %s", gpu_cu.why);
    if (d < 0 || d >= gpu_cu.ndev)
        return FC_ERR(FC_ERR_CUDA, "CUDA device %d does not exist (%d devices)", d, gpu_cu.ndev);
    pthread_mutex_lock(&gpu_cu.lock);
    fc_result_t rc = FC_SUCCESS;
    if (!gpu_cu.loaded[d]) {
        CUdevice dev;
        CUresult r = gpu_cu.cuDeviceGet(&dev, d);
        if (r == CUDA_SUCCESS)
            r = gpu_cu.cuDevicePrimaryCtxRetain(&gpu_cu.ctx[d], dev);
        if (r == CUDA_SUCCESS)
            r = gpu_cu.cuCtxPushCurrent_v2(gpu_cu.ctx[d]);
        if (r == CUDA_SUCCESS) {
            CUresult lr = gpu_cu.cuModuleLoadData(&gpu_cu.mod[d], fc_gpu_fatbin);
            for (int t = 0; lr == CUDA_SUCCESS && t < GPU_NDT; t++) {
                char name[64];
                for (int o = 0; lr == CUDA_SUCCESS && o < 4; o++) {
                    snprintf(name, sizeof(name), "fc_reduce_%s_%s", gpu_dt_names[t],
                             gpu_op_names[o]);
                    lr = gpu_cu.cuModuleGetFunction(&gpu_cu.red[d][t][o], gpu_cu.mod[d], name);
                    snprintf(name, sizeof(name), "fc_fused_%s_%s", gpu_dt_names[t],
                             gpu_op_names[o]);
                    if (lr == CUDA_SUCCESS)
                        lr = gpu_cu.cuModuleGetFunction(&gpu_cu.fus[d][t][o], gpu_cu.mod[d], name);
                }
                snprintf(name, sizeof(name), "fc_scale_%s", gpu_dt_names[t]);
                if (lr == CUDA_SUCCESS)
                    lr = gpu_cu.cuModuleGetFunction(&gpu_cu.scl[d][t], gpu_cu.mod[d], name);
                snprintf(name, sizeof(name), "fc_premul_%s", gpu_dt_names[t]);
                if (lr == CUDA_SUCCESS)
                    lr = gpu_cu.cuModuleGetFunction(&gpu_cu.pre[d][t], gpu_cu.mod[d], name);
            }
            if (lr == CUDA_SUCCESS)
                lr = gpu_cu.cuModuleGetFunction(&gpu_cu.exe[d], gpu_cu.mod[d], "fc_exec");
            gpu_cu.cuDeviceGetAttribute(&gpu_cu.nsm[d], CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                        dev);
            /* With lazy module loading (the default since CUDA 12) a kernel
             * is loaded at its first launch, which synchronizes the context:
             * a first launch while a caller's stream waits for this very
             * collective (stream-ordered calls) would deadlock. Launch each
             * kernel once now, on nothing. */
            CUstream warm = NULL;
            if (lr == CUDA_SUCCESS)
                lr = gpu_cu.cuStreamCreate(&warm, CU_STREAM_NON_BLOCKING);
            for (int t = 0; lr == CUDA_SUCCESS && t < GPU_NDT; t++) {
                CUdeviceptr z = 0;
                size_t zn = 0;
                uint32_t one = 1;
                int zi = 0;
                void *ra[] = {&z, &z, &z, &zn}, *sa[] = {&z, &z, &zn, &one};
                void *fa[] = {&z, &z, &z, &z, &z, &one, &zi, &zi, &zn, &one}; /* no flags */
                for (int o = 0; lr == CUDA_SUCCESS && o < 4; o++) {
                    lr = gpu_cu.cuLaunchKernel(gpu_cu.red[d][t][o], 1, 1, 1, 32, 1, 1, 0, warm, ra,
                                               NULL);
                    if (lr == CUDA_SUCCESS)
                        lr = gpu_cu.cuLaunchKernel(gpu_cu.fus[d][t][o], 1, 1, 1, 32, 1, 1, 0, warm,
                                                   fa, NULL);
                }
                if (lr == CUDA_SUCCESS)
                    lr = gpu_cu.cuLaunchKernel(gpu_cu.scl[d][t], 1, 1, 1, 32, 1, 1, 0, warm, sa,
                                               NULL);
                uint64_t zm = 0; /* the scalar: at most 8 bytes */
                void *pa[] = {&z, &z, &zn, &zm};
                if (lr == CUDA_SUCCESS)
                    lr = gpu_cu.cuLaunchKernel(gpu_cu.pre[d][t], 1, 1, 1, 32, 1, 1, 0, warm, pa,
                                               NULL);
            }
            if (lr == CUDA_SUCCESS) {
                CUdeviceptr z = 0;
                uint32_t zl = 0;
                void *xa[] = {&z, &z, &zl}; /* no ring */
                lr = gpu_cu.cuLaunchKernel(gpu_cu.exe[d], 1, 1, 1, 32, 1, 1, 0, warm, xa, NULL);
            }
            if (warm) {
                if (lr == CUDA_SUCCESS)
                    lr = gpu_cu.cuStreamSynchronize(warm);
                gpu_cu.cuStreamDestroy_v2(warm);
            }
            CUcontext old;
            gpu_cu.cuCtxPopCurrent_v2(&old);
            r = lr;
        }
        if (r != CUDA_SUCCESS)
            rc = FC_ERR(FC_ERR_CUDA,
                        "preparing CUDA device %d (primary context, fabcoll's kernels) failed: "
                        "%s (%d)%s",
                        d, gpu_cu_err(r), (int)r,
                        r == CUDA_ERROR_NO_BINARY_FOR_GPU
                            ? ". Fix: rebuild with NVCC_ARCH naming this GPU's architecture"
                            : "");
        else
            gpu_cu.loaded[d] = 1;
    }
    pthread_mutex_unlock(&gpu_cu.lock);
    return rc;
}

/* Makes device d's context current on top of the caller's (ctx_pop puts
 * the caller's back): the application's own current context is never
 * changed behind its back. */
fc_result_t gpu_ctx_push(int d)
{
    fc_result_t rc = gpu_device_init(d);
    if (rc == FC_SUCCESS)
        gpu_cu.cuCtxPushCurrent_v2(gpu_cu.ctx[d]);
    return rc;
}

void gpu_ctx_pop(void)
{
    CUcontext old;
    gpu_cu.cuCtxPopCurrent_v2(&old);
}

fc_result_t gpu_set_device(int device)
{
    fc_result_t rc = gpu_device_init(device);
    if (rc != FC_SUCCESS)
        return rc;
    CUresult r = gpu_cu.cuCtxSetCurrent(gpu_cu.ctx[device]);
    if (r != CUDA_SUCCESS)
        return FC_ERR(FC_ERR_CUDA, "cuCtxSetCurrent failed: %s (%d)", gpu_cu_err(r), (int)r);
    return FC_SUCCESS;
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
    CUpointer_attribute attrs[] = {
        CU_POINTER_ATTRIBUTE_MEMORY_TYPE,      CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
        CU_POINTER_ATTRIBUTE_IS_MANAGED,       CU_POINTER_ATTRIBUTE_BUFFER_ID,
        CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    void *vals[] = {&mtype, &ordinal, &managed, &bid, &start, &size};
    CUresult r = gpu_cu.cuPointerGetAttributes(6, attrs, vals, (CUdeviceptr)(uintptr_t)p);
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

/* CU_DEVICE_ATTRIBUTE_MPS_ENABLED by number: headers before CUDA 12.4 lack
 * the name, and older drivers answer CUDA_ERROR_INVALID_VALUE */
#define FC_CU_ATTR_MPS_ENABLED ((CUdevice_attribute)133)

int gpu_device_mps(int device)
{
    CUdevice dev;
    int v = 0;
    if (gpu_device_init(device) != FC_SUCCESS || gpu_cu.cuDeviceGet(&dev, device) != CUDA_SUCCESS ||
        gpu_cu.cuDeviceGetAttribute(&v, FC_CU_ATTR_MPS_ENABLED, dev) != CUDA_SUCCESS)
        return 0; /* older drivers do not know the attribute */
    return v;
}

void gpu_legacy_sync(void)
{
    if (!gpu_cu.ok)
        return;
    /* in the calling thread's current context; none current: nothing of
     * ours can be queued there */
    (void)gpu_cu.cuStreamSynchronize(CU_STREAM_LEGACY);
}

void *gpu_host_alloc(int device, size_t len)
{
    if (gpu_device_init(device) != FC_SUCCESS)
        return NULL;
    void *p = NULL;
    gpu_cu.cuCtxPushCurrent_v2(gpu_cu.ctx[device]);
    CUresult r = gpu_cu.cuMemHostAlloc(&p, len ? len : 1,
                                       CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
    CUcontext old;
    gpu_cu.cuCtxPopCurrent_v2(&old);
    if (r != CUDA_SUCCESS) {
        FC_ERR(FC_ERR_CUDA, "cuMemHostAlloc(%zu bytes) failed: %s", len, gpu_cu_err(r));
        return NULL;
    }
    return p;
}

void gpu_host_free(void *p)
{
    if (p)
        gpu_cu.cuMemFreeHost(p);
}

void *gpu_dev_alloc(int device, size_t len)
{
    if (gpu_device_init(device) != FC_SUCCESS)
        return NULL;
    CUdeviceptr p = 0;
    gpu_cu.cuCtxPushCurrent_v2(gpu_cu.ctx[device]);
    CUresult r = gpu_cu.cuMemAlloc_v2(&p, len ? len : 1);
    CUcontext old;
    gpu_cu.cuCtxPopCurrent_v2(&old);
    if (r != CUDA_SUCCESS) {
        FC_ERR(FC_ERR_CUDA, "cuMemAlloc(%zu bytes) on device %d failed: %s", len, device,
               gpu_cu_err(r));
        return NULL;
    }
    return (void *)(uintptr_t)p;
}

void gpu_dev_free(int device, void *p)
{
    if (!p)
        return;
    gpu_cu.cuCtxPushCurrent_v2(gpu_cu.ctx[device]);
    gpu_cu.cuMemFree_v2((CUdeviceptr)(uintptr_t)p);
    CUcontext old;
    gpu_cu.cuCtxPopCurrent_v2(&old);
}

fc_result_t gpu_memset(void *dev, int byte, size_t len)
{
    struct gpu_ptr pi;
    gpu_ptr_info(dev, &pi);
    fc_result_t rc = gpu_ctx_push(pi.device);
    if (rc != FC_SUCCESS)
        return rc;
    CUresult r = gpu_cu.cuMemsetD8_v2((CUdeviceptr)(uintptr_t)dev, (unsigned char)byte, len);
    if (r != CUDA_SUCCESS)
        rc = FC_ERR(FC_ERR_CUDA, "cuMemsetD8 failed: %s", gpu_cu_err(r));
    gpu_ctx_pop();
    return rc;
}

fc_result_t gpu_copy_sync(void *dst, const void *src, size_t len)
{
    struct gpu_ptr a, b;
    gpu_ptr_info(dst, &a);
    gpu_ptr_info(src, &b);
    int d = a.kind != GPU_HOST ? a.device : b.device;
    fc_result_t rc = gpu_ctx_push(d);
    if (rc != FC_SUCCESS)
        return rc;
    CUresult r = gpu_cu.cuMemcpy((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, len);
    /* a device-to-device cuMemcpy returns before the copy ends: wait
     * for it (the legacy stream) so that the bytes are there for every
     * stream, as the name promises */
    if (r == CUDA_SUCCESS && a.kind != GPU_HOST && b.kind != GPU_HOST)
        r = gpu_cu.cuStreamSynchronize(CU_STREAM_LEGACY);
    if (r != CUDA_SUCCESS)
        rc = FC_ERR(FC_ERR_CUDA, "cuMemcpy failed: %s", gpu_cu_err(r));
    gpu_ctx_pop();
    return rc;
}

void gpu_pci_id(int device, char *buf, size_t len)
{
    CUdevice dev;
    snprintf(buf, len, "?");
    if (gpu_available(NULL) && gpu_cu.cuDeviceGet(&dev, device) == CUDA_SUCCESS)
        gpu_cu.cuDeviceGetPCIBusId(buf, (int)len, dev);
}

void gpu_current_pci_id(char *buf, size_t len)
{
    if (!len)
        return;
    buf[0] = '\0';
    /* the driver only if something in this process has loaded it; asked
     * before cuInit, it answers CUDA_ERROR_NOT_INITIALIZED and stays so */
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (!lib)
        return;
    CUresult (*get_ctx)(CUcontext *) = (CUresult(*)(CUcontext *))dlsym(lib, "cuCtxGetCurrent");
    CUresult (*get_dev)(CUdevice *) = (CUresult(*)(CUdevice *))dlsym(lib, "cuCtxGetDevice");
    CUresult (*get_bus)(char *, int, CUdevice) =
        (CUresult(*)(char *, int, CUdevice))dlsym(lib, "cuDeviceGetPCIBusId");
    CUcontext ctx = NULL;
    CUdevice dev;
    if (get_ctx && get_dev && get_bus && get_ctx(&ctx) == CUDA_SUCCESS && ctx &&
        get_dev(&dev) == CUDA_SUCCESS && get_bus(buf, (int)len, dev) != CUDA_SUCCESS)
        buf[0] = '\0';
    dlclose(lib);
}

int gpu_on_device(const void *p)
{
    struct gpu_ptr g;
    return gpu_ptr_info(p, &g) == FC_SUCCESS && g.kind != GPU_HOST;
}
