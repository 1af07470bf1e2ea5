/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Stream-ordered collectives on the executor lanes (fc_*_stream).
 *
 * Stream ordering (NCCL semantics). Device buffers (the usual case): all
 * of the collective's GPU work runs on the caller's stream, in one kernel
 * of ours queued there at the call (an executor: gpu.h), which runs the
 * copies and reductions the progress thread posts to it as the collective
 * goes, and leaves when it is over; later work on the stream waits for
 * the kernel. Nothing of ours sits on another stream, where CUDA's
 * hardware queues could hold it behind a waiting stream (stream-ordered
 * calls on several streams would then deadlock). The progress thread starts
 * the collective once the kernel runs (the stream's earlier work done).
 * The stream-ordered requests of one stream share the executor (a lane of
 * the device transport) and run one after another, as their kernels do.
 * Whatever a request stages through (pinned buffers, scratch) is set aside
 * at the call: while our kernels run, the progress thread makes no CUDA
 * call that allocates. Such a call takes the context's lock for writing,
 * which an application's cuMemFree (or cudaFree) holds while it waits for
 * the whole device, our kernels included: both would wait for ever.
 *
 * A host buffer with the other on the device: the request runs on the
 * lane's staging block, copied in from the host buffer before our kernel
 * or out to it after, on the caller's stream (a host function does the
 * pageable side). CUDA's per-thread default stream: one lane per calling
 * thread. Lanes are at most 32 per family; an idle one (its kernels gone)
 * serves a new stream, and a call finding all 32 busy waits for one
 * (bounded by FC_TIMEOUT). Where no executor can be made (out of pinned
 * memory) the call fails and says so: there is no second way. (A caller's
 * stream waiting on a pinned host word raised by the progress thread, with
 * the copies on streams of our own, would need allocations in the
 * progress thread, which a cudaFree meanwhile could hang, and its stream
 * wait could hold back a hardware queue that our own streams share.) A
 * call with nothing to move (count 0) returns at once.
 * Errors are kept and returned by the next call on the communicator and
 * by fc_comm_query.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "comm_gpu.h"
#include "fused.h"
#include "gpu.h"
#include "gpu_tp.h"
#include "log.h"
#include "queue.h"

/* ---- how a lane's request meets its stream (queue.h) ---------------------- */

/* The work queued before it is done and our kernel runs: its GPU work goes
 * to the kernel from now on. */
static int lane_ready(struct fc_request *r)
{
    int d = gpu_event_done(r->ready);
    if (d > 0)
        d = gpu_tp_lane_started(r->lane, r->launch);
    if (d > 0)
        gpu_tp_lane_open(r->lane);
    return d;
}

/* The kernel leaves after the work posted so far. */
static void lane_done(struct fc_request *r)
{
    fc_result_t rc = gpu_tp_lane_close(r->lane);
    if (rc != FC_SUCCESS)
        comm_break(r->comm, rc, "%.200s: %.280s", comm_request_desc(r), err_get());
    r->lane = NULL;
}

static const char *lane_waits_for(struct fc_request *r)
{
    return gpu_event_done(r->ready) > 0
               ? "the work before it is done, but our kernel on the stream has not started"
               : "the work queued before it is not done";
}

static const struct gpu_stream_path lane_path = {
    .ready = lane_ready,
    .done = lane_done,
    .waits_for = lane_waits_for,
};

/* The host buffer of a mixed call (the other on the device): the request
 * runs on the lane's staging block instead, copied in or out on the
 * caller's stream around our kernel. */
struct lane_stage {
    const void *in; /* host sendbuf */
    void *out;      /* host recvbuf */
    size_t len;
};

static void stage_of(const struct coll_args *a, const void *sendbuf, void *recvbuf,
                     struct lane_stage *st)
{
    struct gpu_ptr p;
    size_t sb = coll_region_bytes(a, 0), rb = coll_region_bytes(a, 1);
    memset(st, 0, sizeof(*st));
    if (sb && sendbuf && (gpu_ptr_info(sendbuf, &p) != FC_SUCCESS || p.kind == GPU_HOST)) {
        st->in = sendbuf;
        st->len = sb;
    } else if (rb && recvbuf && (gpu_ptr_info(recvbuf, &p) != FC_SUCCESS || p.kind == GPU_HOST)) {
        st->out = recvbuf;
        st->len = rb;
    }
}

