/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every collective with CUDA device buffers (each rank on GPU local_rank %
 * count): all datatypes and ops, in place and out of place; host send with
 * device receive and the reverse; managed memory; point to point; the
 * stream-ordered twins, several in flight on one stream between copies
 * queued on it. Not run (77) where there is no GPU.
 */
#include <pthread.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "gpu_util.h"

static struct ft t;
static char *h_in, *h_out, *h_exp;
static void *d_a, *d_b;

/* in: host input of ns elements; runs kind on device copies; out: host */
enum kind { AR, BC, RD, AG, RS, A2A, GA, SC };
static const char *kname[] = {"allreduce", "broadcast", "reduce",  "allgather",
                              "reduce_scatter", "alltoall", "gather", "scatter"};

static size_t nsend(enum kind k, size_t n)
{
    return (k == RS || k == A2A || k == SC) ? n * (size_t)t.size : n;
}

static size_t nrecv(enum kind k, size_t n)
{
    return (k == AG || k == A2A || k == GA) ? n * (size_t)t.size : n;
}

static fc_result_t call(enum kind k, void *s, void *r, size_t n, fc_datatype_t dt, fc_op_t op,
                        int root, void *stream)
{
    switch (k) {
    case AR: return stream ? fc_allreduce_stream(s, r, n, dt, op, t.comm, stream)
                           : fc_allreduce(s, r, n, dt, op, t.comm);
    case BC: return stream ? fc_broadcast_stream(s, r, n, dt, root, t.comm, stream)
                           : fc_broadcast(s, r, n, dt, root, t.comm);
    case RD: return stream ? fc_reduce_stream(s, r, n, dt, op, root, t.comm, stream)
                           : fc_reduce(s, r, n, dt, op, root, t.comm);
    case AG: return stream ? fc_allgather_stream(s, r, n, dt, t.comm, stream)
                           : fc_allgather(s, r, n, dt, t.comm);
    case RS: return stream ? fc_reduce_scatter_stream(s, r, n, dt, op, t.comm, stream)
                           : fc_reduce_scatter(s, r, n, dt, op, t.comm);
    case GA: return stream ? fc_gather_stream(s, r, n, dt, root, t.comm, stream)
                           : fc_gather(s, r, n, dt, root, t.comm);
    case SC: return stream ? fc_scatter_stream(s, r, n, dt, root, t.comm, stream)
                           : fc_scatter(s, r, n, dt, root, t.comm);
    default: return fc_alltoall(s, r, n, dt, t.comm);
    }
}

/* Host input and expected output of rank t.rank for kind. */
static void prepare(enum kind k, size_t n, fc_datatype_t dt, fc_op_t op, int root)
{
    size_t ns = nsend(k, n);
    for (size_t i = 0; i < ns; i++) {
        double v = k == A2A ? (double)((t.rank * 31 + (int)(i / (n ? n : 1)) * 7 + (int)(i % 13)) % 100)
                 : k == SC ? ft_input(FC_MIN, dt, (int)(i / (n ? n : 1)), i % (n ? n : 1))
                 : k == BC || k == AG || k == GA ? ft_input(FC_MIN, dt, k == BC ? root : t.rank, i)
                                      : ft_input(op, dt, t.rank, i);
        ft_store(h_in, i, dt, v);
    }
    size_t nr = nrecv(k, n);
    for (size_t i = 0; i < nr; i++) {
        switch (k) {
        case AR:
        case RD: ft_expected(h_exp, i, op, dt, t.size); break;
        case RS: break; /* below */
        case BC: ft_store(h_exp, i, dt, ft_input(FC_MIN, dt, root, i)); break;
        case AG:
        case GA: ft_store(h_exp, i, dt, ft_input(FC_MIN, dt, (int)(i / n), i % n)); break;
        case SC: ft_store(h_exp, i, dt, ft_input(FC_MIN, dt, t.rank, i)); break;
        case A2A: {
            size_t j = i / n, e = i % n;
            ft_store(h_exp, i, dt,
                     (double)(((int)j * 31 + t.rank * 7 + (int)(((size_t)t.rank * n + e) % 13)) % 100));
            break;
        }
        }
    }
    if (k == RS) {
        /* element i of block rank: the reduction at global index rank*n+i */
        char *full = malloc(nsend(k, n) * 8 + 8);
        for (size_t i = 0; i < n; i++)
            ft_expected(full, (size_t)t.rank * n + i, op, dt, t.size);
        memcpy(h_exp, full + (size_t)t.rank * n * fc_datatype_size(dt), n * fc_datatype_size(dt));
        free(full);
    }
}

static void verify(enum kind k, size_t n, fc_datatype_t dt, fc_op_t op, int root, int ip,
                   const char *how)
{
    if ((k == RD || k == GA) && t.rank != root)
        return;
    size_t nr = nrecv(k, n);
    for (size_t i = 0; i < nr; i++)
        if (!ft_same(h_out, h_exp, i, dt)) {
            ft_fail(&t, __FILE__, __LINE__,
                    "%s %s %s count %zu root %d in_place %d (%s): element %zu is %g, expected %g",
                    kname[k], ft_dt_name(dt), ft_op_name(op), n, root, ip, how, i,
                    ft_load(h_out, i, dt), ft_load(h_exp, i, dt));
            return;
        }
}

