// SPDX-License-Identifier: BSD-3-Clause
//
// Reduction kernels for device memory, every datatype x op, with the same
// semantics as the host kernels (src/reduce.h): integers wrap (computed in
// the unsigned type), float16/bfloat16 are computed in fp32 and rounded to
// nearest-even when stored, floating MIN/MAX propagate NaN (-0 below +0),
// AVG reduces like SUM and a separate scale kernel divides once.
//
// Compiled to a fatbin that is embedded in libfabcoll and loaded through
// the driver API at run time (src/gpu.c), so the library needs no CUDA
// runtime and runs where no GPU exists. Kernel names are extern "C":
// fc_reduce_<type>_<op>, fc_scale_<type> and fc_fused_<type>_<op>.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "../fp8.h"   // the fp8 conversions, shared with the host kernels
#include "gpu_exec.h" // the ring's layout, shared with gpu.c

// fp8 elements: one byte each, widened to fp32 exactly and stored rounded
// to nearest even, saturating (fp8.h, the host's own conversions)
struct fc_e4m3 {
    uint8_t v;
};
struct fc_e5m2 {
    uint8_t v;
};

template <typename T> struct acc {
    typedef T type;
    __device__ static T load(T v) { return v; }
    __device__ static T store(T v) { return v; }
};
template <> struct acc<__half> {
    typedef float type;
    __device__ static float load(__half v) { return __half2float(v); }
    __device__ static __half store(float v) { return __float2half_rn(v); }
};
template <> struct acc<fc_e4m3> {
    typedef float type;
    __device__ static float load(fc_e4m3 v) { return fp8_e4m3_to_f32(v.v); }
    __device__ static fc_e4m3 store(float v) { return fc_e4m3{fp8_e4m3_from_f32(v)}; }
};
template <> struct acc<fc_e5m2> {
    typedef float type;
    __device__ static float load(fc_e5m2 v) { return fp8_e5m2_to_f32(v.v); }
    __device__ static fc_e5m2 store(float v) { return fc_e5m2{fp8_e5m2_from_f32(v)}; }
};
template <> struct acc<__nv_bfloat16> {
    typedef float type;
    __device__ static float load(__nv_bfloat16 v) { return __bfloat162float(v); }
    __device__ static __nv_bfloat16 store(float v) { return __float2bfloat16_rn(v); }
};

// integer arithmetic that wraps: in the unsigned type of the same width
template <typename T> struct wrap { typedef T u; };
template <> struct wrap<int8_t> { typedef uint8_t u; };
template <> struct wrap<int32_t> { typedef uint32_t u; };
template <> struct wrap<int64_t> { typedef uint64_t u; };

template <typename A> __device__ inline bool is_nan(A x) { return false; }
template <> __device__ inline bool is_nan<float>(float x) { return x != x; }
template <> __device__ inline bool is_nan<double>(double x) { return x != x; }

template <typename A> __device__ inline bool less(A x, A y) { return x < y; }
// -0 below +0, so min/max are commutative bit for bit
template <> __device__ inline bool less<float>(float x, float y)
{
    return x < y || (x == y && signbit(x) && !signbit(y));
}
template <> __device__ inline bool less<double>(double x, double y)
{
    return x < y || (x == y && signbit(x) && !signbit(y));
}

struct op_sum {
    template <typename A> __device__ static A f(A x, A y) { return x + y; }
};
struct op_prod {
    template <typename A> __device__ static A f(A x, A y) { return x * y; }
};
struct op_min {
    template <typename A> __device__ static A f(A x, A y)
    {
        if (is_nan(x))
            return x;
        if (is_nan(y))
            return y;
        return less(y, x) ? y : x;
    }
};
struct op_max {
    template <typename A> __device__ static A f(A x, A y)
    {
        if (is_nan(x))
            return x;
        if (is_nan(y))
            return y;
        return less(x, y) ? y : x;
    }
};

