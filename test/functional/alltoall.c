/* SPDX-License-Identifier: BSD-3-Clause */
/* fc_alltoall: every datatype x count, in place and out of place: block j
 * of rank r's result is block r of rank j's input. */
#include <string.h>

#include "common.h"

/* rank r's value for peer j, element i: unique per (r, j, i) */
static double val(int r, int j, size_t i)
{
    return (double)((r * 31 + j * 7 + (int)(i % 13)) % 100);
}

int main(void)
{
    struct ft t;
    ft_init(&t, "alltoall");
    const size_t maxc = 20011, maxb = maxc * 8 * (size_t)t.size + 64;
    char *send = malloc(maxb), *recv = malloc(maxb), *keep = malloc(maxb);
    for (int d = 0; d < 10; d++)
        for (int ci = 0; ci < FT_NCOUNTS; ci++)
            for (int ip = 0; ip < 2; ip++) {
                fc_datatype_t dt = ft_dtypes[d];
                size_t n = ci == FT_NCOUNTS - 1 ? maxc : ft_count(ci, t.size);
                size_t es = fc_datatype_size(dt);
                char *src = ip ? recv : send;
                for (int j = 0; j < t.size; j++)
                    for (size_t i = 0; i < n; i++)
                        ft_store(src, (size_t)j * n + i, dt, val(t.rank, j, i));
                memcpy(keep, src, n * es * (size_t)t.size);
                if (!ip)
                    memset(recv, 0xab, n * es * (size_t)t.size);
                fc_result_t rc = fc_alltoall(src, recv, n, dt, t.comm);
                FT_CHECK(&t, rc == FC_SUCCESS, "%s count %zu: %s", ft_dt_name(dt), n,
                         fc_last_error());
                for (int j = 0; j < t.size; j++)
                    for (size_t i = 0; i < n; i++) {
                        char e[8];
                        ft_store(e, 0, dt, val(j, t.rank, i));
                        if (memcmp(recv + ((size_t)j * n + i) * es, e, es) != 0) {
                            ft_fail(&t, __FILE__, __LINE__,
                                    "%s count %zu in_place %d: block %d element %zu is %g, "
                                    "expected %g",
                                    ft_dt_name(dt), n, ip, j, i,
                                    ft_load(recv, (size_t)j * n + i, dt), ft_load(e, 0, dt));
                            j = t.size;
                            break;
                        }
                    }
                if (!ip)
                    FT_CHECK(&t, memcmp(keep, send, n * es * (size_t)t.size) == 0,
                             "send buffer modified");
            }
    free(send);
    free(recv);
    free(keep);
    return ft_finish(&t);
}
