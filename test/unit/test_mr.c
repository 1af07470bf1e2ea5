/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The registration cache on a real endpoint (tcp with FI_MR_LOCAL forced,
 * as verbs would demand): hits, sub-range hits, invalidation when the
 * memory is unmapped or madvised away (also while a transfer still uses
 * it), LRU eviction under FC_MR_CACHE_MAX, and no caching without it.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <signal.h>
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
    fc_result_t rc = prov_open(cfg, "tcp;ofi_rxm", 1, "", NULL, &p, addr, &alen);
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

/* fc_mem_register's registration (prov_mr_pin): made once; every transfer
 * inside it finds it (hits, no new entry), whether the cache is on or off;
 * it survives its transfers; unpinned while a transfer uses it, it goes
 * with that transfer's end. */
static void pinned_on(size_t cache_max)
{
    cfg_t cfg;
    struct prov_ep *p = open_ep(cache_max, &cfg);
    const size_t len = 1 << 20;
    char *b = map(len, NULL);
    struct prov_mr *pin, *m;
    cr_assert_eq(prov_mr_pin(p, b, len, &pin), FC_SUCCESS, "%s", fc_last_error());
    cr_assert_not_null(pin, "FI_MR_LOCAL forced: the pin must register");
    cr_assert_eq(entries(p), 1);
    const uint64_t misses = p->mr_stats.misses;
    for (int i = 0; i < 5; i++) {
        size_t off = (size_t)i * 100003 % (len - 4096);
        cr_assert_eq(prov_mr_acquire(p, b + off, 4096 + (size_t)i, &m), FC_SUCCESS);
        cr_assert_eq(m, pin, "a transfer inside the pinned range registered anew");
        prov_mr_release(p, m);
        cr_assert_eq(entries(p), 1, "the pin went with a transfer's end");
    }
    cr_assert_eq(p->mr_stats.misses, misses, "a transfer inside the pin missed");
    /* a range reaching past it is registered on its own */
    cr_assert_eq(prov_mr_acquire(p, b + len - 100, 200, &m), FC_SUCCESS);
    cr_assert_neq(m, pin);
    prov_mr_release(p, m);
    /* unpinned while a transfer holds it: dropped when that one ends */
    cr_assert_eq(prov_mr_acquire(p, b, 64, &m), FC_SUCCESS);
    const int before = entries(p);
    prov_mr_unpin(p, pin);
    cr_assert_eq(entries(p), before, "dropped under a running transfer");
    prov_mr_release(p, m);
    cr_assert_eq(entries(p), before - 1, "the unpinned registration stayed");
    munmap(b, len);
    prov_close(p);
}

Test(mr, pinned_range_with_cache) { pinned_on(8 << 20); }
Test(mr, pinned_range_without_cache) { pinned_on(0); }

