/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Requests and the progress engine: how a request is created, started,
 * advanced, timed out, waited for or tested, and freed.
 *
 * A request is one schedule (schedule.h) of one communicator. comm_start
 * puts it on the family's active list; comm_progress_locked advances every
 * active request once (the transport's progress, then sched_advance) and
 * finishes those that are done; comm_wait and comm_test drive it from the
 * caller's thread, comm_progress_main from the progress thread. A request
 * that makes no progress for FC_TIMEOUT fails, naming the ranks it waits
 * for. A failed collective breaks its communicator (comm_break).
 *
 * This file knows nothing of how a communicator is created (comm.c,
 * comm_setup.c), which algorithm a call runs (collective.c), or device
 * memory: the family's device hooks (sh->dev) and a request's on_finish
 * are all it calls of the device branch.
 */
#define _GNU_SOURCE
#include "comm.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "log.h"
#include "profile.h"
#include "transport.h"

static void check_timeout(struct fc_request *r, double now);

double comm_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}


/* ---- requests ---------------------------------------------------------------- */

/* The route's end of r, once. */
static void end_route(struct fc_request *r)
{
    void (*end)(struct fc_request *) = r->on_end;
    r->on_end = NULL;
    if (end)
        end(r);
}

void comm_request_free(struct fc_request *r)
{
    end_route(r); /* one that never finished */
    sched_release(&r->s);
    free(r->owned);
    free(r);
}

/* Takes r off the active list (it is done). */
static void unlink_active(struct comm_shared *sh, struct fc_request *r)
{
    for (struct fc_request **pp = &sh->active; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            r->next = NULL;
            return;
        }
}

void comm_finish(struct fc_request *r, fc_result_t rc)
{
    r->done = 1;
    r->result = rc;
    if (prof_on && r->prof_t0 > 0)
        prof_call(0, r->comm->rank, r->comm->id, r->seq, r->s.coll_name, r->s.algo_name,
                  r->key.count * r->key.esize, r->prof_t0, rc);
    unlink_active(r->comm->sh, r);
    end_route(r);
    if (r->on_finish)
        r->on_finish(r); /* nobody waits for it (stream-ordered) */
}

static int tp_idle(struct transport *t)
{
    return !t || t->ops->idle(t); /* none: the family's transport, never busy after */
}

void comm_progress_locked(struct comm_shared *sh)
{
    if (sh->stream_q)
        sh->dev->stream_start_ready(sh);
    if (sh->failed == FC_SUCCESS) {
        int n = 0;
        fc_result_t rc = sh->ptp->ops->progress(sh->ptp, &n);
        if (rc != FC_SUCCESS) {
            sh->failed = rc;
            snprintf(sh->failmsg, sizeof(sh->failmsg), "%s", err_get());
        }
    }
    double now = sh->stream_active ? comm_now() : 0;
    for (struct fc_request *r = sh->active, *next; r; r = next) {
        next = r->next;
        if (r->stream_ordered && !r->done) {
            check_timeout(r, now); /* nobody waits on it to check */
            if (r->done)
                continue;
        }
        if (sh->failed != FC_SUCCESS) {
            sched_fail(&r->s, sh->failed, "%s", sh->failmsg);
            comm_finish(r, sh->failed);
            continue;
        }
        fc_result_t rc = sched_advance(&r->s);
        if (rc != FC_SUCCESS)
            comm_finish(r, rc);
        else if (sched_done(&r->s) && tp_idle(r->tp))
            comm_finish(r, FC_SUCCESS);
    }
    /* failed requests whose transfers were still posted: free once drained */
    for (struct fc_request **pp = &sh->zombies; *pp;) {
        struct fc_request *z = *pp;
        if (z->s.xfers_out == 0) {
            *pp = z->next;
            comm_request_free(z);
        } else {
            pp = &z->next;
        }
    }
}

