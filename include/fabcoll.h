/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fabcoll: collective communication written once against libfabric.
 *
 * This is the only installed header. Its names, argument orders and
 * semantics are a contract (see design/API.md): programs outside this
 * repository are written against it. Additions go at the end of enums and
 * structs.
 */
#ifndef FABCOLL_H
#define FABCOLL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FC_VERSION_MAJOR 0
#define FC_VERSION_MINOR 1
#define FC_VERSION_PATCH 0

#if defined(__GNUC__)
#define FC_API __attribute__((visibility("default")))
#else
#define FC_API
#endif

/* ---- results and errors ------------------------------------------------ */
typedef enum {
    FC_SUCCESS = 0,
    FC_IN_PROGRESS,          /* reserved: nonblocking communicator creation */
    FC_ERR_INVALID_ARGUMENT, /* NULL handle/buffer, bad datatype/op/root/peer, count overflow */
    FC_ERR_UNSUPPORTED,      /* valid request this build or provider cannot do */
    FC_ERR_NO_MEMORY,
    FC_ERR_SYSTEM,           /* an OS call failed (errno in the message) */
    FC_ERR_FABRIC,           /* a libfabric call failed (fi_strerror in the message) */
    FC_ERR_BOOTSTRAP,        /* peers could not be found or reached at init */
    FC_ERR_TIMEOUT,          /* FC_TIMEOUT expired */
    FC_ERR_PEER_FAILED,      /* a peer died or disconnected */
    FC_ERR_CUDA,
    FC_ERR_INTERNAL
} fc_result_t;

/* Short, static description of a result code. */
FC_API const char *fc_strerror(fc_result_t r);
/* This thread's last detailed error message: the failing call, provider,
 * peer and likely fix. Empty string when no error was recorded. */
FC_API const char *fc_last_error(void);

/* ---- types ------------------------------------------------------------- */
typedef enum {
    FC_INT8, FC_UINT8, FC_INT32, FC_UINT32, FC_INT64, FC_UINT64,
    FC_FLOAT16, FC_BFLOAT16, FC_FLOAT32, FC_FLOAT64,
    /* OCP fp8: reductions compute each step in fp32 and store it rounded to
     * nearest even, saturating to the largest finite value (448, 57344) */
    FC_FLOAT8_E4M3, FC_FLOAT8_E5M2
} fc_datatype_t;
typedef enum { FC_SUM, FC_PROD, FC_MIN, FC_MAX, FC_AVG } fc_op_t;

/* Size in bytes of one element; 0 for an invalid value. */
FC_API size_t fc_datatype_size(fc_datatype_t dt);

/* ---- communicators ----------------------------------------------------- */
typedef struct fc_comm *fc_comm_t;
#define FC_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[FC_UNIQUE_ID_BYTES];
} fc_unique_id_t;

/* A pre-scaled sum: reduces the sum of (scalar * x), where scalar (a host
 * value of dt, read at this call) is this rank's and multiplies its own
 * input before the sum, in dt's arithmetic (integers wrap; the half and
 * fp8 types multiply in fp32 and round once). The op is valid on comm
 * only, with dt only, for allreduce, reduce and reduce_scatter; not
 * collective (each rank makes its own, in any order). */
FC_API fc_result_t fc_op_create_premulsum(fc_op_t *op, const void *scalar, fc_datatype_t dt,
                                          fc_comm_t comm);
/* Frees an op of fc_op_create_premulsum once no call that uses it runs. */
FC_API fc_result_t fc_op_destroy(fc_op_t op, fc_comm_t comm);

/* Buffers registered ahead (host or device memory): calls of comm and of
 * the communicators split or dup'ed from it (or it from) on any range
 * inside [buf, buf + bytes) skip registration, so the first call on a
 * buffer costs what later ones do. Deregister before freeing the memory.
 * Where the provider registers nothing for transfers (tcp and shm without
 * the rendezvous; device memory the provider stages) it records nothing
 * and costs nothing. A handle outliving its communicators is inert;
 * deregistering it then only frees it. */
typedef struct fc_memhandle *fc_memhandle_t;
FC_API fc_result_t fc_mem_register(fc_comm_t comm, void *buf, size_t bytes, fc_memhandle_t *h);
FC_API fc_result_t fc_mem_deregister(fc_comm_t comm, fc_memhandle_t h);

/* rank/size/peers from the launcher: PMIx, fc_run, or Slurm. */
FC_API fc_result_t fc_comm_init(fc_comm_t *comm);
/* Makes an id for fc_comm_init_rank and starts serving its rendezvous in
 * this process (a background thread, until every rank has joined). */