/* The stream's lane: found, made (outside the family's lock: CUDA
 * allocations may wait for the GPU, whose spinning kernels may wait for
 * the progress thread), or, with 32 in use, an idle one taken over; with
 * none idle the call waits for one, bounded by FC_TIMEOUT. Launch lock
 * held: the caller launches on the lane before anyone else looks. */
static fc_result_t lane_get(struct fc_comm *c, void *stream, struct gpu_tp **out)
{
    struct comm_shared *sh = c->sh;
    uint64_t owner = gpu_stream_owner(stream);
    double t0 = 0;
    for (;;) {
        pthread_mutex_lock(&sh->lock);
        struct gpu_tp *lane = gpu_tp_lane(sh->gpu, stream, owner);
        int room = gpu_tp_lane_room(sh->gpu);
        if (!lane && !room)
            lane = gpu_tp_lane_reuse(sh->gpu, stream, owner);
        pthread_mutex_unlock(&sh->lock);
        if (lane || room) {
            *out = lane;
            break;
        }
        double now = comm_now();
        if (t0 == 0) {
            t0 = now;
            static int told;
            if (!told++)
                FC_INFO(LOG_COLL, "stream-ordered calls in flight on 32 streams of one family: "
                        "a call on another stream waits until one of them is done");
        } else if (c->broken != FC_SUCCESS) {
            return FC_ERR_QUIET(c->broken, "an earlier operation on this communicator failed: "
                                "%s", c->brokenmsg);
        } else if (c->cfg.timeout > 0 && now - t0 > c->cfg.timeout) {
            return FC_ERR(FC_ERR_TIMEOUT, "a stream-ordered call on stream %p waited %.0f s "
                          "(FC_TIMEOUT) for one of the 32 stream executors of this "
                          "communicator family: their calls have not finished (their streams' "
                          "earlier work is long or stuck, or a peer has not joined them)",
                          stream, now - t0);
        }
        usleep(20);
    }
    if (*out)
        return FC_SUCCESS;
    struct gpu_tp *lane = gpu_tp_lane_new(sh->gpu, stream, owner);
    if (!lane)
        return FC_ERR(FC_ERR_CUDA,
                      "no stream executor can be made for stream %p on GPU %d (%s): a "
                      "stream-ordered call needs one (pinned host memory for its command ring "
                      "and a kernel on the stream); free pinned memory, or use the blocking "
                      "call",
                      stream, gpu_tp_device(sh->gpu), err_get());
    pthread_mutex_lock(&sh->lock);
    gpu_tp_lane_add(sh->gpu, lane);
    pthread_mutex_unlock(&sh->lock);
    *out = lane;
    return FC_SUCCESS;
}

/* The executor path (see the top): the stream's lane, what the request
 * will stage set aside, a host buffer's copy in, our kernel queued on the
 * stream, the request queued for the progress thread (*queued), the copy
 * out. */
static fc_result_t lane_enqueue(struct fc_comm *c, struct fc_request *r, void *stream,
                                uint64_t tagbase, const void *sendbuf, void *recvbuf,
                                const struct lane_stage *st, int *queued)
{
    struct comm_shared *sh = c->sh;
    pthread_mutex_lock(&sh->launch_lock); /* lanes, launches and queue in one order */
    struct gpu_tp *lane = NULL;
    fc_result_t rc = lane_get(c, stream, &lane);
    if (rc != FC_SUCCESS) {
        pthread_mutex_unlock(&sh->launch_lock);
        return rc;
    }
    /* what the request will stage, set aside now: once its kernel runs,
     * nothing of it may wait for a CUDA allocation */
    struct gpu_tp_need need = {.lane = lane, .window = c->window};
    sched_xfer_shapes(&r->s, c->chunk, gpu_tp_need_add, &need);
    rc = gpu_tp_lane_reserve(lane, &need, r->s.scratch ? 0 : r->s.scratch_bytes, &sh->lock);
    void *dstage = NULL;
    if (rc == FC_SUCCESS && st->len)
        rc = gpu_tp_lane_stage(lane, st->len, &dstage);
    if (rc == FC_SUCCESS && st->in) {
        rc = gpu_tp_lane_stage_copy(lane, (void *)st->in, st->len, 1);
        sendbuf = dstage;
    }
    if (st->out)
        recvbuf = dstage;
    if (rc == FC_SUCCESS) {
        pthread_mutex_lock(&sh->lock);
        rc = gpu_queue_prepare(sh);
        pthread_mutex_unlock(&sh->lock);
    }
    if (rc == FC_SUCCESS)
        rc = gpu_tp_lane_launch(lane, &r->launch);
    if (rc == FC_SUCCESS) {
        /* the kernel runs until its request closes it: queued whatever
         * comes next */
        pthread_mutex_lock(&sh->lock);
        r->lane = lane;
        r->tp = gpu_tp_transport(lane);
        gpu_queue_add_locked(sh, r, &lane_path, stream, tagbase, sendbuf, recvbuf);
        pthread_mutex_unlock(&sh->lock);
        *queued = 1; /* r is the progress thread's now */
        if (st->out)
            rc = gpu_tp_lane_stage_copy(lane, st->out, st->len, 0);
    }
    pthread_mutex_unlock(&sh->launch_lock);
    return rc;
}

