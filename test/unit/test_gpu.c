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
#include <pthread.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll.h"
#include "fp8.h"
#include "gpu.h"
#include "gpu_tp.h"
#include "log.h"
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
        case FC_FLOAT8_E4M3: /* every code: NaN, saturation and subnormals among them */
        case FC_FLOAT8_E5M2: ((uint8_t *)p)[i] = (uint8_t)(h >> 3); break;
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
    case FC_FLOAT8_E4M3:
        return isnan(fp8_e4m3_to_f32(*(const uint8_t *)x)) &&
               isnan(fp8_e4m3_to_f32(*(const uint8_t *)y));
    case FC_FLOAT8_E5M2:
        return isnan(fp8_e5m2_to_f32(*(const uint8_t *)x)) &&
               isnan(fp8_e5m2_to_f32(*(const uint8_t *)y));
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
    for (int dt = 0; reduce_dt_valid(dt); dt++) {
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
            /* a pre-scaled sum's first step, by one of the inputs */
            const void *scalar = b + 3 * es;
            reduce_premul_get((fc_datatype_t)dt)(exp, a, n, scalar);
            cr_assert_eq(gpu_copy_sync(da, a, n * es), FC_SUCCESS);
            order_after_legacy(s);
            cr_assert_eq(gpu_premul_async(dd, da, n, (fc_datatype_t)dt, scalar, s), FC_SUCCESS,
                         "%s", fc_last_error());
            gpu_stream_sync(s);
            gpu_copy_sync(got, dd, n * es);
            for (size_t i = 0; i < n; i++)
                cr_assert(same(got, exp, i, (fc_datatype_t)dt), "%s premul element %zu",
                          reduce_dt_name(dt), i);
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

static double since_us(const struct timespec *t0)
{
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (t1.tv_sec - t0->tv_sec) * 1e6 + (t1.tv_nsec - t0->tv_nsec) / 1e3;
}

/* Polls e until done, at most 10 s; returns the microseconds waited, or -1
 * (not done, or an error). */
static double wait_event(gpu_event_t *e)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int d;
    while ((d = gpu_event_done(e)) == 0)
        if (since_us(&t0) > 10e6)
            return -1;
    return d > 0 ? since_us(&t0) : -1;
}

/* Polls until the executor's kernel of launch l runs, at most 10 s. */
static int wait_started(gpu_stream_t *x, uint32_t l)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (!gpu_exec_started(x, l))
        if (since_us(&t0) > 10e6)
            return 0;
    return 1;
}

/* A caller's stream and an executor whose kernel runs there (launch l);
 * returns the microseconds from the launch until the kernel ran. */
static double start_exec(gpu_stream_t **cs, gpu_stream_t **x, uint32_t *l)
{
    cr_assert_eq(gpu_stream_create(0, cs), FC_SUCCESS, "%s", fc_last_error());
    cr_assert_eq(gpu_exec_create(0, x), FC_SUCCESS, "%s", fc_last_error());
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert_eq(gpu_exec_launch(*x, gpu_stream_raw(*cs), l), FC_SUCCESS, "%s",
                 fc_last_error());
    cr_assert(wait_started(*x, *l), "the executor kernel did not start within 10 s");
    return since_us(&t0);
}

/* Whether the caller's stream cs gets past what is queued on it (an event
 * recorded now) within 10 s: a kernel of ours there has left. */
static int stream_drains(gpu_stream_t *cs)
{
    gpu_event_t *e;
    if (gpu_event_get(0, &e) != FC_SUCCESS || gpu_event_record(e, cs) != FC_SUCCESS)
        return 0;
    int ok = wait_event(e) >= 0;
    gpu_event_put(e);
    return ok;
}

/* The executor (stream-ordered collectives' GPU work): one kernel on a
 * caller's stream runs the commands posted to it, in order, with the same
 * results as the reduction kernels, leaves when closed, and a kernel left
 * open leaves when the executor is destroyed. Failures are collected and
 * asserted once the kernel is gone (a process leaving with it running
 * would take the GPU's other clients down with it under MPS). */
