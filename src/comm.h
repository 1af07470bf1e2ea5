/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Communicators and requests: the layer between the public API (api.c)
 * and the schedules (select.c, coll/, sched.c). comm.c creates, splits and
 * destroys communicators (with the steps of comm_setup.c), shrink.c makes
 * the survivors' communicator after a failure, collective.c
 * turns a call into a started request (with the cache of rcache.c), and
 * request.c runs requests to completion.
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
#include "schedule.h"
#include "select.h"

struct prov_ep;
struct fc_request;
struct boot;
struct gpu_tp;
struct gpu_event;
struct gpu_stream_path;
struct fused;
struct rails;
struct paths;
struct comm_shared;
struct boot_collector;

/* ---- the device branch, as the core sees it ----------------------------------
 * Device memory lives beside the core (src/gpu/), which never includes it
 * nor calls into it by name. A family gets the branch's hooks at creation
 * from the layer above (api.c hands gpu_device_hooks to comm_create); a
 * caller without device memory gives comm_host_only, whose hooks do
 * nothing. No hook is NULL. */
/* How a call reaches the memory route: the collective and its algorithm
 * (a NULL: point to point), and how it was called. */
enum comm_mode { COMM_BLOCKING, COMM_NONBLOCKING, COMM_ON_STREAM };
struct comm_call {
    const struct coll_args *a;
    const struct coll_algo *algo; /* chosen for a; the route may put another here */
    enum comm_mode mode;
    void *stream;                 /* COMM_ON_STREAM: the caller's (NULL: the default) */
};

struct comm_device {
    /* r's transport for these buffers: r->tp left NULL for host memory,
     * the device transport where either buffer is on a GPU. The route
     * may run a collective its own way: another algorithm in call->algo
     * (built instead), a transport of its own in r->tp with its context
     * in r->tp_call, and r->on_end (the fused small allreduce: gather's
     * messages around one kernel). */
    fc_result_t (*route)(struct fc_comm *c, struct comm_call *call, const void *sendbuf,
                         const void *recvbuf, struct fc_request *r);
    /* A blocking or nonblocking request routed to device memory starts
     * after the caller's work on the legacy default stream. */
    fc_result_t (*order_after_caller)(struct fc_comm *c, struct fc_request *r);
    /* Progress (lock held): starts the stream-ordered requests whose
     * stream has reached them. */
    void (*stream_start_ready)(struct comm_shared *sh);
    /* The family's device state, at its end (the progress thread and the
     * endpoints stopped). */
    void (*release)(struct comm_shared *sh);
    /* A GPU is here (device tuning, FC_TUNE_MEMORY=auto). */
    int (*present)(void);
    /* The PCI bus id of the GPU whose context is current in the calling
     * thread, "" where none is: the rank's NIC is the one nearest it. */
    void (*current_gpu)(char *buf, size_t len);
};
extern const struct comm_device comm_host_only;

#define COMM_MAX_RAILS 8
/* completion-queue polls before a waiting rank yields (FC_SPIN=0, auto,
 * where each of the node's ranks has a CPU of its own) */
#define COMM_SPIN_DEFAULT 2000

