/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Rails (src/rails.c) over fake transports: two "ranks" A and B in one
 * process, each a rails transport over n fakes; fake i of A and fake i of B
 * are the two ends of one link. Checks which rail each message takes, that
 * rails > 0 post and progress on their own threads while the engine's
 * callbacks run on the caller's, that data and lengths arrive, that a post
 * refused for now (FC_AGAIN) is tried again, and that failures name the
 * rail.
 */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "rails.h"

#define MAXR 4

struct fmsg {
    struct xfer *x;
    uint64_t tag;
    void *buf;
    size_t len; /* send: bytes; receive: capacity */
    struct fmsg *next;
};

/* one link: the two ends' posted messages and finished ones */
struct link {
    pthread_mutex_t m;
    struct fmsg *sends[2], *recvs[2]; /* unmatched, posted by side s */
    struct fmsg *done[2];
    int efd[2];
};

struct fake {
    struct transport t;
    struct link *l;
    int side;
    /* observations (under the link's mutex) */
    int posts, again_left, again_every, nagain;
    int refuse_send_before_recv; /* sends refused until this side posted a receive */
    int nrecv_posted, nprogress;
    pthread_t post_thread, progress_thread;
    int posts_from_other_thread;
    fc_result_t fail_progress; /* nonzero: progress fails with it */
    int fail_next_recv;        /* the next matched receive finishes with an error */
    uint64_t tags[64];
};

static pthread_t main_thread;

static struct fake *fk(struct transport *t)
{
    return (struct fake *)t;
}

static void finish(struct link *l, int side, struct fmsg *m)
{
    m->next = l->done[side];
    l->done[side] = m;
    uint64_t one = 1;
    if (write(l->efd[side], &one, sizeof(one)) < 0) {
        /* full: a wake-up is pending */
    }
}

static fc_result_t post(struct transport *t, uint64_t tag, void *buf, size_t len, struct xfer *x,
                        int is_send)
{
    struct fake *f = fk(t);
    struct link *l = f->l;
    pthread_mutex_lock(&l->m);
    if (is_send && f->refuse_send_before_recv && f->nrecv_posted == 0) {
        f->nagain++;
        pthread_mutex_unlock(&l->m);
        return FC_AGAIN;
    }
    if (f->again_every && f->again_left-- <= 0) {
        f->again_left = f->again_every;
        f->nagain++;
        pthread_mutex_unlock(&l->m);
        return FC_AGAIN;
    }
    if (f->posts < 64)
        f->tags[f->posts] = tag;
    f->posts++;
    f->nrecv_posted += !is_send;
    f->post_thread = pthread_self();
    if (!pthread_equal(f->post_thread, main_thread))
        f->posts_from_other_thread++;
    struct fmsg *m = calloc(1, sizeof(*m));
    m->x = x;
    m->tag = tag;
    m->buf = buf;
    m->len = len;
    int o = !f->side;
    struct fmsg **pp = is_send ? &l->recvs[o] : &l->sends[o];
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->tag == tag)
            break;
    if (!*pp) {
        struct fmsg **q = is_send ? &l->sends[f->side] : &l->recvs[f->side];
        while (*q)
            q = &(*q)->next;
        *q = m;
        pthread_mutex_unlock(&l->m);
        return FC_SUCCESS;
    }
    struct fmsg *peer = *pp;
    *pp = peer->next;
    struct fmsg *s = is_send ? m : peer, *r = is_send ? peer : m;
    size_t n = s->len < r->len ? s->len : r->len;
    memcpy(r->buf, s->buf, n);
    s->len = n;
    r->len = n;
    finish(l, is_send ? f->side : o, s);
    finish(l, is_send ? o : f->side, r);
    pthread_mutex_unlock(&l->m);
    return FC_SUCCESS;
}

static fc_result_t f_send(struct transport *t, int peer, uint64_t tag, const void *buf, size_t len,
                          struct xfer *x)
{
    cr_assert_eq(peer, 0);
    return post(t, tag, (void *)buf, len, x, 1);
}

static fc_result_t f_recv(struct transport *t, int peer, uint64_t tag, void *buf, size_t len,
                          struct xfer *x)
{
    cr_assert_eq(peer, 0);
    return post(t, tag, buf, len, x, 0);
}

