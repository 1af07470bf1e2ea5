/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Groups: fc_group_start ... fc_group_end, per thread.
 *
 * Inside a group a blocking collective or point-to-point call is checked
 * and started at once, like its nonblocking twin, and its request joins
 * the thread's group instead of being waited for; the call returns
 * FC_SUCCESS (or its argument error) and the operation is complete only at
 * the outermost fc_group_end, which drives every request of the group
 * until all are done. So send/recv pairs never deadlock whatever their
 * order (every receive is posted before anyone waits), and a group may
 * span communicators of different families (each request's family is
 * driven in turn). Nonblocking and stream-ordered calls inside a group
 * behave as outside it. Groups nest: only the outermost end waits.
 *
 * This file holds the thread's group and nothing else: it starts nothing
 * (api.c does) and runs requests only through comm_test (request.c).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm.h"
#include "log.h"

struct group {
    int depth;
    struct fc_request **reqs;
    int n, cap;
};
static __thread struct group grp;

int group_active(void)
{
    return grp.depth > 0;
}

void group_start(void)
{
    grp.depth++;
}

fc_result_t group_add(struct fc_request *r)
{
    if (grp.n == grp.cap) {
        int cap = grp.cap ? 2 * grp.cap : 16;
        struct fc_request **q = realloc(grp.reqs, sizeof(*q) * (size_t)cap);
        if (!q) { /* not kept: complete it here, as outside a group */
            fc_result_t rc = comm_wait(r);
            return rc != FC_SUCCESS ? rc
                                    : FC_ERR(FC_ERR_NO_MEMORY, "out of memory for the group's "
                                                               "requests (this call completed)");
        }
        grp.reqs = q;
        grp.cap = cap;
    }
    grp.reqs[grp.n++] = r;
    return FC_SUCCESS;
}

#define GROUP_YIELD_S 0.002

/* Drives every request of the group until all are done: each in turn with
 * comm_test (its family's progress, its FC_TIMEOUT), yielding the CPU when
 * a pass finds nothing new and napping after a while, as comm_wait does. */
static fc_result_t drain(void)
{
    fc_result_t first = FC_SUCCESS;
    char *msg = NULL;
    int left = grp.n;
    double idle_since = comm_now();
    while (left > 0) {
        int moved = 0;
        for (int i = 0; i < grp.n; i++) {
            struct fc_request *r = grp.reqs[i];
            if (!r)
                continue;
            int done = 0, m = 0;
            fc_result_t rc = comm_poll(r, &done, &m);
            moved |= m;
            if (done || rc != FC_SUCCESS) {
                grp.reqs[i] = NULL;
                left--;
                moved = 1;
                if (rc != FC_SUCCESS && first == FC_SUCCESS) {
                    first = rc;
                    msg = strdup(err_get());
                }
            }
        }
        /* nothing moved: let the other ranks of this node run, and after
         * GROUP_YIELD_S of that nap briefly */
        double t = comm_now();
        if (moved || left == 0) {
            idle_since = t;
        } else if (t - idle_since < GROUP_YIELD_S) {
            sched_yield();
        } else {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
    grp.n = 0;
    if (first != FC_SUCCESS) {
        err_restore(msg);
        free(msg);
    }
    return first;
}

fc_result_t group_end(void)
{
    if (grp.depth == 0)
        return FC_ERR(FC_ERR_INVALID_ARGUMENT, "no group is open on this thread "
                                               "(fc_group_end without fc_group_start)");
    if (--grp.depth > 0)
        return FC_SUCCESS;
    fc_result_t rc = drain();
    free(grp.reqs);
    grp.reqs = NULL;
    grp.cap = 0;
    return rc;
}
