/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory types. Host memory is what every path handles; device (CUDA)
 * memory is detected per call in CUDA builds and staged or registered by
 * the engine. Builds without CUDA treat every pointer as host memory.
 */
#ifndef FC_MEM_H
#define FC_MEM_H

#include <stddef.h>

#include "coll.h"
#include "fabcoll.h"

/* Checks a user buffer can be used (device buffers need CUDA support). */
fc_result_t mem_check_pointer(const void *p, const char *name);

/* The stream-ordered collectives (CUDA builds). */
fc_result_t mem_stream_collective(enum coll_kind kind, const void *sendbuf, void *recvbuf,
                                  size_t count, fc_datatype_t dt, fc_op_t op, int root,
                                  fc_comm_t comm, void *stream);

#endif /* FC_MEM_H */
