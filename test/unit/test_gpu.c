/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The GPU pieces, where a GPU exists (each test skips with the reason
 * otherwise): the device reduction kernels against the host kernels, bit
 * for bit, for every datatype and op, special values included; and the
 * staging transport (pinned bounce buffers, D2H/H2D on their own streams,
 * kernels for local steps) running real algorithms over the in-process
 * loopback with device buffers and many small chunks.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coll.h"
#include "gpu.h"
#include "gpu_tp.h"
#include "reduce.h"
#include "transport_loop.h"

static void need_gpu(void)
{
    const char *why;
    if (!gpu_available(&why))
        cr_skip_test("no GPU here: %s", why);
}

static void fill(void *p, fc_datatype_t dt, size_t n, unsigned seed, int specials)
{
    for (size_t i = 0; i < n; i++) {
        unsigned h = (unsigned)(i * 2654435761u) ^ (seed * 40503u);
        h ^= h >> 13;
        double v = (double)((int)(h % 19) - 9);
        if (specials && (dt == FC_FLOAT32 || dt == FC_FLOAT64 || dt == FC_FLOAT16 ||
                         dt == FC_BFLOAT16)) {
            if (i % 97 == 5)
                v = NAN;
            else if (i % 89 == 7)
                v = INFINITY;
            else if (i % 83 == 11)
                v = -0.0;
            else if (i % 7 == 1)
                v = v / 3.0; /* needs rounding in the half types */
        }
        switch (dt) {
        case FC_INT8: ((int8_t *)p)[i] = (int8_t)(v * 14); break;
        case FC_UINT8: ((uint8_t *)p)[i] = (uint8_t)(h & 0xff); break;
        case FC_INT32: ((int32_t *)p)[i] = (int32_t)(h * 7919u); break;
        case FC_UINT32: ((uint32_t *)p)[i] = h * 7919u; break;
        case FC_INT64: ((int64_t *)p)[i] = (int64_t)((uint64_t)h * 0x9e3779b97f4a7c15ull); break;
        case FC_UINT64: ((uint64_t *)p)[i] = (uint64_t)h * 0x9e3779b97f4a7c15ull; break;
        case FC_FLOAT16: ((uint16_t *)p)[i] = reduce_float_to_half((float)v); break;
        case FC_BFLOAT16: ((uint16_t *)p)[i] = reduce_float_to_bf16((float)v); break;
        case FC_FLOAT32: ((float *)p)[i] = (float)v; break;
        case FC_FLOAT64: ((double *)p)[i] = v; break;
        }
    }
}

/* bitwise, except that any NaN equals any NaN */
static int same(const void *a, const void *b, size_t i, fc_datatype_t dt)
{
    size_t es = fc_datatype_size(dt);
    const char *x = (const char *)a + i * es, *y = (const char *)b + i * es;
    if (!memcmp(x, y, es))
        return 1;
    float fx, fy;
    switch (dt) {
    case FC_FLOAT16:
        fx = reduce_half_to_float(*(const uint16_t *)x);
        fy = reduce_half_to_float(*(const uint16_t *)y);
        return isnan(fx) && isnan(fy);
    case FC_BFLOAT16:
        fx = reduce_bf16_to_float(*(const uint16_t *)x);
        fy = reduce_bf16_to_float(*(const uint16_t *)y);
        return isnan(fx) && isnan(fy);
    case FC_FLOAT32: return isnan(*(const float *)x) && isnan(*(const float *)y);
    case FC_FLOAT64: return isnan(*(const double *)x) && isnan(*(const double *)y);
    default: return 0;
    }
}

/* Stream s runs after what is queued on the legacy default stream (cuMemcpy
 * from pageable memory and cuMemset return before the device is done). */
static void order_after_legacy(gpu_stream_t *s)
{
    gpu_event_t *ev;
    cr_assert_eq(gpu_event_get(0, &ev), FC_SUCCESS, "%s", fc_last_error());
    cr_assert_eq(gpu_event_record_raw(ev, NULL), FC_SUCCESS, "%s", fc_last_error());
    cr_assert_eq(gpu_stream_wait_event_raw(gpu_stream_raw(s), ev), FC_SUCCESS, "%s",
                 fc_last_error());
    gpu_event_put(ev);
}

