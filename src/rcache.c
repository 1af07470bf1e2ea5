/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The repeat-call cache: reuse of small collectives' schedules.
 *
 * A finished host-memory collective of at most COMM_RCACHE_MAX_BYTES is
 * kept (COMM_RCACHE per communicator, newest first); the next call with the
 * same arguments and algorithm runs its schedule again (sched_restart)
 * instead of building one: an 8-byte allreduce then allocates nothing.
 *
 * This file owns the cache's array in struct fc_comm and nothing else. It
 * frees no request itself: what leaves the cache is handed back to the
 * caller (request.c, collective.c, comm.c), which frees it with
 * comm_request_free, so the cache calls into no other file. Every function
 * here runs with the family's lock held.
 */
#include "comm.h"

#include <string.h>

static int same_call(const struct fc_request *r, const struct coll_args *a)
{
    const struct coll_args *k = &r->key;
    return k->kind == a->kind && k->root == a->root && k->count == a->count && k->dt == a->dt &&
           k->op == a->op && k->in_place == a->in_place && !k->premul == !a->premul &&
           (!a->premul || memcmp(k->premul, a->premul, a->esize) == 0); /* the same scalar */
}

/* Takes a kept schedule of this very call out of the cache. Its algorithm
 * was the tuner's choice, which depends on the arguments and the
 * communicator's tuning alone, fixed at creation, so it stands: the next
 * identical call skips the cost functions (~2% of an 8-byte allreduce at
 * 4 ranks). (Only host-memory schedules are kept: a request the memory
 * route gave a transport of its own never is.) */
struct fc_request *comm_rcache_take(struct fc_comm *c, const struct coll_args *a)
{
    for (int i = 0; i < c->nrcache; i++) {
        struct fc_request *r = c->rcache[i];
        if (!same_call(r, a))
            continue;
        memmove(&c->rcache[i], &c->rcache[i + 1], (size_t)(c->nrcache - i - 1) * sizeof(r));
        c->nrcache--;
        return r;
    }
    return NULL;
}

struct fc_request *comm_rcache_put(struct fc_comm *c, struct fc_request *r)
{
    if (!r->algo || coll_is_v(r->key.kind) || r->result != FC_SUCCESS || r->s.xfers_out || r->p2p ||
        r->tp || r->stream_ordered || r->delivery || c->broken != FC_SUCCESS ||
        r->key.count * r->key.esize > COMM_RCACHE_MAX_BYTES)
        return r;
    struct fc_request *out = c->nrcache == COMM_RCACHE ? c->rcache[--c->nrcache] : NULL;
    memmove(&c->rcache[1], &c->rcache[0], (size_t)c->nrcache * sizeof(r));
    c->rcache[0] = r;
    c->nrcache++;
    return out;
}

struct fc_request *comm_rcache_pop(struct fc_comm *c)
{
    return c->nrcache > 0 ? c->rcache[--c->nrcache] : NULL;
}
