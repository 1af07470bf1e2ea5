/* SPDX-License-Identifier: BSD-3-Clause */
#include "harness.h"

#include "fp8.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../mix.h"
#include "reduce.h"

fc_result_t h_run(const struct coll_algo *al, const struct coll_args *tmpl, void **send,
                  void **recv, const struct h_opts *o, char *err, size_t errlen)
{
    int n = tmpl->nranks;
    struct loop_fabric *f =
        o->async_local ? loop_fabric_create_async(n, o->seed) : loop_fabric_create(n, o->seed);
    struct sched *s = calloc((size_t)n, sizeof(*s));
    fc_result_t rc = FC_SUCCESS;
    err[0] = '\0';
    if (!f || !s) {
        snprintf(err, errlen, "out of memory");
        rc = FC_ERR_NO_MEMORY;
        goto out;
    }
    if (o->ordered_sends) /* with a node map, the node's own sends (shm) */
        loop_fabric_order_sends(f, tmpl->node);
    for (int r = 0; r < n; r++) {
        struct coll_args a = *tmpl;
        a.rank = r;
        if (a.kind == COLL_ALLTOALLV) { /* rank r's row of each n x n matrix */
            a.scounts += (size_t)r * (size_t)n;
            a.sdispls += (size_t)r * (size_t)n;
            a.rcounts += (size_t)r * (size_t)n;
            a.rdispls += (size_t)r * (size_t)n;
            a.count = coll_v_sum(a.scounts, n);
        } else if (a.kind == COLL_ALLGATHERV) {
            a.count = a.rcounts[r];
        }
        /* in place is the root's business only for reduce and bcast */
        if ((a.kind == COLL_REDUCE || a.kind == COLL_BCAST) && r != a.root)
            a.in_place = 0;
        sched_init(&s[r], a.dt, a.op, n);
        s[r].coll_name = coll_kind_name(a.kind);
        s[r].algo_name = al->name;
        _Alignas(8) unsigned char sc[8];
        if (a.premul) { /* this rank's scalar */
            h_premul_scalar(a.dt, r, sc);
            a.premul = sc;
        }
        rc = coll_build(al, &s[r], &a);
        if (rc != FC_SUCCESS) {
            snprintf(err, errlen, "build failed at rank %d", r);
            goto out;
        }
        struct sched_env env = {
            .tp = loop_transport(f, r),
            .peer_map = NULL,
            .tag_base = tag_base(7, TAG_KIND_COLL, 42),
            .chunk_bytes = o->chunk,
            .window = o->window ? o->window : 2,
        };
        rc = sched_start(&s[r], &env, send ? send[r] : NULL, recv ? recv[r] : NULL);
        if (rc != FC_SUCCESS) {
            snprintf(err, errlen, "start failed at rank %d", r);
            goto out;
        }
    }
    /* Posting never completes anything by itself (completions are queued),
     * so a deadlock is two rounds in a row in which nothing happened. */
    int idle = 0;
    for (;;) {
        int ndone = 0, events = 0;
        for (int r = 0; r < n; r++) {
            struct transport *tp = loop_transport(f, r);
            int nc = 0;
            tp->ops->progress(tp, &nc);
            events += nc;
            uint32_t before = s[r].ndone;
            rc = sched_advance(&s[r]);
            if (rc != FC_SUCCESS) {
                snprintf(err, errlen, "rank %d: %s", r, s[r].errmsg);
                goto out;
            }
            if (s[r].ndone != before)
                events++;
            ndone += sched_done(&s[r]);
        }
        if (ndone == n)
            break;
        idle = events ? 0 : idle + 1;
        if (idle >= 2) {
            int r = 0;
            while (sched_done(&s[r]))
                r++;
            char w[256];
            sched_describe_wait(&s[r], w, sizeof(w));
            snprintf(err, errlen, "deadlock: %d of %d ranks done; rank %d waits for %s", ndone,
                     n, r, w);
            rc = FC_ERR_INTERNAL;
            goto out;
        }
    }
    if (loop_fabric_pending(f) != 0) {
        snprintf(err, errlen, "%d unmatched messages left", loop_fabric_pending(f));
        rc = FC_ERR_INTERNAL;
    }
out:
    if (s)
        for (int r = 0; r < n; r++)
            sched_release(&s[r]);
    free(s);
    loop_fabric_destroy(f);
    return rc;
}

