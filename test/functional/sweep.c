/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Odd sizes: every collective (allreduce, broadcast, reduce, allgather,
 * reduce_scatter, alltoall), in place and out of place, over a list of
 * counts that are not powers of two: 0-3, primes from 7 to 65537, counts
 * not divisible by the ranks, one element either side of the pipeline
 * chunk in force (and 2 chunks + 1, 7 chunks - 3), sizes from 1 KB to a
 * few MB; float32, int32 and int8 sums over all of them, float64 and
 * float16 sums and an int32 max over a part. Every element of every
 * result is checked against a closed form of the rank and the index, and
 * guard bytes before and after every buffer must be left untouched (so
 * must an out-of-place send buffer).
 *
 *   sweep [-D host|cuda] [-S] [-L] [-q] [-s N] [-v] [-C COLLS] [-d DTYPES] [-c COUNTS]
 *         [-i 0|1]
 *
 *   -D cuda   buffers in GPU memory (GPU local_rank % count); not run (77)
 *             where there is no GPU. Host and device runs share every code
 *             path but the allocator and the copies in and out.
 *   -S        with -D cuda: each collective's stream-ordered twin too
 *             (fc_*_stream; alltoall has none), after the blocking call:
 *             copies in, the call and copies out queued on one stream,
 *             then a stream synchronize, then the same checks.
 *   -L        large sizes too: 16777221 (64 MiB + 20 B) and 67108859
 *             (256 MiB - 20 B) float32, 50331663 int8 (48 MiB + 15 B);
 *             buffers up to 272 MiB (else 17 MiB: larger calls are left
 *             out, and counted in the last line).
 *   -q        quick: buffers up to 2 MiB, no float16 or int32 max.
 *   -C LIST   collectives (allreduce,broadcast,reduce,allgather,
 *             reduce_scatter,alltoall); -d LIST datatypes, each
 *             "name" or "name:op" (float32, int8:max ...); -c LIST counts;
 *             -i 0|1 out of place or in place only; for reproducing a
 *             failure: `sweep -D cuda -S -L -C broadcast -d int8 -c 50331663`.
 *   -v        rank 0 prints every call before it makes it.
 *
 *   -s N      soak: N calls drawn at random (the same on every rank, from
 *             FT_SOAK_SEED, default 1) from every collective, all ten
 *             datatypes (sums; int32 and int8 max, float32 and float64
 *             min), the counts above up to 2 MiB buffers, in place or not,
 *             any root, each checked as above.
 *
 * FT_SWEEP=quick in the environment is -q (run.sh's table asks for it, so
 * every run of the whole suite stays short; check.sh's own sweep runs give
 * FT_SWEEP=full, the whole list); FT_SWEEP=soak:N is -s N.
 *
 * The chunk: FC_CHUNK_SIZE from the environment (every rank's, as fc_run
 * -x gives it), rounded as the engine rounds it (down to a multiple of 64,
 * at least 64); unset, the provider's default as the README gives it
 * (fc_comm_query does not report the chunk): shm 4 MiB, tcp and others
 * 512 KiB, device buffers 512 KiB staged or 8 MiB on the gdr tier. Where
 * the guess is wrong (2 ranks on shm send whole messages; host buffers on
 * a GPU node get 512 KiB) the counts are odd all the same.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common.h"
#include "gpu_util.h"
#include "../mix.h"

enum kind { AR, BC, RD, AG, RS, A2A, NKINDS };
static const char *kname[NKINDS] = {"allreduce", "broadcast", "reduce",
                                    "allgather", "reduce_scatter", "alltoall"};

/* count classes: which plans run which counts */
enum {
    T_SMALL = 1,  /* 0-3 and small primes up to 4099 */
    T_MID = 2,    /* 65537, and counts not divisible by the ranks */
    T_CHUNK = 4,  /* around the chunk */
    T_BYTES = 8,  /* 1000, 100003, 1048577 elements */
    T_LARGE = 16, /* -L */
};

struct plan {
    fc_datatype_t dt;
    fc_op_t op;
    unsigned classes;
};

struct count {
    size_t n;
    unsigned cls;
    const char *what; /* "chunk+1" ... or NULL */
};

#define MAXCOUNTS 64
#define GUARD 256 /* bytes of guard before and after every buffer */

static struct ft t;
static int cuda, streams, verbose;
static void *stream;
static size_t chunk_bytes;
static const char *chunk_from;

/* ---- memory: the only place host and device runs differ ------------------- */
/* device memory (dev), pinned host memory (pinned) or plain malloc */
static void *alloc_in(int dev, int pinned, size_t len)
{
    return dev ? gu_alloc(len) : pinned ? gu_host_alloc(len) : malloc(len);
}

