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
    if (t.rank == 1)
        _exit(0); /* vanish: no destroy, no goodbye */
    float x[1024] = {0};
    double dt;
    fc_result_t rc = ft_allreduce_peer_gone(&t, x, 1024, &dt);
    if (t.rank == 0)
        printf("peer_exit: rank 0 saw %s after %.1f s: %s\n", fc_strerror(rc), dt,
               fc_last_error());
    FT_OK(&t, fc_comm_abort(t.comm));
    return t.failures ? 1 : 0;
}