Test(mr, pin_registers_nothing_where_transfers_do_not)
{
    /* tcp with its own mr_mode (no FI_MR_LOCAL) and no rendezvous */
    cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.retry_count = 3;
    cfg.proto = CFG_PROTO_EAGER;
    struct prov_ep *p = NULL;
    char addr[PROV_ADDR_MAX];
    size_t alen;
    cr_assert_eq(prov_open(&cfg, "tcp;ofi_rxm", 1, "", NULL, &p, addr, &alen), FC_SUCCESS, "%s",
                 fc_last_error());
    char buf[4096];
    struct prov_mr *pin = (struct prov_mr *)buf;
    cr_assert_eq(prov_mr_pin(p, buf, sizeof(buf), &pin), FC_SUCCESS);
    if (!(p->mr_mode & FI_MR_LOCAL) && !p->rndv_min) {
        cr_assert_null(pin);
        cr_assert_eq(entries(p), 0);
    }
    prov_mr_unpin(p, pin);
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
    cr_assert_eq(prov_open(&cfg, "tcp;ofi_rxm", 1, "", NULL, &p, addr, &alen), FC_SUCCESS);
    size_t provider_limit = p->info->tx_attr->inject_size;
    cr_assert_gt(provider_limit, 32);
    prov_close(p);
    cfg.eager_max = 32;
    cr_assert_eq(prov_open(&cfg, "tcp;ofi_rxm", 1, "", NULL, &p, addr, &alen), FC_SUCCESS);
    cr_assert_eq(p->inject_size, 32, "FC_EAGER_MAX=32 gave %zu", p->inject_size);
    prov_close(p);
    cfg.proto = CFG_PROTO_EAGER;
    cr_assert_eq(prov_open(&cfg, "tcp;ofi_rxm", 1, "", NULL, &p, addr, &alen), FC_SUCCESS);
    cr_assert_eq(p->inject_size, provider_limit, "FC_PROTO=eager gave %zu", p->inject_size);
    prov_close(p);
    cfg.proto = CFG_PROTO_RNDV;
    cr_assert_eq(prov_open(&cfg, "tcp;ofi_rxm", 1, "", NULL, &p, addr, &alen), FC_SUCCESS);
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
    fc_result_t rc = prov_open(&cfg, "shm", 1, "", NULL, &p, addr, &alen);
    cr_assert_eq(rc, FC_SUCCESS, "shm did not open over a stale file: %s", fc_last_error());
    prov_close(p);
    cr_assert_neq(access(path, F_OK), 0, "%s is still there", path);
}

/* ---- the RMA rendezvous, between two endpoints of this process ---------- */

struct pair {
    struct prov_ep *ep[2];
};

static void open_pair(struct pair *pr, const char *prov, cfg_t *cfg)
{
    char addrs[2 * PROV_ADDR_MAX];
    memset(addrs, 0, sizeof(addrs));
    for (int i = 0; i < 2; i++) {
        size_t alen;
        fc_result_t rc = prov_open(cfg, prov, 1, "", NULL, &pr->ep[i], addrs + i * PROV_ADDR_MAX, &alen);
        cr_assert_eq(rc, FC_SUCCESS, "cannot open %s: %s", prov, fc_last_error());
    }
    const char *names[2] = {"self-0", "self-1"};
    for (int i = 0; i < 2; i++)
        cr_assert_eq(prov_connect(pr->ep[i], 2, addrs, names, i, NULL), FC_SUCCESS, "%s",
                     fc_last_error());
}

static void close_pair(struct pair *pr)
{
    prov_close(pr->ep[0]);
    prov_close(pr->ep[1]);
}

struct done_rec {
    int done;
    fc_result_t status;
    size_t len;
    char msg[512];
};

static void on_done(struct xfer *x, fc_result_t status, size_t len)
{
    struct done_rec *d = x->owner;
    d->done = 1;
    d->status = status;
    d->len = len;
    if (status != FC_SUCCESS && x->errmsg)
        snprintf(d->msg, sizeof(d->msg), "%s", x->errmsg);
}

/* Rank 0 sends slen bytes, rank 1 expects rlen; both run to completion. */
static void exchange(struct pair *pr, const char *src, size_t slen, char *dst, size_t rlen,
                     struct done_rec *sd, struct done_rec *rd)
{
    struct xfer sx, rx;
    memset(&sx, 0, sizeof(sx));
    memset(&rx, 0, sizeof(rx));
    memset(sd, 0, sizeof(*sd));
    memset(rd, 0, sizeof(*rd));
    sx.done = rx.done = on_done;
    sx.owner = sd;
    rx.owner = rd;
    sx.is_send = 1;
    sx.peer = 1;
    sx.len = slen;
    sx.buf = (void *)src;
    rx.peer = 0;
    rx.len = rlen;
    rx.buf = dst;
    struct transport *t0 = prov_transport(pr->ep[0]), *t1 = prov_transport(pr->ep[1]);
    uint64_t tag = 0x1234000;
    fc_result_t rc;
    int n;
    while ((rc = t1->ops->recv(t1, 0, tag, dst, rlen, &rx)) == FC_AGAIN)
        t1->ops->progress(t1, &n);
    cr_assert_eq(rc, FC_SUCCESS, "recv: %s", fc_last_error());
    while ((rc = t0->ops->send(t0, 1, tag, src, slen, &sx)) == FC_AGAIN) {
        t0->ops->progress(t0, &n);
        t1->ops->progress(t1, &n);
    }
    cr_assert_eq(rc, FC_SUCCESS, "send: %s", fc_last_error());
    for (long i = 0; i < 2000000 && !(sd->done && rd->done); i++) {
        cr_assert_eq(t0->ops->progress(t0, &n), FC_SUCCESS);
        cr_assert_eq(t1->ops->progress(t1, &n), FC_SUCCESS);
        if (i > 1000)
            usleep(10);
    }
    cr_assert(sd->done && rd->done, "transfer did not complete (send %d, receive %d)", sd->done,
              rd->done);
}

