/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fused small allreduce: a transport that runs gather's fused form
 * (coll/allreduce_gather.c, coll_allreduce_gather_fused) with one CUDA
 * kernel doing the GPU's whole part.
 *
 * Staged, a small allreduce on device buffers costs two trips to the GPU
 * and back (copy the vector out before sending it; reduce after the
 * exchange), each 7-9 us on an H200 from the call until the host sees it
 * done, plus the launches. Gather (the small-vector algorithm: raw vectors
 * exchanged, one reduction at the end) needs neither trip in between: its
 * fused form has two local steps, the own vector copied out first and the
 * n vectors reduced last, and the engine runs it on this transport. The
 * kernel, launched as the call starts, writes the vector into pinned host
 * memory, spins until the other ranks' vectors are there, reduces the n
 * vectors into recvbuf and tells the host. The vectors cross as 8-byte
 * words of the call's seq and 4 bytes of data (NCCL's LL idea): a word is
 * valid once its seq matches, so no flag, fence or second PCIe round trip
 * is needed for either direction. So the copy step is done once the words
 * carry the call's seq (their data then goes to the exchange's buffer), and
 * the reduction step puts the other vectors in as words and is done once
 * the kernel says so. The messages (sends and receives on the family's
 * host transport, of host scratch) are gather's, so ranks on host buffers,
 * or on the usual device path, take part unchanged.
 *
 * The memory route (memory.c) sends a call here (gpu_fused_route) when the
 * tuner chose gather for it, both buffers are on one GPU, the vectors fit
 * and the family's fused state is free: one call at a time per family,
 * stream-ordered calls on one stream chained behind each other. Blocking and
 * nonblocking calls: the kernel runs on the family's own stream after the
 * caller's work on the legacy default stream (an event), as the usual path
 * orders itself, and never holds back other streams while it spins
 * (gpu_fused_launch_call). Stream-ordered calls: on the caller's stream
 * (gpu_fused_enqueue). A call that fails raises the abort watermark
 * (flags[3]), so its kernel never spins past the call, and retires the
 * fused path of the family: a failed exchange may leave receives into the
 * host's copies of the vectors.
 *
 * This transport is the outermost of the family's (sh->ptp): its progress
 * looks at the kernels' words and flags, then drives the device transport
 * it wraps. It owns the pinned words, its stream and the call contexts;
 * it moves no message itself (the host transport does).
 */
#define _GNU_SOURCE
#include "fused.h"

#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm_gpu.h"
#include "gpu.h"
#include "gpu_tp.h"
#include "log.h"
#include "queue.h"

#define FUSED_MAX COMM_FUSED_MAX
/* auto: a kernel that keeps waiting this long (us) for the GPU, from launch
 * to start plus from the host's go to its done, FUSED_SLOW_CALLS calls in a
 * row, shares the GPU with other contexts by time slices (a GPU shared
 * without MPS: ~2.7 ms a call against ~0.3 ms staged on an H200; one rank's
 * kernel waits to start, the other's to finish, so both parts count); the
 * family then goes staged. Calls launched behind the caller's own work on
 * the legacy stream are not judged: their start waits for that work. */
#define FUSED_SLOW_US 150.0
#define FUSED_SLOW_CALLS 4
/* pinned memory: flags; this rank's vector as words of seq and 4 bytes of
 * data (bytes <= FUSED_MAX / 2); the others' as words ((n - 1) * ceil(bytes
 * / 4) <= (FUSED_MAX + 3 * 63) / 4, n <= 64). The exchange's n vectors are
 * the request's scratch (host memory, from this transport). */
#define FUSED_FLAGS 64
#define FUSED_OUT_WORDS (FUSED_MAX / 2 / 4)
#define FUSED_IN_WORDS ((FUSED_MAX + 256) / 4)
#define FUSED_MEM (FUSED_FLAGS + 8 * (FUSED_OUT_WORDS + FUSED_IN_WORDS))
#define FUSED_FREE_WAIT 2.0          /* s: for a kernel still queued at the end */

extern const struct coll_algo coll_allreduce_gather, coll_allreduce_gather_fused;

