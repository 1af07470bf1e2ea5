/* SPDX-License-Identifier: BSD-3-Clause */
/* The table of every algorithm; fc_info -a and FC_ALGO read it. */
#include <stddef.h>

#include "coll.h"

extern const struct coll_algo coll_allreduce_ring, coll_allreduce_rd, coll_bcast_binomial,
    coll_bcast_chain;

const struct coll_algo *const coll_algos[] = {
    &coll_allreduce_ring, &coll_allreduce_rd, &coll_bcast_binomial, &coll_bcast_chain, NULL,
};