template <typename T, typename Op, bool Int> struct apply;
template <typename T, typename Op> struct apply<T, Op, true> {
    __device__ static T f(T x, T y)
    {
        typedef typename wrap<T>::u U;
        return (T)Op::template f<U>((U)x, (U)y);
    }
};
template <typename T, typename Op> struct apply<T, Op, false> {
    __device__ static T f(T x, T y)
    {
        typedef typename acc<T>::type A;
        return acc<T>::store(Op::template f<A>(acc<T>::load(x), acc<T>::load(y)));
    }
};
// MIN/MAX on integers compare in the signed type itself
template <typename T> struct apply<T, op_min, true> {
    __device__ static T f(T x, T y) { return y < x ? y : x; }
};
template <typename T> struct apply<T, op_max, true> {
    __device__ static T f(T x, T y) { return x < y ? y : x; }
};

template <typename T> struct is_int { static const bool v = true; };
template <> struct is_int<__half> { static const bool v = false; };
template <> struct is_int<__nv_bfloat16> { static const bool v = false; };
template <> struct is_int<fc_e4m3> { static const bool v = false; };
template <> struct is_int<fc_e5m2> { static const bool v = false; };
template <> struct is_int<float> { static const bool v = false; };
template <> struct is_int<double> { static const bool v = false; };

template <typename T, typename Op>
__device__ void reduce(T *__restrict__ dst, const T *a, const T *b, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = apply<T, Op, is_int<T>::v>::f(a[i], b[i]);
}

// integer division truncating toward zero in 64 bits of the type's
// signedness (a divisor above the type's range must not wrap)
template <typename T> struct div64 {
    __device__ static T f(T x, uint32_t d) { return (T)((int64_t)x / (int64_t)d); }
};
template <> struct div64<uint8_t> {
    __device__ static uint8_t f(uint8_t x, uint32_t d) { return (uint8_t)(x / d); }
};
template <> struct div64<uint32_t> {
    __device__ static uint32_t f(uint32_t x, uint32_t d) { return x / d; }
};
template <> struct div64<uint64_t> {
    __device__ static uint64_t f(uint64_t x, uint32_t d) { return x / d; }
};

template <typename T, bool Int> struct scaler {
    __device__ static T f(T x, uint32_t d) { return div64<T>::f(x, d); }
};
template <typename T> struct scaler<T, false> {
    __device__ static T f(T x, uint32_t d)
    {
        return acc<T>::store(acc<T>::load(x) / (typename acc<T>::type)d);
    }
};

template <typename T> __device__ void scale(T *dst, const T *src, size_t n, uint32_t d)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = scaler<T, is_int<T>::v>::f(src[i], d ? d : 1);
}

// a pre-scaled sum's first step: dst = src * m, as the PROD kernel computes
template <typename T> __device__ void premul(T *dst, const T *src, size_t n, T m)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        dst[i] = apply<T, op_prod, is_int<T>::v>::f(src[i], m);
}

// The fused small allreduce (src/gpu/fused.c, coll/allreduce_gather.c), one
// block. Vectors cross PCIe in pinned host memory as 8-byte words that
// carry 4 bytes of data and the call's seq (NCCL's LL idea): a word is
// valid once its seq matches, so neither side needs a flag write, a fence
// or a second read for it. out: this rank's vector (W words, W = bytes/4
// rounded up); in: the n-1 other vectors as the host received them, in
// the order of the exchange (vector j-1 is rank rank+j mod n's). flags
// (pinned host): [2] the kernel writes seq when recv holds the result; [3]
// the host's abort watermark: the kernel gives up once (int32_t)(flags[3]
// - seq) >= 0 (the host writes seq - 1 before a launch, seq when the call
// fails, so a kernel left over from a failed call returns whenever it
// runs); [4] the kernel writes seq as it leaves, either way. The vectors
// are reduced in rank order, ((v0 op v1) op v2) ...,
// rounded to the type after each step, like the host's reduction chain;
// div (FC_AVG) divides at the end. No flags: return at once (warm-up).
#define FUSED_SMEM (33 << 10) // (n-1) * W * 4 bytes at most (fused.c)
// element i of rank r's vector: this rank's from send, the others' from
// the exchange's order in peers (vector j - 1 for rank rank + j mod n)
template <typename T>
__device__ inline T peer_or_own(const T *send, const uint32_t *peers, size_t W, int r, int n,
                                int rank, size_t i)
{
    if (r == rank)
        return send[i];
    return ((const T *)(peers + (size_t)((r - rank + n) % n - 1) * W))[i];
}

