/* SPDX-License-Identifier: BSD-3-Clause */
/* The executor's ring, shared by the host (gpu.c) and the kernel
 * (gpu_kernels.cu, fc_exec): EXEC_RING slots of EXEC_WORDS 8-byte words;
 * a command is 12 words of 4 bytes of data (dst, a, b, n as two words
 * each, low first; kind, dt, op, div; X_PREMUL's b is its scalar's bytes
 * instead of a pointer), each sent with the command's number
 * in its upper half. ctl words (pinned host) by index. */
#ifndef FC_GPU_EXEC_H
#define FC_GPU_EXEC_H

#define EXEC_RING 1024
#define EXEC_WORDS 16
enum { X_COPY = 1, X_REDUCE = 2, X_SCALE = 3, X_EXIT = 4, X_PREMUL = 5 };
enum { C_DONE = 0, C_STARTED = 1, C_LEFT = 2, C_ABORT = 3 };

#endif /* FC_GPU_EXEC_H */
