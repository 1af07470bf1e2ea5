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
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"

/* ---- the call's signature (sched_sign) --------------------------------------
 * 63..60 collective | 59..56 datatype | 55..53 op (reductions) | 52..36 root
 * (rooted collectives, mod 2^17) | 35..0 count (mod 2^36). */
static int coll_rooted(enum coll_kind k)
{
    return k == COLL_BCAST || k == COLL_REDUCE || k == COLL_GATHER || k == COLL_SCATTER;
}

/* An allgatherv's recvcounts, hashed (FNV-1a) to the 17 bits of the root
 * field: every rank passes the same counts. */
static uint64_t counts_hash(const size_t *c, int n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (int i = 0; i < n; i++) {
        h ^= (uint64_t)c[i];
        h *= 0x100000001b3ull;
    }
    return (h ^ (h >> 17) ^ (h >> 34) ^ (h >> 51)) & 0x1ffff;
}

/* An alltoallv pair's signature, the same on both sides of an agreeing
 * pair: the count the lower rank sends the higher (55..28) and the count
 * it gets back (27..0), each mod 2^28. Each side sends it and expects it,
 * so both see a disagreement in either direction. */
static uint64_t pair_signature(const struct coll_args *a, size_t lo_hi, size_t hi_lo)
{
    return (uint64_t)a->kind << 60 | ((uint64_t)a->dt & 0xf) << 56 |
           ((uint64_t)lo_hi & 0xfffffffull) << 28 | ((uint64_t)hi_lo & 0xfffffffull);
}

/* The op field of a pre-scaled sum (the scalars may differ by rank). */
#define SIG_OP_PREMUL 5u

static uint64_t coll_signature(const struct coll_args *a)
{
    if (a->kind == COLL_ALLGATHERV)
        return (uint64_t)a->kind << 60 | ((uint64_t)a->dt & 0xf) << 56 |
               counts_hash(a->rcounts, a->nranks) << 36 |
               ((uint64_t)coll_v_sum(a->rcounts, a->nranks) & 0xfffffffffull);
    uint64_t op = !coll_kind_reduces(a->kind) ? 0 : a->premul ? SIG_OP_PREMUL : (uint64_t)a->op;
    uint64_t root = coll_rooted(a->kind) ? (uint64_t)a->root : 0;
    uint64_t count = a->kind == COLL_BARRIER ? 0 : (uint64_t)a->count;
    return (uint64_t)a->kind << 60 | ((uint64_t)a->dt & 0xf) << 56 | (op & 0x7) << 53 |
           (root & 0x1ffff) << 36 | (count & 0xfffffffffull);
}

static void coll_signature_desc(uint64_t sig, char *buf, size_t len)
{
    enum coll_kind k = (enum coll_kind)(sig >> 60);
    if (k >= COLL_NKINDS) {
        snprintf(buf, len, "an unknown call (%#llx)", (unsigned long long)sig);
        return;
    }
    if (k == COLL_BARRIER) {
        snprintf(buf, len, "barrier");
        return;
    }
    if (k == COLL_ALLGATHERV || k == COLL_ALLTOALLV) {
        const char *dt = reduce_dt_name((int)((sig >> 56) & 0xf));
        unsigned long long cnt = sig & 0xfffffffffull;
        if (k == COLL_ALLGATHERV)
            snprintf(buf, len, "allgatherv of %llu x %s in all (recvcounts hashing to %#x)", cnt,
                     dt, (unsigned)((sig >> 36) & 0x1ffff));
        else
            snprintf(buf, len, "alltoallv with %llu x %s from the lower rank of the two to the "
                     "higher and %llu back", (unsigned long long)((sig >> 28) & 0xfffffffull), dt,
                     (unsigned long long)(sig & 0xfffffffull));
        return;
    }
    int n = snprintf(buf, len, "%s of %llu x %s", coll_kind_name(k),
                     (unsigned long long)(sig & 0xfffffffffull),
                     reduce_dt_name((int)((sig >> 56) & 0xf)));
    if (n < 0 || (size_t)n >= len)
        return;
    if (coll_kind_reduces(k)) {
        const int op = (int)((sig >> 53) & 0x7);
        n += snprintf(buf + n, len - (size_t)n, " (%s)",
                      op == SIG_OP_PREMUL ? "pre-scaled sum" : reduce_op_name(op));
    }
    if (n >= 0 && (size_t)n < len && coll_rooted(k))
        snprintf(buf + n, len - (size_t)n, ", root %d", (int)((sig >> 36) & 0x1ffff));
}

