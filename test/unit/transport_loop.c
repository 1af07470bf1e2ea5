/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE
#include "transport_loop.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu.h"
#include "log.h"
#include "reduce.h"

/* A send of an endpoint with ordered send completions: its completion waits
 * until every earlier send of the endpoint has been delivered. */
struct loop_sq {
    struct xfer *x;
    size_t len;
    int delivered;
    struct loop_sq *next;
};

struct loop_op {
    struct xfer *x;
    struct loop_sq *sq; /* unexpected sends of an ordered endpoint */
    int peer; /* the other side: source for receives, source for unexpected sends */
    uint64_t tag;
    void *buf;
    size_t len;
    struct loop_op *next;
};

struct loop_done {
    struct xfer *x;
    fc_result_t status;
    size_t len;
    int has_local; /* run this local step before completing */
    struct local_op lo;
};

/* Matching lists are hashed by (peer, tag); each bucket is a FIFO, so the
 * oldest op with a given (peer, tag) is always found first. */
#define LOOP_BUCKETS 256

struct loop_list {
    struct loop_op *head, **tail;
};

struct loop_ep {
    struct transport base;
    struct loop_fabric *f;
    int rank;
    struct loop_list posted[LOOP_BUCKETS];
    struct loop_list unexp[LOOP_BUCKETS];
    struct loop_done *cq;
    size_t ncq, capcq;
    struct loop_sq *sq_head, **sq_tail; /* ordered send completions */
};

struct loop_fabric {
    int nranks;
    unsigned seed;
    int ordered_sends;
    const int *node; /* ordered only between ranks of one node (NULL: all) */
    struct loop_ep *eps;
    struct loop_op *free_ops;
    uint64_t msgs, bytes;
    uint64_t *pair_msgs; /* [from * nranks + to] */
};

static struct loop_op *op_get(struct loop_fabric *f)
{
    struct loop_op *o = f->free_ops;
    if (o) {
        f->free_ops = o->next;
        return o;
    }
    return malloc(sizeof(*o));
}

static void op_put(struct loop_fabric *f, struct loop_op *o)
{
    o->next = f->free_ops;
    f->free_ops = o;
}

static int cq_push(struct loop_ep *ep, struct xfer *x, fc_result_t st, size_t len)
{
    if (ep->ncq == ep->capcq) {
        size_t nc = ep->capcq ? ep->capcq * 2 : 64;
        void *p = realloc(ep->cq, nc * sizeof(*ep->cq));
        if (!p)
            return -1;
        ep->cq = p;
        ep->capcq = nc;
    }
    memset(&ep->cq[ep->ncq], 0, sizeof(ep->cq[ep->ncq]));
    ep->cq[ep->ncq].x = x;
    ep->cq[ep->ncq].status = st;
    ep->cq[ep->ncq].len = len;
    ep->ncq++;
    return 0;
}

