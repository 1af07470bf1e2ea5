/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The NCCL side of the GPU comparison: one process driving every visible
 * GPU with ncclCommInitAll (a group call per iteration), float32, the same
 * sweep and CSV columns as fc_perf, timed as nccl-tests and fc_perf time:
 * warm-up calls, then N calls back to back, every stream synchronized at
 * the end, total/N (one process: no barrier is needed, and every GPU's
 * time is the same interval).
 *   nccl_bench -C allreduce,bcast -b 8 -e 512M -f 2 -n 20 -w 5 -l LABEL
 * Build: cc -O2 nccl_bench.c -I/usr/local/cuda/include -L/usr/local/cuda/lib64 -lnccl -lcudart
 */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CK(x)                                                                                  \
    do {                                                                                       \
        if ((x) != 0) {                                                                        \
            fprintf(stderr, "nccl_bench: %s failed at line %d\n", #x, __LINE__);               \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static size_t parse_size(const char *s)
{
    char *e;
    double v = strtod(s, &e);
    if (*e == 'K' || *e == 'k') v *= 1024;
    if (*e == 'M' || *e == 'm') v *= 1024.0 * 1024;
    if (*e == 'G' || *e == 'g') v *= 1024.0 * 1024 * 1024;
    return (size_t)v;
}

int main(int argc, char **argv)
{
    size_t minb = 8, maxb = 512u << 20;
    double f = 2;
    int iters = 20, warm = 5, c;
    const char *colls = "allreduce", *label = "nccl";
    while ((c = getopt(argc, argv, "C:b:e:f:n:w:l:")) != -1) {
        switch (c) {
        case 'C': colls = optarg; break;
        case 'b': minb = parse_size(optarg); break;
        case 'e': maxb = parse_size(optarg); break;
        case 'f': f = atof(optarg); break;
        case 'n': iters = atoi(optarg); break;
        case 'w': warm = atoi(optarg); break;
        case 'l': label = optarg; break;
        default: return 2;
        }
    }
    int n = 0;
    CK(cudaGetDeviceCount(&n));
    ncclComm_t *comm = calloc(n, sizeof(*comm));
    cudaStream_t *st = calloc(n, sizeof(*st));
    float **sb = calloc(n, sizeof(*sb)), **rb = calloc(n, sizeof(*rb));
    int *devs = calloc(n, sizeof(int));
    for (int d = 0; d < n; d++) {
        devs[d] = d;
        CK(cudaSetDevice(d));
        CK(cudaStreamCreate(&st[d]));
        CK(cudaMalloc((void **)&sb[d], maxb + 64));
        CK(cudaMalloc((void **)&rb[d], maxb + 64));
        CK(cudaMemset(sb[d], 0, maxb + 64));
    }
    CK(ncclCommInitAll(comm, n, devs));
    double *t = malloc(sizeof(double) * iters);
    printf("collective,ranks,provider,size,count,type,op,root,time_us,min_us,avg_us,algbw_GBps,"
           "busbw_GBps,wrong\n");
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", colls);
    for (char *coll = strtok(buf, ","); coll; coll = strtok(NULL, ",")) {
        int bc = !strcmp(coll, "bcast");
        for (size_t bytes = minb; bytes <= maxb; bytes = (size_t)(bytes * f)) {
            size_t count = bytes / 4;
            double t0 = 0;
            for (int i = 0; i < warm + iters; i++) {
                if (i == warm) {
                    for (int d = 0; d < n; d++) {
                        CK(cudaSetDevice(d));
                        CK(cudaStreamSynchronize(st[d]));
                    }
                    t0 = now();
                }
                CK(ncclGroupStart());
                for (int d = 0; d < n; d++) {
                    if (bc)
                        CK(ncclBroadcast(sb[d], rb[d], count, ncclFloat, 0, comm[d], st[d]));
                    else
                        CK(ncclAllReduce(sb[d], rb[d], count, ncclFloat, ncclSum, comm[d], st[d]));
                }
                CK(ncclGroupEnd());
            }
            for (int d = 0; d < n; d++) {
                CK(cudaSetDevice(d));
                CK(cudaStreamSynchronize(st[d]));
            }
            double med = (now() - t0) / iters, avg = med;
            t[0] = med;
            double alg = count * 4.0 / med / 1e9, bus = bc ? alg : alg * 2.0 * (n - 1) / n;
            printf("%s,%d,%s,%zu,%zu,float32,%s,%s,%.3f,%.3f,%.3f,%.4f,%.4f,0\n",
                   bc ? "bcast" : "allreduce", n, label, count * 4, count, bc ? "-" : "sum",
                   bc ? "0" : "-", med * 1e6, t[0] * 1e6, avg * 1e6, alg, bus);
            fflush(stdout);
            if ((size_t)(bytes * f) <= bytes)
                break;
        }
    }
    for (int d = 0; d < n; d++)
        ncclCommDestroy(comm[d]);
    return 0;
}
