/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_perf --first-call: what the first call on a new buffer costs next to
 * the second, with or without fc_mem_register ahead (--register).
 *
 * For each size and each of o->repeats rounds, every rank allocates a new
 * pair of buffers and writes them (so page faults are not in the figure),
 * registers them when asked (timed apart), then after a barrier times one
 * call, a barrier, and a second call on the same buffers; the buffers are
 * deregistered and freed. A time is the largest over ranks (nccl-tests'
 * convention); the medians over the rounds are printed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu_util.h"
#include "perf.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static char *fresh(const struct perf_opts *o, size_t len, int byte)
{
    char *p = o->cuda ? gu_alloc(len) : aligned_alloc(4096, (len + 4095) / 4096 * 4096);
    if (p && o->cuda)
        gu_memset(p, byte, len);
    else if (p)
        memset(p, byte, len);
    return p;
}

static void release(const struct perf_opts *o, char *p)
{
    if (o->cuda)
        gu_free(p);
    else
        free(p);
}

/* One round: *reg, *first, *second in seconds (largest over ranks). */
static int round_of(enum perf_coll c, size_t count, size_t bufb, const struct perf_opts *o,
                    fc_comm_t comm, int rank, int n, double *t3)
{
    char *sb = fresh(o, bufb, 1), *rb = fresh(o, bufb, 0);
    if (!sb || !rb) {
        fprintf(stderr, "fc_perf: cannot allocate 2 x %zu bytes\n", bufb);
        return -1;
    }
    fc_memhandle_t hs = NULL, hr = NULL;
    double t[3] = {0, 0, 0};
    fc_result_t rc = fc_barrier(comm);
    double t0 = now();
    if (rc == FC_SUCCESS && o->reg) {
        rc = fc_mem_register(comm, sb, bufb, &hs);
        if (rc == FC_SUCCESS)
            rc = fc_mem_register(comm, rb, bufb, &hr);
    }
    t[0] = now() - t0;
    for (int k = 1; k <= 2 && rc == FC_SUCCESS; k++) {
        rc = fc_barrier(comm);
        t0 = now();
        if (rc == FC_SUCCESS)
            rc = perf_run_once(c, sb, rb, count, o, comm, rank, n);
        t[k] = now() - t0;
    }
    if (rc == FC_SUCCESS)
        rc = fc_allreduce(t, t3, 3, FC_FLOAT64, FC_MAX, comm);
    if (hs)
        fc_mem_deregister(comm, hs);
    if (hr)
        fc_mem_deregister(comm, hr);
    release(o, sb);
    release(o, rb);
    if (rc != FC_SUCCESS) {
        fprintf(stderr, "fc_perf: %s\n", fc_last_error());
        return -1;
    }
    return 0;
}

int perf_run_first(const struct perf_opts *o, fc_comm_t comm, int rank, int n,
                   const fc_comm_attr_t *attr)
{
    const size_t es = fc_datatype_size(o->dt);
    double *v = malloc(sizeof(double) * 3 * (size_t)o->repeats);
    if (!v)
        return 1;
    if (rank == 0)
        printf("# fc_perf --first-call: %d ranks, provider %s, %s %s buffers, %s; each round "
               "new buffers (written first), then a first and a second call; medians of %d "
               "rounds of the largest time over ranks\n",
               n, attr->provider, perf_dt_names[o->dt], o->cuda ? "GPU" : "host",
               o->reg ? "registered ahead with fc_mem_register (reg column)"
                      : "not registered ahead",
               o->repeats);
    for (int ci = 0; ci < o->ncolls; ci++) {
        enum perf_coll c = (enum perf_coll)o->colls[ci];
        if (rank == 0)
            printf("#\n# %s\n# %12s %12s %11s %11s %11s %8s\n", perf_coll_names[c], "size(B)",
                   "count", "reg(us)", "first(us)", "second(us)", "ratio");
        for (size_t bytes = o->minb; bytes <= o->maxb;) {
            size_t count = bytes / es;
            if (perf_blocked(c))
                count /= (size_t)n;
            size_t real = perf_blocked(c) ? count * (size_t)n * es : count * es;
            double t3[3];
            for (int r = 0; r < o->repeats; r++) {
                if (round_of(c, count, real + 4096, o, comm, rank, n, t3)) {
                    free(v);
                    return 1;
                }
                for (int k = 0; k < 3; k++)
                    v[k * o->repeats + r] = t3[k];
            }
            double reg = median(v, o->repeats), first = median(v + o->repeats, o->repeats),
                   second = median(v + 2 * o->repeats, o->repeats);
            if (rank == 0)
                printf("  %12zu %12zu %11.2f %11.2f %11.2f %8.2f\n", real, count, reg * 1e6,
                       first * 1e6, second * 1e6, second > 0 ? first / second : 0);
            size_t next = o->stepb ? bytes + o->stepb : (size_t)((double)bytes * o->factor);
            if (next <= bytes)
                break;
            bytes = next;
        }
    }
    free(v);
    return 0;
}