static void rendezvous_on(const char *prov, unsigned mr_force)
{
    cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.retry_count = 3;
    cfg.mr_cache_max = 64 << 20;
    cfg.mr_mode_force = mr_force;
    cfg.rndv_min = 64 << 10;
    struct pair pr;
    open_pair(&pr, prov, &cfg);
    cr_assert_eq(pr.ep[0]->rndv_min, 64 << 10, "%s: rendezvous threshold %zu", prov,
                 pr.ep[0]->rndv_min);
    size_t big = 3 << 20;
    char *src = malloc(big), *dst = malloc(big + 4096);
    for (size_t i = 0; i < big; i++)
        src[i] = (char)(i * 7 + 3);
    struct done_rec sd, rd;
    /* below the threshold: the provider's tagged protocol */
    memset(dst, 0, big);
    exchange(&pr, src, 32 << 10, dst, 32 << 10, &sd, &rd);
    cr_assert_eq(rd.status, FC_SUCCESS, "%s", rd.msg);
    cr_assert_eq(pr.ep[0]->rndv_count, 0);
    cr_assert_eq(memcmp(src, dst, 32 << 10), 0);
    /* at and above it: written into the receiver's buffer, at an offset
     * inside a larger registration too */
    for (int rep = 0; rep < 3; rep++) {
        size_t len = rep == 0 ? (64 << 10) : big - (size_t)rep * 1000;
        char *d = dst + rep * 8;
        memset(dst, 0, big + 4096);
        exchange(&pr, src + rep, len, d, len, &sd, &rd);
        cr_assert_eq(sd.status, FC_SUCCESS, "%s", sd.msg);
        cr_assert_eq(rd.status, FC_SUCCESS, "%s", rd.msg);
        cr_assert_eq(rd.len, len);
        cr_assert_eq(memcmp(src + rep, d, len), 0, "%s: data differs after a rendezvous of %zu",
                     prov, len);
        cr_assert_eq(d[len], 0, "written past the end");
    }
    cr_assert_eq(pr.ep[0]->rndv_count, 3, "sender counted %llu rendezvous",
                 (unsigned long long)pr.ep[0]->rndv_count);
    cr_assert_eq(pr.ep[1]->rndv_count, 3);
    /* a longer message than expected: the receiver fails with the sender
     * named, the sender's part is done, nothing is written beyond the
     * receive */
    memset(dst, 0, big + 4096);
    exchange(&pr, src, 200 << 10, dst, 100 << 10, &sd, &rd);
    cr_assert_eq(sd.status, FC_SUCCESS, "%s", sd.msg);
    cr_assert_eq(rd.status, FC_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(rd.msg, "length mismatch") && strstr(rd.msg, "rank 0"), "%s", rd.msg);
    cr_assert_eq(dst[100 << 10], 0, "written past the receive");
    /* and a shorter one */
    exchange(&pr, src, 100 << 10, dst, 200 << 10, &sd, &rd);
    cr_assert_eq(rd.status, FC_ERR_INVALID_ARGUMENT);
    /* the endpoint is still good */
    exchange(&pr, src, big, dst, big, &sd, &rd);
    cr_assert_eq(rd.status, FC_SUCCESS, "%s", rd.msg);
    cr_assert_eq(memcmp(src, dst, big), 0);
    close_pair(&pr);
    free(src);
    free(dst);
}

