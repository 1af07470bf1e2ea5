/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rails: one transport over several endpoints of the same provider.
 *
 * Why: on tcp every message costs system calls whose copies run on the
 * core that makes them (on shm the receiver's progress makes the CMA copy),
 * and a rank drives its one endpoint from one thread: a large collective
 * then moves data at what one core copies. With rails, the chunks of a
 * message are dealt over n endpoints by their index (rails_pick), and each
 * endpoint but the first is driven by a thread of its own, so n cores copy
 * at once. Both ends pick alike from what they both know (the tag's chunk
 * index), so each rail matches its own messages with no extra header.
 *
 * Threads: rail 0 belongs to the caller (the engine, under the comm lock);
 * chunk 0, so every one-chunk message, goes there with no hand-over.
 * Rail i > 0 belongs to its thread: only that thread calls into its
 * transport (posts, progress, wait), so a provider needs no thread safety
 * across its endpoints. The engine hands a post over through the rail's
 * inbox and takes finished ones from its outbox, both under the rail's
 * mutex, and calls the engine's callbacks itself, from progress: the
 * engine never sees a callback from another thread. A rail waiting for the
 * fabric yields its core briefly, then blocks in poll on its endpoint's
 * file descriptor (also with nothing posted: the provider may have work of
 * its own, such as a rendezvous FIN) and an eventfd that the engine writes
 * when it hands over a post. The engine,
 * waiting while rails work, blocks likewise on rail 0's descriptor and an
 * eventfd that a rail writes when it publishes what finished: nobody spins
 * for long, which matters where ranks outnumber cores.
 */
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "rails.h"

/* a rail waiting for the fabric yields for this long, then blocks */
#define RAIL_YIELD_NS 50000.0
#define RAIL_POLL_MS 100 /* bound of one block (a wake-up that never came) */
/* without a descriptor: naps, longer ones after this long with nothing */
#define RAIL_NAP_US 100
#define RAIL_QUIET_NS 10e6
#define RAIL_QUIET_NAP_US 2000

struct rail;

struct rail_op {
    struct xfer ix; /* what the rail's transport sees (first) */
    struct xfer *x; /* the engine's */
    struct rail *rail;
    size_t cap; /* a receive: what the buffer takes */
    fc_result_t status;
    size_t len;
    char err[256];
    struct rail_op *next; /* inbox, thread queue, outbox or free list */
    struct rail_op *all;  /* every op made, for rails_destroy */
};

struct rail {
    struct transport *tp;
    pthread_t thread;
    int started;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    /* under lock */
    struct rail_op *inbox, **inbox_tail; /* engine -> thread, in order */
    struct rail_op *outbox;              /* thread -> engine */
    int sleeping, polling, stop;
    fc_result_t failed;
    char errbuf[512];
    int has_out; /* atomic: outbox or failure to collect */
    int efd;     /* eventfd: the engine handed over a post while polling */
    struct rails *owner;
    /* the thread's own */
    struct rail_op *fin; /* finished, not yet published */
    int posted;
    /* the engine's (atomic: read by waiters without the comm lock) */
    int inflight; /* handed over, not yet collected */
};

struct rails {
    struct transport t; /* first */
    int n;
    struct rail *r;
    struct rail_op *free_ops, *all_ops; /* the engine's */
    fc_result_t halted;                 /* a rail or rail 0 failed: the threads are stopped */
    char errbuf[768];
    int efd;         /* eventfd: a rail published while the engine polls */
    int eng_polling; /* atomic: engine threads blocked (rl_wait_prepare) */
};

int rails_pick(int nrails, uint64_t tag)
{
    if (nrails <= 1)
        return 0;
    return (int)((tag & XFER_TAG_CHUNK_MASK) % (uint64_t)nrails);
}

/* ---- the rail's thread ----------------------------------------------------- */

/* op is over (st, len; why when it failed): to the thread's finished list */
static void finish(struct rail *rl, struct rail_op *op, fc_result_t st, size_t len, const char *why)
{
    op->status = st;
    op->len = len;
    if (st != FC_SUCCESS)
        snprintf(op->err, sizeof(op->err), "%s", why);
    op->next = rl->fin;
    rl->fin = op;
}

/* The rail's transport finished op (called in the rail's thread). */
static void op_done(struct xfer *ix, fc_result_t st, size_t len)
{
    struct rail_op *op = ix->owner;
    op->rail->posted--;
    finish(op->rail, op, st, len, st == FC_SUCCESS ? NULL : ix->errmsg ? ix->errmsg : err_get());
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* Posts what the transport takes; ops it refuses for now (FC_AGAIN) stay
 * queued, in order, while later ones are tried (tags are unique, so a
 * receive never waits behind a refused send). Returns how many left. */
static int post_queue(struct rail *rl, struct rail_op **queue)
{
    struct transport *tp = rl->tp;
    int n = 0;
    for (struct rail_op **pp = queue; *pp;) {
        struct rail_op *op = *pp;
        fc_result_t rc;
        if (rl->failed != FC_SUCCESS)
            rc = FC_ERR_QUIET(rl->failed, "%s", rl->errbuf);
        else if (op->ix.is_send)
            rc = tp->ops->send(tp, op->ix.peer, op->ix.tag, op->ix.buf, op->ix.len, &op->ix);
        else
            rc = tp->ops->recv(tp, op->ix.peer, op->ix.tag, op->ix.buf, op->cap, &op->ix);
        if (rc == FC_AGAIN) {
            pp = &op->next;
            continue;
        }
        *pp = op->next;
        n++;
        if (rc == FC_SUCCESS)
            rl->posted++;
        else
            finish(rl, op, rc, 0, err_get());
    }
    return n;
}

static void wake(int efd)
{
    uint64_t one = 1;
    if (efd >= 0 && write(efd, &one, sizeof(one)) < 0) {
        /* the counter is full: a wake-up is pending anyway */
    }
}

static void drain(int efd)
{
    uint64_t v;
    if (efd >= 0 && read(efd, &v, sizeof(v)) < 0) {
        /* nothing was written: EAGAIN */
    }
}

/* Something for the engine to collect: tell it, and wake it if it blocks. */
static void publish(struct rail *rl)
{
    __atomic_store_n(&rl->has_out, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&rl->owner->eng_polling, __ATOMIC_SEQ_CST) > 0)
        wake(rl->owner->efd);
}

/* Nothing happened in a round: wait for the fabric, a hand-over or stop.
 * Called and returns with the lock held. */
static void rail_idle(struct rail *rl, const struct rail_op *queue, double idle_ns)
{
    struct transport *tp = rl->tp;
    if (rl->failed != FC_SUCCESS) {
        /* a failed endpoint is never driven again: new ops fail at once */
        rl->sleeping = 1;
        pthread_cond_wait(&rl->cond, &rl->lock);
        rl->sleeping = 0;
        return;
    }
    int busy = queue || rl->posted > 0;
    rl->polling = 1;
    pthread_mutex_unlock(&rl->lock);
    if (busy && idle_ns < RAIL_YIELD_NS) {
        sched_yield();
    } else {
        /* the provider's descriptor also wakes for work of its own that
         * nothing of ours waits for (a rendezvous FIN still to go out), so
         * a rail with nothing posted blocks there too, not on the condvar.
         * Only this thread drives tp: no lock around its wait. */
        struct transport_wait w = {.nfds = 0};
        if (transport_wait_prepare(tp, &w)) {
            /* the transport has work now */
        } else if (w.nfds > 0 && rl->efd >= 0 && w.nfds < TRANSPORT_WAIT_FDS) {
            w.fds[w.nfds++] = (struct pollfd){.fd = rl->efd, .events = POLLIN};
            poll(w.fds, (nfds_t)w.nfds, queue ? 1 : RAIL_POLL_MS); /* refused posts: soon again */
        } else if (w.nfds > 0 || busy || idle_ns < RAIL_QUIET_NS) {
            transport_wait_block(&w, RAIL_NAP_US); /* no descriptor: nap */
        } else {
            /* no descriptor and quiet for long: longer naps, which a
             * hand-over or stop cuts short */
            transport_wait_end(tp, &w);
            pthread_mutex_lock(&rl->lock);
            rl->polling = 0;
            drain(rl->efd);
            if (!rl->inbox && !rl->stop) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                ts.tv_nsec += RAIL_QUIET_NAP_US * 1000L;
                if (ts.tv_nsec >= 1000000000L) {
                    ts.tv_sec++;
                    ts.tv_nsec -= 1000000000L;
                }
                rl->sleeping = 1;
                pthread_cond_timedwait(&rl->cond, &rl->lock, &ts);
                rl->sleeping = 0;
            }
            return;
        }
        transport_wait_end(tp, &w);
    }
    pthread_mutex_lock(&rl->lock);
    rl->polling = 0;
    drain(rl->efd);
}

