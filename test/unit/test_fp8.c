/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fp8 (FC_FLOAT8_E4M3, FC_FLOAT8_E5M2) and the pre-scaled sum's kernel.
 *
 * The reference is written from the formats' definitions, not from the
 * library's code: every code's value by ldexp, and rounding as a search for
 * the nearest finite code in double arithmetic (ties to the even code),
 * saturating beyond the largest finite value. The library's conversions
 * are checked against it exhaustively (every code), on every tie and its
 * neighbours, on saturation and NaN edges, and on random fp32 values; the
 * reduction kernels against the reference rounding of the exact result.
 */
#include <criterion/criterion.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "fp8.h"
#include "reduce.h"

struct fmt {
    const char *name;
    fc_datatype_t dt;
    int M, B, e5m2;
    uint8_t maxc, nanc;
};
static const struct fmt E4M3 = {"e4m3", FC_FLOAT8_E4M3, 3, 7, 0, 0x7e, 0x7f};
static const struct fmt E5M2 = {"e5m2", FC_FLOAT8_E5M2, 2, 15, 1, 0x7b, 0x7e};

static int ref_isnan(const struct fmt *f, uint8_t c)
{
    return f->e5m2 ? (c & 0x7f) > 0x7c : (c & 0x7f) == 0x7f;
}

static int ref_isinf(const struct fmt *f, uint8_t c)
{
    return f->e5m2 && (c & 0x7f) == 0x7c;
}

/* the value of a finite code */
static double ref_value(const struct fmt *f, uint8_t c)
{
    int ex = (c & 0x7f) >> f->M, m = c & ((1 << f->M) - 1);
    double v = ex ? ldexp(1.0 + m / (double)(1 << f->M), ex - f->B)
                  : ldexp(m, 1 - f->B - f->M);
    return c & 0x80 ? -v : v;
}

static uint8_t ref_round(const struct fmt *f, double v)
{
    uint8_t sign = signbit(v) ? 0x80 : 0;
    if (isnan(v))
        return f->nanc | sign;
    if (isinf(v)) /* saturates, as every magnitude beyond the largest */
        return f->maxc | sign;
    double a = fabs(v);
    int best = 0;
    for (int k = 1; k <= f->maxc; k++) {
        double d = fabs(ref_value(f, (uint8_t)k) - a), db = fabs(ref_value(f, (uint8_t)best) - a);
        if (d < db || (d == db && !(k & 1)))
            best = k;
    }
    return (uint8_t)(best | sign);
}

static float lib_to(const struct fmt *f, uint8_t c)
{
    return f->e5m2 ? fp8_e5m2_to_f32(c) : fp8_e4m3_to_f32(c);
}

static uint8_t lib_from(const struct fmt *f, float v)
{
    return f->e5m2 ? fp8_e5m2_from_f32(v) : fp8_e4m3_from_f32(v);
}

static void check_from(const struct fmt *f, float v)
{
    uint8_t got = lib_from(f, v), want = ref_round(f, v);
    if (isnan(v)) {
        cr_assert(ref_isnan(f, got), "%s: NaN (%#x) became %#x, not NaN", f->name,
                  (unsigned)fp8_f32_bits(v), got);
        cr_assert_eq(got & 0x80, want & 0x80, "%s: NaN lost its sign", f->name);
        return;
    }
    cr_assert_eq(got, want, "%s: %a (%.9g) rounds to %#04x (%g), expected %#04x (%g)", f->name,
                 (double)v, (double)v, got, ref_value(f, got), want, ref_value(f, want));
}

static void each_format(void (*fn)(const struct fmt *))
{
    fn(&E4M3);
    fn(&E5M2);
}

static void decode_all(const struct fmt *f)
{
    for (int c = 0; c < 256; c++) {
        float v = lib_to(f, (uint8_t)c);
        if (ref_isnan(f, (uint8_t)c)) {
            cr_assert(isnan(v), "%s %#04x: not NaN", f->name, c);
            uint32_t b = fp8_f32_bits(v);
            cr_assert(b & 0x00400000u, "%s %#04x: a signalling NaN", f->name, c);
        } else if (ref_isinf(f, (uint8_t)c)) {
            cr_assert(isinf(v) && !!signbit(v) == !!(c & 0x80), "%s %#04x: not inf", f->name, c);
        } else {
            cr_assert_eq((double)v, ref_value(f, (uint8_t)c), "%s %#04x: %g, expected %g",
                         f->name, c, (double)v, ref_value(f, (uint8_t)c));
            cr_assert_eq(!!signbit(v), !!(c & 0x80), "%s %#04x: sign", f->name, c);
            cr_assert_eq(lib_from(f, v), c, "%s %#04x does not round trip", f->name, c);
        }
    }
}