fc_result_t comm_start_locked(struct fc_request *r, void *sendbuf, void *recvbuf,
                              uint64_t tagbase, const char *desc, int p2p)
{
    struct fc_comm *c = r->comm;
    struct sched_env env = {
        .tp = r->tp ? r->tp : c->sh->tp,
        .peer_map = c->peers,
        .tag_base = tagbase,
        .chunk_bytes = c->chunk,
        .window = c->window,
        .delivery = r->delivery,
        .call = r->tp_call,
        .prof = prof_on ? prof_step : NULL,
    };
    if (desc && desc != r->desc)
        snprintf(r->desc, sizeof(r->desc), "%s", desc);
    r->p2p = p2p;
    if (prof_on) {
        r->s.prof_rank = c->rank;
        r->s.prof_comm = c->id;
        r->s.prof_seq = r->seq;
        r->prof_t0 = prof_call(1, c->rank, c->id, r->seq, r->s.coll_name, r->s.algo_name,
                               r->key.count * r->key.esize, 0, 0);
    }
    fc_result_t rc = r->restart ? sched_restart(&r->s, tagbase, sendbuf, recvbuf)
                                : sched_start(&r->s, &env, sendbuf, recvbuf);
    if (rc != FC_SUCCESS)
        return rc;
    r->last_change = comm_now();
    r->next = c->sh->active;
    c->sh->active = r;
    /* issue what can go now, before reading the fabric (on tcp a read is a
     * system call, and a staged send's device copy should start first);
     * small operations often finish in the progress that follows */
    if (c->sh->failed == FC_SUCCESS && (rc = sched_advance(&r->s)) != FC_SUCCESS) {
        comm_finish(r, rc);
        return FC_SUCCESS; /* failed like any request: its result tells */
    }
    comm_progress_locked(c->sh);
    if (c->sh->thread_on)
        pthread_cond_signal(&c->sh->cond);
    return FC_SUCCESS;
}

fc_result_t comm_start(struct fc_request *r, void *sendbuf, void *recvbuf, uint64_t tagbase,
                       const char *desc, int p2p)
{
    /* the transport's memory (scratch) is shared by the family: lock first */
    struct comm_shared *sh = r->comm->sh;
    pthread_mutex_lock(&sh->lock);
    fc_result_t rc = comm_start_locked(r, sendbuf, recvbuf, tagbase, desc, p2p);
    if (rc != FC_SUCCESS) {
        /* every caller has taken the call's place (its sequence number and
         * tags): the peers wait for it, so this rank is out of step now */
        comm_break(r->comm, rc, "%.200s could not start: %.280s", comm_request_desc(r),
                   err_get());
        comm_request_free(r);
    }
    pthread_mutex_unlock(&sh->lock);
    return rc;
}

/* ---- results, timeouts and waiting ---------------------------------------------- */

/* Parks failed r until its transfers still posted drain (lock held);
 * 0 when none is posted (or the transport failed: nothing will drain). */
static int park(struct comm_shared *sh, struct fc_request *r)
{
    if (r->s.xfers_out == 0 || sh->failed != FC_SUCCESS)
        return 0;
    r->next = sh->zombies;
    sh->zombies = r;
    return 1;
}

/* The result of a finished request, with its message in this thread's
 * error buffer; the request is freed (or parked if transfers remain). */
static fc_result_t reap(struct fc_request *r)
{
    fc_result_t rc = r->result;
    struct fc_comm *c = r->comm;
    if (rc != FC_SUCCESS) {
        char msg[700];
        snprintf(msg, sizeof(msg), "%s: %s", comm_request_desc(r),
                 r->s.errmsg[0] ? r->s.errmsg : fc_strerror(rc));
        err_restore(msg);
        FC_WARN(LOG_COLL, "%s", msg);
        if (rc == FC_ERR_TIMEOUT && !r->p2p) {
            comm_hang_report(r, comm_request_desc(r)); /* the job-wide table, in rank 0's */
            err_restore(msg);
        }
        /* A point-to-point count mismatch found on a message that arrived
         * whole leaves the communicator usable where nothing of the call is
         * still posted (no late message can land in the caller's memory). A
         * message the provider truncated may have broken its connection
         * (tcp;ofi_rxm's does), and a collective's ranks would go on
         * unevenly (those that noticed nothing wait for those that did), so
         * those break it: every later call fails at once, none waits out
         * FC_TIMEOUT. */
        int keeps_comm = r->p2p && rc == FC_ERR_INVALID_ARGUMENT && !r->s.truncated &&
                         r->s.xfers_out == 0;
        if (!keeps_comm)
            comm_break(c, rc, "%.500s", msg);
    }
    pthread_mutex_lock(&c->sh->lock);
    if (!park(c->sh, r)) {
        struct fc_request *gone = comm_rcache_put(c, r); /* r, or the one it pushed out */
        if (gone)
            comm_request_free(gone);
    }
    pthread_mutex_unlock(&c->sh->lock);
    return rc;
}

