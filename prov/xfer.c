/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The libfabric transport's entry points: tagged sends and receives,
 * inject for small messages (their completions reported at the next
 * progress), registration where the provider or a device buffer needs it,
 * peer names, and the transport_ops table that ties it all to the engine.
 *
 * Calls point one way: this file hands large messages to rndv.c and
 * progress and waiting to cq.c, and all posts share post.c; cq.c calls
 * rndv.c, rndv.c calls post.c, and none calls back here. Nothing here
 * reads the completion queue or touches a rendezvous entry.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>

#include "log.h"
#include "prov_int.h"

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

static fc_result_t pe_send(struct transport *t, int peer, uint64_t tag, const void *buf,
                           size_t len, struct xfer *x)
{
    struct prov_ep *p = ep_of(t);
    fi_addr_t dst = p->addrs[peer];
    x->tpriv = NULL;
    if (prov_use_rndv(p, x, len))
        return prov_rndv_send(p, peer, tag, buf, len, x);
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
            return prov_post_error(p, "fi_tsendmsg(FI_DELIVERY_COMPLETE)", peer, len, (int)ret);
        ret = fi_tsend(p->ep, buf, len, NULL, dst, tag, x);
        if (ret == -FI_EAGAIN)
            return FC_AGAIN;
        return ret ? prov_post_error(p, "fi_tsend", peer, len, (int)ret) : FC_SUCCESS;
    }
    int dev = prov_is_device(p, buf);
    if (len <= p->inject_size && !dev) {
        /* the buffer is reusable at once, and no completion will come:
         * report one at the next progress */
        if (local_room(p))
            return FC_ERR(FC_ERR_NO_MEMORY, "out of memory for completions");
        ssize_t ret = fi_tinject(p->ep, buf, len, dst, tag);
        if (ret == -FI_EAGAIN)
            return FC_AGAIN;
        if (ret)
            return prov_post_error(p, "fi_tinject", peer, len, (int)ret);
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
    for (int a = 0; prov_transient(ret) && a < p->retry_count; a++) {
        FC_TRACE(LOG_NET, "fi_tsend to rank %d: %s, retry %d", peer, fi_strerror((int)-ret), a + 1);
        prov_backoff(a);
        ret = fi_tsend(p->ep, buf, len, desc, dst, tag, x);
    }
    if (ret) {
        prov_mr_release(p, m);
        if (ret == -FI_EAGAIN)
            return FC_AGAIN;
        return prov_post_error(p, "fi_tsend", peer, len, (int)ret);
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
    if (prov_use_rndv(p, x, x->len))
        return prov_rndv_recv(p, peer, tag, buf, len, x);
    if (((p->mr_mode & FI_MR_LOCAL) || prov_is_device(p, buf)) && len > 0) {
        fc_result_t rc = prov_mr_acquire(p, buf, len, &m);
        if (rc != FC_SUCCESS)
            return rc;
        desc = m->desc;
    }
    ssize_t ret = fi_trecv(p->ep, buf, len, desc, p->addrs[peer], tag, 0, x);
    for (int a = 0; prov_transient(ret) && a < p->retry_count; a++) {
        FC_TRACE(LOG_NET, "fi_trecv from rank %d: %s, retry %d", peer, fi_strerror((int)-ret),
                 a + 1);
        prov_backoff(a);
        ret = fi_trecv(p->ep, buf, len, desc, p->addrs[peer], tag, 0, x);
    }
    if (ret) {
        prov_mr_release(p, m);
        if (ret == -FI_EAGAIN)
            return FC_AGAIN;
        return prov_post_error(p, "fi_trecv", peer, len, (int)ret);
    }
    x->tpriv = m;
    FC_TRACE(LOG_NET, "fi_trecv from rank %d: tag %#llx, %zu bytes", peer,
             (unsigned long long)tag, len);
    return FC_SUCCESS;
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
    .progress = prov_progress,
    .wait_prepare = prov_wait_prepare,
    .wait_end = transport_wait_end_none,
    .peer_name = pe_peer_name,
    .mem_alloc = prov_mem_alloc,
    .mem_free = prov_mem_free,
    .local = transport_local_none,
    .idle = transport_always_idle,
};