Test(gpu, kernels_match_host_kernels)
{
    need_gpu();
    gpu_stream_t *s;
    cr_assert_eq(gpu_stream_create(0, &s), FC_SUCCESS, "%s", fc_last_error());
    const size_t n = 10007;
    char *a = malloc(n * 8), *b = malloc(n * 8), *exp = malloc(n * 8), *got = malloc(n * 8);
    void *da = gpu_dev_alloc(0, n * 8), *db = gpu_dev_alloc(0, n * 8), *dd = gpu_dev_alloc(0, n * 8);
    cr_assert(da && db && dd);
    for (int dt = 0; dt < 10; dt++) {
        size_t es = fc_datatype_size((fc_datatype_t)dt);
        for (int specials = 0; specials < 2; specials++) {
            fill(a, (fc_datatype_t)dt, n, 1, specials);
            fill(b, (fc_datatype_t)dt, n, 2, specials);
            cr_assert_eq(gpu_copy_sync(da, a, n * es), FC_SUCCESS);
            cr_assert_eq(gpu_copy_sync(db, b, n * es), FC_SUCCESS);
            order_after_legacy(s); /* pageable-to-device copies may return before their DMA */
            for (int op = 0; op < 5; op++) {
                reduce_fn_get((fc_datatype_t)dt, (fc_op_t)op)(exp, a, b, n);
                cr_assert_eq(gpu_reduce_async(dd, da, db, n, (fc_datatype_t)dt, (fc_op_t)op, s),
                             FC_SUCCESS, "%s", fc_last_error());
                cr_assert_eq(gpu_stream_sync(s), FC_SUCCESS, "%s", fc_last_error());
                gpu_copy_sync(got, dd, n * es);
                for (size_t i = 0; i < n; i++)
                    cr_assert(same(got, exp, i, (fc_datatype_t)dt),
                              "%s %s element %zu differs from the host kernel",
                              reduce_dt_name(dt), reduce_op_name(op), i);
            }
            /* in place (dst == a) and the scale kernel of FC_AVG */
            reduce_fn_get((fc_datatype_t)dt, FC_MAX)(exp, a, b, n);
            gpu_reduce_async(da, da, db, n, (fc_datatype_t)dt, FC_MAX, s);
            gpu_stream_sync(s);
            gpu_copy_sync(got, da, n * es);
            for (size_t i = 0; i < n; i++)
                cr_assert(same(got, exp, i, (fc_datatype_t)dt), "%s in-place max element %zu",
                          reduce_dt_name(dt), i);
            for (uint32_t div = 1; div <= 300; div += 299) {
                reduce_scale_get((fc_datatype_t)dt)(exp, b, n, div);
                gpu_scale_async(dd, db, n, (fc_datatype_t)dt, div, s);
                gpu_stream_sync(s);
                gpu_copy_sync(got, dd, n * es);
                for (size_t i = 0; i < n; i++)
                    cr_assert(same(got, exp, i, (fc_datatype_t)dt), "%s scale by %u element %zu",
                              reduce_dt_name(dt), div, i);
            }
        }
    }
    gpu_dev_free(0, da);
    gpu_dev_free(0, db);
    gpu_dev_free(0, dd);
    gpu_stream_destroy(s);
    free(a);
    free(b);
    free(exp);
    free(got);
}

/* Runs algorithm al for n ranks with device buffers through the staging
 * transport over the loopback; returns the first wrong element or -1. */
