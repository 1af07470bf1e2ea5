/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fused small allreduce. Staged, a small allreduce on device buffers costs two trips to the GPU
 * and back (copy the vector out before sending it; reduce after the
 * exchange), each 7-9 us on an H200 from the call until the host sees it
 * done, plus the launches. When the cost model picks gather (the
 * small-vector algorithm: raw vectors exchanged, one reduction at the end;
 * coll/allreduce_gather.c), one kernel does the GPU's part of the whole
 * call: it writes the vector into pinned host memory, spins until the
 * other ranks' vectors are there, reduces the n vectors into recvbuf and
 * tells the host. The vectors cross as 8-byte words of the call's seq and
 * 4 bytes of data (NCCL's LL idea): a word is valid once its seq matches,
 * so no flag, fence or second PCIe round trip is needed for either
 * direction. The host runs gather's exchange alone on plain copies of the
 * vectors, on the host transport: the same messages as the whole
 * algorithm, so ranks on host buffers, or on the usual device path, take
 * part unchanged.
 * The kernel runs on the family's own stream, after the caller's work on
 * the legacy default stream (an event), as the usual path orders itself;
 * it never holds back other streams while it spins. Blocking calls only;
 * one at a time per family (another thread's call meanwhile takes the
 * usual path). A call that fails raises the abort watermark (flags[3]), so
 * its kernel never spins past the call, and retires the fused path of the
 * family: a failed exchange may leave receives into the pinned vectors. */
#define _GNU_SOURCE
#include "fused.h"

#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "comm_gpu.h"
#include "gpu.h"
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
 * / 4) <= (FUSED_MAX + 3 * 63) / 4, n <= 64); the exchange's n vectors */
#define FUSED_FLAGS 64
#define FUSED_OUT_WORDS (FUSED_MAX / 2 / 4)
#define FUSED_IN_WORDS ((FUSED_MAX + 256) / 4)
#define FUSED_MEM (FUSED_FLAGS + 8 * (FUSED_OUT_WORDS + FUSED_IN_WORDS) + FUSED_MAX)
#define FUSED_FREE_WAIT 2.0          /* s: for a kernel still queued at the end */

extern const struct coll_algo coll_allreduce_gather, coll_allreduce_gather_xchg;

