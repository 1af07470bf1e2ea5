/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory registration, honouring whatever mr_mode the provider demands (or
 * FC_MR_MODE forces, to run verbs' code paths on tcp):
 *  - FI_MR_LOCAL: every buffer handed to a send/recv needs a descriptor;
 *  - FI_MR_PROV_KEY: the provider picks the key (else we request unique ones);
 *  - FI_MR_ENDPOINT: a registration is bound to the endpoint and enabled;
 *  - FI_MR_VIRT_ADDR: remote addresses are virtual addresses (RMA);
 *  - FI_MR_ALLOCATED: only mapped memory is registered (always true here).
 *
 * Registrations live in one list per endpoint. Memory the transport hands
 * out (scratch) stays registered until it is freed; user buffers are
 * registered for the transfers that use them and dropped when the last
 * one completes: a user may free a buffer as soon as a call returns, and a
 * stale registration of freed memory would corrupt data on an RDMA NIC.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "gpu.h"
#include "log.h"
#include "memmon.h"
#include "prov_int.h"

static fc_result_t reg(struct prov_ep *p, void *buf, size_t len, struct prov_mr *m)
{
    uint64_t access = FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    /* a provider that picks keys ignores ours; the others need unique ones
     * (FC_MR_MODE may add PROV_KEY: we then read the key back as if the
     * provider had picked it, but still request a unique one) */
    uint64_t key = (p->prov_mr_mode & FI_MR_PROV_KEY) ? 0 : p->next_key++;
    uint64_t flags = 0;
    int ret = fi_mr_reg(p->domain, buf, len, access, 0, key, flags, &m->mr, NULL);
    m->remote = ret == 0;
    if (ret == -FI_EINVAL || ret == -FI_ENOSYS) /* providers without remote access rights */
        ret = fi_mr_reg(p->domain, buf, len, FI_SEND | FI_RECV, 0, key, flags, &m->mr, NULL);
    if (ret) {
        struct rlimit rl;
        getrlimit(RLIMIT_MEMLOCK, &rl);
        char lim[64];
        if (rl.rlim_cur == RLIM_INFINITY)
            snprintf(lim, sizeof(lim), "unlimited");
        else
            snprintf(lim, sizeof(lim), "%llu KiB", (unsigned long long)rl.rlim_cur / 1024);
        return FC_ERR(FC_ERR_FABRIC,
                      "fi_mr_reg(%p, %zu bytes, provider %s) failed on host %s: %s (%d). Fix: "
                      "raise the locked-memory limit (now %s: ulimit -l unlimited, or memlock "
                      "in /etc/security/limits.conf and Slurm's PropagateResourceLimits)",
                      buf, len, p->prov_name, log_hostname(), fi_strerror(-ret), ret, lim);
    }
    if (p->mr_mode & FI_MR_ENDPOINT) {
        ret = fi_mr_bind(m->mr, &p->ep->fid, 0);
        if (!ret)
            ret = fi_mr_enable(m->mr);
        if (ret && ret != -FI_ENOSYS) {
            fi_close(&m->mr->fid);
            m->mr = NULL;
            return FC_ERR(FC_ERR_FABRIC,
                          "fi_mr_bind/fi_mr_enable of a %zu-byte region (provider %s) failed: "
                          "%s (%d)",
                          len, p->prov_name, fi_strerror(-ret), ret);
        }
    }
    m->desc = fi_mr_desc(m->mr);
    m->key = fi_mr_key(m->mr);
    m->base = buf;
    m->len = len;
    return FC_SUCCESS;
}

void prov_mr_cache_init(struct prov_ep *p, size_t max_bytes)
{
    const char *why = "";
    p->mr_cache_max = 0;
    if (!(p->mr_mode & FI_MR_LOCAL) && !p->rndv_min)
        return; /* nothing to register for transfers */
    if (max_bytes == 0) {
        FC_INFO(LOG_MR, "registration cache off (FC_MR_CACHE_MAX=0): user buffers are "
                "registered per transfer");
        return;
    }
    if (!memmon_available(&why)) {
        FC_INFO(LOG_MR, "registration cache off: no memory monitor (%s); user buffers are "
                "registered per transfer", why);
        return;
    }
    p->mr_cache_max = max_bytes;
    p->mm_seen = memmon_seq();
    FC_INFO(LOG_MR, "registration cache on: up to %zu bytes, invalidated by %s", max_bytes, why);
}

static void unlink_mr(struct prov_ep *p, struct prov_mr *m)
{
    for (struct prov_mr **pp = &p->mrs; *pp; pp = &(*pp)->next)
        if (*pp == m) {
            *pp = m->next;
            return;
        }
}

static void lru_remove(struct prov_ep *p, struct prov_mr *m)
{
    if (m->lru_prev)
        m->lru_prev->lru_next = m->lru_next;
    else if (p->lru_head == m)
        p->lru_head = m->lru_next;
    if (m->lru_next)
        m->lru_next->lru_prev = m->lru_prev;
    else if (p->lru_tail == m)
        p->lru_tail = m->lru_prev;
    m->lru_prev = m->lru_next = NULL;
}

static void lru_push_front(struct prov_ep *p, struct prov_mr *m)
{
    m->lru_prev = NULL;
    m->lru_next = p->lru_head;
    if (p->lru_head)
        p->lru_head->lru_prev = m;
    p->lru_head = m;
    if (!p->lru_tail)
        p->lru_tail = m;
}

static void drop(struct prov_ep *p, struct prov_mr *m)
{
    if (m->cached) {
        lru_remove(p, m);
        p->mr_cached_bytes -= m->len;
    }
    unlink_mr(p, m);
    if (m->mr)
        fi_close(&m->mr->fid);
    free(m);
}

static void invalidate(uintptr_t start, uintptr_t end, void *ctx)
{
    struct prov_ep *p = ctx;
    for (struct prov_mr *m = p->mrs, *n; m; m = n) {
        n = m->next;
        if (!m->cached || m->stale || m->dev_buffer_id)
            continue; /* device memory is not unmapped through the host */
        uintptr_t b = (uintptr_t)m->base, e = b + m->len;
        if (b < end && start < e) {
            m->stale = 1;
            p->mr_stats.invalidations++;
            FC_TRACE(LOG_MR, "memory %p+%zu was unmapped: registration dropped", m->base,
                     m->len);
            if (m->refs == 0)
                drop(p, m);
        }
    }
}

/* Forgets what the memory monitor says is gone; everything on overflow. */
static void drain(struct prov_ep *p)
{
    if (!p->mr_cache_max)
        return;
    if (memmon_drain(&p->mm_seen, invalidate, p))
        invalidate(0, UINTPTR_MAX, p);
}

static void evict(struct prov_ep *p)
{
    size_t max = p->mr_cache_max ? p->mr_cache_max : p->dev_cache_max;
    while (p->mr_cached_bytes > max && p->lru_tail) {
        struct prov_mr *m = p->lru_tail;
        p->mr_stats.evictions++;
        drop(p, m);
    }
}

/* Registers buf as a new entry; cacheable: a user buffer the cache may keep. */
static fc_result_t new_mr(struct prov_ep *p, const void *buf, size_t len, int cacheable,
                          struct prov_mr **out)
{
    struct prov_mr *m = calloc(1, sizeof(*m));
    if (!m)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory for a registration");
    fc_result_t rc = reg(p, (void *)buf, len ? len : 1, m);
    if (rc != FC_SUCCESS) {
        free(m);
        return rc;
    }
    m->refs = 1;
    m->next = p->mrs;
    p->mrs = m;
    if (cacheable && p->mr_cache_max && len <= p->mr_cache_max && memmon_watch(buf, len) == 0) {
        m->cached = 1;
        p->mr_cached_bytes += m->len;
    }
    FC_TRACE(LOG_MR, "registered %p+%zu key 0x%llx%s", buf, len, (unsigned long long)m->key,
             m->cached ? " (cached)" : "");
    *out = m;
    return FC_SUCCESS;
}

/* Device memory (gdr tier): the whole allocation is registered, and the
 * entry is valid as long as the allocation is the same one (CUDA's buffer
 * id changes when memory is freed and allocated again at that address). */
static fc_result_t dev_acquire(struct prov_ep *p, const char *b, size_t len,
                               const struct gpu_ptr *gp, struct prov_mr **out)
{
    for (struct prov_mr *m = p->mrs, *n; m; m = n) {
        n = m->next;
        if (!m->dev_buffer_id || b < m->base || b + len > m->base + m->len)
            continue;
        if (m->dev_buffer_id != gp->buffer_id) {
            m->stale = 1; /* freed and reallocated: never reuse */
            p->mr_stats.invalidations++;
            if (m->refs == 0)
                drop(p, m);
            continue;
        }
        if (m->refs == 0)
            lru_remove(p, m);
        m->refs++;
        p->mr_stats.hits++;
        *out = m;
        return FC_SUCCESS;
    }
    p->mr_stats.misses++;
    struct prov_mr *m = calloc(1, sizeof(*m));
    if (!m)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory for a registration");
    char *base = gp->size ? (char *)gp->base : (char *)b;
    size_t size = gp->size ? gp->size : len;
    uint64_t key = (p->prov_mr_mode & FI_MR_PROV_KEY) ? 0 : p->next_key++;
    fc_result_t rc = prov_hmem_reg(p, base, size, gp->device, key, 0, &m->mr);
    if (rc != FC_SUCCESS) {
        free(m);
        return rc;
    }
    m->desc = fi_mr_desc(m->mr);
    m->key = fi_mr_key(m->mr);
    m->base = base;
    m->len = size;
    m->refs = 1;
    m->cached = 1;
    m->dev_buffer_id = gp->buffer_id;
    m->remote = 1;
    p->mr_cached_bytes += size;
    m->next = p->mrs;
    p->mrs = m;
    FC_TRACE(LOG_MR, "registered GPU %d memory %p+%zu", gp->device, base, size);
    *out = m;
    return FC_SUCCESS;
}

fc_result_t prov_mr_acquire(struct prov_ep *p, const void *buf, size_t len, struct prov_mr **out)
{
    const char *b = buf;
    if (p->hmem) {
        struct gpu_ptr gp;
        gpu_ptr_info(buf, &gp);
        if (gp.kind == GPU_DEVICE)
            return dev_acquire(p, b, len, &gp, out);
    }
    drain(p);
    for (struct prov_mr *m = p->mrs; m; m = m->next)
        if (!m->stale && !m->dev_buffer_id && b >= m->base && b + len <= m->base + m->len) {
            if (m->cached && m->refs == 0)
                lru_remove(p, m);
            m->refs++;
            if (!m->persistent)
                p->mr_stats.hits++;
            *out = m;
            return FC_SUCCESS;
        }
    p->mr_stats.misses++;
    return new_mr(p, buf, len, 1, out);
}

void prov_mr_release(struct prov_ep *p, struct prov_mr *m)
{
    if (!m || --m->refs > 0 || m->persistent)
        return;
    if (m->cached && !m->stale) {
        lru_push_front(p, m);
        evict(p);
        return;
    }
    drop(p, m);
}

int prov_mr_remote_ok(struct prov_ep *p)
{
    static char probe[64];
    struct prov_mr *m = NULL;
    if (new_mr(p, probe, sizeof(probe), 0, &m) != FC_SUCCESS)
        return 0;
    int ok = m->remote;
    drop(p, m);
    return ok;
}

fc_result_t prov_mr_pin(struct prov_ep *p, void *buf, size_t len, struct prov_mr **out)
{
    *out = NULL;
    if ((!(p->mr_mode & FI_MR_LOCAL) && !p->rndv_min) || !len)
        return FC_SUCCESS; /* transfers register nothing here */
    struct gpu_ptr gp;
    gpu_ptr_info(buf, &gp);
    if (gp.kind == GPU_DEVICE) /* the whole allocation, cached; the pin holds a reference */
        return p->hmem ? dev_acquire(p, buf, len, &gp, out) : FC_SUCCESS;
    /* its own entry, never cached: the reference new_mr hands back is the
     * pin's, so transfers inside it never drop it */
    fc_result_t rc = new_mr(p, buf, len, 0, out);
    if (rc == FC_SUCCESS)
        FC_INFO(LOG_MR, "registered %p+%zu ahead (fc_mem_register, provider %s)", buf, len,
                p->prov_name);
    return rc;
}

void prov_mr_unpin(struct prov_ep *p, struct prov_mr *m)
{
    if (m)
        FC_INFO(LOG_MR, "deregistering %p+%zu (fc_mem_deregister, provider %s)", m->base, m->len,
                p->prov_name);
    prov_mr_release(p, m); /* dropped now, or when its last transfer ends */
}

void prov_mr_close_all(struct prov_ep *p)
{
    struct prov_mr *m = p->mrs;
    while (m) {
        struct prov_mr *n = m->next;
        if (m->mr)
            fi_close(&m->mr->fid);
        free(m);
        m = n;
    }
    p->mrs = NULL;
    p->lru_head = p->lru_tail = NULL;
    p->mr_cached_bytes = 0;
}

/* Scratch memory is pooled: a collective's scratch comes back for the next
 * one, already registered and faulted in, instead of a fresh mmap (page
 * faults, zeroing) and registration per call. Sizes round up to powers of
 * two; a class keeps at most POOL_PER_CLASS buffers, the pool at most
 * POOL_MAX_BYTES. */
#define POOL_PER_CLASS 4
#define POOL_MAX_BYTES ((size_t)256 << 20)

static int size_class(size_t len)
{
    int c = 12; /* 4 KiB */
    while (((size_t)1 << c) < len && c < 62)
        c++;
    return c;
}

void *prov_mem_alloc(struct transport *t, size_t len)
{
    struct prov_ep *p = ep_of(t);
    int c = size_class(len);
    struct prov_pool *pool = &p->pool[c];
    if (pool->n > 0) {
        void *ptr = pool->buf[--pool->n];
        p->pool_bytes -= (size_t)1 << c;
        return ptr;
    }
    size_t cap = (size_t)1 << c;
    void *ptr = NULL;
    if (posix_memalign(&ptr, 4096, cap) != 0)
        return NULL;
    if (!(p->mr_mode & FI_MR_LOCAL))
        return ptr;
    struct prov_mr *m;
    if (new_mr(p, ptr, cap, 0, &m) != FC_SUCCESS) {
        free(ptr);
        return NULL;
    }
    m->persistent = 1;
    return ptr;
}

static void mem_release(struct prov_ep *p, void *ptr)
{
    for (struct prov_mr *m = p->mrs; m; m = m->next)
        if (m->persistent && m->base == ptr) {
            drop(p, m);
            break;
        }
    free(ptr);
}

void prov_mem_free(struct transport *t, void *ptr, size_t len)
{
    struct prov_ep *p = ep_of(t);
    int c = size_class(len);
    struct prov_pool *pool = &p->pool[c];
    if (pool->n < POOL_PER_CLASS && p->pool_bytes + ((size_t)1 << c) <= POOL_MAX_BYTES) {
        pool->buf[pool->n++] = ptr;
        p->pool_bytes += (size_t)1 << c;
        return;
    }
    mem_release(p, ptr);
}

void prov_mem_pool_drain(struct prov_ep *p)
{
    for (int c = 0; c < 64; c++)
        while (p->pool[c].n > 0)
            mem_release(p, p->pool[c].buf[--p->pool[c].n]);
    p->pool_bytes = 0;
}
