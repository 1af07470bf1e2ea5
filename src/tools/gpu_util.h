/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device memory for the functional tests and fc_perf, through the CUDA
 * driver loaded at run time (dlopen libcuda.so.1): the test programs build
 * and run everywhere, and skip with a reason where no GPU is.
 */
#ifndef FC_GPU_UTIL_H
#define FC_GPU_UTIL_H

#include <stddef.h>

/* Loads the driver and makes GPU `device % count` current in this thread.
 * Returns 0, or -1 with *why set (no driver, no device). */
int gu_init(int device, const char **why);
int gu_device_count(void);
void *gu_alloc(size_t len);          /* device memory */
void *gu_alloc_managed(size_t len);  /* managed memory */
void gu_free(void *p);
int gu_to_device(void *dst, const void *src, size_t len);
int gu_to_host(void *dst, const void *src, size_t len);
int gu_memset(void *dst, int byte, size_t len);
void *gu_stream_create(void);        /* a CUstream (cudaStream_t) */
int gu_stream_sync(void *stream);
void gu_stream_destroy(void *stream);
/* Queues a copy on a stream (to show stream ordering). */
int gu_copy_async(void *dst, const void *src, size_t len, void *stream);
int gu_sync(void);
/* Pinned host memory: copies to and from it on a stream stay asynchronous
 * (a copy from pageable memory blocks the calling thread inside CUDA). */
void *gu_host_alloc(size_t len);
void gu_host_free(void *p);

#endif
