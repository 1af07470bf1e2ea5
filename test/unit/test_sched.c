/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The schedule engine on hand-built schedules: chunking, the in-flight
 * window, chunked dependencies (pipelining), tags that keep concurrent
 * schedules apart, zero-length steps, length mismatches, build errors.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "schedule.h"
#include "transport_loop.h"

/* A transport that wraps the loopback and records what the engine posts. */
struct spy {
    struct loop_watch w; /* first */
    int outstanding, max_outstanding;
    int events[4096]; /* +1000*k: post of chunk k; -1000*k-1: completion */
    int nevents;
    xfer_done_fn orig[4096];
};

static void spy_done(struct xfer *x, fc_result_t st, size_t len)
{
    struct spy *s = x->tctx[7];
    s->outstanding--;
    s->events[s->nevents++] = (int)(x->step * 100000 + x->chunk * 10 + 3);
    x->done = (xfer_done_fn)x->tctx[6];
    x->done(x, st, len);
}

static void spy_post(struct loop_watch *w, int is_send, int peer, const void *buf, size_t len,
                     struct xfer *x)
{
    (void)peer, (void)buf, (void)len;
    struct spy *s = (struct spy *)w;
    s->outstanding++;
    if (s->outstanding > s->max_outstanding)
        s->max_outstanding = s->outstanding;
    s->events[s->nevents++] = (int)(x->step * 100000 + x->chunk * 10 + (is_send ? 1 : 2));
    x->tctx[7] = s;
    x->tctx[6] = (void *)x->done;
    x->done = spy_done;
}

static void spy_init(struct spy *s, struct transport *inner)
{
    memset(s, 0, sizeof(*s));
    loop_watch_init(&s->w, inner, spy_post);
}

/* Runs the schedules of n ranks (transport tp[r]) until done or stuck. */
static int run_all(struct sched *s, struct transport **tp, int n)
{
    for (int guard = 0; guard < 1000000; guard++) {
        int done = 0, ev = 0;
        for (int r = 0; r < n; r++) {
            int nc = 0;
            tp[r]->ops->progress(tp[r], &nc);
            ev += nc;
            if (sched_advance(&s[r]) != FC_SUCCESS)
                return -1;
            done += sched_done(&s[r]);
        }
        if (done == n)
            return 0;
        if (!ev && guard > 2)
            return -2;
    }
    return -3;
}

static struct sched_env env_of(struct transport *tp, size_t chunk, int window, uint32_t seq)
{
    struct sched_env e = {.tp = tp, .peer_map = NULL, .tag_base = tag_base(1, TAG_KIND_COLL, seq),
                          .chunk_bytes = chunk, .window = window};
    return e;
}

Test(sched, chunking_and_window)
{
    struct loop_fabric *f = loop_fabric_create(2, 0);
    struct spy sp[2];
    struct transport *tp[2];
    for (int r = 0; r < 2; r++) {
        spy_init(&sp[r], loop_transport(f, r));
        tp[r] = &sp[r].w.base;
    }
    char src[1000], dst[1000];
    for (int i = 0; i < 1000; i++)
        src[i] = (char)(i * 7);
    memset(dst, 0, sizeof(dst));
    struct sched s[2];
    sched_init(&s[0], FC_UINT8, FC_SUM, 2);
    sched_init(&s[1], FC_UINT8, FC_SUM, 2);
    sched_send(&s[0], 1, 5, sbuf(R_SEND, 0), 1000);
    sched_recv(&s[1], 0, 5, sbuf(R_RECV, 0), 1000);
    for (int r = 0; r < 2; r++) {
        struct sched_env e = env_of(tp[r], 64, 3, 9);
        cr_assert_eq(sched_start(&s[r], &e, src, dst), FC_SUCCESS);
    }
    cr_assert_eq(run_all(s, tp, 2), 0);
    cr_assert_arr_eq(src, dst, 1000);
    uint64_t msgs, bytes;
    loop_fabric_stats(f, &msgs, &bytes);
    cr_assert_eq(msgs, 16, "1000 bytes in 64-byte chunks is 16 messages, saw %llu",
                 (unsigned long long)msgs);
    cr_assert_eq(bytes, 1000);
    cr_assert_leq(sp[0].max_outstanding, 3, "window 3 exceeded: %d", sp[0].max_outstanding);
    cr_assert_leq(sp[1].max_outstanding, 3, "window 3 exceeded: %d", sp[1].max_outstanding);
    cr_assert_eq(sp[1].max_outstanding, 3, "the window was not used: %d", sp[1].max_outstanding);
    for (int r = 0; r < 2; r++)
        sched_release(&s[r]);
    loop_fabric_destroy(f);
}

