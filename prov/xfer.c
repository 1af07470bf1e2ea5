/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The libfabric transport: tagged sends and receives, inject for small
 * messages, a zero-copy RMA rendezvous for large ones, completion-queue
 * progress with error entries turned into fabcoll errors that name the
 * peer, and a wait that sleeps on the CQ's file descriptor when the
 * provider has one.
 *
 * The rendezvous (messages of rndv_min bytes and more, where the provider
 * offers FI_RMA): both ends choose it from the length alone, which they
 * share. The receiver registers its buffer for remote writes and sends a
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
 */
#include <errno.h>
#include <stddef.h>
#include <poll.h>
#include <sys/uio.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu.h"
#include "log.h"
#include "prov_int.h"

/* Errors worth trying again (FC_RETRY_COUNT times, backing off from 50 us):
 * the provider or the kernel is short of something for a moment. EAGAIN is
 * not among them: it only means "progress the queue first". */
static int transient(ssize_t ret)
{
    return ret == -FI_EBUSY || ret == -FI_EINTR || ret == -FI_ETIMEDOUT || ret == -FI_ENOMEM;
}

static void backoff(int attempt)
{
    struct timespec ts = {0, 50000L << (attempt < 10 ? attempt : 10)};
    nanosleep(&ts, NULL);
}

static fc_result_t post_error(struct prov_ep *p, const char *call, int peer, size_t len, int ret)
{
    fc_result_t code = FC_ERR_FABRIC;
    if (ret == -FI_ECONNREFUSED || ret == -FI_ECONNRESET || ret == -FI_ENOTCONN ||
        ret == -FI_EHOSTUNREACH || ret == -FI_ECONNABORTED || ret == -FI_ENETUNREACH)
        code = FC_ERR_PEER_FAILED;
    return FC_ERR(code, "%s of %zu bytes to/from rank %d (%s) on provider %s failed: %s (%d)%s",
                  call, len, peer, p->names ? p->names[peer] : "?", p->prov_name,
                  fi_strerror(-ret), ret,
                  code == FC_ERR_PEER_FAILED ? ". The peer process has probably exited or its "
                                               "host is unreachable"
                                             : "");
}

/* Room for one more local completion; 0 on success. */
static int local_room(struct prov_ep *p)
{
    if (p->nlocal < p->caplocal)
        return 0;
    size_t nc = p->caplocal ? p->caplocal * 2 : 64;
    void *n = realloc(p->local, nc * sizeof(*p->local));
    if (!n)
        return -1;
    p->local = n;
    p->caplocal = nc;
    return 0;
}

/* Device memory, in the gdr tier: always registered, never injected. */
static int is_device(const struct prov_ep *p, const void *buf)
{
    if (!p->hmem || !buf)
        return 0;
    struct gpu_ptr gp;
    gpu_ptr_info(buf, &gp);
    return gp.kind == GPU_DEVICE;
}

/* ---- RMA rendezvous ------------------------------------------------------ */

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
    fc_result_t code = post_error(p, call, r->peer, len, (int)ret);
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
    for (int a = 0; transient(ret) && a < p->retry_count; a++) {
        backoff(a);
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
static void rndv_data_arrived(struct prov_ep *p, uint64_t data)
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

static int use_rndv(const struct prov_ep *p, const struct xfer *x, size_t len)
{
    return p->rndv_min && len >= p->rndv_min && !x->delivery;
}

static fc_result_t rndv_send(struct prov_ep *p, int peer, uint64_t tag, const void *buf,
                             size_t len, struct xfer *x)
{
    struct rndv *r = rndv_get(p);
    if (!r)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory for a rendezvous");
    if ((p->mr_mode & FI_MR_LOCAL) || is_device(p, buf)) {
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
        return post_error(p, "fi_trecv (rendezvous clear-to-send)", peer, len, (int)ret);
    }
    x->tpriv = NULL;
    return FC_SUCCESS;
}

static fc_result_t rndv_recv(struct prov_ep *p, int peer, uint64_t tag, void *buf, size_t len,
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
        return post_error(p, "fi_tsend (rendezvous clear-to-send)", peer, len, (int)ret);
    }
    x->tpriv = NULL;
    return FC_SUCCESS;
}

