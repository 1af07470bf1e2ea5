/* SPDX-License-Identifier: BSD-3-Clause */
/* FC_TIMEOUT: rank 0 enters an allreduce the others never join. It must
 * return FC_ERR_TIMEOUT, naming the ranks it waited for, instead of hanging.
 * Run with FC_TIMEOUT=2. */
#include <string.h>
#include <unistd.h>

#include "common.h"

int main(void)
{
    struct ft t;
    ft_init(&t, "timeout");
    if (t.size < 2)
        return ft_skip(&t, "needs at least 2 ranks");
    const double limit = ft_timeout();
    if (t.rank == 0) {
        float x[16] = {0};
        double t0 = ft_now();
        fc_result_t rc = fc_allreduce(x, x, 16, FC_FLOAT32, FC_SUM, t.comm);
        double dt = ft_now() - t0;
        FT_CHECK(&t, rc == FC_ERR_TIMEOUT, "got %s, expected a timeout", fc_strerror(rc));
        FT_CHECK(&t, dt >= limit * 0.9 && dt < limit + 10, "returned after %.1f s with FC_TIMEOUT=%g",
                 dt, limit);
        FT_CHECK(&t, strstr(fc_last_error(), "FC_TIMEOUT") && strstr(fc_last_error(), "rank "),
                 "message does not say what it waited for: %s", fc_last_error());
        printf("timeout: rank 0 gave up after %.1f s: %s\n", dt, fc_last_error());
        /* the communicator is now unusable: later calls say so */
        rc = fc_allreduce(x, x, 16, FC_FLOAT32, FC_SUM, t.comm);
        FT_CHECK(&t, rc != FC_SUCCESS && strstr(fc_last_error(), "earlier error"),
                 "a broken communicator accepted work: %s", fc_last_error());
    } else {
        usleep((useconds_t)((limit + 2) * 1e6));
    }
    FT_OK(&t, fc_comm_abort(t.comm));
    return t.failures ? 1 : 0;
}
