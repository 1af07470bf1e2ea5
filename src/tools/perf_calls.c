/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_perf's calls: one call of a collective (plain, or its stream-ordered
 * twin), and one checked call whose inputs tell every rank and element
 * apart, with every element of the result compared with its closed form.
 * Nothing here times anything (perf_time.c does).
 */
#define _GNU_SOURCE
#include "perf.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_util.h"

const char *const perf_coll_names[NCOLL] = {
    "allreduce", "bcast",  "reduce",  "allgather",  "reduce_scatter", "alltoall",
    "barrier",   "gather", "scatter", "allgatherv", "alltoallv"};
const char *const perf_dt_names[PERF_NDT] = {
    "int8",   "uint8",   "int32",    "uint32",  "int64",       "uint64",
    "float16", "bfloat16", "float32", "float64", "float8_e4m3", "float8_e5m2"};
const char *const perf_op_names[5] = {"sum", "prod", "min", "max", "avg"};

/* one rank's input at element i (small integers: exact in every type) */
static double input(int rank, size_t i)
{
    return (double)((rank + (int)(i % 3)) % 3 + 1);
}

/* fp8, written from the formats' definitions (OCP: e4m3 bias 7 with no
 * infinities, e5m2 bias 15), independently of the library's kernels */
static double fp8_value(uint8_t c, int e5m2)
{
    const int M = e5m2 ? 2 : 3, B = e5m2 ? 15 : 7;
    const int ex = (c & 0x7f) >> M, m = c & ((1 << M) - 1);
    double v = ex ? ldexp(1.0 + m / (double)(1 << M), ex - B) : ldexp(m, 1 - B - M);
    return c & 0x80 ? -v : v;
}

/* the nearest finite code (ties to the even code): only exact for what
 * the checks store, which are small integers and their rounding */
static uint8_t fp8_code(double v, int e5m2)
{
    static int16_t cache[2][256];
    static int cached[2];
    const int small = v == floor(v) && fabs(v) < 128;
    if (!cached[e5m2]) {
        for (int k = 0; k < 256; k++)
            cache[e5m2][k] = -1;
        cached[e5m2] = 1;
    }
    if (small && cache[e5m2][(int)v + 128] >= 0)
        return (uint8_t)cache[e5m2][(int)v + 128];
    const int maxc = e5m2 ? 0x7b : 0x7e;
    int best = 0;
    for (int k = 1; k <= maxc; k++) {
        double d = fabs(fp8_value((uint8_t)k, e5m2) - fabs(v)),
               db = fabs(fp8_value((uint8_t)best, e5m2) - fabs(v));
        if (d < db || (d == db && !(k & 1)))
            best = k;
    }
    uint8_t c = (uint8_t)(best | (v < 0 ? 0x80 : 0));
    if (small)
        cache[e5m2][(int)v + 128] = c;
    return c;
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
    case FC_FLOAT8_E4M3: ((uint8_t *)b)[i] = fp8_code(v, 0); break;
    case FC_FLOAT8_E5M2: ((uint8_t *)b)[i] = fp8_code(v, 1); break;
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
    case FC_FLOAT8_E4M3: return fp8_value(((const uint8_t *)b)[i], 0);
    case FC_FLOAT8_E5M2: return fp8_value(((const uint8_t *)b)[i], 1);
    }
    return 0;
}