/* Posts the provider refused for now (EAGAIN), tried again; those it
 * refuses again go back on the list. */
static void rndv_retry(struct prov_ep *p)
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

static fc_result_t pe_send(struct transport *t, int peer, uint64_t tag, const void *buf,
                           size_t len, struct xfer *x)
{
    struct prov_ep *p = ep_of(t);
    fi_addr_t dst = p->addrs[peer];
    x->tpriv = NULL;
    if (use_rndv(p, x, len))
        return rndv_send(p, peer, tag, buf, len, x);
    /* shm writes into the peer's queue at once (and its delivery-complete
     * sends of zero bytes never complete in libfabric 1.17): no need */
    if (x->delivery && p->tier != FC_TIER_SHM) {
        struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
        struct fi_msg_tagged m = {.msg_iov = &iov, .desc = NULL, .iov_count = 1, .addr = dst,
                                  .tag = tag, .context = x};
        ssize_t ret = fi_tsendmsg(p->ep, &m, FI_COMPLETION | FI_DELIVERY_COMPLETE);
        if (ret == -FI_EAGAIN)
            return FC_AGAIN;
        if (ret == 0)
            return FC_SUCCESS;
        /* a provider without delivery completion: a plain send, which at
         * least completes only once the provider has let go of it */
        if (ret != -FI_EBADFLAGS && ret != -FI_ENOSYS && ret != -FI_EOPNOTSUPP)
            return post_error(p, "fi_tsendmsg(FI_DELIVERY_COMPLETE)", peer, len, (int)ret);
        ret = fi_tsend(p->ep, buf, len, NULL, dst, tag, x);
        if (ret == -FI_EAGAIN)
            return FC_AGAIN;
        return ret ? post_error(p, "fi_tsend", peer, len, (int)ret) : FC_SUCCESS;
    }
    int dev = is_device(p, buf);
    if (len <= p->inject_size && !dev) {
        /* the buffer is reusable at once, and no completion will come:
         * report one at the next progress */
        if (local_room(p))
            return FC_ERR(FC_ERR_NO_MEMORY, "out of memory for completions");
        ssize_t ret = fi_tinject(p->ep, buf, len, dst, tag);
        if (ret == -FI_EAGAIN)
            return FC_AGAIN;
        if (ret)
            return post_error(p, "fi_tinject", peer, len, (int)ret);
        p->local[p->nlocal].x = x;
        p->local[p->nlocal].len = len;
        p->nlocal++;
        FC_TRACE(LOG_NET, "fi_tinject to rank %d: tag %#llx, %zu bytes", peer,
                 (unsigned long long)tag, len);
        return FC_SUCCESS;
    }
    void *desc = NULL;
    struct prov_mr *m = NULL;
    if ((p->mr_mode & FI_MR_LOCAL) || dev) {
        fc_result_t rc = prov_mr_acquire(p, buf, len, &m);
        if (rc != FC_SUCCESS)
            return rc;
        desc = m->desc;
    }
    ssize_t ret = fi_tsend(p->ep, buf, len, desc, dst, tag, x);
    for (int a = 0; transient(ret) && a < p->retry_count; a++) {
        FC_TRACE(LOG_NET, "fi_tsend to rank %d: %s, retry %d", peer, fi_strerror((int)-ret), a + 1);
        backoff(a);
        ret = fi_tsend(p->ep, buf, len, desc, dst, tag, x);
    }
    if (ret) {
        prov_mr_release(p, m);
        if (ret == -FI_EAGAIN)
            return FC_AGAIN;
        return post_error(p, "fi_tsend", peer, len, (int)ret);
    }
    x->tpriv = m;
    FC_TRACE(LOG_NET, "fi_tsend to rank %d: tag %#llx, %zu bytes", peer, (unsigned long long)tag,
             len);
    return FC_SUCCESS;
}

