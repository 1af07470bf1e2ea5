/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The stream-ordered queue (queue.h): requests wait here, in call order,
 * for their stream; the progress engine starts them (gpu_queue_start_ready,
 * the family's stream_start_ready hook) and ends them (queue_finished, each
 * request's on_finish). What "the stream has reached it" means is the
 * path's (struct gpu_stream_path): this file knows no lane and no fused
 * kernel, and calls nothing of the device transport.
 */
#define _GNU_SOURCE
#include "queue.h"

#include <pthread.h>
#include <stdint.h>

#include "gpu.h"
#include "log.h"

/* stream-ordered requests in flight per family, at most */
#define STREAM_MAX 4095

/* r->on_finish of a queued request: nobody waits for it. */
static void queue_finished(struct fc_request *r)
{
    struct fc_comm *c = r->comm;
    struct comm_shared *sh = c->sh;
    if (comm_break(c, r->result, "%.200s (stream-ordered): %.280s", comm_request_desc(r),
                   r->s.errmsg))
        FC_WARN(LOG_COLL, "%s", c->brokenmsg);
    r->spath->done(r);
    FC_TRACE(LOG_COLL, "%s: finished (stream-ordered)", comm_request_desc(r));
    gpu_event_put(r->ready);
    r->ready = NULL;
    if (r->s.xfers_out > 0 && sh->failed == FC_SUCCESS) {
        r->next = sh->zombies;
        sh->zombies = r;
    } else {
        comm_request_free(r);
    }
    sh->stream_active--;
    sh->stream_gen++;
}

/* The oldest stream-ordered request has waited FC_TIMEOUT for its stream:
 * said once (not an error: the stream's earlier work may be long). */
static void stream_wait_note(struct fc_request *r)
{
    double limit = r->comm->cfg.timeout, now = comm_now();
    if (r->queued_at == 0) {
        r->queued_at = now;
        return;
    }
    if (limit <= 0 || now - r->queued_at < limit || r->wait_noted)
        return;
    r->wait_noted = 1;
    FC_WARN(LOG_COLL, "%s (stream-ordered) has waited %.0f s (FC_TIMEOUT) to start on rank %d "
            "of %d: %s. The caller's stream %p has not reached it: its earlier work is long or "
            "stuck",
            comm_request_desc(r), now - r->queued_at, r->comm->rank, r->comm->size,
            r->spath->waits_for(r), r->stream);
}

void gpu_queue_start_ready(struct comm_shared *sh)
{
    while (sh->stream_q) {
        struct fc_request *r = sh->stream_q;
        int d = r->spath->ready(r);
        if (d == 0) {
            stream_wait_note(r);
            return;
        }
        sh->stream_q = r->next;
        if (!sh->stream_q)
            sh->stream_q_tail = NULL;
        r->next = NULL;
        fc_result_t rc = d < 0 ? FC_ERR_CUDA : FC_SUCCESS;
        if (rc != FC_SUCCESS)
            sched_fail(&r->s, rc, "the work queued before it on the stream failed: %s",
                       err_get());
        else if (r->comm->broken != FC_SUCCESS)
            sched_fail(&r->s, rc = r->comm->broken, "an earlier operation failed");
        else if ((rc = comm_start_locked(r, r->sendbuf, r->recvbuf, r->tagbase, NULL, 0)) !=
                 FC_SUCCESS)
            sched_fail(&r->s, rc, "%s", err_get());
        if (rc != FC_SUCCESS) {
            r->done = 1;
            r->result = rc;
            queue_finished(r);
        } else {
            FC_TRACE(LOG_COLL, "%s: started (stream-ordered, the stream's earlier work done)",
                     comm_request_desc(r));
        }
        sh->stream_gen++;
    }
}

/* What a stream-ordered request needs before it is queued: room among
 * the family's requests in flight, the progress thread. Lock held. */
fc_result_t gpu_queue_prepare(struct comm_shared *sh)
{
    fc_result_t rc = FC_SUCCESS;
    if (sh->stream_active >= STREAM_MAX)
        rc = FC_ERR(FC_ERR_UNSUPPORTED, "more than %d stream-ordered operations in flight on "
                    "this communicator family: synchronize a stream now and then",
                    STREAM_MAX);
    if (rc == FC_SUCCESS && !sh->thread_on) {
        /* stream-ordered work needs someone to drive it while the caller
         * is away: the progress thread */
        if (pthread_create(&sh->thread, NULL, comm_progress_main, sh) == 0)
            sh->thread_on = 1;
        else
            rc = FC_ERR(FC_ERR_SYSTEM, "cannot start the progress thread: %m");
    }
    return rc;
}

void gpu_queue_add_locked(struct comm_shared *sh, struct fc_request *r,
                          const struct gpu_stream_path *path, void *stream, uint64_t tagbase,
                          const void *sendbuf, void *recvbuf)
{
    r->spath = path;
    r->on_finish = queue_finished;
    r->stream = stream;
    r->tagbase = tagbase;
    r->sendbuf = (void *)sendbuf;
    r->recvbuf = recvbuf;
    r->stream_ordered = 1;
    r->next = NULL;
    if (sh->stream_q_tail)
        sh->stream_q_tail->next = r;
    else
        sh->stream_q = r;
    sh->stream_q_tail = r;
    sh->stream_active++;
    sh->stream_gen++;
    pthread_cond_signal(&sh->cond);
}

fc_result_t gpu_queue_add(struct fc_comm *c, struct fc_request *r,
                          const struct gpu_stream_path *path, void *stream, uint64_t tagbase,
                          const void *sendbuf, void *recvbuf)
{
    struct comm_shared *sh = c->sh;
    pthread_mutex_lock(&sh->lock);
    fc_result_t rc = gpu_queue_prepare(sh);
    if (rc == FC_SUCCESS)
        gpu_queue_add_locked(sh, r, path, stream, tagbase, sendbuf, recvbuf);
    pthread_mutex_unlock(&sh->lock);
    return rc;
}

/* A lane's kernels must run one after the other on one stream, so on the
 * per-thread default stream a lane is the calling thread's (a token never
 * reused). */
#define STREAM_PER_THREAD ((void *)0x2) /* CU_STREAM_PER_THREAD */
uint64_t gpu_stream_owner(void *stream)
{
    static __thread uint64_t me;
    static uint64_t next;
    if (stream != STREAM_PER_THREAD)
        return 0;
    if (!me)
        me = __atomic_add_fetch(&next, 1, __ATOMIC_RELAXED);
    return me;
}
