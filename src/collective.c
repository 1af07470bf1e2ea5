/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Collectives: from a call's arguments to a started request.
 *
 * comm_build picks the algorithm (the repeat-call cache, else the tuner in
 * select.c), lets the device branch route the buffers (sh->dev->route),
 * builds the schedule with the algorithm's builder in coll/ (or reuses a
 * kept one), and takes the call's sequence number and tags;
 * comm_collective then orders it after the caller's work and starts it
 * (request.c). The public collectives in api.c end here.
 *
 * This file does not run requests (request.c), open anything (comm.c) or
 * touch device memory itself.
 */
#include "comm.h"

#include <pthread.h>

#include "log.h"

static fc_result_t build_from(struct fc_comm *c, const struct coll_args *a,
                              const struct coll_algo *al, const char *why, struct fc_request *r,
                              const void *sendbuf, void *recvbuf, struct fc_request **out,
                              uint64_t *tagbase);

fc_result_t comm_build(struct fc_comm *c, const struct coll_args *a, const void *sendbuf,
                       void *recvbuf, struct fc_request **out, uint64_t *tagbase)
{
    if (c->broken != FC_SUCCESS)
        return FC_ERR_QUIET(c->broken, "the communicator is unusable after an earlier error "
                            "(%s); destroy it", c->brokenmsg);
    const char *why = "the same call before";
    pthread_mutex_lock(&c->sh->lock);
    struct fc_request *kept = comm_rcache_take(c, a, NULL);
    pthread_mutex_unlock(&c->sh->lock);
    const struct coll_algo *al = kept ? kept->algo : coll_select(&c->tuning, a, &why);
    if (!al)
        return FC_ERR(FC_ERR_INTERNAL, "no algorithm for %s", coll_kind_name(a->kind));
    fc_result_t rc = build_from(c, a, al, why, kept, sendbuf, recvbuf, out, tagbase);
    if (rc == FC_SUCCESS)
        (*out)->selected = 1;
    return rc;
}

fc_result_t comm_build_algo(struct fc_comm *c, const struct coll_args *a,
                            const struct coll_algo *al, const char *why, const void *sendbuf,
                            void *recvbuf, struct fc_request **out, uint64_t *tagbase)
{
    pthread_mutex_lock(&c->sh->lock);
    struct fc_request *kept = comm_rcache_take(c, a, al);
    pthread_mutex_unlock(&c->sh->lock);
    return build_from(c, a, al, why, kept, sendbuf, recvbuf, out, tagbase);
}

/* A request running algorithm al for the call a: the kept schedule r
 * (taken from the cache, NULL: none) once more, or a new one. */
static fc_result_t build_from(struct fc_comm *c, const struct coll_args *a,
                              const struct coll_algo *al, const char *why, struct fc_request *r,
                              const void *sendbuf, void *recvbuf, struct fc_request **out,
                              uint64_t *tagbase)
{
    fc_result_t rc;
    if (r) {
        /* a finished run of the same call: its schedule, once more */
        rc = c->sh->dev->route(c, sendbuf, recvbuf, r);
        if (rc != FC_SUCCESS || r->tp) {
            pthread_mutex_lock(&c->sh->lock); /* its scratch is the family's */
            comm_request_free(r);
            pthread_mutex_unlock(&c->sh->lock);
            r = NULL;
            if (rc != FC_SUCCESS)
                return rc;
        }
    }
    if (r) {
        r->next = NULL;
        r->done = 0;
        r->result = FC_SUCCESS;
        r->desc[0] = '\0';
        r->last_events = 0;
        r->last_ndone = 0;
        r->restart = 1;
    } else {
        r = comm_request_new(c, a->dt, a->op);
        if (!r)
            return FC_ERR(FC_ERR_NO_MEMORY, "out of memory for a request");
        rc = c->sh->dev->route(c, sendbuf, recvbuf, r);
        if (rc != FC_SUCCESS) {
            comm_request_free(r);
            return rc;
        }
        r->s.coll_name = coll_kind_name(a->kind);
        r->s.algo_name = al->name;
        rc = al->build(&r->s, a);
        if (rc != FC_SUCCESS) {
            comm_request_free(r);
            return rc;
        }
        r->key = *a;
        r->algo = al;
    }
    uint64_t seq = c->seq++;
    r->seq = seq;
    FC_TRACE(LOG_COLL, "%s: chosen by %s, %u steps", comm_request_desc(r), why, r->s.nsteps);
    *tagbase = tag_base(c->id, TAG_KIND_COLL, seq);
    *out = r;
    return FC_SUCCESS;
}

fc_result_t comm_collective(struct fc_comm *c, const struct coll_args *a, const void *sendbuf,
                            void *recvbuf, struct fc_request **out)
{
    struct fc_request *r;
    uint64_t tb;
    fc_result_t rc = comm_build(c, a, sendbuf, recvbuf, &r, &tb);
    if (rc != FC_SUCCESS)
        return rc;
    rc = c->sh->dev->order_after_caller(c, r);
    if (rc != FC_SUCCESS) {
        /* its sequence number is taken: the peers wait for this call */
        comm_break(c, rc, "%.200s could not start: %.280s", comm_request_desc(r), err_get());
        comm_request_free(r);
        return rc;
    }
    rc = comm_start(r, (void *)sendbuf, recvbuf, tb, NULL, 0);
    if (rc == FC_SUCCESS)
        *out = r;
    return rc;
}
