/* SPDX-License-Identifier: BSD-3-Clause */
/* A peer that exits without a word: the others' next collective must fail
 * (peer failed or timed out) within FC_TIMEOUT, not hang. Run with
 * FC_TIMEOUT=3. */
#include <string.h>
#include <unistd.h>

#include "common.h"

int main(void)
{
    struct ft t;
    ft_init(&t, "peer_exit");
    if (t.size < 2)
        return ft_skip(&t, "needs at least 2 ranks");
    const double limit = ft_timeout();
    if (t.rank == 1)
        _exit(0); /* vanish: no destroy, no goodbye */
    float x[1024] = {0};
    double t0 = ft_now();
    fc_result_t rc = fc_allreduce(x, x, 1024, FC_FLOAT32, FC_SUM, t.comm);
    double dt = ft_now() - t0;
    FT_CHECK(&t, rc == FC_ERR_PEER_FAILED || rc == FC_ERR_TIMEOUT,
             "got %s, expected peer failure or timeout", fc_strerror(rc));
    FT_CHECK(&t, dt < limit + 10, "took %.1f s (FC_TIMEOUT=%g)", dt, limit);
    if (t.rank == 0)
        printf("peer_exit: rank 0 saw %s after %.1f s: %s\n", fc_strerror(rc), dt,
               fc_last_error());
    FT_OK(&t, fc_comm_abort(t.comm));
    return t.failures ? 1 : 0;
}