/* One device-buffer run of kind; ip: in place. */
static void run_device(enum kind k, size_t n, fc_datatype_t dt, fc_op_t op, int root, int ip)
{
    size_t es = fc_datatype_size(dt), ns = nsend(k, n), nr = nrecv(k, n);
    prepare(k, n, dt, op, root);
    void *s = d_a, *r = d_b;
    gu_memset(d_b, 0x7b, nr * es);
    if (ip && (k == GA || k == SC) && t.rank != root)
        ip = 0; /* in place means something at the root only */
    if (ip) {
        if (k == GA) {
            s = (char *)d_b + (size_t)root * n * es;
            gu_to_device(s, h_in, n * es);
        } else if (k == SC) {
            gu_to_device(d_a, h_in, ns * es);
            r = (char *)d_a + (size_t)root * n * es;
        } else if (k == AG) {
            s = (char *)d_b + (size_t)t.rank * n * es;
            gu_to_device(s, h_in, n * es);
        } else if (k == RS) {
            gu_to_device(d_a, h_in, ns * es);
            r = (char *)d_a + (size_t)t.rank * n * es;
        } else {
            gu_to_device(d_b, h_in, ns * es);
            s = d_b;
        }
    } else {
        gu_to_device(d_a, h_in, ns * es);
    }
    fc_result_t rc = call(k, s, r, n, dt, op, root, NULL);
    FT_CHECK(&t, rc == FC_SUCCESS, "%s %s %s count %zu (device): %s", kname[k], ft_dt_name(dt),
             ft_op_name(op), n, fc_last_error());
    gu_to_host(h_out, r, nr * es);
    verify(k, n, dt, op, root, ip, "device buffers");
}

/* Stream-ordered twins with one buffer in pageable host memory and the
 * other on the device: the host side is copied in or out on the stream
 * around the collective. Then a chain of two with no synchronization
 * between (the second larger), and a cudaFree while a mixed one is in
 * flight (nothing of it may wait for a CUDA allocation). */
static void stream_mixed(void *st)
{
    for (int k = AR; k <= SC; k++)
        for (int mix = 0; mix < 2 && k != A2A; mix++) {
            size_t nn = 3001, es = 4;
            int root = (k + mix) % t.size;
            fc_op_t op = k == RD ? FC_MAX : FC_SUM;
            prepare((enum kind)k, nn, FC_INT32, op, root);
            void *s = h_in, *r = d_b;
            /* broadcast and reduce use one buffer off the root: a device
             * one there (a stream call needs one) */
            int here = !(k == BC || k == RD || k == GA || k == SC) || t.rank == root;
            if (mix || !here) {
                gu_to_device(d_a, h_in, nsend((enum kind)k, nn) * es);
                s = d_a;
            }
            if (mix && here) {
                r = h_out;
                memset(h_out, 0x5c, nrecv((enum kind)k, nn) * es);
            }
            fc_result_t rc = call((enum kind)k, s, r, nn, FC_INT32, op, root, st);
            FT_CHECK(&t, rc == FC_SUCCESS, "stream-ordered %s, %s: %s", kname[k],
                     mix ? "device send, pageable host receive"
                         : "pageable host send, device receive",
                     fc_last_error());
            FT_CHECK(&t, gu_stream_sync(st) == 0, "synchronizing after a mixed stream call");
            if (r == d_b)
                gu_to_host(h_out, d_b, nrecv((enum kind)k, nn) * es);
            verify((enum kind)k, nn, FC_INT32, op, root, 0,
                   mix ? "stream-ordered, host recvbuf" : "stream-ordered, host sendbuf");
        }
    /* a small call, then a larger one (a larger staging block) */
    enum { N1 = 777, N2 = 100003 };
    int32_t *in1 = malloc(N1 * 4), *in2 = malloc(N2 * 4), *out2 = malloc(N2 * 4), got1[N1];
    for (int i = 0; i < N1; i++)
        in1[i] = t.rank + i % 11;
    for (int i = 0; i < N2; i++)
        in2[i] = 2 * t.rank + i % 5;
    gu_to_device(d_a, in2, N2 * 4);
    FT_OK(&t, fc_allreduce_stream(in1, d_b, N1, FC_INT32, FC_SUM, t.comm, st));
    FT_OK(&t, fc_allreduce_stream(d_a, out2, N2, FC_INT32, FC_SUM, t.comm, st));
    FT_CHECK(&t, gu_stream_sync(st) == 0, "synchronizing after two mixed stream calls");
    gu_to_host(got1, d_b, N1 * 4);
    int64_t n = t.size, rs = n * (n - 1) / 2;
    for (int i = 0; i < N1; i++)
        if (got1[i] != (int32_t)(rs + n * (i % 11))) {
            ft_fail(&t, __FILE__, __LINE__, "chained mixed stream calls: first [%d] = %d", i,
                    got1[i]);
            break;
        }
    for (int i = 0; i < N2; i++)
        if (out2[i] != (int32_t)(2 * rs + n * (i % 5))) {
            ft_fail(&t, __FILE__, __LINE__, "chained mixed stream calls: second [%d] = %d", i,
                    out2[i]);
            break;
        }
    /* 8 MiB from pageable memory, a cudaFree right behind it */
    enum { BIGN = 1 << 21 };
    void *ns = gu_stream_create(), *junk = gu_alloc(4096);
    int32_t *hb = malloc((size_t)BIGN * 4), *dz = gu_alloc((size_t)BIGN * 4);
    FT_CHECK(&t, ns && junk && hb && dz, "allocating for the mixed cudaFree check");
    if (ns && junk && hb && dz) {
        memset(hb, 1, (size_t)BIGN * 4);
        FT_OK(&t, fc_allreduce_stream(hb, dz, BIGN, FC_INT32, FC_SUM, t.comm, ns));
        gu_free(junk); /* returns once the device is idle */
        junk = NULL;
        FT_CHECK(&t, gu_stream_sync(ns) == 0, "synchronizing after a cudaFree");
        int32_t last;
        gu_to_host(&last, dz + BIGN - 1, 4);
        FT_CHECK(&t, last == (int32_t)(n * 0x01010101),
                 "a stream-ordered allreduce from pageable memory around a cudaFree: %d", last);
    }
    gu_free(junk);
    gu_free(dz);
    free(hb);
    gu_stream_destroy(ns);
    /* 3 MiB and 4 bytes from host memory to the device and back, every
     * element checked: pageable (copies from 1 MiB split over threads,
     * in parts of whole pages and an odd tail), then page-locked by CUDA
     * (the DMA alone) */
    enum { MIDN = (3 << 18) + 1 };
    for (int pin = 0; pin < 2; pin++) {
        int32_t *hi = pin ? gu_host_alloc((size_t)MIDN * 4) : malloc((size_t)MIDN * 4);
        int32_t *ho = pin ? gu_host_alloc((size_t)MIDN * 4) : malloc((size_t)MIDN * 4);
        int32_t *dm = gu_alloc((size_t)MIDN * 4);
        const char *what = pin ? "pinned" : "pageable";
        FT_CHECK(&t, hi && ho && dm, "allocating %s host buffers of 3 MiB", what);
        if (hi && ho && dm) {
            for (int i = 0; i < MIDN; i++)
                hi[i] = 3 * t.rank + i % 13;
            memset(ho, 0x5c, (size_t)MIDN * 4);
            FT_OK(&t, fc_allreduce_stream(hi, dm, MIDN, FC_INT32, FC_SUM, t.comm, st));
            FT_OK(&t, fc_allreduce_stream(dm, ho, MIDN, FC_INT32, FC_SUM, t.comm, st));
            FT_CHECK(&t, gu_stream_sync(st) == 0, "synchronizing after %s 3 MiB calls", what);
            for (int i = 0; i < MIDN; i++)
                if (ho[i] != (int32_t)(n * (3 * rs + n * (i % 13)))) {
                    ft_fail(&t, __FILE__, __LINE__,
                            "3 MiB stream-ordered allreduces through %s host memory: [%d] = %d, "
                            "expected %d", what, i, ho[i], (int)(n * (3 * rs + n * (i % 13))));
                    break;
                }
        }
        gu_free(dm);
        if (pin) {
            gu_host_free(hi);
            gu_host_free(ho);
        } else {
            free(hi);
            free(ho);
        }
    }
    free(in1);
    free(in2);
    free(out2);
}