FC_API fc_result_t fc_get_unique_id(fc_unique_id_t *id);
FC_API fc_result_t fc_comm_init_rank(fc_comm_t *comm, int nranks,
                                     const fc_unique_id_t *id, int rank);
#define FC_SPLIT_NOCOLOR (-1)
/* Collective over comm; NOCOLOR gives *newcomm = NULL. */
FC_API fc_result_t fc_comm_split(fc_comm_t comm, int color, int key, fc_comm_t *newcomm);
/* Collective over comm: a communicator of the same ranks in the same order,
 * whose calls never match comm's; it shares comm's endpoints (no new
 * connections) and is destroyed on its own. */
FC_API fc_result_t fc_comm_dup(fc_comm_t comm, fc_comm_t *newcomm);
/* After FC_ERR_PEER_FAILED or FC_ERR_TIMEOUT: collective over the ranks of
 * comm still alive, which agree on who they are. *newcomm holds them in
 * their old order, ranked 0..k-1, over comm's endpoints. A rank that
 * answers no agreement message within a round's window (twice
 * FC_TIMEOUT) is left out; one that finds itself left out gets
 * FC_ERR_PEER_FAILED. comm must still be
 * destroyed or aborted. The receive buffer of the call that failed may
 * still be written by messages its peers sent before they saw the failure:
 * give the calls that follow other buffers where that matters. */
FC_API fc_result_t fc_comm_shrink(fc_comm_t comm, fc_comm_t *newcomm);
/* Collective in normal use; NULL is a no-op. Using a communicator after it
 * was destroyed or aborted, or destroying it a second time, is undefined
 * (the handle points at freed memory). */
FC_API fc_result_t fc_comm_destroy(fc_comm_t comm);
/* Local, never blocks on peers; the handle is invalid afterwards. */
FC_API fc_result_t fc_comm_abort(fc_comm_t comm);
FC_API int fc_comm_rank(fc_comm_t comm); /* -1 for NULL */
FC_API int fc_comm_size(fc_comm_t comm); /* -1 for NULL */

typedef enum { FC_TIER_SHM, FC_TIER_NET, FC_TIER_RDMA, FC_TIER_GDR } fc_tier_t;
typedef struct {
    char provider[64]; /* libfabric's name, as fi_info prints it:
                          "tcp;ofi_rxm", "shm", "verbs;ofi_rxm" */
    char fabric[64], domain[64];
    fc_tier_t tier;
    int hmem; /* device buffers go to the fabric without staging */
    int nnodes, local_rank, local_size, nrails;
} fc_comm_attr_t;
FC_API fc_result_t fc_comm_query(fc_comm_t comm, fc_comm_attr_t *attr); /* local */
/* Local: fc_comm_query's attributes, with provider, fabric, domain, tier,
 * hmem and nrails those of the path this rank's messages to rank peer of
 * comm take. With per-peer paths (a job of several nodes, some with more
 * than one rank), the other ranks of this node are reached over the node's
 * own provider (shm) and the rest over the network's, which fc_comm_query
 * reports; otherwise, and for peer == this rank, the path is
 * fc_comm_query's. */
FC_API fc_result_t fc_comm_query_peer(fc_comm_t comm, int peer, fc_comm_attr_t *attr);

/* ---- collectives (blocking) --------------------------------------------
 * sendbuf == recvbuf means in place. count == 0 is valid. Every rank passes
 * the same count, datatype, op and root. */
FC_API fc_result_t fc_allreduce(const void *sendbuf, void *recvbuf, size_t count,
                                fc_datatype_t dt, fc_op_t op, fc_comm_t comm);
/* sendbuf is read on root only; non-roots may pass NULL; root's recvbuf
 * receives the data too. */
FC_API fc_result_t fc_broadcast(const void *sendbuf, void *recvbuf, size_t count,
                                fc_datatype_t dt, int root, fc_comm_t comm);
/* recvbuf is written on root only; non-roots may pass NULL. */
FC_API fc_result_t fc_reduce(const void *sendbuf, void *recvbuf, size_t count,
                             fc_datatype_t dt, fc_op_t op, int root, fc_comm_t comm);
/* recvbuf: size * sendcount elements. In place when
 * sendbuf == (char *)recvbuf + rank * sendcount * esize. */
FC_API fc_result_t fc_allgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                fc_datatype_t dt, fc_comm_t comm);
/* sendbuf: size * recvcount elements; rank r gets block r. In place when
 * recvbuf == (char *)sendbuf + rank * recvcount * esize. */