static fc_result_t f_progress(struct transport *t, int *ncomp)
{
    struct fake *f = fk(t);
    struct link *l = f->l;
    pthread_mutex_lock(&l->m);
    f->progress_thread = pthread_self();
    f->nprogress++;
    fc_result_t fail = f->fail_progress;
    struct fmsg *list = fail ? NULL : l->done[f->side];
    if (!fail)
        l->done[f->side] = NULL;
    pthread_mutex_unlock(&l->m);
    *ncomp = 0;
    if (fail)
        return FC_ERR_QUIET(fail, "fake link %p: boom", (void *)l);
    while (list) {
        struct fmsg *m = list;
        list = m->next;
        fc_result_t st = FC_SUCCESS;
        if (!m->x->is_send && f->fail_next_recv) {
            f->fail_next_recv = 0;
            st = FC_ERR_FABRIC;
            m->x->errmsg = "fake receive error";
        }
        m->x->done(m->x, st, st == FC_SUCCESS ? m->len : 0);
        free(m);
        (*ncomp)++;
    }
    return FC_SUCCESS;
}

static int f_wait_prepare_nofd(struct transport *t, struct transport_wait *w)
{
    (void)t;
    w->nap_us = 50;
    return 0;
}

static int f_wait_prepare(struct transport *t, struct transport_wait *w)
{
    struct fake *f = fk(t);
    uint64_t v;
    if (read(f->l->efd[f->side], &v, sizeof(v)) < 0) {
        /* nothing pending */
    }
    pthread_mutex_lock(&f->l->m);
    int ready = f->l->done[f->side] != NULL;
    pthread_mutex_unlock(&f->l->m);
    if (ready)
        return 1;
    w->fds[w->nfds++] = (struct pollfd){.fd = f->l->efd[f->side], .events = POLLIN};
    return 0;
}

static void f_peer_name(struct transport *t, int peer, char *buf, size_t len)
{
    (void)t;
    snprintf(buf, len, "fake peer %d", peer);
}

static const struct transport_ops fake_ops = {
    .name = "fake",
    .send = f_send,
    .recv = f_recv,
    .progress = f_progress,
    .wait_prepare = f_wait_prepare,
    .wait_end = transport_wait_end_none,
    .peer_name = f_peer_name,
    .mem_alloc = transport_mem_host_alloc,
    .mem_free = transport_mem_host_free,
    .local = transport_local_none,
    .idle = transport_always_idle,
};
static const struct transport_ops fake_ops_nofd = {
    .name = "fake",
    .send = f_send,
    .recv = f_recv,
    .progress = f_progress,
    .wait_prepare = f_wait_prepare_nofd,
    .wait_end = transport_wait_end_none,
    .peer_name = f_peer_name,
    .mem_alloc = transport_mem_host_alloc,
    .mem_free = transport_mem_host_free,
    .local = transport_local_none,
    .idle = transport_always_idle,
};

struct world {
    int n;
    struct link links[MAXR];
    struct fake a[MAXR], b[MAXR];
    struct rails *ra, *rb;
};

/* a fake's observations, read under its link's mutex (its rail's thread
 * may still run) */
static struct fake snap(struct fake *f)
{
    pthread_mutex_lock(&f->l->m);
    struct fake c = *f;
    pthread_mutex_unlock(&f->l->m);
    return c;
}

static void world_init(struct world *w, int n, int with_fd)
{
    memset(w, 0, sizeof(*w));
    main_thread = pthread_self();
    w->n = n;
    struct transport *ta[MAXR], *tb[MAXR];
    for (int i = 0; i < n; i++) {
        pthread_mutex_init(&w->links[i].m, NULL);
        for (int s = 0; s < 2; s++)
            w->links[i].efd[s] = eventfd(0, EFD_NONBLOCK);
        w->a[i] = (struct fake){
            .t.ops = with_fd ? &fake_ops : &fake_ops_nofd, .l = &w->links[i], .side = 0};
        w->b[i] = (struct fake){
            .t.ops = with_fd ? &fake_ops : &fake_ops_nofd, .l = &w->links[i], .side = 1};
        ta[i] = &w->a[i].t;
        tb[i] = &w->b[i].t;
    }
    cr_assert_eq(rails_create(ta, n, &w->ra), FC_SUCCESS, "%s", err_get());
    cr_assert_eq(rails_create(tb, n, &w->rb), FC_SUCCESS, "%s", err_get());
}

