/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_perf: nccl-tests-style sweep of fabcoll's collectives, written
 * against the public API only. Run it under a launcher:
 *   fc_run -n 4 fc_perf -b 8 -e 256M -f 2
 * Times are measured as nccl-tests measures them: per size, warm-up calls,
 * a barrier, then N calls back to back timed as one interval on every rank;
 * a rank's time per call is that interval / N, and the time reported is the
 * largest over the ranks (with -R, the median of R such blocks). --latency
 * measures as OSU's latency tests do instead: a barrier before every call,
 * each rank timing only the call; a rank's times are averaged over the
 * iterations, and the average over ranks is reported with the smallest and
 * largest. Timing each call alone without a barrier between calls (what
 * fc_perf once did) lets a broadcast's root run ahead, so that receivers find
 * their data already there, and measures neither latency nor bandwidth.
 * algbw = size / time; busbw = algbw x the collective's bus factor
 * (nccl-tests' definitions).
 */
#define _GNU_SOURCE
#include <fabcoll.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "../functional/gpu_util.h"

static const char usage[] =
    "Usage: fc_run -n N fc_perf [options]\n"
    "\n"
    "Sweeps message sizes for fabcoll collectives and prints, per size, the\n"
    "time per call and the algorithm and bus bandwidths as nccl-tests defines\n"
    "them (algbw = size / time; busbw = algbw x 2(n-1)/n for allreduce, (n-1)/n\n"
    "for allgather, reduce_scatter and alltoall, 1 for broadcast and reduce).\n"
    "\n"
    "Time, by default as nccl-tests measures it: per size, the warm-up calls,\n"
    "a barrier, then N calls back to back timed as one interval on every rank;\n"
    "a rank's time per call is that interval / N, and the time printed is the\n"
    "maximum over ranks (with -R R, the median of R such blocks, each a barrier\n"
    "and N calls). With --latency, as OSU's latency tests measure it: a barrier\n"
    "before every call, each rank timing only the call; each rank's times are\n"
    "averaged over the N calls, and the average over ranks is printed with the\n"
    "smallest and the largest rank's (avg, min, max).\n"
    "\n"
    "Options:\n"
    "  -C, --coll LIST       collectives, comma separated (default allreduce):\n"
    "                        allreduce bcast reduce allgather reduce_scatter\n"
    "                        alltoall barrier, or 'all'\n"
    "  -b, --minbytes SIZE   smallest size (default 8; K/M/G suffixes)\n"
    "  -e, --maxbytes SIZE   largest size (default 32M)\n"
    "  -f, --stepfactor F    multiply the size by F each step (default 2)\n"
    "  -i, --stepbytes SIZE  add SIZE each step instead of multiplying\n"
    "  -n, --iters N         calls per timed block, N (default 20); with --latency\n"
    "                        the timed calls, each after its barrier\n"
    "  -w, --warmup N        untimed warm-up calls per size (default 5)\n"
    "  -R, --repeats R       timed blocks per size; the median block is printed\n"
    "                        (default 1)\n"
    "  -l, --latency         OSU's method: a barrier before every timed call; the\n"
    "                        average over ranks of each rank's mean time per call,\n"
    "                        with the minimum and maximum over ranks\n"
    "  -d, --datatype T      int8 uint8 int32 uint32 int64 uint64 float16 bfloat16\n"
    "                        float32 float64 (default float32)\n"
    "  -o, --op OP           sum prod min max avg (default sum)\n"
    "  -r, --root R          root of bcast and reduce (default 0)\n"
    "  -a, --algo NAME       force an algorithm (sets FC_ALGO=coll:NAME)\n"
    "  -I, --inplace         run in place\n"
    "  -D, --device KIND     host (default) or cuda: buffers in GPU memory (GPU\n"
    "                        local_rank % count), through the staged or gdr path\n"
    "  -S, --stream          with -D cuda: the stream-ordered twins (fc_allreduce_stream\n"
    "                        ...) on a stream of fc_perf's own, each call followed by\n"
    "                        cuStreamSynchronize: the time until the result is there\n"
    "                        (allreduce bcast reduce allgather reduce_scatter); a timed\n"
    "                        block or call ends with its synchronize\n"
    "  -B, --batch N         with -S: N calls queued on the stream before each\n"
    "                        synchronize, as a training step queues them; -n counts\n"
    "                        batches, and times are per call (a batch's time / N).\n"
    "                        Default 1\n"
    "  -H, --host-buffer SIDE  with -D cuda: mixed calls, the SIDE buffer (send or\n"
    "                        recv) in pageable host memory and the other on the GPU\n"
    "                        (not with -I). With -S a rank needs one buffer on the GPU:\n"
    "                        reduce's non-roots under -H send and bcast's under -H recv\n"
    "                        have none, and fabcoll refuses their calls. SIDE:pinned\n"
    "                        (send:pinned, recv:pinned) puts it in page-locked host\n"
    "                        memory (cuMemHostAlloc) instead\n"
    "  -c, --check           check every result against closed-form values\n"
    "                        (#wrong column; exit 1 if any is wrong): one untimed\n"
    "                        call per size, before its warm-up\n"
    "      --csv             comma-separated output\n"
    "      --json            one JSON object per line\n"
    "      --table           the seed article's table instead of a sweep: allreduce\n"
    "                        latency (ms) at 256 KiB, 1 MiB and 16 MiB on this run's\n"
    "                        provider (-d, -o, -n, -w, -R, -l, -D and -c apply)\n"
    "      --table-file FILE keep the table's rows in FILE (implies --table): each\n"
    "                        run adds or replaces the row of its provider, then the\n"
    "                        rows of every provider measured at the same rank count,\n"
    "                        node count and buffer kind print side by side with the\n"
    "                        speed-up of the fastest over the slowest. Run once per\n"
    "                        provider (FI_PROVIDER=... or fc_run -p ...); with --csv\n"
    "                        the table prints as CSV\n"
    "  -h, --help            this text\n"
    "\n"
    "Example, the seed article's TCP-vs-RDMA table on this machine's providers:\n"
    "  fc_run -n 2 -p tcp fc_perf --table-file t.txt\n"
    "  fc_run -n 2 -p shm fc_perf --table-file t.txt\n"
    "\n"
    "Sizes are nccl-tests' sizes: the bytes of one rank's buffer for allreduce,\n"
    "bcast and reduce; the whole receive (allgather) or send (reduce_scatter,\n"
    "alltoall) buffer of n blocks for the others.\n"
    "\n"
    "--csv columns: time_us is the time printed; min_us, avg_us and max_us are\n"
    "the smallest, mean and largest rank's time per call (of the median block).\n";

enum coll { ALLREDUCE, BCAST, REDUCE, ALLGATHER, REDUCE_SCATTER, ALLTOALL, BARRIER, NCOLL };
static const char *coll_names[NCOLL] = {"allreduce", "bcast",    "reduce", "allgather",
                                        "reduce_scatter", "alltoall", "barrier"};
static const char *dt_names[] = {"int8",    "uint8",    "int32",   "uint32",  "int64",
                                 "uint64",  "float16",  "bfloat16", "float32", "float64"};
static const char *op_names[] = {"sum", "prod", "min", "max", "avg"};

static int lookup(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcasecmp(s, names[i]) == 0)
            return i;
    return -1;
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    double v = strtod(s, &end);
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024; end++; break;
    case 'm': case 'M': mul = 1024.0 * 1024; end++; break;
    case 'g': case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    default: break;
    }
    if (end == s || *end || v < 0)
        return -1;
    *out = (size_t)(v * mul);
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* one rank's input at element i (small integers: exact in every type) */
static double input(int rank, size_t i)
{
    return (double)((rank + (int)(i % 3)) % 3 + 1);
}

