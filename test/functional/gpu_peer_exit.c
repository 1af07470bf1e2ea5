/* SPDX-License-Identifier: BSD-3-Clause */
/* A peer that exits without a word while the others run a small allreduce
 * on device buffers (the fused kernel: one kernel spins on the GPU while
 * the host exchanges): the call must fail (peer failed or timed out)
 * within FC_TIMEOUT, the kernel must not outlive the call (the next call
 * fails at once and fc_comm_abort returns in seconds, its pinned memory
 * freed under no kernel), and the error must say which peer. Run with
 * FC_TIMEOUT=3; skips where no GPU is. */
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "gpu_util.h"

int main(void)
{
    struct ft t;
    ft_init(&t, "gpu_peer_exit");
    fc_comm_attr_t attr;
    FT_OK(&t, fc_comm_query(t.comm, &attr));
    const char *why = NULL;
    if (gu_init(attr.local_rank, &why) != 0)
        return ft_skip(&t, why);
    if (t.size < 2)
        return ft_skip(&t, "needs at least 2 ranks");
    float *d = gu_alloc(64);
    FT_CHECK(&t, d != NULL, "no device memory");
    float one[2] = {1, 2};
    gu_to_device(d, one, sizeof(one));
    /* one call that works first: the kernel and its memory are set up */
    FT_OK(&t, fc_allreduce(d, d, 2, FC_FLOAT32, FC_SUM, t.comm));
    if (t.rank == 1)
        _exit(0); /* vanish: no destroy, no goodbye */
    double dt;
    fc_result_t rc = ft_allreduce_peer_gone(&t, d, 2, &dt);
    char msg[1024];
    snprintf(msg, sizeof(msg), "%s", fc_last_error());
    if (t.rank == 0) {
        FT_CHECK(&t, strstr(msg, "rank 1") != NULL, "the error does not name rank 1: %s", msg);
        printf("gpu_peer_exit: rank 0 saw %s after %.1f s: %s\n", fc_strerror(rc), dt, msg);
    }
    /* the communicator is broken: the next call fails at once */
    double t0 = ft_now();
    rc = fc_allreduce(d, d, 2, FC_FLOAT32, FC_SUM, t.comm);
    FT_CHECK(&t, rc != FC_SUCCESS && ft_now() - t0 < 1.0,
             "a call on the broken communicator gave %s after %.1f s", fc_strerror(rc),
             ft_now() - t0);
    /* no kernel left spinning: every stream of the context drains (the
     * test's time limit ends it otherwise) */
    t0 = ft_now();
    FT_CHECK(&t, gu_sync() == 0 && ft_now() - t0 < 5.0,
             "synchronizing the GPU after the failure took %.1f s", ft_now() - t0);
    t0 = ft_now();
    FT_OK(&t, fc_comm_abort(t.comm));
    FT_CHECK(&t, ft_now() - t0 < 5.0, "fc_comm_abort took %.1f s", ft_now() - t0);
    gu_free(d);
    return t.failures ? 1 : 0;
}
