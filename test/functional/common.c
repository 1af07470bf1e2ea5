/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE
#include "common.h"

#include "gpu_util.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>
#include <time.h>

const fc_datatype_t ft_dtypes[10] = {FC_INT8,    FC_UINT8,    FC_INT32,   FC_UINT32,
                                     FC_INT64,   FC_UINT64,   FC_FLOAT16, FC_BFLOAT16,
                                     FC_FLOAT32, FC_FLOAT64};
const fc_op_t ft_ops[5] = {FC_SUM, FC_PROD, FC_MIN, FC_MAX, FC_AVG};

const char *ft_dt_name(fc_datatype_t dt)
{
    static const char *n[] = {"int8",    "uint8",    "int32",   "uint32",  "int64",
                              "uint64",  "float16",  "bfloat16", "float32", "float64",
                              "float8_e4m3", "float8_e5m2"};
    return (unsigned)dt < 12 ? n[dt] : "?";
}

const char *ft_op_name(fc_op_t op)
{
    static const char *n[] = {"sum", "prod", "min", "max", "avg"};
    return (unsigned)op < 5 ? n[op] : "?";
}

int ft_is_float(fc_datatype_t dt)
{
    return dt == FC_FLOAT16 || dt == FC_BFLOAT16 || dt == FC_FLOAT32 || dt == FC_FLOAT64 ||
           dt == FC_FLOAT8_E4M3 || dt == FC_FLOAT8_E5M2;
}

int ft_is_unsigned(fc_datatype_t dt)
{
    return dt == FC_UINT8 || dt == FC_UINT32 || dt == FC_UINT64;
}

double ft_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void ft_init(struct ft *t, const char *name)
{
    memset(t, 0, sizeof(*t));
    t->name = name;
    setvbuf(stdout, NULL, _IOLBF, 0);
    fc_result_t rc = fc_comm_init(&t->comm);
    if (rc != FC_SUCCESS) {
        fprintf(stderr, "%s: fc_comm_init failed: %s: %s\n", name, fc_strerror(rc),
                fc_last_error());
        exit(1);
    }
    t->rank = fc_comm_rank(t->comm);
    t->size = fc_comm_size(t->comm);
}

void ft_fail(struct ft *t, const char *file, int line, const char *fmt, ...)
{
    t->failures++;
    if (t->failures > 20)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: rank %d: FAIL %s:%d: %s\n", t->name ? t->name : "test", t->rank, file,
            line, msg);
}

int ft_skip(struct ft *t, const char *why)
{
    if (t->rank == 0)
        printf("%s: not run: %s\n", t->name, why);
    fc_comm_destroy(t->comm);
    return FT_SKIP;
}

int ft_memory(struct ft *t, const char *var, void **stream)
{
    const char *m = getenv(var);
    const int mem = m && !strcmp(m, "device") ? 1 : stream && m && !strcmp(m, "stream") ? 2 : 0;
    if (!mem)
        return 0;
    fc_comm_attr_t attr;
    FT_OK(t, fc_comm_query(t->comm, &attr));
    const char *why = NULL;
    if (gu_init(attr.local_rank, &why) != 0) {
        ft_skip(t, why);
        return -1;
    }
    if (mem == 2 && !(*stream = gu_stream_create())) {
        ft_skip(t, "no CUDA stream could be made");
        return -1;
    }
    return mem;
}

double ft_timeout(void)
{
    const char *lim = getenv("FC_TIMEOUT");
    return lim ? atof(lim) : 300;
}

fc_result_t ft_allreduce_peer_gone(struct ft *t, float *buf, size_t count, double *dt)
{
    const double limit = ft_timeout();
    double t0 = ft_now();
    fc_result_t rc = fc_allreduce(buf, buf, count, FC_FLOAT32, FC_SUM, t->comm);
    *dt = ft_now() - t0;
    FT_CHECK(t, rc == FC_ERR_PEER_FAILED || rc == FC_ERR_TIMEOUT,
             "got %s, expected peer failure or timeout", fc_strerror(rc));
    FT_CHECK(t, *dt < limit + 10, "took %.1f s (FC_TIMEOUT=%g)", *dt, limit);
    return rc;
}

