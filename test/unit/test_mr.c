/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The registration cache on a real endpoint (tcp with FI_MR_LOCAL forced,
 * as verbs would demand): hits, sub-range hits, invalidation when the
 * memory is unmapped or madvised away (also while a transfer still uses
 * it), LRU eviction under FC_MR_CACHE_MAX, and no caching without it.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "memmon.h"
#include "prov_int.h"

static struct prov_ep *open_ep(size_t cache_max, cfg_t *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->retry_count = 3;
    cfg->mr_mode_force = CFG_MR_LOCAL;
    cfg->mr_cache_max = cache_max;
    struct prov_ep *p = NULL;
    char addr[PROV_ADDR_MAX];
    size_t alen;
    fc_result_t rc = prov_open(cfg, "tcp;ofi_rxm", 1, "", &p, addr, &alen);
    cr_assert_eq(rc, FC_SUCCESS, "cannot open tcp: %s", fc_last_error());
    return p;
}

static int entries(struct prov_ep *p)
{
    int n = 0;
    for (struct prov_mr *m = p->mrs; m; m = m->next)
        n++;
    return n;
}

static char *map(size_t len, void *at)
{
    char *b = mmap(at, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | (at ? MAP_FIXED_NOREPLACE : 0), -1, 0);
    cr_assert_neq(b, MAP_FAILED);
    memset(b, 1, len);
    return b;
}

Test(mr, hits_and_invalidation_on_unmap)
{
    const char *why;
    if (!memmon_available(&why))
        cr_skip_test("no memory monitor here (%s): caching is off by design", why);
    cfg_t cfg;
    struct prov_ep *p = open_ep(8 << 20, &cfg);
    char *b = map(256 << 10, NULL);
    struct prov_mr *m1, *m2, *m3;
    cr_assert_eq(prov_mr_acquire(p, b, 256 << 10, &m1), FC_SUCCESS);
    prov_mr_release(p, m1);
    cr_assert_eq(p->mr_stats.misses, 1);
    cr_assert_eq(prov_mr_acquire(p, b, 256 << 10, &m2), FC_SUCCESS);
    cr_assert_eq(m1, m2, "the second use was not a hit");
    cr_assert_eq(prov_mr_acquire(p, b + 4096, 1000, &m3), FC_SUCCESS);
    cr_assert_eq(m3, m1, "a sub-range was not a hit");
    cr_assert_eq(p->mr_stats.hits, 2);
    prov_mr_release(p, m2);
    prov_mr_release(p, m3);
    cr_assert_eq(entries(p), 1, "the idle entry was not kept");

    /* the memory goes away and comes back at the same address */
    munmap(b, 256 << 10);
    char *b2 = map(256 << 10, b);
    cr_assert_eq(b2, b);
    struct prov_mr *m4;
    cr_assert_eq(prov_mr_acquire(p, b2, 256 << 10, &m4), FC_SUCCESS);
    cr_assert_eq(p->mr_stats.invalidations, 1, "the unmap was not seen");
    cr_assert_eq(p->mr_stats.misses, 2, "a stale registration was reused");
    prov_mr_release(p, m4);

    /* madvise(DONTNEED), as free() does for large chunks, also invalidates */
    madvise(b2, 64 << 10, MADV_DONTNEED);
    struct prov_mr *m5;
    cr_assert_eq(prov_mr_acquire(p, b2, 4096, &m5), FC_SUCCESS);
    cr_assert_eq(p->mr_stats.invalidations, 2);
    cr_assert_eq(p->mr_stats.misses, 3);
    prov_mr_release(p, m5);
    munmap(b2, 256 << 10);
    prov_close(p);
}

Test(mr, freed_while_in_use_is_dropped_after_use)
{
    const char *why;
    if (!memmon_available(&why))
        cr_skip_test("no memory monitor here (%s)", why);
    cfg_t cfg;
    struct prov_ep *p = open_ep(8 << 20, &cfg);
    char *b = map(128 << 10, NULL), *other = map(4096, NULL);
    struct prov_mr *m, *o;
    cr_assert_eq(prov_mr_acquire(p, b, 128 << 10, &m), FC_SUCCESS);
    munmap(b, 128 << 10);
    cr_assert_eq(prov_mr_acquire(p, other, 4096, &o), FC_SUCCESS); /* drains */
    cr_assert(m->stale, "in-use entry not marked stale");
    cr_assert_eq(entries(p), 2, "an entry in use was dropped");
    prov_mr_release(p, m);
    cr_assert_eq(entries(p), 1, "the stale entry survived its last use");
    prov_mr_release(p, o);
    munmap(other, 4096);
    prov_close(p);
}

