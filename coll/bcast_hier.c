/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Broadcast across nodes: a binomial tree over one leader per node (the
 * root on its node, the lowest rank elsewhere), then a binomial tree inside
 * every node from its leader.
 *
 * Each byte crosses the network once per node, not once per rank, and the
 * rest of the tree runs over the node's own path (shm under per-peer
 * paths). A rank forwards chunk k while chunk k+1 arrives (chunked
 * dependencies), so large messages pipeline down both trees. Uneven nodes
 * work: a tree is over whatever ranks a node has.
 *
 * Needs the node of every rank (coll_args.node).
 */
#include <stdlib.h>

#include "coll.h"
#include "log.h"

/* The binomial tree over list[0 .. c) from list[0], in which this rank is
 * list[me]: receives into `into` (not at list[0]) and sends from `from`
 * (list[0]) or `into`, each send after the receive (chunked). Returns the
 * step after which the data is here (`have` at list[0]). */
static int tree_bcast(struct sched *s, const int *list, int c, int me, uint32_t tag,
                       struct sched_buf from, struct sched_buf into, size_t len, int have)
{
    int low = 1;
    if (me > 0) {
        while (!(me & low))
            low <<= 1;
        have = sched_recv(s, list[me - low], tag, into, len);
        from = into;
    } else {
        while (low < c)
            low <<= 1;
    }
    for (int d = low >> 1; d >= 1; d >>= 1)
        if (me + d < c) {
            int snd = sched_send(s, list[me + d], tag, from, len);
            sched_dep(s, snd, have, 1);
        }
    return have;
}

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const size_t bytes = a->count * a->esize;
    struct coll_nodes N;
    int *lead = malloc((size_t)a->nnodes * sizeof(int));
    int *local = malloc((size_t)a->nranks * sizeof(int));
    if (!lead || !local || coll_nodes_make(a, &N) != 0) {
        free(lead);
        free(local);
        return FC_ERR(FC_ERR_NO_MEMORY, "bcast hier: out of memory for %d ranks", a->nranks);
    }
    int me_lead, me_local = 0, L;
    coll_nodes_trees(a, &N, lead, &me_lead, local, &me_local, &L);
    int have = -1;
    struct sched_buf from = sbuf(R_RECV, 0);
    if (a->rank == a->root) {
        from = sbuf(R_SEND, 0); /* the sends read it: no wait for the copy */
        if (!a->in_place)
            sched_copy(s, sbuf(R_RECV, 0), sbuf(R_SEND, 0), bytes);
    }
    if (me_lead >= 0)
        have = tree_bcast(s, lead, a->nnodes, me_lead, 0, from, sbuf(R_RECV, 0), bytes, have);
    if (me_lead > 0)
        from = sbuf(R_RECV, 0);
    tree_bcast(s, local, L, me_local, 1, from, sbuf(R_RECV, 0), bytes, have);
    coll_nodes_free(&N);
    free(lead);
    free(local);
    return s->build_err;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    const double bytes = (double)a->count * (double)a->esize;
    double an, bn;
    coll_node_link(c, &an, &bn);
    const int L = (a->nranks + a->nnodes - 1) / a->nnodes;
    return ceil_log2(a->nnodes) * (c->alpha + bytes * c->beta + coll_hs1(c, bytes)) +
           ceil_log2(L) * (an + bytes * bn);
}

const struct coll_algo coll_bcast_hier = {
    .name = "hier",
    .kind = COLL_BCAST,
    .check = coll_nodes_apply,
    .build = build,
    .cost = cost,
    .shares = 1,
};