struct comm_shared {
    int refs;
    const struct comm_device *dev; /* the device branch's hooks */
    pthread_mutex_t lock;
    /* callers' stream-ordered launches, in order, without holding lock (a
     * CUDA launch may wait for the GPU, whose kernels may wait for the
     * progress thread, which needs lock); the progress thread never takes it */
    pthread_mutex_t launch_lock;
    struct prov_ep *ep;        /* NULL for an in-process test transport */
    struct prov_ep *rail_ep[COMM_MAX_RAILS]; /* rails 1..nrails-1 (rail 0 is ep) */
    int nrails;
    struct rails *rails;       /* over ep and rail_ep when nrails > 1 */
    struct prov_ep *local_ep;  /* the node's own provider (shm) for ranks of this node,
                                  when a job of several nodes has one (paths) */
    struct paths *paths;       /* over tp (the network's) and local_ep */
    struct transport *tp;
    struct gpu_tp *gpu;        /* device-memory transport over tp, made on first use */
    struct fused *fused;       /* the fused small allreduce's transport (gpu/fused.c) */
    struct transport *ptp;     /* what progress drives: the outermost of tp, gpu's
                                  and fused's (each wraps the one before) */
    int nworld;                /* transport peers */
    uint32_t next_comm_id;     /* ids this process has not used yet */
    struct fc_request *active; /* running requests of every communicator here */
    struct fc_memhandle *pins; /* fc_mem_register's live handles */
    struct fc_request *zombies; /* failed requests with transfers still posted */
    fc_result_t failed;        /* the transport itself failed */
    /* the hang report (hang.c): where this process sends its state when a
     * collective times out (report_port 0: nowhere), and the collector
     * itself in the top-level rank 0's process */
    struct boot_collector *collector;
    char report_ip[48];
    int report_port;
    uint8_t report_token[16];
    char failmsg[512];
    /* stream-ordered operations, waiting for their stream's earlier work */
    struct fc_request *stream_q, *stream_q_tail;
    int stream_active;         /* stream-ordered requests are running */
    unsigned stream_gen;       /* bumped when one is queued, started or finished */
    /* progress thread */
    pthread_t thread;
    pthread_cond_t cond;
    int thread_on, thread_stop;
};

#define COMM_RCACHE 4
#define COMM_RCACHE_MAX_BYTES (256u << 10)

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
    int *node;                 /* per comm rank: its node (0 .. nnodes - 1, FC_NODE) */
    int nnodes;
    int *host_pid;
    uint64_t *pidns;           /* per comm rank: its process id namespace (shrink.c) */
    int oversubscribed;        /* more ranks on this node than CPUs for them all */
    double oversub;            /* ranks per CPU on the job's most crowded node (0: none) */
    fc_result_t broken;        /* set after a failure that leaves it unusable */
    unsigned shrinks;          /* fc_comm_shrink calls on it (each its own tags) */
    char brokenmsg[512];
    int gpu_device;            /* -1 until a device collective */
    /* finished small host-memory collectives, kept to run again when the
     * same call comes back (sched_restart): no schedule to build, nothing
     * to allocate. Family lock. */
    struct fc_request *rcache[COMM_RCACHE];
    int nrcache;
    /* pre-scaled sums made on it (fc_op_create_premulsum): op value
     * COMM_PREMUL_OP0 + i is premul[i]; family lock */
    struct comm_premul *premul;
    int npremul;
};

/* fc_mem_register: the registration of one buffer on each endpoint of the
 * family that registers transfers (the network's, the node's); rails
 * beyond the first register at first use. */
#define COMM_PIN_EPS 2
struct fc_memhandle {
    struct comm_shared *sh;    /* NULL once the family is gone (the handle is inert) */
    struct fc_memhandle *next; /* the family's live handles (sh->pins), under its lock */
    void *buf;
    size_t len;
    struct prov_ep *ep[COMM_PIN_EPS];
    struct prov_mr *mr[COMM_PIN_EPS];
};
fc_result_t comm_mem_pin(struct fc_comm *c, void *buf, size_t len, struct fc_memhandle **out);
void comm_mem_unpin(struct fc_memhandle *h);

#define COMM_PREMUL_OP0 64
#define COMM_PREMUL_MAX 65536
struct comm_premul {
    int used;
    fc_datatype_t dt;
    unsigned char scalar[8];
};

