/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device memory and the provider (FI_HMEM): whether this endpoint can send
 * and receive device buffers directly (the gdr tier), and registering them.
 */
#include <stdio.h>
#include <string.h>
#include <sys/uio.h>

#include "gpu.h"
#include "log.h"
#include "prov_int.h"

int prov_hmem(const struct prov_ep *p)
{
    return p && p->hmem;
}

int prov_hmem_wanted(const cfg_t *cfg)
{
    return cfg->gdr != CFG_GDR_OFF && gpu_available(NULL);
}

/* probe: a refusal is an answer (the staged tier follows), not a warning */
fc_result_t prov_hmem_reg(struct prov_ep *p, void *buf, size_t len, int device, uint64_t key,
                          int probe, struct fid_mr **mr)
{
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct fi_mr_attr attr;
    memset(&attr, 0, sizeof(attr));
    attr.mr_iov = &iov;
    attr.iov_count = 1;
    attr.access = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    attr.requested_key = key;
    attr.iface = FI_HMEM_CUDA;
    attr.device.cuda = device;
    /* device-only memory: shm then moves it by CUDA IPC (its copies through
     * shared host memory run at a few GB/s) */
    int ret = fi_mr_regattr(p->domain, &attr, FI_HMEM_DEVICE_ONLY, mr);
    if (ret == -FI_EINVAL || ret == -FI_EBADFLAGS || ret == -FI_ENOSYS || ret == -FI_EOPNOTSUPP)
        ret = fi_mr_regattr(p->domain, &attr, 0, mr);
    if (ret) {
        const char *fmt = "fi_mr_regattr of %zu bytes of GPU %d memory (provider %s, "
                          "FI_HMEM_CUDA) failed: %s (%d)";
        return probe ? FC_ERR_QUIET(FC_ERR_FABRIC, fmt, len, device, p->prov_name,
                                    fi_strerror(-ret), ret)
                     : FC_ERR(FC_ERR_FABRIC, fmt, len, device, p->prov_name, fi_strerror(-ret),
                              ret);
    }
    if (p->mr_mode & FI_MR_ENDPOINT) {
        ret = fi_mr_bind(*mr, &p->ep->fid, 0);
        if (!ret)
            ret = fi_mr_enable(*mr);
        if (ret && ret != -FI_ENOSYS) {
            fi_close(&(*mr)->fid);
            *mr = NULL;
            return FC_ERR(FC_ERR_FABRIC, "binding a GPU memory registration failed: %s",
                          fi_strerror(-ret));
        }
    }
    return FC_SUCCESS;
}

fc_result_t prov_hmem_probe(struct prov_ep *p, const cfg_t *cfg)
{
    const char *gwhy = "";
    p->hmem = 0;
    if (cfg->gdr == CFG_GDR_OFF) {
        snprintf(p->hmem_why, sizeof(p->hmem_why), "FC_GDR=off");
        return FC_SUCCESS;
    }
    if (!gpu_available(&gwhy)) {
        snprintf(p->hmem_why, sizeof(p->hmem_why), "no GPU: %s", gwhy);
    } else if (!(p->info->caps & FI_HMEM)) {
        snprintf(p->hmem_why, sizeof(p->hmem_why),
                 "provider %s does not offer FI_HMEM (device memory)", p->prov_name);
    } else {
        /* the provider says FI_HMEM; only registering real device memory
         * shows whether this libfabric was built with CUDA support */
        void *d = gpu_dev_alloc(0, 1 << 16);
        struct fid_mr *mr = NULL;
        if (!d) {
            snprintf(p->hmem_why, sizeof(p->hmem_why), "cannot allocate GPU memory to test: %s",
                     err_get());
        } else if (prov_hmem_reg(p, d, 1 << 16, 0, p->next_key++, 1, &mr) != FC_SUCCESS) {
            snprintf(p->hmem_why, sizeof(p->hmem_why),
                     "registering GPU memory failed (libfabric built without CUDA?): %.120s",
                     err_get());
        } else {
            fi_close(&mr->fid);
            p->hmem = 1;
            snprintf(p->hmem_why, sizeof(p->hmem_why), "provider %s registers GPU memory",
                     p->prov_name);
        }
        gpu_dev_free(0, d);
    }
    FC_INFO(LOG_NET, "device buffers: %s (%s)", p->hmem ? "gdr tier" : "staged", p->hmem_why);
    if (!p->hmem && cfg->gdr == CFG_GDR_ON)
        return FC_ERR(FC_ERR_UNSUPPORTED,
                      "FC_GDR=on, but device buffers cannot go to the fabric directly: %s. Fix: "
                      "use a provider with FI_HMEM and a libfabric built with CUDA support, or "
                      "FC_GDR=auto to stage through host memory",
                      p->hmem_why);
    return FC_SUCCESS;
}