fc_result_t gpu_stream_collective(struct fc_comm *c, const struct coll_args *a,
                                  const void *sendbuf, void *recvbuf, void *stream)
{
    const char *why;
    if (!gpu_available(&why))
        return FC_ERR(FC_ERR_UNSUPPORTED, "stream-ordered collectives need CUDA: %s", why);
    if (c->broken != FC_SUCCESS)
        return FC_ERR_QUIET(c->broken, "an earlier operation on this communicator failed: %s",
                            c->brokenmsg);
    /* refused before the call takes its sequence number, so that this rank
     * stays in step: the plain call on the same buffers may follow, and
     * joins the peers' stream-ordered call */
    size_t moves = coll_is_v(a->kind) ? coll_region_bytes(a, 0) + coll_region_bytes(a, 1)
                                      : a->count;
    if (moves > 0 && !gpu_on_device(sendbuf) && !gpu_on_device(recvbuf))
        return FC_ERR(FC_ERR_INVALID_ARGUMENT,
                      "stream-ordered collectives take device buffers; these are host memory "
                      "(use the plain call)");
    struct fc_request *r;
    uint64_t tb;
    fc_result_t rc = comm_build(c, a, COMM_ON_STREAM, stream, sendbuf, recvbuf, &r, &tb);
    if (rc != FC_SUCCESS)
        return rc;
    if (gpu_fused_call(r)) { /* a small allreduce: the fused kernel on the stream */
        rc = gpu_fused_enqueue(c, r, stream, tb, sendbuf, recvbuf);
        if (rc == FC_SUCCESS)
            return FC_SUCCESS;
        comm_break(c, rc, "a stream-ordered allreduce could not be queued: %.400s", err_get());
        pthread_mutex_lock(&c->sh->lock); /* its end retires the fused path */
        comm_request_free(r);
        pthread_mutex_unlock(&c->sh->lock);
        return rc;
    }
    if (!r->tp) { /* count 0 on host buffers: nothing to move, nothing to order (as NCCL) */
        comm_request_free(r);
        return FC_SUCCESS;
    }
    int dev = c->gpu_device >= 0 ? c->gpu_device : 0;
    rc = gpu_event_get(dev, &r->ready);
    if (rc == FC_SUCCESS)
        rc = gpu_event_record_raw(r->ready, stream);
    int queued = 0;
    if (rc == FC_SUCCESS) {
        struct lane_stage st;
        stage_of(a, sendbuf, recvbuf, &st);
        rc = lane_enqueue(c, r, stream, tb, sendbuf, recvbuf, &st, &queued);
    }
    if (queued) { /* later work on the stream waits for our kernel */
        if (rc == FC_SUCCESS)
            return FC_SUCCESS;
        return FC_ERR(rc, "the collective runs, but its result cannot reach the host recvbuf: "
                      "%s", err_get());
    }
    gpu_event_put(r->ready);
    comm_request_free(r);
    /* its sequence number is taken: the peers wait for this call */
    comm_break(c, rc, "a stream-ordered %s could not be queued: %.400s",
               coll_kind_name(a->kind), err_get());
    return rc;
}

