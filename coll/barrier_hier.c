/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Barrier across nodes: every rank signals its node's leader (its lowest
 * rank), the leaders run the dissemination barrier among themselves
 * (barrier_dissemination.c), and each leader then releases its node.
 *
 * Only ceil(log2 nnodes) rounds of signals cross the network, instead of
 * ceil(log2 nranks); the arrivals and releases go over the node's own
 * path. A leader's first signal across waits for every arrival of its
 * node, and its releases wait for its last round, which follows every
 * earlier one: no rank leaves before every rank has entered.
 * Tags: 0 arrival, 1 release, 2 + k round k.
 *
 * Needs the node of every rank (coll_args.node).
 */
#include <stdlib.h>

#include "coll.h"
#include "log.h"

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int r = a->rank, m = a->nnodes, k = a->node[r];
    struct coll_nodes N;
    if (coll_nodes_make(a, &N) != 0)
        return FC_ERR(FC_ERR_NO_MEMORY, "barrier hier: out of memory for %d ranks", a->nranks);
    const int leader = N.ranks[N.first[k]];
    if (r != leader) {
        sched_signal(s, leader, 0);
        sched_wait_signal(s, leader, 1);
        coll_nodes_free(&N);
        return s->build_err;
    }
    int *arrive = malloc((size_t)(N.first[k + 1] - N.first[k]) * sizeof(int));
    if (!arrive) {
        coll_nodes_free(&N);
        return FC_ERR(FC_ERR_NO_MEMORY, "barrier hier: out of memory for %d ranks", a->nranks);
    }
    int na = 0;
    for (int i = N.first[k] + 1; i < N.first[k + 1]; i++)
        arrive[na++] = sched_wait_signal(s, N.ranks[i], 0);
    int prev_wait = -1, prev_sig = -1;
    for (int rk = 0, dist = 1; dist < m; rk++, dist <<= 1) {
        int sig = sched_signal(s, N.ranks[N.first[(k + dist) % m]], 2u + (uint32_t)rk);
        if (rk == 0)
            for (int i = 0; i < na; i++)
                sched_dep(s, sig, arrive[i], 0);
        sched_dep(s, sig, prev_wait, 0);
        sched_dep(s, sig, prev_sig, 0);
        prev_sig = sig;
        prev_wait = sched_wait_signal(s, N.ranks[N.first[(k - dist + m) % m]], 2u + (uint32_t)rk);
    }
    for (int i = N.first[k] + 1; i < N.first[k + 1]; i++) {
        int rel = sched_signal(s, N.ranks[i], 1);
        sched_dep(s, rel, prev_wait, 0);
        sched_dep(s, rel, prev_sig, 0);
    }
    free(arrive);
    coll_nodes_free(&N);
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    double an, bn;
    coll_node_link(c, &an, &bn);
    return ceil_log2(a->nnodes) * c->alpha + 2 * an;
}

const struct coll_algo coll_barrier_hier = {
    .name = "hier",
    .kind = COLL_BARRIER,
    .check = coll_nodes_apply,
    .build = build,
    .cost = cost,
    .shares = 1, /* a tree: each step waits for one particular rank */
};
