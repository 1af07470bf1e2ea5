/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Device memory as the core sees it: which transport a call on device
 * buffers goes through (gpu_memory_route: the device transport, made on
 * first use, over the family's host transport; for a small allreduce the
 * fused kernel's, fused.c), the order after the
 * caller's legacy-stream work, and the branch's hooks (gpu_device_hooks),
 * which api.c hands to comm_create. The core calls the branch through
 * those hooks only; it never includes a file of src/gpu/.
 */
#define _GNU_SOURCE
#include "comm_gpu.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "fused.h"
#include "gpu.h"
#include "gpu_tp.h"
#include "log.h"
#include "paths.h"
#include "prov.h"
#include "queue.h"

/* Per-peer paths: each peer's device chunks go direct or are staged as its
 * own path's provider allows (shm built with CUDA takes device memory, tcp
 * does not), from that provider's rendezvous threshold. */
static fc_result_t device_paths(struct fc_comm *c, struct comm_shared *sh, int net_hmem)
{
    const int n = sh->nworld;
    struct gpu_tp_path *p = calloc((size_t)n, sizeof(*p));
    if (!p)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory for %d peers' device paths", n);
    const int local_hmem = prov_hmem(sh->local_ep);
    const size_t net_min = prov_rndv_min_get(sh->ep), local_min = prov_rndv_min_get(sh->local_ep);
    for (int r = 0; r < n; r++) {
        int local = paths_is_local(sh->paths, r);
        p[r].hmem = local ? local_hmem : net_hmem;
        p[r].direct_min = local ? local_min : net_min;
    }
    fc_result_t rc = gpu_tp_set_paths(sh->gpu, n, p);
    free(p);
    if (rc == FC_SUCCESS)
        FC_INFO(LOG_INIT | LOG_NET, "device buffers: %s for the ranks of this node (%s), %s for "
                "the others (%s)",
                local_hmem ? "gdr tier" : "staged", "shm", net_hmem ? "gdr tier" : "staged",
                c->attr.provider);
    return rc;
}

fc_result_t gpu_memory_route(struct fc_comm *c, struct comm_call *call, const void *sendbuf,
                             const void *recvbuf, struct fc_request *r)
{
    /* asked of CUDA on every call, not cached: 0.08 us for device memory,
     * 0.2 us for host memory on an H200 node; a range's answer can change
     * in place (cudaHostRegister) or when freed memory is mapped again */
    struct gpu_ptr ps, pr;
    gpu_ptr_info(sendbuf, &ps);
    if (recvbuf == sendbuf)
        pr = ps; /* in place: one question */
    else
        gpu_ptr_info(recvbuf, &pr);
    int dev = -1;
    if (ps.kind != GPU_HOST)
        dev = ps.device;
    if (pr.kind != GPU_HOST) {
        if (dev >= 0 && dev != pr.device)
            return FC_ERR(FC_ERR_INVALID_ARGUMENT,
                          "sendbuf is on GPU %d and recvbuf on GPU %d: one collective works on "
                          "one device", dev, pr.device);
        dev = pr.device;
    }
    if (dev < 0)
        return FC_SUCCESS; /* host memory: the fabric's transport as is */
    struct comm_shared *sh = c->sh;
    fc_result_t rc = FC_SUCCESS;
    pthread_mutex_lock(&sh->lock);
    if (!sh->gpu) {
        int hmem = prov_hmem(sh->ep);
        /* the communicator's chunk, whatever the memory: both ends of a
         * message must cut it alike, and a peer's buffer may be host memory */
        size_t chunk = c->chunk;
        rc = gpu_tp_create(sh->tp, dev, hmem, prov_rndv_min_get(sh->ep), chunk, &sh->gpu);
        if (rc == FC_SUCCESS && sh->paths)
            rc = device_paths(c, sh, hmem);
        else if (rc == FC_SUCCESS)
            FC_INFO(LOG_INIT | LOG_NET, "device buffers: %s",
                    hmem ? "gdr tier: the provider registers device memory, no staging"
                         : "staged through pinned host buffers (D2H/H2D overlapping the "
                           "transfers)");
        if (rc != FC_SUCCESS) {
            gpu_tp_destroy(sh->gpu);
            sh->gpu = NULL;
        }
        if (rc == FC_SUCCESS) {
            sh->ptp = gpu_tp_transport(sh->gpu);
            /* pageable copies of mixed stream-ordered calls: split over the
             * CPUs each rank of this node may have, up to 4 */
            int ways = 1;
            cpu_set_t cpus;
            if (!c->oversubscribed && sched_getaffinity(0, sizeof(cpus), &cpus) == 0)
                ways = CPU_COUNT(&cpus) / (c->attr.local_size > 0 ? c->attr.local_size : 1);
            gpu_copy_ways(ways);
            char bus[32];
            gpu_pci_id(dev, bus, sizeof(bus));
            FC_INFO(LOG_INIT | LOG_NET, "device buffers on GPU %d (%s), chunks of %zu bytes",
                    dev, bus, chunk);
        }
    } else if (gpu_tp_device(sh->gpu) != dev) {
        rc = FC_ERR(FC_ERR_INVALID_ARGUMENT,
                    "device buffers on GPU %d, but this communicator already works with GPU %d "
                    "(one GPU per communicator)",
                    dev, gpu_tp_device(sh->gpu));
    }
    pthread_mutex_unlock(&sh->lock);
    if (rc != FC_SUCCESS)
        return rc;
    c->gpu_device = dev;
    /* a small allreduce with both buffers on the GPU: the fused kernel's */
    if (call->a && call->a->kind == COLL_ALLREDUCE && ps.kind == GPU_DEVICE &&
        pr.kind == GPU_DEVICE && gpu_fused_route(c, call, dev, sendbuf, (void *)recvbuf, r))
        return FC_SUCCESS;
    r->tp = gpu_tp_transport(sh->gpu);
    return FC_SUCCESS;
}

fc_result_t gpu_order_after_caller(struct fc_comm *c, struct fc_request *r)
{
    if (gpu_fused_call(r)) /* its kernel, ordered so */
        return gpu_fused_launch_call(c, r);
    if (!r->tp || !c->sh->gpu)
        return FC_SUCCESS;
    pthread_mutex_lock(&c->sh->lock);
    fc_result_t rc = gpu_tp_order_after_default(c->sh->gpu);
    pthread_mutex_unlock(&c->sh->lock);
    return rc;
}

static void device_release(struct comm_shared *sh)
{
    gpu_fused_free(sh);
    gpu_tp_destroy(sh->gpu);
    sh->gpu = NULL;
}

static int device_present(void)
{
    return gpu_available(NULL);
}

const struct comm_device gpu_device_hooks = {
    .route = gpu_memory_route,
    .order_after_caller = gpu_order_after_caller,
    .stream_start_ready = gpu_queue_start_ready,
    .release = device_release,
    .present = device_present,
    .current_gpu = gpu_current_pci_id,
};