FC_API fc_result_t fc_reduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                     fc_datatype_t dt, fc_op_t op, fc_comm_t comm);
/* count elements per peer; in place when sendbuf == recvbuf. */
FC_API fc_result_t fc_alltoall(const void *sendbuf, void *recvbuf, size_t count,
                               fc_datatype_t dt, fc_comm_t comm);
FC_API fc_result_t fc_barrier(fc_comm_t comm);
/* Every rank's sendcount elements, in rank order, into the root's recvbuf
 * (size * sendcount elements; read on the root only, others may pass
 * NULL). In place at the root when
 * sendbuf == (char *)recvbuf + root * sendcount * esize. */
FC_API fc_result_t fc_gather(const void *sendbuf, void *recvbuf, size_t sendcount,
                             fc_datatype_t dt, int root, fc_comm_t comm);
/* Block r of the root's sendbuf (size * recvcount elements; read on the
 * root only, others may pass NULL) into rank r's recvbuf. In place at the
 * root when recvbuf == (char *)sendbuf + root * recvcount * esize. */
FC_API fc_result_t fc_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                              fc_datatype_t dt, int root, fc_comm_t comm);
/* Rank j's sendcount elements (recvcounts[j], the same array on every
 * rank) into recvbuf at displs[j] elements, on every rank; counts may be 0
 * and differ freely. In place when
 * sendbuf == (char *)recvbuf + displs[rank] * esize. */
FC_API fc_result_t fc_allgatherv(const void *sendbuf, void *recvbuf, size_t sendcount,
                                 const size_t *recvcounts, const size_t *displs,
                                 fc_datatype_t dt, fc_comm_t comm);
/* sendcounts[j] elements at sdispls[j] of sendbuf to rank j, recvcounts[j]
 * from rank j into recvbuf at rdispls[j]; rank j's sendcounts[i] must equal
 * rank i's recvcounts[j] (a disagreement is an error on both). No in-place
 * form: sendbuf and recvbuf are disjoint. */
FC_API fc_result_t fc_alltoallv(const void *sendbuf, void *recvbuf, const size_t *sendcounts,
                                const size_t *sdispls, const size_t *recvcounts,
                                const size_t *rdispls, fc_datatype_t dt, fc_comm_t comm);
/* Point to point: matched in the order sent; counts must be equal. */
FC_API fc_result_t fc_send(const void *buf, size_t count, fc_datatype_t dt, int peer,
                           fc_comm_t comm);
FC_API fc_result_t fc_recv(void *buf, size_t count, fc_datatype_t dt, int peer,
                           fc_comm_t comm);

/* ---- nonblocking collectives ------------------------------------------- */
typedef struct fc_request *fc_request_t;
FC_API fc_result_t fc_iallreduce(const void *sendbuf, void *recvbuf, size_t count,
                                 fc_datatype_t dt, fc_op_t op, fc_comm_t comm,
                                 fc_request_t *req);
FC_API fc_result_t fc_ibroadcast(const void *sendbuf, void *recvbuf, size_t count,
                                 fc_datatype_t dt, int root, fc_comm_t comm,
                                 fc_request_t *req);
FC_API fc_result_t fc_ireduce(const void *sendbuf, void *recvbuf, size_t count,
                              fc_datatype_t dt, fc_op_t op, int root, fc_comm_t comm,
                              fc_request_t *req);
FC_API fc_result_t fc_iallgather(const void *sendbuf, void *recvbuf, size_t sendcount,
                                 fc_datatype_t dt, fc_comm_t comm, fc_request_t *req);
FC_API fc_result_t fc_ireduce_scatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                                      fc_datatype_t dt, fc_op_t op, fc_comm_t comm,
                                      fc_request_t *req);
FC_API fc_result_t fc_ialltoall(const void *sendbuf, void *recvbuf, size_t count,
                                fc_datatype_t dt, fc_comm_t comm, fc_request_t *req);
FC_API fc_result_t fc_ibarrier(fc_comm_t comm, fc_request_t *req);
FC_API fc_result_t fc_igather(const void *sendbuf, void *recvbuf, size_t sendcount,
                              fc_datatype_t dt, int root, fc_comm_t comm, fc_request_t *req);
FC_API fc_result_t fc_iscatter(const void *sendbuf, void *recvbuf, size_t recvcount,
                               fc_datatype_t dt, int root, fc_comm_t comm, fc_request_t *req);
FC_API fc_result_t fc_iallgatherv(const void *sendbuf, void *recvbuf, size_t sendcount,
                                  const size_t *recvcounts, const size_t *displs,
                                  fc_datatype_t dt, fc_comm_t comm, fc_request_t *req);
