/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Typed reduction kernels for host memory.
 *
 * Every (datatype, op) pair has one kernel dst[i] = a[i] op b[i]. The kernels
 * are plain loops over restrict-free pointers that GCC vectorises at -O3
 * (check with -fopt-info-vec); dst may be exactly a or exactly b, never a
 * partial overlap.
 *
 * Semantics (API.md):
 *  - integer SUM/PROD wrap around (computed in the unsigned type);
 *  - FC_AVG reduces like FC_SUM; the division by the communicator size is a
 *    separate final step (reduce_scale_get), applied once to the total;
 *    integers divide truncating toward zero;
 *  - FLOAT16 (IEEE binary16) and BFLOAT16: each step is computed in fp32 and
 *    rounded to nearest-even when stored;
 *  - FLOAT8_E4M3 and FLOAT8_E5M2 likewise, and a result beyond the largest
 *    finite value (infinities included) saturates to it (fp8.h);
 *  - floating MIN/MAX propagate NaN: if either input is NaN the result is NaN
 *    (a NaN anywhere in a reduction shows up in the result instead of being
 *    silently dropped, which is what a divergence check wants).
 *
 * Implementation notes (reduce.c):
 *  - buffers must be aligned for their element type (2 bytes for the half
 *    types), as any C array of it is;
 *  - MIN/MAX treat -0 as below +0: min(-0, +0) = -0 and max(-0, +0) = +0 in
 *    either operand order, so both are commutative bit for bit;
 *  - a divisor of 0 passed to a scale kernel is treated as 1.
 */
#ifndef FC_REDUCE_H
#define FC_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "fabcoll.h"

typedef void (*reduce_fn)(void *dst, const void *a, const void *b, size_t n);
typedef void (*reduce_scale_fn)(void *dst, const void *src, size_t n, uint32_t divisor);

typedef void (*reduce_premul_fn)(void *dst, const void *src, size_t n, const void *scalar);

/* Kernel for (dt, op); NULL when dt or op is not a valid enum value. */
reduce_fn reduce_fn_get(fc_datatype_t dt, fc_op_t op);
/* dst[i] = src[i] / divisor (divisor >= 1); NULL for an invalid dt. */
reduce_scale_fn reduce_scale_get(fc_datatype_t dt);
/* dst = (a * *scalar) + b (pmul 1) or a + (b * *scalar) (pmul 2), with
 * each product rounded to dt as reduce_premul_get's, summed as FC_SUM's
 * kernel: the two kernels over tiles that stay in cache, so it costs what
 * a plain sum does. */
void reduce_premul_sum(fc_datatype_t dt, int pmul, void *dst, const void *a, const void *b,
                       size_t n, const void *scalar);
/* dst[i] = src[i] * *scalar (a value of dt) with dt's arithmetic: integers
 * wrap, the half and fp8 types multiply in fp32 and round (and saturate)
 * once; the first step of a pre-scaled sum (fc_op_create_premulsum).
 * NULL for an invalid dt. */
reduce_premul_fn reduce_premul_get(fc_datatype_t dt);

int reduce_dt_valid(int dt);
int reduce_op_valid(int op);
const char *reduce_dt_name(int dt); /* "float32", ...; "invalid" */
const char *reduce_op_name(int op); /* "sum", ...; "invalid" */

/* Scalar conversions, exact where the format allows, round to nearest-even
 * otherwise; NaN stays NaN (quiet), infinities stay infinite, fp32 values
 * beyond the half range round to infinity, subnormals are kept. */
float reduce_half_to_float(uint16_t h);
uint16_t reduce_float_to_half(float f);
float reduce_bf16_to_float(uint16_t h);
uint16_t reduce_float_to_bf16(float f);

#endif /* FC_REDUCE_H */