Test(gpu, executor_runs_posted_commands_on_a_callers_stream, .timeout = 120)
{
    need_gpu();
    const size_t n = 10007;
    char *exp = malloc(n * 8);
    /* pinned: the executor reads and writes host memory itself */
    char *a = gpu_host_alloc(0, n * 8), *b = gpu_host_alloc(0, n * 8);
    char *got = gpu_host_alloc(0, n * 8);
    void *da = gpu_dev_alloc(0, n * 8), *db = gpu_dev_alloc(0, n * 8), *dd = gpu_dev_alloc(0, n * 8);
    cr_assert(exp && a && b && got && da && db && dd);
    gpu_event_t *ev;
    cr_assert_eq(gpu_event_get(0, &ev), FC_SUCCESS);
    char bad[300] = "";
    gpu_stream_t *cs, *x;
    uint32_t launch;
    double start_us = start_exec(&cs, &x, &launch);
    gpu_exec_open(x);
    struct timespec t0;
    for (int dt = 0; reduce_dt_valid(dt) && !bad[0]; dt++) {
        size_t es = fc_datatype_size((fc_datatype_t)dt);
        fill(a, (fc_datatype_t)dt, n, 3, 1);
        fill(b, (fc_datatype_t)dt, n, 4, 1);
        gpu_memcpy_async(da, a, n * es, x);
        gpu_memcpy_async(db, b, n * es, x);
        for (int op = 0; op < 5 && !bad[0]; op++) {
            memset(got, 0, n * es);
            if (op < 4) {
                reduce_fn_get((fc_datatype_t)dt, (fc_op_t)op)(exp, a, b, n);
                gpu_reduce_async(dd, da, db, n, (fc_datatype_t)dt, (fc_op_t)op, x);
            } else { /* the scale of FC_AVG, reading pinned host memory */
                reduce_scale_get((fc_datatype_t)dt)(exp, b, n, 7);
                gpu_scale_async(dd, b, n, (fc_datatype_t)dt, 7, x);
            }
            /* to pinned host memory, an odd size and a single byte */
            gpu_memcpy_async(got, dd, n * es - 1, x);
            gpu_memcpy_async(got + n * es - 1, (char *)dd + n * es - 1, 1, x);
            gpu_event_record(ev, x);
            if (wait_event(ev) < 0) {
                snprintf(bad, sizeof(bad), "executor: %s commands not done within 10 s: %s",
                         reduce_dt_name(dt), fc_last_error());
                break;
            }
            for (size_t i = 0; i < n; i++)
                if (!same(got, exp, i, (fc_datatype_t)dt)) {
                    snprintf(bad, sizeof(bad), "executor: %s %s element %zu differs",
                             reduce_dt_name(dt), op < 4 ? reduce_op_name(op) : "scale", i);
                    break;
                }
        }
    }
    /* the round trip of one small command, host to GPU and back */
    double sum = 0;
    for (int i = 0; i < 200 && !bad[0]; i++) {
        gpu_memcpy_async(got, da, 8, x);
        gpu_event_record(ev, x);
        double us = wait_event(ev);
        if (us < 0)
            snprintf(bad, sizeof(bad), "executor: a small copy not done within 10 s");
        sum += us;
    }
    /* bandwidth of the copies through PCIe (pinned host memory) */
    const size_t big = n * 8 & ~(size_t)15;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < 20; i++)
        gpu_memcpy_async(i % 2 ? dd : got, i % 2 ? got : dd, big, x);
    gpu_event_record(ev, x);
    if (wait_event(ev) < 0 && !bad[0])
        snprintf(bad, sizeof(bad), "executor: large copies not done within 10 s");
    double bw = 20.0 * big / (since_us(&t0) * 1e3);
    fprintf(stderr, "executor: kernel start %.1f us after launch; a small command %.1f us; "
            "%zu-byte copies to and from pinned memory %.1f GB/s\n", start_us, sum / 200, big, bw);
    cr_assert_eq(gpu_exec_close(x), FC_SUCCESS);
    int left = stream_drains(cs);
    /* posts between a close and the next open are dropped; a second launch
     * starts after the first one's commands: the next command goes to it */
    int32_t second = 0, v = 12345, stale = 777, late = -1;
    memcpy(a + 4, &stale, 4);
    memset(got + 8, 0, 4);
    gpu_memcpy_async(got + 8, a + 4, 4, x); /* after the close: dropped */
    if (left && gpu_exec_launch(x, gpu_stream_raw(cs), &launch) == FC_SUCCESS &&
        wait_started(x, launch)) {
        gpu_exec_open(x);
        memcpy(a, &v, 4);
        memset(got, 0, 4);
        gpu_memcpy_async(dd, a, 4, x);
        gpu_memcpy_async(got, dd, 4, x);
        gpu_event_record(ev, x);
        if (wait_event(ev) >= 0) {
            memcpy(&second, got, 4);
            memcpy(&late, got + 8, 4);
        }
    }
    /* left open: destroying the executor makes it leave */
    gpu_event_put(ev);
    gpu_stream_destroy(x);
    int left_at_destroy = stream_drains(cs);
    cr_assert(!bad[0], "%s", bad);
    cr_assert(left, "the executor did not leave when closed: %s", fc_last_error());
    cr_assert_eq(second, 12345, "second launch: %d", second);
    cr_assert_eq(late, 0, "a copy posted after the close ran in the next kernel (%d)", late);
    cr_assert(left_at_destroy, "an open executor did not leave at destroy");
    gpu_dev_free(0, da);
    gpu_dev_free(0, db);
    gpu_dev_free(0, dd);
    gpu_host_free(a);
    gpu_host_free(b);
    gpu_host_free(got);
    gpu_stream_destroy(cs);
    free(exp);
}

