/* SPDX-License-Identifier: BSD-3-Clause */
#include "build_config.h" /* HAVE_CUDA: how the library beside us was built */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "gpu_util.h"

#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* The few driver calls the tests need, declared here: no CUDA header. */
typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef void *CUstream;
typedef unsigned long long CUdeviceptr;

static struct {
    int loaded;
    CUresult (*Init)(unsigned);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*PrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemAllocManaged)(CUdeviceptr *, size_t, unsigned);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*Memcpy)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*MemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*StreamDestroy)(CUstream);
    CUresult (*CtxSynchronize)(void);
    CUresult (*MemHostAlloc)(void **, size_t, unsigned);
    CUresult (*MemFreeHost)(void *);
    int count;
} cu;

#define SYM(field, name)                                                                       \
    if (!(*(void **)&cu.field = dlsym(h, name))) {                                             \
        *why = "the CUDA driver lacks " name;                                                  \
        return -1;                                                                             \
    }

int gu_init(int device, const char **why)
{
    static char buf[128];
#ifndef HAVE_CUDA
    /* the library beside these tests takes every pointer for host memory:
     * device buffers would be read and written as such */
    (void)device;
    (void)buf;
    *why = "this fabcoll was built without CUDA (configure --without-cuda)";
    return -1;
#endif
    if (!cu.loaded) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            *why = "no CUDA driver (libcuda.so.1) on this machine";
            return -1;
        }
        SYM(Init, "cuInit")
        SYM(DeviceGetCount, "cuDeviceGetCount")
        SYM(DeviceGet, "cuDeviceGet")
        SYM(PrimaryCtxRetain, "cuDevicePrimaryCtxRetain")
        SYM(CtxSetCurrent, "cuCtxSetCurrent")
        SYM(MemAlloc, "cuMemAlloc_v2")
        SYM(MemAllocManaged, "cuMemAllocManaged")
        SYM(MemFree, "cuMemFree_v2")
        SYM(Memcpy, "cuMemcpy")
        SYM(MemcpyAsync, "cuMemcpyAsync")
        SYM(MemsetD8, "cuMemsetD8_v2")
        SYM(StreamCreate, "cuStreamCreate")
        SYM(StreamSynchronize, "cuStreamSynchronize")
        SYM(StreamDestroy, "cuStreamDestroy_v2")
        SYM(CtxSynchronize, "cuCtxSynchronize")
        SYM(MemHostAlloc, "cuMemHostAlloc")
        SYM(MemFreeHost, "cuMemFreeHost")
        if (cu.Init(0) != 0 || cu.DeviceGetCount(&cu.count) != 0 || cu.count <= 0) {
            *why = "the CUDA driver finds no GPU";
            return -1;
        }
        cu.loaded = 1;
    }
    CUdevice dev;
    CUcontext ctx;
    if (cu.DeviceGet(&dev, device % cu.count) || cu.PrimaryCtxRetain(&ctx, dev) ||
        cu.CtxSetCurrent(ctx)) {
        snprintf(buf, sizeof(buf), "cannot use GPU %d", device % cu.count);
        *why = buf;
        return -1;
    }
    return 0;
}

int gu_device_count(void)
{
    return cu.loaded ? cu.count : 0;
}

void *gu_alloc(size_t len)
{
    CUdeviceptr p = 0;
    return cu.MemAlloc(&p, len ? len : 1) ? NULL : (void *)(uintptr_t)p;
}

void *gu_alloc_managed(size_t len)
{
    CUdeviceptr p = 0;
    return cu.MemAllocManaged(&p, len ? len : 1, 1 /* CU_MEM_ATTACH_GLOBAL */) ? NULL
                                                                              : (void *)(uintptr_t)p;
}

void gu_free(void *p)
{
    if (p)
        cu.MemFree((CUdeviceptr)(uintptr_t)p);
}

int gu_to_device(void *dst, const void *src, size_t len)
{
    return len ? cu.Memcpy((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, len) : 0;
}

int gu_to_host(void *dst, const void *src, size_t len)
{
    return len ? cu.Memcpy((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, len) : 0;
}

int gu_memset(void *dst, int byte, size_t len)
{
    return len ? cu.MemsetD8((CUdeviceptr)(uintptr_t)dst, (unsigned char)byte, len) : 0;
}

void *gu_stream_create(void)
{
    CUstream s = NULL;
    return cu.StreamCreate(&s, 1 /* non-blocking */) ? NULL : s;
}

int gu_stream_sync(void *s)
{
    return cu.StreamSynchronize(s);
}

void gu_stream_destroy(void *s)
{
    if (s)
        cu.StreamDestroy(s);
}

int gu_copy_async(void *dst, const void *src, size_t len, void *stream)
{
    return cu.MemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, len, stream);
}

int gu_sync(void)
{
    return cu.CtxSynchronize();
}

void *gu_host_alloc(size_t len)
{
    void *p = NULL;
    return cu.MemHostAlloc(&p, len ? len : 1, 1 /* portable */) ? NULL : p;
}

void gu_host_free(void *p)
{
    if (p)
        cu.MemFreeHost(p);
}
