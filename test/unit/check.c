/* SPDX-License-Identifier: BSD-3-Clause */
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reduce.h"

/* Elements each rank sends / receives for a collective. */
static void sizes(const struct check_case *c, size_t *ns, size_t *nr)
{
    size_t n = (size_t)c->nranks, k = c->count;
    switch (c->kind) {
    case COLL_ALLGATHER: *ns = k; *nr = n * k; break;
    case COLL_REDUCE_SCATTER: *ns = n * k; *nr = k; break;
    case COLL_ALLTOALL: *ns = n * k; *nr = n * k; break;
    case COLL_BARRIER: *ns = 0; *nr = 0; break;
    case COLL_GATHER: *ns = k; *nr = n * k; break;
    case COLL_SCATTER: *ns = n * k; *nr = k; break;
    default: *ns = k; *nr = k; break;
    }
}

static fc_op_t fill_op(const struct check_case *c)
{
    switch (c->kind) {
    case COLL_ALLREDUCE:
    case COLL_REDUCE:
    case COLL_REDUCE_SCATTER: return c->op;
    default: return FC_MIN; /* varied values */
    }
}

/* Buffers with GUARD bytes of a known pattern before and after the len
 * bytes a collective may touch: a write past either end shows. The pattern
 * differs from buffer to buffer (salt): bytes read past the end of a
 * peer's buffer and written past the end of ours must not match it. */
#define GUARD 64
static uint8_t guard_byte(unsigned salt, size_t k)
{
    return (uint8_t)(0xa5 + 37 * k + 101 * salt + (salt >> 8));
}

static char *gmalloc(size_t len, unsigned salt)
{
    char *p = malloc(len + 2 * GUARD);
    if (!p)
        return NULL;
    for (size_t k = 0; k < GUARD; k++) {
        p[k] = (char)guard_byte(salt, k);
        p[GUARD + len + k] = (char)guard_byte(salt, GUARD + k);
    }
    return p + GUARD;
}

/* the offset of the first changed guard byte from p (< 0: before p), or 0
 * with *ok = 1 when both guards are intact */
static long gcheck(const char *p, size_t len, unsigned salt, int *ok)
{
    *ok = 0;
    for (size_t k = 0; k < GUARD; k++)
        if ((uint8_t)p[(long)k - GUARD] != guard_byte(salt, k))
            return (long)k - GUARD;
    for (size_t k = 0; k < GUARD; k++)
        if ((uint8_t)p[len + k] != guard_byte(salt, GUARD + k))
            return (long)(len + k);
    *ok = 1;
    return 0;
}

static void gfree(char *p)
{
    if (p)
        free(p - GUARD);
}

static int first_diff(const void *a, const void *b, size_t n, size_t es)
{
    for (size_t i = 0; i < n; i++)
        if (memcmp((const char *)a + i * es, (const char *)b + i * es, es) != 0)
            return (int)i;
    return -1;
}