struct closer {
    gpu_stream_t *x;
    int delay_ms;
    int closed; /* 0; 1: the test's thread took it; 2: the closer did */
};

static void *close_later(void *arg)
{
    struct closer *c = arg;
    for (int i = 0; i < c->delay_ms && !__atomic_load_n(&c->closed, __ATOMIC_ACQUIRE); i++)
        usleep(1000);
    int none = 0;
    if (__atomic_compare_exchange_n(&c->closed, &none, 2, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_ACQUIRE))
        gpu_exec_close(c->x);
    return NULL;
}

/* The progress thread allocates pinned and device memory (bounce buffers,
 * scratch) while executor kernels of other collectives run and wait for
 * it: CUDA must not make those allocations wait for running kernels. (A
 * helper closes the kernel after 3 s, so a waiting allocation shows as a
 * failure, not a hang.) */
Test(gpu, allocations_do_not_wait_for_a_running_executor, .timeout = 60)
{
    need_gpu();
    gpu_stream_t *cs, *x;
    uint32_t launch;
    start_exec(&cs, &x, &launch);
    struct closer c = {.x = x, .delay_ms = 3000};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, close_later, &c), 0);
    struct timespec t0;
    double worst[2] = {0, 0};
    void *keep[2][40] = {{0}};
    for (int i = 0; i < 40; i++) {
        size_t len = ((size_t)64 << 10) << (i % 6);
        for (int k = 0; k < 2; k++) {
            clock_gettime(CLOCK_MONOTONIC, &t0);
            keep[k][i] = k ? gpu_dev_alloc(0, len) : gpu_host_alloc(0, len);
            double us = since_us(&t0);
            if (us > worst[k])
                worst[k] = us;
        }
    }
    int none = 0;
    int was_running = __atomic_compare_exchange_n(&c.closed, &none, 1, 0, __ATOMIC_ACQ_REL,
                                                  __ATOMIC_ACQUIRE);
    pthread_join(th, NULL);
    if (was_running)
        gpu_exec_close(x);
    cr_assert(stream_drains(cs), "the executor did not leave when closed");
    fprintf(stderr, "allocations beside a running executor: pinned %.0f us, device %.0f us at "
            "worst\n", worst[0], worst[1]);
    for (int i = 0; i < 40; i++) {
        gpu_host_free(keep[0][i]);
        gpu_dev_free(0, keep[1][i]);
    }
    gpu_stream_destroy(x);
    gpu_stream_destroy(cs);
    cr_assert(was_running, "an allocation waited until the executor kernel left (worst: pinned "
              "%.0f us, device %.0f us)", worst[0], worst[1]);
}

