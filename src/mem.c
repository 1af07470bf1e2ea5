/* SPDX-License-Identifier: BSD-3-Clause */
#include "mem.h"

#include "log.h"

fc_result_t mem_check_pointer(const void *p, const char *name)
{
    (void)p;
    (void)name;
    return FC_SUCCESS;
}

fc_result_t mem_stream_collective(enum coll_kind kind, const void *sendbuf, void *recvbuf,
                                  size_t count, fc_datatype_t dt, fc_op_t op, int root,
                                  fc_comm_t comm, void *stream)
{
    (void)sendbuf;
    (void)recvbuf;
    (void)count;
    (void)dt;
    (void)op;
    (void)root;
    (void)comm;
    (void)stream;
    return FC_ERR(FC_ERR_UNSUPPORTED,
                  "stream-ordered %s needs CUDA support, which this build does not have",
                  coll_kind_name(kind));
}