template <typename T, typename Op>
__device__ void fused(const T *send, T *recv, uint64_t *out, const uint64_t *in,
                      volatile uint32_t *flags, uint32_t seq, int n, int rank, size_t count,
                      uint32_t div)
{
    if (!flags)
        return;
    __shared__ uint32_t peers[FUSED_SMEM / 4];
    __shared__ int stop;
    const size_t bytes = count * sizeof(T), W = (bytes + 3) / 4;
    const uint8_t *sb = (const uint8_t *)send;
    if (threadIdx.x == 0)
        stop = 0;
    const bool aligned = ((uintptr_t)send & 3) == 0;
    for (size_t w = threadIdx.x; w < W; w += blockDim.x) {
        uint32_t d = 0;
        if (aligned && 4 * w + 4 <= bytes)
            d = ((const uint32_t *)send)[w];
        else
            for (int k = 0; k < 4 && 4 * w + k < bytes; k++)
                d |= (uint32_t)sb[4 * w + k] << (8 * k);
        *(volatile uint64_t *)(out + w) = (uint64_t)seq << 32 | d;
    }
    __syncthreads();
    for (size_t w = threadIdx.x; w < (size_t)(n - 1) * W; w += blockDim.x) {
        uint64_t v;
        for (unsigned spin = 1; ((v = *(const volatile uint64_t *)(in + w)) >> 32) != seq;
             spin++) {
            if (spin % 1024 == 0 &&
                (*(volatile int *)&stop || (int32_t)(flags[3] - seq) >= 0)) {
                stop = 1;
                break;
            }
        }
        peers[w] = (uint32_t)v;
    }
    __syncthreads();
    if (stop) {
        if (threadIdx.x == 0)
            flags[4] = seq; // left: the host may free the memory
        return;
    }
    for (size_t i = threadIdx.x; i < count; i += blockDim.x) {
        T acc = peer_or_own(send, peers, W, 0, n, rank, i);
        for (int r = 1; r < n; r++)
            acc = apply<T, Op, is_int<T>::v>::f(acc, peer_or_own(send, peers, W, r, n, rank, i));
        recv[i] = div ? scaler<T, is_int<T>::v>::f(acc, div) : acc;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence_system();
        flags[2] = seq;
        flags[4] = seq; // left: the host may free the memory
    }
}

#define FUSED(T, name, op)                                                                     \
    extern "C" __global__ void __launch_bounds__(1024)                                         \
        fc_fused_##name##_##op(const T *s, T *r, uint64_t *o, const uint64_t *in,              \
                               volatile uint32_t *f, uint32_t seq, int n, int rank,           \
                               size_t count, uint32_t div)                                     \
    {                                                                                          \
        fused<T, op_##op>(s, r, o, in, f, seq, n, rank, count, div);                           \
    }

// ---- the executor (src/gpu.c, gpu_exec_*) ----------------------------------
// One kernel on a caller's stream runs the copies, reductions and scales of
// one stream-ordered collective, in order, as the host posts them to a ring
// of commands in pinned host memory; it leaves at an EXIT command. All of
// a stream-ordered collective's GPU work then sits on the caller's stream
// (NCCL's model): nothing of ours on another stream can be held behind a
// waiting stream when CUDA maps streams onto the same hardware queue.
// A command is 12 words of 4 bytes, each sent as an 8-byte word with the
// command's seq in its upper half (the LL idea of the fused kernel): one
// read of the slot by 12 lanes tells whether all of it is there.
// ctl (pinned host): [0] the last command done (the next kernel starts
// after it); [1] the launch number of the kernel that started last; [2]
// of the one that left last; [3] abort (the host sets it when it frees the
// ring: a kernel still queued returns at once).
// One block: a kernel is resident whole or not at all, so it never waits
// for a part of itself that other spinning kernels keep off the GPU.
struct exec_cmd {
    uint64_t dst, a, b, n; // n: bytes (COPY) or elements (REDUCE, SCALE)
    uint32_t kind, dt, op, div;
};

