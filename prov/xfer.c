/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The libfabric transport: tagged sends and receives, inject for small
 * messages, completion-queue progress with error entries turned into
 * fabcoll errors that name the peer, and a wait that sleeps on the CQ's
 * file descriptor when the provider has one.
 */
#include <errno.h>
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

static fc_result_t pe_send(struct transport *t, int peer, uint64_t tag, const void *buf,
                           size_t len, struct xfer *x)
{
    struct prov_ep *p = ep_of(t);
    fi_addr_t dst = p->addrs[peer];
    x->tpriv = NULL;
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
    return FC_SUCCESS;
}

static fc_result_t pe_recv(struct transport *t, int peer, uint64_t tag, void *buf, size_t len,
                           struct xfer *x)
{
    struct prov_ep *p = ep_of(t);
    void *desc = NULL;
    struct prov_mr *m = NULL;
    x->tpriv = NULL;
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
        for (ssize_t i = 0; i < got; i++) {
            struct xfer *x = ent[i].op_context;
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

static void pe_wait(struct transport *t, int timeout_us)
{
    struct prov_ep *p = ep_of(t);
    if (p->nlocal)
        return;
    if (p->wait_fd >= 0) {
        struct fid *fids[1] = {&p->cq->fid};
        if (fi_trywait(p->fabric, fids, 1) == FI_SUCCESS) {
            struct pollfd pfd = {.fd = p->wait_fd, .events = POLLIN};
            int ms = (timeout_us + 999) / 1000;
            poll(&pfd, 1, ms > 0 ? ms : 1);
        }
        return;
    }
    /* no wait object: give the CPU away briefly */
    struct timespec ts = {0, (long)(timeout_us < 200 ? timeout_us : 200) * 1000};
    nanosleep(&ts, NULL);
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
    .wait = pe_wait,
    .peer_name = pe_peer_name,
    .mem_alloc = prov_mem_alloc,
    .mem_free = prov_mem_free,
};
