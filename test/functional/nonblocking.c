/* SPDX-License-Identifier: BSD-3-Clause */
/* Nonblocking collectives: 10 iallreduces of different sizes and types plus
 * ibroadcast, ireduce, iallgather, ireduce_scatter, ialltoall and ibarrier
 * all in flight at once, completed in reverse order (fc_wait) or by polling
 * (fc_test); blocking calls while requests are outstanding. */
#include <string.h>

#include "common.h"

#define NAR 10

int main(void)
{
    struct ft t;
    ft_init(&t, "nonblocking");
    int n = t.size;
    for (int round = 0; round < 3; round++) {
        fc_request_t req[NAR + 7];
        int64_t *ar[NAR];
        size_t cnt[NAR];
        for (int k = 0; k < NAR; k++) {
            cnt[k] = (size_t)(k * k * 977 + k + round);
            ar[k] = malloc(cnt[k] * 8 + 8);
            for (size_t i = 0; i < cnt[k]; i++)
                ar[k][i] = (int64_t)(t.rank * (k + 1) + (int)i);
            FT_OK(&t, fc_iallreduce(ar[k], ar[k], cnt[k], FC_INT64, FC_SUM, t.comm, &req[k]));
        }
        float bc[5000];
        int root = round % n;
        for (int i = 0; i < 5000; i++)
            bc[i] = t.rank == root ? (float)(i + root) : -1.0f;
        FT_OK(&t, fc_ibroadcast(bc, bc, 5000, FC_FLOAT32, root, t.comm, &req[NAR]));
        double rd[333], rdo[333];
        for (int i = 0; i < 333; i++)
            rd[i] = t.rank + i;
        FT_OK(&t, fc_ireduce(rd, rdo, 333, FC_FLOAT64, FC_MAX, root, t.comm, &req[NAR + 1]));
        int32_t ag[17], *agr = malloc(sizeof(int32_t) * 17 * (size_t)n);
        for (int i = 0; i < 17; i++)
            ag[i] = t.rank * 17 + i;
        FT_OK(&t, fc_iallgather(ag, agr, 17, FC_INT32, t.comm, &req[NAR + 2]));
        uint32_t *rs = malloc(sizeof(uint32_t) * 9 * (size_t)n), rso[9];
        for (int i = 0; i < 9 * n; i++)
            rs[i] = (uint32_t)(i + t.rank);
        FT_OK(&t, fc_ireduce_scatter(rs, rso, 9, FC_UINT32, FC_SUM, t.comm, &req[NAR + 3]));
        int64_t *a2 = malloc(sizeof(int64_t) * 3 * (size_t)n), *a2o = malloc(sizeof(int64_t) * 3 * (size_t)n);
        for (int i = 0; i < 3 * n; i++)
            a2[i] = t.rank * 1000 + i;
        FT_OK(&t, fc_ialltoall(a2, a2o, 3, FC_INT64, t.comm, &req[NAR + 4]));
        FT_OK(&t, fc_ibarrier(t.comm, &req[NAR + 5]));
        /* a blocking collective while all of those are in flight */
        int32_t one = 1, tot = 0;
        FT_OK(&t, fc_allreduce(&one, &tot, 1, FC_INT32, FC_SUM, t.comm));
        FT_CHECK(&t, tot == n, "blocking allreduce among outstanding ones: %d", tot);
        FT_OK(&t, fc_iallreduce(&one, &tot, 1, FC_INT32, FC_MIN, t.comm, &req[NAR + 6]));
        /* complete: odd rounds by polling fc_test in reverse, else fc_wait in reverse */
        for (int k = NAR + 6; k >= 0; k--) {
            if (round % 2) {
                int done = 0;
                for (long spins = 0; !done; spins++) {
                    fc_result_t rc = fc_test(&req[k], &done);
                    if (rc != FC_SUCCESS) {
                        ft_fail(&t, __FILE__, __LINE__, "fc_test(%d): %s", k, fc_last_error());
                        break;
                    }
                }
            } else {
                FT_OK(&t, fc_wait(&req[k]));
            }
            FT_CHECK(&t, req[k] == NULL, "request %d not cleared", k);
        }
        for (int k = 0; k < NAR; k++) {
            for (size_t i = 0; i < cnt[k]; i++) {
                int64_t e = (int64_t)(k + 1) * n * (n - 1) / 2 + (int64_t)n * (int64_t)i;
                if (ar[k][i] != e) {
                    ft_fail(&t, __FILE__, __LINE__, "iallreduce %d element %zu: %lld != %lld",
                            k, i, (long long)ar[k][i], (long long)e);
                    break;
                }
            }
            free(ar[k]);
        }
        for (int i = 0; i < 5000; i++)
            if (bc[i] != (float)(i + root)) {
                ft_fail(&t, __FILE__, __LINE__, "ibroadcast element %d: %g", i, bc[i]);
                break;
            }
        if (t.rank == root)
            for (int i = 0; i < 333; i++)
                FT_CHECK(&t, rdo[i] == n - 1 + i, "ireduce element %d: %g", i, rdo[i]);
        for (int i = 0; i < 17 * n; i++)
            FT_CHECK(&t, agr[i] == i, "iallgather element %d: %d", i, agr[i]);
        for (int i = 0; i < 9; i++) {
            uint32_t e = (uint32_t)n * (uint32_t)(t.rank * 9 + i) + (uint32_t)(n * (n - 1) / 2);
            FT_CHECK(&t, rso[i] == e, "ireduce_scatter element %d: %u != %u", i, rso[i], e);
        }
        for (int j = 0; j < n; j++)
            for (int i = 0; i < 3; i++)
                FT_CHECK(&t, a2o[j * 3 + i] == j * 1000 + t.rank * 3 + i, "ialltoall [%d][%d]",
                         j, i);
        FT_CHECK(&t, tot == 1, "iallreduce min: %d", tot);
        free(agr);
        free(rs);
        free(a2);
        free(a2o);
    }
    return ft_finish(&t);
}