__device__ void exec_copy(uint8_t *d, const uint8_t *s, size_t n)
{
    size_t t = threadIdx.x, stride = blockDim.x;
    if ((((uintptr_t)d | (uintptr_t)s | n) & 15) == 0) {
        // four loads in flight per thread before the stores: reads of
        // pinned host memory cross PCIe
        const uint4 *s4 = (const uint4 *)s;
        uint4 *d4 = (uint4 *)d;
        size_t m = n / 16, i = t;
        for (; i + 3 * stride < m; i += 4 * stride) {
            uint4 v0 = s4[i], v1 = s4[i + stride], v2 = s4[i + 2 * stride], v3 = s4[i + 3 * stride];
            d4[i] = v0;
            d4[i + stride] = v1;
            d4[i + 2 * stride] = v2;
            d4[i + 3 * stride] = v3;
        }
        for (; i < m; i += stride)
            d4[i] = s4[i];
    } else if ((((uintptr_t)d | (uintptr_t)s | n) & 3) == 0) {
        for (size_t i = t; i < n / 4; i += stride)
            ((uint32_t *)d)[i] = ((const uint32_t *)s)[i];
    } else {
        for (size_t i = t; i < n; i += stride)
            d[i] = s[i];
    }
}

template <typename T> __device__ void exec_typed(const exec_cmd &c)
{
    T *d = (T *)c.dst;
    const T *a = (const T *)c.a, *b = (const T *)c.b;
    if (c.kind == X_SCALE) {
        scale<T>(d, a, c.n, c.div);
        return;
    }
    if (c.kind == X_PREMUL) { // the scalar's bytes travel in b
        T m;
        memcpy(&m, &c.b, sizeof(T));
        premul<T>(d, a, c.n, m);
        return;
    }
    switch (c.op) {
    case 0: reduce<T, op_sum>(d, a, b, c.n); break;
    case 1: reduce<T, op_prod>(d, a, b, c.n); break;
    case 2: reduce<T, op_min>(d, a, b, c.n); break;
    default: reduce<T, op_max>(d, a, b, c.n); break;
    }
}

__device__ void exec_run(const exec_cmd &c)
{
    if (c.kind == X_COPY) {
        exec_copy((uint8_t *)c.dst, (const uint8_t *)c.a, c.n);
        return;
    }
    switch (c.dt) { // fc_datatype_t order
    case 0: exec_typed<int8_t>(c); break;
    case 1: exec_typed<uint8_t>(c); break;
    case 2: exec_typed<int32_t>(c); break;
    case 3: exec_typed<uint32_t>(c); break;
    case 4: exec_typed<int64_t>(c); break;
    case 5: exec_typed<uint64_t>(c); break;
    case 6: exec_typed<__half>(c); break;
    case 7: exec_typed<__nv_bfloat16>(c); break;
    case 8: exec_typed<float>(c); break;
    case 10: exec_typed<fc_e4m3>(c); break;
    case 11: exec_typed<fc_e5m2>(c); break;
    default: exec_typed<double>(c); break;
    }
}

