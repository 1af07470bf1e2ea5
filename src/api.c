/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The public entry points: argument checks (each failure is
 * FC_ERR_INVALID_ARGUMENT with a message naming the call and the
 * argument, before anything is sent), then the communicator layer.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot.h"
#include "comm.h"
#include "comm_gpu.h"
#include "log.h"

/* ---- argument checks ------------------------------------------------------ */

static fc_result_t check_comm(fc_comm_t c)
{
    if (!c)
        return FC_ERR(FC_ERR_INVALID_ARGUMENT, "comm is NULL");
    return FC_SUCCESS;
}

static fc_result_t check_type(fc_datatype_t dt, size_t *esize)
{
    if (!reduce_dt_valid((int)dt))
        return FC_ERR(FC_ERR_INVALID_ARGUMENT,
                      "datatype %d is not valid (FC_INT8 .. FC_FLOAT8_E5M2, 0..11)", (int)dt);
    *esize = fc_datatype_size(dt);
    return FC_SUCCESS;
}

/* A built-in op, or a pre-scaled sum made on comm for dt: *op becomes
 * FC_SUM, its scalar is copied to scalar (8 bytes) and *premul points
 * there (NULL for a built-in op). */
static fc_result_t check_op(fc_comm_t comm, fc_op_t *op, fc_datatype_t dt, unsigned char *scalar,
                           const void **premul)
{
    *premul = NULL;
    if (reduce_op_valid((int)*op))
        return FC_SUCCESS;
    const int i = (int)*op - COMM_PREMUL_OP0;
    fc_result_t rc = FC_SUCCESS;
    pthread_mutex_lock(&comm->sh->lock);
    const struct comm_premul *p = i >= 0 && i < comm->npremul && comm->premul[i].used
                                      ? &comm->premul[i]
                                      : NULL;
    if (!p)
        rc = FC_ERR(FC_ERR_INVALID_ARGUMENT,
                    "op %d is not valid: neither FC_SUM, FC_PROD, FC_MIN, FC_MAX, FC_AVG nor an "
                    "op fc_op_create_premulsum made on this communicator and not yet destroyed",
                    (int)*op);
    else if (p->dt != dt)
        rc = FC_ERR(FC_ERR_INVALID_ARGUMENT,
                    "op %d is a pre-scaled sum of %s, used here on %s: make one per datatype",
                    (int)*op, reduce_dt_name((int)p->dt), reduce_dt_name((int)dt));
    else {
        memcpy(scalar, p->scalar, sizeof(p->scalar));
        *premul = scalar;
    }
    pthread_mutex_unlock(&comm->sh->lock);
    if (rc == FC_SUCCESS)
        *op = FC_SUM;
    return rc;
}

/* count * esize * mult must fit in size_t (and stay below 2^62: the engine
 * adds offsets to it). */
static fc_result_t check_count(size_t count, size_t esize, size_t mult, const char *what)
{
    size_t lim = ((size_t)1 << 62) / esize;
    if (mult && count > lim / mult)
        return FC_ERR(FC_ERR_INVALID_ARGUMENT,
                      "%s %zu is too large: %zu x %zu-byte elements overflow the address space",
                      what, count, count * (mult ? mult : 1), esize);
    return FC_SUCCESS;
}

static fc_result_t check_buf(const void *p, size_t bytes, size_t esize, const char *name)
{
    if (bytes == 0)
        return FC_SUCCESS;
    if (!p)
        return FC_ERR(FC_ERR_INVALID_ARGUMENT, "%s is NULL with a nonzero count", name);
    if ((uintptr_t)p % esize)
        return FC_ERR(FC_ERR_INVALID_ARGUMENT,
                      "%s %p is not aligned to its %zu-byte element size", name, p, esize);
    return FC_SUCCESS;
}

/* sendbuf and recvbuf must be the same (the in-place form; for allgather
 * and reduce-scatter: this rank's block of the larger buffer) or disjoint:
 * buffers that partly overlap would be read after they were written. */
static fc_result_t check_overlap(const void *sendbuf, size_t sbytes, const void *recvbuf,
                                 size_t rbytes, int in_place)
{
    if (in_place || !sendbuf || !recvbuf || sbytes == 0 || rbytes == 0)
        return FC_SUCCESS;
    uintptr_t s = (uintptr_t)sendbuf, r = (uintptr_t)recvbuf;
    if (s < r + rbytes && r < s + sbytes)
        return FC_ERR(FC_ERR_INVALID_ARGUMENT,
                      "sendbuf %p (%zu bytes) and recvbuf %p (%zu bytes) partly overlap: pass "
                      "disjoint buffers, or the same pointer for the call's in-place form",
                      sendbuf, sbytes, recvbuf, rbytes);
    return FC_SUCCESS;
}

static fc_result_t check_rank(int r, int size, const char *what)
{
    if (r < 0 || r >= size)
        return FC_ERR(FC_ERR_INVALID_ARGUMENT, "%s %d is out of range (communicator of %d ranks)",
                      what, r, size);
    return FC_SUCCESS;
}

/* How a collective runs: to completion (the plain calls), started with
 * its request handed back (the fc_i* calls: req), or queued on a CUDA
 * stream (the *_stream twins: on_stream, stream NULL being the legacy
 * default stream). Every do_* below takes one. */
struct how {
    fc_request_t *req;
    int on_stream;
    void *stream;
};
static const struct how BLOCKING = {0};
#define NONBLOCKING(r) (&(const struct how){.req = (r)})
#define ON_STREAM(s) (&(const struct how){.on_stream = 1, .stream = (s)})

static fc_result_t run(fc_comm_t c, const struct coll_args *a, const void *sendbuf,
                       void *recvbuf, const struct how *h)
{
    if (h->on_stream)
        return gpu_stream_collective(c, a, sendbuf, recvbuf, h->stream);
    fc_request_t *req = h->req;
    struct fc_request *r = NULL;
    const int grouped = !req && group_active(); /* a blocking call in a group */
    fc_result_t rc = comm_collective(c, a, req || grouped ? COMM_NONBLOCKING : COMM_BLOCKING,
                                     sendbuf, recvbuf, &r);
    if (rc != FC_SUCCESS)
        return rc;
    if (req) {
        *req = r;
        return FC_SUCCESS;
    }
    return grouped ? group_add(r) : comm_wait(r);
}

static fc_result_t named(const char *fn, fc_result_t rc)
{
    if (rc != FC_SUCCESS)
        err_prefix(fn);
    return rc;
}

static struct coll_args args_of(fc_comm_t c, enum coll_kind k, size_t count, fc_datatype_t dt,
                                fc_op_t op, int root, size_t esize, int in_place)
{
    struct coll_args a = {.kind = k, .rank = c->rank, .nranks = c->size, .root = root,
                          .count = count, .dt = dt, .op = op, .esize = esize,
                          .in_place = in_place, .node = c->node, .nnodes = c->nnodes};
    return a;
}