static struct loop_list *bucket(struct loop_list *tab, int peer, uint64_t tag)
{
    uint64_t h = (tag ^ ((uint64_t)peer * 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
    return &tab[(h >> 40) % LOOP_BUCKETS];
}

/* Removes and returns the oldest op in the list matching (peer, tag). */
static struct loop_op *take(struct loop_list *l, int peer, uint64_t tag)
{
    for (struct loop_op **pp = &l->head; *pp; pp = &(*pp)->next) {
        struct loop_op *o = *pp;
        if (o->peer == peer && o->tag == tag) {
            *pp = o->next;
            if (l->tail == &o->next)
                l->tail = pp;
            return o;
        }
    }
    return NULL;
}

static void append(struct loop_list *l, struct loop_op *o)
{
    o->next = NULL;
    *l->tail = o;
    l->tail = &o->next;
}

/* Completes the sender's delivered sends from the oldest on, stopping at
 * the first one not yet delivered. */
static int sq_flush(struct loop_ep *s)
{
    while (s->sq_head && s->sq_head->delivered) {
        struct loop_sq *q = s->sq_head;
        if (cq_push(s, q->x, FC_SUCCESS, q->len))
            return -1;
        s->sq_head = q->next;
        if (!s->sq_head)
            s->sq_tail = &s->sq_head;
        free(q);
    }
    return 0;
}

/* Delivers send (sender ep s, buffer, len, sx; sq when the sender's
 * completions are ordered) into receive r (at ep d). */
static fc_result_t deliver(struct loop_ep *s, struct xfer *sx, struct loop_sq *sq,
                           const void *sbuf, size_t slen, struct loop_ep *d, struct xfer *rx,
                           void *rbuf, size_t rlen)
{
    fc_result_t rst = FC_SUCCESS;
    size_t n = slen;
    if (slen > rlen) {
        n = rlen;
        rst = FC_ERR_FABRIC;
        rx->errmsg = "message truncated (loopback: sender sent more than the receive posted)";
    }
    if (n && (gpu_on_device(rbuf) || gpu_on_device(sbuf)))
        gpu_copy_sync(rbuf, sbuf, n); /* the device tier's direct path, in unit tests */
    else if (n)
        memcpy(rbuf, sbuf, n);
    s->f->msgs++;
    s->f->bytes += n;
    if (s->f->pair_msgs)
        s->f->pair_msgs[(size_t)s->rank * (size_t)s->f->nranks + (size_t)d->rank]++;
    int bad;
    if (sq) {
        sq->delivered = 1;
        sq->len = slen;
        bad = sq_flush(s);
    } else {
        bad = cq_push(s, sx, FC_SUCCESS, slen);
    }
    if (bad || cq_push(d, rx, rst, n))
        return FC_ERR(FC_ERR_NO_MEMORY, "loopback: out of memory for completions");
    return FC_SUCCESS;
}

static fc_result_t loop_send(struct transport *t, int peer, uint64_t tag, const void *buf,
                             size_t len, struct xfer *x)
{
    struct loop_ep *ep = (struct loop_ep *)t;
    struct loop_fabric *f = ep->f;
    if (peer < 0 || peer >= f->nranks)
        return FC_ERR(FC_ERR_INTERNAL, "loopback: send to bad peer %d", peer);
    struct loop_ep *d = &f->eps[peer];
    struct loop_sq *sq = NULL;
    if (f->ordered_sends && (!f->node || f->node[peer] == f->node[ep->rank])) {
        sq = calloc(1, sizeof(*sq));
        if (!sq)
            return FC_ERR(FC_ERR_NO_MEMORY, "loopback: out of memory");
        sq->x = x;
        *ep->sq_tail = sq;
        ep->sq_tail = &sq->next;
    }
    struct loop_op *r = take(bucket(d->posted, ep->rank, tag), ep->rank, tag);
    if (r) {
        fc_result_t rc = deliver(ep, x, sq, buf, len, d, r->x, r->buf, r->len);
        op_put(f, r);
        return rc;
    }
    struct loop_op *o = op_get(f);
    if (!o)
        return FC_ERR(FC_ERR_NO_MEMORY, "loopback: out of memory");
    o->sq = sq;
    o->x = x;
    o->peer = ep->rank;
    o->tag = tag;
    o->buf = (void *)buf;
    o->len = len;
    append(bucket(d->unexp, ep->rank, tag), o);
    return FC_SUCCESS;
}

static fc_result_t loop_recv(struct transport *t, int peer, uint64_t tag, void *buf, size_t len,
                             struct xfer *x)
{
    struct loop_ep *ep = (struct loop_ep *)t;
    struct loop_fabric *f = ep->f;
    if (peer < 0 || peer >= f->nranks)
        return FC_ERR(FC_ERR_INTERNAL, "loopback: receive from bad peer %d", peer);
    struct loop_op *s = take(bucket(ep->unexp, peer, tag), peer, tag);
    if (s) {
        fc_result_t rc = deliver(&f->eps[peer], s->x, s->sq, s->buf, s->len, ep, x, buf, len);
        op_put(f, s);
        return rc;
    }
    struct loop_op *o = op_get(f);
    if (!o)
        return FC_ERR(FC_ERR_NO_MEMORY, "loopback: out of memory");
    o->x = x;
    o->sq = NULL;
    o->peer = peer;
    o->tag = tag;
    o->buf = buf;
    o->len = len;
    append(bucket(ep->posted, peer, tag), o);
    return FC_SUCCESS;
}

static fc_result_t loop_progress(struct transport *t, int *ncomp)
{
    struct loop_ep *ep = (struct loop_ep *)t;
    size_t n = ep->ncq;
    *ncomp = (int)n;
    if (!n)
        return FC_SUCCESS;
    /* Take the batch: callbacks never post, but keep the queue consistent. */
    struct loop_done *batch = ep->cq;
    size_t cap = ep->capcq;
    ep->cq = NULL;
    ep->ncq = ep->capcq = 0;
    if (ep->f->seed) {
        for (size_t i = n - 1; i > 0; i--) {
            size_t j = (size_t)rand_r(&ep->f->seed) % (i + 1);
            struct loop_done tmp = batch[i];
            batch[i] = batch[j];
            batch[j] = tmp;
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (batch[i].has_local)
            transport_local_host(&batch[i].lo);
        batch[i].x->done(batch[i].x, batch[i].status, batch[i].len);
    }
    if (!ep->cq) {
        ep->cq = batch;
        ep->capcq = cap;
    } else {
        free(batch);
    }
    return FC_SUCCESS;
}

static void loop_peer_name(struct transport *t, int peer, char *buf, size_t len)
{
    (void)t;
    snprintf(buf, len, "loopback peer %d", peer);
}

static fc_result_t loop_local(struct transport *t, const struct local_op *lo, struct xfer *x)
{
    struct loop_ep *ep = (struct loop_ep *)t;
    if (cq_push(ep, x, FC_SUCCESS, lo->len))
        return FC_ERR(FC_ERR_NO_MEMORY, "loopback: out of memory for completions");
    ep->cq[ep->ncq - 1].has_local = 1;
    ep->cq[ep->ncq - 1].lo = *lo;
    return FC_SUCCESS;
}

/* loop_ops with TRANSPORT_RUNS_LOCAL: local steps complete late (loop_local);
 * filled from loop_ops by loop_fabric_create_async */
static struct transport_ops loop_ops_async;

static const struct transport_ops loop_ops = {
    .name = "loopback",
    .send = loop_send,
    .recv = loop_recv,
    .progress = loop_progress,
    .wait_prepare = transport_wait_none,
    .wait_end = transport_wait_end_none,
    .peer_name = loop_peer_name,
    .mem_alloc = transport_mem_host_alloc,
    .mem_free = transport_mem_host_free,
    .local = transport_local_none,
    .idle = transport_always_idle,
};


struct loop_fabric *loop_fabric_create_async(int nranks, unsigned seed)
{
    loop_ops_async = loop_ops;
    loop_ops_async.name = "loopback-async";
    loop_ops_async.flags = TRANSPORT_RUNS_LOCAL;
    loop_ops_async.local = loop_local;
    struct loop_fabric *f = loop_fabric_create(nranks, seed);
    if (f)
        for (int i = 0; i < nranks; i++)
            f->eps[i].base.ops = &loop_ops_async;
    return f;
}

struct loop_fabric *loop_fabric_create(int nranks, unsigned seed)
{
    struct loop_fabric *f = calloc(1, sizeof(*f));
    if (!f)
        return NULL;
    f->eps = calloc((size_t)nranks, sizeof(*f->eps));
    if (!f->eps) {
        free(f);
        return NULL;
    }
    f->nranks = nranks;
    f->seed = seed;
    if (nranks <= 64) /* per-pair counts for small fabrics only */
        f->pair_msgs = calloc((size_t)nranks * (size_t)nranks, sizeof(uint64_t));
    for (int i = 0; i < nranks; i++) {
        struct loop_ep *ep = &f->eps[i];
        ep->base.ops = &loop_ops;
        ep->f = f;
        ep->rank = i;
        ep->sq_tail = &ep->sq_head;
        for (int b = 0; b < LOOP_BUCKETS; b++) {
            ep->posted[b].tail = &ep->posted[b].head;
            ep->unexp[b].tail = &ep->unexp[b].head;
        }
    }
    return f;
}

struct transport *loop_transport(struct loop_fabric *f, int rank)
{
    return &f->eps[rank].base;
}

uint64_t loop_fabric_pair_msgs(const struct loop_fabric *f, int from, int to)
{
    return f->pair_msgs ? f->pair_msgs[(size_t)from * (size_t)f->nranks + (size_t)to] : 0;
}

void loop_fabric_stats(const struct loop_fabric *f, uint64_t *msgs, uint64_t *bytes)
{
    *msgs = f->msgs;
    *bytes = f->bytes;
}

int loop_fabric_pending(const struct loop_fabric *f)
{
    int n = 0;
    for (int i = 0; i < f->nranks; i++) {
        for (int b = 0; b < LOOP_BUCKETS; b++) {
            for (struct loop_op *o = f->eps[i].posted[b].head; o; o = o->next)
                n++;
            for (struct loop_op *o = f->eps[i].unexp[b].head; o; o = o->next)
                n++;
        }
        n += (int)f->eps[i].ncq;
        for (struct loop_sq *q = f->eps[i].sq_head; q; q = q->next)
            n++;
    }
    return n;
}

void loop_fabric_order_sends(struct loop_fabric *f, const int *node)
{
    f->ordered_sends = 1;
    f->node = node;
}

static void free_list(struct loop_op *o)
{
    while (o) {
        struct loop_op *n = o->next;
        free(o);
        o = n;
    }
}

void loop_fabric_destroy(struct loop_fabric *f)
{
    if (!f)
        return;
    free(f->pair_msgs);
    for (int i = 0; i < f->nranks; i++) {
        for (int b = 0; b < LOOP_BUCKETS; b++) {
            free_list(f->eps[i].posted[b].head);
            free_list(f->eps[i].unexp[b].head);
        }
        free(f->eps[i].cq);
        for (struct loop_sq *q = f->eps[i].sq_head, *nq; q; q = nq) {
            nq = q->next;
            free(q);
        }
    }
    free_list(f->free_ops);
    free(f->eps);
    free(f);
}

/* ---- loop_watch ------------------------------------------------------------------ */

static fc_result_t watch_send(struct transport *t, int peer, uint64_t tag, const void *buf,
                              size_t len, struct xfer *x)
{
    struct loop_watch *w = (struct loop_watch *)t;
    w->hook(w, 1, peer, buf, len, x);
    return w->inner->ops->send(w->inner, peer, tag, buf, len, x);
}

static fc_result_t watch_recv(struct transport *t, int peer, uint64_t tag, void *buf,
                              size_t len, struct xfer *x)
{
    struct loop_watch *w = (struct loop_watch *)t;
    w->hook(w, 0, peer, buf, len, x);
    return w->inner->ops->recv(w->inner, peer, tag, buf, len, x);
}

static fc_result_t watch_progress(struct transport *t, int *n)
{
    struct loop_watch *w = (struct loop_watch *)t;
    return w->inner->ops->progress(w->inner, n);
}

static void watch_peer_name(struct transport *t, int peer, char *buf, size_t len)
{
    struct loop_watch *w = (struct loop_watch *)t;
    w->inner->ops->peer_name(w->inner, peer, buf, len);
}

static const struct transport_ops watch_ops = {
    .name = "watch",
    .send = watch_send,
    .recv = watch_recv,
    .progress = watch_progress,
    .wait_prepare = transport_wait_none,
    .wait_end = transport_wait_end_none,
    .peer_name = watch_peer_name,
    .mem_alloc = transport_mem_host_alloc,
    .mem_free = transport_mem_host_free,
    .local = transport_local_none,
    .idle = transport_always_idle,
};

void loop_watch_init(struct loop_watch *w, struct transport *inner, loop_watch_fn hook)
{
    w->base.ops = &watch_ops;
    w->inner = inner;
    w->hook = hook;
}