struct fused {
    struct transport tp;     /* first: the fused calls' transport, the family's ptp */
    struct transport *inner; /* what progress drove before (the device transport) */
    struct transport *host;  /* the family's host transport: the messages */
    struct xfer *pend;       /* local steps waiting for a kernel (through x->tpriv) */
    int device;
    int use;                 /* FC_GPU_FUSED's answer for this device */
    int busy;
    int slow;                /* calls in a row above FUSED_SLOW_US */
    uint32_t seq;
    uint32_t pending;        /* the last stream-ordered kernel's seq: busy until it is done */
    void *chain;             /* the caller's stream of that kernel (and of the earlier ones) */
    uint64_t chain_owner;    /* its thread's token on the per-thread stream (lane_owner) */
    uint32_t kseq;           /* the last kernel launched (it writes flags[4] as it leaves) */
    void *mem;               /* pinned: FUSED_MEM bytes */
    gpu_stream_t *stream;    /* the kernels' */
    gpu_event_t *ev;         /* orders them after the legacy stream */
};

/* The pinned memory's parts (FUSED_MEM): flags, this rank's vector as
 * words, the others' as words. */
static volatile uint32_t *fused_flags(const struct fused *f)
{
    return (volatile uint32_t *)f->mem;
}

static uint64_t *fused_out(const struct fused *f)
{
    return (uint64_t *)((char *)f->mem + FUSED_FLAGS);
}

static uint64_t *fused_in(const struct fused *f)
{
    return fused_out(f) + FUSED_OUT_WORDS;
}

void gpu_fused_free(struct comm_shared *sh)
{
    struct fused *f = sh->fused;
    if (!f)
        return;
    sh->fused = NULL;
    if (sh->ptp == &f->tp)
        sh->ptp = f->inner;
    int gone = 1;
    if (f->mem && f->kseq) {
        /* every kernel of the family gives up (one still spinning for an
         * aborted exchange among them), then says it has left (flags[4]);
         * one still queued behind other work (the GPU busy or stuck) must
         * not find its memory gone when it runs */
        volatile uint32_t *flags = fused_flags(f);
        __atomic_store_n(&flags[3], f->seq, __ATOMIC_RELEASE);
        double t0 = comm_now();
        while (!(gone = __atomic_load_n(&flags[4], __ATOMIC_ACQUIRE) == f->kseq) &&
               comm_now() - t0 < FUSED_FREE_WAIT)
            sched_yield();
    }
    if (!gone) {
        FC_WARN(LOG_COLL, "the fused small allreduce's kernel on GPU %d is still queued after "
                "%.0f s: its %zu bytes of pinned memory and its stream are left allocated",
                f->device, FUSED_FREE_WAIT, (size_t)FUSED_MEM);
    } else {
        gpu_stream_destroy(f->stream);
        gpu_host_free(f->mem);
    }
    gpu_event_put(f->ev);
    free(f);
}

/* Words a vector of this many bytes takes (4 bytes of data each). */
static size_t fused_nwords(size_t bytes)
{
    return (bytes + 3) / 4;
}

/* Whether the words of a vector of `bytes` all carry seq. */
static int fused_words_have(const uint64_t *words, size_t bytes, uint32_t seq)
{
    for (size_t w = 0; w < fused_nwords(bytes); w++)
        if ((uint32_t)(__atomic_load_n(&words[w], __ATOMIC_ACQUIRE) >> 32) != seq)
            return 0;
    return 1;
}

/* Copies the data of a vector's words to the bytes of dst. */
static void fused_words_get(const uint64_t *words, void *dst, size_t bytes)
{
    char *d = dst;
    for (size_t w = 0; w < fused_nwords(bytes); w++) {
        const uint32_t x = (uint32_t)__atomic_load_n(&words[w], __ATOMIC_RELAXED);
        if (4 * w + 4 <= bytes)
            memcpy(d + 4 * w, &x, 4); /* a constant size: one store */
        else
            memcpy(d + 4 * w, &x, bytes - 4 * w);
    }
}

/* Writes the bytes of src as words of seq and 4 bytes of data. */
static void fused_put_words(uint64_t *words, uint32_t seq, const void *src, size_t bytes)
{
    const char *p = src;
    const uint64_t tag = (uint64_t)seq << 32;
    for (size_t w = 0; w < fused_nwords(bytes); w++) {
        uint32_t x = 0;
        if (4 * w + 4 <= bytes)
            memcpy(&x, p + 4 * w, 4);
        else
            memcpy(&x, p + 4 * w, bytes - 4 * w);
        __atomic_store_n(&words[w], tag | x, __ATOMIC_RELAXED);
    }
}