/* The most bytes one message of the call may carry, from what every rank of
 * an agreeing call shares: the whole vector, or n blocks of count. */
static size_t coll_message_bound(const struct coll_args *a)
{
    if (a->kind == COLL_ALLGATHERV)
        return coll_v_sum(a->rcounts, a->nranks) * a->esize;
    if (a->kind == COLL_ALLTOALLV) /* no bound every rank shares: always signed */
        return SIZE_MAX;
    size_t v = a->count * a->esize;
    if (coll_blocked(a->kind))
        v *= (size_t)a->nranks;
    return v;
}

/* Messages up to this many bytes are not held back for the signature: a
 * receive of another length fails on every provider without harm (shm
 * copies them through its inject buffers), and their collectives cost no
 * extra round. */
#define SIGN_GATE_MIN 4096

/* An alltoallv is signed pair by pair (each pair's two counts), with every
 * other rank: a count of 0 on one side only must be found too. Its
 * messages of up to SIGN_GATE_MIN go out beside the signatures, not after
 * them; longer ones wait for the peer's. */
static fc_result_t sign_pairs(struct sched *s, const struct coll_args *a)
{
    const int n = a->nranks;
    uint64_t *v = malloc(sizeof(uint64_t) * (size_t)n);
    if (!v)
        return s->build_err = FC_ERR(FC_ERR_NO_MEMORY, "out of memory for a signature");
    for (int j = 0; j < n; j++)
        v[j] = a->rank < j ? pair_signature(a, a->scounts[j], a->rcounts[j])
                           : pair_signature(a, a->rcounts[j], a->scounts[j]);
    fc_result_t rc = sched_sign_pairs(s, a->rank, 0, v, v, SIGN_GATE_MIN);
    free(v);
    return rc;
}

/* A request that has not run is freed under the family's lock: its
 * scratch is the family's, and the route's on_end (if any) runs then. */
static void free_locked(struct fc_comm *c, struct fc_request *r)
{
    pthread_mutex_lock(&c->sh->lock);
    comm_request_free(r);
    pthread_mutex_unlock(&c->sh->lock);
}

/* The request for the call (the route may change call->algo): the kept
 * schedule r (taken from the cache, NULL: none) once more, or a new one. */