struct fc_request {
    struct fc_comm *comm;
    struct sched s;
    struct fc_request *next;
    int done;
    fc_result_t result;
    char desc[160];            /* "allreduce #7 (ring, 4096 x float32)" for messages;
                                  collectives format it when first needed
                                  (comm_request_desc), not on every call */
    uint64_t seq;              /* a collective's sequence number */
    struct coll_args key;      /* what was built: for messages and reuse (rcache) */
    const struct coll_algo *algo; /* NULL: not a collective's schedule */
    int restart;               /* the schedule ran before: sched_restart */
    double prof_t0;            /* profiling: when it started (0: not reported) */
    double last_change;        /* monotonic seconds of the last progress */
    uint64_t last_events;
    uint32_t last_ndone;
    int p2p;                   /* failures of p2p mismatches leave the comm usable */
    int delivery;              /* sends complete when delivered */
    struct transport *tp;      /* NULL: the family's */
    /* a request nobody waits for (stream-ordered) ends here, lock held:
     * the device branch releases its stream and frees it; NULL: the
     * waiter (comm_wait, comm_test) frees it */
    void (*on_finish)(struct fc_request *r);
    /* the route's end of a request it gave a transport of its own: called
     * once, lock held, when r finishes (r->result) or is freed without
     * having finished (r->done 0) */
    void (*on_end)(struct fc_request *r);
    void *tp_call;             /* that transport's context for r (sched_env.call) */
    /* stream-ordered operations (fc_*_stream) */
    int stream_ordered;        /* a *_stream call's (stream may be NULL: the default) */
    void *stream;              /* the caller's CUDA stream */
    struct gpu_event *ready;   /* recorded on it: the work before us is done */
    const struct gpu_stream_path *spath; /* how it meets its stream (gpu/queue.h) */
    struct gpu_tp *lane;       /* its GPU work runs in our kernel on the stream (gpu_tp_lane) */
    uint32_t launch;           /* that kernel's launch number */
    double queued_at;          /* when first seen waiting for its stream (0: not yet) */
    int wait_noted;            /* that wait was logged */
    uint64_t tagbase;
    void *sendbuf, *recvbuf;
    void *owned;               /* memory its schedule reads or writes, freed with it (a
                                  request parked with transfers posted outlives its caller) */
};

/* ---- comm.c: communicators --------------------------------------------------- */

/* Creates a top-level communicator over a bootstrap (consumed); dev: the
 * device branch's hooks (comm_host_only: none). */
fc_result_t comm_create(struct boot *b, const cfg_t *cfg, const struct comm_device *dev,
                        struct fc_comm **out);
/* fc_comm_split. */
fc_result_t comm_split(struct fc_comm *c, int color, int key, struct fc_comm **out);
/* fc_comm_query_peer: c's attributes with the provider, fabric, domain,
 * tier and hmem of the endpoint that carries c's messages to comm rank
 * peer (the node's own, shm, for a rank of this node under per-peer paths;
 * the network's otherwise). peer must be a rank of c. */
void comm_query_peer(const struct fc_comm *c, int peer, fc_comm_attr_t *attr);
/* A communicator of p's ranks members[0..nm-1] (in that order, p's rank
 * among them) over p's endpoint, with communicator id id; local. */
fc_result_t comm_child(struct fc_comm *p, const int *members, int nm, uint32_t id,
                       struct fc_comm **out);

/* ---- hang.c: the job-wide view of a timed-out collective ------------------------- */

/* After r (a collective, desc: its description) timed out: this rank's
 * state goes to the collector over TCP; in the collector's process, the
 * table of every rank's state and the ranks the job waits on is logged
 * (after waiting up to half FC_TIMEOUT, at most 10 s, for the others'
 * reports). No lock held. Called by request.c; calls nothing of it. */
void comm_hang_report(struct fc_request *r, const char *desc);

/* ---- shrink.c: the survivors of a failure ------------------------------------ */

/* fc_comm_shrink: the ranks of c still alive agree on who they are
 * (messages of kind TAG_KIND_CTRL over c's endpoint, bounded by
 * FC_TIMEOUT) and get a communicator of them in their old order. */
fc_result_t comm_shrink(struct fc_comm *c, struct fc_comm **out);
fc_result_t comm_destroy(struct fc_comm *c, int abort);

/* ---- comm_setup.c: what creation derives ------------------------------------------ */

/* The fused device allreduce's range: n vectors of at most this many bytes
 * (gpu/fused.c), which device tuning (FC_TUNE_MEMORY) gives to gather. */
#define COMM_FUSED_MAX ((size_t)32 << 10)

/* The tuner's cost parameters for a provider (its table's alpha, beta,
 * gamma, handshake and pipeline chunk; oversub and handoff left 0), and
 * its chunks in flight per step (window: NULL to skip); fc_sim and fc_info
 * start from the same. */
void comm_cost_params(const char *prov_name, int nnodes, struct coll_cost *cc, int *window);