Test(mr, lru_eviction)
{
    const char *why;
    if (!memmon_available(&why))
        cr_skip_test("no memory monitor here (%s)", why);
    cfg_t cfg;
    struct prov_ep *p = open_ep(1 << 20, &cfg); /* room for two 512 KiB buffers */
    char *b[3];
    for (int i = 0; i < 3; i++) {
        b[i] = map(512 << 10, NULL);
        struct prov_mr *m;
        cr_assert_eq(prov_mr_acquire(p, b[i], 512 << 10, &m), FC_SUCCESS);
        prov_mr_release(p, m);
    }
    cr_assert_eq(p->mr_stats.evictions, 1);
    cr_assert_leq(p->mr_cached_bytes, (size_t)1 << 20);
    struct prov_mr *m;
    uint64_t misses = p->mr_stats.misses;
    cr_assert_eq(prov_mr_acquire(p, b[2], 512 << 10, &m), FC_SUCCESS); /* newest: cached */
    prov_mr_release(p, m);
    cr_assert_eq(p->mr_stats.misses, misses);
    cr_assert_eq(prov_mr_acquire(p, b[0], 512 << 10, &m), FC_SUCCESS); /* oldest: evicted */
    prov_mr_release(p, m);
    cr_assert_eq(p->mr_stats.misses, misses + 1);
    for (int i = 0; i < 3; i++)
        munmap(b[i], 512 << 10);
    prov_close(p);
}

Test(mr, no_cache_when_disabled)
{
    cfg_t cfg;
    struct prov_ep *p = open_ep(0, &cfg);
    char *b = map(64 << 10, NULL);
    struct prov_mr *m;
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(prov_mr_acquire(p, b, 64 << 10, &m), FC_SUCCESS);
        prov_mr_release(p, m);
        cr_assert_eq(entries(p), 0, "a user buffer stayed registered with the cache off");
    }
    cr_assert_eq(p->mr_stats.misses, 3);
    /* scratch from the transport stays registered, and is pooled: the next
     * request of that size class gets the same buffer back */
    void *s = prov_mem_alloc(&p->base, 8000);
    cr_assert_not_null(s);
    cr_assert_eq(prov_mr_acquire(p, s, 8000, &m), FC_SUCCESS);
    prov_mr_release(p, m);
    cr_assert_eq(entries(p), 1);
    prov_mem_free(&p->base, s, 8000);
    cr_assert_eq(entries(p), 1, "pooled scratch lost its registration");
    void *s2 = prov_mem_alloc(&p->base, 6000);
    cr_assert_eq(s2, s, "the pool did not hand the buffer back");
    prov_mem_free(&p->base, s2, 6000);
    prov_mem_pool_drain(p);
    cr_assert_eq(entries(p), 0);
    munmap(b, 64 << 10);
    prov_close(p);
}

/* FC_PROTO / FC_EAGER_MAX: what is injected (eager) and what goes through
 * the provider's own protocol */
Test(mr, protocol_switch)
{
    cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    char addr[PROV_ADDR_MAX];
    size_t alen;
    struct prov_ep *p = NULL;
    cr_assert_eq(prov_open(&cfg, "tcp;ofi_rxm", 1, "", &p, addr, &alen), FC_SUCCESS);
    size_t provider_limit = p->info->tx_attr->inject_size;
    cr_assert_gt(provider_limit, 32);
    prov_close(p);
    cfg.eager_max = 32;
    cr_assert_eq(prov_open(&cfg, "tcp;ofi_rxm", 1, "", &p, addr, &alen), FC_SUCCESS);
    cr_assert_eq(p->inject_size, 32, "FC_EAGER_MAX=32 gave %zu", p->inject_size);
    prov_close(p);
    cfg.proto = CFG_PROTO_EAGER;
    cr_assert_eq(prov_open(&cfg, "tcp;ofi_rxm", 1, "", &p, addr, &alen), FC_SUCCESS);
    cr_assert_eq(p->inject_size, provider_limit, "FC_PROTO=eager gave %zu", p->inject_size);
    prov_close(p);
    cfg.proto = CFG_PROTO_RNDV;
    cr_assert_eq(prov_open(&cfg, "tcp;ofi_rxm", 1, "", &p, addr, &alen), FC_SUCCESS);
    cr_assert_eq(p->inject_size, 0, "FC_PROTO=rndv still injects %zu bytes", p->inject_size);
    prov_close(p);
}

/* A dead process that had this PID left its shm queues behind: the first
 * shm endpoint of this process removes them instead of failing (EBUSY). */
Test(mr, stale_shm_files_are_removed)
{
    char path[64];
    snprintf(path, sizeof(path), "/dev/shm/%d:0:0", (int)getpid());
    FILE *f = fopen(path, "w");
    if (!f)
        cr_skip_test("cannot write /dev/shm here");
    fputs("stale", f);
    fclose(f);
    cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    char addr[PROV_ADDR_MAX];
    size_t alen;
    struct prov_ep *p = NULL;
    fc_result_t rc = prov_open(&cfg, "shm", 1, "", &p, addr, &alen);
    cr_assert_eq(rc, FC_SUCCESS, "shm did not open over a stale file: %s", fc_last_error());
    prov_close(p);
    cr_assert_neq(access(path, F_OK), 0, "%s is still there", path);
}