/* ---- allreduce / broadcast / reduce --------------------------------------- */

static fc_result_t do_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                                fc_datatype_t dt, fc_op_t op, fc_comm_t comm, const struct how *h)
{
    fc_result_t rc;
    size_t es = 1;
    const void *pm = NULL;
    unsigned char pms[8];
    if ((rc = check_comm(comm)) != FC_SUCCESS ||
        (rc = check_type(dt, &es)) != FC_SUCCESS ||
        (rc = check_op(comm, &op, dt, pms, &pm)) != FC_SUCCESS ||
        (rc = check_count(count, es, 1, "count")) != FC_SUCCESS ||
        (rc = check_buf(sendbuf, count * es, es, "sendbuf")) != FC_SUCCESS ||
        (rc = check_buf(recvbuf, count * es, es, "recvbuf")) != FC_SUCCESS ||
        (rc = check_overlap(sendbuf, count * es, recvbuf, count * es, sendbuf == recvbuf)) !=
            FC_SUCCESS)
        return rc;
    struct coll_args a = args_of(comm, COLL_ALLREDUCE, count, dt, op, 0, es, sendbuf == recvbuf);
    a.premul = pm;
    return run(comm, &a, sendbuf, recvbuf, h);
}

fc_result_t fc_allreduce(const void *sendbuf, void *recvbuf, size_t count, fc_datatype_t dt,
                         fc_op_t op, fc_comm_t comm)
{
    return named("fc_allreduce", do_allreduce(sendbuf, recvbuf, count, dt, op, comm, &BLOCKING));
}

fc_result_t fc_iallreduce(const void *sendbuf, void *recvbuf, size_t count, fc_datatype_t dt,
                          fc_op_t op, fc_comm_t comm, fc_request_t *req)
{
    if (!req)
        return named("fc_iallreduce", FC_ERR(FC_ERR_INVALID_ARGUMENT, "req is NULL"));
    return named("fc_iallreduce",
                 do_allreduce(sendbuf, recvbuf, count, dt, op, comm, NONBLOCKING(req)));
}

static fc_result_t do_broadcast(const void *sendbuf, void *recvbuf, size_t count,
                                fc_datatype_t dt, int root, fc_comm_t comm, const struct how *h)
{
    fc_result_t rc;
    size_t es = 1;
    if ((rc = check_comm(comm)) != FC_SUCCESS ||
        (rc = check_type(dt, &es)) != FC_SUCCESS ||
        (rc = check_rank(root, comm->size, "root")) != FC_SUCCESS ||
        (rc = check_count(count, es, 1, "count")) != FC_SUCCESS ||
        (comm->rank == root &&
         (rc = check_buf(sendbuf, count * es, es, "sendbuf (at the root)")) != FC_SUCCESS) ||
        (rc = check_buf(recvbuf, count * es, es, "recvbuf")) != FC_SUCCESS ||
        (comm->rank == root && (rc = check_overlap(sendbuf, count * es, recvbuf, count * es,
                                                   sendbuf == recvbuf)) != FC_SUCCESS))
        return rc;
    struct coll_args a = args_of(comm, COLL_BCAST, count, dt, FC_SUM, root, es,
                                 comm->rank == root && sendbuf == recvbuf);
    return run(comm, &a, comm->rank == root ? sendbuf : NULL, recvbuf, h);
}

fc_result_t fc_broadcast(const void *sendbuf, void *recvbuf, size_t count, fc_datatype_t dt,
                         int root, fc_comm_t comm)
{
    return named("fc_broadcast", do_broadcast(sendbuf, recvbuf, count, dt, root, comm, &BLOCKING));
}

fc_result_t fc_ibroadcast(const void *sendbuf, void *recvbuf, size_t count, fc_datatype_t dt,
                          int root, fc_comm_t comm, fc_request_t *req)
{
    if (!req)
        return named("fc_ibroadcast", FC_ERR(FC_ERR_INVALID_ARGUMENT, "req is NULL"));
    return named("fc_ibroadcast",
                 do_broadcast(sendbuf, recvbuf, count, dt, root, comm, NONBLOCKING(req)));
}

static fc_result_t do_reduce(const void *sendbuf, void *recvbuf, size_t count, fc_datatype_t dt,
                             fc_op_t op, int root, fc_comm_t comm, const struct how *h)
{
    fc_result_t rc;
    size_t es = 1;
    const void *pm = NULL;
    unsigned char pms[8];
    if ((rc = check_comm(comm)) != FC_SUCCESS ||
        (rc = check_type(dt, &es)) != FC_SUCCESS ||
        (rc = check_op(comm, &op, dt, pms, &pm)) != FC_SUCCESS ||
        (rc = check_rank(root, comm->size, "root")) != FC_SUCCESS ||
        (rc = check_count(count, es, 1, "count")) != FC_SUCCESS ||
        (rc = check_buf(sendbuf, count * es, es, "sendbuf")) != FC_SUCCESS ||
        (comm->rank == root &&
         (rc = check_buf(recvbuf, count * es, es, "recvbuf (at the root)")) != FC_SUCCESS) ||
        (comm->rank == root && (rc = check_overlap(sendbuf, count * es, recvbuf, count * es,
                                                   sendbuf == recvbuf)) != FC_SUCCESS))
        return rc;
    struct coll_args a = args_of(comm, COLL_REDUCE, count, dt, op, root, es,
                                 comm->rank == root && sendbuf == recvbuf);
    a.premul = pm;
    return run(comm, &a, sendbuf, comm->rank == root ? recvbuf : NULL, h);
}

fc_result_t fc_reduce(const void *sendbuf, void *recvbuf, size_t count, fc_datatype_t dt,
                      fc_op_t op, int root, fc_comm_t comm)
{
    return named("fc_reduce", do_reduce(sendbuf, recvbuf, count, dt, op, root, comm, &BLOCKING));
}

fc_result_t fc_ireduce(const void *sendbuf, void *recvbuf, size_t count, fc_datatype_t dt,
                       fc_op_t op, int root, fc_comm_t comm, fc_request_t *req)
{
    if (!req)
        return named("fc_ireduce", FC_ERR(FC_ERR_INVALID_ARGUMENT, "req is NULL"));
    return named("fc_ireduce",
                 do_reduce(sendbuf, recvbuf, count, dt, op, root, comm, NONBLOCKING(req)));
}

/* ---- allgather / reduce_scatter / alltoall / barrier ---------------------- */

