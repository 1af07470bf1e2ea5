/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The transport interface's defaults: the ops a transport names where one
 * does not apply to it (transport.h), so every ops table is complete and
 * no caller tests an op for NULL. Each does the least that is correct.
 */
#include "transport.h"

#include <stdlib.h>

#include "log.h"

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
