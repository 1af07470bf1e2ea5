/* SPDX-License-Identifier: BSD-3-Clause */
/* fc_allgatherv and fc_alltoallv (and their nonblocking twins) over count
 * patterns users have: even, all 0, one rank 1000x the others with most
 * counts 0, uneven, a single nonzero block, and large; every datatype on
 * some; displacements packed in rank order or reversed with gaps; allgatherv
 * in place. Every element is checked, and the gaps between blocks keep what
 * was there. FT_VCOLL_MEMORY=device or stream runs them on GPU buffers. */
#include <string.h>

#include "common.h"
#include "gpu_util.h"

/* FT_VCOLL_MEMORY=device: the same cases on device buffers (blocking and
 * nonblocking calls); =stream: on device buffers through the stream twins.
 * Inputs are written on the host and copied in, results copied out. */
static int mem; /* 0 host, 1 device, 2 stream */
static void *stream;

static void *dev_copy(const void *h, size_t bytes)
{
    void *d = gu_alloc(bytes + 64);
    if (d && bytes)
        gu_to_device(d, h, bytes);
    return d;
}

/* host buffers h[i] of bytes[i]: device copies in d[i] (mem != 0), or the
 * host buffers themselves */
static int to_dev(int nbuf, char **h, const size_t *bytes, char **d)
{
    for (int i = 0; i < nbuf; i++) {
        d[i] = mem ? dev_copy(h[i], bytes[i]) : h[i];
        if (!d[i])
            return -1;
    }
    return 0;
}

static void from_dev(int nbuf, char **h, const size_t *bytes, char **d)
{
    for (int i = 0; i < nbuf && mem; i++) {
        if (bytes[i])
            gu_to_host(h[i], d[i], bytes[i]);
        gu_free(d[i]);
    }
}

#define NPAT 6
static const char *const pat_name[NPAT] = {"even", "zero", "skewed", "uneven", "single", "large"};

/* Pattern p's count for the block rank `from` gives rank `to` (allgatherv:
 * to is ignored). Every rank computes the same. */
static size_t pat(int p, int from, int to, int n)
{
    switch (p) {
    case 0: return 5;
    case 1: return 0;
    case 2: return from == n / 2 ? 1000 : (from + to) % 3 == 0 ? 1 : 0;
    case 3: return (size_t)((from * 7 + (to < 0 ? 0 : to) * 3) % 11);
    case 4: return from == n - 1 && (to < 0 || to == 0) ? 4099 : 0;
    default: return 20011 + (size_t)from * 17 + (size_t)(to < 0 ? 0 : to);
    }
}

/* element i of the block rank `from` sends rank `to`: unique per (from, to, i) */
static double val(int from, int to, size_t i)
{
    return (double)((from * 31 + to * 7 + (int)(i % 13)) % 100);
}

/* displacements of n blocks: packed, or reversed with one element before
 * each; returns the extent */
static size_t layout(const size_t *c, int n, int rev, size_t *d)
{
    size_t at = 0;
    for (int k = 0; k < n; k++) {
        int j = rev ? n - 1 - k : k;
        at += rev ? 1 : 0;
        d[j] = at;
        at += c[j];
    }
    return at;
}

/* every block of buf where it belongs (from rank j: val(j, to_of(j), i));
 * every other element still 0xab bytes */
static int check(struct ft *t, const char *what, const char *buf, size_t ext, const size_t *c,
                 const size_t *d, fc_datatype_t dt, int a2a, int p)
{
    const size_t es = fc_datatype_size(dt);
    char *want = malloc(ext * es + 8);
    memset(want, 0xab, ext * es);
    for (int j = 0; j < t->size; j++)
        for (size_t i = 0; i < c[j]; i++)
            ft_store(want, d[j] + i, dt, val(j, a2a ? t->rank : -1, i));
    int bad = 0;
    for (size_t e = 0; e < ext && !bad; e++)
        if (memcmp(buf + e * es, want + e * es, es) != 0) {
            ft_fail(t, __FILE__, __LINE__, "%s %s counts %s: element %zu of %zu is %g, expected %g",
                    what, ft_dt_name(dt), pat_name[p], e, ext, ft_load(buf, e, dt),
                    ft_load(want, e, dt));
            bad = 1;
        }
    free(want);
    return bad;
}