static void *rail_main(void *arg)
{
    struct rail *rl = arg;
    struct transport *tp = rl->tp;
    char name[16];
    snprintf(name, sizeof(name), "fc-rail%d", (int)(rl - rl->owner->r));
    log_thread_name(name);
    struct rail_op *queue = NULL;
    double idle_since = 0;
    int idle = 0;
    pthread_mutex_lock(&rl->lock);
    for (;;) {
        if (rl->inbox) {
            struct rail_op **tail = &queue; /* refused posts first */
            while (*tail)
                tail = &(*tail)->next;
            *tail = rl->inbox;
            rl->inbox = NULL;
            rl->inbox_tail = &rl->inbox;
        }
        if (rl->fin) {
            struct rail_op *last = rl->fin;
            while (last->next)
                last = last->next;
            last->next = rl->outbox;
            rl->outbox = rl->fin;
            rl->fin = NULL;
            publish(rl);
        }
        if (rl->stop)
            break;
        pthread_mutex_unlock(&rl->lock);
        int events = post_queue(rl, &queue);
        int n = 0;
        fc_result_t rc = rl->failed == FC_SUCCESS ? tp->ops->progress(tp, &n) : FC_SUCCESS;
        events += n;
        pthread_mutex_lock(&rl->lock);
        if (rc != FC_SUCCESS) {
            /* the rail's endpoint failed: the engine hears of it at its next
             * progress; what is queued fails with the same message */
            rl->failed = rc;
            snprintf(rl->errbuf, sizeof(rl->errbuf), "%s", err_get());
            publish(rl);
            continue;
        }
        if (events || rl->inbox || rl->fin || rl->stop) {
            idle = 0;
            continue;
        }
        double t = now_ns();
        if (idle++ == 0)
            idle_since = t;
        rail_idle(rl, queue, t - idle_since);
    }
    /* stopped: whatever was not posted goes back with the rest (freed by
     * rails_destroy; the engine has dropped its requests) */
    while (queue) {
        struct rail_op *op = queue;
        queue = op->next;
        finish(rl, op, FC_ERR_INTERNAL, 0, "rail stopped");
    }
    pthread_mutex_unlock(&rl->lock);
    return NULL;
}

