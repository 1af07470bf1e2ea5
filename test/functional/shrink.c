/* SPDX-License-Identifier: BSD-3-Clause */
/* fc_comm_shrink in a loop of 100 allreduces, every element of every result
 * checked:
 *   1. a rank leaves without a word (FT_SHRINK_VICTIM, default 1, at
 *      iteration FT_SHRINK_AT, default 30): the others' allreduce fails (peer
 *      failed or timed out), they shrink, and go on over the survivors;
 *   2. with 3 ranks or more, at iteration 60 the last rank of the new
 *      communicator stalls for 4 x FC_TIMEOUT: the others shrink without it
 *      and finish; when it comes back, its allreduce fails and its shrink
 *      must tell it that it was given up (FC_ERR_PEER_FAILED).
 * Before the loop, a shrink of the healthy communicator keeps every rank.
 * Run with FC_TIMEOUT=2. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define N 5000 /* int32 elements: 20 KB, a signed call */
#define LOOPS 100
#define LATE_AT 60
#define MAX_BUFS 4

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

/* One allreduce of iteration i over the ranks whose original ranks are
 * members[0..n-1]; me: this rank's original rank. Returns its result. */
static fc_result_t step(struct ft *t, fc_comm_t comm, int32_t *buf, int i, int me,
                        const int *members, int n)
{
    for (int j = 0; j < N; j++)
        buf[j] = (me + 1) * (i + 1) + j;
    fc_result_t rc = fc_allreduce(buf, buf, N, FC_INT32, FC_SUM, comm);
    if (rc != FC_SUCCESS)
        return rc;
    int64_t base = 0;
    for (int k = 0; k < n; k++)
        base += (int64_t)(members[k] + 1) * (i + 1);
    int bad = 0;
    for (int j = 0; j < N && bad < 3; j++)
        if (buf[j] != (int32_t)(base + (int64_t)n * j)) {
            FT_CHECK(t, 0, "iteration %d, element %d: %d, expected %lld", i, j, buf[j],
                     (long long)(base + (int64_t)n * j));
            bad++;
        }
    return rc;
}

