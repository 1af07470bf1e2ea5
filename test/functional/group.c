/* SPDX-License-Identifier: BSD-3-Clause */
/* fc_group_start / fc_group_end:
 *  - a halo exchange in the order that deadlocks without a group (every
 *    rank sends both ways before it receives, messages of several chunks),
 *    sizes from 0 to 4 MiB, every element checked;
 *  - a pipeline where even ranks receive first and odd ranks send first;
 *  - one group over two communicators (the job's and a split of it) with
 *    collectives on both, and one over two families (a second communicator
 *    made from a unique id) with long messages, sends first, on both;
 *  - nested groups (only the outermost end completes), collectives in a
 *    group (allreduce, allgatherv, broadcast) completed at the end;
 *  - fc_group_end without a group, and an argument error inside a group
 *    (returned by its call, the rest of the group completes). */
#include <string.h>

#include "common.h"

static float val(int from, int to, size_t i)
{
    return (float)((from * 131 + to * 17 + (int)(i % 1009)) % 1000);
}

static void halo(struct ft *t, size_t n)
{
    const int me = t->rank, sz = t->size, right = (me + 1) % sz, left = (me + sz - 1) % sz;
    float *sr = malloc(n * 4 + 4), *sl = malloc(n * 4 + 4);
    float *fr = malloc(n * 4 + 4), *fl = malloc(n * 4 + 4);
    for (size_t i = 0; i < n; i++) {
        sr[i] = val(me, right, i);
        sl[i] = val(me, left, i);
        fr[i] = fl[i] = -1;
    }
    FT_OK(t, fc_group_start());
    /* sends first, both ways: without the group every rank would wait in
     * its first send of a long message for a receive nobody has posted */
    FT_OK(t, fc_send(sr, n, FC_FLOAT32, right, t->comm));
    FT_OK(t, fc_send(sl, n, FC_FLOAT32, left, t->comm));
    FT_OK(t, fc_recv(fl, n, FC_FLOAT32, left, t->comm));
    FT_OK(t, fc_recv(fr, n, FC_FLOAT32, right, t->comm));
    fc_result_t rc = fc_group_end();
    FT_CHECK(t, rc == FC_SUCCESS, "halo of %zu floats: %s", n, fc_last_error());
    /* with 2 ranks left == right: the first message from it is its "to the
     * right" one, received into fl */
    for (size_t i = 0; i < n && rc == FC_SUCCESS; i++) {
        float wl = val(left, me, i), wr = val(right, me, i);
        if (fl[i] != wl || fr[i] != wr) {
            ft_fail(t, __FILE__, __LINE__,
                    "halo of %zu floats: element %zu is %g/%g, expected "
                    "%g/%g",
                    n, i, fl[i], fr[i], wl, wr);
            break;
        }
    }
    free(sr);
    free(sl);
    free(fr);
    free(fl);
}

static void pipeline(struct ft *t, size_t n)
{
    const int me = t->rank, sz = t->size;
    float *in = malloc(n * 4 + 4), *out = malloc(n * 4 + 4);
    for (size_t i = 0; i < n; i++) {
        out[i] = val(me, me + 1, i);
        in[i] = -1;
    }
    FT_OK(t, fc_group_start());
    if (me % 2) {
        if (me + 1 < sz)
            FT_OK(t, fc_send(out, n, FC_FLOAT32, me + 1, t->comm));
        FT_OK(t, fc_recv(in, n, FC_FLOAT32, me - 1, t->comm));
    } else {
        if (me > 0)
            FT_OK(t, fc_recv(in, n, FC_FLOAT32, me - 1, t->comm));
        if (me + 1 < sz)
            FT_OK(t, fc_send(out, n, FC_FLOAT32, me + 1, t->comm));
    }
    FT_OK(t, fc_group_end());
    for (size_t i = 0; i < n && me > 0; i++)
        if (in[i] != val(me - 1, me, i)) {
            ft_fail(t, __FILE__, __LINE__, "pipeline of %zu floats: element %zu is %g", n, i,
                    in[i]);
            break;
        }
    free(in);
    free(out);
}

