/* SPDX-License-Identifier: BSD-3-Clause */
/* A 32-bit integer hash (a murmur-style finalizer) that the unit harness
 * and the functional tests fill their buffers from: values that look
 * random, yet every rank can compute any other rank's from its index. */
#ifndef FC_TEST_MIX_H
#define FC_TEST_MIX_H

#include <stdint.h>

static inline uint32_t mix(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    x ^= x >> 16;
    return x;
}

#endif