Test(fp8, every_code_decodes_and_round_trips)
{
    each_format(decode_all);
    cr_assert_eq(fp8_e4m3_to_f32(0x7e), 448.0f);
    cr_assert_eq(fp8_e5m2_to_f32(0x7b), 57344.0f);
    cr_assert_eq(fp8_e4m3_to_f32(0x01), 0x1p-9f);
    cr_assert_eq(fp8_e5m2_to_f32(0x01), 0x1p-16f);
}

/* every midpoint between two neighbouring codes (a tie), and the fp32
 * values just either side of it */
static void ties(const struct fmt *f)
{
    for (int k = 0; k < f->maxc; k++) {
        for (int s = 0; s < 2; s++) {
            double lo = ref_value(f, (uint8_t)k), hi = ref_value(f, (uint8_t)(k + 1));
            float mid = (float)((lo + hi) / 2); /* exact: few bits */
            cr_assert_eq((double)mid, (lo + hi) / 2);
            float v[3] = {mid, nextafterf(mid, 0), nextafterf(mid, INFINITY)};
            for (int j = 0; j < 3; j++)
                check_from(f, s ? -v[j] : v[j]);
            /* the tie goes to the even code */
            uint8_t c = lib_from(f, mid);
            cr_assert_eq(c & 1, 0, "%s: the tie %g went to the odd code %#04x", f->name,
                         (double)mid, c);
        }
    }
}

Test(fp8, ties_to_even_and_their_neighbours)
{
    each_format(ties);
}

static void saturation(const struct fmt *f)
{
    const double max = ref_value(f, f->maxc);
    /* the next value the exponent would give, and half-way up to it */
    const double step = max - ref_value(f, (uint8_t)(f->maxc - 1));
    const float big[] = {(float)(max + step / 2), (float)(max + step / 2) + 1.0f,
                         (float)(max + step), (float)(4 * max), 0x1p100f, FLT_MAX, INFINITY};
    for (size_t i = 0; i < sizeof(big) / sizeof(big[0]); i++) {
        cr_assert_eq(lib_from(f, big[i]), f->maxc, "%s: %g does not saturate to %#04x",
                     f->name, (double)big[i], f->maxc);
        cr_assert_eq(lib_from(f, -big[i]), f->maxc | 0x80, "%s: %g does not saturate",
                     f->name, (double)-big[i]);
    }
    const uint32_t nans[] = {0x7fc00000u, 0x7f800001u, 0xffc00000u, 0x7fffffffu};
    for (size_t i = 0; i < sizeof(nans) / sizeof(nans[0]); i++)
        check_from(f, fp8_f32_from_bits(nans[i]));
    /* below half the smallest subnormal: a signed zero; at it: the tie to 0 */
    const double tiny = ref_value(f, 1);
    cr_assert_eq(lib_from(f, (float)(tiny / 2)), 0);
    cr_assert_eq(lib_from(f, -(float)(tiny / 2)), 0x80);
    cr_assert_eq(lib_from(f, nextafterf((float)(tiny / 2), 1)), 1);
    cr_assert_eq(lib_from(f, 0x1p-149f), 0);
    cr_assert_eq(lib_from(f, -0.0f), 0x80);
    /* the largest subnormal rounds up into the smallest normal */
    const double minnorm = ref_value(f, (uint8_t)(1 << f->M));
    check_from(f, nextafterf((float)minnorm, 0));
}

Test(fp8, saturation_nan_and_underflow)
{
    each_format(saturation);
}