/* ---- calls ------------------------------------------------------------------ */

/* A call the fused transport runs (r->tp_call). */
struct fused_call {
    struct fused *f;
    uint32_t seq;            /* its kernel's (0 until launched) */
    int rank, n;
    const void *sendbuf;
    void *recvbuf;
    size_t bytes;            /* one vector */
    fc_datatype_t dt;
    fc_op_t op;
    int on_stream;           /* stream-ordered: the kernel on the caller's stream */
    int chained;             /* behind stream-ordered kernels still at work */
    void *stream;
    gpu_event_t *after;      /* stream-ordered: recorded after the kernel */
    int queued;              /* launched behind the caller's legacy-stream work */
    double t_launch, t_out, t_go, t_end;
};

/* ---- the transport ------------------------------------------------------------
 * A pending local step: x->tpriv links them; x->tctx[0] its call (NULL once
 * the call has ended: it fails), tctx[1] its kind (1: the own vector out,
 * 2: the others in and the reduction), tctx[2] its chunk's offset. */
enum { PEND_OUT = 1, PEND_IN = 2 };

static struct fused *tp_fused(struct transport *t)
{
    return (struct fused *)t; /* tp is the first member */
}

static fc_result_t ft_send(struct transport *t, int peer, uint64_t tag, const void *buf,
                           size_t len, struct xfer *x)
{
    struct transport *h = tp_fused(t)->host;
    return h->ops->send(h, peer, tag, buf, len, x);
}

static fc_result_t ft_recv(struct transport *t, int peer, uint64_t tag, void *buf, size_t len,
                           struct xfer *x)
{
    struct transport *h = tp_fused(t)->host;
    return h->ops->recv(h, peer, tag, buf, len, x);
}

/* Where a pending step stands: 1 done, 0 not yet, -1 failed (error set). */
static int pend_state(struct fused *f, struct xfer *x)
{
    struct fused_call *k = x->tctx[0];
    if (!k) {
        x->errmsg = "the fused small allreduce's call ended before its kernel";
        return -1;
    }
    volatile uint32_t *flags = fused_flags(f);
    const size_t off = (size_t)(uintptr_t)x->tctx[2];
    if ((intptr_t)x->tctx[1] == PEND_IN) {
        if ((int32_t)(__atomic_load_n(&flags[2], __ATOMIC_ACQUIRE) - k->seq) < 0)
            return 0;
        if (k->t_end == 0)
            k->t_end = comm_now();
        return 1;
    }
    if ((int32_t)(__atomic_load_n(&flags[3], __ATOMIC_ACQUIRE) - k->seq) >= 0) {
        FC_ERR(FC_ERR_CUDA, "an earlier fused small allreduce on this stream failed, and this "
               "call's kernel on GPU %d gave up with it", f->device);
        x->errmsg = "its kernel gave up";
        return -1;
    }
    const uint64_t *words = fused_out(f) + off / 4;
    if (!fused_words_have(words, x->len, k->seq)) {
        /* a stream-ordered kernel that will never put its vector out (the
         * stream's earlier work failed): its event is done, its words not */
        int e = k->after ? gpu_event_done(k->after) : 0;
        if (e == 0)
            return 0;
        if (e < 0 || !fused_words_have(words, x->len, k->seq)) {
            FC_ERR(FC_ERR_CUDA, "the fused kernel on GPU %d ended without putting its vector "
                   "out", f->device);
            x->errmsg = "its kernel ended without putting its vector out";
            return -1;
        }
    }
    fused_words_get(words, x->buf, x->len);
    if (k->t_out == 0)
        k->t_out = comm_now();
    return 1;
}

