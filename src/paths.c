/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Per-peer paths: one transport over two endpoints of different providers.
 *
 * A job of several nodes reaches the ranks of its own node fastest through
 * shared memory and the others only through the network, and Open MPI
 * (a transport per peer) and NCCL do the same. The communicator's setup
 * (comm_setup.c) opens both endpoints, connects the local one to the ranks
 * of this node only, and wraps them here: a message goes through the
 * transport its peer's node says, both endpoints' completions are reported
 * by one progress, and a waiting engine blocks on both. Scratch memory is
 * the network transport's (registered where its provider wants that).
 *
 * This file owns the per-peer choice and nothing else: it never looks at a
 * message, opens nothing and knows no provider.
 */
#include "paths.h"

#include <stdlib.h>
#include <string.h>

#include "log.h"

struct paths {
    struct transport base;
    struct transport *net, *local;
    int npeers;
    unsigned char *local_peer;
};

static struct transport *path_of(struct paths *P, int peer)
{
    return paths_is_local(P, peer) ? P->local : P->net;
}

static fc_result_t pt_send(struct transport *t, int peer, uint64_t tag, const void *buf,
                           size_t len, struct xfer *x)
{
    struct transport *s = path_of((struct paths *)t, peer);
    return s->ops->send(s, peer, tag, buf, len, x);
}

static fc_result_t pt_recv(struct transport *t, int peer, uint64_t tag, void *buf, size_t len,
                           struct xfer *x)
{
    struct transport *s = path_of((struct paths *)t, peer);
    return s->ops->recv(s, peer, tag, buf, len, x);
}

static fc_result_t pt_progress(struct transport *t, int *ncomp)
{
    struct paths *P = (struct paths *)t;
    int a = 0, b = 0;
    fc_result_t rc = P->local->ops->progress(P->local, &a);
    if (rc == FC_SUCCESS)
        rc = P->net->ops->progress(P->net, &b);
    *ncomp = a + b;
    return rc;
}

/* Both endpoints' descriptors, when both have one. Where one has none (it
 * asks for a nap or a yield: shm), the other's descriptor still wakes the
 * wait at once, and the nap bounds how late the first is looked at; where
 * neither has one, the shorter nap. A yield (nap 0) wins over all. */
static int pt_wait_prepare(struct transport *t, struct transport_wait *w)
{
    struct paths *P = (struct paths *)t;
    int fds = w->nfds;
    if (transport_wait_prepare(P->net, w))
        return 1;
    int net_fd = w->nfds > fds, nap = w->nap_us;
    w->nap_us = 0;
    fds = w->nfds;
    if (transport_wait_prepare(P->local, w))
        return 1;
    int local_fd = w->nfds > fds, ln = w->nap_us;
    if (net_fd && local_fd)
        w->nap_us = 0;
    else if (net_fd || local_fd)
        w->nap_us = net_fd ? ln : nap; /* the descriptor-less one's nap */
    else
        w->nap_us = nap < ln ? nap : ln;
    if ((!net_fd || !local_fd) && w->nap_us == 0)
        w->nfds = 0; /* one asks for a yield */
    return 0;
}

static void pt_wait_end(struct transport *t, struct transport_wait *w)
{
    struct paths *P = (struct paths *)t;
    transport_wait_end(P->net, w);
    transport_wait_end(P->local, w);
}

static void pt_peer_name(struct transport *t, int peer, char *buf, size_t len)
{
    struct transport *s = path_of((struct paths *)t, peer);
    s->ops->peer_name(s, peer, buf, len);
}

static void *pt_mem_alloc(struct transport *t, size_t len)
{
    struct paths *P = (struct paths *)t;
    return P->net->ops->mem_alloc(P->net, len);
}

static void pt_mem_free(struct transport *t, void *p, size_t len)
{
    struct paths *P = (struct paths *)t;
    P->net->ops->mem_free(P->net, p, len);
}

static const struct transport_ops paths_ops = {
    .name = "paths",
    .send = pt_send,
    .recv = pt_recv,
    .progress = pt_progress,
    .wait_prepare = pt_wait_prepare,
    .wait_end = pt_wait_end,
    .peer_name = pt_peer_name,
    .mem_alloc = pt_mem_alloc,
    .mem_free = pt_mem_free,
    .local = transport_local_none,
    .idle = transport_always_idle,
};

fc_result_t paths_create(struct transport *net, struct transport *local, int npeers,
                         const unsigned char *local_peer, struct paths **out)
{
    struct paths *P = calloc(1, sizeof(*P));
    if (P)
        P->local_peer = malloc((size_t)npeers);
    if (!P || !P->local_peer) {
        free(P);
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory for %d peers' paths", npeers);
    }
    P->base.ops = &paths_ops;
    P->net = net;
    P->local = local;
    P->npeers = npeers;
    memcpy(P->local_peer, local_peer, (size_t)npeers);
    *out = P;
    return FC_SUCCESS;
}

struct transport *paths_transport(struct paths *p)
{
    return &p->base;
}

int paths_is_local(const struct paths *p, int peer)
{
    return peer >= 0 && peer < p->npeers && p->local_peer[peer];
}

void paths_destroy(struct paths *p)
{
    if (!p)
        return;
    free(p->local_peer);
    free(p);
}
