/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fp8 <-> fp32 conversions, one source for the host kernels (reduce.c) and
 * the device kernels (gpu/gpu_kernels.cu), so both round alike bit for bit.
 *
 * The formats (OCP 8-bit floating point, as in CUDA's __nv_fp8_*):
 *  - e4m3 ("FN"): 4 exponent bits (bias 7), 3 mantissa bits, no
 *    infinities; S.1111.111 is NaN; largest finite 448 (0x7e), smallest
 *    normal 2^-6, smallest subnormal 2^-9;
 *  - e5m2: 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like:
 *    S.11111.00 is infinity, S.11111.xx (xx != 0) NaN; largest finite
 *    57344 (0x7b), smallest normal 2^-14, smallest subnormal 2^-16.
 *
 * To fp8: round to nearest, ties to even; a magnitude beyond the largest
 * finite value, infinities included, saturates to it (keeping the sign),
 * as CUDA's __NV_SATFINITE conversions do; NaN stays NaN (e4m3 0x7f,
 * e5m2 0x7e, with the sign). To fp32: exact (every fp8 value is an fp32
 * value); NaN becomes a quiet fp32 NaN, e5m2's infinities stay infinite.
 *
 * Every operation is exact: integer arithmetic on the bit pattern for
 * normal results, and for subnormal ones a multiplication by a power of
 * two (an fp32 normal result), a truncation of a value below 8 (or 4) and
 * a subtraction that cannot round. So the results depend neither on the
 * rounding mode nor on flush-to-zero (an fp32 subnormal input rounds to a
 * signed zero either way).
 */
#ifndef FC_FP8_H
#define FC_FP8_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define FP8_FN static __host__ __device__ inline
#else
#define FP8_FN static inline
#endif

FP8_FN uint32_t fp8_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

FP8_FN float fp8_f32_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* fp32 -> fp8 for a format of M mantissa bits and exponent bias B, whose
 * largest finite code is maxc and NaN code nanc (without the sign). */
FP8_FN uint8_t fp8_from_f32(float f, int M, int B, uint32_t maxc, uint32_t nanc)
{
    const uint32_t x = fp8_f32_bits(f);
    const uint32_t sign = (x >> 24) & 0x80u;
    const uint32_t a = x & 0x7fffffffu;
    /* smallest normal of the format, 2^(1-B), as fp32 bits */
    const uint32_t min_normal = (uint32_t)(1 - B + 127) << 23;
    uint32_t r;
    if (a > 0x7f800000u) {
        r = nanc;
    } else if (a >= min_normal) {
        /* rebias and round the 23 - M dropped bits to nearest even; a carry
         * out of the mantissa bumps the exponent, as it should */
        const int drop = 23 - M;
        const uint32_t lsb = (a >> drop) & 1u;
        const uint64_t v = (uint64_t)a - ((uint64_t)(127 - B) << 23) +
                           (((uint64_t)1 << (drop - 1)) - 1u) + lsb;
        r = (uint32_t)(v >> drop);
        if (r > maxc || a >= 0x7f800000u)
            r = maxc;
    } else {
        /* below the smallest normal: round(|f| * 2^(B - 1 + M)), a value in
         * [0, 2^M] (2^M being the smallest normal's code) */
        const float xs = fp8_f32_from_bits(a) * (float)(1u << (B - 1 + M));
        const uint32_t t = (uint32_t)xs;
        const float frac = xs - (float)t;
        r = t + (frac > 0.5f || (frac == 0.5f && (t & 1u)));
    }
    return (uint8_t)(r | sign);
}

/* fp8 -> fp32 for a format of E exponent and M mantissa bits, bias B;
 * inf_nan: the format has infinities (an all-ones exponent is inf or NaN)
 * rather than a single NaN code (all ones). */
FP8_FN float fp8_to_f32(uint8_t h, int E, int M, int B, int inf_nan)
{
    const uint32_t sign = (uint32_t)(h & 0x80u) << 24;
    const uint32_t em = h & 0x7fu;
    const uint32_t expo = em >> M;
    uint32_t r;
    if (inf_nan && expo == (1u << E) - 1)
        r = (em & ((1u << M) - 1)) ? 0x7fc00000u : 0x7f800000u;
    else if (!inf_nan && em == 0x7fu)
        r = 0x7fc00000u;
    else if (expo == 0) /* zero or subnormal: m * 2^(1 - B - M), exact */
        r = fp8_f32_bits((float)em / (float)(1u << (B - 1 + M)));
    else
        r = (em << (23 - M)) + ((uint32_t)(127 - B) << 23);
    return fp8_f32_from_bits(r | sign);
}

FP8_FN float fp8_e4m3_to_f32(uint8_t h)
{
    return fp8_to_f32(h, 4, 3, 7, 0);
}

FP8_FN uint8_t fp8_e4m3_from_f32(float f)
{
    return fp8_from_f32(f, 3, 7, 0x7eu, 0x7fu);
}

FP8_FN float fp8_e5m2_to_f32(uint8_t h)
{
    return fp8_to_f32(h, 5, 2, 15, 1);
}

FP8_FN uint8_t fp8_e5m2_from_f32(float f)
{
    return fp8_from_f32(f, 2, 15, 0x7bu, 0x7eu);
}

#endif /* FC_FP8_H */
