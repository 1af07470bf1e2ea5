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
        .node = c->node, .nnodes = c->nnodes,
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