/* Three ranks over spies on one loopback fabric: rank 0 sends N bytes to
 * rank 1, which forwards them to rank 2 with a chunked dependency. */
enum { FWD_N = 64 * 20 };
struct fwd {
    struct loop_fabric *f;
    struct spy sp[3];
    struct transport *tp[3];
    struct sched s[3];
    int rcv, snd; /* rank 1's steps */
};

static void fwd_build(struct fwd *w)
{
    w->f = loop_fabric_create(3, 0);
    for (int r = 0; r < 3; r++) {
        spy_init(&w->sp[r], loop_transport(w->f, r));
        w->tp[r] = &w->sp[r].w.base;
        sched_init(&w->s[r], FC_UINT8, FC_SUM, 3);
    }
    sched_send(&w->s[0], 1, 0, sbuf(R_SEND, 0), FWD_N);
    w->rcv = sched_recv(&w->s[1], 0, 0, sbuf(R_RECV, 0), FWD_N);
    w->snd = sched_send(&w->s[1], 2, 1, sbuf(R_RECV, 0), FWD_N);
    sched_dep(&w->s[1], w->snd, w->rcv, 1);
    sched_recv(&w->s[2], 1, 1, sbuf(R_RECV, 0), FWD_N);
}

/* Rank 1 posted its first forward before its last receive completed. */
static void fwd_check_pipelined(const struct fwd *w, int run)
{
    int first_send = -1, last_recv_done = -1;
    for (int i = 0; i < w->sp[1].nevents; i++) {
        int e = w->sp[1].events[i];
        if (e / 100000 == w->snd && e % 10 == 1 && first_send < 0)
            first_send = i;
        if (e / 100000 == w->rcv && e % 10 == 3)
            last_recv_done = i;
    }
    cr_assert_lt(first_send, last_recv_done, "run %d: no pipelining: first forward at event %d, "
                 "last receive done at %d", run, first_send, last_recv_done);
}

/* Rank 1 forwards what it receives from 0 to 2 with a chunked dependency:
 * it must post its first send before its last receive completes. */
Test(sched, chunked_dependency_pipelines)
{
    struct fwd w;
    fwd_build(&w);
    static char a[FWD_N], b[FWD_N], c[FWD_N];
    for (int i = 0; i < FWD_N; i++)
        a[i] = (char)(i ^ 0x33);
    void *bufs[3][2] = {{a, NULL}, {NULL, b}, {NULL, c}};
    for (int r = 0; r < 3; r++) {
        struct sched_env e = env_of(w.tp[r], 64, 2, 1);
        cr_assert_eq(sched_start(&w.s[r], &e, bufs[r][0], bufs[r][1]), FC_SUCCESS);
    }
    cr_assert_eq(run_all(w.s, w.tp, 3), 0);
    cr_assert_arr_eq(a, b, FWD_N);
    cr_assert_arr_eq(a, c, FWD_N);
    fwd_check_pipelined(&w, 0);
    for (int r = 0; r < 3; r++)
        sched_release(&w.s[r]);
    loop_fabric_destroy(w.f);
}

/* A finished schedule runs again on new buffers and tags (what a
 * communicator does with a repeated small collective), pipelining as the
 * first time; one that did not finish cleanly is refused. */