static fc_result_t do_allgather(const void *sendbuf, void *recvbuf, size_t count,
                                fc_datatype_t dt, fc_comm_t comm, const struct how *h)
{
    fc_result_t rc;
    size_t es = 1;
    if ((rc = check_comm(comm)) != FC_SUCCESS ||
        (rc = check_type(dt, &es)) != FC_SUCCESS ||
        (rc = check_count(count, es, (size_t)comm->size, "sendcount")) != FC_SUCCESS ||
        (rc = check_buf(sendbuf, count * es, es, "sendbuf")) != FC_SUCCESS ||
        (rc = check_buf(recvbuf, count * es * (size_t)comm->size, es, "recvbuf")) != FC_SUCCESS)
        return rc;
    int ip = count > 0 && sendbuf == (const char *)recvbuf + (size_t)comm->rank * count * es;
    if ((rc = check_overlap(sendbuf, count * es, recvbuf, count * es * (size_t)comm->size, ip)) !=
        FC_SUCCESS)
        return rc;
    struct coll_args a = args_of(comm, COLL_ALLGATHER, count, dt, FC_SUM, 0, es, ip);
    return run(comm, &a, sendbuf, recvbuf, h);
}

fc_result_t fc_allgather(const void *sendbuf, void *recvbuf, size_t sendcount, fc_datatype_t dt,
                         fc_comm_t comm)
{
    return named("fc_allgather", do_allgather(sendbuf, recvbuf, sendcount, dt, comm, &BLOCKING));
}

fc_result_t fc_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                          fc_datatype_t dt, fc_comm_t comm, fc_request_t *req)
{
    if (!req)
        return named("fc_iallgather", FC_ERR(FC_ERR_INVALID_ARGUMENT, "req is NULL"));
    return named("fc_iallgather",
                 do_allgather(sendbuf, recvbuf, sendcount, dt, comm, NONBLOCKING(req)));
}

static fc_result_t do_reduce_scatter(const void *sendbuf, void *recvbuf, size_t count,
                                     fc_datatype_t dt, fc_op_t op, fc_comm_t comm,
                                     const struct how *h)
{
    fc_result_t rc;
    size_t es = 1;
    const void *pm = NULL;
    unsigned char pms[8];
    if ((rc = check_comm(comm)) != FC_SUCCESS ||
        (rc = check_type(dt, &es)) != FC_SUCCESS ||
        (rc = check_op(comm, &op, dt, pms, &pm)) != FC_SUCCESS ||
        (rc = check_count(count, es, (size_t)comm->size, "recvcount")) != FC_SUCCESS ||
        (rc = check_buf(sendbuf, count * es * (size_t)comm->size, es, "sendbuf")) != FC_SUCCESS ||
        (rc = check_buf(recvbuf, count * es, es, "recvbuf")) != FC_SUCCESS)
        return rc;
    int ip = count > 0 && recvbuf == (const char *)sendbuf + (size_t)comm->rank * count * es;
    if ((rc = check_overlap(sendbuf, count * es * (size_t)comm->size, recvbuf, count * es, ip)) !=
        FC_SUCCESS)
        return rc;
    struct coll_args a = args_of(comm, COLL_REDUCE_SCATTER, count, dt, op, 0, es, ip);
    a.premul = pm;
    return run(comm, &a, sendbuf, recvbuf, h);
}

fc_result_t fc_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                              fc_datatype_t dt, fc_op_t op, fc_comm_t comm)
{
    return named("fc_reduce_scatter",
                 do_reduce_scatter(sendbuf, recvbuf, recvcount, dt, op, comm, &BLOCKING));
}

fc_result_t fc_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                               fc_datatype_t dt, fc_op_t op, fc_comm_t comm, fc_request_t *req)
{
    if (!req)
        return named("fc_ireduce_scatter", FC_ERR(FC_ERR_INVALID_ARGUMENT, "req is NULL"));
    return named("fc_ireduce_scatter",
                 do_reduce_scatter(sendbuf, recvbuf, recvcount, dt, op, comm, NONBLOCKING(req)));
}

static fc_result_t do_alltoall(const void *sendbuf, void *recvbuf, size_t count,
                               fc_datatype_t dt, fc_comm_t comm, const struct how *h)
{
    fc_result_t rc;
    size_t es = 1;
    if ((rc = check_comm(comm)) != FC_SUCCESS ||
        (rc = check_type(dt, &es)) != FC_SUCCESS ||
        (rc = check_count(count, es, (size_t)comm->size, "count")) != FC_SUCCESS ||
        (rc = check_buf(sendbuf, count * es * (size_t)comm->size, es, "sendbuf")) != FC_SUCCESS ||
        (rc = check_buf(recvbuf, count * es * (size_t)comm->size, es, "recvbuf")) != FC_SUCCESS ||
        (rc = check_overlap(sendbuf, count * es * (size_t)comm->size, recvbuf,
                            count * es * (size_t)comm->size, sendbuf == recvbuf)) != FC_SUCCESS)
        return rc;
    struct coll_args a = args_of(comm, COLL_ALLTOALL, count, dt, FC_SUM, 0, es,
                                 sendbuf == recvbuf);
    return run(comm, &a, sendbuf, recvbuf, h);
}

fc_result_t fc_alltoall(const void *sendbuf, void *recvbuf, size_t count, fc_datatype_t dt,
                        fc_comm_t comm)
{
    return named("fc_alltoall", do_alltoall(sendbuf, recvbuf, count, dt, comm, &BLOCKING));
}

fc_result_t fc_ialltoall(const void *sendbuf, void *recvbuf, size_t count, fc_datatype_t dt,
                         fc_comm_t comm, fc_request_t *req)
{
    if (!req)
        return named("fc_ialltoall", FC_ERR(FC_ERR_INVALID_ARGUMENT, "req is NULL"));
    return named("fc_ialltoall", do_alltoall(sendbuf, recvbuf, count, dt, comm, NONBLOCKING(req)));
}

/* ---- gather / scatter --------------------------------------------------- */

static fc_result_t do_gather(const void *sendbuf, void *recvbuf, size_t count, fc_datatype_t dt,
                             int root, fc_comm_t comm, const struct how *h)
{
    fc_result_t rc;
    size_t es = 1;
    if ((rc = check_comm(comm)) != FC_SUCCESS ||
        (rc = check_type(dt, &es)) != FC_SUCCESS ||
        (rc = check_rank(root, comm->size, "root")) != FC_SUCCESS ||
        (rc = check_count(count, es, (size_t)comm->size, "sendcount")) != FC_SUCCESS ||
        (rc = check_buf(sendbuf, count * es, es, "sendbuf")) != FC_SUCCESS)
        return rc;
    const int is_root = comm->rank == root;
    const size_t all = count * es * (size_t)comm->size;
    int ip = is_root && count > 0 && sendbuf == (const char *)recvbuf + (size_t)root * count * es;
    if (is_root && ((rc = check_buf(recvbuf, all, es, "recvbuf (at the root)")) != FC_SUCCESS ||
                    (rc = check_overlap(sendbuf, count * es, recvbuf, all, ip)) != FC_SUCCESS))
        return rc;
    struct coll_args a = args_of(comm, COLL_GATHER, count, dt, FC_SUM, root, es, ip);
    return run(comm, &a, sendbuf, is_root ? recvbuf : NULL, h);
}

