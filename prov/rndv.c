/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The zero-copy RMA rendezvous for large messages (rndv_min bytes and
 * more, where the provider offers FI_RMA): both ends choose it from the
 * length alone, which they share. The receiver registers its buffer for
 * remote writes and sends a
 * clear-to-send (CTS: address, key, expected length, and an id) tagged
 * with the message's tag | XFER_TAG_TRANSPORT; the sender, which posted a
 * receive for that CTS, writes its buffer straight into the receiver's with
 * fi_writedata, whose remote CQ data (the id) completes the receive at the
 * target, which then answers with a FIN on the same tag: only then does the
 * send complete and its buffer become the caller's again (a provider may
 * report the write complete while the target still copies: libfabric's shm
 * moves device memory with cudaMemcpy, asynchronous for device to device).
 * No copy through bounce buffers; the provider's own RDMA (or CMA, or CUDA
 * IPC) does the moving. A sender whose length differs from the receiver's
 * writes what fits and flags the id, so the receiver reports the mismatch.
 *
 * Owns the rendezvous entries (struct rndv, their slabs, the id table and
 * the retry list of prov_ep) and the CTS, write and FIN posts. It never
 * reads the completion queue: its posts complete through their xfers'
 * callbacks, and cq.c hands it the remote CQ data of a write
 * (prov_rndv_data_arrived) and asks it to post again what the provider
 * refused (prov_rndv_retry). It calls only post.c and mr.c; tagged
 * messages of the engine are xfer.c's.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "prov_int.h"

#define RNDV_MAGIC 0x66635f6374735f31ull /* "fc_cts_1" */
#define RNDV_MISMATCH 0x80000000u        /* in the remote CQ data: lengths differ */
#define RNDV_IDX_BITS 20
#define RNDV_SLAB 64

struct rndv_cts {
    uint64_t magic;
    uint64_t addr;   /* where to write: virtual address or offset in the registration */
    uint64_t key;
    uint64_t expect; /* bytes the receiver expects */
    uint64_t cap;    /* bytes it can take */
    uint32_t id;     /* remote CQ data the write must carry */
    uint32_t pad;
};

/* What a rendezvous on the retry list waits to post (the provider said
 * EAGAIN): the sender's FIN receive or write, the receiver's FIN. */
enum rndv_retry_op { RETRY_WRITE, RETRY_FIN_SEND, RETRY_FIN_RECV };

struct rndv {
    struct xfer ix;       /* the CTS receive (sender) or send (receiver) */
    struct xfer wx;       /* the write (sender) */
    struct xfer fx;       /* the FIN receive (sender) or send (receiver) */
    struct rndv_cts cts;  /* in registered memory (the slab) */
    uint64_t fin;         /* the FIN's payload (registered memory too) */
    uint64_t tag;
    int retry_op;         /* what it is on the retry list for (enum rndv_retry_op) */
    void *cts_desc;
    struct prov_ep *p;
    struct xfer *user;    /* the engine's transfer; NULL once it was completed */
    struct prov_mr *mr;   /* the user buffer's registration */
    uint32_t id;          /* index | generation << RNDV_IDX_BITS, < RNDV_MISMATCH */
    int pending;          /* operations still to complete before it is idle */
    int mismatch;
    int peer;
    void *buf;            /* the user buffer */
    size_t len;           /* sender: its length; receiver: the length expected */
    size_t wlen;
    struct rndv *next;
};

