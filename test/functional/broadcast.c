/* SPDX-License-Identifier: BSD-3-Clause */
/* fc_broadcast: every datatype x root x count, in place and out of place at
 * the root, NULL sendbuf on the others. */
#include <string.h>

#include "common.h"

int main(void)
{
    struct ft t;
    ft_init(&t, "broadcast");
    const size_t maxc = ft_count(FT_NCOUNTS - 1, t.size), maxb = maxc * 8 + 64;
    char *send = malloc(maxb), *recv = malloc(maxb), *keep = malloc(maxb), *exp = malloc(maxb);
    for (int d = 0; d < 10; d++)
        for (int root = 0; root < t.size; root++)
            for (int ci = 0; ci < FT_NCOUNTS; ci++)
                for (int ip = 0; ip < 2; ip++) {
                    fc_datatype_t dt = ft_dtypes[d];
                    size_t n = ft_count(ci, t.size), es = fc_datatype_size(dt);
                    for (size_t i = 0; i < n; i++)
                        ft_store(exp, i, dt, ft_input(FC_MIN, dt, root * 3 + 1, i));
                    memset(recv, 0xcd, n * es);
                    fc_result_t rc;
                    if (t.rank == root) {
                        memcpy(send, exp, n * es);
                        memcpy(keep, send, n * es);
                        if (ip) {
                            memcpy(recv, exp, n * es);
                            rc = fc_broadcast(recv, recv, n, dt, root, t.comm);
                        } else {
                            rc = fc_broadcast(send, recv, n, dt, root, t.comm);
                        }
                    } else {
                        rc = fc_broadcast(NULL, recv, n, dt, root, t.comm);
                    }
                    FT_CHECK(&t, rc == FC_SUCCESS, "%s root %d count %zu: %s", ft_dt_name(dt),
                             root, n, fc_last_error());
                    for (size_t i = 0; i < n; i++)
                        if (!ft_same(recv, exp, i, dt)) {
                            ft_fail(&t, __FILE__, __LINE__,
                                    "%s root %d count %zu in_place %d: element %zu is %g, "
                                    "expected %g",
                                    ft_dt_name(dt), root, n, ip, i, ft_load(recv, i, dt),
                                    ft_load(exp, i, dt));
                            break;
                        }
                    if (t.rank == root && !ip)
                        FT_CHECK(&t, memcmp(keep, send, n * es) == 0,
                                 "root's send buffer was modified");
                }
    free(send);
    free(recv);
    free(keep);
    free(exp);
    return ft_finish(&t);
}