fc_result_t fc_gather(const void *sendbuf, void *recvbuf, size_t sendcount, fc_datatype_t dt,
                      int root, fc_comm_t comm)
{
    return named("fc_gather", do_gather(sendbuf, recvbuf, sendcount, dt, root, comm, &BLOCKING));
}

fc_result_t fc_igather(const void *sendbuf, void *recvbuf, size_t sendcount, fc_datatype_t dt,
                       int root, fc_comm_t comm, fc_request_t *req)
{
    if (!req)
        return named("fc_igather", FC_ERR(FC_ERR_INVALID_ARGUMENT, "req is NULL"));
    return named("fc_igather",
                 do_gather(sendbuf, recvbuf, sendcount, dt, root, comm, NONBLOCKING(req)));
}

static fc_result_t do_scatter(const void *sendbuf, void *recvbuf, size_t count, fc_datatype_t dt,
                              int root, fc_comm_t comm, const struct how *h)
{
    fc_result_t rc;
    size_t es = 1;
    if ((rc = check_comm(comm)) != FC_SUCCESS ||
        (rc = check_type(dt, &es)) != FC_SUCCESS ||
        (rc = check_rank(root, comm->size, "root")) != FC_SUCCESS ||
        (rc = check_count(count, es, (size_t)comm->size, "recvcount")) != FC_SUCCESS ||
        (rc = check_buf(recvbuf, count * es, es, "recvbuf")) != FC_SUCCESS)
        return rc;
    const int is_root = comm->rank == root;
    const size_t all = count * es * (size_t)comm->size;
    int ip = is_root && count > 0 && recvbuf == (const char *)sendbuf + (size_t)root * count * es;
    if (is_root && ((rc = check_buf(sendbuf, all, es, "sendbuf (at the root)")) != FC_SUCCESS ||
                    (rc = check_overlap(sendbuf, all, recvbuf, count * es, ip)) != FC_SUCCESS))
        return rc;
    struct coll_args a = args_of(comm, COLL_SCATTER, count, dt, FC_SUM, root, es, ip);
    return run(comm, &a, is_root ? sendbuf : NULL, recvbuf, h);
}

fc_result_t fc_scatter(const void *sendbuf, void *recvbuf, size_t recvcount, fc_datatype_t dt,
                       int root, fc_comm_t comm)
{
    return named("fc_scatter", do_scatter(sendbuf, recvbuf, recvcount, dt, root, comm, &BLOCKING));
}

fc_result_t fc_iscatter(const void *sendbuf, void *recvbuf, size_t recvcount, fc_datatype_t dt,
                        int root, fc_comm_t comm, fc_request_t *req)
{
    if (!req)
        return named("fc_iscatter", FC_ERR(FC_ERR_INVALID_ARGUMENT, "req is NULL"));
    return named("fc_iscatter",
                 do_scatter(sendbuf, recvbuf, recvcount, dt, root, comm, NONBLOCKING(req)));
}

/* ---- allgatherv / alltoallv --------------------------------------------- */

/* n counts and displacements (elements): present, and every block's end
 * within the address space; *extent: the end of the furthest nonzero
 * block. */
static fc_result_t check_vec(const size_t *counts, const size_t *displs, int n, size_t esize,
                             const char *cname, const char *dname, size_t *extent)
{
    if (!counts)
        return FC_ERR(FC_ERR_INVALID_ARGUMENT, "%s is NULL", cname);
    if (!displs)
        return FC_ERR(FC_ERR_INVALID_ARGUMENT, "%s is NULL", dname);
    const size_t lim = ((size_t)1 << 62) / esize;
    size_t e = 0;
    for (int i = 0; i < n; i++) {
        if (counts[i] > lim || displs[i] > lim - counts[i])
            return FC_ERR(FC_ERR_INVALID_ARGUMENT,
                          "%s[%d] = %zu at %s[%d] = %zu: the block's end overflows the address "
                          "space for %zu-byte elements",
                          cname, i, counts[i], dname, i, displs[i], esize);
        if (counts[i] && displs[i] + counts[i] > e)
            e = displs[i] + counts[i];
    }
    *extent = e;
    return FC_SUCCESS;
}

static fc_result_t do_allgatherv(const void *sendbuf, void *recvbuf, size_t count,
                                 const size_t *recvcounts, const size_t *displs, fc_datatype_t dt,
                                 fc_comm_t comm, const struct how *h)
{
    fc_result_t rc;
    size_t es = 1, ext = 0;
    if ((rc = check_comm(comm)) != FC_SUCCESS ||
        (rc = check_type(dt, &es)) != FC_SUCCESS ||
        (rc = check_vec(recvcounts, displs, comm->size, es, "recvcounts", "displs", &ext)) !=
            FC_SUCCESS)
        return rc;
    const int me = comm->rank;
    if (count != recvcounts[me])
        return FC_ERR(FC_ERR_INVALID_ARGUMENT,
                      "sendcount %zu differs from recvcounts[%d] = %zu (this rank's block)", count,
                      me, recvcounts[me]);
    if ((rc = check_buf(sendbuf, count * es, es, "sendbuf")) != FC_SUCCESS ||
        (rc = check_buf(recvbuf, ext * es, es, "recvbuf")) != FC_SUCCESS)
        return rc;
    int ip = count > 0 && sendbuf == (const char *)recvbuf + displs[me] * es;
    if ((rc = check_overlap(sendbuf, count * es, recvbuf, ext * es, ip)) != FC_SUCCESS)
        return rc;
    struct coll_args a = args_of(comm, COLL_ALLGATHERV, count, dt, FC_SUM, 0, es, ip);
    a.rcounts = recvcounts;
    a.rdispls = displs;
    return run(comm, &a, sendbuf, recvbuf, h);
}

fc_result_t fc_allgatherv(const void *sendbuf, void *recvbuf, size_t sendcount,
                          const size_t *recvcounts, const size_t *displs, fc_datatype_t dt,
                          fc_comm_t comm)
{
    return named("fc_allgatherv", do_allgatherv(sendbuf, recvbuf, sendcount, recvcounts, displs,
                                                dt, comm, &BLOCKING));
}

