/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Profiling events (include/fabcoll_profiler.h): to the plugin FC_PROFILER
 * names, and, with FC_PROFILE_FILE, to a Chrome trace of this process (a
 * JSON array of complete events, "X", one per call and per transfer step:
 * pid the rank, tid the communicator for calls and "peer N" rows for steps;
 * viewable in Perfetto or chrome://tracing; contrib/profile/fc_trace_merge.py
 * puts the ranks' files on one timeline). The array is left open, which
 * both viewers accept, so a rank that dies leaves a readable file.
 *
 * Everything here runs with the caller's family lock held, so a process's
 * events are serialised per family; the writer has a lock of its own for
 * several families.
 */
#define _GNU_SOURCE
#include "profile.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fabcoll_profiler.h"
#include "log.h"

int prof_on;
static int setup_done;
static struct fc_profiler plug;
static int plug_on;
static FILE *trace;
static pthread_mutex_t trace_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void at_exit(void)
{
    if (plug_on && plug.fini)
        plug.fini(plug.ctx);
    pthread_mutex_lock(&trace_lock);
    if (trace)
        fflush(trace);
    pthread_mutex_unlock(&trace_lock);
}

void prof_setup(const cfg_t *cfg, int rank, int nranks)
{
    pthread_mutex_lock(&setup_lock);
    if (setup_done) {
        pthread_mutex_unlock(&setup_lock);
        return;
    }
    setup_done = 1;
    if (cfg->profiler[0]) {
        void *h = dlopen(cfg->profiler, RTLD_NOW | RTLD_LOCAL);
        int (*init)(struct fc_profiler *, int, int) =
            h ? (int (*)(struct fc_profiler *, int, int))dlsym(h, "fc_profiler_init") : NULL;
        plug.version = FC_PROFILER_VERSION;
        if (!h)
            FC_WARN(LOG_INIT, "FC_PROFILER=%s: cannot load it (%s); running without it",
                    cfg->profiler, dlerror());
        else if (!init)
            FC_WARN(LOG_INIT, "FC_PROFILER=%s exports no fc_profiler_init; running without it",
                    cfg->profiler);
        else if (init(&plug, rank, nranks) != 0 || !plug.event)
            FC_WARN(LOG_INIT,
                    "FC_PROFILER=%s: fc_profiler_init declined (or set no event "
                    "callback); running without it",
                    cfg->profiler);
        else
            plug_on = 1;
    }
    if (cfg->profile_file[0]) {
        char path[1024];
        log_expand_pattern(cfg->profile_file, rank, path, sizeof(path));
        trace = fopen(path, "w");
        if (!trace)
            FC_WARN(LOG_INIT, "FC_PROFILE_FILE: cannot write %s; no trace", path);
        else
            fprintf(trace, "[\n");
    }
    prof_on = plug_on || trace;
    if (prof_on)
        atexit(at_exit);
    pthread_mutex_unlock(&setup_lock);
}

static void emit(const struct fc_prof_event *e)
{
    if (plug_on)
        plug.event(plug.ctx, e);
    if (!trace || (e->kind != FC_PROF_COLL_END && e->kind != FC_PROF_STEP_END))
        return;
    double us = e->t_begin * 1e6, dur = (e->time - e->t_begin) * 1e6;
    pthread_mutex_lock(&trace_lock);
    if (e->kind == FC_PROF_COLL_END)
        fprintf(trace,
                "{\"name\":\"%s\",\"cat\":\"call\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,"
                "\"pid\":%d,\"tid\":\"comm %u\",\"args\":{\"seq\":%llu,\"algorithm\":\"%s\","
                "\"bytes\":%zu,\"result\":%d}},\n",
                e->coll, us, dur, e->rank, e->comm_id, (unsigned long long)e->seq, e->algo,
                e->bytes, e->result);
    else
        fprintf(trace,
                "{\"name\":\"%s %s %d\",\"cat\":\"step\",\"ph\":\"X\",\"ts\":%.3f,"
                "\"dur\":%.3f,\"pid\":%d,\"tid\":\"comm %u peer %d\",\"args\":{\"seq\":%llu,"
                "\"collective\":\"%s\",\"algorithm\":\"%s\",\"step\":%u,\"bytes\":%zu}},\n",
                e->is_send ? "send to" : "recv from", e->coll, e->peer, us, dur, e->rank,
                e->comm_id, e->peer, (unsigned long long)e->seq, e->coll, e->algo, e->step,
                e->bytes);
    pthread_mutex_unlock(&trace_lock);
}

double prof_call(int begin, int rank, uint32_t comm_id, uint64_t seq, const char *coll,
                 const char *algo, size_t bytes, double t_begin, int result)
{
    struct fc_prof_event e = {
        .kind = begin ? FC_PROF_COLL_BEGIN : FC_PROF_COLL_END,
        .rank = rank,
        .comm_id = comm_id,
        .seq = seq,
        .coll = coll ? coll : "?",
        .algo = algo ? algo : "?",
        .bytes = bytes,
        .peer = -1,
        .time = now(),
        .t_begin = begin ? 0 : t_begin,
        .result = result,
    };
    emit(&e);
    return e.time;
}

void prof_step(void *ctx, int begin, struct sched *s, uint32_t i)
{
    (void)ctx;
    struct sched_step *st = &s->steps[i];
    struct fc_prof_event e = {
        .kind = begin ? FC_PROF_STEP_BEGIN : FC_PROF_STEP_END,
        .rank = s->prof_rank,
        .comm_id = s->prof_comm,
        .seq = s->prof_seq,
        .coll = s->coll_name ? s->coll_name : "?",
        .algo = s->algo_name ? s->algo_name : "?",
        .bytes = st->len,
        .peer = st->peer,
        .is_send = st->op == SOP_SEND,
        .step = i,
        .time = now(),
    };
    if (begin)
        st->prof_t0 = e.time;
    else
        e.t_begin = st->prof_t0;
    emit(&e);
}

void prof_flush(void)
{
    pthread_mutex_lock(&trace_lock);
    if (trace)
        fflush(trace);
    pthread_mutex_unlock(&trace_lock);
}
