/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * A user's program, written only against API.md and self-contained (no test
 * helper), so it can be built outside the tree with
 *   cc api_program.c $(pkg-config --cflags --libs fabcoll)
 * and run by fc_run, srun or mpirun. It touches every call of the API once:
 * collectives with their in-place forms, send/recv, 8+ overlapping
 * nonblocking operations completed in reverse order, split with key order
 * and NOCOLOR, query, invalid arguments with the communicator usable after.
 * Prints "api_program: OK (n ranks, provider)" on rank 0; exit 0 on success.
 */
#include <fabcoll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;
static int me = -1;

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            failures++;                                                                        \
            fprintf(stderr, "api_program: rank %d: line %d: ", me, __LINE__);                  \
            fprintf(stderr, __VA_ARGS__);                                                      \
            fprintf(stderr, "\n");                                                             \
        }                                                                                      \
    } while (0)
#define OK(call) CHECK((call) == FC_SUCCESS, "%s: %s", #call, fc_last_error())

int main(void)
{
    fc_comm_t comm;
    if (fc_comm_init(&comm) != FC_SUCCESS) {
        fprintf(stderr, "api_program: fc_comm_init: %s\n", fc_last_error());
        return 1;
    }
    me = fc_comm_rank(comm);
    int n = fc_comm_size(comm);

    /* allreduce, in place, double avg */
    double d[1000];
    for (int i = 0; i < 1000; i++)
        d[i] = me + i;
    OK(fc_allreduce(d, d, 1000, FC_FLOAT64, FC_AVG, comm));
    for (int i = 0; i < 1000; i++)
        CHECK(d[i] == (n - 1) / 2.0 + i, "allreduce avg[%d] = %g", i, d[i]);

    /* broadcast from the last rank */
    int32_t b[77];
    for (int i = 0; i < 77; i++)
        b[i] = me == n - 1 ? i * 3 : -1;
    OK(fc_broadcast(me == n - 1 ? b : NULL, b, 77, FC_INT32, n - 1, comm));
    for (int i = 0; i < 77; i++)
        CHECK(b[i] == i * 3, "bcast[%d] = %d", i, b[i]);

    /* reduce to rank 0, max */
    int64_t rv[10], rr[10];
    for (int i = 0; i < 10; i++)
        rv[i] = me * 10 + i;
    OK(fc_reduce(rv, me == 0 ? rr : NULL, 10, FC_INT64, FC_MAX, 0, comm));
    if (me == 0)
        for (int i = 0; i < 10; i++)
            CHECK(rr[i] == (n - 1) * 10 + i, "reduce[%d] = %lld", i, (long long)rr[i]);

    /* allgather in place */
    uint8_t *ag = calloc((size_t)n * 3, 1);
    for (int i = 0; i < 3; i++)
        ag[me * 3 + i] = (uint8_t)(me + i);
    OK(fc_allgather(ag + me * 3, ag, 3, FC_UINT8, comm));
    for (int r = 0; r < n; r++)
        for (int i = 0; i < 3; i++)
            CHECK(ag[r * 3 + i] == (uint8_t)(r + i), "allgather[%d][%d]", r, i);

    /* reduce_scatter, float sum */
    float *rs = malloc(sizeof(float) * 4 * (size_t)n), rso[4];
    for (int i = 0; i < 4 * n; i++)
        rs[i] = (float)i;
    OK(fc_reduce_scatter(rs, rso, 4, FC_FLOAT32, FC_SUM, comm));
    for (int i = 0; i < 4; i++)
        CHECK(rso[i] == (float)(n * (me * 4 + i)), "reduce_scatter[%d] = %g", i, rso[i]);

    /* alltoall in place */
    int32_t *a2 = malloc(sizeof(int32_t) * 2 * (size_t)n);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < 2; i++)
            a2[j * 2 + i] = me * 100 + j * 10 + i;
    OK(fc_alltoall(a2, a2, 2, FC_INT32, comm));
    for (int j = 0; j < n; j++)
        for (int i = 0; i < 2; i++)
            CHECK(a2[j * 2 + i] == j * 100 + me * 10 + i, "alltoall[%d][%d]", j, i);

    OK(fc_barrier(comm));

    /* send/recv around a ring */
    if (n > 1) {
        int64_t out = me, in = -1;
        if (me % 2 == 0) {
            OK(fc_send(&out, 1, FC_INT64, (me + 1) % n, comm));
            OK(fc_recv(&in, 1, FC_INT64, (me + n - 1) % n, comm));
        } else {
            OK(fc_recv(&in, 1, FC_INT64, (me + n - 1) % n, comm));
            OK(fc_send(&out, 1, FC_INT64, (me + 1) % n, comm));
        }
        CHECK(in == (me + n - 1) % n, "ring received %lld", (long long)in);
    }

    /* 8 overlapping iallreduces + ibroadcast + ibarrier, completed in reverse */
    fc_request_t req[10];
    int32_t nb[8][64];
    for (int k = 0; k < 8; k++) {
        for (int i = 0; i < 64; i++)
            nb[k][i] = k + i + me;
        OK(fc_iallreduce(nb[k], nb[k], 64, FC_INT32, FC_SUM, comm, &req[k]));
    }
    uint16_t ib[5] = {0};
    if (me == 0)
        for (int i = 0; i < 5; i++)
            ib[i] = (uint16_t)(0x3c00 + i); /* float16 bit patterns */
    OK(fc_ibroadcast(ib, ib, 5, FC_FLOAT16, 0, comm, &req[8]));
    OK(fc_ibarrier(comm, &req[9]));
    for (int k = 9; k >= 0; k--)
        OK(fc_wait(&req[k]));
    for (int k = 0; k < 8; k++)
        for (int i = 0; i < 64; i++)
            CHECK(nb[k][i] == n * (k + i) + n * (n - 1) / 2, "iallreduce %d[%d]", k, i);
    for (int i = 0; i < 5; i++)
        CHECK(ib[i] == 0x3c00 + i, "ibroadcast[%d]", i);

    /* split: reversed keys, last rank opts out */
    fc_comm_t sub = NULL;
    int color = (n > 1 && me == n - 1) ? FC_SPLIT_NOCOLOR : 0;
    OK(fc_comm_split(comm, color, n - me, &sub));
    if (color == FC_SPLIT_NOCOLOR) {
        CHECK(sub == NULL, "NOCOLOR produced a communicator");
    } else if (sub) {
        int m = n > 1 ? n - 1 : 1;
        CHECK(fc_comm_size(sub) == m, "sub size %d", fc_comm_size(sub));
        CHECK(fc_comm_rank(sub) == m - 1 - me, "sub rank %d for rank %d", fc_comm_rank(sub), me);
        int32_t one = 1, cnt = 0;
        OK(fc_allreduce(&one, &cnt, 1, FC_INT32, FC_SUM, sub));
        CHECK(cnt == m, "sub allreduce %d", cnt);
        OK(fc_comm_destroy(sub));
    }

    /* invalid arguments, then the communicator still works */
    CHECK(fc_allreduce(d, d, 4, (fc_datatype_t)99, FC_SUM, comm) == FC_ERR_INVALID_ARGUMENT,
          "bad datatype accepted");
    CHECK(fc_broadcast(d, d, 4, FC_FLOAT64, n, comm) == FC_ERR_INVALID_ARGUMENT,
          "bad root accepted");
    CHECK(fc_allreduce(NULL, d, 4, FC_FLOAT64, FC_SUM, comm) == FC_ERR_INVALID_ARGUMENT,
          "NULL buffer accepted");
    int32_t one = 1, cnt = 0;
    OK(fc_allreduce(&one, &cnt, 1, FC_INT32, FC_SUM, comm));
    CHECK(cnt == n, "allreduce after invalid arguments: %d", cnt);

    fc_comm_attr_t a;
    OK(fc_comm_query(comm, &a));
    /* FC_RAILS asks for that many endpoints per rank; auto gives 1 to 4 */
    const char *rails = getenv("FC_RAILS");
    int want_rails = rails ? atoi(rails) : 0;
    CHECK(want_rails > 0 ? a.nrails == want_rails : a.nrails >= 1 && a.nrails <= 4,
          "nrails %d (FC_RAILS=%s)", a.nrails, rails ? rails : "unset");
    if (me == 0 && !failures)
        printf("api_program: OK (%d ranks, provider %s, %d node%s)\n", n, a.provider, a.nnodes,
               a.nnodes > 1 ? "s" : "");
    OK(fc_comm_destroy(comm));
    free(ag);
    free(rs);
    free(a2);
    return failures ? 1 : 0;
}
