/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Communicators and requests.
 *
 * A communicator is a rank numbering over a shared fabric context: the
 * top-level communicator opens an endpoint; fc_comm_split children reuse
 * it (their own communicator id keeps their messages apart). Everything
 * that touches the transport or a running schedule holds the shared
 * context's lock, so an optional progress thread can drive nonblocking
 * operations while the application computes.
 */
#ifndef FC_COMM_H
#define FC_COMM_H

#include <pthread.h>
#include <stdint.h>

#include "coll.h"
#include "config.h"
#include "fabcoll.h"
#include "sched.h"
#include "select.h"

struct prov_ep;
struct fc_request;
struct boot;

struct comm_shared {
    int refs;
    pthread_mutex_t lock;
    struct prov_ep *ep;        /* NULL for an in-process test transport */
    struct transport *tp;
    int nworld;                /* transport peers */
    uint32_t next_comm_id;     /* ids this process has not used yet */
    struct fc_request *active; /* running requests of every communicator here */
    struct fc_request *zombies; /* failed requests with transfers still posted */
    fc_result_t failed;        /* the transport itself failed */
    char failmsg[512];
    /* progress thread */
    pthread_t thread;
    pthread_cond_t cond;
    int thread_on, thread_stop;
};

struct fc_comm {
    struct comm_shared *sh;
    int rank, size;
    int *peers;                /* comm rank -> transport peer */
    uint32_t id;
    uint64_t seq;              /* next collective sequence number */
    uint64_t *p2p_sent, *p2p_recvd; /* per peer message counters */
    cfg_t cfg;
    struct coll_tuning tuning;
    size_t chunk;
    int window;
    size_t eager_max;
    fc_comm_attr_t attr;
    char (*hosts)[64];         /* per comm rank, for messages */
    int *host_pid;
    fc_result_t broken;        /* set after a failure that leaves it unusable */
    char brokenmsg[512];
};

struct fc_request {
    struct fc_comm *comm;
    struct sched s;
    struct fc_request *next;
    int done;
    fc_result_t result;
    char desc[160];            /* "allreduce(ring, 4096 x float32)" for messages */
    double last_change;        /* monotonic seconds of the last progress */
    uint64_t last_events;
    uint32_t last_ndone;
    int p2p;                   /* failures of p2p mismatches leave the comm usable */
};

double comm_now(void);

/* Creates a top-level communicator over a bootstrap (consumed). */
fc_result_t comm_create(struct boot *b, const cfg_t *cfg, struct fc_comm **out);
/* fc_comm_split. */
fc_result_t comm_split(struct fc_comm *c, int color, int key, struct fc_comm **out);
fc_result_t comm_destroy(struct fc_comm *c, int abort);

/* A new request of c whose schedule (r->s) the caller then builds. */
struct fc_request *comm_request_new(struct fc_comm *c, fc_datatype_t dt, fc_op_t op);
/* Starts r's schedule (r is consumed on failure). tagbase: tag_base(...). */
fc_result_t comm_start(struct fc_request *r, void *sendbuf, void *recvbuf, uint64_t tagbase,
                       const char *desc, int p2p);
/* Runs the progress engine once for every running request of c's context. */
void comm_progress_locked(struct comm_shared *sh);
/* Waits (bounded by FC_TIMEOUT) and frees; returns the request's result. */
fc_result_t comm_wait(struct fc_request *r);
/* Nonblocking check; *done = 1 and freed when finished. */
fc_result_t comm_test(struct fc_request *r, int *done);

/* Builds and starts a collective (the public calls end here). */
fc_result_t comm_collective(struct fc_comm *c, const struct coll_args *a, const void *sendbuf,
                            void *recvbuf, struct fc_request **out);

#endif /* FC_COMM_H */