static void free_in(int dev, int pinned, void *p)
{
    if (dev)
        gu_free(p);
    else if (pinned)
        gu_host_free(p);
    else
        free(p);
}

/* buffers the calls see */
static void *mem_alloc(size_t len) { return alloc_in(cuda, 0, len); }
static void mem_free(void *p) { free_in(cuda, 0, p); }
/* host images (pinned where copies go on a stream) */
static void *img_alloc(size_t len) { return alloc_in(0, streams, len); }
static void img_free(void *p) { free_in(0, streams, p); }

/* copy in (host image to buffer) and out; on `st` when not NULL */
static int put(void *dst, const void *src, size_t len, void *st)
{
    if (!cuda) {
        memcpy(dst, src, len);
        return 0;
    }
    return st ? gu_copy_async(dst, src, len, st) : gu_to_device(dst, src, len);
}

static int get(void *dst, const void *src, size_t len, void *st)
{
    if (!cuda) {
        memcpy(dst, src, len);
        return 0;
    }
    return st ? gu_copy_async(dst, src, len, st) : gu_to_host(dst, src, len);
}

/* ---- values -------------------------------------------------------------- */
/* Values are integers, made from a hash of the rank and the index. For
 * sums: -7..7 (n ranks sum to at most 7n: exact in every type, int8 to 18
 * ranks). Otherwise (data movement, max) spread over the integers the type
 * holds exactly, so that an element from the wrong place or rank shows. */
struct vgen {
    int sum;
    uint32_t mask;
    int64_t sb, off; /* sign bit to extend, offset */
};

static void vgen_init(struct vgen *g, fc_op_t op, fc_datatype_t dt)
{
    g->sum = op == FC_SUM;
    g->sb = g->off = 0;
    switch (dt) {
    case FC_INT8: g->mask = 0xff; g->sb = 0x80; break;
    case FC_UINT8: g->mask = 0xff; break;
    case FC_INT32: g->mask = 0xffffffffu; g->sb = 0x80000000LL; break;
    case FC_FLOAT16: g->mask = 0xfff; g->off = -2048; break; /* |v| <= 2^11 */
    case FC_BFLOAT16: g->mask = 0x1ff; g->off = -256; break; /* |v| <= 2^8 */
    case FC_FLOAT32: g->mask = 0xffffff; break;              /* < 2^24 */
    default: g->mask = 0xffffffffu; break;
    }
}

static uint32_t rank_key(int r)
{
    return mix((uint32_t)r * 0x85ebca77u + 1u);
}

static inline int64_t vgen_at(const struct vgen *g, uint32_t key, size_t i)
{
    uint32_t h = mix((uint32_t)i * 0x9e3779b1u ^ key ^ (uint32_t)(i >> 32));
    if (g->sum)
        return (int64_t)(h % 15) - 7;
    return (((int64_t)(h & g->mask) ^ g->sb) - g->sb) + g->off;
}

/* n values into dst of type dt (integer types wrap) */
static void store(void *dst, size_t first, fc_datatype_t dt, const int64_t *v, size_t n)
{
    switch (dt) {
#define ST(T)                                                                                  \
    for (size_t k = 0; k < n; k++)                                                             \
        ((T *)dst)[first + k] = (T)v[k];                                                       \
    break;
    case FC_INT8: ST(int8_t)
    case FC_UINT8: ST(uint8_t)
    case FC_INT32: ST(int32_t)
    case FC_UINT32: ST(uint32_t)
    case FC_INT64: ST(int64_t)
    case FC_UINT64: ST(uint64_t)
    case FC_FLOAT32: ST(float)
    case FC_FLOAT64: ST(double)
#undef ST
    default:
        for (size_t k = 0; k < n; k++)
            ft_store(dst, first + k, dt, (double)v[k]);
        break;
    }
}

/* ---- one call ------------------------------------------------------------ */
struct call {
    enum kind k;
    fc_datatype_t dt;
    fc_op_t op;
    size_t count, es;
    int ip, root;
    const char *what;
};

static int is_red(enum kind k)
{
    return k == AR || k == RD || k == RS;
}

/* elements of the send and receive buffers as the API defines them */
static size_t nsend(const struct call *c)
{
    return (c->k == RS || c->k == A2A) ? c->count * (size_t)t.size : c->count;
}

static size_t nrecv(const struct call *c)
{
    return (c->k == AG || c->k == A2A) ? c->count * (size_t)t.size : c->count;
}

