/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The transport interface's defaults: the ops a transport names where one
 * does not apply to it (transport.h), so every ops table is complete and
 * no caller tests an op for NULL. Each does the least that is correct.
 */
#define _GNU_SOURCE /* ppoll */
#include "transport.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"
#include "reduce.h"

void transport_wait_block(struct transport_wait *w, int timeout_us)
{
    if (w->nfds > 0 && w->nap_us <= 0) {
        /* rounded up to poll's milliseconds, at least one (0 would not
         * block at all) */
        int ms = (timeout_us + 999) / 1000;
        poll(w->fds, (nfds_t)w->nfds, ms > 0 ? ms : 1);
        return;
    }
    int us = w->nap_us > 0 && w->nap_us < timeout_us ? w->nap_us : timeout_us;
    struct timespec ts = {us / 1000000, (long)(us > 0 ? us % 1000000 : 1) * 1000};
    if (w->nfds > 0)
        ppoll(w->fds, (nfds_t)w->nfds, &ts, NULL);
    else if (w->nap_us > 0)
        nanosleep(&ts, NULL);
    else
        sched_yield(); /* nothing announces work: look again soon */
}

int transport_wait_none(struct transport *t, struct transport_wait *w)
{
    (void)t, (void)w;
    return 0; /* w stays empty: the waiting engine yields */
}

void transport_wait_end_none(struct transport *t, struct transport_wait *w)
{
    (void)t, (void)w;
}

void *transport_mem_host_alloc(struct transport *t, size_t len)
{
    (void)t;
    void *p = NULL;
    return posix_memalign(&p, 64, len ? len : 1) == 0 ? p : NULL;
}

void transport_mem_host_free(struct transport *t, void *p, size_t len)
{
    (void)t, (void)len;
    free(p);
}

fc_result_t transport_local_none(struct transport *t, const struct local_op *op, struct xfer *x)
{
    (void)op, (void)x;
    return FC_ERR(FC_ERR_INTERNAL, "transport %s runs no local steps (TRANSPORT_RUNS_LOCAL "
                  "is not among its flags)", t->ops->name);
}

int transport_always_idle(struct transport *t)
{
    (void)t;
    return 1;
}

void transport_local_host(const struct local_op *lo)
{
    const size_t cnt = lo->len / fc_datatype_size(lo->dt);
    switch (lo->kind) {
    case LOCAL_REDUCE:
        if (lo->pmul)
            reduce_premul_sum(lo->dt, lo->pmul, lo->dst, lo->a, lo->b, cnt, lo->scalar);
        else
            reduce_fn_get(lo->dt, lo->op)(lo->dst, lo->a, lo->b, cnt);
        break;
    case LOCAL_COPY:
        if (lo->dst != lo->a)
            memmove(lo->dst, lo->a, lo->len);
        break;
    case LOCAL_SCALE:
        reduce_scale_get(lo->dt)(lo->dst, lo->a, cnt, lo->divisor);
        break;
    case LOCAL_PREMUL:
        reduce_premul_get(lo->dt)(lo->dst, lo->a, cnt, lo->scalar);
        break;
    case LOCAL_REDUCE_ALL: {
        const int n = lo->nvec;
        const char *v = lo->a;
#define VEC(j) (v + (size_t)((((j) - lo->first) % n + n) % n) * lo->stride)
        reduce_fn rfn = reduce_fn_get(lo->dt, lo->op);
        if (n == 1) {
            if (VEC(0) != lo->dst)
                memmove(lo->dst, VEC(0), lo->len);
        } else {
            rfn(lo->dst, VEC(0), VEC(1), cnt);
        }
        for (int j = 2; j < n; j++)
            rfn(lo->dst, lo->dst, VEC(j), cnt);
#undef VEC
        if (lo->op == FC_AVG)
            reduce_scale_get(lo->dt)(lo->dst, lo->dst, cnt, (uint32_t)n);
        break;
    }
    }
}