static fc_result_t build_from(struct fc_comm *c, struct comm_call *call, const char *why,
                              struct fc_request *r, const void *sendbuf, void *recvbuf,
                              struct fc_request **out, uint64_t *tagbase)
{
    fc_result_t rc;
    const struct coll_algo *chosen = call->algo;
    struct fc_request routed = {.tp = NULL}; /* the route's answer for a kept schedule */
    int have_route = 0;
    if (r) {
        /* a finished run of the same call: its schedule, once more, unless
         * the route runs the call otherwise (its answer then moves to the
         * new request) */
        rc = c->sh->dev->route(c, call, sendbuf, recvbuf, r);
        if (rc == FC_SUCCESS && (r->tp || call->algo != chosen)) {
            routed.tp = r->tp;
            routed.tp_call = r->tp_call;
            routed.on_end = r->on_end;
            r->on_end = NULL;
            have_route = 1;
        }
        if (rc != FC_SUCCESS || have_route) {
            free_locked(c, r);
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
        const struct coll_args *a = call->a;
        r = comm_request_new(c, a->dt, a->op);
        rc = r ? FC_SUCCESS : FC_ERR(FC_ERR_NO_MEMORY, "out of memory for a request");
        if (r && have_route) {
            r->tp = routed.tp;
            r->tp_call = routed.tp_call;
            r->on_end = routed.on_end;
        } else if (r) {
            rc = c->sh->dev->route(c, call, sendbuf, recvbuf, r);
        } else if (routed.on_end) {
            routed.comm = c; /* its end, unrun */
            pthread_mutex_lock(&c->sh->lock);
            routed.on_end(&routed);
            pthread_mutex_unlock(&c->sh->lock);
        }
        if (rc != FC_SUCCESS) {
            if (r)
                free_locked(c, r);
            return rc;
        }
        const struct coll_algo *al = call->algo;
        r->s.coll_name = coll_kind_name(a->kind);
        r->s.algo_name = al->name;
        r->s.sig_desc = coll_signature_desc;
        rc = coll_build(al, &r->s, a);
        if (rc == FC_SUCCESS && a->kind == COLL_ALLTOALLV)
            rc = sign_pairs(&r->s, a);
        else if (rc == FC_SUCCESS && coll_message_bound(a) > SIGN_GATE_MIN)
            rc = sched_sign(&r->s, a->rank, coll_signature(a), SIGN_GATE_MIN);
        if (rc != FC_SUCCESS) {
            free_locked(c, r);
            return rc;
        }
        r->key = *a;
        /* a pre-scaled sum's scalar: the schedule's own copy (the call's is gone) */
        r->key.premul = a->premul ? r->s.premul : NULL;
        /* the user's counts are read only here */
        r->key.scounts = r->key.sdispls = r->key.rcounts = r->key.rdispls = NULL;
        r->algo = al;
        if (al != chosen)
            why = "the memory route";
    }
    uint64_t seq = c->seq++;
    r->seq = seq;
    FC_TRACE(LOG_COLL, "%s: chosen by %s, %u steps", comm_request_desc(r), why, r->s.nsteps);
    *tagbase = tag_base(c->id, TAG_KIND_COLL, seq);
    *out = r;
    return FC_SUCCESS;
}

fc_result_t comm_build(struct fc_comm *c, const struct coll_args *a, enum comm_mode mode,
                       void *stream, const void *sendbuf, void *recvbuf,
                       struct fc_request **out, uint64_t *tagbase)
{
    if (c->broken != FC_SUCCESS)
        return FC_ERR_QUIET(c->broken, "the communicator is unusable after an earlier error "
                            "(%s); destroy it", c->brokenmsg);
    const char *why = "the same call before";
    pthread_mutex_lock(&c->sh->lock);
    struct fc_request *kept = comm_rcache_take(c, a);
    pthread_mutex_unlock(&c->sh->lock);
    struct comm_call call = {
        .a = a,
        .algo = kept ? kept->algo : coll_select(&c->tuning, a, &why),
        .mode = mode,
        .stream = stream,
    };
    if (!call.algo)
        return FC_ERR(FC_ERR_INTERNAL, "no algorithm for %s", coll_kind_name(a->kind));
    return build_from(c, &call, why, kept, sendbuf, recvbuf, out, tagbase);
}

fc_result_t comm_collective(struct fc_comm *c, const struct coll_args *a, enum comm_mode mode,
                            const void *sendbuf, void *recvbuf, struct fc_request **out)
{
    struct fc_request *r;
    uint64_t tb;
    fc_result_t rc = comm_build(c, a, mode, NULL, sendbuf, recvbuf, &r, &tb);
    if (rc != FC_SUCCESS)
        return rc;
    rc = c->sh->dev->order_after_caller(c, r);
    if (rc != FC_SUCCESS) {
        /* its sequence number is taken: the peers wait for this call */
        comm_break(c, rc, "%.200s could not start: %.280s", comm_request_desc(r), err_get());
        free_locked(c, r);
        return rc;
    }
    rc = comm_start(r, (void *)sendbuf, recvbuf, tb, NULL, 0);
    if (rc == FC_SUCCESS)
        *out = r;
    return rc;
}