static struct rndv *rndv_get(struct prov_ep *p)
{
    if (!p->rndv_free) {
        if (p->rndv_n + RNDV_SLAB >= (1u << RNDV_IDX_BITS))
            return NULL;
        size_t sz = RNDV_SLAB * sizeof(struct rndv);
        struct rndv *slab = prov_mem_alloc(&p->base, sz);
        void **slabs = realloc(p->rndv_slabs, (size_t)(p->rndv_nslabs + 1) * sizeof(void *));
        struct rndv **tab = realloc(p->rndv_tab, (p->rndv_n + RNDV_SLAB) * sizeof(*tab));
        if (slabs)
            p->rndv_slabs = slabs;
        if (tab)
            p->rndv_tab = tab;
        if (!slab || !slabs || !tab) {
            if (slab)
                prov_mem_free(&p->base, slab, sz);
            return NULL;
        }
        p->rndv_slabs[p->rndv_nslabs++] = slab;
        memset(slab, 0, sz);
        void *desc = NULL;
        struct prov_mr *m = NULL;
        if ((p->mr_mode & FI_MR_LOCAL) && prov_mr_acquire(p, slab, sz, &m) == FC_SUCCESS) {
            desc = m->desc; /* a persistent registration: stays until close */
            prov_mr_release(p, m);
        }
        for (int i = RNDV_SLAB - 1; i >= 0; i--) {
            struct rndv *r = &slab[i];
            r->p = p;
            r->cts_desc = desc;
            r->id = p->rndv_n + (uint32_t)i;
            p->rndv_tab[r->id] = r;
            r->next = p->rndv_free;
            p->rndv_free = r;
        }
        p->rndv_n += RNDV_SLAB;
    }
    struct rndv *r = p->rndv_free;
    p->rndv_free = r->next;
    r->next = NULL;
    r->user = NULL;
    r->mr = NULL;
    r->mismatch = 0;
    r->pending = 0;
    r->retry_op = RETRY_WRITE;
    return r;
}

static void rndv_put(struct rndv *r)
{
    struct prov_ep *p = r->p;
    prov_mr_release(p, r->mr);
    r->mr = NULL;
    r->user = NULL;
    /* a new generation: a late or stray write naming the old id is ignored */
    uint32_t idx = r->id & ((1u << RNDV_IDX_BITS) - 1);
    uint32_t gen = ((r->id >> RNDV_IDX_BITS) + 1) & ((RNDV_MISMATCH >> RNDV_IDX_BITS) - 1);
    r->id = idx | gen << RNDV_IDX_BITS;
    r->next = p->rndv_free;
    p->rndv_free = r;
}

void prov_rndv_fini(struct prov_ep *p)
{
    for (int i = 0; i < p->rndv_nslabs; i++)
        prov_mem_free(&p->base, p->rndv_slabs[i], RNDV_SLAB * sizeof(struct rndv));
    free(p->rndv_slabs);
    free(p->rndv_tab);
    p->rndv_slabs = NULL;
    p->rndv_tab = NULL;
    p->rndv_nslabs = 0;
    p->rndv_n = 0;
    p->rndv_free = p->rndv_retry = NULL;
}

/* Completes the engine's transfer of r once (with an error message when
 * status is not success). */
static void rndv_finish(struct rndv *r, fc_result_t status, size_t len, const char *msg)
{
    struct xfer *x = r->user;
    if (!x)
        return;
    r->user = NULL;
    prov_mr_release(r->p, r->mr);
    r->mr = NULL;
    if (status != FC_SUCCESS)
        x->errmsg = msg;
    x->done(x, status, len);
}

/* One operation of r is over; the last one completes the engine's transfer
 * (unless an error already did) and frees r. */
static void rndv_unref(struct rndv *r)
{
    if (--r->pending > 0)
        return;
    rndv_finish(r, FC_SUCCESS, r->len, NULL);
    rndv_put(r);
}

/* A post inside the state machine failed: the engine's transfer fails with
 * the call named (a vanished peer as FC_ERR_PEER_FAILED, like the tagged
 * path), and that operation of r is over. */
static void rndv_post_failed(struct rndv *r, const char *call, size_t len, ssize_t ret)
{
    struct prov_ep *p = r->p;
    fc_result_t code = prov_post_error(p, call, r->peer, len, (int)ret);
    snprintf(p->errbuf, sizeof(p->errbuf), "%s", err_get());
    rndv_finish(r, code, 0, p->errbuf);
    rndv_unref(r);
}

static void rndv_fin_done(struct xfer *fx, fc_result_t status, size_t len)
{
    (void)len;
    struct rndv *r = (struct rndv *)((char *)fx - offsetof(struct rndv, fx));
    if (status != FC_SUCCESS)
        rndv_finish(r, status, 0, fx->errmsg);
    else if (!fx->is_send && r->fin != (uint64_t)RNDV_MAGIC)
        rndv_finish(r, FC_ERR_INTERNAL, 0, "a rendezvous FIN with a bad payload arrived");
    rndv_unref(r);
}