fc_result_t perf_op_make(const struct perf_opts *o, fc_comm_t comm)
{
    perf_op = o->op;
    if (!o->premul)
        return FC_SUCCESS;
    uint64_t one; /* 1 in the datatype */
    store(&one, 0, o->dt, 1.0);
    return fc_op_create_premulsum(&perf_op, &one, o->dt, comm);
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

void *perf_stream;
fc_op_t perf_op = FC_SUM;

static fc_result_t run_call(enum perf_coll c, void *sb, void *rb, size_t count,
                            const struct perf_opts *o, fc_comm_t comm, int rank, int n);

/* One call of collective c: the plain call, or with -S o->batch of its
 * stream-ordered twin on perf_stream followed by a stream synchronize. */
fc_result_t perf_run_once(enum perf_coll c, void *sb, void *rb, size_t count,
                          const struct perf_opts *o, fc_comm_t comm, int rank, int n)
{
    fc_result_t rc = FC_SUCCESS;
    for (int b = 0; b < (o->stream ? o->batch : 1) && rc == FC_SUCCESS; b++)
        rc = run_call(c, sb, rb, count, o, comm, rank, n);
    if (rc == FC_SUCCESS && o->stream && gu_stream_sync(perf_stream) != 0)
        rc = FC_ERR_CUDA;
    return rc;
}

/* The v-collectives' counts and displacements: count per rank, packed. */
static size_t *vcounts, *vdispls;
static int vn;
static size_t vcount = (size_t)-1;

static int v_arrays(size_t count, int n)
{
    if (n != vn) {
        free(vcounts);
        free(vdispls);
        vcounts = malloc(sizeof(size_t) * (size_t)n);
        vdispls = malloc(sizeof(size_t) * (size_t)n);
        if (!vcounts || !vdispls)
            return -1;
        vn = n;
        vcount = (size_t)-1;
    }
    if (count != vcount)
        for (int j = 0; j < n; j++) {
            vcounts[j] = count;
            vdispls[j] = (size_t)j * count;
        }
    vcount = count;
    return 0;
}

static fc_result_t run_call(enum perf_coll c, void *sb, void *rb, size_t count,
                            const struct perf_opts *o, fc_comm_t comm, int rank, int n)
{
    if ((c == ALLGATHERV || c == ALLTOALLV) && v_arrays(count, n))
        return FC_ERR_NO_MEMORY;
    void *s = o->inplace ? rb : sb, *st = perf_stream;
    const size_t mine = (size_t)rank * count * fc_datatype_size(o->dt);
    void *ag_send = o->inplace ? (char *)rb + mine : sb; /* allgather's block */
    void *rs_recv = o->inplace ? (char *)sb + mine : rb; /* reduce_scatter's */
    void *root_send = rank == o->root ? s : NULL;
    const size_t rootblk = (size_t)o->root * count * fc_datatype_size(o->dt);
    /* gather and scatter in place at the root: its block of the n-block buffer */
    void *g_send = o->inplace && rank == o->root ? (char *)rb + rootblk : sb;
    void *g_recv = rank == o->root ? rb : NULL;
    void *sc_recv = o->inplace && rank == o->root ? (char *)sb + rootblk : rb;
    void *sc_send = rank == o->root ? sb : NULL;
    fc_result_t rc;
    switch (c) {
    case ALLREDUCE:
        rc = o->stream ? fc_allreduce_stream(s, rb, count, o->dt, perf_op, comm, st)
                       : fc_allreduce(s, rb, count, o->dt, perf_op, comm);
        break;
    case BCAST:
        rc = o->stream ? fc_broadcast_stream(root_send, rb, count, o->dt, o->root, comm, st)
                       : fc_broadcast(root_send, rb, count, o->dt, o->root, comm);
        break;
    case REDUCE:
        rc = o->stream ? fc_reduce_stream(s, rb, count, o->dt, perf_op, o->root, comm, st)
                       : fc_reduce(s, rb, count, o->dt, perf_op, o->root, comm);
        break;
    case ALLGATHER:
        rc = o->stream ? fc_allgather_stream(ag_send, rb, count, o->dt, comm, st)
                       : fc_allgather(ag_send, rb, count, o->dt, comm);
        break;
    case REDUCE_SCATTER:
        rc = o->stream ? fc_reduce_scatter_stream(sb, rs_recv, count, o->dt, perf_op, comm, st)
                       : fc_reduce_scatter(sb, rs_recv, count, o->dt, perf_op, comm);
        break;
    case ALLTOALL: return fc_alltoall(s, rb, count, o->dt, comm); /* -S refuses these two */
    case BARRIER: return fc_barrier(comm);
    case GATHER:
        rc = o->stream ? fc_gather_stream(g_send, g_recv, count, o->dt, o->root, comm, st)
                       : fc_gather(g_send, g_recv, count, o->dt, o->root, comm);
        break;
    case SCATTER:
        rc = o->stream ? fc_scatter_stream(sc_send, sc_recv, count, o->dt, o->root, comm, st)
                       : fc_scatter(sc_send, sc_recv, count, o->dt, o->root, comm);
        break;
    case ALLGATHERV:
        rc = o->stream ? fc_allgatherv_stream(ag_send, rb, count, vcounts, vdispls, o->dt, comm,
                                              st)
                       : fc_allgatherv(ag_send, rb, count, vcounts, vdispls, o->dt, comm);
        break;
    case ALLTOALLV: /* no in-place form: -i is refused for it */
        rc = o->stream ? fc_alltoallv_stream(sb, rb, vcounts, vdispls, vcounts, vdispls, o->dt,
                                             comm, st)
                       : fc_alltoallv(sb, rb, vcounts, vdispls, vcounts, vdispls, o->dt, comm);
        break;
    default: return FC_ERR_INVALID_ARGUMENT;
    }
    return rc;
    (void)n;
}

char *perf_host_send, *perf_host_recv;
size_t perf_host_bytes;

/* Fills inputs, runs once, counts wrong elements on this rank. With
 * device buffers the inputs are written on the host and copied in, and the
 * results copied out, around the same call. */
static long check_host(enum perf_coll c, char *sb, char *rb, size_t count,
                       const struct perf_opts *o, fc_comm_t comm, int rank, int n);

long perf_check_once(enum perf_coll c, char *sb, char *rb, size_t count, const struct perf_opts *o,
                     fc_comm_t comm, int rank, int n)
{
    if (!o->cuda)
        return check_host(c, sb, rb, count, o, comm, rank, n);
    /* run on the host shadows to fill inputs and compute the check, with
     * the collective itself on the device: fill, copy in, run, copy out */
    struct perf_opts ho = *o;
    ho.cuda = 0;
    ho.stream = 0;
    ho.check = 2; /* fill only */
    check_host(c, perf_host_send, perf_host_recv, count, &ho, comm, rank, n);
    gu_to_device(sb, perf_host_send, perf_host_bytes);
    gu_to_device(rb, perf_host_recv, perf_host_bytes);
    struct perf_opts one = *o;
    one.batch = 1; /* in place, a batch would reduce the result again */
    if (perf_run_once(c, sb, rb, count, &one, comm, rank, n) != FC_SUCCESS)
        return (long)count + 1;
    gu_to_host(perf_host_send, sb, perf_host_bytes);
    gu_to_host(perf_host_recv, rb, perf_host_bytes);
    ho.check = 3; /* verify only */
    return check_host(c, perf_host_send, perf_host_recv, count, &ho, comm, rank, n);
}

static long check_host(enum perf_coll c, char *sb, char *rb, size_t count,
                       const struct perf_opts *o, fc_comm_t comm, int rank, int n)
{
    size_t es = fc_datatype_size(o->dt);
    const int root = rank == o->root;
    const int a2a = c == ALLTOALL || c == ALLTOALLV, ag = c == ALLGATHER || c == ALLGATHERV;
    size_t ns = count, nr = count;
    if (ag || c == GATHER)
        nr = count * (size_t)n;
    if (c == REDUCE_SCATTER || a2a || c == SCATTER)
        ns = count * (size_t)n;
    if (a2a)
        nr = ns;
    char *src = sb;
    if (o->inplace)
        src = ag ? rb + (size_t)rank * count * es
              : c == REDUCE_SCATTER || c == SCATTER ? sb
              : c == GATHER ? (root ? rb + (size_t)o->root * count * es : sb)
                            : rb;
    if (o->check != 3 && (c != SCATTER || root))
        for (size_t i = 0; i < ns; i++)
            store(src, i, o->dt,
                  a2a || c == SCATTER ? (double)((rank * 7 + (int)i) % 100)
                                      : input(c == BCAST ? o->root : rank, i));
    if (o->check == 2)
        return 0;
    if (o->check != 3 && perf_run_once(c, sb, rb, count, o, comm, rank, n) != FC_SUCCESS)
        return (long)nr + 1;
    const char *res = rb;
    if (c == REDUCE_SCATTER && o->inplace)
        res = sb + (size_t)rank * count * es;
    if (c == SCATTER && o->inplace && root)
        res = sb + (size_t)o->root * count * es;
    if ((c == REDUCE || c == GATHER) && !root)
        return 0;
    if (c == BARRIER)
        return 0;
    long wrong = 0;
    size_t checkn = c == REDUCE_SCATTER || c == SCATTER ? count : nr;
    for (size_t i = 0; i < checkn; i++) {
        double e;
        switch (c) {
        case ALLREDUCE:
        case REDUCE: e = reduced(o->op, n, i); break;
        case REDUCE_SCATTER: e = reduced(o->op, n, (size_t)rank * count + i); break;
        case BCAST: e = input(o->root, i); break;
        case ALLGATHER:
        case ALLGATHERV:
        case GATHER: e = input((int)(i / count), i % count); break;
        case SCATTER: e = (double)((o->root * 7 + (int)((size_t)rank * count + i)) % 100); break;
        case ALLTOALLV:
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
        const int fp8 = o->dt == FC_FLOAT8_E4M3 || o->dt == FC_FLOAT8_E5M2;
        if (fp8 && !float_avg) {
            /* what the format holds of e, and a reduction's rounding of
             * each of its n - 1 steps, half an ulp each */
            const double ulp = o->dt == FC_FLOAT8_E4M3 ? 0x1p-3 : 0x1p-2;
            e = fp8_value(fp8_code(e, o->dt == FC_FLOAT8_E5M2), o->dt == FC_FLOAT8_E5M2);
            const int steps = c == ALLREDUCE || c == REDUCE || c == REDUCE_SCATTER ? n - 1 : 0;
            if (fabs(g - e) > steps * ulp * fabs(e))
                wrong++;
        } else if (float_avg) {
            double exact = 0;
            for (int r = 0; r < n; r++)
                exact += input(r, c == REDUCE_SCATTER ? (size_t)rank * count + i : i);
            e = exact / n;
            if (fabs(g - e) > (fp8 ? n * 0x1p-2 : 1e-2) * fabs(e))
                wrong++;
        } else if (g != e) {
            wrong++;
        }
    }
    return wrong;
}