/* ---- the engine's side ----------------------------------------------------- */

static struct rail_op *op_get(struct rails *R)
{
    struct rail_op *op = R->free_ops;
    if (op) {
        R->free_ops = op->next;
        return op;
    }
    op = calloc(1, sizeof(*op));
    if (op) {
        op->all = R->all_ops;
        R->all_ops = op;
    }
    return op;
}

static fc_result_t hand_over(struct rails *R, int i, int peer, uint64_t tag, void *buf, size_t cap,
                             int is_send, struct xfer *x)
{
    if (R->halted != FC_SUCCESS)
        return FC_ERR_QUIET(R->halted, "%s", R->errbuf);
    struct rail *rl = &R->r[i];
    struct rail_op *op = op_get(R);
    if (!op)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory for a transfer on rail %d", i);
    struct rail_op *keep = op->all;
    memset(op, 0, sizeof(*op));
    op->all = keep;
    op->ix.done = op_done;
    op->ix.owner = op;
    op->ix.step = x->step;
    op->ix.chunk = x->chunk;
    op->ix.peer = peer;
    op->ix.is_send = is_send;
    op->ix.delivery = x->delivery;
    op->ix.truncated = 0;
    op->ix.tag = tag;
    op->ix.len = is_send ? cap : x->len;
    op->ix.buf = buf;
    op->x = x;
    op->rail = rl;
    op->cap = cap;
    __atomic_add_fetch(&rl->inflight, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&rl->lock);
    *rl->inbox_tail = op;
    rl->inbox_tail = &op->next;
    if (rl->sleeping)
        pthread_cond_signal(&rl->cond);
    else if (rl->polling)
        wake(rl->efd);
    pthread_mutex_unlock(&rl->lock);
    return FC_SUCCESS;
}

static fc_result_t rl_send(struct transport *t, int peer, uint64_t tag, const void *buf, size_t len,
                           struct xfer *x)
{
    struct rails *R = (struct rails *)t;
    int i = rails_pick(R->n, tag);
    if (i == 0)
        return R->r[0].tp->ops->send(R->r[0].tp, peer, tag, buf, len, x);
    return hand_over(R, i, peer, tag, (void *)buf, len, 1, x);
}

