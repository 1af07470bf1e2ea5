/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Communicator creation, split and destruction; requests and the progress
 * engine that runs them.
 */
#define _GNU_SOURCE
#include "comm.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "boot.h"
#include "log.h"
#include "prov.h"
#include "rails.h"

/* ---- a family without device memory ------------------------------------------ */

static fc_result_t host_route(struct fc_comm *c, const void *sendbuf, const void *recvbuf,
                              struct fc_request *r)
{
    (void)c, (void)sendbuf, (void)recvbuf, (void)r;
    return FC_SUCCESS; /* r->tp stays NULL: the family's transport */
}

static fc_result_t host_order(struct fc_comm *c, struct fc_request *r)
{
    (void)c, (void)r;
    return FC_SUCCESS;
}

static void host_stream_start(struct comm_shared *sh)
{
    (void)sh; /* nothing is ever queued */
}

static void host_release(struct comm_shared *sh)
{
    (void)sh;
}

static int host_present(void)
{
    return 0;
}

const struct comm_device comm_host_only = {
    .route = host_route,
    .order_after_caller = host_order,
    .stream_start_ready = host_stream_start,
    .release = host_release,
    .present = host_present,
};

double comm_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- requests ------------------------------------------------------------ */

static void check_timeout(struct fc_request *r, double now);

void comm_request_free(struct fc_request *r)
{
    sched_release(&r->s);
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

static void finish(struct fc_request *r, fc_result_t rc)
{
    r->done = 1;
    r->result = rc;
    unlink_active(r->comm->sh, r);
    if (r->on_finish)
        r->on_finish(r); /* nobody waits for it (stream-ordered) */
}

static int tp_idle(struct transport *t)
{
    return !t || !t->ops->idle || t->ops->idle(t);
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
            finish(r, sh->failed);
            continue;
        }
        fc_result_t rc = sched_advance(&r->s);
        if (rc != FC_SUCCESS)
            finish(r, rc);
        else if (sched_done(&r->s) && tp_idle(r->tp))
            finish(r, FC_SUCCESS);
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
    };
    if (desc && desc != r->desc)
        snprintf(r->desc, sizeof(r->desc), "%s", desc);
    r->p2p = p2p;
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
        finish(r, rc);
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

/* ---- reuse of small collectives' schedules -------------------------------
 * A finished host-memory collective of at most COMM_RCACHE_MAX_BYTES is kept
 * (COMM_RCACHE per communicator, newest first); the next call with the same
 * arguments and algorithm runs its schedule again (sched_restart) instead of
 * building one: an 8-byte allreduce then allocates nothing. Family lock. */
static int rcache_same_call(const struct fc_request *r, const struct coll_args *a)
{
    const struct coll_args *k = &r->key;
    return k->kind == a->kind && k->root == a->root && k->count == a->count && k->dt == a->dt &&
           k->op == a->op && k->in_place == a->in_place;
}

/* Takes a kept schedule out of the cache: one of this very call that the
 * tuner chose (al NULL), or one of this call and algorithm al. The tuner's
 * choice depends on the arguments and the communicator's tuning alone, and
 * the tuning is fixed at creation, so it stands: the next identical call
 * skips the cost functions (~2% of an 8-byte allreduce at 4 ranks).
 * Schedules built around another path's algorithm (the fused device
 * allreduce's exchange, which leaves the reduction to its kernel) share the
 * call's key but were not chosen, and only their own path takes them. */
static struct fc_request *rcache_take(struct fc_comm *c, const struct coll_args *a,
                                      const struct coll_algo *al)
{
    for (int i = 0; i < c->nrcache; i++) {
        struct fc_request *r = c->rcache[i];
        if (!rcache_same_call(r, a) || (al ? r->algo != al : !r->selected))
            continue;
        memmove(&c->rcache[i], &c->rcache[i + 1], (size_t)(c->nrcache - i - 1) * sizeof(r));
        c->nrcache--;
        return r;
    }
    return NULL;
}

/* Keeps r for reuse, or frees it. */
static void rcache_put(struct fc_comm *c, struct fc_request *r)
{
    if (!r->algo || r->result != FC_SUCCESS || r->s.xfers_out || r->p2p || r->tp ||
        r->stream_ordered || r->delivery || c->broken != FC_SUCCESS ||
        r->key.count * r->key.esize > COMM_RCACHE_MAX_BYTES) {
        comm_request_free(r);
        return;
    }
    if (c->nrcache == COMM_RCACHE)
        comm_request_free(c->rcache[--c->nrcache]);
    memmove(&c->rcache[1], &c->rcache[0], (size_t)c->nrcache * sizeof(r));
    c->rcache[0] = r;
    c->nrcache++;
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
    if (r->s.xfers_out > 0 && c->sh->failed == FC_SUCCESS) {
        r->next = c->sh->zombies;
        c->sh->zombies = r;
    } else {
        rcache_put(c, r);
    }
    pthread_mutex_unlock(&c->sh->lock);
    return rc;
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
    sched_fail(&r->s, FC_ERR_TIMEOUT, "no progress for %.0f s (FC_TIMEOUT) on rank %d of %d%s",
               limit, r->comm->rank, r->comm->size, why);
    finish(r, FC_ERR_TIMEOUT);
}

