/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests for src/reduce.c: every (datatype, op) kernel in its three
 * aliasing forms against a scalar reference written independently here,
 * the fp16/bf16 conversions (exhaustive and random, against GCC's _Float16
 * and a reference bf16 rounding written from the IEEE definition), special
 * values, integer wraparound, the final AVG scaling and invalid arguments.
 *
 * The reference deliberately avoids the library's tricks:
 *  - integers: exact arithmetic in __int128, then an explicit reduction
 *    modulo 2^bits;
 *  - fp32: computed in double and rounded once to float. For + and * of two
 *    floats that double rounding is innocuous (53 >= 2 * 24 + 2), so it
 *    equals the correctly rounded fp32 result;
 *  - fp16: _Float16 (GCC's conversions, soft-float in libgcc) for both
 *    directions, or a double-arithmetic version where there is none;
 *  - bf16: nearest of the two neighbouring bf16 values, decided by comparing
 *    distances in double, ties to the even one.
 * Loops over many values count mismatches and assert once (a Criterion
 * assertion per value would dominate the run time).
 */
#include <criterion/criterion.h>

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "reduce.h"

#define NELEM 37 /* odd, not a multiple of any vector width: tails run */
#define NGUARD 4 /* elements past the end that must stay untouched */

static const fc_datatype_t all_dts[] = {
    FC_INT8,   FC_UINT8,   FC_INT32,    FC_UINT32,  FC_INT64,
    FC_UINT64, FC_FLOAT16, FC_BFLOAT16, FC_FLOAT32, FC_FLOAT64,
};
static const fc_op_t all_ops[] = {FC_SUM, FC_PROD, FC_MIN, FC_MAX, FC_AVG};

static size_t dt_size(fc_datatype_t dt)
{
    switch (dt) {
    case FC_INT8:
    case FC_UINT8:
    case FC_FLOAT8_E4M3: /* fp8: test_fp8.c */
    case FC_FLOAT8_E5M2: return 1;
    case FC_FLOAT16:
    case FC_BFLOAT16: return 2;
    case FC_INT32:
    case FC_UINT32:
    case FC_FLOAT32: return 4;
    case FC_INT64:
    case FC_UINT64:
    case FC_FLOAT64: return 8;
    }
    return 0;
}

static int dt_is_int(fc_datatype_t dt)
{
    return dt <= FC_UINT64;
}

static int dt_int_bits(fc_datatype_t dt)
{
    return (int)dt_size(dt) * 8;
}

static int dt_int_signed(fc_datatype_t dt)
{
    return dt == FC_INT8 || dt == FC_INT32 || dt == FC_INT64;
}

/* ---- small helpers ------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float bitsf(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint64_t dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    return u;
}

static double bitsd(uint64_t u)
{
    double d;
    memcpy(&d, &u, 8);
    return d;
}

static int h_isnan(uint16_t h)
{
    return (h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0;
}

static int bf_isnan(uint16_t h)
{
    return (h & 0x7f80u) == 0x7f80u && (h & 0x007fu) != 0;
}

/* Reference fp16 conversions through the compiler's _Float16 where it has
 * one (GCC >= 12 on x86-64); otherwise (e.g. clang 14 on x86-64) from the
 * definition of the format, in double arithmetic. */
#if defined(__FLT16_MAX__) && !defined(TEST_REDUCE_NO_FLOAT16)
static float ref_h2f(uint16_t h)
{
    _Float16 v;
    memcpy(&v, &h, 2);
    return (float)v;
}

static uint16_t ref_f2h(float f)
{
    _Float16 v = (_Float16)f;
    uint16_t h;
    memcpy(&h, &v, 2);
    return h;
}
#else
static float ref_h2f(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v;
    if (e == 0x1f)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp(m, -24);
    else
        v = ldexp(1024 + m, e - 25);
    return (float)((h & 0x8000) ? -v : v);
}

static uint16_t ref_f2h(float f)
{
    uint16_t sign = signbit(f) ? 0x8000 : 0;
    double a = fabs((double)f);
    if (isnan(f))
        return sign | 0x7e00;
    if (a >= 65520.0) /* at or beyond the tie between 65504 and 2^16 */
        return sign | 0x7c00;
    int e;
    frexp(a, &e);                       /* a in [2^(e-1), 2^e) */
    int q = e - 1 < -14 ? -24 : e - 11; /* exponent of the quantum */
    double r = nearbyint(ldexp(a, -q)); /* ties to even (default mode) */
    double v = ldexp(r, q);
    if (v < 0x1p-14)
        return sign | (uint16_t)r; /* subnormal (or zero) */
    frexp(v, &e);
    int m = (int)(ldexp(v, 11 - e)) - 1024;
    return sign | (uint16_t)(((e - 1 + 15) << 10) | m);
}
#endif

/* Reference bf16 conversions. bf16 -> fp32 is exact by definition. */
static float ref_bf2f(uint16_t h)
{
    return bitsf((uint32_t)h << 16);
}

/* fp32 -> bf16 from the definition of round-to-nearest-even: pick the closer
 * of the two bf16 neighbours (the one towards zero and the one away from
 * it, where "one past the largest finite" is inf and counts as 2^128),
 * the even one on a tie. NaN gives a quiet NaN (callers compare NaN-ness). */
static uint16_t ref_f2bf(float f)
{
    if (isnan(f))
        return 0x7fc0;
    uint32_t u = fbits(f);
    uint32_t lo = u & 0xffff0000u;
    if (lo == u)
        return (uint16_t)(u >> 16);
    uint32_t hi = lo + 0x10000u; /* same sign, one bf16 ulp further out */
    double dl = fabs((double)bitsf(lo));
    double dh = ((hi & 0x7fffffffu) == 0x7f800000u) ? ldexp(1.0, 128) : fabs((double)bitsf(hi));
    double df = fabs((double)f);
    double el = df - dl, eh = dh - df;
    if (el < eh)
        return (uint16_t)(lo >> 16);
    if (eh < el)
        return (uint16_t)(hi >> 16);
    return (uint16_t)(((lo >> 16) & 1u) ? hi >> 16 : lo >> 16);
}

/* ---- generic element access for the reference --------------------------- */

static __int128 get_int(fc_datatype_t dt, const void *buf, size_t i)
{
    switch (dt) {
    case FC_INT8: return ((const int8_t *)buf)[i];
    case FC_UINT8: return ((const uint8_t *)buf)[i];
    case FC_INT32: return ((const int32_t *)buf)[i];
    case FC_UINT32: return ((const uint32_t *)buf)[i];
    case FC_INT64: return ((const int64_t *)buf)[i];
    case FC_UINT64: return ((const uint64_t *)buf)[i];
    default: return 0;
    }
}

/* Stores v reduced modulo 2^bits; the value is formed explicitly (no
 * reliance on implementation-defined narrowing conversions). */
static void put_int(fc_datatype_t dt, void *buf, size_t i, __int128 v)
{
    int bits = dt_int_bits(dt);
    unsigned __int128 mod = (unsigned __int128)1 << bits;
    unsigned __int128 u = (unsigned __int128)v & (mod - 1);
    switch (dt) {
    case FC_INT8: {
        int v8 = (u >= 0x80) ? (int)u - 0x100 : (int)u;
        ((int8_t *)buf)[i] = (int8_t)v8;
        break;
    }
    case FC_UINT8: ((uint8_t *)buf)[i] = (uint8_t)u; break;
    case FC_INT32: {
        int64_t v32 = (u >= 0x80000000u) ? (int64_t)u - 0x100000000ll : (int64_t)u;
        ((int32_t *)buf)[i] = (int32_t)v32;
        break;
    }
    case FC_UINT32: ((uint32_t *)buf)[i] = (uint32_t)u; break;
    case FC_INT64: {
        __int128 s = (u >> 63) ? (__int128)u - (__int128)mod : (__int128)u;
        ((int64_t *)buf)[i] = (int64_t)s;
        break;
    }
    case FC_UINT64: ((uint64_t *)buf)[i] = (uint64_t)u; break;
    default: break;
    }
}

/* Reference MIN/MAX as documented in reduce.c: NaN wins, -0 < +0. */
static double ref_min(double x, double y)
{
    if (isnan(x) || isnan(y))
        return NAN;
    if (x == 0 && y == 0)
        return (signbit(x) || signbit(y)) ? -0.0 : 0.0;
    return x < y ? x : y;
}

static double ref_max(double x, double y)
{
    if (isnan(x) || isnan(y))
        return NAN;
    if (x == 0 && y == 0)
        return (signbit(x) && signbit(y)) ? -0.0 : 0.0;
    return x > y ? x : y;
}

/* Exact for the float-derived operands used here (see the top comment). */
static double ref_fop(fc_op_t op, double x, double y)
{
    switch (op) {
    case FC_SUM:
    case FC_AVG: return x + y;
    case FC_PROD: return x * y;
    case FC_MIN: return ref_min(x, y);
    case FC_MAX: return ref_max(x, y);
    }
    return NAN;
}

/* out[i] = a[i] op b[i] for one element, by the reference. */
static void ref_elem(fc_datatype_t dt, fc_op_t op, const void *a, const void *b, void *out,
                     size_t i)
{
    if (dt_is_int(dt)) {
        __int128 x = get_int(dt, a, i), y = get_int(dt, b, i), r = 0;
        switch (op) {
        case FC_SUM:
        case FC_AVG: r = x + y; break;
        case FC_PROD:
            /* uint64 * uint64 needs the unsigned 128-bit product. */
            r = (__int128)((unsigned __int128)x * (unsigned __int128)y);
            break;
        case FC_MIN: r = x < y ? x : y; break;
        case FC_MAX: r = x > y ? x : y; break;
        }
        put_int(dt, out, i, r);
        return;
    }
    switch (dt) {
    case FC_FLOAT16: {
        /* fp32 computation, one RNE rounding to half by _Float16. */
        float x = ref_h2f(((const uint16_t *)a)[i]);
        float y = ref_h2f(((const uint16_t *)b)[i]);
        float r = (float)ref_fop(op, x, y);
        ((uint16_t *)out)[i] = isnan(r) ? 0x7e00 : ref_f2h(r);
        break;
    }
    case FC_BFLOAT16: {
        float x = ref_bf2f(((const uint16_t *)a)[i]);
        float y = ref_bf2f(((const uint16_t *)b)[i]);
        float r = (float)ref_fop(op, x, y);
        ((uint16_t *)out)[i] = ref_f2bf(r);
        break;
    }
    case FC_FLOAT32: {
        float x = ((const float *)a)[i], y = ((const float *)b)[i];
        ((float *)out)[i] = (float)ref_fop(op, x, y);
        break;
    }
    case FC_FLOAT64: {
        double x = ((const double *)a)[i], y = ((const double *)b)[i];
        double r;
        if (op == FC_SUM || op == FC_AVG)
            r = x + y;
        else if (op == FC_PROD)
            r = x * y;
        else
            r = ref_fop(op, x, y);
        ((double *)out)[i] = r;
        break;
    }
    default: break;
    }
}

/* Element equality: bit-exact, except that a NaN reference only requires a
 * NaN result. */
static int elem_eq(fc_datatype_t dt, const void *got, const void *want, size_t i)
{
    switch (dt) {
    case FC_FLOAT16: {
        uint16_t g = ((const uint16_t *)got)[i], w = ((const uint16_t *)want)[i];
        return h_isnan(w) ? h_isnan(g) : g == w;
    }
    case FC_BFLOAT16: {
        uint16_t g = ((const uint16_t *)got)[i], w = ((const uint16_t *)want)[i];
        return bf_isnan(w) ? bf_isnan(g) : g == w;
    }
    case FC_FLOAT32: {
        float g = ((const float *)got)[i], w = ((const float *)want)[i];
        return isnan(w) ? isnan(g) : fbits(g) == fbits(w);
    }
    case FC_FLOAT64: {
        double g = ((const double *)got)[i], w = ((const double *)want)[i];
        return isnan(w) ? isnan(g) : dbits(g) == dbits(w);
    }
    default: {
        size_t es = dt_size(dt);
        return memcmp((const char *)got + i * es, (const char *)want + i * es, es) == 0;
    }
    }
}

/* ---- test data ----------------------------------------------------------- */

/* Fills a and b (NELEM elements) with pairs that hit the edge cases first,
 * then random values: full-range bit patterns and small magnitudes. */
static void fill_inputs(fc_datatype_t dt, void *a, void *b, uint64_t seed)
{
    uint64_t s = seed * 0x100000001b3ull + (uint64_t)dt;
    size_t i = 0;

    if (dt_is_int(dt)) {
        int bits = dt_int_bits(dt);
        __int128 lo = dt_int_signed(dt) ? -((__int128)1 << (bits - 1)) : 0;
        __int128 hi =
            dt_int_signed(dt) ? ((__int128)1 << (bits - 1)) - 1 : ((__int128)1 << bits) - 1;
        const __int128 pairs[][2] = {
            {hi, 1},     {lo, -1}, {hi, hi},   {lo, lo},       {lo, hi},
            {hi, lo},    {0, -1},  {-1, 0},    {0, 0},         {lo + 1, -2},
            {hi - 1, 3}, {16, 16}, {-128, -1}, {65536, 65536}, {-7, 7},
        };
        for (; i < sizeof pairs / sizeof pairs[0]; i++) {
            put_int(dt, a, i, pairs[i][0]);
            put_int(dt, b, i, pairs[i][1]);
        }
        for (; i < NELEM; i++) {
            uint64_t r1 = rng_next(&s), r2 = rng_next(&s);
            if (i & 1) { /* small signed values */
                r1 = (uint64_t)((int64_t)(r1 % 201) - 100);
                r2 = (uint64_t)((int64_t)(r2 % 201) - 100);
            }
            put_int(dt, a, i, (__int128)(int64_t)r1);
            put_int(dt, b, i, (__int128)(int64_t)r2);
        }
        return;
    }

    /* Floating types: specials as doubles, converted per type below. */
    const double inf = INFINITY;
    const double pairs[][2] = {
        {inf, -inf},         {inf, 0.0},         {NAN, 1.0},           {1.0, NAN},
        {-0.0, 0.0},         {0.0, -0.0},        {-0.0, -0.0},         {inf, 1.0},
        {-inf, 1.0},         {NAN, NAN},         {1.0, 1.0},           {-2.5, 3.25},
        {65504.0, 65504.0},  {2048.0, 1.0},      {2048.0, 3.0},        {0x1p-24, 0x1p-25},
        {0x1p-14, -0x1p-24}, {FLT_MAX, FLT_MAX}, {0x1p-149, 0x1p-149}, {DBL_MAX, DBL_MAX},
    };
    for (; i < sizeof pairs / sizeof pairs[0]; i++) {
        for (int k = 0; k < 2; k++) {
            void *buf = k ? b : a;
            double v = pairs[i][k];
            switch (dt) {
            case FC_FLOAT16: ((uint16_t *)buf)[i] = isnan(v) ? 0x7e00 : ref_f2h((float)v); break;
            case FC_BFLOAT16: ((uint16_t *)buf)[i] = ref_f2bf((float)v); break;
            case FC_FLOAT32: ((float *)buf)[i] = (float)v; break;
            case FC_FLOAT64: ((double *)buf)[i] = v; break;
            default: break;
            }
        }
    }
    for (; i < NELEM; i++) {
        for (int k = 0; k < 2; k++) {
            void *buf = k ? b : a;
            uint64_t r = rng_next(&s);
            int bitpattern = (i % 3) == 0; /* any value, NaNs included */
            double v = ((double)(r >> 11) * 0x1p-53 - 0.5) * 200.0;
            switch (dt) {
            case FC_FLOAT16:
            case FC_BFLOAT16:
                ((uint16_t *)buf)[i] =
                    bitpattern ? (uint16_t)r
                               : (dt == FC_FLOAT16 ? ref_f2h((float)v) : ref_f2bf((float)v));
                break;
            case FC_FLOAT32: ((float *)buf)[i] = bitpattern ? bitsf((uint32_t)r) : (float)v; break;
            case FC_FLOAT64: ((double *)buf)[i] = bitpattern ? bitsd(r) : v; break;
            default: break;
            }
        }
    }
}

/* ---- the kernel matrix --------------------------------------------------- */

enum { ALIAS_NONE, ALIAS_A, ALIAS_B };
static const char *const alias_names[] = {"dst distinct", "dst == a", "dst == b"};

/* Runs kernel (dt, op) on n elements in the given aliasing form and checks
 * every element against the reference and the guard past the end. */
static void check_kernel(fc_datatype_t dt, fc_op_t op, int alias, size_t n, uint64_t seed)
{
    const size_t es = dt_size(dt);
    /* uint64_t storage keeps every element type aligned. */
    uint64_t a[NELEM + NGUARD], b[NELEM + NGUARD], want[NELEM + NGUARD], dst[NELEM + NGUARD];

    cr_assert(n <= NELEM);
    reduce_fn fn = reduce_fn_get(dt, op);
    cr_assert_not_null(fn, "no kernel for %s/%s", reduce_dt_name((int)dt), reduce_op_name((int)op));

    memset(a, 0xa5, sizeof a);
    memset(b, 0xa5, sizeof b);
    fill_inputs(dt, a, b, seed);
    for (size_t i = 0; i < n; i++)
        ref_elem(dt, op, a, b, want, i);

    void *d;
    switch (alias) {
    case ALIAS_A:
        memcpy(dst, a, sizeof a);
        d = dst;
        fn(d, d, b, n);
        break;
    case ALIAS_B:
        memcpy(dst, b, sizeof b);
        d = dst;
        fn(d, a, d, n);
        break;
    default:
        memset(dst, 0x5a, sizeof dst);
        d = dst;
        fn(d, a, b, n);
        break;
    }

    for (size_t i = 0; i < n; i++) {
        if (!elem_eq(dt, d, want, i)) {
            uint64_t x = 0, y = 0, g = 0, w = 0;
            memcpy(&x, (char *)a + i * es, es);
            memcpy(&y, (char *)b + i * es, es);
            memcpy(&g, (char *)d + i * es, es);
            memcpy(&w, (char *)want + i * es, es);
            cr_assert_fail(
                "%s %s (%s, n=%zu) element %zu: a=0x%llx b=0x%llx got 0x%llx want 0x%llx",
                reduce_dt_name((int)dt), reduce_op_name((int)op), alias_names[alias], n, i,
                (unsigned long long)x, (unsigned long long)y, (unsigned long long)g,
                (unsigned long long)w);
        }
    }
    /* Nothing written past element n. */
    const void *orig = alias == ALIAS_A ? (void *)a : alias == ALIAS_B ? (void *)b : NULL;
    for (size_t i = n * es; i < (NELEM + NGUARD) * es; i++) {
        unsigned char want_byte = orig ? ((const unsigned char *)orig)[i] : 0x5a;
        cr_assert_eq(((unsigned char *)d)[i], want_byte,
                     "%s %s (%s, n=%zu): byte %zu past the end written", reduce_dt_name((int)dt),
                     reduce_op_name((int)op), alias_names[alias], n, i);
    }
}

static void check_dtype(fc_datatype_t dt)
{
    for (size_t o = 0; o < sizeof all_ops / sizeof all_ops[0]; o++)
        for (int alias = ALIAS_NONE; alias <= ALIAS_B; alias++)
            for (uint64_t seed = 1; seed <= 3; seed++)
                check_kernel(dt, all_ops[o], alias, NELEM, seed);
}

Test(kernels, int8)
{
    check_dtype(FC_INT8);
}
Test(kernels, uint8)
{
    check_dtype(FC_UINT8);
}
Test(kernels, int32)
{
    check_dtype(FC_INT32);
}
Test(kernels, uint32)
{
    check_dtype(FC_UINT32);
}
Test(kernels, int64)
{
    check_dtype(FC_INT64);
}
Test(kernels, uint64)
{
    check_dtype(FC_UINT64);
}
Test(kernels, float16)
{
    check_dtype(FC_FLOAT16);
}
Test(kernels, bfloat16)
{
    check_dtype(FC_BFLOAT16);
}
Test(kernels, float32)
{
    check_dtype(FC_FLOAT32);
}
Test(kernels, float64)
{
    check_dtype(FC_FLOAT64);
}

/* Every length from 0 to NELEM: vector main loop, tails, and n == 0 writes
 * nothing. */
Test(kernels, all_lengths)
{
    for (size_t d = 0; d < sizeof all_dts / sizeof all_dts[0]; d++)
        for (size_t o = 0; o < sizeof all_ops / sizeof all_ops[0]; o++)
            for (size_t n = 0; n <= NELEM; n++)
                check_kernel(all_dts[d], all_ops[o], (int)(n % 3), n, 7);
}

Test(kernels, avg_is_sum)
{
    for (size_t d = 0; d < sizeof all_dts / sizeof all_dts[0]; d++)
        cr_assert_eq((void *)reduce_fn_get(all_dts[d], FC_AVG),
                     (void *)reduce_fn_get(all_dts[d], FC_SUM));
}

/* ---- integer wraparound and boundaries ---------------------------------- */

#define CHECK_INT1(T, dt, op, x, y, expect)                                                        \
    do {                                                                                           \
        T a_ = (x), b_ = (y), r_ = 0;                                                              \
        reduce_fn_get((dt), (op))(&r_, &a_, &b_, 1);                                               \
        cr_assert_eq(r_, (T)(expect), "%s %s(%s, %s) = %lld, want %lld", reduce_dt_name(dt),       \
                     reduce_op_name(op), #x, #y, (long long)r_, (long long)(T)(expect));           \
    } while (0)

Test(integers, wraparound)
{
    CHECK_INT1(int8_t, FC_INT8, FC_SUM, 127, 1, -128);
    CHECK_INT1(int8_t, FC_INT8, FC_SUM, -128, -1, 127);
    CHECK_INT1(uint8_t, FC_UINT8, FC_SUM, 255, 1, 0);
    CHECK_INT1(int32_t, FC_INT32, FC_SUM, INT32_MAX, 1, INT32_MIN);
    CHECK_INT1(int32_t, FC_INT32, FC_SUM, INT32_MIN, INT32_MIN, 0);
    CHECK_INT1(uint32_t, FC_UINT32, FC_SUM, UINT32_MAX, 2, 1);
    CHECK_INT1(int64_t, FC_INT64, FC_SUM, INT64_MAX, 1, INT64_MIN);
    CHECK_INT1(int64_t, FC_INT64, FC_SUM, INT64_MIN, -1, INT64_MAX);
    CHECK_INT1(uint64_t, FC_UINT64, FC_SUM, UINT64_MAX, 1, 0);
    CHECK_INT1(int8_t, FC_INT8, FC_AVG, 127, 1, -128);

    CHECK_INT1(int8_t, FC_INT8, FC_PROD, 16, 16, 0);
    CHECK_INT1(int8_t, FC_INT8, FC_PROD, -128, -1, -128);
    CHECK_INT1(int8_t, FC_INT8, FC_PROD, 100, 3, 44); /* 300 - 256 */
    CHECK_INT1(uint8_t, FC_UINT8, FC_PROD, 255, 255, 1);
    CHECK_INT1(int32_t, FC_INT32, FC_PROD, 65536, 65536, 0);
    CHECK_INT1(int32_t, FC_INT32, FC_PROD, INT32_MIN, -1, INT32_MIN);
    CHECK_INT1(int32_t, FC_INT32, FC_PROD, 65537, 65535, -1); /* 2^32 - 1 */
    CHECK_INT1(uint32_t, FC_UINT32, FC_PROD, UINT32_MAX, UINT32_MAX, 1);
    CHECK_INT1(int64_t, FC_INT64, FC_PROD, INT64_MIN, -1, INT64_MIN);
    CHECK_INT1(int64_t, FC_INT64, FC_PROD, 1ll << 32, 1ll << 32, 0);
    CHECK_INT1(uint64_t, FC_UINT64, FC_PROD, UINT64_MAX, UINT64_MAX, 1);
}

Test(integers, min_max_boundaries)
{
    CHECK_INT1(int8_t, FC_INT8, FC_MIN, -128, 127, -128);
    CHECK_INT1(int8_t, FC_INT8, FC_MAX, -128, 127, 127);
    CHECK_INT1(uint8_t, FC_UINT8, FC_MIN, 0, 255, 0);
    CHECK_INT1(uint8_t, FC_UINT8, FC_MAX, 128, 127, 128);
    CHECK_INT1(int32_t, FC_INT32, FC_MIN, INT32_MIN, INT32_MAX, INT32_MIN);
    CHECK_INT1(int32_t, FC_INT32, FC_MAX, INT32_MIN, INT32_MAX, INT32_MAX);
    CHECK_INT1(int32_t, FC_INT32, FC_MIN, INT32_MAX, INT32_MIN, INT32_MIN);
    CHECK_INT1(int32_t, FC_INT32, FC_MAX, -1, 0, 0);
    CHECK_INT1(uint32_t, FC_UINT32, FC_MIN, 0x80000000u, 0x7fffffffu, 0x7fffffffu);
    CHECK_INT1(uint32_t, FC_UINT32, FC_MAX, UINT32_MAX, 0, UINT32_MAX);
    /* The 64-bit kernels compare with bit tricks: hit the sign and the
     * overflow of x - y. */
    CHECK_INT1(int64_t, FC_INT64, FC_MIN, INT64_MIN, INT64_MAX, INT64_MIN);
    CHECK_INT1(int64_t, FC_INT64, FC_MIN, INT64_MAX, INT64_MIN, INT64_MIN);
    CHECK_INT1(int64_t, FC_INT64, FC_MAX, INT64_MIN, INT64_MAX, INT64_MAX);
    CHECK_INT1(int64_t, FC_INT64, FC_MAX, INT64_MAX, INT64_MIN, INT64_MAX);
    CHECK_INT1(int64_t, FC_INT64, FC_MIN, -1, 0, -1);
    CHECK_INT1(int64_t, FC_INT64, FC_MAX, -1, 0, 0);
    CHECK_INT1(int64_t, FC_INT64, FC_MIN, INT64_MIN, 1, INT64_MIN);
    CHECK_INT1(int64_t, FC_INT64, FC_MAX, INT64_MAX, -1, INT64_MAX);
    CHECK_INT1(int64_t, FC_INT64, FC_MIN, 5, 5, 5);
    CHECK_INT1(uint64_t, FC_UINT64, FC_MIN, 0, UINT64_MAX, 0);
    CHECK_INT1(uint64_t, FC_UINT64, FC_MAX, 0, UINT64_MAX, UINT64_MAX);
    CHECK_INT1(uint64_t, FC_UINT64, FC_MIN, 1ull << 63, (1ull << 63) - 1, (1ull << 63) - 1);
    CHECK_INT1(uint64_t, FC_UINT64, FC_MAX, 1ull << 63, (1ull << 63) - 1, 1ull << 63);
    CHECK_INT1(uint64_t, FC_UINT64, FC_MAX, UINT64_MAX - 1, UINT64_MAX, UINT64_MAX);
}

/* Exhaustive 8-bit pairs and random 64-bit pairs for MIN/MAX against the
 * reference (the 64-bit compares are the non-obvious ones). */
Test(integers, min_max_pairs)
{
    int bad = 0;
    for (int x = 0; x < 256; x++) {
        for (int y = 0; y < 256; y++) {
            int8_t sx = (int8_t)(x - 128), sy = (int8_t)(y - 128), r;
            uint8_t ux = (uint8_t)x, uy = (uint8_t)y, ur;
            reduce_fn_get(FC_INT8, FC_MIN)(&r, &sx, &sy, 1);
            bad += r != (sx < sy ? sx : sy);
            reduce_fn_get(FC_INT8, FC_MAX)(&r, &sx, &sy, 1);
            bad += r != (sx > sy ? sx : sy);
            reduce_fn_get(FC_UINT8, FC_MIN)(&ur, &ux, &uy, 1);
            bad += ur != (ux < uy ? ux : uy);
            reduce_fn_get(FC_UINT8, FC_MAX)(&ur, &ux, &uy, 1);
            bad += ur != (ux > uy ? ux : uy);
        }
    }
    cr_assert_eq(bad, 0, "%d 8-bit min/max mismatches", bad);

    enum { M = 4096 };
    static uint64_t a[M], b[M], r[M];
    uint64_t s = 42;
    for (int i = 0; i < M; i++) {
        a[i] = rng_next(&s);
        b[i] = rng_next(&s);
        if (i % 4 == 1) /* close values, same sign */
            b[i] = a[i] + (rng_next(&s) % 5) - 2;
        if (i % 4 == 2) /* same magnitude bits, sign flipped */
            b[i] = a[i] ^ (1ull << 63);
    }
    reduce_fn_get(FC_INT64, FC_MIN)(r, a, b, M);
    for (int i = 0; i < M; i++)
        bad += (int64_t)r[i] != ((int64_t)a[i] < (int64_t)b[i] ? (int64_t)a[i] : (int64_t)b[i]);
    reduce_fn_get(FC_INT64, FC_MAX)(r, a, b, M);
    for (int i = 0; i < M; i++)
        bad += (int64_t)r[i] != ((int64_t)a[i] > (int64_t)b[i] ? (int64_t)a[i] : (int64_t)b[i]);
    reduce_fn_get(FC_UINT64, FC_MIN)(r, a, b, M);
    for (int i = 0; i < M; i++)
        bad += r[i] != (a[i] < b[i] ? a[i] : b[i]);
    reduce_fn_get(FC_UINT64, FC_MAX)(r, a, b, M);
    for (int i = 0; i < M; i++)
        bad += r[i] != (a[i] > b[i] ? a[i] : b[i]);
    cr_assert_eq(bad, 0, "%d 64-bit min/max mismatches", bad);
}

/* ---- floating special values --------------------------------------------- */

/* Encodes a double as one element of a floating dt (via the references). */
static void enc(fc_datatype_t dt, void *p, double v)
{
    switch (dt) {
    case FC_FLOAT16: *(uint16_t *)p = isnan(v) ? 0x7e00 : ref_f2h((float)v); break;
    case FC_BFLOAT16: *(uint16_t *)p = ref_f2bf((float)v); break;
    case FC_FLOAT32: *(float *)p = (float)v; break;
    case FC_FLOAT64: *(double *)p = v; break;
    default: break;
    }
}

static double dec(fc_datatype_t dt, const void *p)
{
    switch (dt) {
    case FC_FLOAT16: return ref_h2f(*(const uint16_t *)p);
    case FC_BFLOAT16: return ref_bf2f(*(const uint16_t *)p);
    case FC_FLOAT32: return *(const float *)p;
    case FC_FLOAT64: return *(const double *)p;
    default: return NAN;
    }
}

/* One element of op(x, y) in dt, decoded to double. */
static double run1(fc_datatype_t dt, fc_op_t op, double x, double y)
{
    uint64_t a = 0, b = 0, r = 0;
    enc(dt, &a, x);
    enc(dt, &b, y);
    reduce_fn_get(dt, op)(&r, &a, &b, 1);
    return dec(dt, &r);
}

#define EXPECT_NAN(dt, op, x, y)                                                                   \
    cr_assert(isnan(run1(dt, op, x, y)), "%s %s(%s, %s) should be NaN", reduce_dt_name(dt),        \
              reduce_op_name(op), #x, #y)

#define EXPECT_VAL(dt, op, x, y, want)                                                             \
    do {                                                                                           \
        double got_ = run1(dt, op, x, y), want_ = (want);                                          \
        cr_assert(got_ == want_ && signbit(got_) == signbit(want_), "%s %s(%s, %s) = %a, want %a", \
                  reduce_dt_name(dt), reduce_op_name(op), #x, #y, got_, want_);                    \
    } while (0)

static const fc_datatype_t float_dts[] = {FC_FLOAT16, FC_BFLOAT16, FC_FLOAT32, FC_FLOAT64};

Test(floats, nan_and_inf)
{
    const double inf = INFINITY;
    for (size_t k = 0; k < 4; k++) {
        fc_datatype_t dt = float_dts[k];
        EXPECT_NAN(dt, FC_SUM, inf, -inf);
        EXPECT_NAN(dt, FC_SUM, NAN, 1.0);
        EXPECT_NAN(dt, FC_SUM, 1.0, NAN);
        EXPECT_NAN(dt, FC_AVG, -inf, inf);
        EXPECT_NAN(dt, FC_PROD, inf, 0.0);
        EXPECT_NAN(dt, FC_PROD, -0.0, -inf);
        EXPECT_NAN(dt, FC_PROD, NAN, 2.0);
        EXPECT_NAN(dt, FC_MIN, NAN, 1.0);
        EXPECT_NAN(dt, FC_MIN, 1.0, NAN);
        EXPECT_NAN(dt, FC_MAX, NAN, 1.0);
        EXPECT_NAN(dt, FC_MAX, 1.0, NAN);
        EXPECT_NAN(dt, FC_MIN, NAN, -inf);
        EXPECT_NAN(dt, FC_MAX, inf, NAN);
        EXPECT_NAN(dt, FC_MIN, NAN, NAN);
        EXPECT_VAL(dt, FC_SUM, inf, 1.0, inf);
        EXPECT_VAL(dt, FC_SUM, -inf, -inf, -inf);
        EXPECT_VAL(dt, FC_PROD, inf, -2.0, -inf);
        EXPECT_VAL(dt, FC_MIN, -inf, 1.0, -inf);
        EXPECT_VAL(dt, FC_MAX, -inf, 1.0, 1.0);
        EXPECT_VAL(dt, FC_MAX, inf, 1.0, inf);
        EXPECT_VAL(dt, FC_MIN, 1.0, inf, 1.0);
        EXPECT_VAL(dt, FC_MIN, -1.0, 2.0, -1.0);
        EXPECT_VAL(dt, FC_MAX, -1.0, 2.0, 2.0);
    }
}

/* Documented choice: min(-0, +0) = -0 and max(-0, +0) = +0 in both operand
 * orders, so MIN/MAX are commutative bit for bit. */
Test(floats, signed_zero)
{
    for (size_t k = 0; k < 4; k++) {
        fc_datatype_t dt = float_dts[k];
        EXPECT_VAL(dt, FC_MIN, -0.0, 0.0, -0.0);
        EXPECT_VAL(dt, FC_MIN, 0.0, -0.0, -0.0);
        EXPECT_VAL(dt, FC_MAX, -0.0, 0.0, 0.0);
        EXPECT_VAL(dt, FC_MAX, 0.0, -0.0, 0.0);
        EXPECT_VAL(dt, FC_MIN, 0.0, 0.0, 0.0);
        EXPECT_VAL(dt, FC_MAX, -0.0, -0.0, -0.0);
        EXPECT_VAL(dt, FC_SUM, -0.0, -0.0, -0.0);
        EXPECT_VAL(dt, FC_SUM, -0.0, 0.0, 0.0);
        EXPECT_VAL(dt, FC_PROD, -0.0, 5.0, -0.0);
    }
}

Test(floats, overflow_and_rounding)
{
    /* fp16: 65504 is the largest finite; ulp there is 32. */
    EXPECT_VAL(FC_FLOAT16, FC_SUM, 65504.0, 65504.0, INFINITY);
    EXPECT_VAL(FC_FLOAT16, FC_SUM, 65504.0, 8.0, 65504.0);
    EXPECT_VAL(FC_FLOAT16, FC_SUM, 65504.0, 16.0, INFINITY); /* tie -> even = inf */
    EXPECT_VAL(FC_FLOAT16, FC_SUM, -65504.0, -16.0, -INFINITY);
    EXPECT_VAL(FC_FLOAT16, FC_PROD, 256.0, 256.0, INFINITY);
    /* ulp is 2 in [2048, 4096): ties to even both ways. */
    EXPECT_VAL(FC_FLOAT16, FC_SUM, 2048.0, 1.0, 2048.0);
    EXPECT_VAL(FC_FLOAT16, FC_SUM, 2048.0, 3.0, 2052.0);
    EXPECT_VAL(FC_FLOAT16, FC_SUM, 2050.0, 1.0, 2052.0);
    /* subnormal results */
    EXPECT_VAL(FC_FLOAT16, FC_SUM, 0x1p-24, 0x1p-24, 0x1p-23);
    EXPECT_VAL(FC_FLOAT16, FC_PROD, 0x1p-12, 0x1p-12, 0x1p-24);
    EXPECT_VAL(FC_FLOAT16, FC_PROD, 0x1p-12, 0x1p-13, 0.0);       /* 2^-25: tie -> 0 */
    EXPECT_VAL(FC_FLOAT16, FC_PROD, 0x1.8p-12, 0x1p-12, 0x1p-23); /* 1.5 * 2^-24 -> 2 */
    EXPECT_VAL(FC_FLOAT16, FC_PROD, 0x1.8p-12, 0x1p-13, 0x1p-24); /* 0.75 * 2^-24 -> 1 */
    EXPECT_VAL(FC_FLOAT16, FC_PROD, -0x1p-12, 0x1p-14, -0.0);
    /* bf16: 1 + 2^-8 is a tie between 1 and 1 + 2^-7 -> 1. */
    EXPECT_VAL(FC_BFLOAT16, FC_SUM, 1.0, 0x1p-8, 1.0);
    EXPECT_VAL(FC_BFLOAT16, FC_SUM, 1.0078125, 0x1p-8, 1.015625);
    EXPECT_VAL(FC_BFLOAT16, FC_SUM, 0x1.fep127, 0x1.fep127, INFINITY);
    EXPECT_VAL(FC_BFLOAT16, FC_PROD, 0x1p100, 0x1p100, INFINITY);
    EXPECT_VAL(FC_FLOAT32, FC_SUM, FLT_MAX, FLT_MAX, INFINITY);
    EXPECT_VAL(FC_FLOAT32, FC_PROD, 0x1p-100, 0x1p-100, 0.0);
    EXPECT_VAL(FC_FLOAT64, FC_SUM, DBL_MAX, DBL_MAX, INFINITY);
    EXPECT_VAL(FC_FLOAT64, FC_SUM, 1.0, 0x1p-53, 1.0);
}

/* ---- fp16 conversions ---------------------------------------------------- */

/* All 65536 halves: half -> float matches _Float16 (bit-exact for non-NaN,
 * quiet NaN for NaN) and float -> half gives the half back. */
Test(fp16, exhaustive_roundtrip)
{
    int bad_to_float = 0, bad_back = 0, bad_nan = 0;
    for (uint32_t v = 0; v <= 0xffff; v++) {
        uint16_t h = (uint16_t)v;
        float f = reduce_half_to_float(h);
        uint16_t back = reduce_float_to_half(f);
        if (h_isnan(h)) {
            bad_nan += !isnan(f) || !(fbits(f) & 0x00400000u) || !h_isnan(back) ||
                       !(back & 0x0200u) || (back & 0x8000u) != (h & 0x8000u);
        } else {
            bad_to_float += fbits(f) != fbits(ref_h2f(h));
            bad_back += back != h;
        }
    }
    cr_assert_eq(bad_to_float, 0, "%d half->float mismatches vs _Float16", bad_to_float);
    cr_assert_eq(bad_back, 0, "%d half->float->half round trips changed the value", bad_back);
    cr_assert_eq(bad_nan, 0, "%d NaN halves not kept as quiet NaN", bad_nan);
}

Test(fp16, float_to_half_cases)
{
    static const struct {
        uint32_t f;
        uint16_t h;
    } cases[] = {
        {0x00000000u, 0x0000},                        /* +0 */
        {0x80000000u, 0x8000},                        /* -0 */
        {0x3f800000u, 0x3c00},                        /* 1 */
        {0xbf800000u, 0xbc00},                        /* -1 */
        {0x3f801000u, 0x3c00},                        /* 1 + 2^-11: tie, even is down */
        {0x3f803000u, 0x3c02},                        /* 1 + 3*2^-11: tie, even is up */
        {0x3f801001u, 0x3c01},                        /* just above a tie */
        {0x3f802fffu, 0x3c01},                        /* just below a tie */
        {0xbf801000u, 0xbc00},                        /* negative ties */
        {0xbf803000u, 0xbc02}, {0x3f7ff000u, 0x3c00}, /* 1 - 2^-12 (tie below 1): even is 1.0 */
        {0x477fe000u, 0x7bff},                        /* 65504 = max */
        {0x477fefffu, 0x7bff},                        /* 65519.99... */
        {0x477ff000u, 0x7c00},                        /* 65520 -> inf */
        {0xc77ff000u, 0xfc00},                        /* -65520 -> -inf */
        {0x47800000u, 0x7c00},                        /* 65536 */
        {0x501502f9u, 0x7c00},                        /* 1e10 */
        {0x7f7fffffu, 0x7c00},                        /* FLT_MAX */
        {0x7f800000u, 0x7c00},                        /* inf */
        {0xff800000u, 0xfc00},                        /* -inf */
        {0x38800000u, 0x0400},                        /* 2^-14, smallest normal */
        {0x387fc000u, 0x03ff},                        /* 1023 * 2^-24, largest subnormal */
        {0x387fe000u, 0x0400},                        /* 1023.5 * 2^-24: tie -> even 1024 */
        {0x387fa000u, 0x03fe},                        /* 1022.5 * 2^-24: tie -> even 1022 */
        {0x33800000u, 0x0001},                        /* 2^-24, smallest subnormal */
        {0xb3800000u, 0x8001}, {0x33000000u, 0x0000}, /* 2^-25: tie -> 0 */
        {0xb3000000u, 0x8000},                        /* -2^-25: tie -> -0 */
        {0x33000001u, 0x0001},                        /* just above 2^-25 */
        {0x33c00000u, 0x0002},                        /* 1.5 * 2^-24: tie -> 2 */
        {0x34200000u, 0x0002},                        /* 2.5 * 2^-24: tie -> 2 */
        {0x34600000u, 0x0004},                        /* 3.5 * 2^-24: tie -> 4 */
        {0x32800000u, 0x0000},                        /* 2^-26: underflow */
        {0x00000001u, 0x0000},                        /* fp32 subnormal */
        {0x80000001u, 0x8000}, {0x00800000u, 0x0000}, /* FLT_MIN */
        {0x34aaaaabu, 0x0005},                        /* ~5.33 * 2^-24 */
        {0x40490fdbu, 0x4248},                        /* pi */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = reduce_float_to_half(bitsf(cases[i].f));
        cr_assert_eq(h, cases[i].h, "float 0x%08x -> half 0x%04x, want 0x%04x",
                     (unsigned)cases[i].f, (unsigned)h, (unsigned)cases[i].h);
        cr_assert_eq(h, ref_f2h(bitsf(cases[i].f)), "table entry 0x%08x disagrees with _Float16",
                     (unsigned)cases[i].f);
    }

    /* NaNs stay NaN and become quiet, keeping the sign; a NaN whose payload
     * lies only in the low 13 bits must not turn into inf. */
    static const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u,
                                    0x7fbfffffu, 0x7fffffffu, 0x7f801fffu};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        uint16_t h = reduce_float_to_half(bitsf(nans[i]));
        cr_assert(h_isnan(h) && (h & 0x0200u), "NaN 0x%08x -> 0x%04x", (unsigned)nans[i],
                  (unsigned)h);
        cr_assert_eq(h & 0x8000u, (nans[i] >> 16) & 0x8000u);
    }
    /* Signalling half NaN -> quiet float NaN. */
    cr_assert(fbits(reduce_half_to_float(0x7c01)) & 0x00400000u);
    cr_assert(isnan(reduce_half_to_float(0x7c01)));
    cr_assert(isinf(reduce_half_to_float(0x7c00)) && reduce_half_to_float(0x7c00) > 0);
    cr_assert(isinf(reduce_half_to_float(0xfc00)) && reduce_half_to_float(0xfc00) < 0);
    cr_assert_eq(fbits(reduce_half_to_float(0x8000)), 0x80000000u);
    cr_assert_eq(reduce_half_to_float(0x0001), 0x1p-24f);
    cr_assert_eq(reduce_half_to_float(0x03ff), 1023 * 0x1p-24f);
    cr_assert_eq(reduce_half_to_float(0x7bff), 65504.0f);
}

/* float -> half against _Float16 for random fp32 bit patterns (NaN excluded:
 * payload handling is checked above), both over the full range and
 * concentrated on magnitudes where halves are normal or subnormal. */
Test(fp16, float_to_half_random)
{
    uint64_t s = 12345;
    int bad = 0, tested = 0;
    uint32_t first_bad = 0;
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = (uint32_t)rng_next(&s);
        if (i & 1) /* exponent in [2^-27, 2^17): subnormal, normal and overflow halves */
            u = (u & 0x807fffffu) | ((uint32_t)(100 + (u >> 23) % 44) << 23);
        float f = bitsf(u);
        if (isnan(f))
            continue;
        tested++;
        if (reduce_float_to_half(f) != ref_f2h(f)) {
            if (!bad)
                first_bad = u;
            bad++;
        }
    }
    cr_assert_gt(tested, 990000);
    cr_assert_eq(bad, 0, "%d of %d mismatches vs _Float16, first 0x%08x", bad, tested,
                 (unsigned)first_bad);
}

/* ---- bf16 conversions ------------------------------------------------------ */

Test(bf16, cases)
{
    static const struct {
        uint32_t f;
        uint16_t h;
    } cases[] = {
        {0x3f800000u, 0x3f80},                                               /* 1 */
        {0x3f808000u, 0x3f80},                                               /* tie, even is down */
        {0x3f818000u, 0x3f82},                                               /* tie, even is up */
        {0x3f808001u, 0x3f81},                                               /* above a tie */
        {0x3f807fffu, 0x3f80},                                               /* below a tie */
        {0xbf818000u, 0xbf82},                                               /* negative tie */
        {0x00000000u, 0x0000}, {0x80000000u, 0x8000}, {0x7f800000u, 0x7f80}, /* inf */
        {0xff800000u, 0xff80},                                               /* -inf */
        {0x7f7fffffu, 0x7f80},                        /* FLT_MAX rounds to inf */
        {0xff7fffffu, 0xff80}, {0x7f7f7fffu, 0x7f7f}, /* stays the largest finite bf16 */
        {0x7f7f8000u, 0x7f80},                        /* tie above the largest (odd) -> inf */
        {0x00018000u, 0x0002},                        /* subnormal tie -> even */
        {0x00008000u, 0x0000},                        /* subnormal tie -> 0 */
        {0x00000001u, 0x0000}, {0x007fffffu, 0x0080}, /* largest subnormal rounds to FLT_MIN */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint16_t h = reduce_float_to_bf16(bitsf(cases[i].f));
        cr_assert_eq(h, cases[i].h, "float 0x%08x -> bf16 0x%04x, want 0x%04x",
                     (unsigned)cases[i].f, (unsigned)h, (unsigned)cases[i].h);
        cr_assert_eq(h, ref_f2bf(bitsf(cases[i].f)), "reference disagrees on 0x%08x",
                     (unsigned)cases[i].f);
    }
    /* NaNs: never inf, never a carry into the sign, always quiet. */
    static const uint32_t nans[] = {0x7fc00000u, 0xffc00000u, 0x7fffffffu, 0xffffffffu,
                                    0x7f800001u, 0x7f80ffffu, 0x7fff8000u, 0xff800001u};
    for (size_t i = 0; i < sizeof nans / sizeof nans[0]; i++) {
        uint16_t h = reduce_float_to_bf16(bitsf(nans[i]));
        cr_assert(bf_isnan(h) && (h & 0x0040u), "NaN 0x%08x -> 0x%04x", (unsigned)nans[i],
                  (unsigned)h);
        cr_assert_eq(h & 0x8000u, (nans[i] >> 16) & 0x8000u, "NaN 0x%08x changed sign",
                     (unsigned)nans[i]);
    }
    cr_assert(fbits(reduce_bf16_to_float(0x7f81)) & 0x00400000u); /* sNaN -> quiet */
    cr_assert(isnan(reduce_bf16_to_float(0x7f81)));
    cr_assert_eq(fbits(reduce_bf16_to_float(0x7f80)), 0x7f800000u);
    cr_assert_eq(fbits(reduce_bf16_to_float(0x8001)), 0x80010000u);
}

Test(bf16, exhaustive_roundtrip)
{
    int bad = 0, bad_nan = 0;
    for (uint32_t v = 0; v <= 0xffff; v++) {
        uint16_t h = (uint16_t)v;
        float f = reduce_bf16_to_float(h);
        uint16_t back = reduce_float_to_bf16(f);
        if (bf_isnan(h))
            bad_nan += !isnan(f) || !bf_isnan(back) || !(back & 0x0040u);
        else
            bad += fbits(f) != ((uint32_t)h << 16) || back != h;
    }
    cr_assert_eq(bad, 0, "%d bf16 round trips failed", bad);
    cr_assert_eq(bad_nan, 0, "%d bf16 NaNs not kept as quiet NaN", bad_nan);
}

Test(bf16, float_to_bf16_random)
{
    uint64_t s = 777;
    int bad = 0;
    uint32_t first_bad = 0;
    for (int i = 0; i < 1000000; i++) {
        uint32_t u = (uint32_t)rng_next(&s);
        if (i & 1) /* force a tie or a near-tie in the dropped bits */
            u = (u & 0xffff0000u) | (0x8000u + (uint32_t)(i % 5) - 2u);
        float f = bitsf(u);
        uint16_t got = reduce_float_to_bf16(f), want = ref_f2bf(f);
        if (isnan(f) ? !bf_isnan(got) : got != want) {
            if (!bad)
                first_bad = u;
            bad++;
        }
    }
    cr_assert_eq(bad, 0, "%d mismatches, first 0x%08x", bad, (unsigned)first_bad);
}

/* ---- AVG scaling ------------------------------------------------------------ */

#define CHECK_SCALE1(T, dt, x, d, expect)                                                          \
    do {                                                                                           \
        T s_ = (x), r_ = 0;                                                                        \
        reduce_scale_get(dt)(&r_, &s_, 1, (d));                                                    \
        cr_assert_eq(r_, (T)(expect), "%s %s / %u = %lld, want %lld", reduce_dt_name(dt), #x,      \
                     (unsigned)(d), (long long)r_, (long long)(T)(expect));                        \
    } while (0)

Test(scale, integers_truncate)
{
    CHECK_SCALE1(int8_t, FC_INT8, -7, 2, -3);
    CHECK_SCALE1(int8_t, FC_INT8, 7, 2, 3);
    CHECK_SCALE1(int8_t, FC_INT8, -128, 3, -42);
    CHECK_SCALE1(int8_t, FC_INT8, -128, 1, -128);
    CHECK_SCALE1(int8_t, FC_INT8, -1, 1000, 0);
    CHECK_SCALE1(uint8_t, FC_UINT8, 255, 2, 127);
    CHECK_SCALE1(int32_t, FC_INT32, -7, 2, -3);
    CHECK_SCALE1(int32_t, FC_INT32, INT32_MIN, 2, INT32_MIN / 2);
    CHECK_SCALE1(int32_t, FC_INT32, INT32_MIN, UINT32_MAX, 0);
    CHECK_SCALE1(int32_t, FC_INT32, -100, 7, -14);
    CHECK_SCALE1(uint32_t, FC_UINT32, UINT32_MAX, 3, 0x55555555u);
    CHECK_SCALE1(uint32_t, FC_UINT32, UINT32_MAX, UINT32_MAX, 1);
    CHECK_SCALE1(int64_t, FC_INT64, -7, 2, -3);
    CHECK_SCALE1(int64_t, FC_INT64, INT64_MIN, 3, INT64_MIN / 3);
    CHECK_SCALE1(int64_t, FC_INT64, INT64_MIN, 1, INT64_MIN);
    CHECK_SCALE1(int64_t, FC_INT64, -5, UINT32_MAX, 0);
    CHECK_SCALE1(uint64_t, FC_UINT64, UINT64_MAX, UINT32_MAX, UINT64_MAX / UINT32_MAX);
    CHECK_SCALE1(uint64_t, FC_UINT64, 10, 4, 2);
}

static uint16_t scale_h(fc_datatype_t dt, uint16_t h, uint32_t d)
{
    uint16_t r = 0;
    reduce_scale_get(dt)(&r, &h, 1, d);
    return r;
}

Test(scale, half_types_rne)
{
    /* Subnormal halves divided by 2 land on ties: even wins. */
    cr_assert_eq(scale_h(FC_FLOAT16, 0x0001, 2), 0x0000); /* 0.5 -> 0 */
    cr_assert_eq(scale_h(FC_FLOAT16, 0x0003, 2), 0x0002); /* 1.5 -> 2 */
    cr_assert_eq(scale_h(FC_FLOAT16, 0x0005, 2), 0x0002); /* 2.5 -> 2 */
    cr_assert_eq(scale_h(FC_FLOAT16, 0x0007, 2), 0x0004); /* 3.5 -> 4 */
    cr_assert_eq(scale_h(FC_FLOAT16, 0x8003, 2), 0x8002);
    cr_assert_eq(scale_h(FC_FLOAT16, 0x4200, 3), 0x3c00); /* 3 / 3 = 1 */
    cr_assert_eq(scale_h(FC_FLOAT16, 0x3c00, 3), ref_f2h(1.0f / 3.0f));
    cr_assert_eq(scale_h(FC_FLOAT16, 0x7c00, 3), 0x7c00);
    cr_assert(h_isnan(scale_h(FC_FLOAT16, 0x7e00, 3)));
    cr_assert_eq(scale_h(FC_BFLOAT16, 0x0001, 2), 0x0000);
    cr_assert_eq(scale_h(FC_BFLOAT16, 0x0003, 2), 0x0002);
    cr_assert_eq(scale_h(FC_BFLOAT16, 0x3f80, 3), ref_f2bf(1.0f / 3.0f));

    /* All halves, several divisors, against fp32 division + the reference
     * rounding. */
    static const uint32_t divs[] = {2, 3, 5, 7, 8, 1000};
    int bad = 0;
    for (size_t k = 0; k < sizeof divs / sizeof divs[0]; k++) {
        for (uint32_t v = 0; v <= 0xffff; v += 1) {
            uint16_t h = (uint16_t)v;
            if (!h_isnan(h)) {
                uint16_t want = ref_f2h(ref_h2f(h) / (float)divs[k]);
                bad += scale_h(FC_FLOAT16, h, divs[k]) != want;
            }
            if (!bf_isnan(h)) {
                uint16_t want = ref_f2bf(ref_bf2f(h) / (float)divs[k]);
                bad += scale_h(FC_BFLOAT16, h, divs[k]) != want;
            }
        }
    }
    cr_assert_eq(bad, 0, "%d half-type scale mismatches", bad);
}

Test(scale, vectors_and_identity)
{
    static const uint32_t divs[] = {1, 2, 3, 7, 1000, UINT32_MAX};
    for (size_t d = 0; d < sizeof all_dts / sizeof all_dts[0]; d++) {
        fc_datatype_t dt = all_dts[d];
        reduce_scale_fn fn = reduce_scale_get(dt);
        cr_assert_not_null(fn);
        for (size_t k = 0; k < sizeof divs / sizeof divs[0]; k++) {
            for (int inplace = 0; inplace < 2; inplace++) {
                uint64_t src[NELEM], unused[NELEM], want[NELEM], dst[NELEM];
                fill_inputs(dt, src, unused, 3 + k);
                const size_t es = dt_size(dt);
                for (size_t i = 0; i < NELEM; i++) {
                    if (dt_is_int(dt)) {
                        /* C division truncates toward zero. */
                        put_int(dt, want, i, get_int(dt, src, i) / (__int128)divs[k]);
                    } else if (divs[k] == 1) {
                        memcpy((char *)want + i * es, (char *)src + i * es, es);
                    } else {
                        switch (dt) {
                        case FC_FLOAT16:
                            ((uint16_t *)want)[i] =
                                ref_f2h(ref_h2f(((uint16_t *)src)[i]) / (float)divs[k]);
                            break;
                        case FC_BFLOAT16:
                            ((uint16_t *)want)[i] =
                                ref_f2bf(ref_bf2f(((uint16_t *)src)[i]) / (float)divs[k]);
                            break;
                        case FC_FLOAT32:
                            ((float *)want)[i] = ((float *)src)[i] / (float)divs[k];
                            break;
                        default: ((double *)want)[i] = ((double *)src)[i] / (double)divs[k]; break;
                        }
                    }
                }
                void *out = inplace ? (void *)src : (void *)dst;
                fn(out, src, NELEM, divs[k]);
                for (size_t i = 0; i < NELEM; i++)
                    cr_assert(elem_eq(dt, out, want, i), "%s / %u (%s) element %zu",
                              reduce_dt_name((int)dt), (unsigned)divs[k],
                              inplace ? "in place" : "out of place", i);
            }
        }
    }
}

/* ---- enums and names ------------------------------------------------------ */

Test(api, invalid_values)
{
    cr_assert_null(reduce_fn_get((fc_datatype_t)12, FC_SUM));
    cr_assert_null(reduce_fn_get((fc_datatype_t)-1, FC_SUM));
    cr_assert_null(reduce_fn_get((fc_datatype_t)INT_MAX, FC_SUM));
    cr_assert_null(reduce_fn_get(FC_FLOAT32, (fc_op_t)5));
    cr_assert_null(reduce_fn_get(FC_FLOAT32, (fc_op_t)-1));
    cr_assert_null(reduce_fn_get((fc_datatype_t)-1, (fc_op_t)-1));
    cr_assert_null(reduce_scale_get((fc_datatype_t)12));
    cr_assert_null(reduce_scale_get((fc_datatype_t)-1));
    cr_assert_null(reduce_premul_get((fc_datatype_t)12));
    cr_assert_null(reduce_premul_get((fc_datatype_t)-1));

    static const int bad[] = {-1, 12, 13, 100, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cr_assert_eq(reduce_dt_valid(bad[i]), 0, "dt %d", bad[i]);
        cr_assert_str_eq(reduce_dt_name(bad[i]), "invalid");
    }
    static const int bad_ops[] = {-1, 5, 6, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof bad_ops / sizeof bad_ops[0]; i++) {
        cr_assert_eq(reduce_op_valid(bad_ops[i]), 0, "op %d", bad_ops[i]);
        cr_assert_str_eq(reduce_op_name(bad_ops[i]), "invalid");
    }
}

Test(api, valid_values_and_names)
{
    static const char *const dt_names[] = {"int8",   "uint8",   "int32",    "uint32",  "int64",
                                           "uint64", "float16", "bfloat16", "float32", "float64"};
    static const char *const op_names[] = {"sum", "prod", "min", "max", "avg"};
    for (int dt = 0; dt < 10; dt++) {
        cr_assert(reduce_dt_valid(dt));
        cr_assert_str_eq(reduce_dt_name(dt), dt_names[dt]);
        cr_assert_not_null(reduce_scale_get((fc_datatype_t)dt));
        for (int op = 0; op < 5; op++)
            cr_assert_not_null(reduce_fn_get((fc_datatype_t)dt, (fc_op_t)op));
    }
    for (int op = 0; op < 5; op++) {
        cr_assert(reduce_op_valid(op));
        cr_assert_str_eq(reduce_op_name(op), op_names[op]);
    }
}
