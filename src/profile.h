/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Profiling: the events of include/fabcoll_profiler.h, to a plugin
 * (FC_PROFILER) and to the built-in Chrome-trace writer (FC_PROFILE_FILE).
 * A leaf: request.c reports calls, the engine reports steps through the
 * callback it is given (sched_env.prof).
 */
#ifndef FC_PROFILE_H
#define FC_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "schedule.h"

/* Nonzero once a plugin or the writer is on (set by prof_setup). */
extern int prof_on;
/* Once per process (the first communicator): loads FC_PROFILER, opens
 * FC_PROFILE_FILE; a failure to do either is warned about once. */
void prof_setup(const cfg_t *cfg, int rank, int nranks);
/* A call's begin (t_begin 0, returns the time) and end. */
double prof_call(int begin, int rank, uint32_t comm_id, uint64_t seq, const char *coll,
                 const char *algo, size_t bytes, double t_begin, int result);
/* The engine's step callback (ctx: unused): SEND/RECV step i of s began or
 * ended; s->prof_* say whose call it is. */
void prof_step(void *ctx, int begin, struct sched *s, uint32_t i);
/* Flushes the writer's file (a communicator is destroyed). */
void prof_flush(void);

#endif