static uint64_t rng(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static void random_floats(const struct fmt *f)
{
    uint64_t s = 42;
    for (int i = 0; i < 200000; i++) {
        /* exponents around the format's range, every mantissa */
        uint32_t b = (uint32_t)rng(&s);
        int e = 127 - f->B - f->M - 4 + (int)(b % (uint32_t)(2 * f->B + f->M + 10));
        uint32_t bits = (b & 0x80000000u) | ((uint32_t)e << 23) | ((uint32_t)rng(&s) & 0x7fffffu);
        check_from(f, fp8_f32_from_bits(bits));
    }
}

Test(fp8, random_floats_round_like_the_reference)
{
    each_format(random_floats);
}

/* The reduction kernels: each element the reference rounding of the exact
 * result (sums and products of two fp8 values are exact in fp32). */
static double ref_op(fc_op_t op, double x, double y)
{
    switch (op) {
    case FC_SUM:
    case FC_AVG: return x + y;
    case FC_PROD: return x * y;
    case FC_MIN:
        if (isnan(x) || isnan(y))
            return isnan(x) ? x : y;
        if (x == y)
            return signbit(x) ? x : y;
        return x < y ? x : y;
    case FC_MAX:
        if (isnan(x) || isnan(y))
            return isnan(x) ? x : y;
        if (x == y)
            return signbit(x) ? y : x;
        return x > y ? x : y;
    }
    return 0;
}

static double val_or_special(const struct fmt *f, uint8_t c)
{
    if (ref_isnan(f, c))
        return NAN;
    if (ref_isinf(f, c))
        return c & 0x80 ? -INFINITY : INFINITY;
    return ref_value(f, c);
}

static void kernels(const struct fmt *f)
{
    enum { N = 65536 + 7 };
    static uint8_t a[N + 4], b[N + 4], d[N + 4];
    const fc_op_t ops[] = {FC_SUM, FC_PROD, FC_MIN, FC_MAX, FC_AVG};
    for (size_t o = 0; o < 5; o++) {
        /* every pair of codes once (256 x 256), then some more */
        for (size_t i = 0; i < N; i++) {
            a[i] = (uint8_t)(i & 0xff);
            b[i] = (uint8_t)((i >> 8) & 0xff);
        }
        memset(d, 0xa5, sizeof(d));
        reduce_fn k = reduce_fn_get(f->dt, ops[o]);
        cr_assert_not_null(k);
        k(d, a, b, N);
        for (size_t i = 0; i < N; i++) {
            double r = ref_op(ops[o], val_or_special(f, a[i]), val_or_special(f, b[i]));
            uint8_t want = ref_round(f, r);
            if (isnan(r))
                cr_assert(ref_isnan(f, d[i]), "%s %s(%#04x, %#04x) = %#04x, expected NaN",
                          f->name, reduce_op_name(ops[o]), a[i], b[i], d[i]);
            else
                cr_assert_eq(d[i], want, "%s %s(%#04x, %#04x) = %#04x (%g), expected %#04x (%g)",
                             f->name, reduce_op_name(ops[o]), a[i], b[i], d[i],
                             ref_value(f, d[i]), want, ref_value(f, want));
        }
        for (size_t i = N; i < N + 4; i++)
            cr_assert_eq(d[i], 0xa5, "%s: the kernel wrote past the end", f->name);
    }
    /* AVG's final division: one rounding of the quotient */
    reduce_scale_fn sc = reduce_scale_get(f->dt);
    for (uint32_t div = 1; div <= 9; div++) {
        for (int c = 0; c < 256; c++)
            a[c] = (uint8_t)c;
        sc(d, a, 256, div);
        for (int c = 0; c < 256; c++) {
            double v = val_or_special(f, (uint8_t)c);
            if (isnan(v))
                cr_assert(ref_isnan(f, d[c]));
            else
                cr_assert_eq(d[c], ref_round(f, v / div), "%s: %#04x / %u = %#04x, expected %#04x",
                             f->name, c, div, d[c], ref_round(f, v / div));
        }
    }
}

Test(fp8, kernels_on_every_pair_of_codes)
{
    each_format(kernels);
}

Test(fp8, sizes_and_names)
{
    cr_assert_eq(fc_datatype_size(FC_FLOAT8_E4M3), 1);
    cr_assert_eq(fc_datatype_size(FC_FLOAT8_E5M2), 1);
    cr_assert_str_eq(reduce_dt_name(FC_FLOAT8_E4M3), "float8_e4m3");
    cr_assert_str_eq(reduce_dt_name(FC_FLOAT8_E5M2), "float8_e5m2");
    cr_assert(!reduce_dt_valid(FC_FLOAT8_E5M2 + 1));
}

/* The pre-scaled sum's first step: x * scalar in the type's arithmetic. */
Test(premul, every_type_multiplies_like_its_prod)
{
    for (int dt = 0; reduce_dt_valid(dt); dt++) {
        enum { N = 5031 }; /* more than two of the fused kernel's tiles */
        static unsigned char x[N * 8], m[N * 8], want[N * 8], got[N * 8 + 8];
        const size_t es = fc_datatype_size((fc_datatype_t)dt);
        uint64_t s = 7 + (uint64_t)dt;
        for (size_t i = 0; i < N * es; i++)
            x[i] = (unsigned char)rng(&s);
        if (dt == FC_FLOAT16 || dt == FC_BFLOAT16 || dt == FC_FLOAT32 || dt == FC_FLOAT64)
            for (size_t i = 0; i < N; i++) /* finite values, no NaN to compare */
                x[i * es + es - 1] &= 0x3f;
        unsigned char scalar[8];
        memcpy(scalar, x + 5 * es, es); /* one of the inputs as the scalar */
        for (size_t i = 0; i < N; i++)
            memcpy(m + i * es, scalar, es);
        reduce_fn_get((fc_datatype_t)dt, FC_PROD)(want, x, m, N);
        memset(got, 0x5a, sizeof(got));
        reduce_premul_get((fc_datatype_t)dt)(got, x, N, scalar);
        for (size_t i = 0; i < N * es; i++)
            if (got[i] != want[i])
                cr_assert_fail("%s: element %zu differs from the product kernel's",
                               reduce_dt_name(dt), i / es);
        cr_assert_eq(got[N * es], 0x5a, "%s: wrote past the end", reduce_dt_name(dt));
        /* fused with the sum, either operand scaled, over several tiles */
        static unsigned char y[N * 8], sum[N * 8];
        for (size_t i = 0; i < N * es; i++)
            y[i] = (unsigned char)rng(&s);
        if (dt == FC_FLOAT16 || dt == FC_BFLOAT16 || dt == FC_FLOAT32 || dt == FC_FLOAT64)
            for (size_t i = 0; i < N; i++)
                y[i * es + es - 1] &= 0x3f;
        reduce_fn_get((fc_datatype_t)dt, FC_SUM)(sum, want, y, N);
        for (int pm = 1; pm <= 2; pm++) {
            memset(got, 0x5a, sizeof(got));
            reduce_premul_sum((fc_datatype_t)dt, pm, got, pm == 1 ? x : y, pm == 1 ? y : x, N,
                              scalar);
            if (pm == 2) /* a + b*s: the sum's operands in the other order */
                reduce_fn_get((fc_datatype_t)dt, FC_SUM)(sum, y, want, N);
            cr_assert(memcmp(got, sum, N * es) == 0, "%s: the fused sum (operand %d scaled) "
                      "differs from scaling, then summing", reduce_dt_name(dt), pm);
            cr_assert_eq(got[N * es], 0x5a, "%s: the fused sum wrote past the end",
                         reduce_dt_name(dt));
        }
        /* in place */
        memcpy(got, x, N * es);
        reduce_premul_get((fc_datatype_t)dt)(got, got, N, scalar);
        cr_assert(memcmp(got, want, N * es) == 0, "%s: in place differs", reduce_dt_name(dt));
    }
    /* a known value each: 3 * 2.5 in fp8 e4m3 is 7.5; e5m2 rounds it to 8 */
    uint8_t in = fp8_e4m3_from_f32(3.0f), sc = fp8_e4m3_from_f32(2.5f), out;
    reduce_premul_get(FC_FLOAT8_E4M3)(&out, &in, 1, &sc);
    cr_assert_eq(fp8_e4m3_to_f32(out), 7.5f);
    in = fp8_e5m2_from_f32(3.0f), sc = fp8_e5m2_from_f32(2.5f);
    reduce_premul_get(FC_FLOAT8_E5M2)(&out, &in, 1, &sc);
    cr_assert_eq(fp8_e5m2_to_f32(out), 8.0f);
    int32_t iv = 7, is = -3, io;
    reduce_premul_get(FC_INT32)(&io, &iv, 1, &is);
    cr_assert_eq(io, -21);
}
