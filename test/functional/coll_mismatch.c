/* SPDX-License-Identifier: BSD-3-Clause */
/* Ranks that disagree about a collective: the last rank calls it with a
 * different count, datatype, op or root (or a different collective), with
 * messages long enough that libfabric's shm could not survive a receive of
 * the wrong length. What is checked:
 *  - no rank waits beyond FC_TIMEOUT, and every rank that fails fails with
 *    FC_ERR_INVALID_ARGUMENT or FC_ERR_TIMEOUT (or PEER_FAILED) (a disagreement leaves the
 *    communicator unusable: a later call fails at once);
 *  - the ranks that exchange messages with the odd rank, and its neighbours
 *    (rank +- 1), fail with FC_ERR_INVALID_ARGUMENT naming the other side's
 *    call, so at least two ranks name it; the others fail with
 *    FC_ERR_TIMEOUT, or finish their part where it needs nothing of the
 *    ranks that disagree (allowed, except at 2 ranks).
 * Each case runs on a communicator split off for it; the job's own
 * communicator goes on working. Above 2 ranks the ranks wait out FC_TIMEOUT
 * after each case (some time out), so run it with a short FC_TIMEOUT.
 * FT_MISMATCH_COUNT sets the element count (default 1048576);
 * FT_MISMATCH_CASES picks cases by name. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common.h"

static void *kept[32]; /* the aborted cases' buffers, freed at the end */
static size_t nkept;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum kind { K_ALLREDUCE, K_BCAST, K_REDUCE, K_ALLGATHER, K_ALLGATHERV, K_ALLTOALLV };
struct call {
    enum kind kind;
    size_t count;
    fc_datatype_t dt;
    fc_op_t op;
    int root;
};

/* The v-collectives: count elements from and to every rank, except that
 * the call's `root` names a rank whose block is count * 3 / 2 + 3 instead
 * (allgatherv: in every rank's recvcounts; alltoallv: what this rank sends
 * it), -1: none. */
static size_t vc[4096], vd[4096];
static fc_result_t do_v(const struct call *c, void *buf, void *out, fc_comm_t comm)
{
    const int n = fc_comm_size(comm), me = fc_comm_rank(comm);
    if (n < 1 || n > 4096)
        return FC_ERR_INTERNAL;
    size_t at = 0;
    for (int j = 0; j < n; j++) {
        vc[j] = j == c->root ? c->count * 3 / 2 + 3 : c->count;
        vd[j] = at;
        at += vc[j] > c->count ? vc[j] : c->count;
    }
    if (c->kind == K_ALLGATHERV)
        return fc_allgatherv(buf, out, vc[me], vc, vd, c->dt, comm);
    static size_t rc[4096];
    for (int j = 0; j < n; j++)
        rc[j] = j == me ? vc[j] : c->count;
    return fc_alltoallv(buf, out, vc, vd, rc, vd, c->dt, comm);
}

/* a pre-scaled sum (by 1) made on the call's communicator */
#define OP_PREMUL ((fc_op_t)1000)

static fc_result_t do_call(const struct call *c, void *buf, void *out, fc_comm_t comm)
{
    if (c->kind == K_ALLREDUCE && c->op == OP_PREMUL) {
        fc_op_t op;
        const float one = 1.0f;
        if (fc_op_create_premulsum(&op, &one, FC_FLOAT32, comm) != FC_SUCCESS)
            return FC_ERR_INTERNAL;
        fc_result_t rc = fc_allreduce(buf, out, c->count, c->dt, op, comm);
        fc_op_destroy(op, comm);
        return rc;
    }
    switch (c->kind) {
    case K_ALLGATHERV:
    case K_ALLTOALLV:
        return do_v(c, buf, out, comm);
    case K_ALLREDUCE:
        return fc_allreduce(buf, out, c->count, c->dt, c->op, comm);
    case K_BCAST:
        return fc_broadcast(buf, buf, c->count, c->dt, c->root, comm);
    case K_REDUCE:
        return fc_reduce(buf, out, c->count, c->dt, c->op, c->root, comm);
    case K_ALLGATHER:
        return fc_allgather(buf, out, c->count, c->dt, comm);
    }
    return FC_ERR_INTERNAL;
}

/* One case: every rank but the last calls `mine`, the last calls `odd`.
 * want: a word the message of an INVALID_ARGUMENT must hold. */
