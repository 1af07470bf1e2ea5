/* SPDX-License-Identifier: BSD-3-Clause */
/* fc_gather and fc_scatter (and their nonblocking twins): every datatype x
 * count, every root, in place at the root and not. Gather: block j of the
 * root's result is rank j's input; scatter: rank r gets block r of the
 * root's input. Non-roots pass NULL for the buffer they do not use. */
#include <string.h>

#include "common.h"

/* rank r's value for block j, element i: unique per (r, j, i) */
static double val(int r, int j, size_t i)
{
    return (double)((r * 31 + j * 7 + (int)(i % 13)) % 100);
}

static int check_block(struct ft *t, const char *what, const char *buf, size_t n, size_t es,
                       fc_datatype_t dt, int blk, int r, int j, int root, int ip)
{
    for (size_t i = 0; i < n; i++) {
        char e[8];
        ft_store(e, 0, dt, val(r, j, i));
        if (memcmp(buf + ((size_t)blk * n + i) * es, e, es) != 0) {
            ft_fail(t, __FILE__, __LINE__,
                    "%s %s count %zu root %d in_place %d: block %d element %zu is %g, expected %g",
                    what, ft_dt_name(dt), n, root, ip, blk, i,
                    ft_load(buf, (size_t)blk * n + i, dt), ft_load(e, 0, dt));
            return -1;
        }
    }
    return 0;
}

int main(void)
{
    struct ft t;
    ft_init(&t, "gather_scatter");
    const size_t maxc = 20011, maxb = maxc * 8 * (size_t)t.size + 64;
    char *big = malloc(maxb), *mine = malloc(maxc * 8 + 64), *keep = malloc(maxb);
    for (int d = 0; d < 10; d++)
        for (int ci = 0; ci < FT_NCOUNTS; ci++)
            for (int ip = 0; ip < 2; ip++) {
                fc_datatype_t dt = ft_dtypes[d];
                size_t n = ci == FT_NCOUNTS - 1 ? maxc : ft_count(ci, t.size);
                size_t es = fc_datatype_size(dt), bb = n * es;
                int root = (d + ci + ip) % t.size, me = t.rank == root;
                int nb = (d + ci) % 2; /* every other case through fc_igather / fc_iscatter */
                /* gather: the root's own block in place, at block root */
                char *src = me && ip ? big + (size_t)root * bb : mine;
                if (me)
                    memset(big, 0xab, bb * (size_t)t.size);
                for (size_t i = 0; i < n; i++)
                    ft_store(src, i, dt, val(t.rank, 0, i));
                memcpy(keep, src, bb);
                fc_result_t rc;
                if (nb) {
                    fc_request_t req = NULL;
                    rc = fc_igather(src, me ? big : NULL, n, dt, root, t.comm, &req);
                    if (rc == FC_SUCCESS)
                        rc = fc_wait(&req);
                } else {
                    rc = fc_gather(src, me ? big : NULL, n, dt, root, t.comm);
                }
                FT_CHECK(&t, rc == FC_SUCCESS, "gather %s count %zu: %s", ft_dt_name(dt), n,
                         fc_last_error());
                if (me)
                    for (int j = 0; j < t.size; j++)
                        if (check_block(&t, "gather", big, n, es, dt, j, j, 0, root, ip))
                            break;
                if (!(me && ip))
                    FT_CHECK(&t, memcmp(keep, src, bb) == 0, "gather: send buffer modified");
                /* scatter: the root's block root in place */
                char *dst = me && ip ? big + (size_t)root * bb : mine;
                if (me) {
                    for (int j = 0; j < t.size; j++)
                        for (size_t i = 0; i < n; i++)
                            ft_store(big, (size_t)j * n + i, dt, val(root, j, i));
                    memcpy(keep, big, bb * (size_t)t.size);
                }
                if (!(me && ip))
                    memset(dst, 0xab, bb);
                if (nb) {
                    fc_request_t req = NULL;
                    rc = fc_iscatter(me ? big : NULL, dst, n, dt, root, t.comm, &req);
                    if (rc == FC_SUCCESS)
                        rc = fc_wait(&req);
                } else {
                    rc = fc_scatter(me ? big : NULL, dst, n, dt, root, t.comm);
                }
                FT_CHECK(&t, rc == FC_SUCCESS, "scatter %s count %zu: %s", ft_dt_name(dt), n,
                         fc_last_error());
                check_block(&t, "scatter", dst, n, es, dt, 0, root, t.rank, root, ip);
                if (me)
                    FT_CHECK(&t, memcmp(keep, big, bb * (size_t)t.size) == 0,
                             "scatter: the root's send buffer modified");
            }
    free(big);
    free(mine);
    free(keep);
    return ft_finish(&t);
}