struct fused {
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
 * words, the others' as words, the exchange's n vectors. */
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

static char *fused_tmp(const struct fused *f)
{
    return (char *)(fused_in(f) + FUSED_IN_WORDS);
}

void gpu_fused_free(struct comm_shared *sh)
{
    struct fused *f = sh->fused;
    if (!f)
        return;
    sh->fused = NULL;
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

/* Waits until *flag == want, bounded by FC_TIMEOUT: spins, then lets other
 * ranks of the node run (at once where they outnumber its CPUs, as
 * comm_wait). */
static int fused_wait(struct fc_comm *c, volatile uint32_t *flag, uint32_t want)
{
    double t0 = 0;
    const unsigned spin = c->oversubscribed ? 1 : 4096;
    for (unsigned i = 0;; i < spin ? i++ : 0) {
        if (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == want)
            return 1;
        if (i < spin)
            continue;
        double now = comm_now();
        if (t0 == 0)
            t0 = now;
        else if (c->cfg.timeout > 0 && now - t0 > c->cfg.timeout)
            return 0;
        sched_yield();
    }
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

/* Waits until the words of a vector of `bytes` carry seq (bounded by
 * FC_TIMEOUT, as fused_wait), then copies their data to dst. */
static int fused_wait_words(struct fc_comm *c, const uint64_t *words, uint32_t seq, void *dst,
                            size_t bytes)
{
    for (size_t w = 0; w < fused_nwords(bytes); w++)
        /* a word's upper half is a 32-bit flag of its own */
        if ((uint32_t)(__atomic_load_n(&words[w], __ATOMIC_ACQUIRE) >> 32) != seq &&
            !fused_wait(c, (volatile uint32_t *)&words[w] + 1, seq))
            return 0;
    fused_words_get(words, dst, bytes);
    return 1;
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

/* After the exchange: the other n - 1 vectors of the exchange's buffer go
 * to the kernel, each from a word of its own. */
static void fused_put_others(struct fused *f, int n, uint32_t seq, size_t bytes)
{
    const size_t W = fused_nwords(bytes);
    for (int j = 1; j < n; j++)
        fused_put_words(fused_in(f) + (size_t)(j - 1) * W, seq, fused_tmp(f) + (size_t)j * bytes,
                        bytes);
}

/* The family's fused state, made on first use; NULL when the fused path is
 * not for this call (lock held). */
static struct fused *fused_get(struct fc_comm *c, int dev)
{
    struct comm_shared *sh = c->sh;
    struct fused *f = sh->fused;
    if (!f && (f = calloc(1, sizeof(*f)))) {
        f->device = dev;
        f->mem = gpu_host_alloc(dev, FUSED_MEM);
        if (f->mem)
            memset(f->mem, 0, FUSED_MEM); /* no word carries a seq yet (seq 0 is skipped) */
        f->use = f->mem && gpu_stream_create(dev, &f->stream) == FC_SUCCESS &&
                 gpu_event_get(dev, &f->ev) == FC_SUCCESS;
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

/* A call failed after its seq was taken: fused_retire_locked, and unless rc
 * is FC_SUCCESS (nothing was sent: the call runs staged) the communicator
 * breaks with rc, this rank having left the sequence. */
static void fused_fail(struct fc_comm *c, struct fused *f, uint32_t seq, fc_result_t rc)
{
    pthread_mutex_lock(&c->sh->lock);
    fused_retire_locked(f, seq);
    comm_break(c, rc, "%.500s", fc_last_error());
    pthread_mutex_unlock(&c->sh->lock);
}

/* From now on small device allreduces of the family take the staged path;
 * kernels already launched finish their calls. */
static void fused_turn_off(struct comm_shared *sh, struct fused *f)
{
    pthread_mutex_lock(&sh->lock);
    f->use = 0;
    pthread_mutex_unlock(&sh->lock);
}

/* The call is over: the family's buffers are free for the next one. */
static void fused_release(struct comm_shared *sh, struct fused *f)
{
    pthread_mutex_lock(&sh->lock);
    f->busy = 0;
    pthread_mutex_unlock(&sh->lock);
}

/* The family's fused state for this call, marked busy, or NULL when the
 * call is not for the fused path (too big, not device buffers of one GPU,
 * another algorithm, off, busy). stream: NULL for a blocking call, else the
 * stream-ordered call's stream; *chained is then set when the buffers are
 * busy with stream-ordered kernels on that same stream: this call's kernel
 * goes after them. That is safe with one set of buffers because the stream
 * runs kernel k+1 only once kernel k is done, and kernel k is done only
 * once its exchange is over and the host has written the others' vectors
 * in: nobody touches kernel k's words or the exchange's buffer after that. */
static struct fused *fused_claim(struct fc_comm *c, const struct coll_args *a,
                                 const void *sendbuf, const void *recvbuf,
                                 void *const *stream, int *chained)
{
    *chained = 0;
    const size_t bytes = a->count * a->esize;
    if (c->cfg.gpu_fused == CFG_FUSED_OFF || c->size < 2 || c->size > 64 || !bytes ||
        bytes > FUSED_MAX / (size_t)c->size || c->broken != FC_SUCCESS)
        return NULL;
    struct gpu_ptr ps, pr;
    gpu_ptr_info(sendbuf, &ps);
    if (ps.kind != GPU_DEVICE)
        return NULL;
    gpu_ptr_info(recvbuf, &pr);
    if (pr.kind != GPU_DEVICE || pr.device != ps.device)
        return NULL;
    if (coll_select(&c->tuning, a, NULL) != &coll_allreduce_gather)
        return NULL;
    struct comm_shared *sh = c->sh;
    pthread_mutex_lock(&sh->lock);
    struct fused *f = sh->fused;
    if (f && f->busy && f->pending &&
        __atomic_load_n(&fused_flags(f)[2], __ATOMIC_ACQUIRE) == f->pending) {
        f->busy = 0; /* the stream-ordered calls' last kernel is done */
        f->pending = 0;
    }
    if (f && f->busy && f->pending && stream && f->chain == *stream &&
        f->chain_owner == gpu_stream_owner(*stream) && f->use &&
        f->device == ps.device) {
        *chained = 1;
    } else {
        f = fused_get(c, ps.device);
        if (f)
            f->busy = 1;
    }
    pthread_mutex_unlock(&sh->lock);
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

int gpu_fused_run(struct fc_comm *c, const struct coll_args *a, const void *sendbuf,
                  void *recvbuf, fc_result_t *rc)
{
    int chained;
    struct fused *f = fused_claim(c, a, sendbuf, recvbuf, NULL, &chained);
    if (!f)
        return 0;
    const int dev = f->device;
    const size_t bytes = a->count * a->esize;
    char *tmp = fused_tmp(f);
    const uint32_t seq = fused_next(f, 0);
    double t_launch = comm_now();
    int queued = 0;
    *rc = gpu_fused_launch(f->stream, f->ev, NULL, sendbuf, recvbuf, fused_out(f),
                           fused_in(f), fused_flags(f), seq, c->size, c->rank, a->count,
                           a->dt, a->op, c->cfg.gpu_fused == CFG_FUSED_AUTO ? &queued : NULL);
    const double t_launched = comm_now();
    if (*rc != FC_SUCCESS) {
        /* nothing sent yet: this call and the later ones run staged */
        FC_WARN(LOG_COLL, "%s: small device allreduces take the staged path from now on",
                fc_last_error());
        fused_fail(c, f, seq, *rc = FC_SUCCESS);
        return 0;
    }
    f->kseq = seq;
    struct fc_request *r = NULL;
    uint64_t tb;
    *rc = comm_build_algo(c, a, &coll_allreduce_gather_xchg, "the fused device path", NULL, tmp,
                          &r, &tb);
    if (*rc != FC_SUCCESS)
        goto give_up;
    if (!fused_wait_words(c, fused_out(f), seq, tmp, bytes)) {
        comm_request_free(r);
        *rc = FC_ERR(FC_ERR_TIMEOUT,
                     "allreduce #%llu: the fused kernel on GPU %d did not start within %.0f s "
                     "(FC_TIMEOUT): the GPU is busy with earlier work, or shared by other "
                     "processes without MPS (FC_GPU_FUSED=off avoids the kernel)",
                     (unsigned long long)(c->seq - 1), dev, c->cfg.timeout);
        goto give_up;
    }
    double t_started = comm_now();
    *rc = comm_start(r, NULL, tmp, tb, NULL, 0);
    if (*rc == FC_SUCCESS)
        *rc = comm_wait(r);
    if (*rc != FC_SUCCESS)
        goto give_up;
    double t_go = comm_now();
    fused_put_others(f, c->size, seq, bytes);
    if (!fused_wait(c, &fused_flags(f)[2], seq)) {
        *rc = FC_ERR(FC_ERR_TIMEOUT,
                     "allreduce #%llu: the fused kernel on GPU %d did not finish its reduction "
                     "within %.0f s (FC_TIMEOUT)",
                     (unsigned long long)(c->seq - 1), dev, c->cfg.timeout);
        goto give_up;
    }
    double t_end = comm_now();
    FC_TRACE(LOG_COLL, "allreduce #%llu (fused, %zu x %s): launch %.1f us, vector out after "
             "%.1f us, exchange %.1f us, reduction seen %.1f us after the exchange",
             (unsigned long long)(c->seq - 1), a->count, reduce_dt_name(a->dt),
             (t_launched - t_launch) * 1e6, (t_started - t_launch) * 1e6,
             (t_go - t_started) * 1e6, (t_end - t_go) * 1e6);
    const double gpu_us = (t_started - t_launch + t_end - t_go) * 1e6;
    if (!queued)
        f->slow = gpu_us > FUSED_SLOW_US ? f->slow + 1 : 0;
    if (f->slow >= FUSED_SLOW_CALLS && c->cfg.gpu_fused == CFG_FUSED_AUTO) {
        fused_turn_off(c->sh, f);
        FC_INFO(LOG_COLL, "the fused small allreduce's kernel waited %.0f us for GPU %d, %d "
                "calls in a row (a GPU shared by processes without MPS?): small device "
                "allreduces take the staged path from now on (FC_GPU_FUSED=on keeps the "
                "kernel)", gpu_us, dev, FUSED_SLOW_CALLS);
    }
    fused_release(c->sh, f);
    return 1;
give_up:
    fused_fail(c, f, seq, *rc);
    return 1;
}

/* ---- the fused kernel for stream-ordered calls -----------------------------
 * NCCL's model: the kernel goes on the caller's stream, which orders it
 * after the earlier work there and the later work after it (no event, no
 * flag for the stream to wait on). The progress thread runs the exchange
 * once the vector is out, then writes the others' vectors in. The family's
 * buffers stay busy until that kernel has written its done flag. */
static const struct gpu_stream_path fused_path;

int gpu_fused_stream(struct fc_comm *c, const struct coll_args *a, const void *sendbuf,
                     void *recvbuf, void *stream, fc_result_t *rc)
{
    int chained;
    struct fused *f = fused_claim(c, a, sendbuf, recvbuf, &stream, &chained);
    if (!f)
        return 0;
    struct comm_shared *sh = c->sh;
    /* what can fail without a trace goes first: then the usual path */
    gpu_event_t *ev = NULL;
    pthread_mutex_lock(&sh->lock);
    *rc = gpu_queue_prepare(sh);
    pthread_mutex_unlock(&sh->lock);
    if (*rc == FC_SUCCESS)
        *rc = gpu_event_get(f->device, &ev);
    if (*rc != FC_SUCCESS) {
        if (!chained) /* (chained: the earlier kernels keep the buffers) */
            fused_release(sh, f); /* the usual path meets the same trouble and says so */
        return 0;
    }
    const uint32_t seq = fused_next(f, chained);
    void *const caller = stream;
    *rc = gpu_fused_launch(f->stream, f->ev, &caller, sendbuf, recvbuf, fused_out(f),
                           fused_in(f), fused_flags(f), seq, c->size, c->rank, a->count,
                           a->dt, a->op, NULL);
    if (*rc != FC_SUCCESS) {
        /* nothing queued, nothing sent: this call and the later ones run
         * the usual way */
        FC_WARN(LOG_COLL, "%s: small device allreduces take the staged path from now on",
                fc_last_error());
        gpu_event_put(ev);
        *rc = FC_SUCCESS;
        if (chained) /* the earlier kernels keep the buffers */
            fused_turn_off(sh, f);
        else
            fused_fail(c, f, seq, FC_SUCCESS);
        return 0;
    }
    pthread_mutex_lock(&sh->lock); /* other communicators of the family claim under it */
    f->kseq = seq;
    f->pending = seq;
    f->chain = stream;
    f->chain_owner = gpu_stream_owner(stream);
    pthread_mutex_unlock(&sh->lock);
    /* after the kernel: tells a kernel that will never put its vector out
     * (an earlier failure on the stream) from one still queued */
    *rc = gpu_event_record_raw(ev, stream);
    struct fc_request *r = NULL;
    uint64_t tb;
    if (*rc == FC_SUCCESS)
        *rc = comm_build_algo(c, a, &coll_allreduce_gather_xchg, "the fused device path", NULL,
                              fused_tmp(f), &r, &tb);
    if (*rc == FC_SUCCESS) {
        r->fused = seq;
        r->ready = ev;
        *rc = gpu_queue_add(c, r, &fused_path, stream, tb, NULL, fused_tmp(f));
        if (*rc == FC_SUCCESS)
            return 1;
        pthread_mutex_lock(&sh->lock); /* a reused schedule's scratch is the family's */
        comm_request_free(r);
        pthread_mutex_unlock(&sh->lock);
    }
    /* the kernel is queued: it gives up; this rank left the sequence */
    gpu_event_put(ev);
    fused_fail(c, f, seq, *rc);
    return 1;
}

/* Lock held (progress): 1 once the stream's kernel has put the vector out
 * (its copy is then in the exchange's buffer), 0 while not, -1 when it
 * never will (a failure on the stream: the kernel did not run, or left). */
static int fused_stream_ready(struct fc_request *r)
{
    struct fused *f = r->comm->sh->fused;
    const size_t bytes = r->key.count * r->key.esize;
    int e = 0;
    if ((int32_t)(__atomic_load_n(&fused_flags(f)[3], __ATOMIC_ACQUIRE) - r->fused) >= 0) {
        FC_ERR(FC_ERR_CUDA, "an earlier fused small allreduce on this stream failed, and this "
               "call's kernel on GPU %d gave up with it", f->device);
        return -1;
    }
    if (!fused_words_have(fused_out(f), bytes, r->fused)) {
        e = gpu_event_done(r->ready);
        if (e == 0)
            return 0;
        if (e < 0 || !fused_words_have(fused_out(f), bytes, r->fused)) {
            if (e > 0)
                FC_ERR(FC_ERR_CUDA,
                       "the fused kernel on GPU %d ended without putting its vector out",
                       f->device);
            return -1;
        }
    }
    fused_words_get(fused_out(f), r->recvbuf, bytes);
    return 1;
}

/* Lock held: the stream's exchange is over. Success: the other vectors go
 * in and the buffers stay busy until the kernel is done; failure: the
 * kernel gives up and the fused path retires. */
static void fused_stream_done(struct fc_request *r)
{
    struct fc_comm *c = r->comm;
    struct fused *f = c->sh->fused;
    if (r->result != FC_SUCCESS) {
        fused_retire_locked(f, f->seq); /* the kernels chained behind it too */
        return;
    }
    fused_put_others(f, c->size, r->fused, r->key.count * r->key.esize);
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
