/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Runs one algorithm of one collective at n ranks over the loopback
 * transport and checks every rank's result against a reference computed
 * here, element by element (bit-exact: the inputs are small integers whose
 * sums and products are exact in every type, so reduction order does not
 * matter). Also checks that out-of-place inputs are left untouched, and
 * that nothing is written in the guard bytes before and after any buffer.
 */
#ifndef FC_TEST_CHECK_H
#define FC_TEST_CHECK_H

#include "harness.h"

struct check_case {
    enum coll_kind kind;
    int nranks, root, in_place;
    size_t count;
    fc_datatype_t dt;
    fc_op_t op;
    struct h_opts opts;
    const int *node; /* every rank's node (NULL: none known) */
    int nnodes;
    int premul; /* a pre-scaled sum (op FC_SUM): rank r's scalar h_premul_scalar's */
};

/* Returns 0 when correct; else writes what went wrong into err. */
int check_coll(const struct coll_algo *al, const struct check_case *c, char *err, size_t errlen);

/* The v-collectives: counts are allgatherv's n recvcounts, or alltoallv's
 * n x n matrix (counts[i * n + j]: what rank i sends rank j). Displacements
 * are made here: packed in rank order (layout 0), or in reverse order with
 * a gap of an element before each block (layout 1; alltoallv: the receive
 * side takes the other layout). Gaps must keep what was there. */
struct check_vcase {
    enum coll_kind kind;
    int nranks, in_place, layout;
    const size_t *counts;
    fc_datatype_t dt;
    struct h_opts opts;
};
int check_vcoll(const struct coll_algo *al, const struct check_vcase *c, char *err,
                size_t errlen);

#endif