FC_API fc_result_t fc_ialltoallv(const void *sendbuf, void *recvbuf, const size_t *sendcounts,
                                 const size_t *sdispls, const size_t *recvcounts,
                                 const size_t *rdispls, fc_datatype_t dt, fc_comm_t comm,
                                 fc_request_t *req);
/* FC_SUCCESS with *done = 0 while it runs; when done: the operation's
 * result, frees it, *req = NULL. A NULL *req is complete. */
FC_API fc_result_t fc_test(fc_request_t *req, int *done);
/* The operation's result; frees it, *req = NULL. */
FC_API fc_result_t fc_wait(fc_request_t *req);

/* ---- groups -------------------------------------------------------------
 * Calls between fc_group_start and fc_group_end, on any communicators, are
 * started together and complete at the outermost fc_group_end, which
 * returns when all are done (the first error of any of them; each call's
 * own argument errors are returned by the call). A blocking collective,
 * fc_send or fc_recv inside a group returns FC_SUCCESS at once: its
 * buffers must stay untouched until fc_group_end (count arrays are read
 * during the call). Send/recv pairs in a group never deadlock, whatever their
 * order. Nonblocking and stream-ordered calls behave as outside a group.
 * Groups nest (only the outermost end waits); a group belongs to its
 * thread. */
FC_API fc_result_t fc_group_start(void);
FC_API fc_result_t fc_group_end(void);

/* ---- GPU streams (CUDA builds) ------------------------------------------
 * cuda_stream is a cudaStream_t passed as void *. They return at once; the
 * operation runs after the work already queued on the stream, and work
 * queued later waits for it. A buffer this rank uses may be host memory
 * when another is device memory (it is read or written in stream order).
 * One case returns later: calls in flight on 32 other streams of the
 * communicator's family; the call then waits, bounded by FC_TIMEOUT,
 * until one of them is done. count 0 returns at once. Every buffer in
 * host memory (nothing on the device): FC_ERR_INVALID_ARGUMENT (use the
 * blocking call). At most 4095 calls of one family in flight, and each
 * needs a stream executor (pinned memory): else an error, FC_ERR_CUDA
 * when none can be made. Without CUDA support: FC_ERR_UNSUPPORTED. */
FC_API fc_result_t fc_allreduce_stream(const void *sendbuf, void *recvbuf, size_t count,
                                       fc_datatype_t dt, fc_op_t op, fc_comm_t comm,
                                       void *cuda_stream);
FC_API fc_result_t fc_broadcast_stream(const void *sendbuf, void *recvbuf, size_t count,
                                       fc_datatype_t dt, int root, fc_comm_t comm,
                                       void *cuda_stream);
FC_API fc_result_t fc_reduce_stream(const void *sendbuf, void *recvbuf, size_t count,
                                    fc_datatype_t dt, fc_op_t op, int root, fc_comm_t comm,
                                    void *cuda_stream);
FC_API fc_result_t fc_allgather_stream(const void *sendbuf, void *recvbuf, size_t sendcount,
                                       fc_datatype_t dt, fc_comm_t comm, void *cuda_stream);
FC_API fc_result_t fc_reduce_scatter_stream(const void *sendbuf, void *recvbuf,
                                            size_t recvcount, fc_datatype_t dt, fc_op_t op,
                                            fc_comm_t comm, void *cuda_stream);
FC_API fc_result_t fc_gather_stream(const void *sendbuf, void *recvbuf, size_t sendcount,
                                    fc_datatype_t dt, int root, fc_comm_t comm,
                                    void *cuda_stream);
FC_API fc_result_t fc_scatter_stream(const void *sendbuf, void *recvbuf, size_t recvcount,
                                     fc_datatype_t dt, int root, fc_comm_t comm,
                                     void *cuda_stream);
FC_API fc_result_t fc_allgatherv_stream(const void *sendbuf, void *recvbuf, size_t sendcount,
                                        const size_t *recvcounts, const size_t *displs,
                                        fc_datatype_t dt, fc_comm_t comm, void *cuda_stream);
FC_API fc_result_t fc_alltoallv_stream(const void *sendbuf, void *recvbuf,
                                       const size_t *sendcounts, const size_t *sdispls,
                                       const size_t *recvcounts, const size_t *rdispls,
                                       fc_datatype_t dt, fc_comm_t comm, void *cuda_stream);

/* ---- additions beyond API.md ------------------------------------------- */
/* "major.minor.patch (libfabric x.y)" */
FC_API const char *fc_version(void);

#ifdef __cplusplus
}
#endif
#endif /* FABCOLL_H */