/* Per-peer paths: a transport between the device transport and the
 * loopback that counts the device buffers posted to each class of peer
 * (of the rank's own node or not). */
struct path_spy {
    struct loop_watch w; /* first */
    const int *node;
    int me;
    long dev_local, dev_remote, host_remote;
};

static void spy_count(struct loop_watch *w, int is_send, int peer, const void *buf, size_t len,
                      struct xfer *x)
{
    (void)is_send, (void)x;
    struct path_spy *s = (struct path_spy *)w;
    if (!len)
        return;
    int local = s->node[peer] == s->node[s->me], dev = gpu_on_device(buf);
    s->dev_local += dev && local;
    s->dev_remote += dev && !local;
    s->host_remote += !dev && !local;
}

/* Runs algorithm al for n ranks with device buffers through the staging
 * transport over the loopback; returns the first wrong element or -1.
 * With node (a node per rank), the algorithm gets the layout and each
 * rank's device transport per-peer paths: device memory direct (from 200
 * bytes) to the ranks of its node, staged to the others; spy (n entries)
 * then counts what each rank posted. */
static long staged_run_nodes(const char *kind, const char *algo, int n, size_t count, int hmem,
                             const int *node, int nnodes, struct path_spy *spy)
{
    enum coll_kind k = (enum coll_kind)coll_kind_from_name(kind, strlen(kind));
    const struct coll_algo *al = coll_algo_find(k, algo, strlen(algo));
    cr_assert_not_null(al);
    /* elements in and out per rank: allgather's output and reduce-scatter's
     * input are n blocks of count */
    const size_t nin = k == COLL_REDUCE_SCATTER ? count * (size_t)n : count;
    const size_t nout = k == COLL_ALLGATHER ? count * (size_t)n : count;
    struct loop_fabric *f = loop_fabric_create(n, 5);
    struct gpu_tp **g = calloc((size_t)n, sizeof(*g));
    struct sched *s = calloc((size_t)n, sizeof(*s));
    void **ds = calloc((size_t)n, sizeof(void *)), **dr = calloc((size_t)n, sizeof(void *));
    float *h = malloc((nin > nout ? nin : nout) * 4 + 4);
    float *sum = calloc(nin + 1, 4), *all = calloc((size_t)n * nin + 1, 4);
    for (int r = 0; r < n; r++) {
        struct transport *inner = loop_transport(f, r);
        if (node) {
            spy[r] = (struct path_spy){.node = node, .me = r};
            loop_watch_init(&spy[r].w, inner, spy_count);
            inner = &spy[r].w.base;
        }
        cr_assert_eq(gpu_tp_create(inner, 0, hmem, 200, 256, &g[r]), FC_SUCCESS, "%s",
                     fc_last_error());
        if (node) {
            struct gpu_tp_path p[16];
            cr_assert(n <= 16);
            for (int q = 0; q < n; q++)
                p[q] = (struct gpu_tp_path){.hmem = node[q] == node[r], .direct_min = 200};
            cr_assert_eq(gpu_tp_set_paths(g[r], n, p), FC_SUCCESS, "%s", fc_last_error());
        }
        for (size_t i = 0; i < nin; i++) {
            h[i] = (float)((r + (int)i) % 7);
            sum[i] += h[i];
            all[(size_t)r * nin + i] = h[i];
        }
        ds[r] = gpu_dev_alloc(0, nin * 4 + 4);
        dr[r] = gpu_dev_alloc(0, nout * 4 + 4);
        gpu_copy_sync(ds[r], h, nin * 4);
        gpu_memset(dr[r], 0, nout * 4);
        struct coll_args a = {.kind = k, .rank = r, .nranks = n, .root = 0, .count = count,
                              .dt = FC_FLOAT32, .op = FC_SUM, .esize = 4,
                              .node = node, .nnodes = nnodes};
        /* the buffers were filled on the legacy default stream (cuMemset is
         * asynchronous): order the transport's streams after it, as every
         * collective call does (gpu_order_after_caller) */
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
        if (k == COLL_REDUCE && r != 0)
            continue; /* the root's alone */
        gpu_copy_sync(h, dr[r], nout * 4);
        for (size_t i = 0; i < nout && bad < 0; i++) {
            float want = k == COLL_BCAST       ? all[i]
                         : k == COLL_ALLGATHER ? all[(i / count) * nin + i % count]
                         : k == COLL_REDUCE_SCATTER ? sum[(size_t)r * count + i]
                                                    : sum[i];
            if (h[i] != want)
                bad = (long)i;
        }
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
    free(sum);
    free(all);
    return bad;
}

static long staged_run(const char *kind, const char *algo, int n, size_t count, int hmem)
{
    return staged_run_nodes(kind, algo, n, count, hmem, NULL, 0, NULL);
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

/* The fused small allreduce of a blocking call waits for the caller's work
 * on the legacy default stream through an event of the pool, fresh here
 * (its CUDA event is made on first use): with an executor kernel holding
 * that stream, the fused kernel (one rank: its own vector only) must not
 * finish until the executor leaves, and then must. */
Test(gpu, fused_kernel_waits_for_the_legacy_stream, .timeout = 60)
{
    need_gpu();
    const size_t count = 5;
    float v[5] = {1.5f, -2, 3, 1e6f, 0.25f}, got[5] = {0};
    void *ds = gpu_dev_alloc(0, 64), *dr = gpu_dev_alloc(0, 64);
    uint64_t *out = gpu_host_alloc(0, 4096), *in = gpu_host_alloc(0, 4096);
    volatile uint32_t *flags = gpu_host_alloc(0, 64);
    cr_assert(ds && dr && out && in && flags, "%s", fc_last_error());
    memset((void *)flags, 0, 64);
    gpu_copy_sync(ds, v, sizeof(v));
    gpu_stream_t *fs, *x;
    uint32_t l;
    cr_assert_eq(gpu_stream_create(0, &fs), FC_SUCCESS, "%s", fc_last_error());
    cr_assert_eq(gpu_exec_create(0, &x), FC_SUCCESS, "%s", fc_last_error());
    cr_assert_eq(gpu_exec_launch(x, NULL, &l), FC_SUCCESS, "%s", fc_last_error());
    cr_assert(wait_started(x, l), "the executor kernel did not start on the legacy stream");
    gpu_exec_open(x);
    gpu_event_t *ev;
    cr_assert_eq(gpu_event_get(0, &ev), FC_SUCCESS, "%s", fc_last_error());
    int queued = 0;
    fc_result_t rc = gpu_fused_launch(fs, ev, NULL, ds, dr, out, in, flags, 1, 1, 0, count,
                                      FC_FLOAT32, FC_SUM, &queued);
    usleep(50000);
    uint32_t early = flags[2];
    gpu_exec_close(x); /* the executor leaves: the legacy stream drains */
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    while (rc == FC_SUCCESS && __atomic_load_n(&flags[2], __ATOMIC_ACQUIRE) != 1 &&
           since_us(&t0) < 10e6)
        usleep(100);
    uint32_t late = flags[2];
    gpu_stream_destroy(x);
    gpu_stream_destroy(fs);
    gpu_event_put(ev);
    cr_assert_eq(rc, FC_SUCCESS, "launching the fused kernel behind the legacy stream: %s",
                 fc_last_error());
    cr_assert_eq(queued, 1, "the legacy stream's executor kernel was not seen as queued work");
    cr_assert_eq(early, 0, "the fused kernel finished while the legacy stream was held");
    cr_assert_eq(late, 1, "the fused kernel did not finish within 10 s of the legacy stream "
                 "draining (flags[2] = %u)", late);
    gpu_copy_sync(got, dr, sizeof(got));
    for (size_t i = 0; i < count; i++)
        cr_assert_eq(got[i], v[i], "one rank's fused allreduce: [%zu] = %g, expected %g", i,
                     got[i], v[i]);
    gpu_dev_free(0, ds);
    gpu_dev_free(0, dr);
    gpu_host_free(out);
    gpu_host_free(in);
    gpu_host_free((void *)flags);
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

/* Per-peer paths with device buffers (shm built with CUDA inside a node,
 * tcp across): every hierarchical algorithm on nodes of 2 and of 3, 1 and
 * 2 ranks, where device memory goes direct only to ranks of the sender's
 * own node and is staged through pinned host memory to the others. */
Test(gpu, per_peer_paths_direct_inside_a_node_staged_across, .timeout = 120)
{
    need_gpu();
    static const char *const kinds[] = {"allreduce", "bcast", "reduce", "allgather",
                                        "reduce_scatter"};
    static const int even[] = {0, 0, 1, 1}, uneven[] = {0, 0, 0, 1, 2, 2};
    const struct {
        const int *node;
        int n, nnodes;
    } layouts[] = {{even, 4, 2}, {uneven, 6, 3}};
    for (size_t l = 0; l < 2; l++)
        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
            struct path_spy spy[8];
            int n = layouts[l].n;
            long bad = staged_run_nodes(kinds[k], "hier", n, 1001, 0, layouts[l].node,
                                        layouts[l].nnodes, spy);
            cr_assert_eq(bad, -1, "%s/hier on %d ranks: element %ld wrong", kinds[k], n, bad);
            long local = 0, remote = 0, host = 0;
            for (int r = 0; r < n; r++) {
                local += spy[r].dev_local;
                remote += spy[r].dev_remote;
                host += spy[r].host_remote;
            }
            cr_assert_eq(remote, 0, "%s/hier: %ld device buffers posted to ranks of other "
                         "nodes (their path stages)", kinds[k], remote);
            cr_assert_gt(host, 0, "%s/hier: nothing staged to other nodes", kinds[k]);
            if (strcmp(kinds[k], "bcast") != 0 || l == 0)
                cr_assert_gt(local, 0, "%s/hier: no device buffer went direct inside a node",
                             kinds[k]);
        }
}

/* The GPU whose CUDA context is current at fc_comm_init names the NIC an
 * RDMA provider opens on: nothing while no driver is loaded or no context
 * is current (fabcoll never loads the driver or makes a context for this),
 * the device's PCI bus id once one is current. */
Test(gpu, current_pci_id_follows_the_current_context)
{
    char bus[32] = "x", want[32] = "";
    gpu_current_pci_id(bus, sizeof(bus));
    cr_assert_str_empty(bus, "no CUDA driver loaded yet, yet '%s'", bus);
    need_gpu();
    gpu_current_pci_id(bus, sizeof(bus));
    cr_assert_str_empty(bus, "the driver loaded but no context current, yet '%s'", bus);
    cr_assert_eq(gpu_set_device(0), FC_SUCCESS, "%s", err_get());
    gpu_current_pci_id(bus, sizeof(bus));
    gpu_pci_id(0, want, sizeof(want));
    cr_assert(want[0] && want[0] != '-', "GPU 0 has no PCI bus id: '%s'", want);
    cr_assert_str_eq(bus, want, "current context on GPU 0: '%s', expected '%s'", bus, want);
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
