/* SPDX-License-Identifier: BSD-3-Clause */
/* The table of every algorithm (fc_info -a and FC_ALGO read it), and the
 * one way to build one of them (coll_build). */
#include <stddef.h>

#include "coll.h"

extern const struct coll_algo coll_allreduce_ring, coll_allreduce_gather, coll_allreduce_rd,
    coll_allreduce_hier, coll_allreduce_rabenseifner;
extern const struct coll_algo coll_bcast_binomial, coll_bcast_chain, coll_bcast_scatter_allgather,
    coll_bcast_hier;
extern const struct coll_algo coll_reduce_binomial, coll_reduce_rsgather, coll_reduce_hier;
extern const struct coll_algo coll_allgather_ring, coll_allgather_rd, coll_allgather_bruck,
    coll_allgather_hier, coll_reduce_scatter_ring, coll_reduce_scatter_halving,
    coll_reduce_scatter_hier, coll_alltoall_pairwise, coll_alltoall_bruck,
    coll_barrier_dissemination, coll_barrier_hier;
extern const struct coll_algo coll_gather_binomial, coll_gather_linear, coll_scatter_binomial,
    coll_scatter_linear;
extern const struct coll_algo coll_allgatherv_ring, coll_allgatherv_bruck,
    coll_alltoallv_pairwise;
extern const struct coll_algo coll_allreduce_ordered, coll_reduce_scatter_ordered,
    coll_reduce_ordered;

const struct coll_algo *const coll_algos[] = {
    &coll_allreduce_ring,
    &coll_allreduce_gather, /* before rd, for its tie_margin */
    &coll_allreduce_rd,
    &coll_allreduce_hier,
    &coll_allreduce_rabenseifner,
    &coll_allreduce_ordered,
    &coll_bcast_binomial,
    &coll_bcast_chain,
    &coll_bcast_scatter_allgather,
    &coll_bcast_hier,
    &coll_reduce_binomial,
    &coll_reduce_rsgather,
    &coll_reduce_hier,
    &coll_reduce_ordered,
    &coll_allgather_ring,
    &coll_allgather_rd,
    &coll_allgather_bruck,
    &coll_allgather_hier,
    &coll_reduce_scatter_ring,
    &coll_reduce_scatter_halving,
    &coll_reduce_scatter_hier,
    &coll_reduce_scatter_ordered,
    &coll_alltoall_pairwise,
    &coll_alltoall_bruck,
    &coll_barrier_dissemination,
    &coll_barrier_hier,
    &coll_gather_binomial,
    &coll_gather_linear,
    &coll_scatter_binomial,
    &coll_scatter_linear,
    &coll_allgatherv_ring,
    &coll_allgatherv_bruck,
    &coll_alltoallv_pairwise,
    NULL,
};

int coll_any(const struct coll_args *a)
{
    (void)a;
    return 1;
}

fc_result_t coll_build(const struct coll_algo *al, struct sched *s, const struct coll_args *a)
{
    if (!a->premul)
        return al->build(s, a);
    /* the algorithm reads its input from R_SEND, which then moves to the
     * scaled copy */
    struct coll_args b = *a;
    b.in_place = 0;
    fc_result_t rc = al->build(s, &b);
    const size_t in =
        a->count * a->esize * (a->kind == COLL_REDUCE_SCATTER ? (size_t)a->nranks : 1);
    const int from = a->in_place && a->kind != COLL_REDUCE_SCATTER ? R_RECV : R_SEND;
    return rc == FC_SUCCESS ? sched_premul_input(s, from, in, a->premul, a->in_place) : rc;
}