int h_run_late(const struct coll_algo *al, const struct coll_args *tmpl, int late,
               const struct h_opts *o, char *err, size_t errlen)
{
    int n = tmpl->nranks, early = -1;
    struct loop_fabric *f = loop_fabric_create(n, o->seed);
    struct sched *s = calloc((size_t)n, sizeof(*s));
    err[0] = '\0';
    if (!f || !s) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    for (int r = 0; r < n; r++) {
        struct coll_args a = *tmpl;
        a.rank = r;
        sched_init(&s[r], a.dt, a.op, n);
        if (al->build(&s[r], &a) != FC_SUCCESS) {
            snprintf(err, errlen, "build failed at rank %d", r);
            goto out;
        }
    }
    struct sched_env env = {.tag_base = tag_base(3, TAG_KIND_COLL, 1), .chunk_bytes = o->chunk,
                            .window = o->window ? o->window : 2};
    for (int phase = 0; phase < 2; phase++) {
        for (int r = 0; r < n; r++) {
            if ((r == late) != (phase == 1))
                continue;
            env.tp = loop_transport(f, r);
            if (sched_start(&s[r], &env, NULL, NULL) != FC_SUCCESS) {
                snprintf(err, errlen, "start failed at rank %d", r);
                goto out;
            }
        }
        int idle = 0;
        for (int round = 0; idle < 3 && round < 100000; round++) {
            int ev = 0, ndone = 0;
            for (int r = 0; r < n; r++) {
                if (phase == 0 && r == late)
                    continue;
                struct transport *tp = loop_transport(f, r);
                int nc = 0;
                tp->ops->progress(tp, &nc);
                ev += nc;
                if (sched_advance(&s[r]) != FC_SUCCESS) {
                    snprintf(err, errlen, "rank %d: %s", r, s[r].errmsg);
                    goto out;
                }
                ndone += sched_done(&s[r]);
            }
            idle = ev ? 0 : idle + 1;
            if (phase == 0)
                early = ndone;
            else if (ndone == n)
                break;
        }
    }
    for (int r = 0; r < n; r++)
        if (!sched_done(&s[r])) {
            snprintf(err, errlen, "rank %d never finished", r);
            early = -1;
        }
out:
    if (s)
        for (int r = 0; r < n; r++)
            sched_release(&s[r]);
    free(s);
    loop_fabric_destroy(f);
    return early;
}

static void store_one(void *p, size_t k, fc_datatype_t dt, double v)
{
    switch (dt) {
    case FC_INT8: ((int8_t *)p)[k] = (int8_t)v; break;
    case FC_UINT8: ((uint8_t *)p)[k] = (uint8_t)v; break;
    case FC_INT32: ((int32_t *)p)[k] = (int32_t)v; break;
    case FC_UINT32: ((uint32_t *)p)[k] = (uint32_t)v; break;
    case FC_INT64: ((int64_t *)p)[k] = (int64_t)v; break;
    case FC_UINT64: ((uint64_t *)p)[k] = (uint64_t)v; break;
    case FC_FLOAT16: ((uint16_t *)p)[k] = reduce_float_to_half((float)v); break;
    case FC_BFLOAT16: ((uint16_t *)p)[k] = reduce_float_to_bf16((float)v); break;
    case FC_FLOAT32: ((float *)p)[k] = (float)v; break;
    case FC_FLOAT64: ((double *)p)[k] = v; break;
    case FC_FLOAT8_E4M3: ((uint8_t *)p)[k] = fp8_e4m3_from_f32((float)v); break;
    case FC_FLOAT8_E5M2: ((uint8_t *)p)[k] = fp8_e5m2_from_f32((float)v); break;
    }
}

void h_premul_scalar(fc_datatype_t dt, int r, void *out)
{
    store_one(out, 0, dt, (double)(r % 2 + 1));
}

void h_fill(void *p, fc_datatype_t dt, fc_op_t op, int r, int nranks, size_t first, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        size_t i = first + k;
        uint32_t h = mix((uint32_t)(r * 1000003u) ^ (uint32_t)(i * 2654435761u));
        double v;
        switch (op) {
        case FC_SUM:
        case FC_AVG:
            /* |sum| <= 128 for n <= 64, <= ~n/16 beyond: exact even in bfloat16 */
            if (nranks <= 64)
                v = (double)((int)(h % 4) - 1);
            else
                v = (h % 16 == 0) ? 1.0 : 0.0;
            break;
        case FC_PROD:
            v = (h % 13 == 0) ? 2.0 : (h % 17 == 1) ? -1.0 : 1.0;
            break;
        default:
            v = (double)((int)(h % 200) - 100);
            break;
        }
        int is_unsigned = dt == FC_UINT8 || dt == FC_UINT32 || dt == FC_UINT64;
        if (is_unsigned && v < 0)
            v = -v;
        store_one(p, k, dt, v);
    }
}