int main(void)
{
    struct ft t;
    ft_init(&t, "vcoll");
    const int n = t.size, me = t.rank;
    if ((mem = ft_memory(&t, "FT_VCOLL_MEMORY", &stream)) < 0)
        return FT_SKIP;
    size_t *rc = calloc((size_t)n, sizeof(size_t)), *rd = calloc((size_t)n, sizeof(size_t));
    size_t *sc = calloc((size_t)n, sizeof(size_t)), *sd = calloc((size_t)n, sizeof(size_t));
    int ncase = 0;
    for (int p = 0; p < NPAT; p++)
        for (int d = 0; d < 10; d++) {
            /* every type on even and uneven counts; float32, int8, float64 else */
            if (p != 0 && p != 3 && d != 0 && d != 8 && d != 9)
                continue;
            fc_datatype_t dt = ft_dtypes[d];
            const size_t es = fc_datatype_size(dt);
            const int rev = (p + d) % 2, nb = (p + d / 2) % 2;
            ncase++;
            /* ---- allgatherv (in place on every other case) ---- */
            for (int j = 0; j < n; j++)
                rc[j] = pat(p, j, -1, n);
            size_t ext = layout(rc, n, rev, rd);
            const int ip = (p + d) % 3 == 0;
            char *out = malloc(ext * es + 8), *mine = malloc(rc[me] * es + 8);
            memset(out, 0xab, ext * es);
            char *src = ip ? out + rd[me] * es : mine;
            for (size_t i = 0; i < rc[me]; i++)
                ft_store(src, i, dt, val(me, -1, i));
            fc_result_t r;
            char *hb[2] = {out, mine}, *db[2];
            size_t hl[2] = {ext * es, ip ? 0 : rc[me] * es};
            if (to_dev(2, hb, hl, db)) {
                ft_fail(&t, __FILE__, __LINE__, "cannot allocate device memory");
                break;
            }
            char *dsrc = ip ? db[0] + rd[me] * es : db[1];
            if (mem == 2) {
                r = fc_allgatherv_stream(dsrc, db[0], rc[me], rc, rd, dt, t.comm, stream);
                if (r == FC_SUCCESS && gu_stream_sync(stream) != 0)
                    r = FC_ERR_CUDA;
            } else if (nb) {
                fc_request_t req = NULL;
                r = fc_iallgatherv(dsrc, db[0], rc[me], rc, rd, dt, t.comm, &req);
                if (r == FC_SUCCESS)
                    r = fc_wait(&req);
            } else {
                r = fc_allgatherv(dsrc, db[0], rc[me], rc, rd, dt, t.comm);
            }
            from_dev(2, hb, hl, db);
            FT_CHECK(&t, r == FC_SUCCESS, "allgatherv %s counts %s: %s", ft_dt_name(dt),
                     pat_name[p], fc_last_error());
            if (r == FC_SUCCESS)
                check(&t, "allgatherv", out, ext, rc, rd, dt, 0, p);
            free(out);
            free(mine);
            /* ---- alltoallv ---- */
            for (int j = 0; j < n; j++) {
                sc[j] = pat(p, me, j, n);
                rc[j] = pat(p, j, me, n);
            }
            size_t sext = layout(sc, n, rev, sd), rext = layout(rc, n, !rev, rd);
            char *in = malloc(sext * es + 8), *keep = malloc(sext * es + 8);
            out = malloc(rext * es + 8);
            memset(in, 0xcd, sext * es);
            for (int j = 0; j < n; j++)
                for (size_t i = 0; i < sc[j]; i++)
                    ft_store(in, sd[j] + i, dt, val(me, j, i));
            memcpy(keep, in, sext * es);
            memset(out, 0xab, rext * es);
            char *hv[2] = {in, out}, *dv[2];
            size_t hvl[2] = {sext * es, rext * es};
            if (to_dev(2, hv, hvl, dv)) {
                ft_fail(&t, __FILE__, __LINE__, "cannot allocate device memory");
                break;
            }
            if (mem == 2) {
                r = fc_alltoallv_stream(dv[0], dv[1], sc, sd, rc, rd, dt, t.comm, stream);
                if (r == FC_SUCCESS && gu_stream_sync(stream) != 0)
                    r = FC_ERR_CUDA;
            } else if (nb) {
                fc_request_t req = NULL;
                r = fc_ialltoallv(dv[0], dv[1], sc, sd, rc, rd, dt, t.comm, &req);
                if (r == FC_SUCCESS)
                    r = fc_wait(&req);
            } else {
                r = fc_alltoallv(dv[0], dv[1], sc, sd, rc, rd, dt, t.comm);
            }
            from_dev(2, hv, hvl, dv);
            FT_CHECK(&t, r == FC_SUCCESS, "alltoallv %s counts %s: %s", ft_dt_name(dt), pat_name[p],
                     fc_last_error());
            if (r == FC_SUCCESS)
                check(&t, "alltoallv", out, rext, rc, rd, dt, 1, p);
            FT_CHECK(&t, memcmp(in, keep, sext * es) == 0, "alltoallv: the send buffer changed");
            free(in);
            free(keep);
            free(out);
        }
    if (mem == 2)
        gu_stream_destroy(stream);
    /* arguments a rank can refuse on its own: refused, nothing sent, the
     * communicator still usable */
    float f[4] = {0}, g[64] = {0};
    for (int j = 0; j < n; j++) {
        rc[j] = 1;
        rd[j] = (size_t)j;
    }
    FT_CHECK(&t, fc_allgatherv(f, g, 2, rc, rd, FC_FLOAT32, t.comm) == FC_ERR_INVALID_ARGUMENT,
             "allgatherv: a sendcount that is not recvcounts[rank] was accepted");
    FT_CHECK(&t, fc_allgatherv(f, g, 1, NULL, rd, FC_FLOAT32, t.comm) == FC_ERR_INVALID_ARGUMENT,
             "allgatherv: NULL recvcounts was accepted");
    FT_CHECK(&t, fc_alltoallv(g, g, rc, rd, rc, rd, FC_FLOAT32, t.comm) == FC_ERR_INVALID_ARGUMENT,
             "alltoallv: the same buffer for sending and receiving was accepted");
    FT_CHECK(&t, strstr(fc_last_error(), "in-place") != NULL, "alltoallv in place: '%s'",
             fc_last_error());
    FT_CHECK(&t,
             fc_alltoallv(g, g + 1, rc, rd, rc, rd, FC_FLOAT32, t.comm) ==
                     FC_ERR_INVALID_ARGUMENT ||
                 n == 1,
             "alltoallv: partly overlapping buffers were accepted");
    rc[me] = 2;
    FT_CHECK(&t, fc_alltoallv(f, g, sc, sd, rc, rd, FC_FLOAT32, t.comm) == FC_ERR_INVALID_ARGUMENT,
             "alltoallv: sendcounts[rank] != recvcounts[rank] was accepted");
    float v = 1.0f, s = 0.0f;
    FT_OK(&t, fc_allreduce(&v, &s, 1, FC_FLOAT32, FC_SUM, t.comm));
    FT_CHECK(&t, s == (float)n, "allreduce after the refused calls: %g", s);
    if (me == 0)
        fprintf(stderr, "vcoll: %d cases of allgatherv and alltoallv at %d ranks on %s\n", ncase, n,
                mem == 2 ? "device buffers, stream-ordered"
                : mem    ? "device buffers"
                         : "host buffers");
    free(rc);
    free(rd);
    free(sc);
    free(sd);
    return ft_finish(&t);
}