static long staged_run(const char *kind, const char *algo, int n, size_t count, int hmem)
{
    enum coll_kind k = (enum coll_kind)coll_kind_from_name(kind, strlen(kind));
    const struct coll_algo *al = coll_algo_find(k, algo, strlen(algo));
    cr_assert_not_null(al);
    struct loop_fabric *f = loop_fabric_create(n, 5);
    struct gpu_tp **g = calloc((size_t)n, sizeof(*g));
    struct sched *s = calloc((size_t)n, sizeof(*s));
    void **ds = calloc((size_t)n, sizeof(void *)), **dr = calloc((size_t)n, sizeof(void *));
    float *h = malloc(count * 4 + 4), *exp = calloc(count + 1, 4);
    for (int r = 0; r < n; r++) {
        cr_assert_eq(gpu_tp_create(loop_transport(f, r), 0, hmem, 200, 256, &g[r]), FC_SUCCESS, "%s",
                     fc_last_error());
        for (size_t i = 0; i < count; i++) {
            h[i] = (float)((r + (int)i) % 7);
            exp[i] = k == COLL_BCAST ? (float)((0 + (int)i) % 7) : exp[i] + h[i];
        }
        ds[r] = gpu_dev_alloc(0, count * 4 + 4);
        dr[r] = gpu_dev_alloc(0, count * 4 + 4);
        gpu_copy_sync(ds[r], h, count * 4);
        gpu_memset(dr[r], 0, count * 4);
        struct coll_args a = {.kind = k, .rank = r, .nranks = n, .root = 0, .count = count,
                              .dt = FC_FLOAT32, .op = FC_SUM, .esize = 4};
        /* the buffers were filled on the legacy default stream (cuMemset is
         * asynchronous): order the transport's streams after it, as every
         * collective call does (comm_order_after_caller) */
        cr_assert_eq(gpu_tp_order_after_default(g[r]), FC_SUCCESS, "%s", fc_last_error());
        sched_init(&s[r], FC_FLOAT32, FC_SUM, n);
        cr_assert_eq(al->build(&s[r], &a), FC_SUCCESS);
        struct sched_env env = {.tp = gpu_tp_transport(g[r]), .tag_base = tag_base(2, 0, 1),
                                .chunk_bytes = 256, .window = 3};
        cr_assert_eq(sched_start(&s[r], &env, ds[r], dr[r]), FC_SUCCESS);
    }
    for (int round = 0; round < 10000000; round++) {
        int done = 0;
        for (int r = 0; r < n; r++) {
            int nc;
            struct transport *tp = gpu_tp_transport(g[r]);
            cr_assert_eq(tp->ops->progress(tp, &nc), FC_SUCCESS);
            cr_assert_eq(sched_advance(&s[r]), FC_SUCCESS, "rank %d: %s", r, s[r].errmsg);
            /* finished, and nothing of it still queued on the GPU */
            done += sched_done(&s[r]) && tp->ops->idle(tp);
        }
        if (done == n)
            break;
    }
    long bad = -1;
    for (int r = 0; r < n && bad < 0; r++) {
        cr_assert(sched_done(&s[r]), "rank %d did not finish", r);
        gpu_copy_sync(h, dr[r], count * 4);
        for (size_t i = 0; i < count && bad < 0; i++)
            if (h[i] != exp[i])
                bad = (long)i;
    }
    for (int r = 0; r < n; r++) {
        sched_release(&s[r]);
        gpu_tp_destroy(g[r]);
        gpu_dev_free(0, ds[r]);
        gpu_dev_free(0, dr[r]);
    }
    loop_fabric_destroy(f);
    free(g);
    free(s);
    free(ds);
    free(dr);
    free(h);
    free(exp);
    return bad;
}

/* staged_run of every case at nmin..nmax ranks, 1001 floats */
static void run_cases(const char *const (*cases)[2], size_t ncases, int nmin, int nmax, int hmem)
{
    for (size_t c = 0; c < ncases; c++)
        for (int n = nmin; n <= nmax; n++) {
            long bad = staged_run(cases[c][0], cases[c][1], n, 1001, hmem);
            cr_assert_eq(bad, -1, "%s/%s n=%d: element %ld wrong", cases[c][0], cases[c][1], n,
                         bad);
        }
}

Test(gpu, staged_algorithms_with_device_buffers, .timeout = 120)
{
    need_gpu();
    static const char *const cases[][2] = {{"allreduce", "ring"},
                                           {"allreduce", "rd"},
                                           {"allreduce", "rabenseifner"},
                                           {"bcast", "chain"},
                                           {"bcast", "scatter_allgather"}};
    run_cases(cases, sizeof(cases) / sizeof(cases[0]), 1, 5, 0);
}

/* The gdr tier over the loopback (device pointers go straight to the
 * transport from 200 bytes, smaller chunks are staged): 256-byte chunks go
 * direct, each message's 164-byte tail is staged, and the direct posts wait
 * for the reductions queued before them on the GPU. */
Test(gpu, gdr_tier_direct_and_staged_chunks, .timeout = 120)
{
    need_gpu();
    static const char *const cases[][2] = {{"allreduce", "ring"}, {"allreduce", "rd"},
                                           {"bcast", "chain"}};
    run_cases(cases, sizeof(cases) / sizeof(cases[0]), 2, 4, 1);
}

Test(gpu, host_pointers_are_host)
{
    need_gpu();
    struct gpu_ptr p;
    int x;
    cr_assert_eq(gpu_ptr_info(&x, &p), FC_SUCCESS);
    cr_assert_eq(p.kind, GPU_HOST);
    void *d = gpu_dev_alloc(0, 4096);
    cr_assert_eq(gpu_ptr_info((char *)d + 100, &p), FC_SUCCESS);
    cr_assert_eq(p.kind, GPU_DEVICE);
    cr_assert_eq((void *)p.base, d);
    cr_assert_geq(p.size, 4096);
    cr_assert_neq(p.buffer_id, 0);
    gpu_dev_free(0, d);
}