static void one_case(struct ft *t, const char *name, struct call mine, struct call odd,
                     const char *want)
{
    const char *only = getenv("FT_MISMATCH_CASES");
    if (only && !strstr(only, name))
        return;
    fc_comm_t sub = NULL;
    FT_OK(t, fc_comm_split(t->comm, 0, 0, &sub));
    if (!sub)
        return;
    const struct call *c = t->rank == t->size - 1 ? &odd : &mine;
    size_t big = (mine.count > odd.count ? mine.count : odd.count) * 8 * (size_t)t->size;
    unsigned char *buf = calloc(1, big), *out = calloc(1, big);
    double t0 = now();
    fc_result_t rc = do_call(c, buf, out, sub);
    double dt = now() - t0;
    FT_CHECK(t, rc != FC_SUCCESS || t->size > 2,
             "%s: rank %d returned FC_SUCCESS from a call its peer disagrees on", name, t->rank);
    /* PEER_FAILED: a rank that found the disagreement first has aborted its
     * communicator, and the provider saw it go */
    FT_CHECK(t, rc == FC_SUCCESS || rc == FC_ERR_INVALID_ARGUMENT || rc == FC_ERR_TIMEOUT ||
                    rc == FC_ERR_PEER_FAILED,
             "%s: rank %d: %s (%s), not INVALID_ARGUMENT, TIMEOUT or PEER_FAILED", name, t->rank,
             fc_strerror(rc), fc_last_error());
    FT_CHECK(t, dt < ft_timeout() + 10, "%s: rank %d returned after %.1f s (FC_TIMEOUT %.0f)", name,
             t->rank, dt, ft_timeout());
    if (rc == FC_ERR_INVALID_ARGUMENT)
        FT_CHECK(t, strstr(fc_last_error(), want) != NULL, "%s: rank %d: '%s' does not name '%s'",
                 name, t->rank, fc_last_error(), want);
    fprintf(stderr, "coll_mismatch: %s: rank %d: %s after %.2f s: %s\n", name, t->rank,
            fc_strerror(rc), dt, rc == FC_SUCCESS ? "" : fc_last_error());
    /* the communicator is unusable now: a later call fails at once */
    if (rc != FC_SUCCESS) {
        double t1 = now();
        fc_result_t again = fc_allreduce(buf, out, 1, FC_FLOAT32, FC_SUM, sub);
        FT_CHECK(t, again != FC_SUCCESS && now() - t1 < 5,
                 "%s: rank %d: a call after the disagreement: %s after %.1f s", name, t->rank,
                 fc_strerror(again), now() - t1);
    }
    /* The buffers stay allocated until the job's endpoint is gone: transfers
     * of the aborted communicator may still be in flight (a peer's shm copy
     * reading them), and freeing them under it makes shm fail completions on
     * the endpoint the job's own communicator shares. */
    fc_comm_abort(sub);
    if (nkept + 2 <= sizeof(kept) / sizeof(kept[0])) {
        kept[nkept++] = buf;
        kept[nkept++] = out;
    }
    if (t->size > 2) {
        /* the ranks that timed out return FC_TIMEOUT after the call began */
        double until = t0 + 2 * ft_timeout() + 1;
        while (now() < until) {
            struct timespec ts = {0, 50000000};
            nanosleep(&ts, NULL);
        }
    }
    int named = rc == FC_ERR_INVALID_ARGUMENT, nnamed = 0;
    FT_OK(t, fc_allreduce(&named, &nnamed, 1, FC_INT32, FC_SUM, t->comm));
    FT_CHECK(t, nnamed >= 2,
             "%s: %d rank(s) named the disagreement", name, nnamed);
}

int main(void)
{
    struct ft t;
    ft_init(&t, "coll_mismatch");
    const char *e = getenv("FT_MISMATCH_COUNT");
    size_t n = e ? strtoull(e, NULL, 10) : 1048576;
    int last = t.size - 1;
    struct call ar = {K_ALLREDUCE, n, FC_FLOAT32, FC_SUM, 0};
    struct call x;

    x = ar, x.count = n + n / 2 + 3;
    one_case(&t, "count", ar, x, "count");
    x = ar, x.count = n / 2;
    one_case(&t, "short_count", ar, x, "count");
    x = ar, x.dt = FC_FLOAT64;
    one_case(&t, "float64", ar, x, "float64");
    x = ar, x.dt = FC_INT32; /* the same bytes */
    one_case(&t, "int32", ar, x, "int32");
    x = ar, x.op = FC_MAX;
    one_case(&t, "op", ar, x, "max");
    x = ar, x.op = OP_PREMUL; /* the scalars may differ; a sum against a pre-scaled one not */
    one_case(&t, "premulsum", ar, x, "pre-scaled sum");
    struct call bc = {K_BCAST, n, FC_FLOAT32, FC_SUM, 0};
    x = bc, x.root = last;
    one_case(&t, "root", bc, x, "root");
    struct call rd = {K_REDUCE, n, FC_FLOAT32, FC_SUM, 0};
    x = rd, x.root = last;
    one_case(&t, "reduce_root", rd, x, "root");
    x = ar, x.kind = K_BCAST;
    one_case(&t, "collective", ar, x, "bcast");
    /* allgatherv: the last rank believes rank 0's block is longer; alltoallv:
     * it sends rank 0 more than rank 0 expects */
    struct call agv = {K_ALLGATHERV, n / 4, FC_FLOAT32, FC_SUM, -1};
    x = agv, x.root = 0;
    one_case(&t, "allgatherv_counts", agv, x, "recvcounts");
    struct call a2av = {K_ALLTOALLV, n / 4, FC_FLOAT32, FC_SUM, -1};
    x = a2av, x.root = 0;
    one_case(&t, "alltoallv_counts", a2av, x, "alltoallv with");

    /* the job's communicator still works, and nothing was left in flight */
    float v = 1.0f, s = 0.0f;
    FT_OK(&t, fc_allreduce(&v, &s, 1, FC_FLOAT32, FC_SUM, t.comm));
    FT_CHECK(&t, s == (float)t.size, "allreduce after the cases: %g, want %d", s, t.size);
    int rc = ft_finish(&t);
    for (size_t i = 0; i < nkept; i++)
        free(kept[i]);
    return rc;
}
