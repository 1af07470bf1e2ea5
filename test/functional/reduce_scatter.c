/* SPDX-License-Identifier: BSD-3-Clause */
/* fc_reduce_scatter: every datatype x op x count, in place (recvbuf is this
 * rank's block of sendbuf) and out of place. */
#include <string.h>

#include "common.h"

int main(void)
{
    struct ft t;
    ft_init(&t, "reduce_scatter");
    const size_t maxc = 20011, maxb = maxc * 8 * (size_t)t.size + 64;
    char *send = malloc(maxb), *recv = malloc(maxb), *keep = malloc(maxb), *exp = malloc(maxb);
    for (int d = 0; d < 10; d++)
        for (int o = 0; o < 5; o++)
            for (int ci = 0; ci < FT_NCOUNTS; ci++)
                for (int ip = 0; ip < 2; ip++) {
                    fc_datatype_t dt = ft_dtypes[d];
                    fc_op_t op = ft_ops[o];
                    size_t n = ci == FT_NCOUNTS - 1 ? maxc : ft_count(ci, t.size);
                    size_t es = fc_datatype_size(dt), total = n * (size_t)t.size;
                    size_t first = (size_t)t.rank * n;
                    for (size_t i = 0; i < total; i++)
                        ft_store(send, i, dt, ft_input(op, dt, t.rank, i));
                    for (size_t i = first; i < first + n; i++)
                        ft_expected(exp, i, op, dt, t.size);
                    memcpy(keep, send, total * es);
                    char *dst = ip ? send + first * es : recv;
                    if (!ip)
                        memset(recv, 0xab, n * es);
                    fc_result_t rc = fc_reduce_scatter(send, dst, n, dt, op, t.comm);
                    FT_CHECK(&t, rc == FC_SUCCESS, "%s %s count %zu: %s", ft_dt_name(dt),
                             ft_op_name(op), n, fc_last_error());
                    for (size_t i = 0; i < n; i++)
                        if (!ft_same(dst, exp + first * es, i, dt)) {
                            ft_fail(&t, __FILE__, __LINE__,
                                    "%s %s count %zu in_place %d: element %zu is %g, expected %g",
                                    ft_dt_name(dt), ft_op_name(op), n, ip, i, ft_load(dst, i, dt),
                                    ft_load(exp, first + i, dt));
                            break;
                        }
                    if (!ip)
                        FT_CHECK(&t, memcmp(keep, send, total * es) == 0, "send buffer modified");
                }
    free(send);
    free(recv);
    free(keep);
    free(exp);
    return ft_finish(&t);
}
