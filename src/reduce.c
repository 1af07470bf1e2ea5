/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Typed reduction kernels for host memory (see reduce.h for the contract).
 *
 * Layout of this file:
 *   1. element access helpers and bit casts,
 *   2. fp16 / bf16 <-> fp32 conversions,
 *   3. the binary operators,
 *   4. kernel generators: one macro instantiation per datatype emits the
 *      SUM, PROD, MIN and MAX kernels and the scale kernel for that type,
 *   5. lookup tables and the small public helpers.
 *
 * Design notes:
 *  - Buffers are accessed through pointers to the element type (uint16_t
 *    for the half types), so they must be aligned for that type, as any C
 *    object of it is. (Loading through memcpy would lift that requirement,
 *    but GCC 12 then turns some loads into integer-mode moves it cannot
 *    vectorise, e.g. in the fp64 MIN/MAX kernels.) The signed integer types
 *    are read through their unsigned twin where needed, which aliasing
 *    rules allow.
 *  - Kernels take no restrict qualifiers because dst may equal a or b; GCC
 *    vectorises anyway by emitting a runtime overlap check (exact aliasing
 *    is handled by the per-element load-compute-store order: element i of
 *    dst is written only after element i of a and b has been read).
 *  - Everything inside the loops is straight-line code with selects (?: or
 *    bit masks) instead of branches, so that a loop body becomes vector
 *    blends. Values that are only needed in some lanes are computed for all
 *    lanes from inputs clamped to a harmless range, which keeps every lane
 *    free of UB (e.g. no out-of-range float->int conversion). Which select
 *    form is used where is chosen by what GCC 12 vectorises at -O3 for
 *    baseline x86-64 (SSE2); see the comments at each.
 *  - Integer SUM/PROD are computed on the unsigned type of the same width and
 *    loaded/stored through it, so wraparound is well defined and there is
 *    no signed-overflow UB nor implementation-defined unsigned->signed
 *    conversion (intN_t is two's complement by definition).
 */
#include "reduce.h"

#include <string.h>

#include "fp8.h"

/* ------------------------------------------------------------------------
 * 1. Element access
 * ------------------------------------------------------------------------ */
#define RD_DEF_ACCESS(tag, T)                                                                      \
    static inline T ld_##tag(const void *p, size_t i)                                              \
    {                                                                                              \
        return ((const T *)p)[i];                                                                  \
    }                                                                                              \
    static inline void st_##tag(void *p, size_t i, T v)                                            \
    {                                                                                              \
        ((T *)p)[i] = v;                                                                           \
    }

RD_DEF_ACCESS(i8, int8_t)
RD_DEF_ACCESS(u8, uint8_t)
RD_DEF_ACCESS(i32, int32_t)
RD_DEF_ACCESS(u32, uint32_t)
RD_DEF_ACCESS(i64, int64_t)
RD_DEF_ACCESS(u64, uint64_t)
RD_DEF_ACCESS(u16, uint16_t)
RD_DEF_ACCESS(f32, float)
RD_DEF_ACCESS(f64, double)

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline uint64_t f64_bits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static inline double f64_from_bits(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* ------------------------------------------------------------------------
 * 2. Half-precision conversions
 *
 * All of these are exact: the only floating-point operations used are
 * multiplications by powers of two whose results are normal fp32 numbers,
 * int<->float conversions of small integers, and a subtraction whose result
 * is exactly representable. None of them round, so the results do not depend
 * on the current rounding mode, and they are unaffected by FTZ/DAZ (no
 * operation produces an fp32 subnormal; an fp32 subnormal input flushed by
 * DAZ converts to the same half zero it would have produced anyway).
 * ------------------------------------------------------------------------ */

#define F32_ABS_MASK 0x7fffffffu
#define F32_EXP_MASK 0x7f800000u /* also the bits of +inf */
#define F32_QUIET 0x00400000u
#define F16_INF 0x7c00u
#define F16_QUIET 0x0200u
/* fp32 bit patterns of 2^-14 (smallest normal half) and 2^16: |f| in
 * [2^-14, 2^16) is a normal half after rounding (or rounds up to inf when
 * >= 65520, which the normal path produces by itself through the carry). */
#define F32_HALF_MIN_NORMAL 0x38800000u
#define F32_TWO_POW_16 0x47800000u
/* Exponent rebias fp32 (127) -> fp16 (15), in fp32 exponent position. */
#define F16_REBIAS ((uint32_t)(127 - 15) << 23)

/* c ? x : y as a bitwise blend. Used where one of the candidates comes from
 * floating-point arithmetic: with a plain ?: GCC sinks that arithmetic into
 * a conditional block, and then (under the default -ftrapping-math) refuses
 * to if-convert it back, so the loop would not vectorise. */
static inline uint32_t sel32(int c, uint32_t x, uint32_t y)
{
    uint32_t m = 0u - (uint32_t)c;
    return (x & m) | (y & ~m);
}

static inline float rd_half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t em = h & 0x7fffu; /* exponent and mantissa */

    /* Normal half: shift the 5+10 bits into place and rebias the exponent. */
    uint32_t normal = (em << 13) + F16_REBIAS;
    /* Inf/NaN: exponent all ones, payload kept in the top mantissa bits, and
     * a NaN gets the quiet bit (a signalling NaN must not escape). */
    uint32_t infnan = (em << 13) | F32_EXP_MASK | (em > F16_INF ? F32_QUIET : 0u);
    /* Zero and subnormal: value is m * 2^-24 with m < 1024. The int->float
     * conversion is exact, as is the scaling (the result is an fp32 normal
     * or zero). Computed for every input (em is at most 0x7fff, harmless). */
    uint32_t sub = f32_bits((float)(int32_t)em * 0x1p-24f);

    uint32_t r = sel32(em >= F16_INF, infnan, sel32(em >= 0x0400u, normal, sub));
    return f32_from_bits(r | sign);
}

static inline uint16_t rd_float_to_half(float f)
{
    uint32_t x = f32_bits(f);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t a = x & F32_ABS_MASK;

    /* Normal path, |f| in [2^-14, 2^16): rebias and round the 13 dropped
     * mantissa bits to nearest-even by adding 0xfff plus the lowest kept bit;
     * a carry out of the mantissa correctly bumps the exponent, and from the
     * top binade produces exactly 0x7c00 (inf) for |f| >= 65520. Unsigned
     * wraparound for lanes where a is out of range is harmless. */
    uint32_t normal = (a - F16_REBIAS + 0x0fffu + ((a >> 13) & 1u)) >> 13;

    /* Subnormal/zero path, |f| < 2^-14: the result is round(|f| * 2^24).
     * The scaling is exact (its result is >= 2^-125 or zero), truncation to
     * int is exact, and so is the fraction (xs - t). The input is clamped so
     * that other lanes never convert an out-of-range float to int. */
    uint32_t as = sel32(a < F32_HALF_MIN_NORMAL, a, 0u);
    float xs = f32_from_bits(as) * 0x1p24f; /* in [0, 1024) */
    int32_t t = (int32_t)xs;
    float frac = xs - (float)t;
    uint32_t up = sel32(frac == 0.5f, (uint32_t)t & 1u, (uint32_t)(frac > 0.5f));
    uint32_t sub = (uint32_t)t + up; /* 1024 means "rounded up to 2^-14" */

    /* Inf/NaN and overflow: NaN keeps its top payload bits and is made quiet
     * (so a NaN whose payload sits in the low bits never becomes inf). */
    uint32_t infnan = F16_INF | (a > F32_EXP_MASK ? F16_QUIET | ((a >> 13) & 0x3ffu) : 0u);

    uint32_t r = sel32(a >= F32_TWO_POW_16, infnan, sel32(a >= F32_HALF_MIN_NORMAL, normal, sub));
    return (uint16_t)(r | sign);
}

static inline float rd_bf16_to_float(uint16_t h)
{
    /* bf16 is the top half of fp32; only a signalling NaN needs the quiet
     * bit set. */
    uint32_t x = (uint32_t)h << 16;
    uint32_t q = (x & F32_ABS_MASK) > F32_EXP_MASK ? F32_QUIET : 0u;
    return f32_from_bits(x | q);
}

static inline uint16_t rd_float_to_bf16(float f)
{
    uint32_t x = f32_bits(f);
    /* RNE on the dropped 16 bits. For finite values a carry into the
     * exponent is correct (up to inf from beyond the largest bf16), and
     * inf + 0x7fff does not carry. A NaN must not take this path: e.g.
     * 0x7fffffff would carry into the sign and 0x7f800001 would truncate to
     * inf. Instead keep the top payload and set the quiet bit. */
    uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
    uint32_t nan = (x >> 16) | 0x0040u;
    uint32_t r = (x & F32_ABS_MASK) > F32_EXP_MASK ? nan : rounded;
    return (uint16_t)r;
}

/* The public conversions; the kernels use the inline versions directly
 * (an out-of-line call in the loop body would prevent vectorisation). */
float reduce_half_to_float(uint16_t h)
{
    return rd_half_to_float(h);
}

uint16_t reduce_float_to_half(float f)
{
    return rd_float_to_half(f);
}

float reduce_bf16_to_float(uint16_t h)
{
    return rd_bf16_to_float(h);
}

uint16_t reduce_float_to_bf16(float f)
{
    return rd_float_to_bf16(f);
}

/* Element access for the narrow floating types, stored as raw (u16 or u8):
 * loads widen to fp32 (exactly), stores round to nearest-even; the fp8
 * stores (fp8.h) also saturate to the largest finite value. */
#define RD_DEF_NARROW(tag, raw, to_f32, from_f32)                                                  \
    static inline float ld_##tag(const void *p, size_t i)                                          \
    {                                                                                              \
        return to_f32(ld_##raw(p, i));                                                             \
    }                                                                                              \
    static inline void st_##tag(void *p, size_t i, float v)                                        \
    {                                                                                              \
        st_##raw(p, i, from_f32(v));                                                               \
    }

RD_DEF_NARROW(f16, u16, rd_half_to_float, rd_float_to_half)
RD_DEF_NARROW(bf16, u16, rd_bf16_to_float, rd_float_to_bf16)
RD_DEF_NARROW(e4m3, u8, fp8_e4m3_to_f32, fp8_e4m3_from_f32)
RD_DEF_NARROW(e5m2, u8, fp8_e5m2_to_f32, fp8_e5m2_from_f32)

/* ------------------------------------------------------------------------
 * 3. Operators
 * ------------------------------------------------------------------------ */

/*
 * Integer MIN/MAX. 8- and 32-bit types compare natively. SSE2 (baseline
 * x86-64) has no 64-bit compare, so GCC would leave a plain "x < y ? x : y"
 * on int64 scalar; instead the 64-bit types work on the unsigned bit pattern
 * with the branch-free comparisons of Hacker's Delight (2-12), whose sign bit
 * is the result, and a xor blend. With SSE4.2/AVX2 this costs a few extra
 * ALU ops in a loop that is bound by memory bandwidth anyway.
 */
#define RD_DEF_IMINMAX(tag, T)                                                                     \
    static inline T min_##tag(T x, T y)                                                            \
    {                                                                                              \
        return x < y ? x : y;                                                                      \
    }                                                                                              \
    static inline T max_##tag(T x, T y)                                                            \
    {                                                                                              \
        return x > y ? x : y;                                                                      \
    }

RD_DEF_IMINMAX(i8, int8_t)
RD_DEF_IMINMAX(u8, uint8_t)
RD_DEF_IMINMAX(i32, int32_t)
RD_DEF_IMINMAX(u32, uint32_t)

/* 1 if x < y as signed (two's complement) values, else 0. */
static inline uint64_t lt_s64(uint64_t x, uint64_t y)
{
    uint64_t d = x - y;
    return (d ^ ((x ^ y) & (d ^ x))) >> 63;
}

/* 1 if x < y as unsigned values, else 0. */
static inline uint64_t lt_u64(uint64_t x, uint64_t y)
{
    return ((~x & y) | (~(x ^ y) & (x - y))) >> 63;
}

/* c ? x : y for c in {0, 1}. */
static inline uint64_t blend64(uint64_t c, uint64_t x, uint64_t y)
{
    return y ^ ((x ^ y) & (0u - c));
}

#define RD_DEF_IMINMAX64(tag, LT)                                                                  \
    static inline uint64_t min_##tag(uint64_t x, uint64_t y)                                       \
    {                                                                                              \
        return blend64(LT(x, y), x, y);                                                            \
    }                                                                                              \
    static inline uint64_t max_##tag(uint64_t x, uint64_t y)                                       \
    {                                                                                              \
        return blend64(LT(y, x), x, y);                                                            \
    }

RD_DEF_IMINMAX64(i64, lt_s64)
RD_DEF_IMINMAX64(u64, lt_u64)

/*
 * Floating MIN/MAX propagate NaN, and order -0 below +0 so that both are
 * commutative bit for bit (ranks that combine the same values in a different
 * operand order, as in recursive doubling, still agree exactly). The result
 * is a bit blend of x and y:
 *
 *   min = (x & Q) | (y & ~P),  P = x < y || x is NaN,  Q = x <= y || x is NaN
 *   max = (x | ~Q) & (y | P),  P = x > y || x is NaN,  Q = x >= y || x is NaN
 *
 * Cases (for min; max is the mirror image):
 *   x < y or x NaN         P = Q = 1:  x
 *   x > y or y NaN (only)  P = Q = 0:  y
 *   x == y                 P = 0, Q = 1:  x | y, which is x except for
 *                          {-0, +0}, where OR gives -0 (AND, in max, +0).
 * With two NaN inputs the result is x: payloads are not canonicalised.
 *
 * fp32 (and so fp16/bf16) uses the masks directly: 3 compares and 3 logic
 * ops per vector, where a nested ?: compiles to about 3x as many (GCC does
 * not simplify the nested blend). For fp64, GCC 12 cannot vectorise the
 * widening of a double comparison to a 64-bit integer mask on SSE2, so the
 * same selection is written with ?: there (two flat selects: the nested
 * form costs half as many instructions again).
 */
static inline float min_f32(float x, float y)
{
    uint32_t p = 0u - (uint32_t)(x < y || x != x);
    uint32_t q = 0u - (uint32_t)(x <= y || x != x);
    return f32_from_bits((f32_bits(x) & q) | (f32_bits(y) & ~p));
}

static inline float max_f32(float x, float y)
{
    uint32_t p = 0u - (uint32_t)(x > y || x != x);
    uint32_t q = 0u - (uint32_t)(x >= y || x != x);
    return f32_from_bits((f32_bits(x) | ~q) & (f32_bits(y) | p));
}

static inline double min_f64(double x, double y)
{
    double both = f64_from_bits(f64_bits(x) | f64_bits(y));
    double r = (x < y || x != x) ? x : y;
    return x == y ? both : r;
}

static inline double max_f64(double x, double y)
{
    double both = f64_from_bits(f64_bits(x) & f64_bits(y));
    double r = (x > y || x != x) ? x : y;
    return x == y ? both : r;
}

/* ------------------------------------------------------------------------
 * 4. Kernel generators
 * ------------------------------------------------------------------------ */

/* dst[i] = EXPR(x, y) with x = LD(a, i), y = LD(b, i); LT is the type the
 * loads produce and the computation happens in. */
#define RD_DEF_KERNEL(name, LT, LD, ST, EXPR)                                                      \
    static void name(void *dst, const void *a, const void *b, size_t n)                            \
    {                                                                                              \
        for (size_t i = 0; i < n; i++) {                                                           \
            LT x = LD(a, i);                                                                       \
            LT y = LD(b, i);                                                                       \
            ST(dst, i, EXPR(x, y));                                                                \
        }                                                                                          \
    }

/* Floating SUM/PROD (integers have their own, on the unsigned type). */
#define RD_ADD(x, y) ((x) + (y))
#define RD_MUL(x, y) ((x) * (y))

/*
 * Integer type: tag and type; its unsigned twin (tag and type); the tag and
 * type MIN/MAX work on (the type itself, or the unsigned twin for 64 bits,
 * see above); WT, the 64-bit type of T's signedness used for division.
 * SUM/PROD load and store through the unsigned twin; the cast back to UT
 * truncates the int-promoted result of 8-bit arithmetic (255 * 255 fits in
 * int, so the promotion itself cannot overflow).
 * Scale divides in WT: "int32_t / uint32_t" would convert the dividend to
 * unsigned. C division truncates toward zero, and the quotient's magnitude
 * is at most the dividend's, so it fits back into T.
 */
#define RD_DEF_INT(tag, T, utag, UT, mtag, MT, WT)                                                 \
    static inline UT sum_##tag(UT x, UT y)                                                         \
    {                                                                                              \
        return (UT)(x + y);                                                                        \
    }                                                                                              \
    static inline UT prod_##tag(UT x, UT y)                                                        \
    {                                                                                              \
        return (UT)(x * y);                                                                        \
    }                                                                                              \
    RD_DEF_KERNEL(k_##tag##_sum, UT, ld_##utag, st_##utag, sum_##tag)                              \
    RD_DEF_KERNEL(k_##tag##_prod, UT, ld_##utag, st_##utag, prod_##tag)                            \
    RD_DEF_KERNEL(k_##tag##_min, MT, ld_##mtag, st_##mtag, min_##tag)                              \
    RD_DEF_KERNEL(k_##tag##_max, MT, ld_##mtag, st_##mtag, max_##tag)                              \
    static void s_##tag(void *dst, const void *src, size_t n, uint32_t d)                          \
    {                                                                                              \
        const WT div = (WT)RD_DIVISOR(d);                                                          \
        for (size_t i = 0; i < n; i++)                                                             \
            st_##tag(dst, i, (T)((WT)ld_##tag(src, i) / div));                                     \
    }                                                                                              \
    static void p_##tag(void *dst, const void *src, size_t n, const void *scalar)                  \
    {                                                                                              \
        UT m; /* the scalar may sit at any address */                                              \
        memcpy(&m, scalar, sizeof(m));                                                             \
        for (size_t i = 0; i < n; i++)                                                             \
            st_##utag(dst, i, prod_##tag(ld_##utag(src, i), m));                                  \
    }

/* The contract is divisor >= 1; a 0 (caller bug) is treated as 1 rather than
 * raising SIGFPE inside the library in the integer kernels. */
#define RD_DIVISOR(d) ((d) ? (d) : 1u)

/*
 * Floating type: tag (also the element access tag), the compute type CT and
 * the tag of CT's min/max helpers. The half types load into fp32 and round
 * on store, so each element of fp16/bf16 is computed in fp32 and rounded RNE
 * once. (For +, *, / that equals rounding the exact result directly to the
 * half type: fp32 has more than 2p + 2 bits for p = 11 and p = 8.)
 */
#define RD_DEF_FLOAT(tag, CT, mtag, ES)                                                            \
    RD_DEF_KERNEL(k_##tag##_sum, CT, ld_##tag, st_##tag, RD_ADD)                                   \
    RD_DEF_KERNEL(k_##tag##_prod, CT, ld_##tag, st_##tag, RD_MUL)                                  \
    RD_DEF_KERNEL(k_##tag##_min, CT, ld_##tag, st_##tag, min_##mtag)                               \
    RD_DEF_KERNEL(k_##tag##_max, CT, ld_##tag, st_##tag, max_##mtag)                               \
    static void s_##tag(void *dst, const void *src, size_t n, uint32_t d)                          \
    {                                                                                              \
        /* One rounding: the divisor converts exactly up to 2^24 (fp32) or                         \
         * always (fp64); the quotient rounds once in CT, and for the half                         \
         * types once more on the store, as every fp16/bf16 step does. */                          \
        const CT div = (CT)RD_DIVISOR(d);                                                          \
        for (size_t i = 0; i < n; i++)                                                             \
            st_##tag(dst, i, ld_##tag(src, i) / div);                                              \
    }                                                                                              \
    static void p_##tag(void *dst, const void *src, size_t n, const void *scalar)                  \
    {                                                                                              \
        uint64_t sv = 0; /* the scalar's ES bytes, aligned: it may sit at any address */           \
        memcpy(&sv, scalar, ES);                                                                   \
        const CT m = ld_##tag(&sv, 0);                                                             \
        for (size_t i = 0; i < n; i++)                                                             \
            st_##tag(dst, i, ld_##tag(src, i) * m);                                                \
    }

RD_DEF_INT(i8, int8_t, u8, uint8_t, i8, int8_t, int64_t)
RD_DEF_INT(u8, uint8_t, u8, uint8_t, u8, uint8_t, uint64_t)
RD_DEF_INT(i32, int32_t, u32, uint32_t, i32, int32_t, int64_t)
RD_DEF_INT(u32, uint32_t, u32, uint32_t, u32, uint32_t, uint64_t)
RD_DEF_INT(i64, int64_t, u64, uint64_t, u64, uint64_t, int64_t)
RD_DEF_INT(u64, uint64_t, u64, uint64_t, u64, uint64_t, uint64_t)
RD_DEF_FLOAT(f16, float, f32, 2)
RD_DEF_FLOAT(bf16, float, f32, 2)
RD_DEF_FLOAT(f32, float, f32, 4)
RD_DEF_FLOAT(f64, double, f64, 8)
RD_DEF_FLOAT(e4m3, float, f32, 1)
RD_DEF_FLOAT(e5m2, float, f32, 1)

/* ------------------------------------------------------------------------
 * 5. Tables and helpers
 * ------------------------------------------------------------------------ */

#define RD_NDT ((int)FC_FLOAT8_E5M2 + 1)
#define RD_NOP ((int)FC_AVG + 1)

/* Row order follows fc_datatype_t, column order fc_op_t. FC_AVG reduces
 * with the SUM kernel; its division is reduce_scale_get's, once, at the
 * end. */
#define RD_ROW(tag)                                                                                \
    {                                                                                              \
        k_##tag##_sum, k_##tag##_prod, k_##tag##_min, k_##tag##_max, k_##tag##_sum                 \
    }

static const reduce_fn rd_kernels[RD_NDT][RD_NOP] = {
    [FC_INT8] = RD_ROW(i8),     [FC_UINT8] = RD_ROW(u8),      [FC_INT32] = RD_ROW(i32),
    [FC_UINT32] = RD_ROW(u32),  [FC_INT64] = RD_ROW(i64),     [FC_UINT64] = RD_ROW(u64),
    [FC_FLOAT16] = RD_ROW(f16), [FC_BFLOAT16] = RD_ROW(bf16), [FC_FLOAT32] = RD_ROW(f32),
    [FC_FLOAT64] = RD_ROW(f64),  [FC_FLOAT8_E4M3] = RD_ROW(e4m3), [FC_FLOAT8_E5M2] = RD_ROW(e5m2),
};

static const reduce_scale_fn rd_scales[RD_NDT] = {
    [FC_INT8] = s_i8,     [FC_UINT8] = s_u8,    [FC_INT32] = s_i32,   [FC_UINT32] = s_u32,
    [FC_INT64] = s_i64,   [FC_UINT64] = s_u64,  [FC_FLOAT16] = s_f16, [FC_BFLOAT16] = s_bf16,
    [FC_FLOAT32] = s_f32, [FC_FLOAT64] = s_f64, [FC_FLOAT8_E4M3] = s_e4m3,
    [FC_FLOAT8_E5M2] = s_e5m2,
};

static const reduce_premul_fn rd_premuls[RD_NDT] = {
    [FC_INT8] = p_i8,     [FC_UINT8] = p_u8,    [FC_INT32] = p_i32,   [FC_UINT32] = p_u32,
    [FC_INT64] = p_i64,   [FC_UINT64] = p_u64,  [FC_FLOAT16] = p_f16, [FC_BFLOAT16] = p_bf16,
    [FC_FLOAT32] = p_f32, [FC_FLOAT64] = p_f64, [FC_FLOAT8_E4M3] = p_e4m3,
    [FC_FLOAT8_E5M2] = p_e5m2,
};

static const char *const rd_dt_names[RD_NDT] = {
    [FC_INT8] = "int8",       [FC_UINT8] = "uint8",       [FC_INT32] = "int32",
    [FC_UINT32] = "uint32",   [FC_INT64] = "int64",       [FC_UINT64] = "uint64",
    [FC_FLOAT16] = "float16", [FC_BFLOAT16] = "bfloat16", [FC_FLOAT32] = "float32",
    [FC_FLOAT64] = "float64", [FC_FLOAT8_E4M3] = "float8_e4m3", [FC_FLOAT8_E5M2] = "float8_e5m2",
};

static const char *const rd_op_names[RD_NOP] = {
    [FC_SUM] = "sum", [FC_PROD] = "prod", [FC_MIN] = "min", [FC_MAX] = "max", [FC_AVG] = "avg",
};

int reduce_dt_valid(int dt)
{
    return dt >= 0 && dt < RD_NDT;
}

int reduce_op_valid(int op)
{
    return op >= 0 && op < RD_NOP;
}

/* The enum arguments are compared as unsigned: whatever integer type the
 * compiler picked for the enum, an out-of-range (even negative) value then
 * fails the single bounds check. */
reduce_fn reduce_fn_get(fc_datatype_t dt, fc_op_t op)
{
    if ((unsigned)dt >= (unsigned)RD_NDT || (unsigned)op >= (unsigned)RD_NOP)
        return NULL;
    return rd_kernels[dt][op];
}

reduce_scale_fn reduce_scale_get(fc_datatype_t dt)
{
    if ((unsigned)dt >= (unsigned)RD_NDT)
        return NULL;
    return rd_scales[dt];
}

reduce_premul_fn reduce_premul_get(fc_datatype_t dt)
{
    if ((unsigned)dt >= (unsigned)RD_NDT)
        return NULL;
    return rd_premuls[dt];
}

void reduce_premul_sum(fc_datatype_t dt, int pmul, void *dst, const void *a, const void *b,
                       size_t n, const void *scalar)
{
    enum { TILE = 2048 }; /* elements: at most 16 KiB of products */
    uint64_t tmp[TILE];
    const size_t es = fc_datatype_size(dt);
    reduce_premul_fn pf = reduce_premul_get(dt);
    reduce_fn sum = reduce_fn_get(dt, FC_SUM);
    for (size_t i = 0; i < n; i += TILE) {
        const size_t k = n - i < TILE ? n - i : TILE, o = i * es;
        const char *x = (const char *)(pmul == 1 ? a : b) + o;
        pf(tmp, x, k, scalar);
        if (pmul == 1)
            sum((char *)dst + o, tmp, (const char *)b + o, k);
        else
            sum((char *)dst + o, (const char *)a + o, tmp, k);
    }
}

const char *reduce_dt_name(int dt)
{
    return reduce_dt_valid(dt) ? rd_dt_names[dt] : "invalid";
}

const char *reduce_op_name(int op)
{
    return reduce_op_valid(op) ? rd_op_names[op] : "invalid";
}
