/* SPDX-License-Identifier: BSD-3-Clause */
/* Algorithm choice: FC_ALGO, FC_TUNE_FILE rules, then the cost model. */
#ifndef FC_SELECT_H
#define FC_SELECT_H

#include "coll.h"
#include "config.h"

#define COLL_MAX_RULES 64

/* What a step costs more when ranks outnumber CPUs: a waiting rank yields,
 * and runs again only after the ranks sharing its CPU had their turn.
 * Fitted on a 2-core VM, 4 ranks (2 per CPU), 8 interleaved rounds of
 * fc_perf with each algorithm forced, shm and tcp: the per-step time
 * implied by binomial against scatter + allgather (broadcast) and
 * rsgather (reduce), 64 KiB-1 MiB, is 6-20 us above the provider's
 * alpha (8-byte allreduce: 4-6 us). */
#define COLL_HANDOFF_US 10
#define COLL_HANDOFF_S (COLL_HANDOFF_US * 1e-6)

struct coll_rule {
    enum coll_kind kind;
    size_t min_bytes, max_bytes; /* total bytes of the collective (see coll_bytes) */
    int min_ranks, max_ranks;
    const struct coll_algo *algo;
};

struct coll_tuning {
    const struct coll_algo *forced[COLL_NKINDS];
    struct coll_rule rules[COLL_MAX_RULES];
    int nrules;
    struct coll_cost cost;
    /* Tuning for device buffers (FC_TUNE_MEMORY, agreed by all ranks): an
     * allreduce whose n vectors fit in this many bytes goes to gather,
     * whose GPU part is then one fused kernel; the host model's rounds
     * would each go to the GPU and back. 0: host tuning. */
    size_t dev_gather_max;
    /* FC_REPRODUCIBLE (any rank asking): reductions only by algorithms that
     * reduce in rank order (coll_algo.rank_order). */
    int reproducible;
};

void coll_tuning_init(struct coll_tuning *t, const struct coll_cost *c);
/* Parses FC_ALGO ("allreduce:ring,bcast:chain"). */
fc_result_t coll_tuning_force(struct coll_tuning *t, const char *spec);
/* Loads FC_TUNE_FILE: "collective min_bytes max_bytes algorithm [min_ranks max_ranks]"
 * per line, '#' comments, "max" for no upper bound; first matching rule wins. */
fc_result_t coll_tuning_load_file(struct coll_tuning *t, const char *path);
/* The algorithm to run; *why says which rule decided. */
const struct coll_algo *coll_select(const struct coll_tuning *t, const struct coll_args *a,
                                    const char **why);
/* An algorithm's predicted time (s) under c, ranks outnumbering CPUs
 * included (coll_cost.oversub); 1e30 when it has no model. */
double coll_algo_cost(const struct coll_algo *al, const struct coll_args *a,
                      const struct coll_cost *c);
/* The cost model's choice alone, with its predicted time. */
const struct coll_algo *coll_select_by_cost(const struct coll_tuning *t,
                                            const struct coll_args *a, double *predicted);

#endif /* FC_SELECT_H */
