/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Schedule simulation: plays the schedules of every rank of a communicator
 * at once, without data or network, under the alpha-beta-gamma model, and
 * checks that they agree (every message received with the length sent, no
 * step left waiting). What fc_sim runs at 4096 ranks.
 *
 * The model:
 *   - every step is cut into chunks as the engine cuts it (chunk bytes,
 *     at most `window` chunks of a step in flight); a chunked dependency
 *     lets chunk k start after chunk k of its predecessor, a full one after
 *     all of it;
 *   - SEND: the rank's outgoing link is busy for beta*len (sends of one
 *     rank serialise); the message arrives alpha + beta*len after it started;
 *   - RECV: completes at the later of its start and its message's arrival;
 *   - REDUCE/COPY/SCALE: one local pass of gamma*len, serialised per rank;
 *   - zero-length SEND/RECV that are not signals exchange nothing.
 * Messages match by (source, destination, step tag, chunk) in order, as
 * in the engine.
 */
#ifndef FC_SIM_H
#define FC_SIM_H

#include <stdint.h>

#include "schedule.h"

struct sim_step;
struct sim {
    int n;
    size_t chunk;         /* 0: steps are not cut */
    int window;
    int next_rank;        /* sim_add order */
    int ran;              /* sim_run consumes the edge lists */
    uint64_t nsteps, cap, nedges, ecap;
    struct sim_step *st;
    uint32_t *rank_of;    /* step -> rank */
    uint32_t *esrc, *edst;
    /* results of sim_run */
    double end;           /* when the last step of any rank completed (s) */
    uint64_t done;        /* steps that ran */
    uint64_t max_msgs;    /* most messages (chunks) sent by one rank */
    uint64_t max_sent;    /* most bytes sent by one rank */
    char err[512];        /* what went wrong, when a call failed */
    /* two link classes: a message between ranks of one node (node[a] ==
     * node[b]) takes alpha_node and beta_node; NULL (sim_init's): one */
    const int *node;
    double alpha_node, beta_node;
};

/* chunk: the engine's chunk bytes (0: whole steps); window: chunks of a
 * step in flight. */
void sim_init(struct sim *s, int nranks, size_t chunk, int window);
/* Adds the schedule of the next rank (0, 1, ... n-1 in order); the
 * schedule can be released afterwards. 0, or -1 with s->err. */
int sim_add(struct sim *s, const struct sched *sc);
/* Plays all schedules, once. 0, or -1 with s->err naming the first schedule
 * error (length mismatch, unmatched message, deadlock) or failure. */
int sim_run(struct sim *s, double alpha, double beta, double gamma);
void sim_free(struct sim *s);

#endif /* FC_SIM_H */
