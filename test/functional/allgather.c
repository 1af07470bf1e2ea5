/* SPDX-License-Identifier: BSD-3-Clause */
/* fc_allgather: every datatype x count, in place (sendbuf is this rank's
 * block of recvbuf) and out of place. */
#include <string.h>

#include "common.h"

int main(void)
{
    struct ft t;
    ft_init(&t, "allgather");
    const size_t maxc = 20011, maxb = maxc * 8 * (size_t)t.size + 64;
    char *send = malloc(maxb), *recv = malloc(maxb), *keep = malloc(maxb);
    for (int d = 0; d < 10; d++)
        for (int ci = 0; ci < FT_NCOUNTS; ci++)
            for (int ip = 0; ip < 2; ip++) {
                fc_datatype_t dt = ft_dtypes[d];
                size_t n = ci == FT_NCOUNTS - 1 ? maxc : ft_count(ci, t.size);
                size_t es = fc_datatype_size(dt);
                memset(recv, 0xab, n * es * (size_t)t.size);
                char *src = ip ? recv + (size_t)t.rank * n * es : send;
                for (size_t i = 0; i < n; i++)
                    ft_store(src, i, dt, ft_input(FC_MIN, dt, t.rank, i));
                memcpy(keep, src, n * es);
                fc_result_t rc = fc_allgather(src, recv, n, dt, t.comm);
                FT_CHECK(&t, rc == FC_SUCCESS, "%s count %zu: %s", ft_dt_name(dt), n,
                         fc_last_error());
                for (int r = 0; r < t.size; r++)
                    for (size_t i = 0; i < n; i++) {
                        char e[8];
                        ft_store(e, 0, dt, ft_input(FC_MIN, dt, r, i));
                        if (memcmp(recv + ((size_t)r * n + i) * es, e, es) != 0) {
                            ft_fail(&t, __FILE__, __LINE__,
                                    "%s count %zu in_place %d: block %d element %zu is %g, "
                                    "expected %g",
                                    ft_dt_name(dt), n, ip, r, i,
                                    ft_load(recv, (size_t)r * n + i, dt), ft_load(e, 0, dt));
                            r = t.size;
                            break;
                        }
                    }
                if (!ip)
                    FT_CHECK(&t, memcmp(keep, send, n * es) == 0, "send buffer modified");
            }
    free(send);
    free(recv);
    free(keep);
    return ft_finish(&t);
}