Test(sched, restart_runs_again)
{
    struct fwd w;
    fwd_build(&w);
    static char a[FWD_N], b[FWD_N], c[FWD_N];
    for (int run = 0; run < 4; run++) {
        for (int i = 0; i < FWD_N; i++)
            a[i] = (char)(i * 7 + run);
        memset(b, 0, FWD_N);
        memset(c, 0, FWD_N);
        for (int r = 0; r < 3; r++) {
            void *sb = r == 0 ? a : NULL, *rb = r == 1 ? b : r == 2 ? c : NULL;
            if (run == 0) {
                struct sched_env e = env_of(w.tp[r], 64, 2, 1);
                cr_assert_eq(sched_start(&w.s[r], &e, sb, rb), FC_SUCCESS);
            } else {
                cr_assert_eq(sched_restart(&w.s[r], tag_base(1, TAG_KIND_COLL, 1 + run), sb, rb),
                             FC_SUCCESS, "run %d rank %d", run, r);
            }
            w.sp[r].nevents = 0;
        }
        cr_assert_eq(run_all(w.s, w.tp, 3), 0, "run %d", run);
        cr_assert_arr_eq(a, b, FWD_N, "run %d", run);
        cr_assert_arr_eq(a, c, FWD_N, "run %d", run);
        fwd_check_pipelined(&w, run);
    }
    /* rank 2 alone restarted: it cannot finish, and cannot be restarted */
    cr_assert_eq(sched_restart(&w.s[2], tag_base(1, TAG_KIND_COLL, 9), NULL, c), FC_SUCCESS);
    int nc;
    w.tp[2]->ops->progress(w.tp[2], &nc);
    cr_assert_eq(sched_advance(&w.s[2]), FC_SUCCESS);
    cr_assert(!sched_done(&w.s[2]));
    cr_assert_neq(sched_restart(&w.s[2], tag_base(1, TAG_KIND_COLL, 10), NULL, c), FC_SUCCESS);
    loop_fabric_destroy(w.f); /* first: rank 2's receive is still posted */
    for (int r = 0; r < 3; r++)
        sched_release(&w.s[r]);
}

/* Two schedules in flight at once on the same ranks, posted in opposite
 * orders, with the same step tags: the sequence number keeps them apart. */
Test(sched, concurrent_schedules_do_not_cross)
{
    struct loop_fabric *f = loop_fabric_create(2, 11);
    struct transport *tp[2] = {loop_transport(f, 0), loop_transport(f, 1)};
    int x1[100], x2[100], y1[100], y2[100];
    for (int i = 0; i < 100; i++) {
        x1[i] = i;
        x2[i] = -i - 1000;
    }
    struct sched s1[2], s2[2];
    for (int r = 0; r < 2; r++) {
        sched_init(&s1[r], FC_INT32, FC_SUM, 2);
        sched_init(&s2[r], FC_INT32, FC_SUM, 2);
    }
    sched_send(&s1[0], 1, 0, sbuf(R_SEND, 0), sizeof(x1));
    sched_recv(&s1[1], 0, 0, sbuf(R_RECV, 0), sizeof(y1));
    sched_send(&s2[0], 1, 0, sbuf(R_SEND, 0), sizeof(x2));
    sched_recv(&s2[1], 0, 0, sbuf(R_RECV, 0), sizeof(y2));
    /* rank 1 posts the second collective's receive first */
    struct sched_env e1 = env_of(tp[1], 128, 2, 2), e0 = env_of(tp[0], 128, 2, 1);
    cr_assert_eq(sched_start(&s2[1], &e1, NULL, y2), FC_SUCCESS);
    cr_assert_eq(sched_advance(&s2[1]), FC_SUCCESS);
    e1.tag_base = tag_base(1, TAG_KIND_COLL, 1);
    cr_assert_eq(sched_start(&s1[1], &e1, NULL, y1), FC_SUCCESS);
    cr_assert_eq(sched_start(&s1[0], &e0, x1, NULL), FC_SUCCESS);
    e0.tag_base = tag_base(1, TAG_KIND_COLL, 2);
    cr_assert_eq(sched_start(&s2[0], &e0, x2, NULL), FC_SUCCESS);
    for (int it = 0; it < 1000; it++) {
        for (int r = 0; r < 2; r++) {
            int nc;
            tp[r]->ops->progress(tp[r], &nc);
            sched_advance(&s1[r]);
            sched_advance(&s2[r]);
        }
    }
    for (int r = 0; r < 2; r++) {
        cr_assert(sched_done(&s1[r]) && sched_done(&s2[r]));
    }
    cr_assert_arr_eq(x1, y1, sizeof(x1));
    cr_assert_arr_eq(x2, y2, sizeof(x2));
    for (int r = 0; r < 2; r++) {
        sched_release(&s1[r]);
        sched_release(&s2[r]);
    }
    loop_fabric_destroy(f);
}