/* The write failed, so no FIN will come: take its posted receive back (the
 * provider completes it as cancelled, which drops the last reference). */
static void rndv_cancel_fin(struct rndv *r)
{
    int ret = (int)fi_cancel(&r->p->ep->fid, &r->fx);
    if (ret)
        FC_TRACE(LOG_NET, "fi_cancel of a rendezvous FIN receive: %s (%d)", fi_strerror(-ret),
                 ret);
}

/* The receiver's FIN; 0 posted (or failed), 1 to retry later. */
static int rndv_send_fin(struct rndv *r)
{
    struct prov_ep *p = r->p;
    r->fin = RNDV_MAGIC;
    ssize_t ret = fi_tsend(p->ep, &r->fin, sizeof(r->fin), r->cts_desc, p->addrs[r->peer],
                           r->tag | XFER_TAG_TRANSPORT, &r->fx);
    if (ret == -FI_EAGAIN)
        return 1;
    if (ret)
        rndv_post_failed(r, "fi_tsend (rendezvous FIN)", sizeof(r->fin), ret);
    return 0;
}

/* The sender's write; 0 posted, 1 to retry later. */
static int rndv_write(struct rndv *r)
{
    struct prov_ep *p = r->p;
    uint64_t data = r->cts.id | (r->mismatch ? RNDV_MISMATCH : 0);
    ssize_t ret = fi_writedata(p->ep, r->buf, r->wlen, r->mr ? r->mr->desc : NULL, data,
                               p->addrs[r->peer], r->cts.addr, r->cts.key, &r->wx);
    for (int a = 0; prov_transient(ret) && a < p->retry_count; a++) {
        prov_backoff(a);
        ret = fi_writedata(p->ep, r->buf, r->wlen, r->mr ? r->mr->desc : NULL, data,
                           p->addrs[r->peer], r->cts.addr, r->cts.key, &r->wx);
    }
    if (ret == -FI_EAGAIN)
        return 1;
    if (ret) {
        rndv_post_failed(r, "fi_writedata (rendezvous)", r->wlen, ret);
        rndv_cancel_fin(r);
    }
    return 0;
}

/* The sender's FIN receive (it comes on the CTS's tag, after it): 0
 * posted, 1 to retry later, -1 failed (the transfer failed with it). */
static int rndv_recv_fin(struct rndv *r)
{
    struct prov_ep *p = r->p;
    r->fin = 0;
    ssize_t ret = fi_trecv(p->ep, &r->fin, sizeof(r->fin), r->cts_desc, p->addrs[r->peer],
                           r->tag | XFER_TAG_TRANSPORT, 0, &r->fx);
    if (ret == -FI_EAGAIN || ret == -FI_ENOMEM) /* out of receive entries (shm: ENOMEM) */
        return 1;
    if (ret) {
        rndv_post_failed(r, "fi_trecv (rendezvous FIN)", sizeof(r->fin), ret);
        return -1;
    }
    return 0;
}

/* The provider refused op for now: r waits on the retry list. */
static void rndv_defer(struct rndv *r, int op)
{
    r->retry_op = op;
    r->next = r->p->rndv_retry;
    r->p->rndv_retry = r;
}

/* Sender, after the CTS: the FIN receive, then the write; what the provider
 * refuses for now waits on the retry list. */
static void rndv_sender_post(struct rndv *r)
{
    int f = rndv_recv_fin(r);
    if (f > 0)
        rndv_defer(r, RETRY_FIN_RECV); /* out of receive entries for now */
    else if (f < 0)
        rndv_unref(r); /* no write either */
    else if (rndv_write(r))
        rndv_defer(r, RETRY_WRITE);
}