Test(rndv, tcp_offsets, .timeout = 60) { rendezvous_on("tcp;ofi_rxm", 0); }
Test(rndv, tcp_verbs_mr_mode, .timeout = 60) { rendezvous_on("tcp;ofi_rxm", CFG_MR_LOCAL | CFG_MR_VIRT_ADDR | CFG_MR_PROV_KEY | CFG_MR_ALLOCATED); }
Test(rndv, shm_virtual_addresses, .timeout = 60) { rendezvous_on("shm", 0); }

/* Receives nothing matches, to use up a provider's receive entries; the
 * callback of a cancelled one refills every free entry while armed. */
struct fill {
    struct prov_ep *p;
    struct xfer x[1 << 17];
    int n, cancelled, armed;
};

static int fill_up(struct fill *f)
{
    static char sink[8];
    ssize_t ret = 0;
    while (f->n < (int)(sizeof(f->x) / sizeof(f->x[0]))) {
        ret = fi_trecv(f->p->ep, sink, sizeof(sink), NULL, f->p->addrs[1],
                       0x7700000000ull + (uint64_t)f->n, 0, &f->x[f->n]);
        if (ret)
            break;
        f->n++;
    }
    return (int)ret;
}

static void fill_cancelled(struct xfer *x, fc_result_t status, size_t len)
{
    (void)len;
    struct fill *f = x->owner;
    if (status != FC_SUCCESS)
        f->cancelled++;
    if (f->armed) {
        f->armed = 0;
        fill_up(f);
    }
}

/* The sender's receive for the rendezvous FIN meets a provider out of
 * receive entries: the rendezvous waits on the retry list and finishes once
 * an entry is free, instead of failing the transfer. shm (one process, so
 * the order is fixed): its entries are filled; one is freed for the
 * clear-to-send receive; another is cancelled, and its callback, which runs
 * after the clear-to-send has matched and before its completion, takes
 * every free entry back, so the FIN receive finds none (shm says ENOMEM). */