Test(sched, zero_length_steps_send_nothing)
{
    struct loop_fabric *f = loop_fabric_create(2, 0);
    struct transport *tp[2] = {loop_transport(f, 0), loop_transport(f, 1)};
    struct sched s[2];
    for (int r = 0; r < 2; r++)
        sched_init(&s[r], FC_FLOAT32, FC_SUM, 2);
    int a = sched_send(&s[0], 1, 0, sbuf(R_SEND, 0), 0);
    int b = sched_copy(&s[0], sbuf(R_RECV, 0), sbuf(R_SEND, 0), 0);
    sched_dep(&s[0], b, a, 1);
    sched_recv(&s[1], 0, 0, sbuf(R_RECV, 0), 0);
    for (int r = 0; r < 2; r++) {
        struct sched_env e = env_of(tp[r], 64, 2, 1);
        cr_assert_eq(sched_start(&s[r], &e, NULL, NULL), FC_SUCCESS);
    }
    cr_assert_eq(run_all(s, tp, 2), 0);
    uint64_t msgs, bytes;
    loop_fabric_stats(f, &msgs, &bytes);
    cr_assert_eq(msgs, 0);
    for (int r = 0; r < 2; r++)
        sched_release(&s[r]);
    loop_fabric_destroy(f);
}

/* What a stager sets aside before a schedule starts: a step's last chunk,
 * when shorter, is a shape of its own (a stream-ordered request on device
 * buffers waited for ever for a short chunk's buffer that nothing had set
 * aside, at every length not a multiple of the chunk). */
struct shape_log {
    size_t len[8];
    uint32_t n[8];
    int recv[8], k;
};

static void log_shape(void *arg, size_t len, uint32_t n, int recv)
{
    struct shape_log *l = arg;
    cr_assert_lt(l->k, 8);
    l->len[l->k] = len;
    l->n[l->k] = n;
    l->recv[l->k++] = recv;
}

Test(sched, xfer_shapes_report_a_short_last_chunk)
{
    struct sched s;
    sched_init(&s, FC_FLOAT32, FC_SUM, 2);
    sched_send(&s, 1, 0, sbuf(R_SEND, 0), 2 * 4096 + 4); /* 2 chunks + 4 bytes */
    sched_recv(&s, 1, 1, sbuf(R_RECV, 0), 3 * 4096);     /* whole chunks */
    sched_recv(&s, 1, 2, sbuf(R_RECV, 0), 100);          /* one chunk */
    sched_send(&s, 1, 3, sbuf(R_SEND, 0), 0);            /* nothing to stage */
    struct shape_log l = {.k = 0};
    sched_xfer_shapes(&s, 4096, log_shape, &l);
    cr_assert_eq(l.k, 4);
    cr_assert(l.len[0] == 4096 && l.n[0] == 2 && !l.recv[0]);
    cr_assert(l.len[1] == 4 && l.n[1] == 1 && !l.recv[1], "the last 4 bytes: %zu x %u",
              l.len[1], l.n[1]);
    cr_assert(l.len[2] == 4096 && l.n[2] == 3 && l.recv[2]);
    cr_assert(l.len[3] == 100 && l.n[3] == 1 && l.recv[3]);
    l.k = 0; /* a chunk the engine rounds (4100 -> 4096): the same shapes */
    sched_xfer_shapes(&s, 4100, log_shape, &l);
    cr_assert_eq(l.k, 4);
    cr_assert(l.len[0] == 4096 && l.n[0] == 2 && l.len[1] == 4 && l.n[1] == 1,
              "rounded chunk: %zu x %u, then %zu x %u", l.len[0], l.n[0], l.len[1], l.n[1]);
    l.k = 0; /* no chunking: one shape a step */
    sched_xfer_shapes(&s, 0, log_shape, &l);
    cr_assert_eq(l.k, 3);
    cr_assert(l.len[0] == 2 * 4096 + 4 && l.n[0] == 1);
    sched_release(&s);
}