int main(void)
{
    struct ft t;
    ft_init(&t, "group");
    const int me = t.rank, n = t.size;
    FT_CHECK(&t, fc_group_end() == FC_ERR_INVALID_ARGUMENT,
             "fc_group_end without a group was accepted");
    if (n > 1) {
        const size_t sizes[] = {0, 1, 1000, 100003, 1u << 20};
        for (int i = 0; i < 5; i++) {
            halo(&t, sizes[i]);
            pipeline(&t, sizes[i]);
        }
    }
    /* two communicators in one group: the job's and its split into halves */
    fc_comm_t half = NULL;
    FT_OK(&t, fc_comm_split(t.comm, me % 2, me, &half));
    const size_t N = 50001;
    float *a = malloc(N * 4), *b = malloc(N * 4), *c = malloc(N * 4);
    float *g = malloc(4 * (size_t)n * 3 + 4);
    size_t *cnt = malloc(sizeof(size_t) * (size_t)n), *dsp = malloc(sizeof(size_t) * (size_t)n);
    for (int j = 0; j < n; j++) {
        cnt[j] = (size_t)(j % 3);
        dsp[j] = (size_t)j * 3;
    }
    for (size_t i = 0; i < N; i++) {
        a[i] = (float)(me + 1);
        b[i] = (float)(me % 7);
        c[i] = me == 0 ? (float)(i % 100) : -1;
    }
    float mine[2] = {(float)me, (float)me};
    for (int k = 0; k < 3 * n; k++)
        g[k] = -7;
    FT_OK(&t, fc_group_start());
    FT_OK(&t, fc_allreduce(a, a, N, FC_FLOAT32, FC_SUM, t.comm));
    FT_OK(&t, fc_group_start()); /* nested: its end completes nothing */
    FT_OK(&t, fc_allreduce(b, b, N, FC_FLOAT32, FC_MAX, half));
    FT_OK(&t, fc_group_end());
    FT_OK(&t, fc_broadcast(c, c, N, FC_FLOAT32, 0, t.comm));
    FT_OK(&t, fc_allgatherv(mine, g, cnt[me], cnt, dsp, FC_FLOAT32, t.comm));
    /* an argument error inside a group: returned by the call at once */
    FT_CHECK(&t,
             fc_allreduce(a, a, N, (fc_datatype_t)99, FC_SUM, t.comm) == FC_ERR_INVALID_ARGUMENT,
             "a bad datatype inside a group was accepted");
    FT_OK(&t, fc_group_end());
    int hs = fc_comm_size(half), hr = fc_comm_rank(half);
    float maxb = 0;
    for (int q = 0; q < hs; q++) { /* the half's ranks: me % 2, me % 2 + 2, ... */
        int world = me % 2 + 2 * q;
        maxb = (float)(world % 7) > maxb ? (float)(world % 7) : maxb;
    }
    (void)hr;
    for (size_t i = 0; i < N; i++)
        if (a[i] != (float)(n * (n + 1) / 2) || b[i] != maxb || c[i] != (float)(i % 100)) {
            ft_fail(&t, __FILE__, __LINE__,
                    "collectives in a group: element %zu: %g %g %g "
                    "(expected %g %g %g)",
                    i, a[i], b[i], c[i], (float)(n * (n + 1) / 2), maxb, (float)(i % 100));
            break;
        }
    for (int j = 0; j < n; j++)
        for (int k = 0; k < 3; k++) {
            float want = (size_t)k < cnt[j] ? (float)j : -7;
            if (g[3 * j + k] != want) {
                ft_fail(&t, __FILE__, __LINE__, "allgatherv in a group: [%d] is %g, expected %g",
                        3 * j + k, g[3 * j + k], want);
                j = n;
                break;
            }
        }
    /* two families (a second communicator of its own, made from a unique
     * id): a ring of long messages on each, sends first, in one group */
    if (n > 1) {
        fc_unique_id_t id;
        if (me == 0)
            FT_OK(&t, fc_get_unique_id(&id));
        FT_OK(&t, fc_broadcast(&id, &id, sizeof(id), FC_UINT8, 0, t.comm));
        fc_comm_t other = NULL;
        FT_OK(&t, fc_comm_init_rank(&other, n, &id, me));
        const size_t M = 300007;
        float *x = malloc(M * 4), *y = malloc(M * 4), *xr = malloc(M * 4), *yr = malloc(M * 4);
        for (size_t i = 0; i < M; i++) {
            x[i] = val(me, 1, i);
            y[i] = val(me, 2, i);
        }
        const int right = (me + 1) % n, left = (me + n - 1) % n;
        FT_OK(&t, fc_group_start());
        FT_OK(&t, fc_send(x, M, FC_FLOAT32, right, t.comm));
        FT_OK(&t, fc_send(y, M, FC_FLOAT32, left, other));
        FT_OK(&t, fc_recv(yr, M, FC_FLOAT32, right, other));
        FT_OK(&t, fc_recv(xr, M, FC_FLOAT32, left, t.comm));
        FT_OK(&t, fc_group_end());
        for (size_t i = 0; i < M; i++)
            if (xr[i] != val(left, 1, i) || yr[i] != val(right, 2, i)) {
                ft_fail(&t, __FILE__, __LINE__, "two families in a group: element %zu", i);
                break;
            }
        FT_OK(&t, fc_comm_destroy(other));
        free(x);
        free(y);
        free(xr);
        free(yr);
    }
    FT_OK(&t, fc_comm_destroy(half));
    free(a);
    free(b);
    free(c);
    free(g);
    free(cnt);
    free(dsp);
    return ft_finish(&t);
}