static fc_result_t ft_progress(struct transport *t, int *ncomp)
{
    struct fused *f = tp_fused(t);
    int n = 0;
    for (struct xfer **pp = &f->pend; *pp;) {
        struct xfer *x = *pp;
        int st = pend_state(f, x);
        if (st == 0) {
            pp = (struct xfer **)&x->tpriv;
            continue;
        }
        *pp = x->tpriv; /* off the list before done(), which may reuse x */
        x->tpriv = NULL;
        n++;
        x->done(x, st > 0 ? FC_SUCCESS : FC_ERR_CUDA, st > 0 ? x->len : 0);
    }
    int m = 0;
    fc_result_t rc = f->inner->ops->progress(f->inner, &m);
    *ncomp = n + m;
    return rc;
}

static int ft_wait_prepare(struct transport *t, struct transport_wait *w)
{
    struct fused *f = tp_fused(t);
    int r = f->inner->ops->wait_prepare(f->inner, w);
    if (f->pend) {
        /* a kernel's words announce nothing: look again soon */
        w->nfds = 0;
        w->nap_us = 0;
    }
    return r;
}

static void ft_wait_end(struct transport *t, struct transport_wait *w)
{
    struct fused *f = tp_fused(t);
    f->inner->ops->wait_end(f->inner, w);
}

static void ft_peer_name(struct transport *t, int peer, char *buf, size_t len)
{
    struct transport *h = tp_fused(t)->host;
    h->ops->peer_name(h, peer, buf, len);
}

/* The two local steps of gather's fused form: the own vector out (a copy
 * from sendbuf, done once the kernel has put its words out) and the
 * reduction of all vectors (the others go in as words; done once the
 * kernel has reduced). Completion comes from progress. */
static fc_result_t ft_local(struct transport *t, const struct local_op *lo, struct xfer *x)
{
    struct fused *f = tp_fused(t);
    struct fused_call *k = lo->call;
    if (!k || !k->seq)
        return FC_ERR(FC_ERR_INTERNAL, "the fused transport got a local step of no call it "
                      "launched");
    intptr_t kind;
    size_t off;
    if (lo->kind == LOCAL_COPY && (const char *)lo->a >= (const char *)k->sendbuf &&
        (const char *)lo->a + lo->len <= (const char *)k->sendbuf + k->bytes) {
        kind = PEND_OUT;
        off = (size_t)((const char *)lo->a - (const char *)k->sendbuf);
    } else if (lo->kind == LOCAL_REDUCE_ALL && lo->nvec == k->n && lo->first == k->rank &&
               (char *)lo->dst >= (char *)k->recvbuf &&
               (char *)lo->dst + lo->len <= (char *)k->recvbuf + k->bytes) {
        kind = PEND_IN;
        off = (size_t)((char *)lo->dst - (char *)k->recvbuf);
        /* the others' parts of this chunk go in: vector j (rank + j's) from
         * the exchange's j-th, as words of the call's seq */
        const size_t W = fused_nwords(k->bytes);
        for (int j = 1; j < k->n; j++)
            fused_put_words(fused_in(f) + (size_t)(j - 1) * W + off / 4, k->seq,
                            (const char *)lo->a + (size_t)j * lo->stride, lo->len);
        if (k->t_go == 0)
            k->t_go = comm_now();
    } else {
        return FC_ERR(FC_ERR_INTERNAL, "the fused transport runs gather's fused form only: a "
                      "local step of kind %d is not its", lo->kind);
    }
    if (off % 4)
        return FC_ERR(FC_ERR_INTERNAL, "a fused step's chunk starts at byte %zu, not at a word",
                      off);
    x->tctx[0] = k;
    x->tctx[1] = (void *)kind;
    x->tctx[2] = (void *)(uintptr_t)off;
    x->tpriv = f->pend;
    f->pend = x;
    return FC_SUCCESS;
}

static const struct transport_ops fused_ops = {
    .name = "fused",
    .flags = TRANSPORT_RUNS_LOCAL,
    .send = ft_send,
    .recv = ft_recv,
    .progress = ft_progress,
    .wait_prepare = ft_wait_prepare,
    .wait_end = ft_wait_end,
    .peer_name = ft_peer_name,
    .mem_alloc = transport_mem_host_alloc,
    .mem_free = transport_mem_host_free,
    .local = ft_local,
    .idle = transport_always_idle, /* a step is done when its kernel's part is */
};

/* ---- claims ------------------------------------------------------------------ */

/* The family's fused state, made on first use (the transport then wraps
 * what progress drove); NULL when the fused path is not for this call.
 * Lock held. */