#define BLK 4096

/* elements first.. of rank r's input, into dst at `at` */
static void fill_input(const struct call *c, int r, size_t first, size_t n, void *dst, size_t at)
{
    struct vgen g;
    vgen_init(&g, is_red(c->k) ? c->op : FC_MIN, c->dt);
    const uint32_t key = rank_key(c->k == BC ? c->root : r);
    int64_t v[BLK];
    for (size_t b = 0; b < n; b += BLK) {
        size_t m = n - b < BLK ? n - b : BLK;
        for (size_t k = 0; k < m; k++)
            v[k] = vgen_at(&g, key, first + b + k);
        store(dst, at + b, c->dt, v, m);
    }
}

/* the n elements of this rank's expected result */
static void fill_expect(const struct call *c, size_t n, void *dst)
{
    struct vgen g;
    vgen_init(&g, is_red(c->k) ? c->op : FC_MIN, c->dt);
    uint32_t *keys = malloc((size_t)t.size * sizeof(*keys));
    for (int r = 0; r < t.size; r++)
        keys[r] = rank_key(r);
    const size_t cnt = c->count, off = c->k == RS ? (size_t)t.rank * cnt : 0;
    int64_t v[BLK];
    for (size_t b = 0; b < n; b += BLK) {
        size_t m = n - b < BLK ? n - b : BLK;
        for (size_t k = 0; k < m; k++) {
            size_t i = b + k;
            switch (c->k) {
            case AR:
            case RD:
            case RS: {
                int64_t acc = vgen_at(&g, keys[0], off + i);
                for (int r = 1; r < t.size; r++) {
                    int64_t x = vgen_at(&g, keys[r], off + i);
                    acc = c->op == FC_MAX ? (x > acc ? x : acc)
                        : c->op == FC_MIN ? (x < acc ? x : acc) : acc + x;
                }
                v[k] = acc;
                break;
            }
            case BC: v[k] = vgen_at(&g, keys[c->root], i); break;
            case AG: v[k] = vgen_at(&g, keys[i / cnt], i % cnt); break;
            default: /* alltoall: block j from rank j, its block for this rank */
                v[k] = vgen_at(&g, keys[i / cnt], (size_t)t.rank * cnt + i % cnt);
                break;
            }
        }
        store(dst, b, c->dt, v, m);
    }
    free(keys);
}

/* Buffers: A (a send buffer of its own) and B; each GUARD bytes of guard,
 * the data, GUARD bytes of guard, in memory (host or device) and as a host
 * image; out images of what came back; the expected result. */
static char *dA, *dB, *imA, *imB, *outA, *outB, *expb;
static size_t cap; /* data bytes each may hold */

/* The guards' pattern differs from buffer to buffer and rank to rank
 * (salt), so that bytes read past the end of a peer's buffer and written
 * past the end of ours do not match it. */
static uint8_t guard_byte(unsigned salt, size_t k)
{
    return (uint8_t)(0xa5 + 37 * k + 101 * salt + (salt >> 8));
}

static unsigned salt_of(int b)
{
    return 2u * (unsigned)t.rank + (unsigned)b + 1u;
}

static void guards(char *img, size_t len, unsigned salt)
{
    for (size_t k = 0; k < GUARD; k++) {
        img[k] = (char)guard_byte(salt, k);
        img[GUARD + len + k] = (char)guard_byte(salt, k + GUARD);
    }
}

/* index of the first guard byte changed (from the data's start), -1 if none */
static long guard_hit(const char *img, size_t len, unsigned salt)
{
    for (size_t k = 0; k < GUARD; k++)
        if ((uint8_t)img[k] != guard_byte(salt, k))
            return (long)k - GUARD;
    for (size_t k = 0; k < GUARD; k++)
        if ((uint8_t)img[GUARD + len + k] != guard_byte(salt, k + GUARD))
            return (long)(len + k);
    return -1;
}

static double g_checked; /* elements checked */
static long g_calls, g_stream_calls;

static void describe(const struct call *c, const char *how, char *buf, size_t len)
{
    char root[32] = "";
    if (c->k == BC || c->k == RD)
        snprintf(root, sizeof(root), " root %d", c->root);
    snprintf(buf, len, "%s %s%s%s count %zu%s%s%s in_place %d%s (%s, %s memory, chunk %zu)",
             kname[c->k], ft_dt_name(c->dt), is_red(c->k) ? " " : "",
             is_red(c->k) ? ft_op_name(c->op) : "", c->count, c->what ? " [" : "",
             c->what ? c->what : "", c->what ? "]" : "", c->ip, root, how,
             cuda ? "device" : "host", chunk_bytes);
}