void comm_request_drop_locked(struct fc_request *r, fc_result_t rc, const char *msg)
{
    struct comm_shared *sh = r->comm->sh;
    if (!r->done) {
        sched_fail(&r->s, rc, "%s", msg); /* late completions only drain it */
        comm_finish(r, rc);
    }
    if (!park(sh, r))
        comm_request_free(r);
}

/* Checks r for lack of progress; fails it on FC_TIMEOUT. Lock held. */
static void check_timeout(struct fc_request *r, double now)
{
    if (r->s.progress_events != r->last_events || r->s.ndone != r->last_ndone) {
        r->last_events = r->s.progress_events;
        r->last_ndone = r->s.ndone;
        r->last_change = now;
        return;
    }
    double limit = r->comm->cfg.timeout;
    if (limit <= 0 || now - r->last_change < limit)
        return;
    char w[400], why[600];
    if (sched_done(&r->s) && !tp_idle(r->tp)) {
        /* the messages are over: what is left is GPU work it queued */
        snprintf(why, sizeof(why),
                 ": every step is done, but the copies and kernels it queued on GPU %d have "
                 "not finished. The GPU is stuck or held by other work; with stream-ordered "
                 "calls that mix host and device buffers on several streams, CUDA's hardware "
                 "queues can block them behind a stream's wait (CUDA_DEVICE_MAX_CONNECTIONS=32, "
                 "or one stream per communicator, avoids it)",
                 r->comm->gpu_device);
    } else {
        sched_describe_wait(&r->s, w, sizeof(w));
        snprintf(why, sizeof(why),
                 "; still waiting for %s. Those ranks have not reached this operation, or "
                 "died, or the fabric between us is broken",
                 w);
    }
    sched_fail(&r->s, FC_ERR_TIMEOUT, "no progress for %.3g s (FC_TIMEOUT) on rank %d of %d%s",
               limit, r->comm->rank, r->comm->size, why);
    comm_finish(r, FC_ERR_TIMEOUT);
}

fc_result_t comm_poll(struct fc_request *r, int *done, int *moved)
{
    struct comm_shared *sh = r->comm->sh;
    pthread_mutex_lock(&sh->lock);
    uint64_t ev = r->s.progress_events;
    uint32_t nd = r->s.ndone;
    if (!r->done)
        comm_progress_locked(sh);
    if (!r->done)
        check_timeout(r, comm_now());
    int d = r->done;
    *moved = d || r->s.progress_events != ev || r->s.ndone != nd;
    pthread_mutex_unlock(&sh->lock);
    *done = d;
    if (!d)
        return FC_SUCCESS;
    return reap(r);
}

fc_result_t comm_test(struct fc_request *r, int *done)
{
    int moved;
    return comm_poll(r, done, &moved);
}

/* How a rank waits when nothing is happening: poll the completion queue
 * FC_SPIN times (a rank with a core of its own answers fastest), then poll
 * with sched_yield() between polls (oversubscribed ranks let each other
 * run), and after WAIT_YIELD_S of nothing, sleep in short naps on the CQ's
 * file descriptor or the clock, so a rank waiting for a slow peer stops
 * burning a core. */
#define WAIT_YIELD_S 0.002
#define WAIT_NAP_US 100