fc_result_t fc_iallgatherv(const void *sendbuf, void *recvbuf, size_t sendcount,
                           const size_t *recvcounts, const size_t *displs, fc_datatype_t dt,
                           fc_comm_t comm, fc_request_t *req)
{
    if (!req)
        return named("fc_iallgatherv", FC_ERR(FC_ERR_INVALID_ARGUMENT, "req is NULL"));
    return named("fc_iallgatherv", do_allgatherv(sendbuf, recvbuf, sendcount, recvcounts, displs,
                                                 dt, comm, NONBLOCKING(req)));
}

static fc_result_t do_alltoallv(const void *sendbuf, void *recvbuf, const size_t *sendcounts,
                                const size_t *sdispls, const size_t *recvcounts,
                                const size_t *rdispls, fc_datatype_t dt, fc_comm_t comm,
                                const struct how *h)
{
    fc_result_t rc;
    size_t es = 1, sext = 0, rext = 0;
    if ((rc = check_comm(comm)) != FC_SUCCESS ||
        (rc = check_type(dt, &es)) != FC_SUCCESS ||
        (rc = check_vec(sendcounts, sdispls, comm->size, es, "sendcounts", "sdispls", &sext)) !=
            FC_SUCCESS ||
        (rc = check_vec(recvcounts, rdispls, comm->size, es, "recvcounts", "rdispls", &rext)) !=
            FC_SUCCESS)
        return rc;
    const int me = comm->rank;
    if (sendcounts[me] != recvcounts[me])
        return FC_ERR(FC_ERR_INVALID_ARGUMENT,
                      "sendcounts[%d] = %zu differs from recvcounts[%d] = %zu (what this rank "
                      "sends itself)",
                      me, sendcounts[me], me, recvcounts[me]);
    if ((rc = check_buf(sendbuf, sext * es, es, "sendbuf")) != FC_SUCCESS ||
        (rc = check_buf(recvbuf, rext * es, es, "recvbuf")) != FC_SUCCESS)
        return rc;
    if (sext && rext && sendbuf == recvbuf)
        return FC_ERR(FC_ERR_INVALID_ARGUMENT,
                      "sendbuf and recvbuf are the same buffer: alltoallv has no in-place "
                      "form; pass disjoint buffers");
    if ((rc = check_overlap(sendbuf, sext * es, recvbuf, rext * es, 0)) != FC_SUCCESS)
        return rc;
    struct coll_args a = args_of(comm, COLL_ALLTOALLV, coll_v_sum(sendcounts, comm->size), dt,
                                 FC_SUM, 0, es, 0);
    a.scounts = sendcounts;
    a.sdispls = sdispls;
    a.rcounts = recvcounts;
    a.rdispls = rdispls;
    return run(comm, &a, sendbuf, recvbuf, h);
}

fc_result_t fc_alltoallv(const void *sendbuf, void *recvbuf, const size_t *sendcounts,
                         const size_t *sdispls, const size_t *recvcounts, const size_t *rdispls,
                         fc_datatype_t dt, fc_comm_t comm)
{
    return named("fc_alltoallv", do_alltoallv(sendbuf, recvbuf, sendcounts, sdispls, recvcounts,
                                              rdispls, dt, comm, &BLOCKING));
}

fc_result_t fc_ialltoallv(const void *sendbuf, void *recvbuf, const size_t *sendcounts,
                          const size_t *sdispls, const size_t *recvcounts, const size_t *rdispls,
                          fc_datatype_t dt, fc_comm_t comm, fc_request_t *req)
{
    if (!req)
        return named("fc_ialltoallv", FC_ERR(FC_ERR_INVALID_ARGUMENT, "req is NULL"));
    return named("fc_ialltoallv", do_alltoallv(sendbuf, recvbuf, sendcounts, sdispls, recvcounts,
                                               rdispls, dt, comm, NONBLOCKING(req)));
}

static fc_result_t do_barrier(fc_comm_t comm, const struct how *h)
{
    fc_result_t rc;
    if ((rc = check_comm(comm)) != FC_SUCCESS)
        return rc;
    struct coll_args a = args_of(comm, COLL_BARRIER, 0, FC_UINT8, FC_SUM, 0, 1, 0);
    return run(comm, &a, NULL, NULL, h);
}

fc_result_t fc_barrier(fc_comm_t comm)
{
    return named("fc_barrier", do_barrier(comm, &BLOCKING));
}

fc_result_t fc_ibarrier(fc_comm_t comm, fc_request_t *req)
{
    if (!req)
        return named("fc_ibarrier", FC_ERR(FC_ERR_INVALID_ARGUMENT, "req is NULL"));
    return named("fc_ibarrier", do_barrier(comm, NONBLOCKING(req)));
}

/* ---- point to point ------------------------------------------------------- */

/* Messages between two ranks match in order: the k-th send from a to b
 * carries sequence k in its tag, and b's k-th receive from a asks for it. */