static struct fused *fused_get(struct fc_comm *c, int dev)
{
    struct comm_shared *sh = c->sh;
    struct fused *f = sh->fused;
    if (!f && (f = calloc(1, sizeof(*f)))) {
        f->tp.ops = &fused_ops;
        f->device = dev;
        f->mem = gpu_host_alloc(dev, FUSED_MEM);
        if (f->mem)
            memset(f->mem, 0, FUSED_MEM); /* no word carries a seq yet (seq 0 is skipped) */
        f->use = f->mem && gpu_stream_create(dev, &f->stream) == FC_SUCCESS &&
                 gpu_event_get(dev, &f->ev) == FC_SUCCESS;
        f->host = sh->tp;
        f->inner = sh->ptp;
        sh->ptp = &f->tp;
        if (f->use)
            FC_INFO(LOG_COLL, "small device allreduces (up to %zu bytes over all ranks) run as "
                    "one kernel on GPU %d around the exchange (FC_GPU_FUSED=%s%s)",
                    FUSED_MAX, dev, c->cfg.gpu_fused == CFG_FUSED_ON ? "on" : "auto",
                    gpu_device_mps(dev) ? ", MPS" : "");
        else
            FC_WARN(LOG_COLL, "the fused small allreduce has no pinned memory, stream or event "
                    "on GPU %d (%s): small device allreduces take the usual staged path",
                    dev, fc_last_error());
        sh->fused = f;
    }
    return f && f->use && !f->busy && f->device == dev ? f : NULL;
}

/* Lock held: every kernel up to seq gives up (the abort watermark), the
 * family's fused path retires (receives of a failed exchange may still land
 * in its buffers) and its claim ends. */
static void fused_retire_locked(struct fused *f, uint32_t seq)
{
    __atomic_store_n(&fused_flags(f)[3], seq, __ATOMIC_RELEASE);
    f->use = 0;
    f->busy = 0;
    f->pending = 0;
}

/* The family's fused state for this call, marked busy (or chained behind
 * the stream-ordered kernels that hold it), or NULL. stream: NULL for a
 * blocking or nonblocking call, else the stream-ordered call's stream;
 * *chained is then set when the buffers are busy with stream-ordered
 * kernels on that same stream: this call's kernel goes after them. That is
 * safe with one set of words because the stream runs kernel k+1 only once
 * kernel k is done, and kernel k is done only once its exchange is over and
 * the host has written the others' vectors in: nobody touches kernel k's
 * words after that. Lock held. */
static struct fused *fused_claim(struct fc_comm *c, int dev, void *const *stream, int *chained)
{
    *chained = 0;
    struct fused *f = c->sh->fused;
    if (f && f->busy && f->pending &&
        __atomic_load_n(&fused_flags(f)[2], __ATOMIC_ACQUIRE) == f->pending) {
        f->busy = 0; /* the stream-ordered calls' last kernel is done */
        f->pending = 0;
    }
    if (f && f->busy && f->pending && stream && f->chain == *stream &&
        f->chain_owner == gpu_stream_owner(*stream) && f->use && f->device == dev) {
        *chained = 1;
        return f;
    }
    f = fused_get(c, dev);
    if (f)
        f->busy = 1;
    return f;
}

/* The next call's seq (never 0: a word of zeros is never valid). Unless
 * the call is chained behind kernels still at work, every earlier kernel
 * is past the abort watermark (none should still be queued). */
static uint32_t fused_next(struct fused *f, int chained)
{
    if (++f->seq == 0)
        f->seq = 1;
    if (!chained)
        __atomic_store_n(&fused_flags(f)[3], f->seq - 1, __ATOMIC_RELEASE);
    return f->seq;
}

/* r->on_end (lock held): a call that ended well frees the family's words
 * (a blocking one: judged for a GPU shared by time slices first; a
 * stream-ordered one's stay busy until its kernel is done), one that
 * failed, or never ran, retires the fused path. */