int check_coll(const struct coll_algo *al, const struct check_case *c, char *err, size_t errlen)
{
    const int n = c->nranks;
    const size_t es = fc_datatype_size(c->dt);
    size_t ns, nr;
    sizes(c, &ns, &nr);
    int ret = 1;
    char **input = calloc((size_t)n, sizeof(char *));   /* pristine inputs */
    char **sendb = calloc((size_t)n, sizeof(char *));
    char **recvb = calloc((size_t)n, sizeof(char *));
    char **alloc = calloc((size_t)n, sizeof(char *));   /* what to free */
    char **sendcopy = calloc((size_t)n, sizeof(char *));
    char **extra = calloc((size_t)n, sizeof(char *));   /* separate send or recv buffer */
    size_t *alloc_len = calloc((size_t)n, sizeof(size_t)); /* their bytes */
    size_t *extra_len = calloc((size_t)n, sizeof(size_t));
    char *expect = malloc(nr * es + 64);
    char *acc = malloc(ns * es + 64);
    if (!input || !sendb || !recvb || !alloc || !sendcopy || !extra || !alloc_len || !extra_len ||
        !expect || !acc) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    const int poison = 0x5a;
    for (int r = 0; r < n; r++) {
        input[r] = malloc(ns * es + 64);
        h_fill(input[r], c->dt, fill_op(c), r, n, 0, ns);
        int ip = c->in_place;
        switch (c->kind) {
        case COLL_ALLGATHER:
            alloc[r] = gmalloc(alloc_len[r] = nr * es, 2 * r + 1);
            memset(alloc[r], poison, nr * es);
            recvb[r] = alloc[r];
            if (ip) {
                sendb[r] = recvb[r] + (size_t)r * c->count * es;
                memcpy(sendb[r], input[r], ns * es);
            } else {
                sendb[r] = extra[r] = gmalloc(extra_len[r] = ns * es, 2 * r + 2);
                memcpy(sendb[r], input[r], ns * es);
            }
            break;
        case COLL_REDUCE_SCATTER:
            alloc[r] = gmalloc(alloc_len[r] = ns * es, 2 * r + 1);
            sendb[r] = alloc[r];
            memcpy(sendb[r], input[r], ns * es);
            if (ip) {
                recvb[r] = sendb[r] + (size_t)r * c->count * es;
            } else {
                recvb[r] = extra[r] = gmalloc(extra_len[r] = nr * es, 2 * r + 2);
                memset(recvb[r], poison, nr * es);
            }
            break;
        case COLL_REDUCE:
        case COLL_BCAST: {
            int is_root = r == c->root;
            alloc[r] = gmalloc(alloc_len[r] = nr * es, 2 * r + 1);
            memset(alloc[r], poison, nr * es);
            if (c->kind == COLL_REDUCE && !is_root) {
                /* non-roots: recvbuf unused (NULL) */
                recvb[r] = NULL;
                sendb[r] = alloc[r];
                memcpy(sendb[r], input[r], ns * es);
            } else {
                recvb[r] = alloc[r];
                if (c->kind == COLL_BCAST && !is_root) {
                    sendb[r] = NULL;
                } else if (ip) {
                    sendb[r] = recvb[r];
                    memcpy(sendb[r], input[r], ns * es);
                } else {
                    sendb[r] = extra[r] = gmalloc(extra_len[r] = ns * es, 2 * r + 2);
                    memcpy(sendb[r], input[r], ns * es);
                }
            }
            break;
        }
        case COLL_GATHER:
        case COLL_SCATTER: {
            /* the root's n-block buffer holds (in place) its own block */
            const int g = c->kind == COLL_GATHER, is_root = r == c->root;
            const size_t own = (size_t)r * c->count * es;
            if (!is_root) {
                alloc[r] = gmalloc(alloc_len[r] = (g ? ns : nr) * es, 2 * r + 1);
                if (g) {
                    sendb[r] = alloc[r];
                    memcpy(sendb[r], input[r], ns * es);
                } else {
                    recvb[r] = alloc[r];
                    memset(recvb[r], poison, nr * es);
                }
            } else if (g) {
                alloc[r] = gmalloc(alloc_len[r] = nr * es, 2 * r + 1);
                memset(alloc[r], poison, nr * es);
                recvb[r] = alloc[r];
                sendb[r] = ip ? recvb[r] + own
                              : (extra[r] = gmalloc(extra_len[r] = ns * es, 2 * r + 2));
                memcpy(sendb[r], input[r], ns * es);
            } else {
                alloc[r] = gmalloc(alloc_len[r] = ns * es, 2 * r + 1);
                sendb[r] = alloc[r];
                memcpy(sendb[r], input[r], ns * es);
                if (ip) {
                    recvb[r] = sendb[r] + own;
                } else {
                    recvb[r] = extra[r] = gmalloc(extra_len[r] = nr * es, 2 * r + 2);
                    memset(recvb[r], poison, nr * es);
                }
            }
            break;
        }
        default: /* allreduce, alltoall, barrier */
            alloc[r] = gmalloc(alloc_len[r] = nr * es, 2 * r + 1);
            memset(alloc[r], poison, nr * es);
            recvb[r] = alloc[r];
            if (ip) {
                sendb[r] = recvb[r];
                memcpy(sendb[r], input[r], ns * es);
            } else {
                sendb[r] = extra[r] = gmalloc(extra_len[r] = ns * es, 2 * r + 2);
                memcpy(sendb[r], input[r], ns * es);
            }
            break;
        }
        int root_only = c->kind == COLL_REDUCE || c->kind == COLL_BCAST ||
                        c->kind == COLL_GATHER || c->kind == COLL_SCATTER;
        if (sendb[r] && !(ip && (!root_only || r == c->root))) {
            sendcopy[r] = malloc(ns * es + 64);
            memcpy(sendcopy[r], sendb[r], ns * es);
        }
    }

    struct coll_args tmpl = {
        .kind = c->kind, .rank = 0, .nranks = n, .root = c->root, .count = c->count,
        .dt = c->dt, .op = c->op, .esize = es, .in_place = c->in_place,
        .node = c->node, .nnodes = c->nnodes, .premul = c->premul ? (const void *)c : NULL,
    };
    char herr[512];
    fc_result_t rc;
    rc = h_run(al, &tmpl, (void **)sendb, (void **)recvb, &c->opts, herr, sizeof(herr));
    if (rc != FC_SUCCESS) {
        snprintf(err, errlen, "run failed: %s", herr);
        goto out;
    }

    reduce_fn fn = reduce_fn_get(c->dt, c->op);
    reduce_scale_fn sfn = reduce_scale_get(c->dt);
    if (c->premul) { /* each input times its rank's scalar, then summed */
        unsigned char sc[8];
        for (int r = 0; r < n; r++) {
            h_premul_scalar(c->dt, r, sc);
            reduce_premul_get(c->dt)(input[r], input[r], ns, sc);
        }
    }
    if (c->kind == COLL_ALLREDUCE || c->kind == COLL_REDUCE || c->kind == COLL_REDUCE_SCATTER) {
        memcpy(acc, input[0], ns * es);
        for (int r = 1; r < n; r++)
            fn(acc, acc, input[r], ns);
        if (c->op == FC_AVG)
            sfn(acc, acc, ns, (uint32_t)n);
    }
    for (int r = 0; r < n; r++) {
        const char *got = recvb[r];
        size_t cnt = nr;
        switch (c->kind) {
        case COLL_ALLREDUCE: memcpy(expect, acc, nr * es); break;
        case COLL_REDUCE:
            if (r != c->root)
                got = NULL;
            memcpy(expect, acc, nr * es);
            break;
        case COLL_BCAST: memcpy(expect, input[c->root], nr * es); break;
        case COLL_ALLGATHER:
            for (int j = 0; j < n; j++)
                memcpy(expect + (size_t)j * c->count * es, input[j], c->count * es);
            break;
        case COLL_REDUCE_SCATTER:
            memcpy(expect, acc + (size_t)r * c->count * es, c->count * es);
            break;
        case COLL_ALLTOALL:
            for (int j = 0; j < n; j++)
                memcpy(expect + (size_t)j * c->count * es,
                       input[j] + (size_t)r * c->count * es, c->count * es);
            break;
        case COLL_GATHER:
            if (r != c->root)
                got = NULL;
            for (int j = 0; j < n; j++)
                memcpy(expect + (size_t)j * c->count * es, input[j], c->count * es);
            break;
        case COLL_SCATTER:
            memcpy(expect, input[c->root] + (size_t)r * c->count * es, c->count * es);
            break;
        default: got = NULL; cnt = 0; break;
        }
        if (got) {
            int d = first_diff(got, expect, cnt, es);
            if (d >= 0) {
                unsigned long long gv = 0, ev = 0;
                memcpy(&gv, got + (size_t)d * es, es);
                memcpy(&ev, expect + (size_t)d * es, es);
                snprintf(err, errlen, "rank %d element %d of %zu: got 0x%llx expected 0x%llx", r,
                         d, cnt, gv, ev);
                goto out;
            }
        }
        for (int w = 0; w < 2; w++) {
            const char *p = w ? extra[r] : alloc[r];
            size_t len = w ? extra_len[r] : alloc_len[r];
            int ok;
            long at = p ? gcheck(p, len, (unsigned)(2 * r + w + 1), &ok) : 0;
            if (p && !ok) {
                snprintf(err, errlen, "rank %d: the guard %s its %zu-byte buffer was written "
                         "at byte %ld", r, at < 0 ? "before" : "after", len, at);
                goto out;
            }
        }
        if (sendcopy[r] && memcmp(sendcopy[r], sendb[r], ns * es) != 0) {
            snprintf(err, errlen, "rank %d: out-of-place input was modified", r);
            goto out;
        }
    }
    ret = 0;
out:
    for (int r = 0; r < n && input && sendcopy && alloc && extra; r++) {
        free(input[r]);
        free(sendcopy[r]);
        gfree(alloc[r]);
        gfree(extra[r]);
    }
    free(input);
    free(sendb);
    free(recvb);
    free(alloc);
    free(sendcopy);
    free(extra);
    free(alloc_len);
    free(extra_len);
    free(expect);
    free(acc);
    return ret;
}