static void world_fini(struct world *w)
{
    rails_stop(w->ra);
    rails_stop(w->rb);
    rails_destroy(w->ra);
    rails_destroy(w->rb);
    for (int i = 0; i < w->n; i++) {
        struct link *l = &w->links[i];
        /* messages nobody matched or reaped (tests of failures leave some) */
        for (int s = 0; s < 2; s++) {
            struct fmsg **lists[] = {&l->sends[s], &l->recvs[s], &l->done[s]};
            for (int k = 0; k < 3; k++)
                while (*lists[k]) {
                    struct fmsg *m = *lists[k];
                    *lists[k] = m->next;
                    free(m);
                }
        }
        close(l->efd[0]);
        close(l->efd[1]);
        pthread_mutex_destroy(&l->m);
    }
}

/* what the engine would post: xfers with a completion record */
struct op {
    struct xfer x;
    int done, ncalls;
    fc_result_t st;
    size_t len;
    pthread_t cb_thread;
    char err[256];
};

static void op_done(struct xfer *x, fc_result_t st, size_t len)
{
    struct op *o = (struct op *)x;
    o->done = 1;
    o->ncalls++;
    o->st = st;
    o->len = len;
    o->cb_thread = pthread_self();
    if (st != FC_SUCCESS)
        snprintf(o->err, sizeof(o->err), "%s", x->errmsg ? x->errmsg : "(none)");
}

