/* SPDX-License-Identifier: BSD-3-Clause */
/* fc_allreduce: every datatype x op x count (0, 1, < ranks, not divisible,
 * large) x in place / out of place, against closed-form values; then the
 * same small calls repeated on changing buffers. */
#include <string.h>

#include "common.h"

int main(void)
{
    struct ft t;
    ft_init(&t, "allreduce");
    const size_t maxc = ft_count(FT_NCOUNTS - 1, t.size), maxb = maxc * 8 + 64;
    char *send = malloc(maxb), *recv = malloc(maxb), *keep = malloc(maxb), *exp = malloc(maxb);
    for (int d = 0; d < 10; d++)
        for (int o = 0; o < 5; o++)
            for (int ci = 0; ci < FT_NCOUNTS; ci++)
                for (int ip = 0; ip < 2; ip++) {
                    fc_datatype_t dt = ft_dtypes[d];
                    fc_op_t op = ft_ops[o];
                    size_t n = ft_count(ci, t.size), es = fc_datatype_size(dt);
                    for (size_t i = 0; i < n; i++) {
                        ft_store(send, i, dt, ft_input(op, dt, t.rank, i));
                        ft_expected(exp, i, op, dt, t.size);
                    }
                    memcpy(keep, send, n * es);
                    fc_result_t rc;
                    if (ip) {
                        memcpy(recv, send, n * es);
                        rc = fc_allreduce(recv, recv, n, dt, op, t.comm);
                    } else {
                        memset(recv, 0xab, n * es);
                        rc = fc_allreduce(send, recv, n, dt, op, t.comm);
                    }
                    FT_CHECK(&t, rc == FC_SUCCESS, "%s %s count %zu in_place %d: %s",
                             ft_dt_name(dt), ft_op_name(op), n, ip, fc_last_error());
                    for (size_t i = 0; i < n; i++)
                        if (!ft_same(recv, exp, i, dt)) {
                            ft_fail(&t, __FILE__, __LINE__,
                                    "%s %s count %zu in_place %d: element %zu is %g, expected %g",
                                    ft_dt_name(dt), ft_op_name(op), n, ip, i,
                                    ft_load(recv, i, dt), ft_load(exp, i, dt));
                            break;
                        }
                    if (!ip)
                        FT_CHECK(&t, memcmp(keep, send, n * es) == 0,
                                 "%s %s count %zu: the send buffer was modified", ft_dt_name(dt),
                                 ft_op_name(op), n);
                }
    /* The same call again and again (a communicator runs a finished small
     * schedule again instead of building one): other buffers and other
     * values every time, in place and not, so a stale binding shows. */
    enum { NB = 3, MAXN = 1000 };
    float *bufs[NB];
    for (int k = 0; k < NB; k++)
        bufs[k] = malloc(2 * MAXN * sizeof(float));
    const size_t counts[3] = {1, 7, MAXN};
    for (int it = 0; it < 30; it++)
        for (int ci = 0; ci < 3; ci++) {
            size_t n = counts[ci];
            float *sb = bufs[it % NB], *rb = bufs[(it + 1) % NB] + MAXN;
            int ip = it % 3 == 0;
            for (size_t i = 0; i < n; i++)
                sb[i] = (float)(t.rank + it + (int)(i % 5));
            fc_result_t rc;
            if (ip) {
                memcpy(rb, sb, n * sizeof(float));
                rc = fc_allreduce(rb, rb, n, FC_FLOAT32, FC_SUM, t.comm);
            } else {
                rc = fc_allreduce(sb, rb, n, FC_FLOAT32, FC_SUM, t.comm);
            }
            FT_CHECK(&t, rc == FC_SUCCESS, "repeated call %d count %zu: %s", it, n,
                     fc_last_error());
            for (size_t i = 0; i < n; i++) {
                float e = (float)(t.size * (t.size - 1) / 2 + t.size * (it + (int)(i % 5)));
                if (rb[i] != e) {
                    ft_fail(&t, __FILE__, __LINE__,
                            "repeated call %d count %zu in_place %d: element %zu is %g, "
                            "expected %g", it, n, ip, i, (double)rb[i], (double)e);
                    break;
                }
            }
        }
    for (int k = 0; k < NB; k++)
        free(bufs[k]);
    free(send);
    free(recv);
    free(keep);
    free(exp);
    return ft_finish(&t);
}