/* ---- the v-collectives -------------------------------------------------- */

/* Displacements of n blocks of counts c[0 .. n) (stride: the step between
 * counts in c): packed in order, or in reverse order with a gap of one
 * element before each; returns the extent. */
static size_t v_layout(const size_t *c, size_t stride, int n, int layout, size_t *d)
{
    size_t at = 0;
    for (int k = 0; k < n; k++) {
        int j = layout ? n - 1 - k : k;
        at += layout ? 1 : 0;
        d[j] = at;
        at += c[(size_t)j * stride];
    }
    return at;
}

int check_vcoll(const struct coll_algo *al, const struct check_vcase *c, char *err, size_t errlen)
{
    const int n = c->nranks, a2a = c->kind == COLL_ALLTOALLV;
    const size_t es = fc_datatype_size(c->dt), nn = (size_t)n * (size_t)n;
    const int poison = 0x5a;
    int ret = 1;
    /* allgatherv: rcounts = counts, rdispls = rd[0 .. n); alltoallv: n x n
     * rows of scounts (counts), sdispls (sd), rcounts (rc), rdispls (rd) */
    size_t *sd = calloc(nn, sizeof(size_t)), *rc = calloc(nn, sizeof(size_t));
    size_t *rd = calloc(nn, sizeof(size_t));
    size_t *sext = calloc((size_t)n, sizeof(size_t)), *rext = calloc((size_t)n, sizeof(size_t));
    char **sendb = calloc((size_t)n, sizeof(char *)), **recvb = calloc((size_t)n, sizeof(char *));
    char **sown = calloc((size_t)n, sizeof(char *)), **rown = calloc((size_t)n, sizeof(char *));
    char **input = calloc((size_t)n, sizeof(char *));
    char *expect = NULL;
    if (!sd || !rc || !rd || !sext || !rext || !sendb || !recvb || !sown || !rown || !input) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    size_t maxr = 0;
    for (int i = 0; i < n; i++) {
        size_t *row = rd + (size_t)i * (size_t)n;
        if (a2a) {
            for (int j = 0; j < n; j++)
                rc[(size_t)i * (size_t)n + (size_t)j] =
                    c->counts[(size_t)j * (size_t)n + (size_t)i];
            sext[i] = v_layout(c->counts + (size_t)i * (size_t)n, 1, n, c->layout,
                               sd + (size_t)i * (size_t)n);
            rext[i] = v_layout(rc + (size_t)i * (size_t)n, 1, n, !c->layout, row);
        } else {
            rext[i] = v_layout(c->counts, 1, n, c->layout, row);
            sext[i] = c->counts[i];
        }
        maxr = rext[i] > maxr ? rext[i] : maxr;
    }
    expect = malloc(maxr * es + 64);
    if (!expect) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    for (int r = 0; r < n; r++) {
        input[r] = malloc(sext[r] * es + 64);
        rown[r] = gmalloc(rext[r] * es, 2 * (unsigned)r + 1);
        if (!input[r] || !rown[r]) {
            snprintf(err, errlen, "out of memory");
            goto out;
        }
        h_fill(input[r], c->dt, FC_MIN, r, n, 0, sext[r]);
        memset(rown[r], poison, rext[r] * es);
        recvb[r] = rown[r];
        if (!a2a && c->in_place) {
            sendb[r] = recvb[r] + rd[r] * es;
        } else {
            sown[r] = gmalloc(sext[r] * es, 2 * (unsigned)r + 2);
            if (!sown[r]) {
                snprintf(err, errlen, "out of memory");
                goto out;
            }
            sendb[r] = sown[r];
        }
        memcpy(sendb[r], input[r], sext[r] * es);
    }
    struct coll_args tmpl = {.kind = c->kind,
                             .nranks = n,
                             .dt = c->dt,
                             .op = FC_SUM,
                             .esize = es,
                             .in_place = !a2a && c->in_place};
    if (a2a) {
        tmpl.scounts = c->counts;
        tmpl.sdispls = sd;
        tmpl.rcounts = rc;
        tmpl.rdispls = rd;
    } else {
        tmpl.rcounts = c->counts;
        tmpl.rdispls = rd;
    }
    char herr[512];
    if (h_run(al, &tmpl, (void **)sendb, (void **)recvb, &c->opts, herr, sizeof(herr)) !=
        FC_SUCCESS) {
        snprintf(err, errlen, "run failed: %s", herr);
        goto out;
    }
    for (int r = 0; r < n; r++) {
        /* gaps keep the poison; every block holds its sender's data */
        memset(expect, poison, rext[r] * es);
        for (int j = 0; j < n; j++) {
            size_t at, cnt;
            const char *from;
            if (a2a) {
                at = rd[(size_t)r * (size_t)n + (size_t)j];
                cnt = rc[(size_t)r * (size_t)n + (size_t)j];
                from = input[j] + sd[(size_t)j * (size_t)n + (size_t)r] * es;
            } else {
                at = rd[j];
                cnt = c->counts[j];
                from = input[j];
            }
            if (cnt)
                memcpy(expect + at * es, from, cnt * es);
        }
        int d = first_diff(recvb[r], expect, rext[r], es);
        if (d >= 0) {
            unsigned long long gv = 0, ev = 0;
            memcpy(&gv, recvb[r] + (size_t)d * es, es);
            memcpy(&ev, expect + (size_t)d * es, es);
            snprintf(err, errlen, "rank %d element %d of %zu: got 0x%llx expected 0x%llx", r, d,
                     rext[r], gv, ev);
            goto out;
        }
        for (int w = 0; w < 2; w++) {
            const char *p = w ? sown[r] : rown[r];
            size_t len = (w ? sext[r] : rext[r]) * es;
            int ok;
            long at = p ? gcheck(p, len, (unsigned)(2 * r + w + 1), &ok) : 0;
            if (p && !ok) {
                snprintf(err, errlen,
                         "rank %d: the guard %s its %zu-byte %s buffer was written "
                         "at byte %ld",
                         r, at < 0 ? "before" : "after", len, w ? "send" : "recv", at);
                goto out;
            }
        }
        if (sown[r] && memcmp(sown[r], input[r], sext[r] * es) != 0) {
            snprintf(err, errlen, "rank %d: the send buffer was modified", r);
            goto out;
        }
    }
    ret = 0;
out:
    for (int r = 0; r < n && input && sown && rown; r++) {
        free(input[r]);
        gfree(sown[r]);
        gfree(rown[r]);
    }
    free(sd);
    free(rc);
    free(rd);
    free(sext);
    free(rext);
    free(sendb);
    free(recvb);
    free(sown);
    free(rown);
    free(input);
    free(expect);
    return ret;
}