static fc_result_t p2p(void *buf, size_t count, fc_datatype_t dt, int peer, fc_comm_t comm,
                       int is_send)
{
    fc_result_t rc;
    size_t es = 1;
    if ((rc = check_comm(comm)) != FC_SUCCESS ||
        (rc = check_type(dt, &es)) != FC_SUCCESS ||
        (rc = check_rank(peer, comm->size, "peer")) != FC_SUCCESS)
        return rc;
    if (peer == comm->rank)
        return FC_ERR(FC_ERR_INVALID_ARGUMENT, "peer %d is this rank: a rank may not %s itself",
                      peer, is_send ? "send to" : "receive from");
    if ((rc = check_count(count, es, 1, "count")) != FC_SUCCESS ||
        (rc = check_buf(buf, count * es, es, "buf")) != FC_SUCCESS)
        return rc;
    if (comm->broken != FC_SUCCESS)
        return FC_ERR_QUIET(comm->broken,
                            "the communicator is unusable after an earlier error (%s)",
                            comm->brokenmsg);
    struct fc_request *r = comm_request_new(comm, dt, FC_SUM);
    if (!r)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    r->s.coll_name = is_send ? "send" : "recv";
    r->s.algo_name = "p2p";
    r->key.count = count; /* for messages and profiling events */
    r->key.esize = es;
    /* the family's hooks: a host buffer never reaches the device branch's files */
    struct comm_call call = {.mode = COMM_BLOCKING}; /* no collective: a message */
    fc_result_t rrc = comm->sh->dev->route(comm, &call, is_send ? buf : NULL,
                                           is_send ? NULL : buf, r);
    if (rrc == FC_SUCCESS)
        rrc = comm->sh->dev->order_after_caller(comm, r);
    if (rrc != FC_SUCCESS) {
        comm_request_free(r);
        return rrc;
    }
    /* a zero-count message still travels, so the order is kept */
    size_t bytes = count * es;
    /* A message of a chunk or more travels as several messages (or one the
     * length of a whole chunk), so a receive cut to its own count could take
     * a longer one's first chunks and report success. Both ends of such a
     * message therefore send each other their byte counts (8 bytes each
     * way) and check the other's: the first chunk goes at once, the rest
     * (step tag 3) only once the counts agree, so a mismatch leaves nothing
     * of the data in flight (libfabric 1.17's shm stalls a pair behind a
     * large message nobody receives) and both ends fail with
     * FC_ERR_INVALID_ARGUMENT, the communicator still usable. A count is
     * checked after this end's first chunk is through, so no receive is
     * left posted into the caller's buffer when it fails (this end's own
     * count may still be on its way: then the communicator is marked
     * unusable, as after any error that leaves a transfer posted). The
     * check does not wait for this end's own count: under FC_PROTO=rndv
     * each end's count would wait for the other's receive of it. Where
     * only one end counts (the other has less than a chunk), the other's
     * single message and the first chunk differ in length: the receiver
     * fails at once, and a sending counter waits for a count that never
     * comes (FC_TIMEOUT). */
    int counted = comm->chunk > 0 && bytes >= comm->chunk;
    int st;
    if (counted) {
        size_t ch = comm->chunk;
        sched_send_value(&r->s, peer, is_send ? 1 : 2, bytes,
                         is_send ? SV_SEND_COUNT : SV_RECV_COUNT);
        st = is_send ? sched_send(&r->s, peer, 0, sbuf(R_SEND, 0), ch)
                     : sched_recv(&r->s, peer, 0, sbuf(R_RECV, 0), ch);
        int theirs = sched_expect_value(&r->s, peer, is_send ? 2 : 1, bytes,
                                        is_send ? SV_RECV_COUNT : SV_SEND_COUNT);
        sched_dep(&r->s, theirs, st, 0);
        if (bytes > ch) {
            int rest = is_send ? sched_send(&r->s, peer, 3, sbuf(R_SEND, ch), bytes - ch)
                               : sched_recv(&r->s, peer, 3, sbuf(R_RECV, ch), bytes - ch);
            sched_dep(&r->s, rest, theirs, 0);
        }
    } else if (is_send) {
        st = sched_send(&r->s, peer, 0, sbuf(R_SEND, 0), bytes);
    } else if (!r->tp && bytes > 0 && bytes <= ((size_t)1 << 20)) {
        /* a message longer than expected must be an error, not a truncation
         * (which some providers cannot recover from): small messages land in
         * scratch with room to spare, then are copied out */
        size_t room = 2 * bytes + 4096;
        size_t off = sched_scratch(&r->s, room);
        st = sched_recv(&r->s, peer, 0, sbuf(R_SCRATCH, off), bytes);
        if (st >= 0)
            r->s.steps[st].post_len = room;
        int cp = sched_copy(&r->s, sbuf(R_RECV, 0), sbuf(R_SCRATCH, off), bytes);
        sched_dep(&r->s, cp, st, 0);
    } else {
        st = sched_recv(&r->s, peer, 0, sbuf(R_RECV, 0), bytes);
    }
    if (st >= 0 && count == 0)
        r->s.steps[st].zmsg = 1;
    /* receives are directed (FI_DIRECTED_RECV), so the sequence per pair is
     * enough to keep each pair's messages in order */
    uint64_t seq = is_send ? comm->p2p_sent[peer]++ : comm->p2p_recvd[peer]++;
    uint64_t tb = tag_base(comm->id, TAG_KIND_P2P, seq);
    char desc[128];
    snprintf(desc, sizeof(desc), "%s of %zu x %s %s rank %d", is_send ? "send" : "receive", count,
             reduce_dt_name(dt), is_send ? "to" : "from", peer);
    rc = comm_start(r, is_send ? buf : NULL, is_send ? NULL : buf, tb, desc, 1);
    if (rc != FC_SUCCESS)
        return rc;
    return group_active() ? group_add(r) : comm_wait(r);
}

fc_result_t fc_send(const void *buf, size_t count, fc_datatype_t dt, int peer, fc_comm_t comm)
{
    return named("fc_send", p2p((void *)buf, count, dt, peer, comm, 1));
}

fc_result_t fc_recv(void *buf, size_t count, fc_datatype_t dt, int peer, fc_comm_t comm)
{
    return named("fc_recv", p2p(buf, count, dt, peer, comm, 0));
}

/* ---- groups ------------------------------------------------------------------ */

fc_result_t fc_group_start(void)
{
    group_start();
    return FC_SUCCESS;
}

fc_result_t fc_group_end(void)
{
    return named("fc_group_end", group_end());
}

/* ---- requests -------------------------------------------------------------- */

fc_result_t fc_test(fc_request_t *req, int *done)
{
    if (!req || !done)
        return named("fc_test", FC_ERR(FC_ERR_INVALID_ARGUMENT, "%s is NULL",
                                       !req ? "req" : "done"));
    if (!*req) {
        *done = 1;
        return FC_SUCCESS;
    }
    int d = 0;
    fc_result_t rc = comm_test(*req, &d);
    *done = d;
    if (d)
        *req = NULL;
    return named("fc_test", rc);
}

fc_result_t fc_wait(fc_request_t *req)
{
    if (!req)
        return named("fc_wait", FC_ERR(FC_ERR_INVALID_ARGUMENT, "req is NULL"));
    if (!*req)
        return FC_SUCCESS;
    fc_result_t rc = comm_wait(*req);
    *req = NULL;
    return named("fc_wait", rc);
}

/* ---- communicators ---------------------------------------------------------- */

static fc_result_t lib_config(const cfg_t **cfg)
{
    fc_result_t st;
    *cfg = config_global(&st);
    return st;
}

fc_result_t fc_comm_init(fc_comm_t *comm)
{
    const cfg_t *cfg;
    if (!comm)
        return named("fc_comm_init", FC_ERR(FC_ERR_INVALID_ARGUMENT, "comm is NULL"));
    fc_result_t rc = lib_config(&cfg);
    if (rc != FC_SUCCESS)
        return named("fc_comm_init", rc);
    struct boot *b = NULL;
    rc = boot_from_launcher(cfg, &b);
    if (rc == FC_SUCCESS) {
        FC_INFO(LOG_BOOT, "bootstrap: %s", b->how);
        rc = comm_create(b, cfg, &gpu_device_hooks, comm);
    }
    return named("fc_comm_init", rc);
}

fc_result_t fc_get_unique_id(fc_unique_id_t *id)
{
    const cfg_t *cfg;
    if (!id)
        return named("fc_get_unique_id", FC_ERR(FC_ERR_INVALID_ARGUMENT, "id is NULL"));
    fc_result_t rc = lib_config(&cfg);
    if (rc == FC_SUCCESS)
        rc = boot_make_unique_id(cfg, id);
    return named("fc_get_unique_id", rc);
}

