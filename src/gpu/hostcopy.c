/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Staged copies between pageable host memory and the device in stream
 * order: a host function on the stream copies through a pinned block, split
 * over a few helper threads for large copies (gpu_stage_copy,
 * gpu_copy_ways).
 *
 * This file owns the helper threads and their job. It allocates no pinned
 * memory of its own (the caller passes the block) and knows nothing of
 * collectives.
 */
#define _GNU_SOURCE
#include "gpu_driver.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

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
    int ways;    /* gpu_copy_ways */
    int helpers; /* threads started */
    char *dst;
    const char *src;
    size_t len, part;
    int parts, next, left;
} cp = {PTHREAD_MUTEX_INITIALIZER,
        PTHREAD_MUTEX_INITIALIZER,
        PTHREAD_COND_INITIALIZER,
        PTHREAD_COND_INITIALIZER,
        1,
        0,
        NULL,
        NULL,
        0,
        0,
        0,
        0,
        0};

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
    CUresult r = gpu_cu.cuLaunchHostFunc(stream, host_copy_fn, h);
    if (r != CUDA_SUCCESS)
        free(h);
    return r;
}

fc_result_t gpu_stage_copy(int device, void *cuda_stream, void *dst, const void *src, void *pinned,
                           size_t len, int to_device)
{
    if (!len)
        return FC_SUCCESS;
    fc_result_t rc = gpu_ctx_push(device);
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
        r = gpu_cu.cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, len, st);
    } else if (to_device) {
        what = "copying a host buffer in";
        r = host_copy(st, pinned, src, len);
        if (r == CUDA_SUCCESS)
            r = gpu_cu.cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)pinned,
                                     len, st);
    } else {
        what = "copying to a host buffer";
        r = gpu_cu.cuMemcpyAsync((CUdeviceptr)(uintptr_t)pinned, (CUdeviceptr)(uintptr_t)src, len,
                                 st);
        if (r == CUDA_SUCCESS)
            r = host_copy(st, dst, pinned, len);
    }
    gpu_ctx_pop();
    if (r != CUDA_SUCCESS)
        return FC_ERR(FC_ERR_CUDA, "%s on the caller's stream (%zu bytes, GPU %d) failed: %s", what,
                      len, device, gpu_cu_err(r));
    return FC_SUCCESS;
}
