/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fabcoll's profiler interface. A plugin is a shared object named by
 * FC_PROFILER that exports fc_profiler_init; the library calls it once per
 * process, when the first communicator is created, and from then on calls
 * its event callback at the start and end of every collective (and
 * point-to-point call) and of every transfer step (a message to or from
 * one peer, however many chunks it travels in). Events come from whichever
 * thread drives the operation (the caller's, the progress thread), with
 * the communicator's lock held: the callback must be quick and must not
 * call back into fabcoll.
 */
#ifndef FABCOLL_PROFILER_H
#define FABCOLL_PROFILER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FC_PROFILER_VERSION 1

enum fc_prof_kind {
    FC_PROF_COLL_BEGIN, /* a collective or point-to-point call started */
    FC_PROF_COLL_END,   /* ... ended (result, t_begin set) */
    FC_PROF_STEP_BEGIN, /* a transfer step's first chunk was posted */
    FC_PROF_STEP_END    /* ... its last chunk completed (t_begin set) */
};

struct fc_prof_event {
    int kind;           /* enum fc_prof_kind */
    int rank;           /* this rank in the communicator */
    uint32_t comm_id;   /* the communicator's id (the same on its ranks) */
    uint64_t seq;       /* the call's sequence number on the communicator */
    const char *coll;   /* "allreduce", ..., "send", "recv" */
    const char *algo;   /* "ring", ..., "p2p" */
    size_t bytes;       /* the call's count times the element size; a step's bytes */
    int peer;           /* steps: the peer's rank in the communicator; else -1 */
    int is_send;        /* steps: 1 send, 0 receive */
    uint32_t step;      /* steps: the step's index in the call's schedule */
    double time;        /* seconds, CLOCK_MONOTONIC */
    double t_begin;     /* END events: when the matching BEGIN happened */
    int result;         /* COLL_END: an fc_result_t */
};

struct fc_profiler {
    int version;        /* FC_PROFILER_VERSION, set by the library */
    void *ctx;          /* the plugin's, passed back to every call */
    void (*event)(void *ctx, const struct fc_prof_event *e);
    void (*fini)(void *ctx); /* at process exit (may be NULL) */
};

/* The plugin's entry point: fill in p->event (and ctx, fini) and return 0;
 * anything else leaves the plugin unused (the library warns once). */
#if defined(__GNUC__)
__attribute__((visibility("default")))
#endif
int fc_profiler_init(struct fc_profiler *p, int rank, int nranks);

#ifdef __cplusplus
}
#endif
#endif /* FABCOLL_PROFILER_H */