Test(sched, length_mismatch_is_an_error)
{
    struct loop_fabric *f = loop_fabric_create(2, 0);
    struct transport *tp[2] = {loop_transport(f, 0), loop_transport(f, 1)};
    char a[100] = {0}, b[200];
    struct sched s[2];
    for (int r = 0; r < 2; r++)
        sched_init(&s[r], FC_UINT8, FC_SUM, 2);
    s[1].coll_name = "allreduce";
    s[1].algo_name = "ring";
    sched_send(&s[0], 1, 0, sbuf(R_SEND, 0), 100);
    sched_recv(&s[1], 0, 0, sbuf(R_RECV, 0), 200);
    for (int r = 0; r < 2; r++) {
        struct sched_env e = env_of(tp[r], 0, 2, 1);
        cr_assert_eq(sched_start(&s[r], &e, a, b), FC_SUCCESS);
    }
    cr_assert_eq(run_all(s, tp, 2), -1);
    cr_assert_eq(s[1].status, FC_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(s[1].errmsg, "rank 0") && strstr(s[1].errmsg, "100 bytes") &&
                  strstr(s[1].errmsg, "200"),
              "unhelpful: %s", s[1].errmsg);
    for (int r = 0; r < 2; r++)
        sched_release(&s[r]);
    loop_fabric_destroy(f);
}

/* Value steps (the counts that large point-to-point messages exchange):
 * equal values pass and the step after the check runs; different ones fail
 * the receiving side with both numbers, and the step that waits for the
 * check is never posted. */
static int value_case(uint64_t sent, uint64_t expected, struct sched *s, int *posted_after)
{
    struct loop_fabric *f = loop_fabric_create(2, 0);
    struct transport *tp[2] = {loop_transport(f, 0), loop_transport(f, 1)};
    char a[64] = {1}, b[64] = {0};
    for (int r = 0; r < 2; r++)
        sched_init(&s[r], FC_UINT8, FC_SUM, 2);
    s[1].coll_name = "recv";
    sched_send_value(&s[0], 1, 1, sent, SV_SEND_COUNT);
    sched_send(&s[0], 1, 3, sbuf(R_SEND, 0), 64);
    int chk = sched_expect_value(&s[1], 0, 1, expected, SV_SEND_COUNT);
    int after = sched_recv(&s[1], 0, 3, sbuf(R_RECV, 0), 64);
    sched_dep(&s[1], after, chk, 0);
    for (int r = 0; r < 2; r++) {
        struct sched_env e = env_of(tp[r], 0, 2, 1);
        cr_assert_eq(sched_start(&s[r], &e, a, b), FC_SUCCESS);
    }
    int rc = run_all(s, tp, 2);
    *posted_after = s[1].steps[after].issued > 0;
    loop_fabric_destroy(f);
    return rc;
}

Test(sched, value_steps_check_counts)
{
    struct sched s[2];
    int posted;
    cr_assert_eq(value_case(524292, 524292, s, &posted), 0, "%s", s[1].errmsg);
    cr_assert(posted);
    cr_assert_eq(s[1].status, FC_SUCCESS);
    for (int r = 0; r < 2; r++)
        sched_release(&s[r]);
    cr_assert_eq(value_case(524292, 524288, s, &posted), -1);
    cr_assert_eq(s[1].status, FC_ERR_INVALID_ARGUMENT);
    cr_assert(!s[1].truncated);
    cr_assert(!posted, "the step behind a failed check was posted");
    cr_assert(strstr(s[1].errmsg, "rank 0") && strstr(s[1].errmsg, "sends 524292 bytes") &&
                  strstr(s[1].errmsg, "expects 524288"),
              "unhelpful: %s", s[1].errmsg);
    for (int r = 0; r < 2; r++)
        sched_release(&s[r]);
}

