/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What every post shares, tagged or rendezvous: which errors are worth
 * trying again and the backoff between tries, the error that names the
 * call, the peer and the provider, and whether a buffer is device memory
 * (then always registered, never injected).
 *
 * A leaf: it keeps no state and calls nothing else in prov/; xfer.c and
 * rndv.c call into it. Posting, completing and the rendezvous state live
 * elsewhere.
 */
#include <time.h>

#include "gpu.h"
#include "log.h"
#include "prov_int.h"

/* Errors worth trying again (FC_RETRY_COUNT times, backing off from 50 us):
 * the provider or the kernel is short of something for a moment. EAGAIN is
 * not among them: it only means "progress the queue first". */
int prov_transient(ssize_t ret)
{
    return ret == -FI_EBUSY || ret == -FI_EINTR || ret == -FI_ETIMEDOUT || ret == -FI_ENOMEM;
}

void prov_backoff(int attempt)
{
    struct timespec ts = {0, 50000L << (attempt < 10 ? attempt : 10)};
    nanosleep(&ts, NULL);
}

fc_result_t prov_post_error(struct prov_ep *p, const char *call, int peer, size_t len, int ret)
{
    fc_result_t code = FC_ERR_FABRIC;
    if (ret == -FI_ECONNREFUSED || ret == -FI_ECONNRESET || ret == -FI_ENOTCONN ||
        ret == -FI_EHOSTUNREACH || ret == -FI_ECONNABORTED || ret == -FI_ENETUNREACH)
        code = FC_ERR_PEER_FAILED;
    return FC_ERR(code, "%s of %zu bytes to/from rank %d (%s) on provider %s failed: %s (%d)%s",
                  call, len, peer, p->names ? p->names[peer] : "?", p->prov_name,
                  fi_strerror(-ret), ret,
                  code == FC_ERR_PEER_FAILED ? ". The peer process has probably exited or its "
                                               "host is unreachable"
                                             : "");
}

/* Device memory, in the gdr tier: always registered, never injected. */
int prov_is_device(const struct prov_ep *p, const void *buf)
{
    if (!p->hmem || !buf)
        return 0;
    struct gpu_ptr gp;
    gpu_ptr_info(buf, &gp);
    return gp.kind == GPU_DEVICE;
}
