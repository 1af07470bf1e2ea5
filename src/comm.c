/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Communicators: creation, split and destruction, and the family's shared
 * state (struct comm_shared: the endpoints, rails and transport that a
 * top-level communicator and every communicator split from it share).
 *
 * comm_create runs the steps of comm_setup.c in order and undoes them in
 * reverse; comm_split makes a communicator over the parent's endpoint (no
 * new connections); comm_destroy finishes or drops what a communicator
 * still runs and releases the family when its last member goes.
 *
 * Requests and their progress are request.c's, algorithm choice and
 * schedule building collective.c's; device memory is reached only through
 * the family's hooks (struct comm_device: comm_host_only here, the device
 * branch's in src/gpu/).
 */
#define _GNU_SOURCE
#include "comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "boot.h"
#include "comm_setup.h"
#include "log.h"
#include "profile.h"
#include "prov.h"
#include "paths.h"
#include "rails.h"

/* ---- a family without device memory ------------------------------------------ */

static fc_result_t host_route(struct fc_comm *c, struct comm_call *call, const void *sendbuf,
                              const void *recvbuf, struct fc_request *r)
{
    (void)c, (void)call, (void)sendbuf, (void)recvbuf, (void)r;
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

static void host_current_gpu(char *buf, size_t len)
{
    if (len)
        buf[0] = '\0';
}

const struct comm_device comm_host_only = {
    .route = host_route,
    .order_after_caller = host_order,
    .stream_start_ready = host_stream_start,
    .release = host_release,
    .present = host_present,
    .current_gpu = host_current_gpu,
};

/* ---- the family's shared state ---------------------------------------------- */

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

static void unpin_locked(struct comm_shared *sh, struct fc_memhandle *h);

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
    prov_stop(sh->local_ep);
    for (int i = 1; i < sh->nrails; i++)
        prov_stop(sh->rail_ep[i]);
    while (sh->zombies) {
        struct fc_request *z = sh->zombies;
        sh->zombies = z->next;
        comm_request_free(z); /* its scratch goes back to the transport */
    }
    while (sh->pins) /* handles not deregistered: inert from now on */
        unpin_locked(sh, sh->pins);
    sh->dev->release(sh);
    rails_destroy(sh->rails);
    paths_destroy(sh->paths);
    for (int i = 1; i < sh->nrails; i++)
        prov_close(sh->rail_ep[i]);
    boot_collector_stop(sh->collector);
    prov_close(sh->local_ep);
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
    free(c->node);
    free(c->premul);
    free(c->p2p_sent);
    free(c->p2p_recvd);
    free(c->hosts);
    free(c->host_pid);
    free(c->pidns);
    free(c);
}

/* ---- creation -------------------------------------------------------------- */

static struct fc_comm *comm_alloc(const struct boot *b, const cfg_t *cfg)
{
    struct fc_comm *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    c->cfg = *cfg;
    c->rank = b->rank;
    c->size = b->nranks;
    c->gpu_device = -1;
    return c;
}

fc_result_t comm_create(struct boot *b, const cfg_t *cfg, const struct comm_device *dev,
                        struct fc_comm **out)
{
    struct comm_setup st;
    struct comm_shared *sh = NULL;
    fc_result_t rc;
    log_set_rank(b->rank);
    prof_setup(cfg, b->rank, b->nranks);
    struct fc_comm *c = comm_alloc(b, cfg);
    if (!c) {
        rc = FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
        goto close_boot;
    }
    rc = comm_setup_init(&st, b, c);
    if (rc != FC_SUCCESS)
        goto free_setup;
    rc = comm_setup_gather(&st, c, dev); /* 1. who is where, with which providers */
    if (rc != FC_SUCCESS)
        goto free_setup;
    rc = comm_setup_agree(&st); /* 2. the provider all ranks agree on */
    if (rc != FC_SUCCESS)
        goto free_setup;
    rc = shared_new(dev, &sh);
    if (rc != FC_SUCCESS)
        goto free_setup;
    rc = comm_setup_endpoints(&st, c, sh); /* 3. endpoints, addresses, rails */
    if (rc != FC_SUCCESS)
        goto release_shared;
    c->sh = sh;
    rc = comm_setup_comm(&st, c); /* 4. the communicator itself, the progress thread */
    if (rc != FC_SUCCESS)
        goto release_shared;
    rc = comm_setup_check(&st, c); /* 5. prove the fabric works before returning */
    if (rc != FC_SUCCESS)
        goto release_shared;
    comm_setup_free(&st);
    b->ops->close(b);
    *out = c;
    return FC_SUCCESS;
release_shared:
    shared_release(sh);
free_setup:
    comm_setup_free(&st);
    comm_free(c);
close_boot:
    b->ops->close(b);
    return rc;
}

/* ---- destruction ------------------------------------------------------------ */

fc_result_t comm_destroy(struct fc_comm *c, int abort)
{
    prof_flush();
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
            fc_result_t b = comm_fabric_check(c, 1);
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
                comm_finish(r, FC_ERR_SYSTEM); /* not active: only its stream is released */
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
                comm_finish(r, FC_ERR_SYSTEM); /* unlinks it */
            } else if (r->comm == c) {
                /* failed, so that its transfers' late completions only drain
                 * it: the communicator (its peer map) is freed below */
                sched_fail(&r->s, FC_ERR_SYSTEM, "the communicator was aborted");
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
    for (struct fc_request *r; (r = comm_rcache_pop(c));)
        comm_request_free(r);
    pthread_mutex_unlock(&sh->lock);
    shared_release(sh);
    comm_free(c);
    return rc;
}

/* ---- children: split, shrink --------------------------------------------------- */