static fc_result_t rl_recv(struct transport *t, int peer, uint64_t tag, void *buf, size_t len,
                           struct xfer *x)
{
    struct rails *R = (struct rails *)t;
    int i = rails_pick(R->n, tag);
    if (i == 0)
        return R->r[0].tp->ops->recv(R->r[0].tp, peer, tag, buf, len, x);
    return hand_over(R, i, peer, tag, buf, len, 0, x);
}

/* A rail (or rail 0) failed: the transport fails as a whole, and no rail
 * thread may touch its endpoint again (the engine frees the buffers of
 * what was posted there). */
static fc_result_t halt(struct rails *R, fc_result_t rc)
{
    if (R->halted == FC_SUCCESS) {
        R->halted = rc;
        rails_stop(R);
    }
    return FC_ERR_QUIET(R->halted, "%s", R->errbuf);
}

static fc_result_t rl_progress(struct transport *t, int *ncomp)
{
    struct rails *R = (struct rails *)t;
    *ncomp = 0;
    if (R->halted != FC_SUCCESS)
        return halt(R, R->halted);
    int n = 0;
    fc_result_t rc = R->r[0].tp->ops->progress(R->r[0].tp, &n);
    if (rc != FC_SUCCESS) {
        snprintf(R->errbuf, sizeof(R->errbuf), "%s", err_get());
        *ncomp = n;
        return halt(R, rc);
    }
    for (int i = 1; i < R->n; i++) {
        struct rail *rl = &R->r[i];
        if (!__atomic_load_n(&rl->has_out, __ATOMIC_ACQUIRE))
            continue;
        pthread_mutex_lock(&rl->lock);
        struct rail_op *list = rl->outbox;
        rl->outbox = NULL;
        rl->has_out = 0;
        fc_result_t failed = rl->failed;
        if (failed != FC_SUCCESS)
            snprintf(R->errbuf, sizeof(R->errbuf), "rail %d of %d: %s", i, R->n, rl->errbuf);
        pthread_mutex_unlock(&rl->lock);
        if (failed != FC_SUCCESS) {
            /* its ops stay for rails_destroy */
            *ncomp = n;
            return halt(R, failed);
        }
        while (list) {
            struct rail_op *op = list;
            list = op->next;
            struct xfer *x = op->x;
            fc_result_t st = op->status;
            size_t len = op->len;
            if (st != FC_SUCCESS) {
                snprintf(R->errbuf, sizeof(R->errbuf), "rail %d of %d: %s", i, R->n, op->err);
                x->errmsg = R->errbuf;
                x->truncated = op->ix.truncated;
            }
            __atomic_sub_fetch(&rl->inflight, 1, __ATOMIC_RELAXED);
            op->next = R->free_ops;
            R->free_ops = op;
            x->done(x, st, st == FC_SUCCESS ? len : 0);
            n++;
        }
    }
    *ncomp = n;
    return FC_SUCCESS;
}

/* The engine blocks (under its lock, transport.h): on rail 0's descriptor
 * and, while other rails work, on the eventfd a rail writes when it
 * publishes what finished (several engine threads may block at once: the
 * comm's waiter and its progress thread). */
static int rl_wait_prepare(struct transport *t, struct transport_wait *w)
{
    struct rails *R = (struct rails *)t;
    struct transport *tp0 = R->r[0].tp;
    int busy = 0;
    for (int i = 1; i < R->n && R->halted == FC_SUCCESS; i++)
        busy |= __atomic_load_n(&R->r[i].inflight, __ATOMIC_RELAXED) > 0;
    if (!busy)
        return transport_wait_prepare(tp0, w);
    __atomic_add_fetch(&R->eng_polling, 1, __ATOMIC_SEQ_CST);
    w->layers |= TRANSPORT_LAYER_RAILS;
    for (int i = 1; i < R->n; i++)
        if (__atomic_load_n(&R->r[i].has_out, __ATOMIC_SEQ_CST))
            return 1;
    if (transport_wait_prepare(tp0, w))
        return 1;
    if (w->nfds > 0 && R->efd >= 0 && w->nfds < TRANSPORT_WAIT_FDS) {
        w->fds[w->nfds++] = (struct pollfd){.fd = R->efd, .events = POLLIN};
    } else {
        /* no descriptor to block on: a rail's thread will finish something
         * without a word on rail 0's: look again soon */
        w->nfds = 0;
        w->nap_us = 0;
    }
    return 0;
}

