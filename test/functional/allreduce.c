/* SPDX-License-Identifier: BSD-3-Clause */
/* fc_allreduce: every datatype x op x count (0, 1, < ranks, not divisible,
 * large) x in place / out of place, against closed-form values. */
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
    free(send);
    free(recv);
    free(keep);
    free(exp);
    return ft_finish(&t);
}