fc_result_t fc_comm_init_rank(fc_comm_t *comm, int nranks, const fc_unique_id_t *id, int rank)
{
    const cfg_t *cfg;
    fc_result_t rc = FC_SUCCESS;
    if (!comm || !id)
        rc = FC_ERR(FC_ERR_INVALID_ARGUMENT, "%s is NULL", !comm ? "comm" : "id");
    else if (nranks < 1)
        rc = FC_ERR(FC_ERR_INVALID_ARGUMENT, "nranks %d must be at least 1", nranks);
    else if (rank < 0 || rank >= nranks)
        rc = FC_ERR(FC_ERR_INVALID_ARGUMENT, "rank %d is out of range 0..%d", rank, nranks - 1);
    if (rc == FC_SUCCESS)
        rc = lib_config(&cfg);
    struct boot *b = NULL;
    if (rc == FC_SUCCESS)
        rc = boot_from_unique_id(cfg, id, nranks, rank, &b);
    if (rc == FC_SUCCESS)
        rc = comm_create(b, cfg, &gpu_device_hooks, comm);
    return named("fc_comm_init_rank", rc);
}

fc_result_t fc_comm_split(fc_comm_t comm, int color, int key, fc_comm_t *newcomm)
{
    fc_result_t rc = FC_SUCCESS;
    if (!comm || !newcomm)
        rc = FC_ERR(FC_ERR_INVALID_ARGUMENT, "%s is NULL", !comm ? "comm" : "newcomm");
    else if (color < 0 && color != FC_SPLIT_NOCOLOR)
        rc = FC_ERR(FC_ERR_INVALID_ARGUMENT,
                    "color %d is negative (use a color >= 0, or FC_SPLIT_NOCOLOR)", color);
    if (rc == FC_SUCCESS)
        rc = comm_split(comm, color, key, newcomm);
    return named("fc_comm_split", rc);
}

/* ---- buffers registered ahead --------------------------------------------- */

fc_result_t fc_mem_register(fc_comm_t comm, void *buf, size_t bytes, fc_memhandle_t *h)
{
    fc_result_t rc;
    if (!h)
        return named("fc_mem_register", FC_ERR(FC_ERR_INVALID_ARGUMENT, "h is NULL"));
    *h = NULL;
    if ((rc = check_comm(comm)) != FC_SUCCESS || (rc = check_buf(buf, bytes, 1, "buf")) != FC_SUCCESS)
        return named("fc_mem_register", rc);
    if ((uintptr_t)buf + bytes < (uintptr_t)buf)
        return named("fc_mem_register", FC_ERR(FC_ERR_INVALID_ARGUMENT,
                                               "buf %p + %zu bytes wraps around the address "
                                               "space", buf, bytes));
    return named("fc_mem_register", comm_mem_pin(comm, buf, bytes, h));
}

fc_result_t fc_mem_deregister(fc_comm_t comm, fc_memhandle_t h)
{
    fc_result_t rc;
    if ((rc = check_comm(comm)) != FC_SUCCESS)
        return named("fc_mem_deregister", rc);
    if (!h)
        return named("fc_mem_deregister", FC_ERR(FC_ERR_INVALID_ARGUMENT, "h is NULL"));
    if (h->sh && h->sh != comm->sh)
        return named("fc_mem_deregister",
                     FC_ERR(FC_ERR_INVALID_ARGUMENT,
                            "h was registered through a communicator of another family (one "
                            "not made from this one by split or dup)"));
    comm_mem_unpin(h);
    return FC_SUCCESS;
}

/* ---- pre-scaled sums -------------------------------------------------------- */

fc_result_t fc_op_create_premulsum(fc_op_t *op, const void *scalar, fc_datatype_t dt,
                                   fc_comm_t comm)
{
    fc_result_t rc;
    size_t es = 1;
    if (!op || !scalar)
        return named("fc_op_create_premulsum",
                     FC_ERR(FC_ERR_INVALID_ARGUMENT, "%s is NULL", !op ? "op" : "scalar"));
    if ((rc = check_comm(comm)) != FC_SUCCESS || (rc = check_type(dt, &es)) != FC_SUCCESS)
        return named("fc_op_create_premulsum", rc);
    pthread_mutex_lock(&comm->sh->lock);
    int i = 0;
    while (i < comm->npremul && comm->premul[i].used)
        i++;
    if (i == comm->npremul) {
        struct comm_premul *t = NULL;
        if (i < COMM_PREMUL_MAX)
            t = realloc(comm->premul, sizeof(*t) * (size_t)(i + 1));
        if (!t)
            rc = i < COMM_PREMUL_MAX
                     ? FC_ERR(FC_ERR_NO_MEMORY, "out of memory for a pre-scaled sum")
                     : FC_ERR(FC_ERR_NO_MEMORY,
                              "%d pre-scaled sums exist on this communicator, the most it "
                              "keeps: destroy those no longer used (fc_op_destroy)",
                              COMM_PREMUL_MAX);
        else
            comm->premul = t, comm->npremul++;
    }
    if (rc == FC_SUCCESS) {
        struct comm_premul *p = &comm->premul[i];
        memset(p, 0, sizeof(*p));
        p->used = 1;
        p->dt = dt;
        memcpy(p->scalar, scalar, es); /* read now: the value at the call counts */
        *op = (fc_op_t)(COMM_PREMUL_OP0 + i);
    }
    pthread_mutex_unlock(&comm->sh->lock);
    return named("fc_op_create_premulsum", rc);
}

fc_result_t fc_op_destroy(fc_op_t op, fc_comm_t comm)
{
    fc_result_t rc;
    if ((rc = check_comm(comm)) != FC_SUCCESS)
        return named("fc_op_destroy", rc);
    if (reduce_op_valid((int)op))
        return named("fc_op_destroy", FC_ERR(FC_ERR_INVALID_ARGUMENT,
                                             "op %d is built in (%s): only ops made by "
                                             "fc_op_create_premulsum are destroyed",
                                             (int)op, reduce_op_name((int)op)));
    const int i = (int)op - COMM_PREMUL_OP0;
    pthread_mutex_lock(&comm->sh->lock);
    if (i >= 0 && i < comm->npremul && comm->premul[i].used)
        comm->premul[i].used = 0;
    else
        rc = FC_ERR(FC_ERR_INVALID_ARGUMENT,
                    "op %d was not made on this communicator by fc_op_create_premulsum, or "
                    "was destroyed already", (int)op);
    pthread_mutex_unlock(&comm->sh->lock);
    return named("fc_op_destroy", rc);
}

