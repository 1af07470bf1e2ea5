/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The transport interface: what the schedule engine needs from a fabric.
 *
 * Implemented by prov/ (libfabric tagged messages), wrapped by rails.c and
 * the device transport (src/gpu/gpu_tp.c), and, for the unit tests only, by
 * an in-process loopback (test/unit/transport_loop.c). A transport
 * moves tagged messages between peers (indices of its own peer table) and
 * reports completions by calling xfer->done from its progress function,
 * never from inside send/recv.
 */
#ifndef FC_TRANSPORT_H
#define FC_TRANSPORT_H

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "fabcoll.h"

/* A tag bit the engine never sets: the transport's own messages (the RMA
 * rendezvous's clear-to-send) carry the data message's tag with it. */
#define XFER_TAG_TRANSPORT (1ull << 11)
/* The tag's low bits: the chunk's index within its message (mod 2048), the
 * same at both ends. A transport may use it to spread chunks (rails.c). */
#define XFER_TAG_CHUNK_MASK 0x7ffull

/* Internal result: the transport is out of resources for now; progress and
 * post again. Never returned to users. */
#define FC_AGAIN ((fc_result_t)1000)

/* What an engine blocks on when progress found nothing, filled by
 * wait_prepare: descriptors to poll, or none (then a nap of nap_us, or a
 * mere yield when 0). A transport that wraps others passes it on to them;
 * each one marks in `layers` (its own bit) what its wait_end must undo. */
#define TRANSPORT_WAIT_FDS 4
struct transport_wait {
    struct pollfd fds[TRANSPORT_WAIT_FDS];
    int nfds;
    int nap_us;
    unsigned layers;
};
#define TRANSPORT_LAYER_RAILS 1u
#define TRANSPORT_LAYER_GPU 2u

struct xfer;
/* status FC_SUCCESS with the received/sent length, or an error whose detail
 * the transport has recorded in errmsg of the xfer. */
typedef void (*xfer_done_fn)(struct xfer *x, fc_result_t status, size_t len);

struct xfer {
    void *tctx[8];     /* transport-private, first: libfabric's fi_context2 */
    xfer_done_fn done;
    void *owner;       /* the engine object that posted it */
    uint32_t step, chunk;
    int peer;          /* transport peer index */
    int is_send;       /* 1 send, 0 receive, 2 local step */
    int delivery;      /* a send completes only once delivered (not merely buffered):
                          the last messages before an endpoint closes */
    uint64_t tag;
    size_t len;
    void *buf;
    void *tpriv;       /* transport's own use (e.g. a registration to drop) */
    struct xfer *next; /* owner's free list */
    const char *errmsg; /* set by the transport on error; valid during done() */
    int truncated;      /* set by the transport: the fabric cut this receive short (a
                           longer message; its connection may not survive that) */
};

struct transport;

/* A local step (reduce, copy, scale, reduce all) handed to a transport that
 * runs it asynchronously (on a GPU): dst = a op b, dst = a, dst = a /
 * divisor, dst = a * scalar, or dst = the nvec vectors at a reduced in rank order (rank j's
 * the ((j - first) mod nvec)-th, stride bytes apart; then / nvec for
 * FC_AVG). A step cut into chunks comes as one op per chunk, each pointer
 * moved to the chunk. */
enum local_kind { LOCAL_REDUCE, LOCAL_COPY, LOCAL_SCALE, LOCAL_REDUCE_ALL, LOCAL_PREMUL };
struct local_op {
    int kind;
    void *dst;
    const void *a, *b;
    size_t len; /* bytes */
    fc_datatype_t dt;
    fc_op_t op;
    uint32_t divisor;
    int nvec, first;   /* LOCAL_REDUCE_ALL */
    size_t stride;     /* LOCAL_REDUCE_ALL: a whole vector's bytes */
    const void *scalar; /* LOCAL_PREMUL: dst = a * *scalar (a value of dt) */
    int pmul;           /* LOCAL_REDUCE: 1 a, 2 b is multiplied by *scalar as it is read */
    void *call;        /* the request's context for the transport (sched_env.call) */
};

/* What a transport does beyond moving messages (transport_ops.flags). */
#define TRANSPORT_RUNS_LOCAL 1u /* runs local steps itself (local), asynchronously */

/* Every op is filled in: where one does not apply, the transport names one
 * of the transport_* defaults below, so no caller tests for NULL. */