Test(sched, backward_dependency_rejected)
{
    struct sched s;
    sched_init(&s, FC_FLOAT32, FC_SUM, 2);
    int a = sched_nop(&s);
    int b = sched_nop(&s);
    sched_dep(&s, a, b, 0);
    cr_assert_eq(s.build_err, FC_ERR_INTERNAL);
    struct sched_env e = {0};
    cr_assert_eq(sched_start(&s, &e, NULL, NULL), FC_ERR_INTERNAL);
    sched_release(&s);
}

Test(sched, local_steps_and_fence)
{
    /* one rank: copy, reduce, scale chained, 3-chunk steps */
    struct loop_fabric *f = loop_fabric_create(1, 0);
    struct transport *tp = loop_transport(f, 0);
    float in[48], out[48];
    for (int i = 0; i < 48; i++)
        in[i] = (float)i;
    struct sched s;
    sched_init(&s, FC_FLOAT32, FC_AVG, 4);
    size_t sc = sched_scratch(&s, sizeof(in));
    int c1 = sched_copy(&s, sbuf(R_SCRATCH, sc), sbuf(R_SEND, 0), sizeof(in));
    int r1 = sched_reduce(&s, sbuf(R_RECV, 0), sbuf(R_SCRATCH, sc), sbuf(R_SEND, 0), sizeof(in));
    sched_dep(&s, r1, c1, 1);
    int fe = sched_fence(&s, 0);
    int s1 = sched_scale(&s, sbuf(R_RECV, 0), sizeof(in));
    sched_dep(&s, s1, fe, 0);
    struct sched_env e = env_of(tp, 64, 2, 1);
    cr_assert_eq(sched_start(&s, &e, in, out), FC_SUCCESS);
    cr_assert_eq(sched_advance(&s), FC_SUCCESS);
    cr_assert(sched_done(&s));
    for (int i = 0; i < 48; i++)
        cr_assert_float_eq(out[i], 2.0f * i / 4.0f, 0, "element %d: %g", i, out[i]);
    sched_release(&s);
    loop_fabric_destroy(f);
}

Test(sched, signals_are_zero_byte_messages)
{
    struct loop_fabric *f = loop_fabric_create(2, 0);
    struct transport *tp[2] = {loop_transport(f, 0), loop_transport(f, 1)};
    struct sched s[2];
    for (int r = 0; r < 2; r++)
        sched_init(&s[r], FC_FLOAT32, FC_SUM, 2);
    int a = sched_signal(&s[0], 1, 3);
    int w = sched_wait_signal(&s[0], 1, 4);
    sched_dep(&s[0], w, a, 1);
    int w1 = sched_wait_signal(&s[1], 0, 3);
    int a1 = sched_signal(&s[1], 0, 4);
    sched_dep(&s[1], a1, w1, 1); /* chunked on a signal means full */
    for (int r = 0; r < 2; r++) {
        struct sched_env e = env_of(tp[r], 64, 2, 1);
        cr_assert_eq(sched_start(&s[r], &e, NULL, NULL), FC_SUCCESS);
    }
    cr_assert_eq(run_all(s, tp, 2), 0);
    uint64_t msgs, bytes;
    loop_fabric_stats(f, &msgs, &bytes);
    cr_assert_eq(msgs, 2);
    cr_assert_eq(bytes, 0);
    for (int r = 0; r < 2; r++)
        sched_release(&s[r]);
    loop_fabric_destroy(f);
}