fc_result_t fc_comm_dup(fc_comm_t comm, fc_comm_t *newcomm)
{
    fc_result_t rc = FC_SUCCESS;
    if (!comm || !newcomm)
        rc = FC_ERR(FC_ERR_INVALID_ARGUMENT, "%s is NULL", !comm ? "comm" : "newcomm");
    else /* every rank in one color, in its own order: the split's endpoints, no connection */
        rc = comm_split(comm, 0, comm->rank, newcomm);
    return named("fc_comm_dup", rc);
}

fc_result_t fc_comm_shrink(fc_comm_t comm, fc_comm_t *newcomm)
{
    fc_result_t rc = FC_SUCCESS;
    if (newcomm)
        *newcomm = NULL;
    if (!comm || !newcomm)
        rc = FC_ERR(FC_ERR_INVALID_ARGUMENT, "%s is NULL", !comm ? "comm" : "newcomm");
    else
        rc = comm_shrink(comm, newcomm);
    return named("fc_comm_shrink", rc);
}

fc_result_t fc_comm_destroy(fc_comm_t comm)
{
    if (!comm)
        return FC_SUCCESS;
    return named("fc_comm_destroy", comm_destroy(comm, 0));
}

fc_result_t fc_comm_abort(fc_comm_t comm)
{
    if (!comm)
        return FC_SUCCESS;
    return named("fc_comm_abort", comm_destroy(comm, 1));
}

int fc_comm_rank(fc_comm_t comm)
{
    return comm ? comm->rank : -1;
}

int fc_comm_size(fc_comm_t comm)
{
    return comm ? comm->size : -1;
}

fc_result_t fc_comm_query(fc_comm_t comm, fc_comm_attr_t *attr)
{
    if (!comm || !attr)
        return named("fc_comm_query",
                     FC_ERR(FC_ERR_INVALID_ARGUMENT, "%s is NULL", !comm ? "comm" : "attr"));
    *attr = comm->attr;
    if (comm->broken != FC_SUCCESS) /* e.g. a stream-ordered operation failed */
        return named("fc_comm_query", FC_ERR_QUIET(comm->broken, "%s", comm->brokenmsg));
    return FC_SUCCESS;
}

fc_result_t fc_comm_query_peer(fc_comm_t comm, int peer, fc_comm_attr_t *attr)
{
    if (!comm || !attr)
        return named("fc_comm_query_peer",
                     FC_ERR(FC_ERR_INVALID_ARGUMENT, "%s is NULL", !comm ? "comm" : "attr"));
    if (peer < 0 || peer >= comm->size)
        return named("fc_comm_query_peer",
                     FC_ERR(FC_ERR_INVALID_ARGUMENT,
                            "peer %d is not a rank of this communicator (its ranks are 0..%d)",
                            peer, comm->size - 1));
    comm_query_peer(comm, peer, attr);
    if (comm->broken != FC_SUCCESS)
        return named("fc_comm_query_peer", FC_ERR_QUIET(comm->broken, "%s", comm->brokenmsg));
    return FC_SUCCESS;
}

/* ---- stream-ordered twins ---------------------------------------------------- */
/* The same argument checks as the blocking calls, then the operation is
 * queued on the stream (src/gpu/stream.c). */

fc_result_t fc_allreduce_stream(const void *sendbuf, void *recvbuf, size_t count,
                                fc_datatype_t dt, fc_op_t op, fc_comm_t comm, void *cuda_stream)
{
    return named("fc_allreduce_stream",
                 do_allreduce(sendbuf, recvbuf, count, dt, op, comm, ON_STREAM(cuda_stream)));
}

fc_result_t fc_broadcast_stream(const void *sendbuf, void *recvbuf, size_t count,
                                fc_datatype_t dt, int root, fc_comm_t comm, void *cuda_stream)
{
    return named("fc_broadcast_stream",
                 do_broadcast(sendbuf, recvbuf, count, dt, root, comm, ON_STREAM(cuda_stream)));
}

fc_result_t fc_reduce_stream(const void *sendbuf, void *recvbuf, size_t count, fc_datatype_t dt,
                             fc_op_t op, int root, fc_comm_t comm, void *cuda_stream)
{
    return named("fc_reduce_stream",
                 do_reduce(sendbuf, recvbuf, count, dt, op, root, comm, ON_STREAM(cuda_stream)));
}

fc_result_t fc_allgather_stream(const void *sendbuf, void *recvbuf, size_t sendcount,
                                fc_datatype_t dt, fc_comm_t comm, void *cuda_stream)
{
    return named("fc_allgather_stream",
                 do_allgather(sendbuf, recvbuf, sendcount, dt, comm, ON_STREAM(cuda_stream)));
}

fc_result_t fc_reduce_scatter_stream(const void *sendbuf, void *recvbuf, size_t recvcount,
                                     fc_datatype_t dt, fc_op_t op, fc_comm_t comm,
                                     void *cuda_stream)
{
    return named("fc_reduce_scatter_stream",
                 do_reduce_scatter(sendbuf, recvbuf, recvcount, dt, op, comm,
                                   ON_STREAM(cuda_stream)));
}

fc_result_t fc_gather_stream(const void *sendbuf, void *recvbuf, size_t sendcount,
                             fc_datatype_t dt, int root, fc_comm_t comm, void *cuda_stream)
{
    return named("fc_gather_stream",
                 do_gather(sendbuf, recvbuf, sendcount, dt, root, comm, ON_STREAM(cuda_stream)));
}

fc_result_t fc_scatter_stream(const void *sendbuf, void *recvbuf, size_t recvcount,
                              fc_datatype_t dt, int root, fc_comm_t comm, void *cuda_stream)
{
    return named("fc_scatter_stream",
                 do_scatter(sendbuf, recvbuf, recvcount, dt, root, comm, ON_STREAM(cuda_stream)));
}

fc_result_t fc_allgatherv_stream(const void *sendbuf, void *recvbuf, size_t sendcount,
                                 const size_t *recvcounts, const size_t *displs, fc_datatype_t dt,
                                 fc_comm_t comm, void *cuda_stream)
{
    return named("fc_allgatherv_stream", do_allgatherv(sendbuf, recvbuf, sendcount, recvcounts,
                                                       displs, dt, comm, ON_STREAM(cuda_stream)));
}

fc_result_t fc_alltoallv_stream(const void *sendbuf, void *recvbuf, const size_t *sendcounts,
                                const size_t *sdispls, const size_t *recvcounts,
                                const size_t *rdispls, fc_datatype_t dt, fc_comm_t comm,
                                void *cuda_stream)
{
    return named("fc_alltoallv_stream",
                 do_alltoallv(sendbuf, recvbuf, sendcounts, sdispls, recvcounts, rdispls, dt, comm,
                              ON_STREAM(cuda_stream)));
}