static fc_result_t invoke(const struct call *c, void *s, void *r, void *st)
{
    size_t n = c->count;
    fc_datatype_t dt = c->dt;
    switch (c->k) {
    case AR: return st ? fc_allreduce_stream(s, r, n, dt, c->op, t.comm, st)
                       : fc_allreduce(s, r, n, dt, c->op, t.comm);
    case BC: return st ? fc_broadcast_stream(s, r, n, dt, c->root, t.comm, st)
                       : fc_broadcast(s, r, n, dt, c->root, t.comm);
    case RD: return st ? fc_reduce_stream(s, r, n, dt, c->op, c->root, t.comm, st)
                       : fc_reduce(s, r, n, dt, c->op, c->root, t.comm);
    case AG: return st ? fc_allgather_stream(s, r, n, dt, t.comm, st)
                       : fc_allgather(s, r, n, dt, t.comm);
    case RS: return st ? fc_reduce_scatter_stream(s, r, n, dt, c->op, t.comm, st)
                       : fc_reduce_scatter(s, r, n, dt, c->op, t.comm);
    default: return fc_alltoall(s, r, n, dt, t.comm);
    }
}

/* One call, blocking (st NULL) or stream-ordered on st, checked. */
static void run_call(const struct call *c, void *st)
{
    const size_t es = c->es, cnt = c->count, ns = nsend(c), nr = nrecv(c);
    const int me = t.rank, root = me == c->root;
    char what[256];
    describe(c, st ? "stream-ordered" : "blocking", what, sizeof(what));
    if (verbose && me == 0)
        printf("sweep: > %s\n", what);
    /* Layout: which buffers hold what. lenA/lenB: data elements (-1: the
     * buffer is not used); s, r: offsets into them (or NULL); res: where
     * the result lands in the out images; keepA: A must come back as it
     * went (an out-of-place send buffer). */
    long lenA = -1, lenB = -1;
    char *s = NULL, *r = NULL;
    const char *res = NULL;
    int keepA = 0;
    char *a = dA + GUARD, *b = dB + GUARD;
    switch (c->k) {
    case AR:
    case A2A:
        lenB = (long)nr;
        if (c->ip) {
            s = r = b;
        } else {
            lenA = (long)ns;
            s = a;
            r = b;
            keepA = 1;
        }
        res = outB + GUARD;
        break;
    case BC:
        lenB = (long)nr;
        r = b;
        if (root && c->ip) {
            s = b;
        } else if (root) {
            lenA = (long)ns;
            s = a;
            keepA = 1;
        }
        res = outB + GUARD;
        break;
    case RD:
        if (root && c->ip) {
            lenB = (long)nr;
            s = r = b;
        } else {
            lenA = (long)ns;
            s = a;
            keepA = 1;
            if (root) {
                lenB = (long)nr;
                r = b;
            }
        }
        res = root ? outB + GUARD : NULL;
        break;
    case AG:
        lenB = (long)nr;
        r = b;
        if (c->ip) {
            s = b + (size_t)me * cnt * es;
        } else {
            lenA = (long)ns;
            s = a;
            keepA = 1;
        }
        res = outB + GUARD;
        break;
    case RS:
        lenA = (long)ns;
        s = a;
        if (c->ip) {
            r = a + (size_t)me * cnt * es;
            res = outA + GUARD + (size_t)me * cnt * es;
        } else {
            keepA = 1;
            lenB = (long)nr;
            r = b;
            res = outB + GUARD;
        }
        break;
    default: break;
    }
    /* images: A holds the input; B poison, or the input where in place */
    if (lenA >= 0) {
        fill_input(c, me, 0, (size_t)lenA, imA + GUARD, 0);
        guards(imA, (size_t)lenA * es, salt_of(0));
    }
    if (lenB >= 0) {
        memset(imB + GUARD, 0x7b, (size_t)lenB * es);
        if (lenA < 0 && s) /* in place in B: the input at s */
            fill_input(c, me, 0, ns, imB + GUARD, (size_t)(s - b) / es);
        guards(imB, (size_t)lenB * es, salt_of(1));
    }
    int bad = 0;
    if (lenA >= 0)
        bad |= put(dA, imA, (size_t)lenA * es + 2 * GUARD, st);
    if (lenB >= 0)
        bad |= put(dB, imB, (size_t)lenB * es + 2 * GUARD, st);
    FT_CHECK(&t, !bad, "%s: copying in failed", what);
    fc_result_t rc = invoke(c, s, r, st);
    if (rc != FC_SUCCESS) {
        ft_fail(&t, __FILE__, __LINE__, "%s: %s: %s", what, fc_strerror(rc), fc_last_error());
        return;
    }
    if (lenA >= 0)
        bad |= get(outA, dA, (size_t)lenA * es + 2 * GUARD, st);
    if (lenB >= 0)
        bad |= get(outB, dB, (size_t)lenB * es + 2 * GUARD, st);
    if (st)
        bad |= gu_stream_sync(st);
    FT_CHECK(&t, !bad, "%s: copying out (or synchronizing the stream) failed", what);
    if (st) { /* an error after the call returned shows here (or in the next call) */
        fc_comm_attr_t attr;
        rc = fc_comm_query(t.comm, &attr);
        FT_CHECK(&t, rc == FC_SUCCESS, "%s: fc_comm_query after the stream synchronize: %s: %s",
                 what, fc_strerror(rc), fc_last_error());
    }
    g_calls++;
    g_stream_calls += st != NULL;
    /* every element of the result */
    if (res) {
        fill_expect(c, nr, expb);
        if (memcmp(res, expb, nr * es) != 0) {
            size_t first = nr, last = 0, nbad = 0;
            for (size_t i = 0; i < nr; i++)
                if (memcmp(res + i * es, expb + i * es, es) != 0) {
                    if (first == nr)
                        first = i;
                    last = i;
                    nbad++;
                }
            ft_fail(&t, __FILE__, __LINE__,
                    "%s: element %zu of %zu is %g, expected %g (%zu wrong, the last at %zu)",
                    what, first, nr, ft_load(res, first, c->dt), ft_load(expb, first, c->dt),
                    nbad, last);
        }
        g_checked += (double)nr;
    }
    long gh;
    if (lenA >= 0 && (gh = guard_hit(outA, (size_t)lenA * es, salt_of(0))) != -1)
        ft_fail(&t, __FILE__, __LINE__, "%s: the guard %s the send buffer (%zu bytes) was "
                "written at byte %ld", what, gh < 0 ? "before" : "after", (size_t)lenA * es, gh);
    if (lenB >= 0 && (gh = guard_hit(outB, (size_t)lenB * es, salt_of(1))) != -1)
        ft_fail(&t, __FILE__, __LINE__, "%s: the guard %s the receive buffer (%zu bytes) was "
                "written at byte %ld", what, gh < 0 ? "before" : "after", (size_t)lenB * es, gh);
    if (keepA && memcmp(outA + GUARD, imA + GUARD, (size_t)lenA * es) != 0) {
        size_t i = 0;
        while (memcmp(outA + GUARD + i * es, imA + GUARD + i * es, es) == 0)
            i++;
        ft_fail(&t, __FILE__, __LINE__, "%s: the send buffer was modified at element %zu", what,
                i);
    }
}