static void op_init(struct op *o, int is_send, uint64_t tag, size_t len)
{
    memset(o, 0, sizeof(*o));
    o->x.done = op_done;
    o->x.is_send = is_send;
    o->x.tag = tag;
    o->x.len = len;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Drives both sides from this thread, as two engines would, blocking in
 * their wait as a rank does, until every op is done (10 s bound). */
static fc_result_t drive(struct world *w, struct op *ops, int nops)
{
    struct transport *ta = rails_transport(w->ra), *tb = rails_transport(w->rb);
    double t0 = now();
    for (;;) {
        int n = 0, left = 0;
        fc_result_t rc = ta->ops->progress(ta, &n);
        if (rc != FC_SUCCESS)
            return rc;
        rc = tb->ops->progress(tb, &n);
        if (rc != FC_SUCCESS)
            return rc;
        for (int i = 0; i < nops; i++)
            left += !ops[i].done;
        if (!left)
            return FC_SUCCESS;
        cr_assert_lt(now() - t0, 10.0, "%d ops still running after 10 s", left);
        transport_block(ta, 100, NULL);
        transport_block(tb, 100, NULL);
    }
}

Test(rails, pick)
{
    cr_assert_eq(rails_pick(1, 5), 0);
    cr_assert_eq(rails_pick(3, 7ull << 12), 0, "chunk 0 (every one-chunk message) takes rail 0");
    cr_assert_eq(rails_pick(3, 5), 2);
    cr_assert_eq(rails_pick(3, (7ull << 12) | 4), 1, "only the chunk bits count");
    cr_assert_eq(rails_pick(3, 0x803), 0, "bit 11 (the transport's) is no chunk bit");
}

/* chunks k = 0..11 of 128 KiB each from A to B, and short messages, over 3
 * rails; for each of the fake's two modes (file descriptor or naps) */
static void spread(int with_fd)
{
    struct world w;
    world_init(&w, 3, with_fd);
    enum { K = 12, SZ = 128 << 10 };
    char *src = malloc((size_t)K * SZ), *dst = calloc((size_t)K, SZ);
    for (size_t i = 0; i < (size_t)K * SZ; i++)
        src[i] = (char)(i * 7 + 3);
    struct op ops[2 * K + 4];
    struct transport *ta = rails_transport(w.ra), *tb = rails_transport(w.rb);
    for (int k = 0; k < K; k++) {
        uint64_t tag = (1ull << 20) | (uint64_t)k;
        /* receives first for half of them, sends first for the rest */
        int rfirst = k % 2;
        struct op *s = &ops[2 * k], *r = &ops[2 * k + 1];
        op_init(s, 1, tag, SZ);
        op_init(r, 0, tag, SZ);
        if (rfirst)
            cr_assert_eq(tb->ops->recv(tb, 0, tag, dst + (size_t)k * SZ, SZ, &r->x), FC_SUCCESS);
        cr_assert_eq(ta->ops->send(ta, 0, tag, src + (size_t)k * SZ, SZ, &s->x), FC_SUCCESS);
        if (!rfirst)
            cr_assert_eq(tb->ops->recv(tb, 0, tag, dst + (size_t)k * SZ, SZ, &r->x), FC_SUCCESS);
    }
    /* chunk 0 of another message stays on rail 0; chunk 4 of a third, a
     * short one, takes rail 1 (the rail depends on the chunk index alone),
     * into a larger buffer that reports what came */
    char small[100], got[100], mid[100], gotmid[4096];
    memset(small, 'q', sizeof(small));
    memset(mid, 'm', sizeof(mid));
    uint64_t t0 = 2ull << 20, t4 = (3ull << 20) | 4;
    op_init(&ops[2 * K], 1, t0, sizeof(small));
    op_init(&ops[2 * K + 1], 0, t0, sizeof(small));
    op_init(&ops[2 * K + 2], 1, t4, sizeof(mid));
    op_init(&ops[2 * K + 3], 0, t4, sizeof(mid));
    cr_assert_eq(ta->ops->send(ta, 0, t0, small, sizeof(small), &ops[2 * K].x), FC_SUCCESS);
    cr_assert_eq(tb->ops->recv(tb, 0, t0, got, sizeof(got), &ops[2 * K + 1].x), FC_SUCCESS);
    cr_assert_eq(tb->ops->recv(tb, 0, t4, gotmid, sizeof(gotmid), &ops[2 * K + 3].x), FC_SUCCESS);
    cr_assert_eq(ta->ops->send(ta, 0, t4, mid, sizeof(mid), &ops[2 * K + 2].x), FC_SUCCESS);
    cr_assert_eq(drive(&w, ops, 2 * K + 4), FC_SUCCESS, "%s", err_get());

    for (int i = 0; i < 2 * K + 4; i++) {
        cr_assert_eq(ops[i].st, FC_SUCCESS, "op %d: %s", i, ops[i].err);
        cr_assert_eq(ops[i].ncalls, 1, "op %d completed %d times", i, ops[i].ncalls);
        cr_assert(pthread_equal(ops[i].cb_thread, main_thread),
                  "op %d: the engine's callback ran on another thread", i);
    }
    cr_assert_eq(ops[2 * K + 1].len, sizeof(small));
    cr_assert_eq(memcmp(got, small, sizeof(small)), 0);
    cr_assert_eq(ops[2 * K + 3].len, sizeof(mid), "got %zu", ops[2 * K + 3].len);
    cr_assert_eq(memcmp(gotmid, mid, sizeof(mid)), 0);
    cr_assert_eq(memcmp(src, dst, (size_t)K * SZ), 0, "data differs");
    /* rail i carried chunks k with k % 3 == i, rail 0 the chunk-0 message
     * and rail 1 the short chunk 4 */
    for (int i = 0; i < 3; i++) {
        struct fake a = snap(&w.a[i]), b = snap(&w.b[i]);
        int want = K / 3 + (i < 2);
        cr_assert_eq(a.posts, want, "rail %d of A: %d posts, expected %d", i, a.posts, want);
        cr_assert_eq(b.posts, want, "rail %d of B: %d posts", i, b.posts);
        for (int p = 0; p < a.posts; p++)
            cr_assert_eq((int)(a.tags[p] & 0x7ff) % 3, i, "rail %d got tag %#llx", i,
                         (unsigned long long)a.tags[p]);
        if (i == 0) {
            cr_assert_eq(a.posts_from_other_thread, 0, "rail 0 posts on the caller's thread");
        } else {
            cr_assert_eq(a.posts_from_other_thread, a.posts, "rail %d posts on its own thread", i);
            cr_assert(!pthread_equal(a.progress_thread, main_thread),
                      "rail %d progresses on its own thread", i);
        }
    }
    world_fini(&w);
    free(src);
    free(dst);
}

Test(rails, chunks_spread_over_threads_with_a_descriptor)
{
    spread(1);
}

Test(rails, chunks_spread_over_threads_without_a_descriptor)
{
    spread(0);
}

Test(rails, again_is_tried_again)
{
    struct world w;
    world_init(&w, 2, 1);
    w.a[1].again_every = 1; /* every other post of rail 1 is refused first */
    w.b[1].again_every = 1;
    enum { K = 8, SZ = 64 << 10 };
    static char src[K][SZ], dst[K][SZ];
    struct op ops[2 * K];
    struct transport *ta = rails_transport(w.ra), *tb = rails_transport(w.rb);
    for (int k = 0; k < K; k++) {
        memset(src[k], 'a' + k, SZ);
        op_init(&ops[2 * k], 1, (uint64_t)k, SZ);
        op_init(&ops[2 * k + 1], 0, (uint64_t)k, SZ);
        cr_assert_eq(ta->ops->send(ta, 0, (uint64_t)k, src[k], SZ, &ops[2 * k].x), FC_SUCCESS);
        cr_assert_eq(tb->ops->recv(tb, 0, (uint64_t)k, dst[k], SZ, &ops[2 * k + 1].x), FC_SUCCESS);
    }
    cr_assert_eq(drive(&w, ops, 2 * K), FC_SUCCESS, "%s", err_get());
    struct fake a = snap(&w.a[1]), b = snap(&w.b[1]);
    cr_assert_gt(a.nagain, 0, "the fake never refused a post of A");
    cr_assert_gt(b.nagain, 0, "the fake never refused a post of B");
    cr_assert_eq(a.posts, K / 2);
    cr_assert_eq(b.posts, K / 2);
    for (int k = 0; k < 2 * K; k++)
        cr_assert_eq(ops[k].ncalls, 1, "op %d completed %d times", k, ops[k].ncalls);
    for (int k = 0; k < K; k++)
        cr_assert_eq(memcmp(src[k], dst[k], SZ), 0, "chunk %d", k);
    world_fini(&w);
}

/* Both ends hand a rail a send first, then a receive, and the transport
 * refuses sends until its side has posted a receive: posted in order only,
 * neither receive would ever be posted. */
Test(rails, a_refused_send_does_not_hold_up_a_receive, .timeout = 30)
{
    struct world w;
    world_init(&w, 2, 1);
    w.a[1].refuse_send_before_recv = 1;
    w.b[1].refuse_send_before_recv = 1;
    enum { SZ = 1000 };
    static char sa[SZ], sb[SZ], ra[SZ], rb[SZ];
    memset(sa, 'a', SZ);
    memset(sb, 'b', SZ);
    struct op ops[4];
    struct transport *ta = rails_transport(w.ra), *tb = rails_transport(w.rb);
    uint64_t t1 = (1ull << 20) | 1, t3 = (1ull << 20) | 3; /* both chunk indices odd: rail 1 */
    op_init(&ops[0], 1, t1, SZ);
    op_init(&ops[1], 0, t3, SZ);
    op_init(&ops[2], 1, t3, SZ);
    op_init(&ops[3], 0, t1, SZ);
    cr_assert_eq(ta->ops->send(ta, 0, t1, sa, SZ, &ops[0].x), FC_SUCCESS);
    cr_assert_eq(ta->ops->recv(ta, 0, t3, ra, SZ, &ops[1].x), FC_SUCCESS);
    cr_assert_eq(tb->ops->send(tb, 0, t3, sb, SZ, &ops[2].x), FC_SUCCESS);
    cr_assert_eq(tb->ops->recv(tb, 0, t1, rb, SZ, &ops[3].x), FC_SUCCESS);
    cr_assert_eq(drive(&w, ops, 4), FC_SUCCESS, "%s", err_get());
    cr_assert_gt(snap(&w.a[1]).nagain + snap(&w.b[1]).nagain, 0, "no send was refused");
    cr_assert_eq(memcmp(ra, sb, SZ), 0);
    cr_assert_eq(memcmp(rb, sa, SZ), 0);
    world_fini(&w);
}

Test(rails, an_op_error_names_its_rail)
{
    struct world w;
    world_init(&w, 2, 1);
    w.b[1].fail_next_recv = 1;
    enum { SZ = 64 << 10 };
    static char src[SZ], dst[SZ];
    struct op ops[2];
    struct transport *ta = rails_transport(w.ra), *tb = rails_transport(w.rb);
    op_init(&ops[0], 1, 1, SZ);
    op_init(&ops[1], 0, 1, SZ);
    cr_assert_eq(ta->ops->send(ta, 0, 1, src, SZ, &ops[0].x), FC_SUCCESS);
    cr_assert_eq(tb->ops->recv(tb, 0, 1, dst, SZ, &ops[1].x), FC_SUCCESS);
    cr_assert_eq(drive(&w, ops, 2), FC_SUCCESS, "%s", err_get());
    cr_assert_eq(ops[0].st, FC_SUCCESS);
    cr_assert_eq(ops[0].ncalls, 1);
    cr_assert_eq(ops[1].ncalls, 1);
    cr_assert_eq(ops[1].st, FC_ERR_FABRIC);
    cr_assert(strstr(ops[1].err, "rail 1 of 2") && strstr(ops[1].err, "fake receive error"),
              "message: %s", ops[1].err);
    world_fini(&w);
}

Test(rails, a_failed_rail_fails_the_transport)
{
    struct world w;
    world_init(&w, 3, 1);
    enum { SZ = 64 << 10 };
    static char src[SZ], dst[SZ];
    struct op ops[2];
    struct transport *ta = rails_transport(w.ra), *tb = rails_transport(w.rb);
    pthread_mutex_lock(&w.links[2].m);
    w.b[2].fail_progress = FC_ERR_FABRIC;
    pthread_mutex_unlock(&w.links[2].m);
    op_init(&ops[0], 1, 2, SZ);
    op_init(&ops[1], 0, 2, SZ);
    cr_assert_eq(ta->ops->send(ta, 0, 2, src, SZ, &ops[0].x), FC_SUCCESS);
    cr_assert_eq(tb->ops->recv(tb, 0, 2, dst, SZ, &ops[1].x), FC_SUCCESS);
    fc_result_t rc = drive(&w, ops, 2);
    cr_assert_eq(rc, FC_ERR_FABRIC, "got %d", rc);
    cr_assert(strstr(err_get(), "rail 2 of 3") && strstr(err_get(), "boom"), "message: %s",
              err_get());
    /* it keeps failing, and the other rails' threads stopped driving their
     * endpoints (the engine frees what was posted there) */
    int n;
    cr_assert_eq(tb->ops->progress(tb, &n), FC_ERR_FABRIC);
    int before = snap(&w.b[1]).nprogress;
    struct timespec ts = {0, 30 * 1000 * 1000};
    nanosleep(&ts, NULL);
    cr_assert_eq(snap(&w.b[1]).nprogress, before, "rail 1 still progresses after the failure");
    op_init(&ops[0], 1, 1, SZ);
    cr_assert_eq(tb->ops->send(tb, 0, 1, src, SZ, &ops[0].x), FC_ERR_FABRIC,
                 "a hand-over after the failure must fail");
    world_fini(&w);
}

Test(rails, a_failed_rail_0_stops_the_rails)
{
    struct world w;
    world_init(&w, 2, 1);
    enum { SZ = 64 << 10 };
    static char buf[SZ];
    struct op ops[1];
    struct transport *tb = rails_transport(w.rb);
    /* a receive posted on rail 1 that nothing will match */
    op_init(&ops[0], 0, 1, SZ);
    cr_assert_eq(tb->ops->recv(tb, 0, 1, buf, SZ, &ops[0].x), FC_SUCCESS);
    pthread_mutex_lock(&w.links[0].m);
    w.b[0].fail_progress = FC_ERR_PEER_FAILED;
    pthread_mutex_unlock(&w.links[0].m);
    int n;
    cr_assert_eq(tb->ops->progress(tb, &n), FC_ERR_PEER_FAILED);
    int before = snap(&w.b[1]).nprogress;
    struct timespec ts = {0, 30 * 1000 * 1000};
    nanosleep(&ts, NULL);
    cr_assert_eq(snap(&w.b[1]).nprogress, before, "rail 1 still progresses after rail 0 failed");
    cr_assert_eq(ops[0].ncalls, 0, "no callback for what was posted");
    world_fini(&w);
}

/* Teardown with receives still posted on every rail and a queued post:
 * stops and frees without a callback. */
Test(rails, teardown_with_transfers_posted, .timeout = 30)
{
    struct world w;
    world_init(&w, 3, 1);
    enum { SZ = 4096 };
    static char buf[6][SZ];
    struct op ops[6];
    struct transport *ta = rails_transport(w.ra);
    for (int k = 0; k < 6; k++) {
        op_init(&ops[k], 0, (uint64_t)k, SZ);
        cr_assert_eq(ta->ops->recv(ta, 0, (uint64_t)k, buf[k], SZ, &ops[k].x), FC_SUCCESS);
    }
    int n;
    cr_assert_eq(ta->ops->progress(ta, &n), FC_SUCCESS);
    world_fini(&w);
    for (int k = 0; k < 6; k++)
        cr_assert_eq(ops[k].ncalls, 0, "op %d called back", k);
}