static void store(void *b, size_t i, fc_datatype_t dt, double v)
{
    switch (dt) {
    case FC_INT8: ((int8_t *)b)[i] = (int8_t)v; break;
    case FC_UINT8: ((uint8_t *)b)[i] = (uint8_t)v; break;
    case FC_INT32: ((int32_t *)b)[i] = (int32_t)v; break;
    case FC_UINT32: ((uint32_t *)b)[i] = (uint32_t)v; break;
    case FC_INT64: ((int64_t *)b)[i] = (int64_t)v; break;
    case FC_UINT64: ((uint64_t *)b)[i] = (uint64_t)v; break;
    case FC_FLOAT16: {
        _Float16 h = (_Float16)v;
        memcpy((char *)b + 2 * i, &h, 2);
        break;
    }
    case FC_BFLOAT16: {
        float f = (float)v; /* small integers: exact, truncation is rounding */
        uint32_t u;
        memcpy(&u, &f, 4);
        uint16_t h = (uint16_t)(u >> 16);
        memcpy((char *)b + 2 * i, &h, 2);
        break;
    }
    case FC_FLOAT32: ((float *)b)[i] = (float)v; break;
    case FC_FLOAT64: ((double *)b)[i] = v; break;
    }
}

static double load(const void *b, size_t i, fc_datatype_t dt)
{
    switch (dt) {
    case FC_INT8: return ((const int8_t *)b)[i];
    case FC_UINT8: return ((const uint8_t *)b)[i];
    case FC_INT32: return ((const int32_t *)b)[i];
    case FC_UINT32: return ((const uint32_t *)b)[i];
    case FC_INT64: return (double)((const int64_t *)b)[i];
    case FC_UINT64: return (double)((const uint64_t *)b)[i];
    case FC_FLOAT16: {
        _Float16 h;
        memcpy(&h, (const char *)b + 2 * i, 2);
        return (double)h;
    }
    case FC_BFLOAT16: {
        uint16_t h;
        memcpy(&h, (const char *)b + 2 * i, 2);
        uint32_t u = (uint32_t)h << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case FC_FLOAT32: return ((const float *)b)[i];
    case FC_FLOAT64: return ((const double *)b)[i];
    }
    return 0;
}

/* the reduction of input() over n ranks (no wrap: checked sizes keep it
 * small for every op but int8 products, which are skipped) */
static double reduced(fc_op_t op, int n, size_t i)
{
    double acc = input(0, i);
    for (int r = 1; r < n; r++) {
        double v = input(r, i);
        switch (op) {
        case FC_SUM:
        case FC_AVG: acc += v; break;
        case FC_PROD: acc *= v; break;
        case FC_MIN: acc = v < acc ? v : acc; break;
        case FC_MAX: acc = v > acc ? v : acc; break;
        }
    }
    if (op == FC_AVG)
        acc = floor(acc / n); /* integer types truncate; floats compared with tolerance */
    return acc;
}

struct opts {
    size_t minb, maxb, stepb;
    double factor;
    int iters, warmup, root, inplace, check, csv, json, cuda, stream, table;
    int batch; /* -S: calls queued per synchronize */
    int repeats; /* -R: timed blocks per size, the median printed */
    int latency; /* -l: OSU's method, a barrier before every timed call */
    int host_side; /* -H: 1 the send buffer, 2 the receive buffer in host memory */
    int host_pinned; /* -H SIDE:pinned: that buffer page-locked by CUDA */
    const char *table_file;
    fc_datatype_t dt;
    fc_op_t op;
    int colls[NCOLL], ncolls;
};

static void *gstream; /* -S: the stream of the stream-ordered calls */

static fc_result_t run_call(enum coll c, void *sb, void *rb, size_t count, const struct opts *o,
                            fc_comm_t comm, int rank, int n);

/* One call of collective c: the plain call, or with -S o->batch of its
 * stream-ordered twin on gstream followed by a stream synchronize. */
static fc_result_t run_once(enum coll c, void *sb, void *rb, size_t count, const struct opts *o,
                            fc_comm_t comm, int rank, int n)
{
    fc_result_t rc = FC_SUCCESS;
    for (int b = 0; b < (o->stream ? o->batch : 1) && rc == FC_SUCCESS; b++)
        rc = run_call(c, sb, rb, count, o, comm, rank, n);
    if (rc == FC_SUCCESS && o->stream && gu_stream_sync(gstream) != 0)
        rc = FC_ERR_CUDA;
    return rc;
}

static fc_result_t run_call(enum coll c, void *sb, void *rb, size_t count, const struct opts *o,
                            fc_comm_t comm, int rank, int n)
{
    void *s = o->inplace ? rb : sb, *st = gstream;
    const size_t mine = (size_t)rank * count * fc_datatype_size(o->dt);
    void *ag_send = o->inplace ? (char *)rb + mine : sb; /* allgather's block */
    void *rs_recv = o->inplace ? (char *)sb + mine : rb; /* reduce_scatter's */
    void *root_send = rank == o->root ? s : NULL;
    fc_result_t rc;
    switch (c) {
    case ALLREDUCE:
        rc = o->stream ? fc_allreduce_stream(s, rb, count, o->dt, o->op, comm, st)
                       : fc_allreduce(s, rb, count, o->dt, o->op, comm);
        break;
    case BCAST:
        rc = o->stream ? fc_broadcast_stream(root_send, rb, count, o->dt, o->root, comm, st)
                       : fc_broadcast(root_send, rb, count, o->dt, o->root, comm);
        break;
    case REDUCE:
        rc = o->stream ? fc_reduce_stream(s, rb, count, o->dt, o->op, o->root, comm, st)
                       : fc_reduce(s, rb, count, o->dt, o->op, o->root, comm);
        break;
    case ALLGATHER:
        rc = o->stream ? fc_allgather_stream(ag_send, rb, count, o->dt, comm, st)
                       : fc_allgather(ag_send, rb, count, o->dt, comm);
        break;
    case REDUCE_SCATTER:
        rc = o->stream ? fc_reduce_scatter_stream(sb, rs_recv, count, o->dt, o->op, comm, st)
                       : fc_reduce_scatter(sb, rs_recv, count, o->dt, o->op, comm);
        break;
    case ALLTOALL: return fc_alltoall(s, rb, count, o->dt, comm); /* -S refuses these two */
    case BARRIER: return fc_barrier(comm);
    default: return FC_ERR_INVALID_ARGUMENT;
    }
    return rc;
    (void)n;
}

/* Fills inputs, runs once, counts wrong elements on this rank. With
 * device buffers the inputs are written on the host and copied in, and the
 * results copied out, around the same call. */
static char *hsb, *hrb; /* host shadows of the device buffers */
static size_t hbytes;

static long check_host(enum coll c, char *sb, char *rb, size_t count, const struct opts *o,
                       fc_comm_t comm, int rank, int n);

static long check_once(enum coll c, char *sb, char *rb, size_t count, const struct opts *o,
                       fc_comm_t comm, int rank, int n)
{
    if (!o->cuda)
        return check_host(c, sb, rb, count, o, comm, rank, n);
    /* run on the host shadows to fill inputs and compute the check, with
     * the collective itself on the device: fill, copy in, run, copy out */
    struct opts ho = *o;
    ho.cuda = 0;
    ho.stream = 0;
    ho.check = 2; /* fill only */
    check_host(c, hsb, hrb, count, &ho, comm, rank, n);
    gu_to_device(sb, hsb, hbytes);
    gu_to_device(rb, hrb, hbytes);
    struct opts one = *o;
    one.batch = 1; /* in place, a batch would reduce the result again */
    if (run_once(c, sb, rb, count, &one, comm, rank, n) != FC_SUCCESS)
        return (long)count + 1;
    gu_to_host(hsb, sb, hbytes);
    gu_to_host(hrb, rb, hbytes);
    ho.check = 3; /* verify only */
    return check_host(c, hsb, hrb, count, &ho, comm, rank, n);
}

static long check_host(enum coll c, char *sb, char *rb, size_t count, const struct opts *o,
                       fc_comm_t comm, int rank, int n)
{
    size_t es = fc_datatype_size(o->dt);
    size_t ns = count, nr = count;
    if (c == ALLGATHER)
        nr = count * (size_t)n;
    if (c == REDUCE_SCATTER || c == ALLTOALL)
        ns = count * (size_t)n;
    if (c == ALLTOALL)
        nr = ns;
    char *src = sb;
    if (o->inplace)
        src = (c == ALLGATHER) ? rb + (size_t)rank * count * es : (c == REDUCE_SCATTER ? sb : rb);
    if (o->check != 3)
        for (size_t i = 0; i < ns; i++)
            store(src, i, o->dt, c == ALLTOALL ? (double)((rank * 7 + (int)i) % 100)
                                               : input(c == BCAST ? o->root : rank, i));
    if (o->check == 2)
        return 0;
    if (o->check != 3 && run_once(c, sb, rb, count, o, comm, rank, n) != FC_SUCCESS)
        return (long)nr + 1;
    const char *res = rb;
    if (c == REDUCE_SCATTER && o->inplace)
        res = sb + (size_t)rank * count * es;
    if (c == REDUCE && rank != o->root)
        return 0;
    if (c == BARRIER)
        return 0;
    long wrong = 0;
    size_t checkn = c == REDUCE_SCATTER ? count : nr;
    for (size_t i = 0; i < checkn; i++) {
        double e;
        switch (c) {
        case ALLREDUCE:
        case REDUCE: e = reduced(o->op, n, i); break;
        case REDUCE_SCATTER: e = reduced(o->op, n, (size_t)rank * count + i); break;
        case BCAST: e = input(o->root, i); break;
        case ALLGATHER: e = input((int)(i / count), i % count); break;
        case ALLTOALL: {
            size_t from = i / count, k = i % count;
            e = (double)(((int)from * 7 + (int)((size_t)rank * count + k)) % 100);
            break;
        }
        default: e = 0;
        }
        double g = load(res, i, o->dt);
        int float_avg = o->op == FC_AVG && (o->dt >= FC_FLOAT16) &&
                        (c == ALLREDUCE || c == REDUCE || c == REDUCE_SCATTER);
        if (float_avg) {
            double exact = 0;
            for (int r = 0; r < n; r++)
                exact += input(r, c == REDUCE_SCATTER ? (size_t)rank * count + i : i);
            e = exact / n;
            if (fabs(g - e) > 1e-2 * fabs(e))
                wrong++;
        } else if (g != e) {
            wrong++;
        }
    }
    return wrong;
}

/* The time per call of one size: the figure printed (nccl-tests' maximum
 * over ranks, or with --latency OSU's average over ranks) and the smallest,
 * mean and largest rank's time per call, all of the block printed. */
struct timing {
    double time, min, avg, max;
};

/* One sentence on how fc_perf times, for the headers. */
static void method_desc(const struct opts *o, char *buf, size_t len)
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
static int time_block(enum coll c, size_t count, char *sb, char *rb, const struct opts *o,
                      fc_comm_t comm, int rank, int n, double *t, int *in_barrier)
{
    const double calls = (double)o->iters * (o->stream ? o->batch : 1);
    double sum = 0;
    if (!o->latency) {
        if ((*in_barrier = fc_barrier(comm) != FC_SUCCESS))
            return 1;
        double t0 = now();
        for (int it = 0; it < o->iters; it++)
            if (run_once(c, sb, rb, count, o, comm, rank, n) != FC_SUCCESS)
                return 1;
        *t = (now() - t0) / calls;
        return 0;
    }
    for (int it = 0; it < o->iters; it++) {
        if ((*in_barrier = fc_barrier(comm) != FC_SUCCESS))
            return 1;
        double t0 = now();
        if (run_once(c, sb, rb, count, o, comm, rank, n) != FC_SUCCESS)
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
static int measure(enum coll c, size_t count, size_t real, char *sb, char *rb,
                   const struct opts *o, fc_comm_t comm, int rank, int n, double *blk,
                   struct timing *res, long *wrong)
{
    const int nb = o->repeats;
    *wrong = 0;
    /* products of up to 3^n overflow the 8-bit and half types */
    int checkable = !(o->op == FC_PROD &&
                      (o->dt <= FC_UINT8 || o->dt == FC_FLOAT16 || o->dt == FC_BFLOAT16));
    if (o->check && checkable) {
        int64_t w64 = check_once(c, sb, rb, count, o, comm, rank, n);
        if (fc_allreduce(&w64, &w64, 1, FC_INT64, FC_SUM, comm) != FC_SUCCESS) {
            fprintf(stderr, "fc_perf: %s\n", fc_last_error());
            return 1;
        }
        *wrong = (long)w64;
    }
    int failed = 0, in_barrier = 0;
    for (int w = 0; w < o->warmup && !failed; w++)
        failed = run_once(c, sb, rb, count, o, comm, rank, n) != FC_SUCCESS;
    for (int b = 0; b < nb && !failed; b++)
        failed = time_block(c, count, sb, rb, o, comm, rank, n, &blk[b], &in_barrier);
    if (failed) {
        fprintf(stderr, "fc_perf: rank %d: %s%s of %zu bytes failed: %s\n", rank,
                in_barrier ? "the barrier before a timed " : "", coll_names[c], real,
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

/* ---- --table: the seed article's comparison -------------------------------
 * One row per (provider, buffer kind, ranks, nodes): allreduce latency at
 * the seed's three sizes. A table file keeps rows across runs, one line each:
 *   fc_perf-table 1 PROVIDER BUFFERS RANKS NODES US_256K US_1M US_16M
 * (PROVIDER as fi_info names it, without spaces, and /gdr or /staged for
 * device buffers; BUFFERS host or device). A run replaces the line of its
 * own key. */
#define TABLE_MIN (256u << 10)
#define TABLE_MAX (16u << 20)
#define TABLE_ROWS 32
static const size_t table_sizes[3] = {256u << 10, 1u << 20, 16u << 20};

struct table_row {
    char prov[80], bufs[16];
    int ranks, nodes;
    double us[3];
};

static int table_parse(const char *line, struct table_row *r)
{
    int ver;
    return sscanf(line, "fc_perf-table %d %79s %15s %d %d %lf %lf %lf", &ver, r->prov, r->bufs,
                  &r->ranks, &r->nodes, &r->us[0], &r->us[1], &r->us[2]) == 8 &&
           ver == 1;
}

/* Reads the rows of FILE (a missing file is an empty table), puts `mine`
 * in place of the row with its key, writes the file back. */
static int table_merge(const char *file, const struct table_row *mine, struct table_row *rows,
                       int *nrows)
{
    int n = 0, placed = 0;
    FILE *f = fopen(file, "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof(line), f) && n < TABLE_ROWS - 1) {
            struct table_row r;
            if (!table_parse(line, &r))
                continue;
            if (!strcmp(r.prov, mine->prov) && !strcmp(r.bufs, mine->bufs) &&
                r.ranks == mine->ranks && r.nodes == mine->nodes) {
                if (placed)
                    continue;
                r = *mine;
                placed = 1;
            }
            rows[n++] = r;
        }
        fclose(f);
    } else if (errno != ENOENT) {
        fprintf(stderr, "fc_perf: cannot read the table file %s: %s\n", file, strerror(errno));
        return 1;
    }
    if (!placed)
        rows[n++] = *mine;
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", file, (int)getpid());
    f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "fc_perf: cannot write %s: %s\n", tmp, strerror(errno));
        return 1;
    }
    for (int i = 0; i < n; i++)
        fprintf(f, "fc_perf-table 1 %s %s %d %d %.3f %.3f %.3f\n", rows[i].prov, rows[i].bufs,
                rows[i].ranks, rows[i].nodes, rows[i].us[0], rows[i].us[1], rows[i].us[2]);
    if (fclose(f) != 0 || rename(tmp, file) != 0) {
        fprintf(stderr, "fc_perf: cannot write the table file %s: %s\n", file, strerror(errno));
        unlink(tmp);
        return 1;
    }
    *nrows = n;
    return 0;
}

static void human_size(size_t b, char *buf, size_t len)
{
    if (b >= (1u << 20))
        snprintf(buf, len, "%zu MiB", b >> 20);
    else
        snprintf(buf, len, "%zu KiB", b >> 10);
}

/* Prints the rows with the key of `mine` but any provider, side by side,
 * and the speed-up of the fastest provider over the slowest (picked at 1 MiB,
 * the seed's middle row, so that every row compares the same two). */
static void table_print(const struct table_row *rows, int nrows, const struct table_row *mine,
                        const struct opts *o)
{
    const struct table_row *cols[TABLE_ROWS];
    int nc = 0;
    for (int i = 0; i < nrows; i++)
        if (!strcmp(rows[i].bufs, mine->bufs) && rows[i].ranks == mine->ranks &&
            rows[i].nodes == mine->nodes)
            cols[nc++] = &rows[i];
    int fast = 0, slow = 0;
    for (int i = 1; i < nc; i++) {
        if (cols[i]->us[1] < cols[fast]->us[1])
            fast = i;
        if (cols[i]->us[1] > cols[slow]->us[1])
            slow = i;
    }
    char sp[200] = "";
    if (nc > 1)
        snprintf(sp, sizeof(sp), "%s over %s", cols[fast]->prov, cols[slow]->prov);
    if (o->csv) {
        printf("message_bytes");
        for (int i = 0; i < nc; i++)
            printf(",%s_ms", cols[i]->prov);
        printf("%s\n", nc > 1 ? ",speedup" : "");
    } else {
        char how[512];
        method_desc(o, how, sizeof(how));
        printf("# fc_perf --table: allreduce latency (ms), %s %s, %d ranks on %d node(s), %s "
               "buffers%s\n# time: %s\n",
               dt_names[o->dt], op_names[o->op], mine->ranks, mine->nodes, mine->bufs,
               nc > 1 ? "; the other columns are earlier runs kept in the table file" : "", how);
        printf("# %8s", "message");
        for (int i = 0; i < nc; i++)
            printf(" | %12.12s", cols[i]->prov);
        if (nc > 1)
            printf(" | speed-up, %s", sp);
        printf("\n");
    }
    for (int k = 0; k < 3; k++) {
        char hs[32];
        human_size(table_sizes[k], hs, sizeof(hs));
        if (o->csv)
            printf("%zu", table_sizes[k]);
        else
            printf("  %8s", hs);
        for (int i = 0; i < nc; i++)
            printf(o->csv ? ",%.4f" : " | %12.3f", cols[i]->us[k] / 1000.0);
        if (nc > 1) {
            double x = cols[fast]->us[k] > 0 ? cols[slow]->us[k] / cols[fast]->us[k] : 0;
            printf(o->csv ? ",%.2f" : " | %.1fx", x);
        }
        printf("\n");
    }
}

static int run_table(char *sb, char *rb, const struct opts *o, fc_comm_t comm, int rank, int n,
                     const fc_comm_attr_t *attr, double *blk)
{
    struct table_row mine;
    memset(&mine, 0, sizeof(mine));
    /* device buffers: the column says the path (the seed's TCP vs RDMA is
     * staged tcp vs gdr on a GPU cluster) */
    snprintf(mine.prov, sizeof(mine.prov), "%s%s", attr->provider,
             !o->cuda ? "" : attr->hmem ? "/gdr" : "/staged");
    for (char *p = mine.prov; *p; p++)
        if (*p == ' ' || *p == '\t')
            *p = '_';
    snprintf(mine.bufs, sizeof(mine.bufs), "%s", o->cuda ? "device" : "host");
    mine.ranks = n;
    mine.nodes = attr->nnodes;
    size_t es = fc_datatype_size(o->dt);
    long wrong_total = 0;
    for (int k = 0; k < 3; k++) {
        size_t count = table_sizes[k] / es;
        struct timing tm;
        long wrong;
        if (measure(ALLREDUCE, count, count * es, sb, rb, o, comm, rank, n, blk, &tm, &wrong))
            return 1;
        mine.us[k] = tm.time * 1e6;
        wrong_total += wrong;
    }
    if (rank != 0)
        return wrong_total ? 1 : 0;
    struct table_row rows[TABLE_ROWS];
    int nrows = 1;
    rows[0] = mine;
    if (o->table_file && table_merge(o->table_file, &mine, rows, &nrows))
        return 1;
    table_print(rows, nrows, &mine, o);
    if (o->check && !o->csv)
        printf("# %s\n", wrong_total ? "WRONG RESULTS" : "all results correct");
    return wrong_total ? 1 : 0;
}

static double bus_factor(enum coll c, int n)
{
    switch (c) {
    case ALLREDUCE: return n > 1 ? 2.0 * (n - 1) / n : 0;
    case ALLGATHER:
    case REDUCE_SCATTER:
    case ALLTOALL: return n > 1 ? (double)(n - 1) / n : 0;
    case BCAST:
    case REDUCE: return 1;
    default: return 0;
    }
}

/* Whether the send (side 1) or receive (side 2) buffer is GPU memory:
 * with -D cuda, unless -H puts that side in host memory. */
static int on_gpu(const struct opts *o, int side)
{
    return o->cuda && o->host_side != side;
}

/* Whether that side is the -H SIDE:pinned buffer (page-locked by CUDA). */
static int host_pinned(const struct opts *o, int side)
{
    return o->host_pinned && o->host_side == side;
}

/* len bytes of GPU or page-aligned host memory (page-locked by CUDA for
 * -H SIDE:pinned), every byte set to byte. */
static char *buf_new(const struct opts *o, int side, size_t len, int byte)
{
    int gpu = on_gpu(o, side);
    char *p = gpu                    ? gu_alloc(len)
              : host_pinned(o, side) ? gu_host_alloc(len)
                                     : aligned_alloc(4096, len);
    if (p && gpu)
        gu_memset(p, byte, len);
    else if (p)
        memset(p, byte, len);
    return p;
}

static void free_buffers(const struct opts *o, char *sb, char *rb)
{
    char *b[2] = {sb, rb};
    for (int side = 1; side <= 2; side++) {
        if (on_gpu(o, side))
            gu_free(b[side - 1]);
        else if (host_pinned(o, side))
            gu_host_free(b[side - 1]);
        else
            free(b[side - 1]);
    }
    free(hsb);
    free(hrb);
}

int main(int argc, char **argv)
{
    struct opts o = {.minb = 8, .maxb = 32u << 20, .factor = 2, .iters = 20, .warmup = 5,
                     .batch = 1, .repeats = 1, .dt = FC_FLOAT32, .op = FC_SUM};
    const char *algo = NULL, *collist = "allreduce";
    static const struct option lo[] = {
        {"coll", required_argument, NULL, 'C'},      {"minbytes", required_argument, NULL, 'b'},
        {"maxbytes", required_argument, NULL, 'e'},  {"stepfactor", required_argument, NULL, 'f'},
        {"stepbytes", required_argument, NULL, 'i'}, {"iters", required_argument, NULL, 'n'},
        {"warmup", required_argument, NULL, 'w'},    {"datatype", required_argument, NULL, 'd'},
        {"op", required_argument, NULL, 'o'},        {"root", required_argument, NULL, 'r'},
        {"algo", required_argument, NULL, 'a'},      {"inplace", no_argument, NULL, 'I'},
        {"check", no_argument, NULL, 'c'},           {"csv", no_argument, NULL, 1},
        {"device", required_argument, NULL, 'D'},   {"stream", no_argument, NULL, 'S'},
        {"batch", required_argument, NULL, 'B'},    {"host-buffer", required_argument, NULL, 'H'},
        {"json", no_argument, NULL, 2},              {"help", no_argument, NULL, 'h'},
        {"table", no_argument, NULL, 3},             {"table-file", required_argument, NULL, 4},
        {"repeats", required_argument, NULL, 'R'},  {"latency", no_argument, NULL, 'l'},
        {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "C:b:e:f:i:n:w:d:o:r:a:IcD:SB:H:R:lh", lo, NULL)) != -1) {
        switch (ch) {
        case 'C': collist = optarg; break;
        case 'b':
            if (parse_size(optarg, &o.minb)) goto bad;
            break;
        case 'e':
            if (parse_size(optarg, &o.maxb)) goto bad;
            break;
        case 'f': o.factor = atof(optarg); break;
        case 'i':
            if (parse_size(optarg, &o.stepb)) goto bad;
            break;
        case 'n': o.iters = atoi(optarg); break;
        case 'w': o.warmup = atoi(optarg); break;
        case 'R': o.repeats = atoi(optarg); break;
        case 'l': o.latency = 1; break;
        case 'd': {
            int v = lookup(optarg, dt_names, 10);
            if (v < 0) goto bad;
            o.dt = (fc_datatype_t)v;
            break;
        }
        case 'o': {
            int v = lookup(optarg, op_names, 5);
            if (v < 0) goto bad;
            o.op = (fc_op_t)v;
            break;
        }
        case 'r': o.root = atoi(optarg); break;
        case 'a': algo = optarg; break;
        case 'I': o.inplace = 1; break;
        case 'c': o.check = 1; break;
        case 'S': o.stream = 1; break;
        case 'B': o.batch = atoi(optarg); break;
        case 'H': {
            const char *colon = strchr(optarg, ':');
            size_t k = colon ? (size_t)(colon - optarg) : strlen(optarg);
            if (k == 4 && !strncasecmp(optarg, "send", 4))
                o.host_side = 1;
            else if (k == 4 && !strncasecmp(optarg, "recv", 4))
                o.host_side = 2;
            else
                goto bad;
            if (colon && strcasecmp(colon + 1, "pinned"))
                goto bad;
            o.host_pinned = colon != NULL;
            break;
        }
        case 'D':
            if (!strcasecmp(optarg, "cuda"))
                o.cuda = 1;
            else if (strcasecmp(optarg, "host"))
                goto bad;
            break;
        case 1: o.csv = 1; break;
        case 2: o.json = 1; break;
        case 3: o.table = 1; break;
        case 4:
            o.table = 1;
            o.table_file = optarg;
            break;
        case 'h': fputs(usage, stdout); return 0;
        default: goto bad;
        }
    }
    if (o.iters < 1 || o.warmup < 0 || o.batch < 1 || o.repeats < 1 ||
        (o.factor <= 1 && !o.stepb) || o.minb > o.maxb)
        goto bad;
    if (o.batch > 1 && !o.stream) {
        fprintf(stderr, "fc_perf: -B (calls per synchronize) needs -S\n");
        return 2;
    }
    if (o.host_side && (!o.cuda || o.inplace || o.table)) {
        fprintf(stderr, "fc_perf: -H (a host buffer in mixed calls) needs -D cuda, and no -I "
                        "or --table\n");
        return 2;
    }
    if (o.stream && (!o.cuda || o.table)) {
        fprintf(stderr, "fc_perf: -S (stream-ordered calls) needs -D cuda and no --table\n");
        return 2;
    }
    if (o.table) {
        /* the seed's table: allreduce at its three sizes, whatever -C/-b/-e say */
        collist = "allreduce";
        o.minb = TABLE_MIN;
        o.maxb = TABLE_MAX;
        o.json = 0;
    }
    {
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", collist);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            if (!strcasecmp(tok, "all")) {
                for (int k = 0; k < NCOLL; k++)
                    o.colls[o.ncolls++] = k;
                continue;
            }
            int k = lookup(tok, coll_names, NCOLL);
            if (k < 0 && !strcasecmp(tok, "broadcast"))
                k = BCAST;
            if (k < 0) {
                fprintf(stderr, "fc_perf: unknown collective '%s'\n", tok);
                return 2;
            }
            if (o.ncolls < NCOLL)
                o.colls[o.ncolls++] = k;
        }
    }
    for (int k = 0; k < o.ncolls && o.stream; k++)
        if (o.colls[k] == ALLTOALL || o.colls[k] == BARRIER) {
            fprintf(stderr, "fc_perf: -S: %s has no stream-ordered twin\n", coll_names[o.colls[k]]);
            return 2;
        }
    if (algo) {
        /* before the first fabcoll call: settings are read once */
        char spec[512] = "";
        size_t off = 0;
        for (int k = 0; k < o.ncolls; k++)
            off += (size_t)snprintf(spec + off, sizeof(spec) - off, "%s%s:%s", k ? "," : "",
                                    coll_names[o.colls[k]], algo);
        setenv("FC_ALGO", spec, 1);
    }

    fc_comm_t comm;
    fc_result_t rc = fc_comm_init(&comm);
    if (rc != FC_SUCCESS) {
        fprintf(stderr, "fc_perf: %s\n", fc_last_error());
        return 1;
    }
    int rank = fc_comm_rank(comm), n = fc_comm_size(comm);
    if (o.root < 0 || o.root >= n)
        o.root = 0;
    fc_comm_attr_t attr;
    fc_comm_query(comm, &attr);
    size_t es = fc_datatype_size(o.dt);
    size_t bufb = o.maxb + 4096;
    char *sb, *rb;
    if (o.cuda) { /* the GPU first: buffers there need it */
        const char *why;
        if (gu_init(attr.local_rank, &why) != 0) {
            fprintf(stderr, "fc_perf: -D cuda: %s\n", why);
            return 1;
        }
        if (o.stream && !(gstream = gu_stream_create())) {
            fprintf(stderr, "fc_perf: -S: cannot create a CUDA stream\n");
            return 1;
        }
        hsb = malloc(bufb);
        hrb = malloc(bufb);
        hbytes = bufb;
    }
    /* -H: that side in pageable host memory (the copies to and from the
     * shadows go through CUDA's unified addressing either way) */
    sb = buf_new(&o, 1, bufb, 1);
    rb = buf_new(&o, 2, bufb, 0);
    if (!sb || !rb) {
        fprintf(stderr, "fc_perf: cannot allocate 2 x %zu bytes%s\n", bufb,
                o.cuda ? " of GPU memory" : "");
        return 1;
    }
    double *times = malloc(sizeof(double) * 4 * (size_t)o.repeats); /* measure's blk */
    if (!times) {
        fprintf(stderr, "fc_perf: out of memory\n");
        return 1;
    }
    if (o.table) {
        int trc = run_table(sb, rb, &o, comm, rank, n, &attr, times);
        free(times);
        free_buffers(&o, sb, rb);
        fc_comm_destroy(comm);
        return trc;
    }
    static const char *tiers[] = {"shm", "net", "rdma", "gdr"};
    long total_wrong = 0;
    char how[512], reps[32] = "";
    method_desc(&o, how, sizeof(how));
    if (o.repeats > 1)
        snprintf(reps, sizeof(reps), "%d x ", o.repeats);
    if (rank == 0 && !o.csv && !o.json)
        printf("# fc_perf: %d ranks on %d node(s), provider %s (tier %s), %s %s%s, %s buffers%s%s, "
               "%d warm-up and %s%d timed %s per size\n# time: %s\n",
               n, attr.nnodes, attr.provider, tiers[attr.tier & 3], dt_names[o.dt],
               op_names[o.op], o.inplace ? ", in place" : "",
               !o.cuda              ? "host"
               : o.host_side == 1 ? (o.host_pinned ? "pinned host send, GPU receive"
                                                   : "host send, GPU receive")
               : o.host_side == 2 ? (o.host_pinned ? "GPU send, pinned host receive"
                                                   : "GPU send, host receive")
                                  : "GPU",
               o.cuda ? (attr.hmem ? " (direct, gdr)" : " (staged)") : "",
               o.stream ? (o.batch > 1 ? ", stream-ordered calls (time per call of batches "
                                         "queued before a synchronize)"
                                       : ", stream-ordered calls")
                        : "",
               o.warmup, reps, o.iters, o.stream && o.batch > 1 ? "batches" : "calls", how);
    if (rank == 0 && o.csv)
        printf("collective,ranks,provider,size,count,type,op,root,time_us,min_us,avg_us,"
               "algbw_GBps,busbw_GBps,wrong,max_us\n");
    for (int ci = 0; ci < o.ncolls; ci++) {
        enum coll c = (enum coll)o.colls[ci];
        if (rank == 0 && !o.csv && !o.json) {
            printf("#\n# %s\n# %12s %12s %8s %6s %5s %11s", coll_names[c], "size(B)", "count",
                   "type", "redop", "root", o.latency ? "avg(us)" : "time(us)");
            if (o.latency)
                printf(" %11s %11s", "min(us)", "max(us)");
            printf(" %11s %11s %7s\n", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
        }
        for (size_t bytes = o.minb; bytes <= o.maxb;) {
            size_t count = bytes / es;
            if (c == ALLGATHER || c == REDUCE_SCATTER || c == ALLTOALL)
                count /= (size_t)n;
            if (c == BARRIER)
                count = 0;
            size_t real = c == ALLGATHER || c == REDUCE_SCATTER || c == ALLTOALL
                              ? count * (size_t)n * es
                              : count * es;
            struct timing tm;
            long wrong;
            if (measure(c, count, real, sb, rb, &o, comm, rank, n, times, &tm, &wrong))
                return 1;
            total_wrong += wrong;
            double algbw = tm.time > 0 ? (double)real / tm.time / 1e9 : 0;
            double busbw = algbw * bus_factor(c, n);
            if (rank == 0) {
                const char *rootstr = (c == BCAST || c == REDUCE) ? "" : "-";
                char rootbuf[16];
                snprintf(rootbuf, sizeof(rootbuf), "%d", o.root);
                if (*rootstr == '\0')
                    rootstr = rootbuf;
                const char *opstr = (c == ALLREDUCE || c == REDUCE || c == REDUCE_SCATTER)
                                        ? op_names[o.op]
                                        : "-";
                if (o.csv)
                    printf("%s,%d,%s,%zu,%zu,%s,%s,%s,%.3f,%.3f,%.3f,%.4f,%.4f,%ld,%.3f\n",
                           coll_names[c], n, attr.provider, real, count, dt_names[o.dt], opstr,
                           rootstr, tm.time * 1e6, tm.min * 1e6, tm.avg * 1e6, algbw, busbw,
                           wrong, tm.max * 1e6);
                else if (o.json)
                    printf("{\"collective\":\"%s\",\"ranks\":%d,\"provider\":\"%s\",\"size\":%zu,"
                           "\"count\":%zu,\"type\":\"%s\",\"op\":\"%s\",\"root\":\"%s\","
                           "\"method\":\"%s\",\"time_us\":%.3f,\"min_us\":%.3f,\"avg_us\":%.3f,"
                           "\"max_us\":%.3f,\"algbw\":%.4f,\"busbw\":%.4f,\"wrong\":%ld}\n",
                           coll_names[c], n, attr.provider, real, count, dt_names[o.dt], opstr,
                           rootstr, o.latency ? "osu" : "nccl-tests", tm.time * 1e6,
                           tm.min * 1e6, tm.avg * 1e6, tm.max * 1e6, algbw, busbw, wrong);
                else if (o.latency)
                    printf("  %12zu %12zu %8s %6s %5s %11.2f %11.2f %11.2f %11.3f %11.3f %7ld\n",
                           real, count, dt_names[o.dt], opstr, rootstr, tm.time * 1e6,
                           tm.min * 1e6, tm.max * 1e6, algbw, busbw, wrong);
                else
                    printf("  %12zu %12zu %8s %6s %5s %11.2f %11.3f %11.3f %7ld\n", real, count,
                           dt_names[o.dt], opstr, rootstr, tm.time * 1e6, algbw, busbw, wrong);
            }
            if (c == BARRIER)
                break;
            size_t next = o.stepb ? bytes + o.stepb : (size_t)((double)bytes * o.factor);
            if (next <= bytes)
                break;
            bytes = next;
        }
    }
    free(times);
    if (gstream)
        gu_stream_destroy(gstream);
    free_buffers(&o, sb, rb);
    fc_comm_destroy(comm);
    if (o.check && rank == 0 && !o.csv && !o.json)
        printf("# %s\n", total_wrong ? "WRONG RESULTS" : "all results correct");
    return total_wrong ? 1 : 0;
bad:
    fprintf(stderr, "fc_perf: bad arguments\n\n%s", usage);
    return 2;
}