/* CUDA's per-thread default stream (cudaStreamPerThread): one handle, a
 * different stream in each thread. Calls on it from the main thread, then
 * from a second thread, each synchronized on its own thread's stream. */
#define PER_THREAD ((void *)0x2)
/* This rank's GPU current in a thread other than main's (0: main's) */
static int thread_gpu(int which)
{
    fc_comm_attr_t attr;
    const char *why;
    if (which && (fc_comm_query(t.comm, &attr) != FC_SUCCESS ||
                  gu_init(attr.local_rank, &why) != 0)) {
        ft_fail(&t, __FILE__, __LINE__, "thread %d: cannot use the GPU", which);
        return -1;
    }
    return 0;
}

static void *per_thread_call(void *arg)
{
    int which = *(int *)arg;
    if (thread_gpu(which) != 0)
        return NULL;
    enum { N = 20000 }; /* past the fused small allreduce */
    int32_t *in = malloc(N * 4), *out = malloc(N * 4);
    int32_t *dv = gu_alloc(N * 4);
    for (int i = 0; i < N; i++)
        in[i] = t.rank * (which + 1) + i % 3;
    gu_to_device(dv, in, N * 4);
    for (int rep = 0; rep < 2; rep++)
        FT_OK(&t, fc_allreduce_stream(dv, dv, N, FC_INT32, FC_SUM, t.comm, PER_THREAD));
    FT_CHECK(&t, gu_stream_sync(PER_THREAD) == 0, "thread %d: synchronizing its per-thread "
             "stream", which);
    gu_to_host(out, dv, N * 4);
    int64_t n = t.size;
    for (int i = 0; i < N; i++) {
        int64_t want = ((which + 1) * n * (n - 1) / 2 + n * (i % 3)) * n;
        if (out[i] != (int32_t)want) {
            ft_fail(&t, __FILE__, __LINE__, "thread %d: 2 allreduces on the per-thread stream: "
                    "[%d] = %d, expected %lld", which, i, out[i], (long long)want);
            break;
        }
    }
    gu_free(dv);
    free(in);
    free(out);
    return NULL;
}