/* Blocks for at most timeout_us until the fabric may have news; called and
 * returns with the family's lock held, which it releases while it blocks.
 * Asking the endpoint for its descriptor touches the provider (fi_trywait
 * on the completion queue), so that happens under the lock, like every
 * other call into a domain opened FI_THREAD_DOMAIN; only the poll on the
 * descriptors (or the nap) runs without it (transport.h: wait_prepare). */
static void comm_block(struct comm_shared *sh, int timeout_us)
{
    transport_block(sh->ptp, timeout_us, &sh->lock);
}

fc_result_t comm_wait(struct fc_request *r)
{
    struct comm_shared *sh = r->comm->sh;
    const int spin = r->comm->cfg.spin > 0 ? r->comm->cfg.spin : COMM_SPIN_DEFAULT;
    int idle = 0;
    double idle_since = 0;
    pthread_mutex_lock(&sh->lock);
    while (!r->done) {
        uint64_t ev = r->s.progress_events;
        uint32_t nd = r->s.ndone;
        comm_progress_locked(sh);
        if (r->done)
            break;
        if (r->s.progress_events != ev || r->s.ndone != nd) {
            idle = 0;
            continue;
        }
        if (++idle < spin)
            continue;
        double now = comm_now();
        if (idle == spin)
            idle_since = now;
        /* nothing happening: let the other ranks of this node run */
        check_timeout(r, now);
        if (r->done)
            break;
        if (now - idle_since < WAIT_YIELD_S) {
            pthread_mutex_unlock(&sh->lock);
            sched_yield();
            pthread_mutex_lock(&sh->lock);
        } else {
            comm_block(sh, WAIT_NAP_US);
        }
    }
    pthread_mutex_unlock(&sh->lock);
    return reap(r);
}

/* ---- naming, creating and breaking ------------------------------------------------ */

const char *comm_request_desc(struct fc_request *r)
{
    if (!r->desc[0] && r->s.coll_name)
        snprintf(r->desc, sizeof(r->desc), "%s #%llu (%s, %zu x %s%s)", r->s.coll_name,
                 (unsigned long long)r->seq, r->s.algo_name, r->key.count, reduce_dt_name(r->s.dt),
                 r->tp ? ", device memory" : "");
    return r->desc;
}

struct fc_request *comm_request_new(struct fc_comm *c, fc_datatype_t dt, fc_op_t op)
{
    struct fc_request *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    sched_init(&r->s, dt, op, c->size);
    r->comm = c;
    return r;
}

int comm_break(struct fc_comm *c, fc_result_t rc, const char *fmt, ...)
{
    if (rc == FC_SUCCESS || c->broken != FC_SUCCESS)
        return 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->brokenmsg, sizeof(c->brokenmsg), fmt, ap);
    va_end(ap);
    c->broken = rc;
    return 1;
}

/* ---- the progress thread: drives running requests while the application computes */

/* Stream-ordered work in flight: after anything changes (an operation
 * queued, started or finished), the progress thread polls with yields for
 * this long before it naps on the fabric (a nap is 0.2-1 ms: a small
 * stream-ordered collective takes ~20 us). */
#define STREAM_HOT_S 0.002

void *comm_progress_main(void *arg)
{
    struct comm_shared *sh = arg;
    double hot_until = 0;
    unsigned gen = 0;
    log_thread_name("fc-progress");
    pthread_mutex_lock(&sh->lock);
    while (!sh->thread_stop) {
        if (!sh->active && !sh->stream_q) {
            pthread_cond_wait(&sh->cond, &sh->lock);
            continue;
        }
        comm_progress_locked(sh);
        if (!sh->active && !sh->stream_q)
            continue; /* nothing left: wait for the signal of the next call, not a nap */
        int hot = 0;
        if (sh->stream_active) {
            double now = comm_now();
            if (sh->stream_gen != gen) {
                gen = sh->stream_gen;
                hot_until = now + STREAM_HOT_S;
            }
            hot = now < hot_until;
        }
        if (hot) {
            pthread_mutex_unlock(&sh->lock);
            sched_yield();
            pthread_mutex_lock(&sh->lock);
        } else {
            comm_block(sh, 200);
        }
    }
    pthread_mutex_unlock(&sh->lock);
    return NULL;
}
