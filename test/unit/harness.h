/* SPDX-License-Identifier: BSD-3-Clause */
/* Runs one schedule per rank, all ranks in this process, over the loopback
 * transport; detects deadlocks (a round in which nothing completes). */
#ifndef FC_TEST_HARNESS_H
#define FC_TEST_HARNESS_H

#include "coll.h"
#include "transport_loop.h"

struct h_opts {
    size_t chunk;   /* engine chunk bytes (0: none) */
    int window;     /* chunks in flight per step */
    unsigned seed;  /* 0: completions in order; else shuffled */
    int async_local; /* local steps run later by the transport (the GPU path) */
    int ordered_sends; /* sends complete in posting order (libfabric 1.17 shm); with a
                          node map, only those between ranks of one node */
};

/* Builds al for every rank (tmpl with .rank set) and runs them. For
 * alltoallv tmpl's four arrays are n x n matrices, row r rank r's (and
 * count is set from them); for allgatherv count is set from rcounts. send[r] and
 * recv[r] are rank r's buffers. Returns FC_SUCCESS or the first error, with
 * a message in err. */
fc_result_t h_run(const struct coll_algo *al, const struct coll_args *tmpl, void **send,
                  void **recv, const struct h_opts *o, char *err, size_t errlen);

/* Runs every rank but `late` until nothing moves, then starts `late` too
 * and finishes. Returns the number of ranks that completed before `late`
 * started (a barrier must give 0), or -1 on an error (message in err). */
int h_run_late(const struct coll_algo *al, const struct coll_args *tmpl, int late,
               const struct h_opts *o, char *err, size_t errlen);

/* Fills n elements of dt at p with the closed-form input of rank r for op:
 * small integers whose sums and products are exact in every type. */
void h_fill(void *p, fc_datatype_t dt, fc_op_t op, int r, int nranks, size_t first, size_t n);
/* Rank r's scalar of a pre-scaled sum (tmpl->premul non-NULL in h_run: its
 * builds go through sched_premul_input as collective.c's do): 1 or 2 in dt. */
void h_premul_scalar(fc_datatype_t dt, int r, void *out);

#endif