/* A small allreduce (the fused kernel) on the calling thread's per-thread
 * stream, not synchronized: its kernel must not be taken as the same
 * stream's as another thread's (chained behind it, sharing its buffers) */
struct small_call {
    int which;
    int32_t *dv, in[4], out[4];
};

static void *small_per_thread(void *arg)
{
    struct small_call *sc = arg;
    if (thread_gpu(sc->which) != 0)
        return NULL;
    for (int i = 0; i < 4; i++)
        sc->in[i] = (t.rank + 1) * (sc->which * 10 + i + 1);
    gu_to_device(sc->dv, sc->in, sizeof(sc->in));
    FT_OK(&t, fc_allreduce_stream(sc->dv, sc->dv, 4, FC_INT32, FC_SUM, t.comm, PER_THREAD));
    if (sc->which) /* the main thread's stays in flight meanwhile */
        FT_CHECK(&t, gu_stream_sync(PER_THREAD) == 0, "thread %d: synchronizing", sc->which);
    return NULL;
}

static void stream_per_thread(void)
{
    int a = 0, b = 1;
    per_thread_call(&a);
    pthread_t th;
    FT_CHECK(&t, pthread_create(&th, NULL, per_thread_call, &b) == 0, "starting a thread");
    pthread_join(th, NULL);
    struct small_call sc[2] = {{.which = 0, .dv = gu_alloc(64)}, {.which = 1, .dv = gu_alloc(64)}};
    small_per_thread(&sc[0]);
    FT_CHECK(&t, pthread_create(&th, NULL, small_per_thread, &sc[1]) == 0, "starting a thread");
    pthread_join(th, NULL);
    FT_CHECK(&t, gu_stream_sync(PER_THREAD) == 0, "synchronizing the main thread's stream");
    int64_t n = t.size;
    for (int w = 0; w < 2; w++) {
        gu_to_host(sc[w].out, sc[w].dv, sizeof(sc[w].out));
        for (int i = 0; i < 4; i++)
            FT_CHECK(&t, sc[w].out[i] == (int32_t)(n * (n + 1) / 2 * (w * 10 + i + 1)),
                     "small allreduce on thread %d's per-thread stream: [%d] = %d, expected "
                     "%lld", w, i, sc[w].out[i], (long long)(n * (n + 1) / 2 * (w * 10 + i + 1)));
        gu_free(sc[w].dv);
    }
}

/* More streams than the 32 stream executors of a family: 40 streams, a
 * call on each queued with none synchronized, twice; then each stream in
 * turn, synchronized (idle executors serve new streams); then all queued
 * again with rank 0 ahead of the others by 300 ms, so that its 33rd call
 * finds every executor busy with calls that wait for the other ranks, and
 * waits for one. */
static void stream_many(char *p_in, char *p_out)
{
    enum { NS = 40, N = 9000 };
    void *ss[NS];
    int32_t *dv[NS];
    const size_t stride = N * 4;
    int ok = 1;
    for (int i = 0; i < NS; i++) {
        ss[i] = gu_stream_create();
        dv[i] = gu_alloc(stride);
        ok = ok && ss[i] && dv[i];
    }
    FT_CHECK(&t, ok, "allocating %d streams", NS);
    int64_t n = t.size;
    for (int pass = 0; pass < 3 && ok; pass++) {
        for (int i = 0; i < NS; i++) {
            int32_t *in = (int32_t *)(p_in + (size_t)(i % 8) * stride);
            for (int k = 0; k < N; k++)
                in[k] = t.rank + i + k % 7;
            gu_to_device(dv[i], in, stride);
        }
        if (pass == 2 && t.rank != 0)
            usleep(300000);
        for (int r = 0; r < 2; r++)
            for (int i = 0; i < NS; i++) {
                FT_OK(&t, fc_allreduce_stream(dv[i], dv[i], N, FC_INT32, FC_SUM, t.comm, ss[i]));
                if (pass == 1)
                    FT_CHECK(&t, gu_stream_sync(ss[i]) == 0, "synchronizing stream %d", i);
            }
        for (int i = 0; i < NS; i++) {
            FT_CHECK(&t, gu_stream_sync(ss[i]) == 0, "synchronizing stream %d of %d", i, NS);
            int32_t *got = (int32_t *)p_out;
            gu_to_host(got, dv[i], stride);
            for (int k = 0; k < N; k++) {
                int64_t want = (n * (n - 1) / 2 + n * (i + k % 7)) * n;
                if (got[k] != (int32_t)want) {
                    ft_fail(&t, __FILE__, __LINE__,
                            "%d streams (%s): stream %d [%d] = %d, expected %lld", NS,
                            pass == 1 ? "one by one" : pass ? "rank 0 ahead" : "all in flight",
                            i, k, got[k],
                            (long long)want);
                    break;
                }
            }
        }
    }
    for (int i = 0; i < NS; i++) {
        gu_free(dv[i]);
        gu_stream_destroy(ss[i]);
    }
}

