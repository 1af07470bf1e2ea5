/* SPDX-License-Identifier: BSD-3-Clause */
/* Algorithm choice: FC_ALGO, FC_TUNE_FILE rules, then the cost model. */
#ifndef FC_SELECT_H
#define FC_SELECT_H

#include "coll.h"
#include "config.h"

#define COLL_MAX_RULES 64

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
/* The cost model's choice alone, with its predicted time. */
const struct coll_algo *coll_select_by_cost(const struct coll_tuning *t,
                                            const struct coll_args *a, double *predicted);

#endif /* FC_SELECT_H */