/* ---- the lists ----------------------------------------------------------- */
static size_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    switch (*end) {
    case 'k': case 'K': v <<= 10; break;
    case 'm': case 'M': v <<= 20; break;
    case 'g': case 'G': v <<= 30; break;
    default: break;
    }
    return (size_t)v;
}

/* The chunk the engine cuts steps into, as far as this program can know */
static void chunk_in_force(const fc_comm_attr_t *attr)
{
    const char *e = getenv("FC_CHUNK_SIZE");
    size_t c = e && *e ? parse_size(e) : 0;
    chunk_from = "FC_CHUNK_SIZE";
    if (!c) {
        chunk_from = "the provider's default, assumed";
        if (cuda)
            c = attr->hmem ? 8u << 20 : 512u << 10;
        else if (!strncmp(attr->provider, "shm", 3))
            c = 4u << 20; /* 2 ranks: whole messages; the counts are still odd */
        else
            c = 512u << 10;
    }
    chunk_bytes = c < 64 ? 64 : c & ~(size_t)63; /* as sched_start rounds it */
}

static int add(struct count *v, int nv, size_t n, unsigned cls, const char *what)
{
    for (int i = 0; i < nv; i++)
        if (v[i].n == n) {
            v[i].cls |= cls;
            if (!v[i].what)
                v[i].what = what;
            return nv;
        }
    if (nv < MAXCOUNTS)
        v[nv++] = (struct count){n, cls, what};
    return nv;
}