int main(void)
{
    ft_init(&t, "gpu_collectives");
    fc_comm_attr_t attr;
    FT_OK(&t, fc_comm_query(t.comm, &attr));
    const char *why = NULL;
    if (gu_init(attr.local_rank, &why) != 0)
        return ft_skip(&t, why);
    if (t.rank == 0)
        printf("gpu_collectives: %d ranks, %d GPU(s) here, provider %s, device buffers %s\n",
               t.size, gu_device_count(), attr.provider,
               attr.hmem ? "go to the fabric directly (gdr tier)" : "are staged through host memory");
    const size_t maxc = 100003, maxb = maxc * 8 * (size_t)t.size + 64;
    h_in = malloc(maxb);
    h_out = malloc(maxb);
    h_exp = malloc(maxb);
    d_a = gu_alloc(maxb);
    d_b = gu_alloc(maxb);
    if (!d_a || !d_b) {
        ft_fail(&t, __FILE__, __LINE__, "cannot allocate device memory");
        return ft_finish(&t);
    }
    const size_t counts[] = {0, 1, 7 * (size_t)t.size + 3, 100003};
    /* FT_GPU_PART=stream runs only the stream-ordered part (debugging) */
    const char *part = getenv("FT_GPU_PART");
    int only_stream = part && !strcmp(part, "stream");
    for (int k = AR; k <= SC && !only_stream; k++)
        for (int d = 0; d < 10; d++)
            for (int o = 0; o < 5; o++) {
                int reduction = k == AR || k == RD || k == RS;
                if (!reduction && o > 0)
                    break;
                for (int ci = 0; ci < 4; ci++) {
                    size_t n = counts[ci];
                    if ((k == AG || k == RS || k == A2A || k == GA || k == SC) && n > 20011)
                        n = 20011;
                    /* the large count for a sample of types only */
                    if (ci == 3 && !(d == 8 || d == 6 || d == 2))
                        continue;
                    int root = (d + o + ci) % t.size;
                    for (int ip = 0; ip < 2; ip++) {
                        if (k == A2A && ip)
                            continue; /* alltoall in place: covered on the host path */
                        run_device((enum kind)k, n, ft_dtypes[d], ft_ops[o], root, ip);
                    }
                }
            }

    /* mixed: host send, device receive, and the reverse; managed memory */
    size_t n = 4099;
    for (int mix = 0; mix < 3 && !only_stream; mix++) {
        prepare(AR, n, FC_FLOAT32, FC_SUM, 0);
        void *s, *r;
        void *m = NULL;
        if (mix == 0) {
            s = h_in;
            r = d_b;
        } else if (mix == 1) {
            gu_to_device(d_a, h_in, n * 4);
            s = d_a;
            r = h_out;
        } else {
            m = gu_alloc_managed(n * 4);
            memcpy(m, h_in, n * 4); /* managed: the host may write it */
            s = m;
            r = m;
        }
        FT_OK(&t, fc_allreduce(s, r, n, FC_FLOAT32, FC_SUM, t.comm));
        if (r == d_b)
            gu_to_host(h_out, d_b, n * 4);
        else if (r == m) {
            gu_sync();
            memcpy(h_out, m, n * 4);
        }
        static const char *mixes[] = {"host send, device receive", "device send, host receive",
                                      "managed memory"};
        verify(AR, n, FC_FLOAT32, FC_SUM, 0, 0, mixes[mix]);
        gu_free(m);
    }

    /* ranks on device buffers and ranks on host buffers in one allreduce:
     * small ones run fused on the device ranks (gather's exchange alone
     * around one kernel) and the whole gather algorithm on the host ranks;
     * the messages must agree */
    static const size_t small[] = {1, 3, 5, 1024};
    static const fc_op_t sops[] = {FC_SUM, FC_MAX, FC_AVG};
    static const fc_datatype_t sdts[] = {FC_FLOAT32, FC_INT32, FC_FLOAT16, FC_INT8, FC_FLOAT64};
    for (int all = 0; all < 2 && !only_stream; all++) /* then every rank on device buffers */
        for (int ci = 0; ci < 4; ci++)
            for (int oi = 0; oi < 3; oi++)
                for (int di = 0; di < 5; di++) {
                    size_t cnt = small[ci], es = fc_datatype_size(sdts[di]);
                    prepare(AR, cnt, sdts[di], sops[oi], 0);
                    int on_device = all || t.rank % 2 == 0;
                    if (on_device) {
                        gu_to_device(d_a, h_in, cnt * es);
                        gu_memset(d_b, 0x7b, cnt * es);
                        FT_OK(&t, fc_allreduce(d_a, d_b, cnt, sdts[di], sops[oi], t.comm));
                        gu_to_host(h_out, d_b, cnt * es);
                    } else {
                        memset(h_out, 0x7b, cnt * es);
                        FT_OK(&t, fc_allreduce(h_in, h_out, cnt, sdts[di], sops[oi], t.comm));
                    }
                    verify(AR, cnt, sdts[di], sops[oi], 0, 0,
                           all ? "small, device buffers on every rank"
                           : on_device ? "device buffers here, host buffers on odd ranks"
                                       : "host buffers here, device buffers on even ranks");
                    if (all) {
                        /* the same call on host buffers next: it must not
                         * reuse the fused call's kept schedule, the
                         * exchange alone (its kernel reduces) */
                        memset(h_out, 0x7b, cnt * es);
                        FT_OK(&t, fc_allreduce(h_in, h_out, cnt, sdts[di], sops[oi], t.comm));
                        verify(AR, cnt, sdts[di], sops[oi], 0, 0,
                               "small, host buffers right after the same call on device buffers");
                    }
                }

    /* point to point with device buffers */
    if (t.size > 1 && t.rank < 2 && !only_stream) {
        float v[300];
        for (int i = 0; i < 300; i++)
            v[i] = (float)(i * 3);
        if (t.rank == 0) {
            gu_to_device(d_a, v, sizeof(v));
            FT_OK(&t, fc_send(d_a, 300, FC_FLOAT32, 1, t.comm));
        } else {
            gu_memset(d_b, 0, sizeof(v));
            FT_OK(&t, fc_recv(d_b, 300, FC_FLOAT32, 0, t.comm));
            float w[300];
            gu_to_host(w, d_b, sizeof(w));
            for (int i = 0; i < 300; i++)
                if (w[i] != v[i]) {
                    ft_fail(&t, __FILE__, __LINE__, "device recv[%d] = %g", i, w[i]);
                    break;
                }
        }
    }

    /* ... and a message of several chunks (staged ones are 512 KiB), whose
     * byte counts the two ends exchange before the rest follows the first */
    if (t.size > 1 && t.rank < 2 && !only_stream) {
        size_t nb = maxc * 2 * (size_t)t.size; /* floats: maxb - 64 bytes */
        float *hv = (float *)h_in, *hw = (float *)h_out;
        for (size_t i = 0; i < nb; i++)
            hv[i] = (float)(i % 9973);
        if (t.rank == 0) {
            gu_to_device(d_a, hv, nb * 4);
            FT_OK(&t, fc_send(d_a, nb, FC_FLOAT32, 1, t.comm));
        } else {
            gu_memset(d_b, 0, nb * 4);
            FT_OK(&t, fc_recv(d_b, nb, FC_FLOAT32, 0, t.comm));
            gu_to_host(hw, d_b, nb * 4);
            for (size_t i = 0; i < nb; i++)
                if (hw[i] != hv[i]) {
                    ft_fail(&t, __FILE__, __LINE__, "large device recv[%zu] = %g", i, hw[i]);
                    break;
                }
        }
    }

    /* stream-ordered: input copied in on the stream, three allreduces and
     * the other twins queued behind it, results copied out on it */
    void *st = gu_stream_create();
    /* pinned host buffers for the copies on the stream: a copy from or to
     * pageable memory blocks the calling thread inside CUDA until the
     * stream reaches it, which stream-ordered collectives (driven by
     * fabcoll's progress thread, which calls CUDA too) cannot share */
    char *p_in = gu_host_alloc(maxb), *p_out = gu_host_alloc(maxb);
    char *keep_in = h_in, *keep_out = h_out;
    h_in = p_in;
    h_out = p_out;
    n = 50001;
    prepare(AR, n, FC_FLOAT32, FC_SUM, 0);
    for (int rep = 0; rep < 3; rep++) {
        gu_copy_async(d_a, h_in, n * 4, st);
        FT_OK(&t, fc_allreduce_stream(d_a, d_b, n, FC_FLOAT32, FC_SUM, t.comm, st));
        gu_copy_async(h_out, d_b, n * 4, st);
        gu_stream_sync(st);
        verify(AR, n, FC_FLOAT32, FC_SUM, 0, 0, "stream-ordered allreduce");
    }
    for (int k = BC; k <= RS; k++) {
        size_t nn = 777;
        int root = t.size - 1;
        prepare((enum kind)k, nn, FC_INT32, FC_MAX, root);
        gu_copy_async(d_a, h_in, nsend((enum kind)k, nn) * 4, st);
        FT_OK(&t, call((enum kind)k, d_a, d_b, nn, FC_INT32, FC_MAX, root, st));
        gu_copy_async(h_out, d_b, nrecv((enum kind)k, nn) * 4, st);
        gu_stream_sync(st);
        verify((enum kind)k, nn, FC_INT32, FC_MAX, root, 0, "stream-ordered");
    }
    /* count 0 on every twin, on device and on host buffers: nothing to
     * move or order, success at once; the next call still agrees */
    for (int k = AR; k <= RS; k++) {
        FT_OK(&t, call((enum kind)k, d_a, d_b, 0, FC_INT32, FC_SUM, 0, st));
        FT_OK(&t, call((enum kind)k, h_in, h_out, 0, FC_INT32, FC_SUM, 0, st));
    }
    prepare(AR, 777, FC_INT32, FC_SUM, 0);
    gu_copy_async(d_a, h_in, 777 * 4, st);
    FT_OK(&t, fc_allreduce_stream(d_a, d_b, 777, FC_INT32, FC_SUM, t.comm, st));
    gu_copy_async(h_out, d_b, 777 * 4, st);
    gu_stream_sync(st);
    verify(AR, 777, FC_INT32, FC_SUM, 0, 0, "stream-ordered, after calls with count 0");
    /* small stream-ordered allreduces in a chain, each on the previous
     * one's result, with a large one queued between: the fused kernel on
     * the stream where it can, the usual path while it is busy; the order
     * must hold across both */
    {
        int32_t *dx = gu_alloc(64), *dy = gu_alloc(64), x0[3], got[3];
        x0[0] = t.rank + 1;
        x0[1] = 2;
        x0[2] = 3 * t.rank;
        memcpy(p_in, x0, sizeof(x0));
        gu_copy_async(dx, p_in, sizeof(x0), st);
        FT_OK(&t, fc_allreduce_stream(dx, dy, 3, FC_INT32, FC_SUM, t.comm, st));
        FT_OK(&t, fc_allreduce_stream(dy, dx, 3, FC_INT32, FC_SUM, t.comm, st));
        FT_OK(&t, fc_allreduce_stream(d_a, d_b, 50001, FC_FLOAT32, FC_SUM, t.comm, st));
        FT_OK(&t, fc_allreduce_stream(dx, dy, 3, FC_INT32, FC_SUM, t.comm, st));
        FT_OK(&t, fc_allreduce_stream(dy, dy, 3, FC_INT32, FC_SUM, t.comm, st));
        FT_OK(&t, fc_allreduce_stream(dy, dx, 3, FC_INT32, FC_SUM, t.comm, st));
        gu_copy_async(p_out, dx, sizeof(got), st);
        gu_stream_sync(st);
        memcpy(got, p_out, sizeof(got));
        int64_t n = t.size, f = n * n * n * n; /* 5 allreduces: the sum times n^4 */
        int64_t want[3] = {n * (n + 1) / 2 * f, 2 * n * f, 3 * (n * (n - 1) / 2) * f};
        for (int i = 0; i < 3; i++)
            FT_CHECK(&t, got[i] == want[i],
                     "stream-ordered chain of small allreduces: [%d] = %d, expected %lld", i,
                     got[i], (long long)want[i]);
        /* the default stream (NULL) is a stream too */
        FT_OK(&t, fc_allreduce_stream(dx, dy, 3, FC_INT32, FC_SUM, t.comm, NULL));
        FT_CHECK(&t, gu_sync() == 0, "synchronizing after a call on the default stream");
        gu_to_host(got, dy, sizeof(got));
        for (int i = 0; i < 3; i++)
            FT_CHECK(&t, got[i] == want[i] * n,
                     "stream-ordered allreduce on the default stream: [%d] = %d, expected %lld",
                     i, got[i], (long long)(want[i] * n));
        gu_free(dx);
        gu_free(dy);
    }
    /* 16 small stream-ordered allreduces queued on one stream with no
     * synchronization between them, as a training step queues them: the
     * fused kernels chain behind each other on the stream, sharing one set
     * of buffers; the last result must carry every step */
    {
        enum { STEPS = 16, LEN = 5 };
        int64_t *da = gu_alloc(LEN * 8), *db = gu_alloc(LEN * 8), x[LEN];
        for (int i = 0; i < LEN; i++)
            x[i] = t.rank + 1 + i;
        memcpy(p_in, x, sizeof(x));
        gu_copy_async(da, p_in, sizeof(x), st);
        for (int s = 0; s < STEPS; s++)
            FT_OK(&t, fc_allreduce_stream(s % 2 ? db : da, s % 2 ? da : db, LEN, FC_INT64, FC_SUM,
                                          t.comm, st));
        gu_copy_async(p_out, da, sizeof(x), st); /* STEPS is even: the last output is da */
        FT_CHECK(&t, gu_stream_sync(st) == 0, "synchronizing the chain's stream");
        memcpy(x, p_out, sizeof(x));
        int64_t n = t.size, pw = 1;
        for (int s = 1; s < STEPS; s++)
            pw *= n;
        for (int i = 0; i < LEN; i++) {
            /* step 1 gives the sum of rank + 1 + i, each later step times n */
            int64_t want = (n * (n + 1) / 2 + n * i) * pw;
            FT_CHECK(&t, x[i] == want,
                     "stream-ordered chain of %d small allreduces: [%d] = %lld, expected %lld",
                     STEPS, i, (long long)x[i], (long long)want);
        }
        gu_free(da);
        gu_free(db);
    }
    /* stream-ordered calls on many streams of one communicator, queued in
     * the same order on every rank with no synchronization between them,
     * small ones (the fused kernel) and larger ones (staged) mixed. With
     * more streams than CUDA's hardware queues (CUDA_DEVICE_MAX_CONNECTIONS,
     * 8 by default) some streams share a queue, where a stream waiting for
     * one collective can hold back the copies of another and deadlock */
    {
        enum { NS = 12, ROUNDS = 3, SMALL = 5, BIG = 3000 };
        void *ss[NS];
        int32_t *dv[NS];
        const size_t stride = BIG * 4;
        for (int i = 0; i < NS; i++) {
            ss[i] = gu_stream_create();
            dv[i] = gu_alloc(stride);
            int32_t *in = (int32_t *)(p_in + i * stride);
            int len = i % 2 ? BIG : SMALL;
            for (int k = 0; k < len; k++)
                in[k] = t.rank + 1 + i + k % 7;
            gu_copy_async(dv[i], in, (size_t)len * 4, ss[i]);
        }
        for (int r = 0; r < ROUNDS; r++)
            for (int i = 0; i < NS; i++)
                FT_OK(&t, fc_allreduce_stream(dv[i], dv[i], i % 2 ? BIG : SMALL, FC_INT32,
                                              FC_SUM, t.comm, ss[i]));
        for (int i = 0; i < NS; i++)
            gu_copy_async(p_out + i * stride, dv[i], (size_t)(i % 2 ? BIG : SMALL) * 4, ss[i]);
        int64_t n = t.size, pw = 1;
        for (int r = 1; r < ROUNDS; r++)
            pw *= n;
        for (int i = 0; i < NS; i++) {
            FT_CHECK(&t, gu_stream_sync(ss[i]) == 0, "synchronizing stream %d of %d", i, NS);
            const int32_t *got = (const int32_t *)(p_out + i * stride);
            for (int k = 0; k < (i % 2 ? BIG : SMALL); k++) {
                /* round 1: the sum over ranks of rank + 1 + i + k % 7; then times n */
                int64_t want = (n * (n + 1) / 2 + n * (i + k % 7)) * pw;
                if (got[k] != (int32_t)want) {
                    ft_fail(&t, __FILE__, __LINE__,
                            "%d stream-ordered allreduces on %d streams: stream %d [%d] = %d, "
                            "expected %lld", ROUNDS * NS, NS, i, k, got[k], (long long)want);
                    break;
                }
            }
            gu_free(dv[i]);
            gu_stream_destroy(ss[i]);
        }
    }
    /* a cudaFree while stream-ordered collectives are in flight: it waits
     * for the whole device, our kernels included, holding a lock of the
     * CUDA context that any allocation needs; the progress thread must
     * finish them without allocating (their staging memory is set aside at
     * the call). A fresh stream (a lane with empty pools) and more chunks
     * than any call before, where a progress thread that allocated would
     * deadlock */
    {
        enum { BIGN = 1 << 21 }; /* 8 MiB of int32 */
        void *ns = gu_stream_create();
        int32_t *dz = gu_alloc((size_t)BIGN * 4);
        void *junk = gu_alloc(4096);
        FT_CHECK(&t, ns && dz && junk, "allocating for the cudaFree check");
        if (ns && dz && junk) {
            gu_memset(dz, 1, (size_t)BIGN * 4); /* each int32 0x01010101 */
            gu_sync();
            FT_OK(&t, fc_allreduce_stream(dz, dz, BIGN, FC_INT32, FC_SUM, t.comm, ns));
            FT_OK(&t, fc_allreduce_stream(dz, dz, BIGN, FC_INT32, FC_SUM, t.comm, ns));
            gu_free(junk); /* returns once the device is idle */
            junk = NULL;
            FT_CHECK(&t, gu_stream_sync(ns) == 0, "synchronizing the stream after a cudaFree");
            int32_t ends[2];
            gu_to_host(&ends[0], dz, 4);
            gu_to_host(&ends[1], dz + BIGN - 1, 4);
            int64_t want = (int64_t)t.size * t.size * 0x01010101;
            for (int i = 0; i < 2; i++)
                FT_CHECK(&t, ends[i] == (int32_t)want,
                         "2 stream-ordered allreduces of %d int32 around a cudaFree: %s = %d, "
                         "expected %lld", BIGN, i ? "last" : "first", ends[i], (long long)want);
        }
        gu_free(junk);
        gu_free(dz);
        gu_stream_destroy(ns);
    }
    h_in = keep_in;
    h_out = keep_out;
    stream_mixed(st);
    stream_per_thread();
    stream_many(p_in, p_out);
    gu_host_free(p_in);
    gu_host_free(p_out);
    /* host buffers on a stream: refused */
    fc_result_t rc = fc_allreduce_stream(h_in, h_out, 10, FC_FLOAT32, FC_SUM, t.comm, st);
    FT_CHECK(&t, rc == FC_ERR_INVALID_ARGUMENT, "stream call on host buffers gave %s",
             fc_strerror(rc));
    FT_OK(&t, fc_comm_query(t.comm, &attr));
    /* ... before the call takes its place in the communicator's sequence:
     * rank 0 alone makes that mistake, then joins the others'
     * stream-ordered allreduce with the plain call on the same host
     * buffers (small: the fused kernel on the device ranks; large: staged).
     * A refused call that kept its sequence number left rank 0 one call
     * ahead, and this waited out FC_TIMEOUT */
    static const size_t refused_n[] = {5, 50001};
    for (int i = 0; i < 2; i++) {
        size_t nn = refused_n[i];
        prepare(AR, nn, FC_FLOAT32, FC_SUM, 0);
        memset(h_out, 0x7b, nn * 4);
        if (t.rank == 0) {
            rc = fc_allreduce_stream(h_in, h_out, nn, FC_FLOAT32, FC_SUM, t.comm, st);
            FT_CHECK(&t, rc == FC_ERR_INVALID_ARGUMENT,
                     "stream call on host buffers on rank 0 alone gave %s", fc_strerror(rc));
            FT_OK(&t, fc_allreduce(h_in, h_out, nn, FC_FLOAT32, FC_SUM, t.comm));
        } else {
            gu_to_device(d_a, h_in, nn * 4);
            FT_OK(&t, fc_allreduce_stream(d_a, d_b, nn, FC_FLOAT32, FC_SUM, t.comm, st));
            FT_CHECK(&t, gu_stream_sync(st) == 0, "synchronizing after the stream-ordered call");
            gu_to_host(h_out, d_b, nn * 4);
        }
        verify(AR, nn, FC_FLOAT32, FC_SUM, 0, 0,
               "rank 0 by the plain call on host buffers after its stream call was refused");
    }
    gu_stream_destroy(st);
    gu_free(d_a);
    gu_free(d_b);
    free(h_in);
    free(h_out);
    free(h_exp);
    return ft_finish(&t);
}