/* Signatures (sched_sign): a ring of 3 where each rank sends 8 KiB to the
 * next and 100 bytes back to the previous. The value steps go first; equal
 * signatures let every message through; when rank 2's differs, its
 * neighbours (ranks 1 and 0, here also its peers) and rank 2 itself fail
 * with FC_ERR_INVALID_ARGUMENT naming both, and no send over the gate to or
 * from rank 2 is posted (the 100-byte ones are not held back). */
static void sign_case(const uint64_t *sig, struct sched *s, int *big_posted)
{
    struct loop_fabric *f = loop_fabric_create(3, 0);
    struct transport *tp[3];
    static char a[3][8192], b[3][8192 + 100];
    for (int r = 0; r < 3; r++) {
        tp[r] = loop_transport(f, r);
        memset(a[r], 'a' + r, sizeof(a[r]));
        memset(b[r], 0, sizeof(b[r]));
        sched_init(&s[r], FC_UINT8, FC_SUM, 3);
        s[r].coll_name = "ring";
        sched_send(&s[r], (r + 1) % 3, 1, sbuf(R_SEND, 0), 8192);
        sched_recv(&s[r], (r + 2) % 3, 1, sbuf(R_RECV, 0), 8192);
        sched_send(&s[r], (r + 2) % 3, 2, sbuf(R_SEND, 0), 100);
        sched_recv(&s[r], (r + 1) % 3, 2, sbuf(R_RECV, 8192), 100);
        cr_assert_eq(sched_sign(&s[r], r, sig[r], 4096), FC_SUCCESS);
        /* two peers: a send and a receive of the signature each, first */
        cr_assert_eq(s[r].nsteps, 8u);
        for (int i = 0; i < 4; i++)
            cr_assert_eq(s[r].steps[i].value, SV_SIGNATURE);
    }
    for (int r = 0; r < 3; r++) {
        struct sched_env e = env_of(tp[r], 0, 2, 1);
        cr_assert_eq(sched_start(&s[r], &e, a[r], b[r]), FC_SUCCESS);
    }
    for (int guard = 0; guard < 100000; guard++) {
        int ev = 0, busy = 0;
        for (int r = 0; r < 3; r++) {
            int nc = 0;
            tp[r]->ops->progress(tp[r], &nc);
            ev += nc;
            if (s[r].status == FC_SUCCESS && !sched_done(&s[r])) {
                sched_advance(&s[r]);
                busy++;
            }
        }
        if (!busy || (!ev && guard > 2))
            break;
    }
    for (int r = 0; r < 3; r++)
        big_posted[r] = s[r].steps[4].issued > 0; /* the 8 KiB send */
    loop_fabric_destroy(f);
}

Test(sched, signatures_gate_long_sends)
{
    struct sched s[3];
    int posted[3];
    const uint64_t same[3] = {0x1234, 0x1234, 0x1234};
    sign_case(same, s, posted);
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(s[r].status, FC_SUCCESS, "rank %d: %s", r, s[r].errmsg);
        cr_assert(sched_done(&s[r]));
        int prev = (r + 2) % 3, next = (r + 1) % 3;
        unsigned char *got = (unsigned char *)s[r].base[R_RECV];
        cr_assert(got[0] == 'a' + prev && got[8191] == 'a' + prev && got[8192] == 'a' + next &&
                      got[8291] == 'a' + next,
                  "rank %d received the wrong bytes", r);
        sched_release(&s[r]);
    }
    const uint64_t odd[3] = {0x1234, 0x1234, 0x9999};
    sign_case(odd, s, posted);
    for (int r = 0; r < 3; r++) {
        cr_assert_eq(s[r].status, FC_ERR_INVALID_ARGUMENT, "rank %d: %s", r,
                     fc_strerror(s[r].status));
        cr_assert(strstr(s[r].errmsg, "0x9999") && strstr(s[r].errmsg, "0x1234"),
                  "rank %d does not name both: %s", r, s[r].errmsg);
        sched_release(&s[r]);
    }
    cr_assert(!posted[1] && !posted[2], "an 8 KiB send to or from the odd rank was posted");
}
