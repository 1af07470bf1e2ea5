/* SPDX-License-Identifier: BSD-3-Clause */
/* Invalid arguments: each is FC_ERR_INVALID_ARGUMENT at once, with a
 * message naming the call, and the communicator works afterwards. */
#include <string.h>

#include "common.h"

static void expect_invalid(struct ft *t, fc_result_t rc, const char *what, const char *fn)
{
    FT_CHECK(t, rc == FC_ERR_INVALID_ARGUMENT, "%s: got %s instead of invalid argument", what,
             fc_strerror(rc));
    FT_CHECK(t, strstr(fc_last_error(), fn) != NULL, "%s: message does not name %s: '%s'", what,
             fn, fc_last_error());
}

int main(void)
{
    struct ft t;
    ft_init(&t, "bad_args");
    float a[64], b[64];
    memset(a, 0, sizeof(a));
    double t0 = ft_now();
    fc_comm_t c = t.comm;
    expect_invalid(&t, fc_allreduce(a, b, 4, FC_FLOAT32, FC_SUM, NULL), "NULL comm",
                   "fc_allreduce");
    expect_invalid(&t, fc_allreduce(NULL, b, 4, FC_FLOAT32, FC_SUM, c), "NULL sendbuf",
                   "fc_allreduce");
    expect_invalid(&t, fc_allreduce(a, NULL, 4, FC_FLOAT32, FC_SUM, c), "NULL recvbuf",
                   "fc_allreduce");
    expect_invalid(&t, fc_allreduce(a, b, 4, (fc_datatype_t)42, FC_SUM, c), "bad datatype",
                   "fc_allreduce");
    expect_invalid(&t, fc_allreduce(a, b, 4, (fc_datatype_t)-1, FC_SUM, c), "negative datatype",
                   "fc_allreduce");
    expect_invalid(&t, fc_allreduce(a, b, 4, FC_FLOAT32, (fc_op_t)99, c), "bad op",
                   "fc_allreduce");
    expect_invalid(&t, fc_allreduce(a, b, SIZE_MAX / 2, FC_FLOAT32, FC_SUM, c), "count overflow",
                   "fc_allreduce");
    expect_invalid(&t, fc_allreduce((char *)a + 1, b, 4, FC_FLOAT32, FC_SUM, c),
                   "misaligned sendbuf", "fc_allreduce");
    expect_invalid(&t, fc_broadcast(a, b, 4, FC_FLOAT32, t.size, c), "root == size",
                   "fc_broadcast");
    expect_invalid(&t, fc_broadcast(a, b, 4, FC_FLOAT32, -1, c), "root -1", "fc_broadcast");
    expect_invalid(&t, fc_broadcast(a, NULL, 4, FC_FLOAT32, 0, c), "NULL recvbuf",
                   "fc_broadcast");
    expect_invalid(&t, fc_broadcast(a, b, 4, (fc_datatype_t)12, 0, c), "datatype 12",
                   "fc_broadcast");
    expect_invalid(&t, fc_reduce(a, b, 4, FC_FLOAT32, FC_SUM, 99, c), "reduce root 99",
                   "fc_reduce");
    expect_invalid(&t, fc_allgather(a, b, SIZE_MAX / 4, FC_FLOAT64, c), "allgather overflow",
                   "fc_allgather");
    expect_invalid(&t, fc_reduce_scatter(a, b, 1, FC_FLOAT32, (fc_op_t)5, c), "rs bad op",
                   "fc_reduce_scatter");
    expect_invalid(&t, fc_alltoall(NULL, b, 1, FC_FLOAT32, c), "alltoall NULL", "fc_alltoall");
    expect_invalid(&t, fc_barrier(NULL), "barrier NULL", "fc_barrier");
    expect_invalid(&t, fc_send(a, 4, FC_FLOAT32, t.rank, c), "send to self", "fc_send");
    expect_invalid(&t, fc_send(a, 4, FC_FLOAT32, t.size, c), "send to size", "fc_send");
    expect_invalid(&t, fc_recv(NULL, 4, FC_FLOAT32, 0, c), "recv NULL", "fc_recv");
    fc_comm_t nc = (fc_comm_t)1;
    expect_invalid(&t, fc_comm_split(c, -7, 0, &nc), "negative color", "fc_comm_split");
    expect_invalid(&t, fc_comm_split(c, 0, 0, NULL), "NULL newcomm", "fc_comm_split");
    fc_request_t rq = NULL;
    expect_invalid(&t, fc_iallreduce(a, b, 4, FC_FLOAT32, FC_SUM, c, NULL), "NULL req",
                   "fc_iallreduce");
    expect_invalid(&t, fc_ibroadcast(a, b, 4, FC_FLOAT32, -3, c, &rq), "ibcast root",
                   "fc_ibroadcast");
    FT_CHECK(&t, rq == NULL, "request written on error");
    int done = 0;
    FT_CHECK(&t, fc_test(&rq, &done) == FC_SUCCESS && done == 1, "fc_test(NULL request)");
    FT_CHECK(&t, fc_wait(&rq) == FC_SUCCESS, "fc_wait(NULL request)");
    expect_invalid(&t, fc_test(NULL, &done), "fc_test NULL", "fc_test");
    /* buffers that partly overlap (the in-place forms stay valid) */
    expect_invalid(&t, fc_allreduce(a, a + 1, 4, FC_FLOAT32, FC_SUM, c), "allreduce overlap",
                   "fc_allreduce");
    /* every rank its own root: each finds it at its own root, none starts */
    expect_invalid(&t, fc_reduce(a + 2, a, 4, FC_FLOAT32, FC_SUM, t.rank, c), "reduce overlap",
                   "fc_reduce");
    if (t.size <= 8) {
        expect_invalid(&t, fc_allgather(a + t.rank * 2 + 1, a, 2, FC_FLOAT32, c),
                       "allgather overlap", "fc_allgather");
        expect_invalid(&t, fc_alltoall(a, a + 1, 2, FC_FLOAT32, c), "alltoall overlap",
                       "fc_alltoall");
        expect_invalid(&t, fc_reduce_scatter(a, a + t.rank * 2 + 1, 2, FC_FLOAT32, FC_SUM, c),
                       "reduce_scatter overlap", "fc_reduce_scatter");
    }
    expect_invalid(&t, fc_comm_query(c, NULL), "query NULL", "fc_comm_query");
    expect_invalid(&t, fc_comm_init(NULL), "init NULL", "fc_comm_init");
    fc_unique_id_t id;
    memset(&id, 0x11, sizeof(id));
    fc_comm_t x;
    expect_invalid(&t, fc_comm_init_rank(&x, 0, &id, 0), "nranks 0", "fc_comm_init_rank");
    expect_invalid(&t, fc_comm_init_rank(&x, 2, &id, 2), "rank 2 of 2", "fc_comm_init_rank");
    expect_invalid(&t, fc_comm_init_rank(&x, 1, &id, 0), "garbage id", "fc_comm_init_rank");
    FT_CHECK(&t, fc_datatype_size((fc_datatype_t)77) == 0, "size of a bad datatype");
    FT_CHECK(&t, fc_datatype_size(FC_BFLOAT16) == 2, "size of bfloat16");
    FT_CHECK(&t, fc_comm_rank(NULL) == -1 && fc_comm_size(NULL) == -1, "rank/size of NULL");
    FT_CHECK(&t, fc_comm_destroy(NULL) == FC_SUCCESS, "destroy NULL");
    for (int r = FC_SUCCESS; r <= FC_ERR_INTERNAL; r++)
        FT_CHECK(&t, fc_strerror((fc_result_t)r)[0] != '\0', "empty fc_strerror(%d)", r);
    double dt = ft_now() - t0;
    FT_CHECK(&t, dt < 5, "invalid arguments took %.1f s: they must not wait for peers", dt);

    /* the communicator still works */
    for (int i = 0; i < 64; i++)
        a[i] = (float)(t.rank + i);
    FT_OK(&t, fc_allreduce(a, b, 64, FC_FLOAT32, FC_MAX, c));
    for (int i = 0; i < 64; i++)
        FT_CHECK(&t, b[i] == (float)(t.size - 1 + i), "allreduce after errors: %g", b[i]);
    FT_OK(&t, fc_broadcast(a, b, 64, FC_FLOAT32, t.size - 1, c));
    for (int i = 0; i < 64; i++)
        FT_CHECK(&t, b[i] == (float)(t.size - 1 + i), "broadcast after errors: %g", b[i]);
    return ft_finish(&t);
}