static fc_result_t pe_recv(struct transport *t, int peer, uint64_t tag, void *buf, size_t len,
                           struct xfer *x)
{
    struct prov_ep *p = ep_of(t);
    void *desc = NULL;
    struct prov_mr *m = NULL;
    x->tpriv = NULL;
    /* the expected length decides, as at the sender (len may be larger, to
     * catch a longer message) */
    if (use_rndv(p, x, x->len))
        return rndv_recv(p, peer, tag, buf, len, x);
    if (((p->mr_mode & FI_MR_LOCAL) || is_device(p, buf)) && len > 0) {
        fc_result_t rc = prov_mr_acquire(p, buf, len, &m);
        if (rc != FC_SUCCESS)
            return rc;
        desc = m->desc;
    }
    ssize_t ret = fi_trecv(p->ep, buf, len, desc, p->addrs[peer], tag, 0, x);
    for (int a = 0; transient(ret) && a < p->retry_count; a++) {
        FC_TRACE(LOG_NET, "fi_trecv from rank %d: %s, retry %d", peer, fi_strerror((int)-ret),
                 a + 1);
        backoff(a);
        ret = fi_trecv(p->ep, buf, len, desc, p->addrs[peer], tag, 0, x);
    }
    if (ret) {
        prov_mr_release(p, m);
        if (ret == -FI_EAGAIN)
            return FC_AGAIN;
        return post_error(p, "fi_trecv", peer, len, (int)ret);
    }
    x->tpriv = m;
    FC_TRACE(LOG_NET, "fi_trecv from rank %d: tag %#llx, %zu bytes", peer,
             (unsigned long long)tag, len);
    return FC_SUCCESS;
}

/* Turns a CQ error entry into a code and a message naming the peer. */
static fc_result_t cq_error(struct prov_ep *p, struct fi_cq_err_entry *e, struct xfer *x)
{
    char pbuf[256];
    const char *perr = fi_cq_strerror(p->cq, e->prov_errno, e->err_data, pbuf, sizeof(pbuf));
    int err = e->err < 0 ? -e->err : e->err; /* some providers (shm) report it negated */
    fc_result_t code = FC_ERR_FABRIC;
    const char *fix = "";
    switch (err) {
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case FI_ESHUTDOWN:
    case FI_EIO: /* the sockets provider's word for a vanished peer */
        code = FC_ERR_PEER_FAILED;
        fix = " The peer process has probably exited, or its host is unreachable: check that "
              "rank's own error output.";
        break;
    case FI_ETRUNC:
        code = FC_ERR_INVALID_ARGUMENT;
        if (x)
            x->truncated = 1;
        fix = " A message was longer than the receive posted for it: do all ranks pass the "
              "same count, datatype and root?";
        break;
    case FI_ECANCELED: fix = " (cancelled)"; break;
    default: break;
    }
    int peer = x ? x->peer : -1;
    snprintf(p->errbuf, sizeof(p->errbuf),
             "%s completion error %s rank %d (%s) on provider %s: %s (%d), provider says: "
             "%s.%s",
             x ? (x->is_send ? "send" : "receive") : "a", x ? (x->is_send ? "to" : "from") : "",
             peer, peer >= 0 && p->names ? p->names[peer] : "?", p->prov_name, fi_strerror(err),
             err, perr ? perr : "-", fix);
    return code;
}