/* ---- request.c: requests and progress ---------------------------------------------- */

double comm_now(void);
/* c is unusable from now on: every later call fails at once with rc and
 * this message (printf-style). The first reason holds; 1 when this call
 * broke it, 0 when it was broken before (or rc is FC_SUCCESS). For any
 * failure that leaves this rank out of step with its peers (a sequence
 * number taken, a transfer still posted). */
int comm_break(struct fc_comm *c, fc_result_t rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The request's description for messages ("allreduce #7 (ring, ...)"). */
const char *comm_request_desc(struct fc_request *r);
/* A new request of c whose schedule (r->s) the caller then builds; freed
 * with comm_request_free until started. */
struct fc_request *comm_request_new(struct fc_comm *c, fc_datatype_t dt, fc_op_t op);
/* Frees r; one that has an on_end and never finished is freed with the
 * family's lock held (on_end runs then). */
void comm_request_free(struct fc_request *r);
/* The same as comm_start with the family's lock held; r is not freed on
 * failure. */
fc_result_t comm_start_locked(struct fc_request *r, void *sendbuf, void *recvbuf,
                              uint64_t tagbase, const char *desc, int p2p);
/* Starts r's schedule (r is consumed on failure). tagbase: tag_base(...). */
fc_result_t comm_start(struct fc_request *r, void *sendbuf, void *recvbuf, uint64_t tagbase,
                       const char *desc, int p2p);
/* Ends r with result rc: off the active list, its on_finish called (a
 * stream-ordered request's). Lock held. */
void comm_finish(struct fc_request *r, fc_result_t rc);
/* Runs the progress engine once for every running request of c's context. */
void comm_progress_locked(struct comm_shared *sh);
/* Lets go of r (lock held), whether it finished or not: one still running
 * fails with rc and msg; one with transfers still posted is parked until
 * they drain, others are freed. Nothing is broken by it. */
void comm_request_drop_locked(struct fc_request *r, fc_result_t rc, const char *msg);
/* Waits (bounded by FC_TIMEOUT) and frees; returns the request's result. */
fc_result_t comm_wait(struct fc_request *r);
/* Nonblocking check; *done = 1 and freed when finished. */
fc_result_t comm_test(struct fc_request *r, int *done);
/* comm_test that also says whether anything of r moved (a completion or a
 * finished step), for a caller that drives several requests in turn. */
fc_result_t comm_poll(struct fc_request *r, int *done, int *moved);
/* Groups (group.c): this thread's open group, and its requests. */
int group_active(void);
void group_start(void);
/* r (started) is completed at the outermost group_end. */
fc_result_t group_add(struct fc_request *r);
/* Closes a level; the outermost drives every request of the group to its
 * end and returns the first error. */
fc_result_t group_end(void);
/* The progress thread's body. */
void *comm_progress_main(void *arg);

/* ---- rcache.c: the repeat-call cache (family lock held) ------------------------------ */

/* A kept request of the call a; NULL if none. */
struct fc_request *comm_rcache_take(struct fc_comm *c, const struct coll_args *a);
/* Keeps the finished request r if it may run again; returns what the
 * caller must free: r itself (not kept), the oldest kept one (pushed out),
 * or NULL. */
struct fc_request *comm_rcache_put(struct fc_comm *c, struct fc_request *r);
/* Takes any kept request out (NULL: empty), to free them all. */
struct fc_request *comm_rcache_pop(struct fc_comm *c);

/* ---- collective.c: from a call to a started request ---------------------------------- */

/* Builds a collective's request (algorithm, memory route, sequence number)
 * without starting it; mode and stream: how it was called. */
fc_result_t comm_build(struct fc_comm *c, const struct coll_args *a, enum comm_mode mode,
                       void *stream, const void *sendbuf, void *recvbuf,
                       struct fc_request **out, uint64_t *tagbase);
/* Builds and starts a blocking or nonblocking collective (the public calls
 * end here). */
fc_result_t comm_collective(struct fc_comm *c, const struct coll_args *a, enum comm_mode mode,
                            const void *sendbuf, void *recvbuf, struct fc_request **out);

#endif /* FC_COMM_H */