/* counts for one element size */
static int counts_for(size_t es, int large, struct count *v)
{
    static const size_t small[] = {0, 1, 2, 3, 7, 13, 31, 61, 127, 257, 1021, 4099};
    int nv = 0;
    for (size_t i = 0; i < sizeof(small) / sizeof(small[0]); i++)
        nv = add(v, nv, small[i], T_SMALL, NULL);
    nv = add(v, nv, 65537, T_MID, NULL);
    const size_t n = (size_t)t.size;
    if (n > 1) {
        nv = add(v, nv, 5 * n + 1, T_MID, "5 ranks + 1");
        nv = add(v, nv, 1000 * n + n - 1, T_MID, "1000 ranks + ranks - 1");
    }
    size_t ce = chunk_bytes / es; /* elements per chunk */
    nv = add(v, nv, ce - 1, T_CHUNK, "chunk-1");
    nv = add(v, nv, ce, T_CHUNK, "chunk");
    nv = add(v, nv, ce + 1, T_CHUNK, "chunk+1");
    nv = add(v, nv, 2 * ce + 1, T_CHUNK, "2 chunks+1");
    nv = add(v, nv, 7 * ce - 3, T_CHUNK, "7 chunks-3");
    nv = add(v, nv, 1000, T_BYTES, NULL);
    nv = add(v, nv, 100003, T_BYTES, NULL);
    nv = add(v, nv, 1048577, T_BYTES, NULL);
    if (large) {
        nv = add(v, nv, 16777221, T_LARGE, "64 MiB + 20 B of float32");
        nv = add(v, nv, 67108859, T_LARGE, "256 MiB - 20 B of float32");
        nv = add(v, nv, 50331663, T_LARGE, "48 MiB + 15 B of int8");
    }
    return nv;
}

static int parse_dt(const char *s, struct plan *p)
{
    char name[32];
    snprintf(name, sizeof(name), "%s", s);
    char *colon = strchr(name, ':');
    p->op = FC_SUM;
    if (colon) {
        *colon = '\0';
        int o;
        for (o = 0; o < 5 && strcmp(colon + 1, ft_op_name(ft_ops[o])); o++)
            ;
        if (o == 5 || ft_ops[o] == FC_PROD || ft_ops[o] == FC_AVG)
            return -1; /* sum, min and max are exact here */
        p->op = ft_ops[o];
    }
    for (int d = 0; d < 10; d++)
        if (!strcmp(name, ft_dt_name(ft_dtypes[d]))) {
            p->dt = ft_dtypes[d];
            p->classes = ~0u;
            return 0;
        }
    return -1;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: sweep [-D host|cuda] [-S] [-L] [-q] [-s N] [-v] [-C COLLS] [-d DTYPES] "
               "[-c COUNTS] [-i 0|1]\n(see the comment at the top of test/functional/sweep.c)\n");
}