static fc_result_t pe_progress(struct transport *t, int *ncomp)
{
    struct prov_ep *p = ep_of(t);
    int n = 0;
    if (p->rndv_retry)
        rndv_retry(p);
    /* locally completed injects first */
    if (p->nlocal) {
        size_t k = p->nlocal;
        for (size_t i = 0; i < k; i++) {
            struct xfer *x = p->local[i].x;
            x->done(x, FC_SUCCESS, p->local[i].len);
        }
        /* callbacks never post, so nothing was appended meanwhile */
        p->nlocal = 0;
        n += (int)k;
    }
    struct fi_cq_tagged_entry ent[32];
    for (int round = 0; round < 4; round++) {
        ssize_t got = fi_cq_read(p->cq, ent, 32);
        if (got == -FI_EAGAIN)
            break;
        if (got == -FI_EAVAIL) {
            struct fi_cq_err_entry e;
            memset(&e, 0, sizeof(e));
            ssize_t r = fi_cq_readerr(p->cq, &e, 0);
            if (r < 0) {
                *ncomp = n;
                return FC_ERR(FC_ERR_FABRIC, "fi_cq_readerr (provider %s) failed: %s (%zd)",
                              p->prov_name, fi_strerror((int)-r), r);
            }
            struct xfer *x = e.op_context;
            fc_result_t code = cq_error(p, &e, x);
            if (!x) {
                *ncomp = n;
                return FC_ERR(code, "%s", p->errbuf);
            }
            prov_mr_release(p, x->tpriv);
            x->tpriv = NULL;
            x->errmsg = p->errbuf;
            x->done(x, code, 0);
            n++;
            continue;
        }
        if (got < 0) {
            *ncomp = n;
            return FC_ERR(FC_ERR_FABRIC, "fi_cq_read (provider %s) failed: %s (%zd)",
                          p->prov_name, fi_strerror((int)-got), got);
        }
        if (p->hmem)
            for (ssize_t i = 0; i < got; i++)
                if (ent[i].flags & (FI_RECV | FI_REMOTE_CQ_DATA)) {
                    /* the provider may still be copying into device memory */
                    gpu_legacy_sync();
                    break;
                }
        for (ssize_t i = 0; i < got; i++) {
            if (ent[i].flags & FI_REMOTE_CQ_DATA) {
                rndv_data_arrived(p, ent[i].data);
                continue;
            }
            struct xfer *x = ent[i].op_context;
            FC_TRACE(LOG_NET, "%s rank %d done: tag %#llx, %zu bytes",
                     x->is_send ? "send to" : "receive from", x->peer,
                     (unsigned long long)x->tag, x->is_send ? x->len : ent[i].len);
            prov_mr_release(p, x->tpriv);
            x->tpriv = NULL;
            x->done(x, FC_SUCCESS, x->is_send ? x->len : ent[i].len);
        }
        n += (int)got;
        if (got < 32)
            break;
    }
    *ncomp = n;
    return FC_SUCCESS;
}

/* Under the engine's lock (fi_trywait may read the completion queue). */
static int pe_wait_prepare(struct transport *t, struct transport_wait *w)
{
    struct prov_ep *p = ep_of(t);
    if (p->nlocal)
        return 1; /* completions of injects to report */
    if (p->wait_fd < 0) {
        w->nap_us = 200; /* no wait object: give the CPU away briefly */
        return 0;
    }
    struct fid *fids[1] = {&p->cq->fid};
    if (fi_trywait(p->fabric, fids, 1) != FI_SUCCESS)
        return 1;
    if (w->nfds < TRANSPORT_WAIT_FDS)
        w->fds[w->nfds++] = (struct pollfd){.fd = p->wait_fd, .events = POLLIN};
    return 0;
}

static void pe_peer_name(struct transport *t, int peer, char *buf, size_t len)
{
    struct prov_ep *p = ep_of(t);
    if (p->names && peer >= 0 && peer < p->nranks)
        snprintf(buf, len, "%s", p->names[peer]);
    else
        snprintf(buf, len, "peer %d", peer);
}

const struct transport_ops prov_transport_ops = {
    .name = "libfabric",
    .send = pe_send,
    .recv = pe_recv,
    .progress = pe_progress,
    .wait_prepare = pe_wait_prepare,
    .peer_name = pe_peer_name,
    .mem_alloc = prov_mem_alloc,
    .mem_free = prov_mem_free,
};