int ft_finish(struct ft *t)
{
    fc_result_t rc = fc_comm_destroy(t->comm);
    if (rc != FC_SUCCESS)
        ft_fail(t, __FILE__, __LINE__, "fc_comm_destroy: %s", fc_last_error());
    if (t->failures)
        fprintf(stderr, "%s: rank %d: %d failure(s)\n", t->name, t->rank, t->failures);
    return t->failures ? 1 : 0;
}

/* binary16 and bfloat16 by hand (round to nearest even) */
static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t to_half(float f)
{
    _Float16 h = (_Float16)f;
    uint16_t u;
    memcpy(&u, &h, 2);
    return u;
}

static float from_half(uint16_t u)
{
    _Float16 h;
    memcpy(&h, &u, 2);
    return (float)h;
}

/* fp8 from the formats' definitions (OCP: e4m3 bias 7, no infinities,
 * largest 448; e5m2 bias 15, largest finite 57344), not from the library's
 * code: a code's value, and the nearest finite code (ties to even),
 * saturating */
double ft_fp8_value(uint8_t c, int e5m2)
{
    const int M = e5m2 ? 2 : 3, B = e5m2 ? 15 : 7;
    const int ex = (c & 0x7f) >> M, m = c & ((1 << M) - 1);
    if (e5m2 ? (c & 0x7f) > 0x7c : (c & 0x7f) == 0x7f)
        return NAN;
    if (e5m2 && (c & 0x7f) == 0x7c)
        return c & 0x80 ? -INFINITY : INFINITY;
    double v = ex ? ldexp(1.0 + m / (double)(1 << M), ex - B) : ldexp(m, 1 - B - M);
    return c & 0x80 ? -v : v;
}

uint8_t ft_fp8_code(double v, int e5m2)
{
    static double tab[2][128]; /* the finite codes' values, ascending */
    static int made[2];
    const int maxc = e5m2 ? 0x7b : 0x7e;
    if (!made[e5m2]) {
        for (int k = 0; k <= maxc; k++)
            tab[e5m2][k] = ft_fp8_value((uint8_t)k, e5m2);
        made[e5m2] = 1;
    }
    const uint8_t sign = signbit(v) ? 0x80 : 0;
    if (isnan(v))
        return (uint8_t)(sign | (e5m2 ? 0x7e : 0x7f));
    const double a = fabs(v);
    if (a >= tab[e5m2][maxc])
        return (uint8_t)(sign | maxc);
    int lo = 0, hi = maxc; /* tab[lo] <= a < tab[hi] */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (tab[e5m2][mid] <= a)
            lo = mid;
        else
            hi = mid;
    }
    const double dl = a - tab[e5m2][lo], dh = tab[e5m2][hi] - a;
    const int k = dl < dh ? lo : dh < dl ? hi : (lo & 1 ? hi : lo); /* ties to even */
    return (uint8_t)(sign | k);
}

void ft_store(void *buf, size_t i, fc_datatype_t dt, double v)
{
    int64_t iv = (int64_t)v;
    switch (dt) {
    case FC_INT8: ((int8_t *)buf)[i] = (int8_t)(uint8_t)iv; break;
    case FC_UINT8: ((uint8_t *)buf)[i] = (uint8_t)iv; break;
    case FC_INT32: ((int32_t *)buf)[i] = (int32_t)(uint32_t)iv; break;
    case FC_UINT32: ((uint32_t *)buf)[i] = (uint32_t)iv; break;
    case FC_INT64: ((int64_t *)buf)[i] = iv; break;
    case FC_UINT64: ((uint64_t *)buf)[i] = (uint64_t)iv; break;
    case FC_FLOAT16: ((uint16_t *)buf)[i] = to_half((float)v); break;
    case FC_BFLOAT16: ((uint16_t *)buf)[i] = to_bf16((float)v); break;
    case FC_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case FC_FLOAT64: ((double *)buf)[i] = v; break;
    case FC_FLOAT8_E4M3: ((uint8_t *)buf)[i] = ft_fp8_code(v, 0); break;
    case FC_FLOAT8_E5M2: ((uint8_t *)buf)[i] = ft_fp8_code(v, 1); break;
    }
}