fc_result_t comm_child(struct fc_comm *p, const int *members, int nm, uint32_t id,
                       struct fc_comm **out)
{
    fc_result_t rc = FC_SUCCESS;
    struct fc_comm *c = calloc(1, sizeof(*c));
    if (!c)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    c->size = nm;
    c->rank = -1;
    c->peers = calloc((size_t)nm, sizeof(int));
    c->p2p_sent = calloc((size_t)nm, sizeof(uint64_t));
    c->p2p_recvd = calloc((size_t)nm, sizeof(uint64_t));
    c->hosts = calloc((size_t)nm, sizeof(*c->hosts));
    c->host_pid = calloc((size_t)nm, sizeof(int));
    c->pidns = calloc((size_t)nm, sizeof(uint64_t));
    c->node = calloc((size_t)nm, sizeof(int));
    if (!c->peers || !c->p2p_sent || !c->p2p_recvd || !c->hosts || !c->host_pid || !c->pidns ||
        !c->node) {
        rc = FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
        goto fail;
    }
    if (id > 0xffff) {
        rc = FC_ERR(FC_ERR_UNSUPPORTED, "more than 65535 communicators over one endpoint");
        goto fail;
    }
    int nnodes = 0, local_rank = 0, local_size = 0;
    for (int i = 0; i < nm; i++) {
        int q = members[i];
        if (q == p->rank)
            c->rank = i;
        c->peers[i] = p->peers[q];
        memcpy(c->hosts[i], p->hosts[q], sizeof(c->hosts[i]));
        c->host_pid[i] = p->host_pid[q];
        c->pidns[i] = p->pidns[q];
    }
    if (c->rank < 0) {
        rc = FC_ERR(FC_ERR_INTERNAL, "this rank is not a member of its new communicator");
        goto fail;
    }
    /* the parent's nodes, numbered again in order of first appearance */
    for (int i = 0; i < nm; i++) {
        int pn = p->node[members[i]], j = 0;
        while (j < i && p->node[members[j]] != pn)
            j++;
        c->node[i] = j < i ? c->node[j] : nnodes++;
    }
    for (int i = 0; i < nm; i++)
        if (c->node[i] == c->node[c->rank]) {
            local_size++;
            if (i < c->rank)
                local_rank++;
        }
    c->nnodes = nnodes;
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
    *out = c;
    return FC_SUCCESS;
fail:
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

fc_result_t comm_mem_pin(struct fc_comm *c, void *buf, size_t len, struct fc_memhandle **out)
{
    struct fc_memhandle *h = calloc(1, sizeof(*h));
    if (!h)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory for a memory handle");
    h->sh = c->sh;
    h->buf = buf;
    h->len = len;
    struct prov_ep *eps[COMM_PIN_EPS] = {c->sh->ep, c->sh->local_ep};
    fc_result_t rc = FC_SUCCESS;
    pthread_mutex_lock(&c->sh->lock);
    for (int i = 0; i < COMM_PIN_EPS && rc == FC_SUCCESS; i++)
        if (eps[i] && (rc = prov_mr_pin(eps[i], buf, len, &h->mr[i])) == FC_SUCCESS)
            h->ep[i] = eps[i];
    h->next = c->sh->pins;
    c->sh->pins = h;
    pthread_mutex_unlock(&c->sh->lock);
    if (rc != FC_SUCCESS) {
        comm_mem_unpin(h);
        return rc;
    }
    *out = h;
    return FC_SUCCESS;
}

/* Under the family's lock: the registrations go (now, or with their last
 * transfer) and the handle leaves the family's list. */
static void unpin_locked(struct comm_shared *sh, struct fc_memhandle *h)
{
    for (int i = 0; i < COMM_PIN_EPS; i++)
        if (h->ep[i] && h->mr[i])
            prov_mr_unpin(h->ep[i], h->mr[i]);
    for (struct fc_memhandle **pp = &sh->pins; *pp; pp = &(*pp)->next)
        if (*pp == h) {
            *pp = h->next;
            break;
        }
    h->sh = NULL;
}

void comm_mem_unpin(struct fc_memhandle *h)
{
    struct comm_shared *sh = h->sh;
    if (sh) { /* else the family was destroyed first: its endpoints took all */
        pthread_mutex_lock(&sh->lock);
        unpin_locked(sh, h);
        pthread_mutex_unlock(&sh->lock);
    }
    free(h);
}

void comm_query_peer(const struct fc_comm *c, int peer, fc_comm_attr_t *attr)
{
    *attr = c->attr;
    const struct comm_shared *sh = c->sh;
    /* prov_describe writes only the path's fields (and nrails 1: rails
     * stripe the network's endpoint only); the node's stay c's */
    if (sh->paths && sh->local_ep && paths_is_local(sh->paths, c->peers[peer]))
        prov_describe(sh->local_ep, attr);
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
    int *members = calloc((size_t)n, sizeof(int));
    struct fc_comm *c = NULL;
    fc_result_t rc = FC_SUCCESS;
    if (!all || !m || !members) {
        rc = FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
        goto out;
    }
    struct coll_args a = {.kind = COLL_ALLGATHER, .rank = p->rank, .nranks = n,
                          .count = sizeof(mine), .dt = FC_UINT8, .op = FC_SUM, .esize = 1};
    struct fc_request *r = NULL;
    rc = comm_collective(p, &a, COMM_BLOCKING, &mine, all, &r);
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
    for (int i = 0; i < nm; i++)
        members[i] = m[i].parent_rank;
    rc = comm_child(p, members, nm, id, &c);
    if (rc != FC_SUCCESS)
        goto out;
    FC_INFO(LOG_INIT, "split: color %d key %d -> rank %d of %d (communicator id %u)", color, key,
            c->rank, nm, id);
    *out = c;
    c = NULL;
out:
    comm_free(c);
    free(all);
    free(m);
    free(members);
    return rc;
}