fc_result_t comm_test(struct fc_request *r, int *done)
{
    struct comm_shared *sh = r->comm->sh;
    pthread_mutex_lock(&sh->lock);
    if (!r->done)
        comm_progress_locked(sh);
    if (!r->done)
        check_timeout(r, comm_now());
    int d = r->done;
    pthread_mutex_unlock(&sh->lock);
    *done = d;
    if (!d)
        return FC_SUCCESS;
    return reap(r);
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

/* ---- collectives --------------------------------------------------------- */

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
    struct fc_request *kept = rcache_take(c, a, NULL);
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
    struct fc_request *kept = rcache_take(c, a, al);
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

/* ---- creation ------------------------------------------------------------- */

struct rank_info {
    char host[64];
    uint64_t host_hash;
    int32_t pid;
    int32_t status;
    uint32_t version;
    int32_t rails; /* FC_RAILS (0: auto) */
    uint64_t chunk;
    int32_t window;
    uint64_t cpumask[16]; /* this process's CPU affinity (CPUs 0-1023) */
    uint64_t rndv_min;
    int32_t proto;
    int32_t cpus; /* in this process's CPU affinity */
    int32_t tune_device; /* FC_TUNE_MEMORY's verdict here (device: 1) */
    char err[384];
    struct prov_list provs;
};

struct addr_info {
    int32_t status;
    uint32_t len;
    uint64_t rndv_min;
    uint64_t chunk; /* the pipeline chunk this endpoint would use */
    int32_t hmem;   /* the endpoint takes device memory (gdr tier) */
    int32_t pad;
    char err[384];
    char addr[PROV_ADDR_MAX];
};

static uint64_t hash_host(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

#define FC_VERSION_CODE ((FC_VERSION_MAJOR << 16) | (FC_VERSION_MINOR << 8) | FC_VERSION_PATCH)

static fc_result_t shared_new(const struct comm_device *dev, struct comm_shared **out)
{
    struct comm_shared *sh = calloc(1, sizeof(*sh));
    if (!sh)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    pthread_mutex_init(&sh->lock, NULL);
    pthread_mutex_init(&sh->launch_lock, NULL);
    pthread_cond_init(&sh->cond, NULL);
    sh->refs = 1;
    sh->dev = dev;
    sh->next_comm_id = 1;
    *out = sh;
    return FC_SUCCESS;
}

static void shared_release(struct comm_shared *sh)
{
    if (!sh || --sh->refs > 0)
        return;
    if (sh->thread_on) {
        pthread_mutex_lock(&sh->lock);
        sh->thread_stop = 1;
        pthread_cond_signal(&sh->cond);
        pthread_mutex_unlock(&sh->lock);
        pthread_join(sh->thread, NULL);
    }
    rails_stop(sh->rails); /* the rails' endpoints are this thread's again */
    prov_stop(sh->ep); /* no completion can arrive after this */
    for (int i = 1; i < sh->nrails; i++)
        prov_stop(sh->rail_ep[i]);
    while (sh->zombies) {
        struct fc_request *z = sh->zombies;
        sh->zombies = z->next;
        comm_request_free(z); /* its scratch goes back to the transport */
    }
    sh->dev->release(sh);
    rails_destroy(sh->rails);
    for (int i = 1; i < sh->nrails; i++)
        prov_close(sh->rail_ep[i]);
    prov_close(sh->ep);
    pthread_mutex_destroy(&sh->lock);
    pthread_mutex_destroy(&sh->launch_lock);
    pthread_cond_destroy(&sh->cond);
    free(sh);
}

static void comm_free(struct fc_comm *c)
{
    if (!c)
        return;
    free(c->peers);
    free(c->p2p_sent);
    free(c->p2p_recvd);
    free(c->hosts);
    free(c->host_pid);
    free(c);
}

/* Progress thread: drives running requests while the application computes. */
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

static int cmp_host(const void *x, const void *y)
{
    uint64_t a = (*(const struct rank_info *const *)x)->host_hash;
    uint64_t b = (*(const struct rank_info *const *)y)->host_hash;
    return a < b ? -1 : a > b;
}

/* Ranks per CPU on the job's most crowded node (0: no node has more ranks
 * than CPUs for them): the same on every rank, from everyone's rank_info,
 * since every rank must pick the same algorithm. *here: the ratio on the
 * node of host hash `mine` (0 where its ranks' affinity is unknown).
 * -1: out of memory. */
static double job_oversub(const struct rank_info *infos, int n, uint64_t mine, double *here)
{
    const struct rank_info **by = malloc((size_t)n * sizeof(*by));
    if (!by)
        return -1;
    for (int r = 0; r < n; r++)
        by[r] = &infos[r];
    qsort(by, (size_t)n, sizeof(*by), cmp_host);
    double worst = 0;
    for (int r = 0; r < n;) {
        uint64_t u[16] = {0};
        int q = r;
        for (; q < n && by[q]->host_hash == by[r]->host_hash; q++)
            for (int w = 0; w < 16; w++)
                u[w] |= by[q]->cpumask[w];
        int cpus = 0;
        for (int w = 0; w < 16; w++)
            cpus += __builtin_popcountll(u[w]);
        double ratio = cpus > 0 ? (double)(q - r) / cpus : 0;
        if (by[r]->host_hash == mine)
            *here = ratio;
        if (ratio > 1 && ratio > worst)
            worst = ratio;
        r = q;
    }
    free(by);
    return worst;
}

void comm_cost_params(const char *prov_name, int nnodes, struct coll_cost *cc, int *window)
{
    struct prov_model m;
    prov_model_of(prov_name, nnodes, &m);
    *cc = (struct coll_cost){.alpha = m.alpha, .beta = m.beta, .gamma = m.gamma,
                             .chunk = (double)m.chunk, .hs_min = m.hs_min, .hs = m.hs,
                             .hs_oneway = m.hs_oneway};
    if (window)
        *window = m.window;
}

/* The tuning of a top-level communicator (split ones copy their parent's);
 * tune_device: every rank asked for device tuning (FC_TUNE_MEMORY). */
static fc_result_t setup_tuning(struct fc_comm *c, const char *prov_name, int nnodes,
                                int tune_device)
{
    struct coll_cost cc;
    comm_cost_params(prov_name, nnodes, &cc, NULL);
    cc.chunk = (double)c->chunk;
    cc.oversub = c->oversub;
    cc.handoff = COLL_HANDOFF_S;
    coll_tuning_init(&c->tuning, &cc);
    c->tuning.dev_gather_max = tune_device ? COMM_FUSED_MAX : 0;
    fc_result_t rc = FC_SUCCESS;
    if (c->cfg.algo[0])
        rc = coll_tuning_force(&c->tuning, c->cfg.algo);
    if (rc == FC_SUCCESS && c->cfg.tune_file[0])
        rc = coll_tuning_load_file(&c->tuning, c->cfg.tune_file);
    return rc;
}

/* Verifies the fabric carries messages among all ranks before anyone
 * relies on it (and, at destroy, that no peer still sends to us): the
 * dissemination barrier, on the control tag space. */
static fc_result_t fabric_check(struct fc_comm *c, uint64_t seq)
{
    const struct coll_algo *al = coll_algo_find(COLL_BARRIER, "dissemination", 13);
    struct coll_args a = {.kind = COLL_BARRIER, .rank = c->rank, .nranks = c->size,
                          .dt = FC_UINT8, .op = FC_SUM, .esize = 1};
    struct fc_request *r = comm_request_new(c, FC_UINT8, FC_SUM);
    if (!r)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    r->s.coll_name = "connectivity check";
    r->s.algo_name = al->name;
    fc_result_t rc = al->build(&r->s, &a);
    if (rc != FC_SUCCESS) {
        comm_request_free(r);
        return rc;
    }
    double saved = c->cfg.timeout;
    c->cfg.timeout = c->cfg.boot_timeout;
    /* at destroy, the endpoint closes right after: a signal merely buffered
     * locally (an inject) could be dropped with it and leave a peer waiting */
    r->delivery = seq > 0;
    rc = comm_start(r, NULL, NULL, tag_base(c->id, TAG_KIND_CTRL, seq),
                    "connectivity check over the fabric", 0);
    if (rc == FC_SUCCESS)
        rc = comm_wait(r);
    c->cfg.timeout = saved;
    return rc;
}

/* How many rails (endpoints per rank, rails.c) the job uses: rank 0's
 * FC_RAILS, or under auto what the provider gains from, at most one per two
 * CPUs of each rank of rank 0's node, and one where any rank's endpoint
 * takes device memory. Every rank computes the same. */
static fc_result_t rails_count(const struct rank_info *infos, int n, const char *choice,
                               int any_hmem, int *out)
{
    int k = infos[0].rails;
    if (k < 0 || k > COMM_MAX_RAILS)
        return FC_ERR(FC_ERR_INVALID_ARGUMENT,
                      "FC_RAILS=%d (rank 0's value holds): give 0 (auto) or 1 to %d", k,
                      COMM_MAX_RAILS);
    if (k == 0) {
        int local0 = 0;
        for (int r = 0; r < n; r++)
            local0 += infos[r].host_hash == infos[0].host_hash;
        /* a rail thread per two CPUs of each rank, up to the provider's
         * number: where ranks have a core or two each, none */
        int per_rank = infos[0].cpus / (local0 > 0 ? local0 : 1);
        k = prov_auto_rails(choice);
        if (k > per_rank / 2)
            k = per_rank / 2 > 1 ? per_rank / 2 : 1;
        /* endpoints that take device memory: the provider's copies run on
         * the GPU's copy engines, not the progressing core; on one H200, 2
         * ranks, 2 rails were slower at 64-256 MiB (200-220 GB/s busbw
         * against 286-293). FC_RAILS still asks for them. */
        if (any_hmem)
            k = 1;
    }
    *out = k;
    return FC_SUCCESS;
}

/* One bootstrap round of endpoint setup: every rank's status and address
 * (copied to addrbuf, PROV_ADDR_MAX bytes each, unless NULL); the first
 * failing rank's error, "rank R (host H) <what>: <its error><hint>", for
 * all. */
static fc_result_t exchange_addrs(struct boot *b, const struct rank_info *infos, int n,
                                  struct addr_info *am, struct addr_info *addrs, char *addrbuf,
                                  const char *what, const char *hint)
{
    fc_result_t rc = b->ops->allgather(b, am, sizeof(*am), addrs);
    for (int r = 0; r < n && rc == FC_SUCCESS; r++) {
        if (addrs[r].status != FC_SUCCESS) {
            addrs[r].err[sizeof(addrs[r].err) - 1] = '\0';
            rc = FC_ERR((fc_result_t)addrs[r].status, "rank %d (host %s) %s: %s%s", r,
                        infos[r].host, what, addrs[r].err, hint);
        } else if (addrbuf) {
            memcpy(addrbuf + (size_t)r * PROV_ADDR_MAX, addrs[r].addr, PROV_ADDR_MAX);
        }
    }
    return rc;
}

#define RAILS_HINT "; FC_RAILS=1 uses one endpoint per rank"

/* Opens rails 1..k-1 (rail 0 is sh->ep, connected) and puts the rails'
 * transport in sh->tp. Each rail is an endpoint of the chosen provider with
 * its own address exchange. Every rank takes part in every round (k-1
 * address rounds and a last status round) and carries a failure of its own
 * into the next one, so all ranks stop at the same round with the same
 * reason. */
static fc_result_t open_rails(struct comm_shared *sh, struct fc_comm *c, struct boot *b,
                              const struct rank_info *infos, const char *choice, int nnodes,
                              const char *fabric, char (*pnames)[64], int any_hmem)
{
    int n = c->size, k = 1;
    sh->nrails = 1;
    fc_result_t rc = rails_count(infos, n, choice, any_hmem, &k);
    if (rc != FC_SUCCESS || k == 1)
        return rc;
    struct addr_info *addrs = calloc((size_t)n, sizeof(*addrs));
    char *addrbuf = calloc((size_t)n, PROV_ADDR_MAX);
    const char **pn = calloc((size_t)n, sizeof(*pn));
    struct transport *tps[COMM_MAX_RAILS] = {sh->tp};
    struct addr_info am;
    memset(&am, 0, sizeof(am));
    if (!addrs || !addrbuf || !pn) {
        free(addrs);
        free(addrbuf);
        free(pn);
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory for %d ranks' rail addresses", n);
    }
    for (int r = 0; r < n; r++)
        pn[r] = pnames[r];
    char what[96];
    for (int i = 1; i < k && rc == FC_SUCCESS; i++) {
        if (am.status == FC_SUCCESS) {
            size_t alen = 0;
            sh->nrails = i + 1; /* closed with the rest, half-built or not */
            fc_result_t orc = prov_open(&c->cfg, choice, nnodes, fabric, &sh->rail_ep[i],
                                        am.addr, &alen);
            am.len = (uint32_t)alen;
            if (orc != FC_SUCCESS) {
                am.status = orc;
                snprintf(am.err, sizeof(am.err), "%s", err_get());
            }
        }
        snprintf(what, sizeof(what), "could not open rail %d of %d (%s)", i, k, choice);
        rc = exchange_addrs(b, infos, n, &am, addrs, addrbuf, what, RAILS_HINT);
        if (rc != FC_SUCCESS)
            break;
        /* the same protocol choice as rail 0, agreed above */
        prov_rndv_min_set(sh->rail_ep[i], prov_rndv_min_get(sh->ep));
        fc_result_t crc = prov_connect(sh->rail_ep[i], n, addrbuf, pn, c->rank);
        if (crc != FC_SUCCESS) { /* told in the next round */
            am.status = crc;
            snprintf(am.err, sizeof(am.err), "%s", err_get());
        }
        tps[i] = prov_transport(sh->rail_ep[i]);
    }
    if (rc == FC_SUCCESS) {
        if (am.status == FC_SUCCESS) {
            fc_result_t crc = rails_create(tps, k, &sh->rails);
            if (crc != FC_SUCCESS) {
                am.status = crc;
                snprintf(am.err, sizeof(am.err), "%s", err_get());
            }
        }
        snprintf(what, sizeof(what), "could not set up %d rails (%s)", k, choice);
        rc = exchange_addrs(b, infos, n, &am, addrs, NULL, what, RAILS_HINT);
    }
    if (rc == FC_SUCCESS)
        sh->tp = rails_transport(sh->rails);
    free(addrs);
    free(addrbuf);
    free(pn);
    return rc;
}

fc_result_t comm_create(struct boot *b, const cfg_t *cfg, const struct comm_device *dev,
                        struct fc_comm **out)
{
    fc_result_t rc;
    const int n = b->nranks, me = b->rank;
    struct rank_info *infos = NULL;
    struct addr_info *addrs = NULL;
    char *addrbuf = NULL;
    const char **names = NULL;
    char (*pnames)[64] = NULL;
    struct comm_shared *sh = NULL;
    struct fc_comm *c = calloc(1, sizeof(*c));
    if (!c) {
        rc = FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
        goto fail;
    }
    c->cfg = *cfg;
    c->rank = me;
    c->size = n;
    c->gpu_device = -1;
    log_set_rank(me);

    /* 1. who is where, with which providers */
    struct rank_info mine;
    memset(&mine, 0, sizeof(mine));
    snprintf(mine.host, sizeof(mine.host), "%s", log_hostname());
    mine.host_hash = hash_host(mine.host);
    mine.pid = (int32_t)getpid();
    mine.version = FC_VERSION_CODE;
    mine.chunk = cfg->chunk_size;
    mine.window = cfg->inflight;
    mine.proto = cfg->proto;
    mine.rndv_min = cfg->rndv_min;
    mine.rails = cfg->rails;
    mine.tune_device = cfg->tune_memory == CFG_TUNE_MEM_DEVICE ||
                       (cfg->tune_memory == CFG_TUNE_MEM_AUTO && cfg->gpu_fused != CFG_FUSED_OFF &&
                        dev->present());
    cpu_set_t cpus;
    if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) {
        mine.cpus = CPU_COUNT(&cpus);
        for (int i = 0; i < 1024 && i < CPU_SETSIZE; i++)
            if (CPU_ISSET(i, &cpus))
                mine.cpumask[i / 64] |= 1ull << (i % 64);
    } else {
        mine.cpus = (int32_t)sysconf(_SC_NPROCESSORS_ONLN);
        for (int i = 0; i < 1024 && i < mine.cpus; i++)
            mine.cpumask[i / 64] |= 1ull << (i % 64);
    }
    rc = prov_discover(cfg, &mine.provs);
    if (rc != FC_SUCCESS) {
        mine.status = rc;
        snprintf(mine.err, sizeof(mine.err), "%s", err_get());
    }
    infos = calloc((size_t)n, sizeof(*infos));
    names = calloc((size_t)n, sizeof(*names));
    pnames = calloc((size_t)n, sizeof(*pnames));
    c->hosts = calloc((size_t)n, sizeof(*c->hosts));
    c->host_pid = calloc((size_t)n, sizeof(int));
    if (!infos || !names || !pnames || !c->hosts || !c->host_pid) {
        rc = FC_ERR(FC_ERR_NO_MEMORY, "out of memory for %d ranks", n);
        goto fail;
    }
    rc = b->ops->allgather(b, &mine, sizeof(mine), infos);
    if (rc != FC_SUCCESS)
        goto fail;
    int nnodes = 0, local_rank = 0, local_size = 0;
    for (int r = 0; r < n; r++) {
        infos[r].host[sizeof(infos[r].host) - 1] = '\0';
        snprintf(c->hosts[r], sizeof(c->hosts[r]), "%s", infos[r].host);
        c->host_pid[r] = infos[r].pid;
        snprintf(pnames[r], sizeof(pnames[r]), "%.40s pid %d", infos[r].host, infos[r].pid);
        names[r] = c->hosts[r];
        int first = 1;
        for (int q = 0; q < r; q++)
            if (infos[q].host_hash == infos[r].host_hash)
                first = 0;
        nnodes += first;
        if (infos[r].host_hash == mine.host_hash) {
            local_size++;
            if (r < me)
                local_rank++;
        }
    }
    for (int r = 0; r < n; r++) {
        if (infos[r].version != FC_VERSION_CODE) {
            rc = FC_ERR(FC_ERR_BOOTSTRAP,
                        "rank %d (host %s) runs fabcoll version 0x%x, this rank 0x%x: every rank "
                        "must use the same library",
                        r, infos[r].host, infos[r].version, FC_VERSION_CODE);
            goto fail;
        }
        if (infos[r].status != FC_SUCCESS) {
            infos[r].err[sizeof(infos[r].err) - 1] = '\0';
            rc = FC_ERR((fc_result_t)infos[r].status, "rank %d (host %s): %s", r, infos[r].host,
                        infos[r].err);
            goto fail;
        }
    }
    /* more ranks on this node than CPUs they may run on, all together: a
     * waiting rank that spins holds the CPU its peer needs for a whole
     * time slice (4 ranks on 2 cores: 8-byte allreduce 240-470 us over shm
     * with 2000 polls, 25 us yielding at once; Open MPI, which yields when
     * oversubscribed, 8-11 us), so FC_SPIN=0 (auto) yields at once there.
     * The busiest node's ratio goes to the cost model (setup_tuning). */
    double here = 0;
    c->oversub = job_oversub(infos, n, mine.host_hash, &here);
    if (c->oversub < 0) {
        rc = FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
        goto fail;
    }
    c->oversubscribed = here > 1; /* local_size > this node's CPUs */
    /* device tuning only where every rank asks for it: one algorithm for all */
    int tune_device = 1;
    for (int r = 0; r < n; r++)
        tune_device &= infos[r].tune_device != 0;
    if (c->cfg.spin <= 0)
        c->cfg.spin = c->oversubscribed ? 1 : COMM_SPIN_DEFAULT;

    /* rank 0's pipeline and protocol settings for everyone: both ends of a
     * message must cut it into the same chunks and pick the same protocol */
    c->cfg.chunk_size = infos[0].chunk;
    c->cfg.inflight = infos[0].window;
    c->cfg.proto = infos[0].proto;
    c->cfg.rndv_min = infos[0].rndv_min;

    /* 2. the provider all ranks agree on */
    char choice[PROV_NAME_LEN], fabric[PROV_FABRIC_LEN], why[512];
    struct prov_list *lists = calloc((size_t)n, sizeof(*lists));
    if (!lists) {
        rc = FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
        goto fail;
    }
    for (int r = 0; r < n; r++)
        lists[r] = infos[r].provs;
    rc = prov_agree(lists, n, nnodes, names, choice, sizeof(choice), fabric, sizeof(fabric), why,
                    sizeof(why));
    free(lists);
    if (rc != FC_SUCCESS)
        goto fail;

    /* 3. endpoints and their addresses */
    rc = shared_new(dev, &sh);
    if (rc != FC_SUCCESS)
        goto fail;
    struct addr_info am;
    memset(&am, 0, sizeof(am));
    size_t alen = 0;
    rc = prov_open(&c->cfg, choice, nnodes, fabric, &sh->ep, am.addr, &alen);
    if (rc != FC_SUCCESS) {
        am.status = rc;
        snprintf(am.err, sizeof(am.err), "%s", err_get());
    }
    am.len = (uint32_t)alen;
    if (rc == FC_SUCCESS) {
        am.rndv_min = prov_rndv_min_get(sh->ep);
        size_t ch, em;
        int w;
        prov_tuning(sh->ep, &c->cfg, n, &ch, &w, &em);
        am.chunk = ch;
        am.hmem = prov_hmem(sh->ep);
    }
    addrs = calloc((size_t)n, sizeof(*addrs));
    addrbuf = calloc((size_t)n, PROV_ADDR_MAX);
    if (!addrs || !addrbuf) {
        rc = FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
        goto fail;
    }
    char what[96];
    snprintf(what, sizeof(what), "could not open %s", choice);
    rc = exchange_addrs(b, infos, n, &am, addrs, addrbuf, what, "");
    if (rc != FC_SUCCESS)
        goto fail;
    /* rank 0's chunk for all (endpoints that take device memory default to
     * larger ones; a rank whose endpoint does not must still cut alike) */
    c->cfg.chunk_size = addrs[0].chunk;
    /* both ends of a message choose its protocol from its length: one RMA
     * rendezvous threshold for all, or none */
    for (int r = 0; r < n; r++)
        if (addrs[r].rndv_min != am.rndv_min) {
            FC_INFO(LOG_NET, "RMA rendezvous off: rank %d's endpoint would use it from %llu "
                    "bytes, this rank's from %llu (0: never)",
                    r, (unsigned long long)addrs[r].rndv_min,
                    (unsigned long long)am.rndv_min);
            prov_rndv_min_set(sh->ep, 0);
            break;
        }
    const char **pn = calloc((size_t)n, sizeof(*pn));
    if (!pn) {
        rc = FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
        goto fail;
    }
    for (int r = 0; r < n; r++)
        pn[r] = pnames[r];
    rc = prov_connect(sh->ep, n, addrbuf, pn, me);
    free(pn);
    if (rc != FC_SUCCESS)
        goto fail;
    sh->tp = prov_transport(sh->ep);
    int any_hmem = 0;
    for (int r = 0; r < n; r++)
        any_hmem |= addrs[r].hmem != 0;
    rc = open_rails(sh, c, b, infos, choice, nnodes, fabric, pnames, any_hmem);
    if (rc != FC_SUCCESS)
        goto fail;
    sh->ptp = sh->tp;
    sh->nworld = n;
    c->sh = sh;
    sh = NULL;

    /* 4. the communicator itself */
    c->peers = calloc((size_t)n, sizeof(int));
    c->p2p_sent = calloc((size_t)n, sizeof(uint64_t));
    c->p2p_recvd = calloc((size_t)n, sizeof(uint64_t));
    if (!c->peers || !c->p2p_sent || !c->p2p_recvd) {
        rc = FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
        goto fail;
    }
    for (int r = 0; r < n; r++)
        c->peers[r] = r;
    c->id = 0;
    prov_tuning(c->sh->ep, &c->cfg, n, &c->chunk, &c->window, &c->eager_max);
    rc = setup_tuning(c, choice, nnodes, tune_device);
    if (rc != FC_SUCCESS)
        goto fail;
    if (c->oversub > 1)
        FC_INFO(LOG_TUNE,
                "up to %.3g ranks per CPU on a node: the cost model counts the CPUs a step's "
                "working ranks share, and %.0f us per step of a tree or chain (broadcast and "
                "reduce lean to trees)",
                c->oversub, COLL_HANDOFF_S * 1e6);
    FC_INFO(LOG_TUNE, "small allreduces (%zu bytes over all ranks) tuned for %s",
            COMM_FUSED_MAX,
            tune_device ? "device buffers: gather, one GPU trip (FC_TUNE_MEMORY)"
            : mine.tune_device ? "host buffers: a rank does not ask for device tuning"
                               : "host buffers");
    memset(&c->attr, 0, sizeof(c->attr));
    prov_describe(c->sh->ep, &c->attr);
    c->attr.nrails = c->sh->nrails;
    c->attr.nnodes = nnodes;
    c->attr.local_rank = local_rank;
    c->attr.local_size = local_size;
    if (c->cfg.progress_thread) {
        if (pthread_create(&c->sh->thread, NULL, comm_progress_main, c->sh) == 0)
            c->sh->thread_on = 1;
        else
            FC_WARN(LOG_INIT, "could not start the progress thread: %m; continuing without");
    }

    /* 5. prove the fabric works before returning */
    rc = fabric_check(c, 0);
    if (rc != FC_SUCCESS)
        goto fail;
    FC_INFO(LOG_INIT | LOG_NET,
            "comm %p rank %d of %d: provider %s (tier %s, fabric %s, domain %s); %d node%s, "
            "local rank %d of %d%s; rejected: %s%s%s; bootstrap: %s; chunk %zu, window %d, "
            "rails %d, spin %d",
            (void *)c, me, n, c->attr.provider,
            c->attr.tier == FC_TIER_SHM    ? "shm"
            : c->attr.tier == FC_TIER_RDMA ? "rdma"
            : c->attr.tier == FC_TIER_GDR  ? "gdr"
                                           : "net",
            c->attr.fabric, c->attr.domain, nnodes, nnodes > 1 ? "s" : "", local_rank,
            local_size, c->oversubscribed ? " (more ranks than CPUs here: waits yield at once)" : "",
            why[0] ? why : "none (best tier available)",
            c->cfg.fi_provider[0] ? "; candidates narrowed by FI_PROVIDER=" : "",
            c->cfg.fi_provider, b->how, c->chunk,
            c->window, c->sh->nrails, c->cfg.spin);
    b->ops->close(b);
    free(infos);
    free(addrs);
    free(addrbuf);
    free(names);
    free(pnames);
    *out = c;
    return FC_SUCCESS;
fail:
    b->ops->close(b);
    free(infos);
    free(addrs);
    free(addrbuf);
    free(names);
    free(pnames);
    if (sh)
        shared_release(sh);
    if (c) {
        if (c->sh)
            shared_release(c->sh);
        comm_free(c);
    }
    return rc;
}

/* ---- destruction ------------------------------------------------------------ */

fc_result_t comm_destroy(struct fc_comm *c, int abort)
{
    fc_result_t rc = FC_SUCCESS;
    struct comm_shared *sh = c->sh;
    if (!abort) {
        /* finish what this communicator still runs, then (when the endpoint
         * goes away with it) a barrier so no peer is still sending to us */
        for (;;) {
            pthread_mutex_lock(&sh->lock);
            struct fc_request *r = sh->active;
            while (r && r->comm != c)
                r = r->next;
            int queued = 0; /* stream-ordered: the progress thread finishes them */
            for (struct fc_request *q = sh->stream_q; q; q = q->next)
                queued |= q->comm == c;
            if (r && r->stream_ordered)
                queued = 1;
            pthread_mutex_unlock(&sh->lock);
            if (queued) {
                struct timespec ts = {0, 200000};
                nanosleep(&ts, NULL);
                continue;
            }
            if (!r)
                break;
            fc_result_t w = comm_wait(r);
            if (rc == FC_SUCCESS)
                rc = w;
        }
        if (sh->refs == 1 && c->broken == FC_SUCCESS && sh->failed == FC_SUCCESS && c->size > 1) {
            fc_result_t b = fabric_check(c, 1);
            if (rc == FC_SUCCESS)
                rc = b;
        }
    } else {
        /* never wait for peers: running requests are dropped with the
         * endpoint (or parked until it closes); stream-ordered ones end
         * failed, which releases their streams (our kernels there leave) */
        pthread_mutex_lock(&sh->lock);
        struct fc_request *kept = NULL; /* the queue's last one left */
        for (struct fc_request **pp = &sh->stream_q; *pp;) {
            struct fc_request *r = *pp;
            if (r->comm == c) {
                *pp = r->next;
                r->next = NULL;
                sched_fail(&r->s, FC_ERR_SYSTEM, "the communicator was aborted");
                finish(r, FC_ERR_SYSTEM); /* not active: only its stream is released */
            } else {
                kept = r;
                pp = &r->next;
            }
        }
        sh->stream_q_tail = kept;
        for (struct fc_request **pp = &sh->active; *pp;) {
            struct fc_request *r = *pp;
            if (r->comm == c && r->stream_ordered) {
                sched_fail(&r->s, FC_ERR_SYSTEM, "the communicator was aborted");
                finish(r, FC_ERR_SYSTEM); /* unlinks it */
            } else if (r->comm == c) {
                *pp = r->next;
                r->next = sh->zombies;
                sh->zombies = r;
            } else {
                pp = &r->next;
            }
        }
        pthread_mutex_unlock(&sh->lock);
    }
    pthread_mutex_lock(&sh->lock);
    while (c->nrcache > 0)
        comm_request_free(c->rcache[--c->nrcache]);
    pthread_mutex_unlock(&sh->lock);
    shared_release(sh);
    comm_free(c);
    return rc;
}

/* ---- split ------------------------------------------------------------------ */

struct split_rec {
    int32_t color, key;
    uint32_t next_id;
    int32_t pad;
};

struct member {
    int key, parent_rank;
};

static int member_cmp(const void *a, const void *b)
{
    const struct member *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->parent_rank - y->parent_rank;
}

fc_result_t comm_split(struct fc_comm *p, int color, int key, struct fc_comm **out)
{
    const int n = p->size;
    struct split_rec mine = {color, key, 0, 0};
    pthread_mutex_lock(&p->sh->lock);
    mine.next_id = p->sh->next_comm_id;
    pthread_mutex_unlock(&p->sh->lock);
    struct split_rec *all = calloc((size_t)n, sizeof(*all));
    struct member *m = calloc((size_t)n, sizeof(*m));
    struct fc_comm *c = NULL;
    fc_result_t rc = FC_SUCCESS;
    if (!all || !m) {
        rc = FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
        goto out;
    }
    struct coll_args a = {.kind = COLL_ALLGATHER, .rank = p->rank, .nranks = n,
                          .count = sizeof(mine), .dt = FC_UINT8, .op = FC_SUM, .esize = 1};
    struct fc_request *r = NULL;
    rc = comm_collective(p, &a, &mine, all, &r);
    if (rc == FC_SUCCESS)
        rc = comm_wait(r);
    if (rc != FC_SUCCESS || color == FC_SPLIT_NOCOLOR) {
        *out = NULL;
        goto out;
    }
    int nm = 0;
    uint32_t id = 0;
    for (int q = 0; q < n; q++)
        if (all[q].color == color) {
            m[nm].key = all[q].key;
            m[nm].parent_rank = q;
            nm++;
            if (all[q].next_id > id)
                id = all[q].next_id;
        }
    qsort(m, (size_t)nm, sizeof(*m), member_cmp);
    if (id > 0xffff) {
        rc = FC_ERR(FC_ERR_UNSUPPORTED, "more than 65535 communicators over one endpoint");
        goto out;
    }
    c = calloc(1, sizeof(*c));
    if (!c) {
        rc = FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
        goto out;
    }
    c->size = nm;
    c->peers = calloc((size_t)nm, sizeof(int));
    c->p2p_sent = calloc((size_t)nm, sizeof(uint64_t));
    c->p2p_recvd = calloc((size_t)nm, sizeof(uint64_t));
    c->hosts = calloc((size_t)nm, sizeof(*c->hosts));
    c->host_pid = calloc((size_t)nm, sizeof(int));
    if (!c->peers || !c->p2p_sent || !c->p2p_recvd || !c->hosts || !c->host_pid) {
        rc = FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
        goto out;
    }
    int nnodes = 0, local_rank = 0, local_size = 0;
    for (int i = 0; i < nm; i++) {
        int q = m[i].parent_rank;
        if (q == p->rank)
            c->rank = i;
        c->peers[i] = p->peers[q];
        memcpy(c->hosts[i], p->hosts[q], sizeof(c->hosts[i]));
        c->host_pid[i] = p->host_pid[q];
    }
    for (int i = 0; i < nm; i++) {
        int first = 1;
        for (int j = 0; j < i; j++)
            if (!strcmp(c->hosts[j], c->hosts[i]))
                first = 0;
        nnodes += first;
        if (!strcmp(c->hosts[i], c->hosts[c->rank])) {
            local_size++;
            if (i < c->rank)
                local_rank++;
        }
    }
    c->id = id;
    c->gpu_device = p->gpu_device;
    c->cfg = p->cfg;
    c->oversubscribed = p->oversubscribed;
    c->tuning = p->tuning;
    c->chunk = p->chunk;
    c->window = p->window;
    c->eager_max = p->eager_max;
    c->attr = p->attr;
    c->attr.nnodes = nnodes;
    c->attr.local_rank = local_rank;
    c->attr.local_size = local_size;
    pthread_mutex_lock(&p->sh->lock);
    if (p->sh->next_comm_id <= id)
        p->sh->next_comm_id = id + 1;
    p->sh->refs++;
    c->sh = p->sh;
    pthread_mutex_unlock(&p->sh->lock);
    FC_INFO(LOG_INIT, "split: color %d key %d -> rank %d of %d (communicator id %u)", color, key,
            c->rank, nm, id);
    *out = c;
    c = NULL;
out:
    comm_free(c);
    free(all);
    free(m);
    return rc;
}