static void fused_end(struct fc_request *r)
{
    struct fused_call *k = r->tp_call;
    struct fused *f = k->f;
    struct fc_comm *c = r->comm;
    r->tp_call = NULL;
    if (!r->done || r->result != FC_SUCCESS) {
        fused_retire_locked(f, f->seq); /* the kernels chained behind it too */
        for (struct xfer *x = f->pend; x; x = x->tpriv)
            if (x->tctx[0] == k)
                x->tctx[0] = NULL; /* they fail at the next progress */
    } else if (!k->on_stream) {
        FC_TRACE(LOG_COLL, "allreduce (fused, %zu B): vector out after %.1f us, exchange "
                 "%.1f us, reduction seen %.1f us after the exchange",
                 k->bytes, (k->t_out - k->t_launch) * 1e6, (k->t_go - k->t_out) * 1e6,
                 (k->t_end - k->t_go) * 1e6);
        const double gpu_us = (k->t_out - k->t_launch + k->t_end - k->t_go) * 1e6;
        if (!k->queued)
            f->slow = gpu_us > FUSED_SLOW_US ? f->slow + 1 : 0;
        if (f->slow >= FUSED_SLOW_CALLS && c->cfg.gpu_fused == CFG_FUSED_AUTO && f->use) {
            /* Each rank judges its own kernel, so ranks may part here. A
             * staged peer sends the fused rank host memory, as the fused
             * form does. A direct one (gdr) sends device memory by the
             * provider's own CUDA path, and a fused rank receiving that
             * hung (2 ranks on one GPU, shm with CUDA, 4-8 KiB vectors: the
             * fused rank stopped without timing out). So only a family
             * with no direct path leaves the kernel. */
            const int leave = !c->sh->gpu || !gpu_tp_any_direct(c->sh->gpu);
            if (leave)
                f->use = 0;
            if (leave || f->slow == FUSED_SLOW_CALLS)
                FC_INFO(LOG_COLL, "the fused small allreduce's kernel waited %.0f us for GPU "
                        "%d, %d calls in a row (a GPU shared by processes without MPS?): %s",
                        gpu_us, f->device, FUSED_SLOW_CALLS,
                        leave ? "small device allreduces take the staged path from now on "
                                "(FC_GPU_FUSED=on keeps the kernel)"
                              : "it stays, as device memory goes direct (gdr) here and every "
                                "rank must agree: FC_GPU_FUSED=off on all ranks runs small "
                                "device allreduces without it");
        }
        f->busy = 0;
    }
    gpu_event_put(k->after);
    free(k);
}

int gpu_fused_route(struct fc_comm *c, struct comm_call *call, int dev, const void *sendbuf,
                    void *recvbuf, struct fc_request *r)
{
    const struct coll_args *a = call->a;
    const size_t bytes = a->count * a->esize;
    /* not for nonblocking calls: a kernel spinning until the caller's
     * fc_wait would hang a device-wide synchronisation made before it */
    if (call->algo != &coll_allreduce_gather || call->mode == COMM_NONBLOCKING || a->premul ||
        c->cfg.gpu_fused == CFG_FUSED_OFF ||
        c->size < 2 || c->size > 64 || !bytes || bytes > FUSED_MAX / (size_t)c->size ||
        c->broken != FC_SUCCESS)
        return 0;
    struct fused_call *k = calloc(1, sizeof(*k));
    if (!k)
        return 0; /* the usual path */
    void *const *stream = call->mode == COMM_ON_STREAM ? &call->stream : NULL;
    pthread_mutex_lock(&c->sh->lock);
    struct fused *f = fused_claim(c, dev, stream, &k->chained);
    pthread_mutex_unlock(&c->sh->lock);
    if (!f) {
        free(k);
        return 0;
    }
    k->f = f;
    k->sendbuf = sendbuf;
    k->recvbuf = recvbuf;
    k->rank = c->rank;
    k->n = c->size;
    k->bytes = bytes;
    k->dt = a->dt;
    k->op = a->op;
    k->on_stream = stream != NULL;
    k->stream = call->stream;
    call->algo = &coll_allreduce_gather_fused;
    r->tp = &f->tp;
    r->tp_call = k;
    r->on_end = fused_end;
    return 1;
}

int gpu_fused_call(const struct fc_request *r)
{
    return r->on_end == fused_end;
}

/* The call's kernel: on the caller's stream (stream-ordered), else on the
 * family's own after the caller's legacy-stream work. */
