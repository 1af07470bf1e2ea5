/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * How fc_perf times one size, as nccl-tests does (a barrier, then N calls
 * back to back timed as one interval, the maximum over ranks) or, with
 * --latency, as OSU's latency tests do (a barrier before every call, each
 * call timed alone, the average over ranks). The ranks' times meet in
 * allreduces outside the timed blocks. Nothing here prints a result.
 */
#define _GNU_SOURCE
#include "perf.h"

#include <stdint.h>
#include <stdio.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* One sentence on how fc_perf times, for the headers. */
void perf_method_desc(const struct perf_opts *o, char *buf, size_t len)
{
    const int per = o->stream ? o->batch : 1; /* calls per run_once */
    char unit[48] = "call", sync[128] = "", blocks[96] = "";
    if (per > 1)
        snprintf(unit, sizeof(unit), "batch of %d calls", per);
    if (o->stream)
        snprintf(sync, sizeof(sync), "; stream-ordered calls, a stream synchronize after each %s",
                 unit);
    if (o->repeats > 1 && o->latency)
        snprintf(blocks, sizeof(blocks), "; median of %d blocks of %d iterations", o->repeats,
                 o->iters);
    else if (o->repeats > 1)
        snprintf(blocks, sizeof(blocks), "; median of %d blocks (each barrier + N calls)",
                 o->repeats);
    if (o->latency)
        snprintf(buf, len,
                 "OSU latency: barrier before each %s, per-call time averaged over %d "
                 "iterations and over ranks (avg; min and max over ranks)%s%s",
                 unit, o->iters, sync, blocks);
    else
        snprintf(buf, len,
                 "nccl-tests method: barrier, then N = %d back-to-back calls, total/N, maximum "
                 "over ranks%s%s",
                 o->iters * per, sync, blocks);
}

/* One timed block on this rank: its time per call in *t. nccl-tests'
 * method: the ranks leave a barrier together, then o->iters calls back to
 * back are one interval (with -S each run_once ends with its stream
 * synchronize, so the interval ends once the last result is there). OSU's:
 * a barrier before every call and only the call timed. Returns nonzero on a
 * failure, *in_barrier saying whether the barrier failed. */
static int time_block(enum perf_coll c, size_t count, char *sb, char *rb, const struct perf_opts *o,
                      fc_comm_t comm, int rank, int n, double *t, int *in_barrier)
{
    const double calls = (double)o->iters * (o->stream ? o->batch : 1);
    double sum = 0;
    if (!o->latency) {
        if ((*in_barrier = fc_barrier(comm) != FC_SUCCESS))
            return 1;
        double t0 = now();
        for (int it = 0; it < o->iters; it++)
            if (perf_run_once(c, sb, rb, count, o, comm, rank, n) != FC_SUCCESS)
                return 1;
        *t = (now() - t0) / calls;
        return 0;
    }
    for (int it = 0; it < o->iters; it++) {
        if ((*in_barrier = fc_barrier(comm) != FC_SUCCESS))
            return 1;
        double t0 = now();
        if (perf_run_once(c, sb, rb, count, o, comm, rank, n) != FC_SUCCESS)
            return 1;
        sum += now() - t0;
    }
    *t = sum / calls;
    return 0;
}

/* Runs one size: with -c first one checked call (the wrong elements of all
 * ranks in *wrong), then the warm-up calls, then o->repeats timed blocks.
 * The ranks' times per call meet outside the timed blocks, in allreduces
 * over comm itself, and the median block's timing is returned in *res.
 * blk: 4 x o->repeats doubles. Returns nonzero, said on stderr, on a
 * failure. */
int perf_measure(enum perf_coll c, size_t count, size_t real, char *sb, char *rb,
                 const struct perf_opts *o, fc_comm_t comm, int rank, int n, double *blk,
                 struct perf_timing *res, long *wrong)
{
    const int nb = o->repeats;
    *wrong = 0;
    /* products of up to 3^n overflow the 8-bit and half types */
    int checkable =
        !(o->op == FC_PROD && (o->dt <= FC_UINT8 || o->dt == FC_FLOAT16 || o->dt == FC_BFLOAT16));
    if (o->check && checkable) {
        int64_t w64 = perf_check_once(c, sb, rb, count, o, comm, rank, n);
        if (fc_allreduce(&w64, &w64, 1, FC_INT64, FC_SUM, comm) != FC_SUCCESS) {
            fprintf(stderr, "fc_perf: %s\n", fc_last_error());
            return 1;
        }
        *wrong = (long)w64;
    }
    int failed = 0, in_barrier = 0;
    for (int w = 0; w < o->warmup && !failed; w++)
        failed = perf_run_once(c, sb, rb, count, o, comm, rank, n) != FC_SUCCESS;
    /* the barrier is warmed up too: a first barrier that still connects
     * peers lets the ranks leave it milliseconds apart, and the timed block
     * after it would count that */
    if (o->warmup > 0 && !failed && (in_barrier = fc_barrier(comm) != FC_SUCCESS))
        failed = 1;
    for (int b = 0; b < nb && !failed; b++)
        failed = time_block(c, count, sb, rb, o, comm, rank, n, &blk[b], &in_barrier);
    if (failed) {
        fprintf(stderr, "fc_perf: rank %d: %s%s of %zu bytes failed: %s\n", rank,
                in_barrier ? "the barrier before a timed " : "", perf_coll_names[c], real,
                fc_last_error());
        return 1;
    }
    /* over ranks: the largest and (negated) smallest time in one FC_MAX,
     * the sum in one FC_SUM */
    double *mx = blk + nb, *sum = blk + 3 * nb;
    for (int b = 0; b < nb; b++) {
        mx[b] = blk[b];
        mx[nb + b] = -blk[b];
        sum[b] = blk[b];
    }
    if (fc_allreduce(mx, mx, 2 * (size_t)nb, FC_FLOAT64, FC_MAX, comm) != FC_SUCCESS ||
        fc_allreduce(sum, sum, (size_t)nb, FC_FLOAT64, FC_SUM, comm) != FC_SUCCESS) {
        fprintf(stderr, "fc_perf: %s\n", fc_last_error());
        return 1;
    }
    /* the median block by the figure printed (the lower middle one of an
     * even count): the block with (nb - 1) / 2 blocks before it in order */
    double *shown = blk; /* this rank's own times are no longer needed */
    for (int b = 0; b < nb; b++)
        shown[b] = o->latency ? sum[b] / n : mx[b];
    int m = 0;
    for (int b = 0; b < nb; b++) {
        int before = 0;
        for (int k = 0; k < nb; k++)
            before += shown[k] < shown[b] || (shown[k] == shown[b] && k < b);
        if (before == (nb - 1) / 2)
            m = b;
    }
    res->time = shown[m];
    res->max = mx[m];
    res->min = -mx[nb + m];
    res->avg = sum[m] / n;
    return 0;
}