extern "C" __global__ void __launch_bounds__(1024)
    fc_exec(const uint64_t *ring, volatile uint32_t *ctl, uint32_t launch)
{
    if (!ring)
        return; // warm-up
    __shared__ uint32_t w[12];
    __shared__ int stop;
    __shared__ uint32_t seq;
    const bool lead = threadIdx.x == 0;
    if (threadIdx.x == 0) {
        seq = ctl[C_DONE] + 1; // after the previous kernel's last command
        stop = 0;
    }
    if (lead) {
        ctl[C_STARTED] = launch;
        __threadfence_system();
    }
    __syncthreads();
    exec_cmd c;
    c.kind = 0;
    for (;;) {
        if (threadIdx.x < 32) { // warp 0 reads the slot, 12 lanes a word each
            const volatile uint64_t *v = ring + (size_t)(seq % EXEC_RING) * EXEC_WORDS;
            const int lane = threadIdx.x;
            for (unsigned spin = 1;; spin++) {
                uint64_t x = lane < 12 ? v[lane] : 0;
                bool ok = lane >= 12 || (uint32_t)(x >> 32) == seq;
                if (__all_sync(0xffffffffu, ok)) {
                    if (lane < 12)
                        w[lane] = (uint32_t)x;
                    break;
                }
                if (spin % 1024 == 0 &&
                    __shfl_sync(0xffffffffu, lane == 0 ? ctl[C_ABORT] : 0, 0)) {
                    if (lane == 0)
                        stop = 1;
                    break;
                }
            }
            __threadfence(); // what the command reads comes after the command
        }
        __syncthreads();
        if (stop)
            break;
        c.dst = (uint64_t)w[1] << 32 | w[0];
        c.a = (uint64_t)w[3] << 32 | w[2];
        c.b = (uint64_t)w[5] << 32 | w[4];
        c.n = (uint64_t)w[7] << 32 | w[6];
        c.kind = w[8];
        c.dt = w[9];
        c.op = w[10];
        c.div = w[11];
        if (c.kind == X_EXIT)
            break;
        exec_run(c);
        __syncthreads(); // every thread's part done (w and seq read, too)
        if (lead) {
            __threadfence_system(); // the block's writes, seen before the done word
            ctl[C_DONE] = seq;      // the host may use what the command wrote
            seq++;
        }
        __syncthreads(); // seq read by warp 0 after it changed
    }
    if (lead) {
        if (!stop && c.kind == X_EXIT)
            ctl[C_DONE] = seq;
        __threadfence_system();
        ctl[C_LEFT] = launch;
    }
}

#define KERNELS(T, name)                                                                       \
    FUSED(T, name, sum)                                                                        \
    FUSED(T, name, prod)                                                                       \
    FUSED(T, name, min)                                                                        \
    FUSED(T, name, max)                                                                        \
    extern "C" __global__ void fc_reduce_##name##_sum(T *d, const T *a, const T *b, size_t n)  \
    {                                                                                          \
        reduce<T, op_sum>(d, a, b, n);                                                         \
    }                                                                                          \
    extern "C" __global__ void fc_reduce_##name##_prod(T *d, const T *a, const T *b, size_t n) \
    {                                                                                          \
        reduce<T, op_prod>(d, a, b, n);                                                        \
    }                                                                                          \
    extern "C" __global__ void fc_reduce_##name##_min(T *d, const T *a, const T *b, size_t n)  \
    {                                                                                          \
        reduce<T, op_min>(d, a, b, n);                                                         \
    }                                                                                          \
    extern "C" __global__ void fc_reduce_##name##_max(T *d, const T *a, const T *b, size_t n)  \
    {                                                                                          \
        reduce<T, op_max>(d, a, b, n);                                                         \
    }                                                                                          \
    extern "C" __global__ void fc_scale_##name(T *d, const T *s, size_t n, uint32_t div)       \
    {                                                                                          \
        scale<T>(d, s, n, div);                                                                \
    }                                                                                          \
    extern "C" __global__ void fc_premul_##name(T *d, const T *s, size_t n, T m)              \
    {                                                                                          \
        premul<T>(d, s, n, m);                                                                 \
    }

KERNELS(int8_t, int8)
KERNELS(uint8_t, uint8)
KERNELS(int32_t, int32)
KERNELS(uint32_t, uint32)
KERNELS(int64_t, int64)
KERNELS(uint64_t, uint64)
KERNELS(__half, float16)
KERNELS(__nv_bfloat16, bfloat16)
KERNELS(float, float32)
KERNELS(double, float64)
KERNELS(fc_e4m3, float8_e4m3)
KERNELS(fc_e5m2, float8_e5m2)