double ft_load(const void *buf, size_t i, fc_datatype_t dt)
{
    switch (dt) {
    case FC_INT8: return ((const int8_t *)buf)[i];
    case FC_UINT8: return ((const uint8_t *)buf)[i];
    case FC_INT32: return ((const int32_t *)buf)[i];
    case FC_UINT32: return ((const uint32_t *)buf)[i];
    case FC_INT64: return (double)((const int64_t *)buf)[i];
    case FC_UINT64: return (double)((const uint64_t *)buf)[i];
    case FC_FLOAT16: return from_half(((const uint16_t *)buf)[i]);
    case FC_BFLOAT16: return from_bf16(((const uint16_t *)buf)[i]);
    case FC_FLOAT32: return ((const float *)buf)[i];
    case FC_FLOAT64: return ((const double *)buf)[i];
    case FC_FLOAT8_E4M3: return ft_fp8_value(((const uint8_t *)buf)[i], 0);
    case FC_FLOAT8_E5M2: return ft_fp8_value(((const uint8_t *)buf)[i], 1);
    }
    return 0;
}

double ft_input(fc_op_t op, fc_datatype_t dt, int r, size_t i)
{
    switch (op) {
    case FC_SUM:
    case FC_AVG: return (double)((r + (int)(i % 5)) % 5 + 1); /* 1..5 */
    case FC_PROD: return ((size_t)r + i) % 3 == 0 ? 2.0 : 1.0;
    default: {
        int v = (r * 7 + (int)(i % 11)) % 11;
        return ft_is_unsigned(dt) ? v : v - 5;
    }
    }
}

void ft_expected(void *out, size_t i, fc_op_t op, fc_datatype_t dt, int n)
{
    double acc = ft_input(op, dt, 0, i);
    for (int r = 1; r < n; r++) {
        double v = ft_input(op, dt, r, i);
        switch (op) {
        case FC_SUM:
        case FC_AVG: acc += v; break;
        case FC_PROD: acc *= v; break;
        case FC_MIN: acc = v < acc ? v : acc; break;
        case FC_MAX: acc = v > acc ? v : acc; break;
        }
    }
    if (op != FC_AVG) {
        ft_store(out, i, dt, acc); /* integers wrap here, as the library's do */
        return;
    }
    /* AVG: the (wrapped) sum, divided once in the type's arithmetic */
    switch (dt) {
    case FC_FLOAT64: ft_store(out, i, dt, acc / n); break;
    case FC_FLOAT32:
    case FC_FLOAT16:
    case FC_BFLOAT16:
    case FC_FLOAT8_E4M3:
    case FC_FLOAT8_E5M2: ft_store(out, i, dt, (double)((float)acc / (float)n)); break;
    default: {
        char tmp[8];
        ft_store(tmp, 0, dt, acc);
        double wrapped = ft_load(tmp, 0, dt);
        ft_store(out, i, dt, (double)((int64_t)wrapped / n));
        break;
    }
    }
}

int ft_same(const void *got, const void *exp, size_t i, fc_datatype_t dt)
{
    size_t es = fc_datatype_size(dt);
    if (memcmp((const char *)got + i * es, (const char *)exp + i * es, es) == 0)
        return 1;
    if (ft_is_float(dt)) {
        double a = ft_load(got, i, dt), b = ft_load(exp, i, dt);
        return isnan(a) && isnan(b);
    }
    return 0;
}

size_t ft_count(int idx, int n)
{
    switch (idx) {
    case 0: return 0;
    case 1: return 1;
    case 2: return n > 1 ? (size_t)n - 1 : 3;
    case 3: return 7 * (size_t)n + 3;
    default: return 100003;
    }
}
