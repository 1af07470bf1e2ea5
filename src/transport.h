/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The transport interface: what the schedule engine needs from a fabric.
 *
 * Two implementations: prov/ (libfabric tagged messages) and the in-process
 * loopback used by unit tests and fc_sim (src/transport_loop.c). A transport
 * moves tagged messages between peers (indices of its own peer table) and
 * reports completions by calling xfer->done from its progress function,
 * never from inside send/recv.
 */
#ifndef FC_TRANSPORT_H
#define FC_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

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

/* wait_fd's answer when the transport has no descriptor to block on. */
#define TRANSPORT_NO_WAIT_FD (-2)

/* poll()'s timeout for a wait of timeout_us: rounded up, at least 1 ms (0
 * would not block at all). */
static inline int transport_poll_ms(int timeout_us)
{
    int ms = (timeout_us + 999) / 1000;
    return ms > 0 ? ms : 1;
}

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
};

struct transport;

/* A local step (reduce, copy, scale) handed to a transport that runs it
 * asynchronously (on a GPU): dst = a op b, dst = a, or dst = a / divisor. */
enum local_kind { LOCAL_REDUCE, LOCAL_COPY, LOCAL_SCALE };
struct local_op {
    int kind;
    void *dst;
    const void *a, *b;
    size_t len; /* bytes */
    fc_datatype_t dt;
    fc_op_t op;
    uint32_t divisor;
};

struct transport_ops {
    const char *name;
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
    /* Blocks for at most timeout_us or until a completion may be ready. */
    void (*wait)(struct transport *t, int timeout_us);
    /* Optional: a file descriptor that becomes readable when progress may
     * find work, for a caller that blocks on it together with others
     * (poll); -1: call progress now instead; TRANSPORT_NO_WAIT_FD: there
     * is none (use wait). Ask right before blocking, after a progress that
     * found nothing. NULL: none. */
    int (*wait_fd)(struct transport *t);
    /* Describes a peer for error messages ("rank 3 on host n2"). */
    void (*peer_name)(struct transport *t, int peer, char *buf, size_t len);
    /* Memory the transport can use without per-call registration (scratch,
     * bounce buffers); may be NULL, then the engine uses malloc/free. */
    void *(*mem_alloc)(struct transport *t, size_t len);
    void (*mem_free)(struct transport *t, void *p, size_t len);
    /* Optional: runs a local step asynchronously; completion through
     * x->done from progress (len of the op). NULL: the engine runs local
     * steps itself, on the host, synchronously. */
    fc_result_t (*local)(struct transport *t, const struct local_op *op, struct xfer *x);
    /* Optional: 0 while work already reported done still runs (device
     * copies and kernels completed in stream order); a collective ends only
     * when its transport is idle. NULL: always idle. */
    int (*idle)(struct transport *t);
};

struct transport {
    const struct transport_ops *ops;
};

#endif /* FC_TRANSPORT_H */