static void rl_wait_end(struct transport *t, struct transport_wait *w)
{
    struct rails *R = (struct rails *)t;
    transport_wait_end(R->r[0].tp, w);
    if (w->layers & TRANSPORT_LAYER_RAILS) {
        w->layers &= ~TRANSPORT_LAYER_RAILS;
        __atomic_sub_fetch(&R->eng_polling, 1, __ATOMIC_SEQ_CST);
        drain(R->efd);
    }
}

static void rl_peer_name(struct transport *t, int peer, char *buf, size_t len)
{
    struct rails *R = (struct rails *)t;
    R->r[0].tp->ops->peer_name(R->r[0].tp, peer, buf, len);
}

static void *rl_mem_alloc(struct transport *t, size_t len)
{
    struct rails *R = (struct rails *)t;
    struct transport *tp = R->r[0].tp;
    return tp->ops->mem_alloc(tp, len);
}

static void rl_mem_free(struct transport *t, void *p, size_t len)
{
    struct rails *R = (struct rails *)t;
    struct transport *tp = R->r[0].tp;
    tp->ops->mem_free(tp, p, len);
}

static const struct transport_ops rails_ops = {
    .name = "rails",
    .send = rl_send,
    .recv = rl_recv,
    .progress = rl_progress,
    .wait_prepare = rl_wait_prepare,
    .wait_end = rl_wait_end,
    .peer_name = rl_peer_name,
    .mem_alloc = rl_mem_alloc,
    .mem_free = rl_mem_free,
    .local = transport_local_none,
    .idle = transport_always_idle,
};

fc_result_t rails_create(struct transport *const *inner, int n, struct rails **out)
{
    *out = NULL;
    if (n < 1)
        return FC_ERR(FC_ERR_INVALID_ARGUMENT, "rails: %d rails", n);
    struct rails *R = calloc(1, sizeof(*R));
    if (R)
        R->r = calloc((size_t)n, sizeof(*R->r));
    if (!R || !R->r) {
        free(R);
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    }
    R->t.ops = &rails_ops;
    R->n = 0;
    R->efd = n > 1 ? eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC) : -1;
    for (int i = 0; i < n; i++) {
        struct rail *rl = &R->r[i];
        rl->tp = inner[i];
        rl->inbox_tail = &rl->inbox;
        rl->owner = R;
        rl->efd = -1;
        pthread_mutex_init(&rl->lock, NULL);
        pthread_cond_init(&rl->cond, NULL);
        R->n = i + 1; /* made so far: rails_destroy undoes them */
        if (i == 0)
            continue;
        rl->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); /* -1: it naps instead */
        int e = pthread_create(&rl->thread, NULL, rail_main, rl);
        if (e != 0) {
            rails_stop(R);
            rails_destroy(R);
            return FC_ERR(FC_ERR_NO_MEMORY, "could not start the thread of rail %d of %d: %s", i, n,
                          strerror(e));
        }
        rl->started = 1;
    }
    *out = R;
    return FC_SUCCESS;
}

struct transport *rails_transport(struct rails *r)
{
    return &r->t;
}

void rails_stop(struct rails *R)
{
    if (!R)
        return;
    for (int i = 1; i < R->n; i++) {
        struct rail *rl = &R->r[i];
        if (!rl->started)
            continue;
        pthread_mutex_lock(&rl->lock);
        rl->stop = 1;
        pthread_cond_signal(&rl->cond);
        if (rl->polling)
            wake(rl->efd);
        pthread_mutex_unlock(&rl->lock);
        pthread_join(rl->thread, NULL);
        rl->started = 0;
    }
}

void rails_destroy(struct rails *R)
{
    if (!R)
        return;
    rails_stop(R);
    while (R->all_ops) {
        struct rail_op *op = R->all_ops;
        R->all_ops = op->all;
        free(op);
    }
    for (int i = 0; i < R->n; i++) {
        struct rail *rl = &R->r[i];
        if (rl->efd >= 0)
            close(rl->efd);
        pthread_mutex_destroy(&rl->lock);
        pthread_cond_destroy(&rl->cond);
    }
    if (R->efd >= 0)
        close(R->efd);
    free(R->r);
    free(R);
}