Test(rndv, fin_receive_waits_for_an_entry, .timeout = 60)
{
    cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.retry_count = 3;
    cfg.mr_cache_max = 64 << 20;
    cfg.rndv_min = 64 << 10;
    struct pair pr;
    open_pair(&pr, "shm", &cfg);
    struct prov_ep *p0 = pr.ep[0];
    /* both directions set up first (shm maps a peer at its first send) */
    {
        struct transport *t[2] = {prov_transport(pr.ep[0]), prov_transport(pr.ep[1])};
        for (int from = 0; from < 2; from++) {
            char a = 'x', b = 0;
            struct done_rec ds, dr;
            memset(&ds, 0, sizeof(ds));
            memset(&dr, 0, sizeof(dr));
            struct xfer xs = {.done = on_done, .owner = &ds, .is_send = 1, .peer = 1 - from,
                              .len = 1};
            struct xfer xr = {.done = on_done, .owner = &dr, .peer = from, .len = 1};
            int k;
            fc_result_t rc;
            while ((rc = t[1 - from]->ops->recv(t[1 - from], from, 77, &b, 1, &xr)) == FC_AGAIN)
                t[1 - from]->ops->progress(t[1 - from], &k);
            cr_assert_eq(rc, FC_SUCCESS, "%s", fc_last_error());
            while ((rc = t[from]->ops->send(t[from], 1 - from, 77, &a, 1, &xs)) == FC_AGAIN) {
                t[0]->ops->progress(t[0], &k);
                t[1]->ops->progress(t[1], &k);
            }
            cr_assert_eq(rc, FC_SUCCESS, "%s", fc_last_error());
            for (int i = 0; i < 100000 && !(ds.done && dr.done); i++) {
                t[0]->ops->progress(t[0], &k);
                t[1]->ops->progress(t[1], &k);
            }
            cr_assert(ds.done && dr.done && b == 'x', "warm-up %d -> %d", from, 1 - from);
        }
    }
    struct fill *f = calloc(1, sizeof(*f));
    f->p = p0;
    for (size_t i = 0; i < sizeof(f->x) / sizeof(f->x[0]); i++) {
        f->x[i].done = fill_cancelled;
        f->x[i].owner = f;
    }
    int ret = fill_up(f);
    cr_assert(ret == -FI_EAGAIN || ret == -FI_ENOMEM, "shm: %d receives posted, then %d", f->n,
              ret);
    struct transport *t0 = prov_transport(pr.ep[0]), *t1 = prov_transport(pr.ep[1]);
    int n;
    cr_assert_eq(fi_cancel(&p0->ep->fid, &f->x[--f->n]), 0);
    for (int i = 0; i < 1000 && f->cancelled < 1; i++)
        t0->ops->progress(t0, &n);
    cr_assert_eq(f->cancelled, 1, "the cancelled receive did not complete");
    size_t len = 256 << 10;
    char *src = malloc(len), *dst = calloc(1, len);
    for (size_t i = 0; i < len; i++)
        src[i] = (char)(i * 13 + 1);
    struct done_rec sd, rd;
    memset(&sd, 0, sizeof(sd));
    memset(&rd, 0, sizeof(rd));
    struct xfer sx, rx;
    memset(&sx, 0, sizeof(sx));
    memset(&rx, 0, sizeof(rx));
    sx.done = rx.done = on_done;
    sx.owner = &sd;
    rx.owner = &rd;
    sx.is_send = 1;
    sx.peer = 1;
    sx.len = len;
    rx.peer = 0;
    rx.len = len;
    uint64_t tag = 0x5678000;
    /* the receiver sends its clear-to-send; the sender's receive for it
     * takes the free entry */
    cr_assert_eq(t1->ops->recv(t1, 0, tag, dst, len, &rx), FC_SUCCESS, "%s", fc_last_error());
    cr_assert_eq(t0->ops->send(t0, 1, tag, src, len, &sx), FC_SUCCESS, "%s", fc_last_error());
    f->armed = 1;
    cr_assert_eq(fi_cancel(&p0->ep->fid, &f->x[--f->n]), 0);
    for (int i = 0; i < 100000 && !p0->rndv_retry; i++)
        cr_assert_eq(t0->ops->progress(t0, &n), FC_SUCCESS);
    cr_assert_not_null(p0->rndv_retry, "the FIN receive did not wait for an entry (%s)", sd.msg);
    for (int i = 0; i < 1000; i++) {
        t0->ops->progress(t0, &n);
        t1->ops->progress(t1, &n);
    }
    cr_assert(!sd.done && !rd.done, "finished without its FIN receive (send %d: %s)", sd.done,
              sd.msg);
    /* an entry frees up: the FIN receive goes, then the write, then the FIN */
    cr_assert_eq(fi_cancel(&p0->ep->fid, &f->x[--f->n]), 0);
    for (long i = 0; i < 2000000 && !(sd.done && rd.done); i++) {
        cr_assert_eq(t0->ops->progress(t0, &n), FC_SUCCESS);
        cr_assert_eq(t1->ops->progress(t1, &n), FC_SUCCESS);
        if (i > 1000)
            usleep(10);
    }
    cr_assert(sd.done && rd.done, "did not finish (send %d, receive %d)", sd.done, rd.done);
    cr_assert_eq(sd.status, FC_SUCCESS, "%s", sd.msg);
    cr_assert_eq(rd.status, FC_SUCCESS, "%s", rd.msg);
    cr_assert_eq(memcmp(src, dst, len), 0, "data differs");
    cr_assert_null(p0->rndv_retry);
    /* the fill back before closing: every one completes as cancelled */
    int total = f->cancelled + f->n;
    while (f->n > 0)
        fi_cancel(&p0->ep->fid, &f->x[--f->n]);
    for (int i = 0; i < 100000 && f->cancelled < total; i++)
        t0->ops->progress(t0, &n);
    cr_assert_eq(f->cancelled, total, "%d of %d receives came back cancelled", f->cancelled,
                 total);
    close_pair(&pr);
    free(f);
    free(src);
    free(dst);
}