struct transport_ops {
    const char *name;
    unsigned flags; /* TRANSPORT_* */
    /* Post a tagged send/recv of len bytes to/from peer. FC_AGAIN: retry
     * after progress. Completion arrives through progress(). For a receive,
     * len is what the buffer takes and x->len the length expected (the
     * protocol is chosen from it, as the sender chooses from its len); a
     * transport that wraps another passes both, and x->delivery, on. */
    fc_result_t (*send)(struct transport *t, int peer, uint64_t tag, const void *buf, size_t len,
                        struct xfer *x);
    fc_result_t (*recv)(struct transport *t, int peer, uint64_t tag, void *buf, size_t len,
                        struct xfer *x);
    /* Reads completions and calls x->done for each; *ncomp = how many.
     * A non-success return is a failure of the transport as a whole. */
    fc_result_t (*progress)(struct transport *t, int *ncomp);
    /* Blocking, in two phases so that only the first touches the transport
     * (libfabric's fi_trywait, GPU work lists) and it can run under the
     * lock that serialises progress, while the second (poll or nap) runs
     * without it; transport_block does both. Called right after a progress
     * that found nothing, with w zeroed. Returns 1: progress has work now,
     * do not block; 0: block on what w says (its fds may be polled together
     * with the caller's own). transport_wait_none: nothing to block on
     * (yield). */
    int (*wait_prepare)(struct transport *t, struct transport_wait *w);
    /* After the block (or a prepare that returned 1), under the lock
     * again: undoes what wait_prepare marked in w->layers
     * (transport_wait_end_none: nothing to undo). */
    void (*wait_end)(struct transport *t, struct transport_wait *w);
    /* Describes a peer for error messages ("rank 3 on host n2"). */
    void (*peer_name)(struct transport *t, int peer, char *buf, size_t len);
    /* Memory for scratch and bounce buffers, which the transport can use
     * without per-call registration (transport_mem_host_*: plain host
     * memory). NULL from mem_alloc: the engine takes host memory. */
    void *(*mem_alloc)(struct transport *t, size_t len);
    void (*mem_free)(struct transport *t, void *p, size_t len);
    /* With TRANSPORT_RUNS_LOCAL: runs a local step asynchronously;
     * completion through x->done from progress (len of the op). Without,
     * the engine runs local steps itself, on the host, synchronously, and
     * never calls it (transport_local_none). */
    fc_result_t (*local)(struct transport *t, const struct local_op *op, struct xfer *x);
    /* 0 while work already reported done still runs (device copies and
     * kernels completed in stream order); a collective ends only when its
     * transport is idle (transport_always_idle: nothing runs on). */
    int (*idle)(struct transport *t);
};

struct transport {
    const struct transport_ops *ops;
};

/* The defaults, for ops that do not apply to a transport (transport.c). */
int transport_wait_none(struct transport *t, struct transport_wait *w);
void transport_wait_end_none(struct transport *t, struct transport_wait *w);
void *transport_mem_host_alloc(struct transport *t, size_t len);
void transport_mem_host_free(struct transport *t, void *p, size_t len);
fc_result_t transport_local_none(struct transport *t, const struct local_op *op,
                                 struct xfer *x);
int transport_always_idle(struct transport *t);
/* Runs a local step on host memory, synchronously, as the engine runs its
 * own: for transports that run local steps and meet one on host buffers. */
void transport_local_host(const struct local_op *lo);

static inline int transport_wait_prepare(struct transport *t, struct transport_wait *w)
{
    return t->ops->wait_prepare(t, w);
}

static inline void transport_wait_end(struct transport *t, struct transport_wait *w)
{
    t->ops->wait_end(t, w);
}

/* The second phase: blocks on what wait_prepare filled in w, for at most
 * timeout_us: on the descriptors, no longer than nap_us where that is set
 * too (a wrapper of transports of which one has a descriptor and another
 * has none: the one wakes it, the nap bounds how late it looks at the
 * other); a nap alone; or a yield. Touches no transport. */
void transport_wait_block(struct transport_wait *w, int timeout_us);

/* Blocks for at most timeout_us or until progress may find work. lock,
 * when not NULL, is held by the caller and serialises t's progress: it is
 * released only around the block itself. */
static inline void transport_block(struct transport *t, int timeout_us, pthread_mutex_t *lock)
{
    struct transport_wait w = {.nfds = 0};
    if (!transport_wait_prepare(t, &w)) {
        if (lock)
            pthread_mutex_unlock(lock);
        transport_wait_block(&w, timeout_us);
        if (lock)
            pthread_mutex_lock(lock);
    }
    transport_wait_end(t, &w);
}

#endif /* FC_TRANSPORT_H */
