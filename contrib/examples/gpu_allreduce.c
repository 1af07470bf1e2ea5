/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fabcoll on CUDA device buffers: the blocking calls and the stream-ordered
 * twins, in the way an application uses them.
 *
 *   all: fc_comm_init, cudaSetDevice(local rank % GPUs)
 *   all: fc_comm_query: the provider, and whether device buffers go to the
 *        fabric directly (hmem = 1, the gdr tier) or through pinned host
 *        memory (hmem = 0, staged)
 *   all: x = rank + 1 on the device; fc_allreduce (blocking, in place)
 *   all: on a stream of its own, in stream order: a copy, an
 *        fc_allreduce_stream, an fc_broadcast_stream from the last rank,
 *        the copy back; then one cudaStreamSynchronize
 *   all: every element checked against the value it must have
 *
 * Build: make gpu_allreduce (see Makefile: pkg-config fabcoll and the CUDA
 * runtime at CUDA_HOME, /usr/local/cuda by default). Run with any launcher:
 *   fc_run -n 2 ./gpu_allreduce       (FI_PROVIDER=tcp, FC_GDR=off, ...)
 *   srun --mpi=pmix -n 8 --gpus-per-node=8 ./gpu_allreduce
 * Prints one line on rank 0; exit status 0 when every element is right.
 *
 *   ./gpu_allreduce [COUNT]   floats per buffer (default 1048576)
 */
#include <cuda_runtime.h>
#include <fabcoll.h>
#include <stdio.h>
#include <stdlib.h>

static int rank = -1;

/* On an error: which call failed on which rank, and why; exit 1 (the
 * launcher then stops the other ranks). */
#define FC_CHECK(call)                                                                             \
    do {                                                                                           \
        fc_result_t rc_ = (call);                                                                  \
        if (rc_ != FC_SUCCESS) {                                                                   \
            fprintf(stderr, "gpu_allreduce: rank %d: %s failed: %s: %s\n", rank, #call,            \
                    fc_strerror(rc_), fc_last_error());                                            \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)
#define CUDA_CHECK(call)                                                                           \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "gpu_allreduce: rank %d: %s failed: %s\n", rank, #call,                \
                    cudaGetErrorString(e_));                                                       \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Number of elements of h[0..n) that differ from want (the first printed). */
static size_t check(const float *h, size_t n, float want, const char *what)
{
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        if (h[i] != want && bad++ == 0)
            fprintf(stderr, "gpu_allreduce: rank %d: %s: element %zu is %g, not %g\n", rank,
                    what, i, h[i], want);
    return bad;
}

int main(int argc, char **argv)
{
    size_t count = argc > 1 ? strtoull(argv[1], NULL, 0) : (size_t)1 << 20;
    if (count == 0) {
        fprintf(stderr, "usage: gpu_allreduce [COUNT]  (COUNT > 0 floats per buffer)\n");
        return 2;
    }
    /* fabcoll needs no current device: its staging memory and kernels go
     * to the GPU of each call's buffers, in that GPU's primary context (the
     * one the CUDA runtime uses), so the device may be chosen after init. */
    int ngpu = 0;
    CUDA_CHECK(cudaGetDeviceCount(&ngpu));
    fc_comm_t comm;
    FC_CHECK(fc_comm_init(&comm));
    rank = fc_comm_rank(comm);
    const int size = fc_comm_size(comm);
    fc_comm_attr_t attr;
    FC_CHECK(fc_comm_query(comm, &attr));
    const int gpu = attr.local_rank % ngpu;
    CUDA_CHECK(cudaSetDevice(gpu));

    float *d, *h;
    CUDA_CHECK(cudaMalloc((void **)&d, count * sizeof(float)));
    CUDA_CHECK(cudaMallocHost((void **)&h, count * sizeof(float)));
    size_t bad = 0;

    /* Blocking: ordered after the legacy default stream's work (the
     * cudaMemcpy here), and the result is in d when it returns. */
    for (size_t i = 0; i < count; i++)
        h[i] = (float)(rank + 1);
    CUDA_CHECK(cudaMemcpy(d, h, count * sizeof(float), cudaMemcpyHostToDevice));
    FC_CHECK(fc_allreduce(d, d, count, FC_FLOAT32, FC_SUM, comm));
    CUDA_CHECK(cudaMemcpy(h, d, count * sizeof(float), cudaMemcpyDeviceToHost));
    const float sum = (float)size * (float)(size + 1) / 2; /* 1 + 2 + ... + size */
    bad += check(h, count, sum, "fc_allreduce");

    /* Stream-ordered: every call returns at once; the stream runs them in
     * order with the copies around them, and one synchronize waits for
     * all. The host buffer is not touched until then. */
    cudaStream_t s;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (size_t i = 0; i < count; i++)
        h[i] = (float)(2 * rank);
    CUDA_CHECK(cudaMemcpyAsync(d, h, count * sizeof(float), cudaMemcpyHostToDevice, s));
    FC_CHECK(fc_allreduce_stream(d, d, count, FC_FLOAT32, FC_MAX, comm, s));
    FC_CHECK(fc_broadcast_stream(d, d, count, FC_FLOAT32, size - 1, comm, s));
    CUDA_CHECK(cudaMemcpyAsync(h, d, count * sizeof(float), cudaMemcpyDeviceToHost, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    /* an error of a stream-ordered call that failed after it returned
     * surfaces here (or at the next call) */
    FC_CHECK(fc_comm_query(comm, &attr));
    bad += check(h, count, (float)(2 * (size - 1)), "fc_allreduce_stream + fc_broadcast_stream");

    if (rank == 0)
        printf("gpu_allreduce: %d ranks, %zu floats on GPU %d, provider %s, %s: %s\n", size,
               count, gpu, attr.provider,
               attr.hmem ? "device buffers to the fabric directly (gdr)"
                         : "device buffers staged through pinned host memory",
               bad ? "WRONG RESULTS" : "all results correct");
    CUDA_CHECK(cudaStreamDestroy(s));
    CUDA_CHECK(cudaFreeHost(h));
    CUDA_CHECK(cudaFree(d));
    FC_CHECK(fc_comm_destroy(comm));
    return bad ? 1 : 0;
}