/* Where it is used: never under FC_PROTO=eager, every nonempty message
 * under =rndv, and by default not on host memory over shm (its CMA copy
 * moves large messages as fast) and from 128 KiB over tcp (where
 * tcp;ofi_rxm's own rendezvous would begin; see prov/profile.c). */
Test(rndv, protocol_switch)
{
    cfg_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    char addr[PROV_ADDR_MAX];
    size_t alen;
    struct prov_ep *p = NULL;
    const char *provs[2] = {"tcp;ofi_rxm", "shm"};
    const size_t dflt[2] = {128 << 10, 0};
    for (int i = 0; i < 2; i++) {
        cfg.proto = CFG_PROTO_AUTO;
        cr_assert_eq(prov_open(&cfg, provs[i], 1, "", NULL, &p, addr, &alen), FC_SUCCESS);
        cr_assert_eq(p->rndv_min, dflt[i], "%s: rendezvous from %zu by default, not %zu",
                     provs[i], p->rndv_min, dflt[i]);
        prov_close(p);
        cfg.proto = CFG_PROTO_RNDV;
        cr_assert_eq(prov_open(&cfg, provs[i], 1, "", NULL, &p, addr, &alen), FC_SUCCESS);
        cr_assert_eq(p->rndv_min, 1, "%s: FC_PROTO=rndv gave %zu", provs[i], p->rndv_min);
        prov_close(p);
        cfg.proto = CFG_PROTO_EAGER;
        cfg.rndv_min = 4096;
        cr_assert_eq(prov_open(&cfg, provs[i], 1, "", NULL, &p, addr, &alen), FC_SUCCESS);
        cr_assert_eq(p->rndv_min, 0, "%s: FC_PROTO=eager still uses it", provs[i]);
        prov_close(p);
        cfg.proto = CFG_PROTO_AUTO;
        cr_assert_eq(prov_open(&cfg, provs[i], 1, "", NULL, &p, addr, &alen), FC_SUCCESS);
        cr_assert_eq(p->rndv_min, 4096, "%s: FC_RNDV_MIN=4096 gave %zu", provs[i],
                     p->rndv_min);
        prov_close(p);
        cfg.rndv_min = 0;
    }
}

/* libinfinipath (loaded with libfabric's psm provider) installs handlers of
 * SIGINT, SIGTERM, SIGSEGV... as it loads that call exit() and write *.btr
 * files; fabcoll puts them back to the default as it loads. */
Test(signals, no_handler_of_libinfinipath_remains)
{
    cr_log_info("reset at load: '%s'", prov_reset_handlers());
    static const int sigs[] = {SIGINT, SIGILL, SIGABRT, SIGBUS, SIGSEGV, SIGTERM};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        struct sigaction sa;
        cr_assert_eq(sigaction(sigs[i], NULL, &sa), 0);
        void *h = (sa.sa_flags & SA_SIGINFO) ? (void *)sa.sa_sigaction : (void *)sa.sa_handler;
        if (h == (void *)SIG_DFL || h == (void *)SIG_IGN)
            continue;
        Dl_info di;
        if (dladdr(h, &di) && di.dli_fname)
            cr_assert(!strstr(di.dli_fname, "libinfinipath") && !strstr(di.dli_fname, "libpsm"),
                      "signal %d still has %s's handler", sigs[i], di.dli_fname);
    }
}
