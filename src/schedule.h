/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Schedules: what an algorithm builds and the engine runs.
 *
 * A schedule is a list of steps (SEND to a peer, RECV from a peer, REDUCE
 * dst = a op b, COPY, SCALE for FC_AVG's final division, PREMUL for a
 * pre-scaled sum's first step, NOP) over buffer
 * regions (the user's send and receive buffers, and scratch the engine
 * allocates), with dependencies between steps. coll/ builds schedules with
 * the sched_* builder calls below and never sees a pointer or a fabric.
 *
 * Dependencies come in two kinds:
 *  - full:    the step starts after the predecessor has completed;
 *  - chunked: chunk k of the step starts once the predecessor has completed
 *             the bytes chunk k covers (the same byte range of both steps).
 *             This is how pipelining happens: a chain broadcast's send of
 *             chunk k follows the receive of chunk k, a ring's reduce of
 *             chunk k follows its receive, while later chunks are in flight.
 *             Where either end is empty (or a signal) a chunked dependency
 *             is a full one. Chunks line up by each step's own start, so a
 *             chunked dependency is only right when chunk k of the step
 *             touches no byte beyond chunk k of its predecessor.
 *
 * The engine cuts every step into chunks of chunk_bytes (a multiple of 64,
 * so of every element size), keeps at most `window` chunks of a step in
 * flight, and tags each message with (communicator id, collective sequence
 * number, step tag, chunk) so concurrent operations never match each
 * other's messages. Sender and receiver must give a message the same step
 * tag and the same length.
 */
#ifndef FC_SCHEDULE_H
#define FC_SCHEDULE_H

#include <stddef.h>
#include <stdint.h>

#include "fabcoll.h"
#include "reduce.h"
#include "transport.h"

/* ---- tags -----------------------------------------------------------------
 * 63..48 communicator id | 47..46 kind | 45..28 sequence | 27..12 step tag |
 * 11 reserved for the transport (XFER_TAG_TRANSPORT) | 10..0 chunk (wraps:
 * at most `window` <= 64 chunks of a step are in flight). */
#define TAG_KIND_COLL 0ull
#define TAG_KIND_P2P 1ull
#define TAG_KIND_CTRL 2ull
#define TAG_KIND_SIG 3ull /* a collective's signature exchange (sched_sign), same sequence */
#define TAG_STEP_MAX 0xffffu
#define TAG_SEQ_MASK 0x3ffffull
static inline uint64_t tag_base(uint32_t comm_id, uint64_t kind, uint64_t seq)
{
    return ((uint64_t)(comm_id & 0xffff) << 48) | (kind << 46) | ((seq & TAG_SEQ_MASK) << 28);
}

enum sched_region { R_NONE = 0, R_SEND, R_RECV, R_SCRATCH, R_NREGIONS };
enum sched_value { SV_NONE = 0, SV_SEND_COUNT, SV_RECV_COUNT, SV_SIGNATURE };
enum sched_op {
    SOP_SEND, SOP_RECV, SOP_REDUCE, SOP_COPY, SOP_SCALE, SOP_REDUCE_ALL, SOP_NOP, SOP_PREMUL
};

struct sched_buf {
    uint8_t region;
    size_t off; /* bytes from the region's start */
};
static inline struct sched_buf sbuf(int region, size_t off)
{
    struct sched_buf b = {(uint8_t)region, off};
    return b;
}

struct sched_step {
    uint8_t op;
    uint8_t queued;     /* in the worklist */
    uint8_t complete;
    uint8_t zmsg;       /* SEND/RECV of a zero-byte message (a signal) */
    uint8_t pmul;       /* REDUCE of a pre-scaled sum: 1 operand a, 2 operand b is the
                           input, multiplied by the scalar as it is read */
    uint8_t value;      /* SEND/RECV of the 8-byte `val` held in the step itself; a
                           receive fails the schedule (FC_ERR_INVALID_ARGUMENT) unless
                           the value that arrives equals val: SV_SEND_COUNT, the peer's
                           byte count of a send; SV_RECV_COUNT, of a receive */
    struct sched_buf dst, a, b;
    size_t len;         /* bytes */
    size_t post_len;    /* RECV of one chunk: post this many bytes (>= len), so a
                           longer message is caught as a mismatch rather than
                           truncated by the fabric */
    int peer;           /* communicator rank (SEND/RECV); REDUCE_ALL: the rank whose
                           vector is the first of a */
    uint32_t tag;       /* step tag (SEND/RECV), <= TAG_STEP_MAX */
    uint32_t pred_first, npred, succ_first, nsucc;
    uint32_t nfull_unmet;
    uint64_t val, got;  /* value steps: sent or expected; arrived */
    /* run state */
    uint32_t nchunks, issued, inflight, prefix;
    uint64_t winmask;   /* bit i: chunk prefix+i done (out of order) */
    double prof_t0;     /* profiling: when the step's first chunk was posted */
};

struct sched_edge {
    uint32_t step;   /* the dependent step (pred list) or successor (succ list) */
    uint8_t chunked;
};

struct sched_rawedge {
    uint32_t step, pred; /* step depends on pred */
    uint8_t chunked;
};

struct sched;
/* How the engine reaches its peers and memory; owned by the caller. */
struct sched_env {
    struct transport *tp;
    const int *peer_map;  /* communicator rank -> transport peer; NULL = identity */
    uint64_t tag_base;    /* tag_base(comm id, kind, seq) */
    size_t chunk_bytes;   /* 0: no chunking */
    int window;           /* chunks in flight per step, 1..64 */
    int delivery;         /* sends complete when delivered (see struct xfer) */
    void *call;           /* the request's own context for its transport, passed with
                             every local step (struct local_op); NULL: none */
    /* Profiling (NULL: off): called when a SEND/RECV step's first chunk is
     * posted (begin 1) and when the step completes (begin 0). */
    void (*prof)(void *ctx, int begin, struct sched *s, uint32_t step);
    void *prof_ctx;
};

struct sched {
    /* description (built by coll/) */
    struct sched_step *steps;
    uint32_t nsteps, cap_steps;
    struct sched_rawedge *edges; /* as declared by the builder */
    uint32_t nedges, cap_edges;
    struct sched_edge *preds, *succs; /* CSR, built by sched_start */
    size_t scratch_bytes;
    fc_datatype_t dt;
    fc_op_t op;
    size_t esize;
    int nranks;               /* divisor for SCALE */
    _Alignas(8) unsigned char premul[8]; /* PREMUL's scalar, a value of dt (sched_premul_input) */
    const char *coll_name, *algo_name;
    /* whose call this is, for profiling events (set by the caller) */
    int prof_rank;
    uint32_t prof_comm;
    uint64_t prof_seq;
    /* Writes what a signature (sched_sign) stands for, "allreduce of 4 x
     * float32 (sum)"; NULL: its hexadecimal value. */
    void (*sig_desc)(uint64_t sig, char *buf, size_t len);
    fc_result_t build_err;
    /* binding and run state (the engine's) */
    void *base[R_NREGIONS];
    void *scratch;
    int scratch_from_tp;
    struct sched_env env;
    reduce_fn rfn;
    reduce_scale_fn sfn;
    reduce_premul_fn pfn;
    uint32_t *work;           /* worklist (stack of step indices) */
    uint32_t nwork;
    uint32_t *swork;          /* worklist of SEND steps, served first */
    uint32_t nswork;
    uint32_t ndone;
    uint32_t nstalled;        /* steps that got FC_AGAIN */
    uint32_t *stalled;
    struct xfer *free_xfers;
    struct xfer **xfer_blocks;
    uint32_t nxfer_blocks;
    uint32_t xfers_out;       /* posted, not completed */
    fc_result_t status;       /* first error */
    uint8_t truncated;        /* ... was the fabric's truncation of a receive (a longer
                                 message); any other FC_ERR_INVALID_ARGUMENT is a length
                                 or count mismatch on a message that arrived whole */
    char errmsg[512];
    uint64_t progress_events; /* completions seen (for timeout accounting) */
};

/* ---- building (coll/) --------------------------------------------------- */
void sched_init(struct sched *s, fc_datatype_t dt, fc_op_t op, int nranks);
/* Each returns the step index, or -1 after recording an allocation failure
 * in s->build_err (sched_dep ignores -1, so builders check once at the end). */
int sched_send(struct sched *s, int peer, uint32_t tag, struct sched_buf src, size_t len);
int sched_recv(struct sched *s, int peer, uint32_t tag, struct sched_buf dst, size_t len);
/* A zero-byte message: sent and matched like any other, for barriers and
 * handshakes (a zero-length sched_send sends nothing at all). */
int sched_signal(struct sched *s, int peer, uint32_t tag);
int sched_wait_signal(struct sched *s, int peer, uint32_t tag);
/* An 8-byte value held in the step (what = SV_SEND_COUNT or SV_RECV_COUNT: a
 * byte count of this rank's send or receive), sent to peer; and a receive of
 * the peer's that must equal v, or the schedule fails with
 * FC_ERR_INVALID_ARGUMENT naming both counts (what: the peer's kind). Point to
 * point messages of more than one chunk exchange their counts this way. */
int sched_send_value(struct sched *s, int peer, uint32_t tag, uint64_t v, int what);
int sched_expect_value(struct sched *s, int peer, uint32_t tag, uint64_t v, int what);
/* The call's signature (what this rank believes the call is: collective,
 * count, datatype, op, root), exchanged with every peer of the schedule
 * before any message of more than gate_min bytes goes out: each rank sends
 * sig to each peer it exchanges messages with and to the ranks next to it
 * (rank +- 1; so a disagreement is always seen by two neighbours) on value
 * steps with tags of kind TAG_KIND_SIG, and expects each one's to equal its
 * own; every send longer than gate_min waits for its peer's. Ranks that disagree fail with
 * FC_ERR_INVALID_ARGUMENT naming both signatures (s->sig_desc), before a
 * long message could meet a receive of another length (which libfabric's
 * shm cannot survive). The caller decides whether to sign from what all
 * ranks of an agreeing call share, never from this rank's own steps.
 * Returns FC_SUCCESS or s->build_err. */
fc_result_t sched_sign(struct sched *s, int rank, uint64_t sig, size_t gate_min);
/* The same with a value per pair (the v-collectives, whose counts differ
 * from peer to peer): to[r] is sent to rank r, from[r] expected from it,
 * with every other rank (to or from NULL: sig with the schedule's peers, as
 * sched_sign). */
fc_result_t sched_sign_pairs(struct sched *s, int rank, uint64_t sig, const uint64_t *to,
                             const uint64_t *from, size_t gate_min);
int sched_reduce(struct sched *s, struct sched_buf dst, struct sched_buf a, struct sched_buf b,
                 size_t len);
int sched_copy(struct sched *s, struct sched_buf dst, struct sched_buf src, size_t len);
int sched_scale(struct sched *s, struct sched_buf buf, size_t len); /* buf /= nranks */
/* dst = the nranks vectors of len bytes at vecs reduced in rank order
 * (((v0 op v1) op v2) ...), then divided by nranks for FC_AVG; rank j's
 * vector is the ((j - first) mod nranks)-th. One step where a transport
 * that runs local steps may run the whole reduction at once (a kernel). */
int sched_reduce_all(struct sched *s, struct sched_buf dst, struct sched_buf vecs, int first,
                     size_t len);
int sched_nop(struct sched *s);
/* A pre-scaled sum (fc_op_create_premulsum): once the algorithm is built
 * (reading its input from R_SEND, never in place), the input is multiplied
 * by scalar (esize bytes, a value of dt) before anything else reads it.
 * Where the call is not in place, each COPY out of R_SEND becomes a PREMUL
 * step (the copy scales: no extra pass, chunks pipelined as before), and a
 * REDUCE with one operand in R_SEND scales it as it reads it (pmul). The
 * other readers of R_SEND (sends) read a scaled copy in scratch, made by a
 * PREMUL step per range they read, which they follow chunk by chunk. In
 * place, and where a step reads R_SEND in another way, every reader gets a
 * scaled copy: one PREMUL step first, from `from` (R_SEND, or R_RECV for an
 * in-place call whose input is there) of `bytes` into scratch, their
 * references moved there, and every step without a predecessor made to
 * wait for it (so nothing is written over an in-place input before it is
 * read). Call before sched_sign. Returns FC_SUCCESS or s->build_err. */
fc_result_t sched_premul_input(struct sched *s, int from, size_t bytes, const void *scalar,
                               int in_place);
void sched_dep(struct sched *s, int step, int pred, int chunked);
/* A dependency between sub-ranges of one buffer: step's range starts at
 * byte `at`, pred's at `pat`. Chunked only when at <= pat (chunk k of the
 * step then touches no byte beyond chunk k of pred), else full. */
void sched_dep_at(struct sched *s, int step, size_t at, int pred, size_t pat);
/* Reserves scratch bytes (64-byte aligned); returns the offset. */
size_t sched_scratch(struct sched *s, size_t bytes);
/* A NOP that depends on every step from `from` on, in full: a fence. */
int sched_fence(struct sched *s, int from);

/* ---- running (src/) ------------------------------------------------------ */
/* Binds regions and starts: every step with no predecessor is queued.
 * Allocates scratch (from the transport when it offers memory). */
fc_result_t sched_start(struct sched *s, const struct sched_env *env, void *sendbuf,
                        void *recvbuf);
/* Runs a finished schedule again on other buffers and tags: the run state
 * is reset; the description, the dependency arrays, scratch and transfer
 * descriptors are kept. Only for a schedule that completed without error,
 * with no transfer posted, started before with the same env but tag_base. */
fc_result_t sched_restart(struct sched *s, uint64_t tag_base, void *sendbuf, void *recvbuf);
/* Issues whatever is ready. Returns s->status. Completions arrive via the
 * transport's progress, which the caller drives. */
fc_result_t sched_advance(struct sched *s);
static inline int sched_done(const struct sched *s)
{
    return s->ndone == s->nsteps;
}
/* Records a failure (first one wins). */
void sched_fail(struct sched *s, fc_result_t rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The communicator ranks of the transfers posted and not complete (each
 * once, at most max); returns how many. */
int sched_waiting_for(const struct sched *s, int *peers, int max);
/* Writes "rank 1 (recv step 3), rank 2 (send step 4)" for posted transfers
 * not yet complete, or for steps blocked on them. */
void sched_describe_wait(const struct sched *s, char *buf, size_t len);
/* Calls fn for each transfer step that carries bytes, with the size of its
 * chunks (the bytes posted, for a receive of one chunk), their number
 * under a chunking of `chunk` bytes (0: none) and whether it receives:
 * what a transport that stages transfers can set aside before the
 * schedule starts. `chunk` is rounded as sched_start rounds the
 * environment's (down to a multiple of 64, at least 64). A step whose last
 * chunk is shorter is reported twice: its full chunks, then the last one
 * with its own length. */
void sched_xfer_shapes(const struct sched *s, size_t chunk,
                       void (*fn)(void *arg, size_t len, uint32_t nchunks, int recv),
                       void *arg);
/* Frees everything. Must not be called while transfers are posted
 * (xfers_out > 0) unless the transport is already closed. */
void sched_release(struct sched *s);

#endif /* FC_SCHEDULE_H */