fc_result_t gpu_fused_launch_call(struct fc_comm *c, struct fc_request *r)
{
    struct fused_call *k = r->tp_call;
    struct fused *f = k->f;
    struct comm_shared *sh = c->sh;
    pthread_mutex_lock(&sh->lock); /* other communicators of the family claim under it */
    const uint32_t seq = fused_next(f, k->chained);
    pthread_mutex_unlock(&sh->lock);
    void *const caller = k->stream;
    k->t_launch = comm_now();
    fc_result_t rc = gpu_fused_launch(
        f->stream, f->ev, k->on_stream ? &caller : NULL, k->sendbuf, k->recvbuf, fused_out(f),
        fused_in(f), fused_flags(f), seq, k->n, k->rank, k->bytes / fc_datatype_size(k->dt),
        k->dt, k->op, !k->on_stream && c->cfg.gpu_fused == CFG_FUSED_AUTO ? &k->queued : NULL);
    if (rc != FC_SUCCESS)
        return FC_ERR(rc, "%s (FC_GPU_FUSED=off runs small device allreduces without this "
                      "kernel)", fc_last_error());
    pthread_mutex_lock(&sh->lock);
    k->seq = seq;
    f->kseq = seq;
    if (k->on_stream) {
        f->pending = seq;
        f->chain = k->stream;
        f->chain_owner = gpu_stream_owner(k->stream);
    }
    pthread_mutex_unlock(&sh->lock);
    return FC_SUCCESS;
}

/* ---- stream-ordered calls -------------------------------------------------------
 * NCCL's model: the kernel goes on the caller's stream, which orders it
 * after the earlier work there and the later work after it (no event, no
 * flag for the stream to wait on). The request waits in the stream queue
 * until the kernel has put its vector out; the progress thread then runs
 * it. The family's words stay busy until that kernel has written its done
 * flag. */

/* Lock held: 1 once the stream's kernel has put the vector out, 0 while
 * not, -1 when it never will (a failure on the stream). */
static int fused_stream_ready(struct fc_request *r)
{
    struct fused_call *k = r->tp_call;
    struct fused *f = k->f;
    if ((int32_t)(__atomic_load_n(&fused_flags(f)[3], __ATOMIC_ACQUIRE) - k->seq) >= 0) {
        FC_ERR(FC_ERR_CUDA, "an earlier fused small allreduce on this stream failed, and this "
               "call's kernel on GPU %d gave up with it", f->device);
        return -1;
    }
    if (fused_words_have(fused_out(f), k->bytes, k->seq))
        return 1;
    int e = gpu_event_done(k->after);
    if (e == 0)
        return 0;
    if (e > 0 && fused_words_have(fused_out(f), k->bytes, k->seq))
        return 1;
    if (e > 0)
        FC_ERR(FC_ERR_CUDA, "the fused kernel on GPU %d ended without putting its vector out",
               f->device);
    return -1;
}

static void fused_stream_done(struct fc_request *r)
{
    (void)r; /* its end is fused_end's (r->on_end) */
}

static const char *fused_waits_for(struct fc_request *r)
{
    (void)r;
    return "its fused kernel has not put its vector out";
}

static const struct gpu_stream_path fused_path = {
    .ready = fused_stream_ready,
    .done = fused_stream_done,
    .waits_for = fused_waits_for,
};

fc_result_t gpu_fused_enqueue(struct fc_comm *c, struct fc_request *r, void *stream,
                              uint64_t tagbase, const void *sendbuf, void *recvbuf)
{
    struct comm_shared *sh = c->sh;
    struct fused_call *k = r->tp_call;
    pthread_mutex_lock(&sh->lock);
    fc_result_t rc = gpu_queue_prepare(sh);
    pthread_mutex_unlock(&sh->lock);
    if (rc == FC_SUCCESS)
        rc = gpu_event_get(k->f->device, &k->after);
    if (rc == FC_SUCCESS)
        rc = gpu_fused_launch_call(c, r);
    /* after the kernel: tells a kernel that will never put its vector out
     * (an earlier failure on the stream) from one still queued */
    if (rc == FC_SUCCESS)
        rc = gpu_event_record_raw(k->after, stream);
    if (rc == FC_SUCCESS)
        rc = gpu_queue_add(c, r, &fused_path, stream, tagbase, sendbuf, recvbuf);
    return rc;
}