/* Sender: the receiver's CTS arrived; write. */
static void rndv_cts_arrived(struct xfer *ix, fc_result_t status, size_t len)
{
    struct rndv *r = (struct rndv *)ix;
    struct prov_ep *p = r->p;
    if (status != FC_SUCCESS) {
        rndv_finish(r, status, 0, ix->errmsg);
        rndv_unref(r);
        return;
    }
    if (len != sizeof(r->cts) || r->cts.magic != RNDV_MAGIC) {
        snprintf(p->errbuf, sizeof(p->errbuf),
                 "rendezvous send of %zu bytes to rank %d (%s): the receiver answered with %zu "
                 "bytes that are not a clear-to-send; do all ranks pass the same counts, and "
                 "the same FC_PROTO?",
                 r->len, r->peer, p->names ? p->names[r->peer] : "?", len);
        rndv_finish(r, FC_ERR_INVALID_ARGUMENT, 0, p->errbuf);
        rndv_unref(r);
        return;
    }
    r->wlen = r->len;
    if (r->len != r->cts.expect) {
        r->mismatch = 1;
        r->wlen = r->len < r->cts.cap ? r->len : r->cts.cap;
    }
    /* the FIN comes on the CTS's tag, after it: post its receive first */
    r->fx.done = rndv_fin_done;
    r->fx.is_send = 0;
    r->fx.peer = r->peer;
    r->fx.len = sizeof(r->fin);
    r->pending += 2; /* the FIN and the write */
    rndv_unref(r);   /* the CTS receive is over */
    rndv_sender_post(r);
}

static void rndv_write_done(struct xfer *wx, fc_result_t status, size_t len)
{
    (void)len;
    struct rndv *r = (struct rndv *)((char *)wx - offsetof(struct rndv, wx));
    struct prov_ep *p = r->p;
    /* a length mismatch is the receiver's error (as with tagged messages):
     * the send itself went out; it completes with the FIN */
    if (status == FC_SUCCESS && r->mismatch)
        FC_TRACE(LOG_NET, "rendezvous: sent %zu bytes to rank %d, which expects %llu",
                 r->len, r->peer, (unsigned long long)r->cts.expect);
    if (status != FC_SUCCESS) {
        rndv_finish(r, status, 0, wx->errmsg);
        rndv_cancel_fin(r);
    } else {
        p->rndv_count++;
    }
    rndv_unref(r);
}

/* Receiver: the CTS went out (the data may have arrived already). */
static void rndv_cts_sent(struct xfer *ix, fc_result_t status, size_t len)
{
    (void)len;
    struct rndv *r = (struct rndv *)ix;
    if (status != FC_SUCCESS)
        rndv_finish(r, status, 0, ix->errmsg);
    rndv_unref(r);
}

/* Receiver: a write carrying remote CQ data landed. */
void prov_rndv_data_arrived(struct prov_ep *p, uint64_t data)
{
    uint32_t id = (uint32_t)data & ~RNDV_MISMATCH;
    uint32_t idx = id & ((1u << RNDV_IDX_BITS) - 1);
    struct rndv *r = idx < p->rndv_n ? p->rndv_tab[idx] : NULL;
    if (!r || r->id != id || !r->user) {
        FC_WARN(LOG_NET, "a rendezvous write named id 0x%x that no receive waits for: ignored",
                id);
        return;
    }
    if (data & RNDV_MISMATCH) {
        snprintf(p->errbuf, sizeof(p->errbuf),
                 "message length mismatch: rank %d (%s) sent a message of a different length "
                 "than the %zu bytes this rank expects: do all ranks pass the same count, "
                 "datatype and root?",
                 r->peer, p->names ? p->names[r->peer] : "?", r->len);
        rndv_finish(r, FC_ERR_INVALID_ARGUMENT, 0, p->errbuf);
    } else {
        p->rndv_count++;
        rndv_finish(r, FC_SUCCESS, r->len, NULL);
    }
    /* the data is in place (progress waited for the provider's copies):
     * release the sender */
    r->fx.done = rndv_fin_done;
    r->fx.is_send = 1;
    r->fx.peer = r->peer;
    r->fx.len = sizeof(r->fin);
    r->pending++;
    if (rndv_send_fin(r))
        rndv_defer(r, RETRY_FIN_SEND);
    rndv_unref(r); /* the data */
}

int prov_use_rndv(const struct prov_ep *p, const struct xfer *x, size_t len)
{
    return p->rndv_min && len >= p->rndv_min && !x->delivery;
}