int main(void)
{
    struct ft t;
    ft_init(&t, "shrink");
    if (t.size < 2)
        return ft_skip(&t, "needs at least 2 ranks");
    const int victim = env_int("FT_SHRINK_VICTIM", 1) % t.size;
    const int at = env_int("FT_SHRINK_AT", 30);
    int *members = malloc((size_t)t.size * sizeof(int));
    for (int k = 0; k < t.size; k++)
        members[k] = k;
    int n = t.size;

    /* a healthy communicator shrinks to itself */
    fc_comm_t same = NULL;
    FT_OK(&t, fc_comm_shrink(t.comm, &same));
    FT_CHECK(&t, same && fc_comm_size(same) == t.size && fc_comm_rank(same) == t.rank,
             "shrink of a healthy communicator: rank %d of %d", fc_comm_rank(same),
             fc_comm_size(same));
    int32_t *buf = malloc(N * sizeof(int32_t));
    if (same) {
        FT_OK(&t, step(&t, same, buf, 0, t.rank, members, n));
        FT_OK(&t, fc_comm_destroy(same));
    }
    fc_comm_t null_out = (fc_comm_t)&t;
    FT_CHECK(&t, fc_comm_shrink(NULL, &null_out) == FC_ERR_INVALID_ARGUMENT && !null_out,
             "fc_comm_shrink(NULL) must be refused and give NULL");

    /* every rank's pid: the survivors wait for the stalled rank to finish */
    int32_t *pids = calloc((size_t)t.size, sizeof(int32_t));
    int32_t mypid = (int32_t)getpid();
    FT_OK(&t, fc_allgather(&mypid, pids, 1, FC_INT32, t.comm));

    fc_comm_t comm = t.comm;
    int shrinks = 0, late = -1; /* the stalled rank's original rank */
    int32_t *bufs[MAX_BUFS] = {buf};
    int nbufs = 1;
    for (int i = 0; i < LOOPS; i++) {
        if (shrinks == 0 && t.rank == victim && i == at)
            _exit(0); /* as a kill looks to the peers: no destroy, no goodbye */
        const int stalled = shrinks == 1 && t.rank == late && i == LATE_AT;
        if (stalled) {
            struct timespec nap = {(time_t)(4 * ft_timeout()), 0};
            nanosleep(&nap, NULL);
        }
        fc_result_t rc = step(&t, comm, buf, i, t.rank, members, n);
        if (rc == FC_SUCCESS && !stalled)
            continue;
        /* the gone rank's last messages of the call before may be lost
         * with it (a send still buffered when it left or stalled): the
         * failure may come one call early */
        const int expected = (shrinks == 0 && (i == at || i == at - 1)) ||
                             (shrinks == 1 && late >= 0 && (i == LATE_AT || i == LATE_AT - 1));
        if (!expected) {
            FT_CHECK(&t, 0, "iteration %d failed: %s: %s", i, fc_strerror(rc), fc_last_error());
            break;
        }
        const int gone = shrinks == 0 ? victim : late;
        FT_CHECK(&t, rc == FC_ERR_PEER_FAILED || rc == FC_ERR_TIMEOUT,
                 "iteration %d with rank %d gone: %s, expected peer failure or timeout", i,
                 gone, fc_strerror(rc));
        double t0 = ft_now();
        fc_comm_t nc = NULL;
        fc_result_t src = fc_comm_shrink(comm, &nc);
        double dt = ft_now() - t0;
        if (stalled) {
            /* the others went on without it */
            FT_CHECK(&t, src == FC_ERR_PEER_FAILED && !nc,
                     "the stalled rank's shrink: %s (expected peer failed): %s",
                     fc_strerror(src), fc_last_error());
            printf("shrink: stalled rank %d was told after %.2f s: %s\n", t.rank, dt,
                   fc_last_error());
            if (nc)
                FT_OK(&t, fc_comm_abort(nc));
            FT_OK(&t, fc_comm_abort(comm));
            for (int b = 0; b < nbufs; b++)
                free(bufs[b]);
            free(pids);
            free(members);
            return t.failures ? 1 : 0;
        }
        if (src != FC_SUCCESS || !nc) {
            FT_CHECK(&t, 0, "fc_comm_shrink: %s: %s", fc_strerror(src), fc_last_error());
            break;
        }
        int want_rank = 0;
        for (int k = 0; k < n; k++)
            if (members[k] != gone && members[k] < t.rank)
                want_rank++;
        FT_CHECK(&t, fc_comm_size(nc) == n - 1 && fc_comm_rank(nc) == want_rank,
                 "after shrink: rank %d of %d, expected %d of %d", fc_comm_rank(nc),
                 fc_comm_size(nc), want_rank, n - 1);
        FT_CHECK(&t, dt < 2 * ft_timeout() + 10, "shrink took %.1f s (FC_TIMEOUT=%g)", dt,
                 ft_timeout());
        if (fc_comm_rank(nc) == 0)
            printf("shrink: rank %d gone at iteration %d: %s; %d survivors agreed in %.2f s\n",
                   gone, i, fc_strerror(rc), fc_comm_size(nc), dt);
        FT_OK(&t, fc_comm_abort(comm));
        comm = nc;
        int m = 0;
        for (int k = 0; k < n; k++)
            if (members[k] != gone)
                members[m++] = members[k];
        n = m;
        /* the failed call's buffer may still take a late message: a new one,
         * the old one kept until the endpoint is gone */
        buf = malloc(N * sizeof(int32_t));
        bufs[nbufs++] = buf;
        shrinks++;
        if (shrinks == 1 && t.size >= 3)
            late = members[n - 1]; /* who stalls at LATE_AT */
        /* the survivors go on from the earliest call one of them failed
         * (those that finished it run it again) */
        int32_t failed_at = i, from = i;
        FT_OK(&t, fc_allreduce(&failed_at, &from, 1, FC_INT32, FC_MIN, comm));
        i = from - 1;
    }
    FT_CHECK(&t, shrinks == 1 + (t.size >= 3), "%d shrinks, expected %d", shrinks,
             1 + (t.size >= 3));
    /* the stalled rank must still find the others' messages */
    for (double t0 = ft_now(); late >= 0 && ft_now() - t0 < 60;) {
        if (kill((pid_t)pids[late], 0) != 0 && errno == ESRCH)
            break;
        struct timespec nap = {0, 20 * 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    t.comm = comm;
    int rc = ft_finish(&t);
    for (int b = 0; b < nbufs; b++)
        free(bufs[b]);
    free(pids);
    free(members);
    return rc;
}
