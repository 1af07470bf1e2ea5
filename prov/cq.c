/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Completion progress: reading the completion queue and completing each
 * transfer through its callback (first the injects that xfer.c completed
 * locally), error entries turned into fabcoll errors that name the peer,
 * and the wait that sleeps on the CQ's file descriptor when the provider
 * has one.
 *
 * It posts nothing of its own: a write's remote CQ data, and the posts the
 * provider refused for now, go to rndv.c, the only file it calls besides
 * mr.c. Registrations are released here, never taken.
 */
#include <poll.h>
#include <stdio.h>
#include <string.h>

#include "gpu.h"
#include "log.h"
#include "prov_int.h"

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

fc_result_t prov_progress(struct transport *t, int *ncomp)
{
    struct prov_ep *p = ep_of(t);
    int n = 0;
    if (p->rndv_retry)
        prov_rndv_retry(p);
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
                prov_rndv_data_arrived(p, ent[i].data);
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
int prov_wait_prepare(struct transport *t, struct transport_wait *w)
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