int main(int argc, char **argv)
{
    int large = 0, quick = 0, only_ip = -1;
    long soak = 0;
    unsigned kinds = (1u << NKINDS) - 1;
    const char *dts = NULL, *cnts = NULL;
    const char *env = getenv("FT_SWEEP");
    if (env && !strcmp(env, "quick"))
        quick = 1;
    if (env && !strncmp(env, "soak:", 5))
        soak = atol(env + 5);
    int o;
    while ((o = getopt(argc, argv, "D:SLqs:vC:d:c:i:h")) != -1) {
        switch (o) {
        case 'D':
            if (!strcasecmp(optarg, "cuda"))
                cuda = 1;
            else if (strcasecmp(optarg, "host")) {
                usage(stderr);
                return 2;
            }
            break;
        case 'S': streams = 1; break;
        case 'L': large = 1; break;
        case 'q': quick = 1; break;
        case 's': soak = atol(optarg); break;
        case 'v': verbose = 1; break;
        case 'C': {
            kinds = 0;
            char *dup = strdup(optarg), *save = NULL;
            for (char *w = strtok_r(dup, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
                int k;
                for (k = 0; k < NKINDS && strcmp(w, kname[k]); k++)
                    ;
                if (k == NKINDS) {
                    fprintf(stderr, "sweep: -C: no collective %s\n", w);
                    return 2;
                }
                kinds |= 1u << k;
            }
            free(dup);
            break;
        }
        case 'd': dts = optarg; break;
        case 'c': cnts = optarg; break;
        case 'i': only_ip = atoi(optarg) != 0; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (streams && !cuda) {
        fprintf(stderr, "sweep: -S (the stream-ordered twins) needs -D cuda\n");
        return 2;
    }
    /* datatypes and ops */
    struct plan plans[16];
    int np = 0;
    if (dts) {
        char *dup = strdup(dts), *save = NULL;
        for (char *w = strtok_r(dup, ",", &save); w && np < 16; w = strtok_r(NULL, ",", &save))
            if (parse_dt(w, &plans[np++]) != 0) {
                fprintf(stderr, "sweep: -d: %s is not a datatype[:sum|min|max]\n", w);
                return 2;
            }
        free(dup);
    } else if (soak > 0) {
        const unsigned all = T_SMALL | T_MID | T_CHUNK | T_BYTES;
        quick = 1;
        large = 0;
        for (int d = 0; d < 10; d++)
            plans[np++] = (struct plan){ft_dtypes[d], FC_SUM, all};
        plans[np++] = (struct plan){FC_INT32, FC_MAX, all};
        plans[np++] = (struct plan){FC_INT8, FC_MAX, all};
        plans[np++] = (struct plan){FC_FLOAT32, FC_MIN, all};
        plans[np++] = (struct plan){FC_FLOAT64, FC_MIN, all};
    } else {
        const unsigned all = T_SMALL | T_MID | T_CHUNK | T_BYTES;
        plans[np++] = (struct plan){FC_FLOAT32, FC_SUM, all | T_LARGE};
        plans[np++] = (struct plan){FC_INT32, FC_SUM, all};
        plans[np++] = (struct plan){FC_INT8, FC_SUM, all | T_LARGE};
        plans[np++] = (struct plan){FC_FLOAT64, FC_SUM, T_SMALL | T_CHUNK};
        if (!quick) {
            plans[np++] = (struct plan){FC_FLOAT16, FC_SUM, T_CHUNK};
            plans[np++] = (struct plan){FC_INT32, FC_MAX, T_CHUNK};
        }
    }
    ft_init(&t, "sweep");
    fc_comm_attr_t attr;
    FT_OK(&t, fc_comm_query(t.comm, &attr));
    if (cuda) {
        const char *why = NULL;
        if (gu_init(attr.local_rank, &why) != 0)
            return ft_skip(&t, why);
        if (streams && !(stream = gu_stream_create())) {
            ft_fail(&t, __FILE__, __LINE__, "cannot create a CUDA stream");
            return ft_finish(&t);
        }
    }
    chunk_in_force(&attr);

    /* each datatype's counts; the buffers' size */
    const size_t limit = large ? (272u << 20) : quick ? (2u << 20) : (17u << 20);
    static struct count lists[16][MAXCOUNTS];
    int nl[16];
    size_t need = 0;
    for (int p = 0; p < np; p++) {
        size_t es = fc_datatype_size(plans[p].dt);
        if (cnts) {
            nl[p] = 0;
            char *dup = strdup(cnts), *save = NULL;
            for (char *w = strtok_r(dup, ",", &save); w; w = strtok_r(NULL, ",", &save))
                nl[p] = add(lists[p], nl[p], strtoull(w, NULL, 10), ~0u, NULL);
            free(dup);
        } else {
            nl[p] = counts_for(es, large, lists[p]);
        }
        for (int i = 0; i < nl[p]; i++) {
            struct count *c = &lists[p][i];
            if (!(c->cls & plans[p].classes))
                c->cls = 0; /* not for this datatype */
            /* the large ones each for the type it is named for */
            if ((c->cls & T_LARGE) && !(c->cls & ~T_LARGE) &&
                ((c->n == 50331663) != (plans[p].dt == FC_INT8)))
                c->cls = 0;
            /* the largest buffer of any kind that fits under the limit */
            size_t bytes = c->n * (size_t)t.size * es;
            if (bytes > limit)
                bytes = c->n * es;
            if (c->cls && bytes <= limit && bytes > need)
                need = bytes;
        }
    }
    cap = need;
    size_t ilen = cap + 2 * GUARD;
    dA = mem_alloc(ilen);
    dB = mem_alloc(ilen);
    imA = img_alloc(ilen);
    imB = img_alloc(ilen);
    outA = img_alloc(ilen);
    outB = img_alloc(ilen);
    expb = malloc(cap + 64);
    if (!dA || !dB || !imA || !imB || !outA || !outB || !expb) {
        ft_fail(&t, __FILE__, __LINE__, "cannot allocate 2 x %zu bytes of %s memory and their "
                "images", ilen, cuda ? "device" : "host");
        return ft_finish(&t);
    }
    if (t.rank == 0)
        printf("sweep: %d ranks, provider %s, %s buffers%s%s, chunk %zu bytes (%s), buffers "
               "up to %zu bytes\n", t.size, attr.provider, cuda ? "device" : "host",
               cuda ? (attr.hmem ? " (gdr)" : " (staged)") : "",
               streams ? ", blocking and stream-ordered calls" : "", chunk_bytes, chunk_from,
               cap);
    const double t0 = ft_now();
    long skipped = 0, seq = 0;
    uint64_t lcg = getenv("FT_SOAK_SEED") ? strtoull(getenv("FT_SOAK_SEED"), NULL, 10) : 1;
    long rejected = 0;
    for (long n = 0; n < soak; n++) {
        if (rejected > 1000000) {
            ft_fail(&t, __FILE__, __LINE__, "soak: no call of -C/-d/-c/-i fits the buffers");
            break;
        }
        /* the same draws on every rank */
        uint32_t d[6];
        for (int j = 0; j < 6; j++) {
            lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
            d[j] = (uint32_t)(lcg >> 33);
        }
        int k = (int)(d[0] % NKINDS), p = (int)(d[1] % (uint32_t)np);
        if (!(kinds & (1u << k)) || (!is_red((enum kind)k) && plans[p].op != FC_SUM) ||
            nl[p] == 0) {
            n--, rejected++;
            continue;
        }
        const struct count *cn = &lists[p][d[2] % (uint32_t)nl[p]];
        struct call c = {.k = (enum kind)k, .dt = plans[p].dt, .op = plans[p].op,
                         .count = cn->n, .es = fc_datatype_size(plans[p].dt), .what = cn->what,
                         .ip = (int)(d[3] & 1), .root = (int)(d[4] % (uint32_t)t.size)};
        size_t big = (nsend(&c) > nrecv(&c) ? nsend(&c) : nrecv(&c)) * c.es;
        if (!cn->cls || big > limit || big > cap || (only_ip >= 0 && c.ip != only_ip)) {
            n--, rejected++;
            continue;
        }
        rejected = 0;
        run_call(&c, NULL);
        if (n % 64 == 63 || n == soak - 1) {
            int32_t mine = t.failures, most = 0;
            if (fc_allreduce(&mine, &most, 1, FC_INT32, FC_MAX, t.comm) != FC_SUCCESS ||
                most > 0) {
                fprintf(stderr, "sweep: rank %d: soak stops after call %ld: %d failures here, "
                        "%d on the rank with the most\n", t.rank, n, t.failures, (int)most);
                goto done;
            }
        }
    }
    for (int k = 0; k < NKINDS && soak == 0; k++) {
        if (!(kinds & (1u << k)))
            continue;
        for (int p = 0; p < np; p++) {
            /* the op matters to reductions only */
            if (!is_red((enum kind)k) && plans[p].op != FC_SUM)
                continue;
            for (int i = 0; i < nl[p]; i++) {
                const struct count *cn = &lists[p][i];
                if (!cn->cls)
                    continue;
                struct call c = {.k = (enum kind)k, .dt = plans[p].dt, .op = plans[p].op,
                                 .count = cn->n, .es = fc_datatype_size(plans[p].dt),
                                 .what = cn->what};
                size_t big = (nsend(&c) > nrecv(&c) ? nsend(&c) : nrecv(&c)) * c.es;
                if (big > limit || big > cap) {
                    skipped++;
                    continue;
                }
                for (int ip = 0; ip < 2; ip++) {
                    if (only_ip >= 0 && ip != only_ip)
                        continue;
                    c.ip = ip;
                    c.root = (int)(seq++ % (size_t)t.size);
                    run_call(&c, NULL);
                    if (streams && k != A2A)
                        run_call(&c, stream);
                    /* stop together: a rank that stopped alone would
                     * leave the others waiting in its next call */
                    int32_t mine = t.failures, most = 0;
                    if (fc_allreduce(&mine, &most, 1, FC_INT32, FC_MAX, t.comm) != FC_SUCCESS ||
                        most > 20) {
                        fprintf(stderr, "sweep: rank %d: stopping after %d failures here, %d on "
                                "the rank with the most\n", t.rank, t.failures, (int)most);
                        goto done;
                    }
                }
            }
        }
    }
done:
    if (t.rank == 0)
        printf("sweep: %ld calls (%ld stream-ordered), %.0f elements checked on rank 0, %ld "
               "count%s over the %zu-byte cap left out, %.1f s\n", g_calls, g_stream_calls,
               g_checked, skipped, skipped == 1 ? "" : "s", limit, ft_now() - t0);
    if (stream)
        gu_stream_destroy(stream);
    mem_free(dA);
    mem_free(dB);
    img_free(imA);
    img_free(imB);
    img_free(outA);
    img_free(outB);
    free(expb);
    return ft_finish(&t);
}