fc_result_t prov_rndv_send(struct prov_ep *p, int peer, uint64_t tag, const void *buf, size_t len,
                           struct xfer *x)
{
    struct rndv *r = rndv_get(p);
    if (!r)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory for a rendezvous");
    if ((p->mr_mode & FI_MR_LOCAL) || prov_is_device(p, buf)) {
        fc_result_t rc = prov_mr_acquire(p, buf, len, &r->mr);
        if (rc != FC_SUCCESS) {
            rndv_put(r);
            return rc;
        }
    }
    r->user = x;
    r->peer = peer;
    r->buf = (void *)buf;
    r->len = len;
    r->tag = tag;
    r->ix.done = rndv_cts_arrived;
    r->ix.is_send = 0;
    r->ix.peer = peer;
    r->ix.len = sizeof(r->cts);
    r->wx.done = rndv_write_done;
    r->wx.is_send = 1;
    r->wx.peer = peer;
    r->wx.len = len;
    r->pending = 1;
    ssize_t ret = fi_trecv(p->ep, &r->cts, sizeof(r->cts), r->cts_desc, p->addrs[peer],
                           tag | XFER_TAG_TRANSPORT, 0, &r->ix);
    if (ret) {
        r->pending = 0;
        rndv_put(r);
        if (ret == -FI_EAGAIN)
            return FC_AGAIN;
        return prov_post_error(p, "fi_trecv (rendezvous clear-to-send)", peer, len, (int)ret);
    }
    x->tpriv = NULL;
    return FC_SUCCESS;
}

fc_result_t prov_rndv_recv(struct prov_ep *p, int peer, uint64_t tag, void *buf, size_t len,
                           struct xfer *x)
{
    struct rndv *r = rndv_get(p);
    if (!r)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory for a rendezvous");
    fc_result_t rc = prov_mr_acquire(p, buf, len, &r->mr);
    if (rc != FC_SUCCESS) {
        rndv_put(r);
        return rc;
    }
    struct prov_mr *m = r->mr;
    r->cts.magic = RNDV_MAGIC;
    r->cts.addr = (p->prov_mr_mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)buf
                                                 : (uint64_t)((char *)buf - m->base);
    r->cts.key = m->key;
    r->peer = peer;
    r->buf = buf;
    r->len = x->len;
    r->tag = tag;
    r->cts.expect = x->len;
    r->cts.cap = len;
    r->cts.id = r->id;
    FC_TRACE(LOG_NET, "rendezvous receive of %zu bytes from rank %d: %s 0x%llx, key 0x%llx, id 0x%x",
             x->len, peer, (p->prov_mr_mode & FI_MR_VIRT_ADDR) ? "address" : "offset",
             (unsigned long long)r->cts.addr, (unsigned long long)r->cts.key, r->id);
    r->user = x;
    r->ix.done = rndv_cts_sent;
    r->ix.is_send = 1;
    r->ix.peer = peer;
    r->ix.len = sizeof(r->cts);
    r->pending = 2; /* the CTS send and the data */
    ssize_t ret = fi_tsend(p->ep, &r->cts, sizeof(r->cts), r->cts_desc, p->addrs[peer],
                           tag | XFER_TAG_TRANSPORT, &r->ix);
    if (ret) {
        r->pending = 0;
        r->user = NULL;
        rndv_put(r);
        if (ret == -FI_EAGAIN)
            return FC_AGAIN;
        return prov_post_error(p, "fi_tsend (rendezvous clear-to-send)", peer, len, (int)ret);
    }
    x->tpriv = NULL;
    return FC_SUCCESS;
}

/* Posts the provider refused for now (EAGAIN), tried again; those it
 * refuses again go back on the list. */
void prov_rndv_retry(struct prov_ep *p)
{
    struct rndv *list = p->rndv_retry;
    p->rndv_retry = NULL;
    while (list) {
        struct rndv *r = list;
        list = r->next;
        r->next = NULL;
        if (r->retry_op == RETRY_FIN_RECV)
            rndv_sender_post(r);
        else if (r->retry_op == RETRY_FIN_SEND ? rndv_send_fin(r) : rndv_write(r))
            rndv_defer(r, r->retry_op);
    }
}
