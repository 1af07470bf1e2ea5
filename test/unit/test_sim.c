/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The schedule simulator (src/sim.c, what fc_sim runs): its timing model on
 * hand-built schedules, its detection of schedules that disagree, and every
 * algorithm's schedules agreeing at sizes up to 4096 ranks.
 * Also the tuner: the tie between gather and rd, ranks outnumbering CPUs,
 * and the providers' handshakes.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

#include "coll.h"
#include "select.h"
#include "sim.h"

static const double A = 2e-6, B = 1e-9, G = 0.5e-9;

static void add_all(struct sim *s, struct sched *sc, int n)
{
    for (int r = 0; r < n; r++) {
        cr_assert_eq(sc[r].build_err, FC_SUCCESS);
        cr_assert_eq(sim_add(s, &sc[r]), 0, "%s", s->err);
        sched_release(&sc[r]);
    }
}

Test(sim, one_message_costs_alpha_plus_beta_bytes)
{
    struct sched sc[2];
    for (int r = 0; r < 2; r++)
        sched_init(&sc[r], FC_UINT8, FC_SUM, 2);
    int snd = sched_send(&sc[0], 1, 7, sbuf(R_SEND, 0), 1000);
    int rcv = sched_recv(&sc[1], 0, 7, sbuf(R_RECV, 0), 1000);
    int red = sched_reduce(&sc[1], sbuf(R_RECV, 0), sbuf(R_RECV, 0), sbuf(R_SEND, 0), 1000);
    sched_dep(&sc[1], red, rcv, 0);
    (void)snd;
    struct sim s;
    sim_init(&s, 2, 0, 1);
    add_all(&s, sc, 2);
    cr_assert_eq(sim_run(&s, A, B, G), 0, "%s", s.err);
    cr_assert_float_eq(s.end, A + 1000 * B + 1000 * G, 1e-12);
    cr_assert_eq(s.done, 3);
    cr_assert_eq(s.max_msgs, 1);
    cr_assert_eq(s.max_sent, 1000);
    sim_free(&s);
}

Test(sim, sends_of_one_rank_serialise)
{
    struct sched sc[3];
    for (int r = 0; r < 3; r++)
        sched_init(&sc[r], FC_UINT8, FC_SUM, 3);
    sched_send(&sc[0], 1, 1, sbuf(R_SEND, 0), 500);
    sched_send(&sc[0], 2, 1, sbuf(R_SEND, 0), 500);
    sched_recv(&sc[1], 0, 1, sbuf(R_RECV, 0), 500);
    sched_recv(&sc[2], 0, 1, sbuf(R_RECV, 0), 500);
    struct sim s;
    sim_init(&s, 3, 0, 1);
    add_all(&s, sc, 3);
    cr_assert_eq(sim_run(&s, A, B, G), 0, "%s", s.err);
    /* the second message leaves after the first's 500 bytes */
    cr_assert_float_eq(s.end, A + 1000 * B, 1e-12);
    sim_free(&s);
}

Test(sim, length_mismatch_is_reported)
{
    struct sched sc[2];
    for (int r = 0; r < 2; r++)
        sched_init(&sc[r], FC_UINT8, FC_SUM, 2);
    sched_send(&sc[0], 1, 3, sbuf(R_SEND, 0), 64);
    sched_recv(&sc[1], 0, 3, sbuf(R_RECV, 0), 32);
    struct sim s;
    sim_init(&s, 2, 0, 1);
    add_all(&s, sc, 2);
    cr_assert_eq(sim_run(&s, A, B, G), -1);
    cr_assert(strstr(s.err, "64 bytes") && strstr(s.err, "expects 32"), "%s", s.err);
    sim_free(&s);
}

Test(sim, deadlock_is_reported)
{
    /* each rank receives before it sends */
    struct sched sc[2];
    for (int r = 0; r < 2; r++) {
        sched_init(&sc[r], FC_UINT8, FC_SUM, 2);
        int rcv = sched_recv(&sc[r], 1 - r, 1, sbuf(R_RECV, 0), 8);
        int snd = sched_send(&sc[r], 1 - r, 1, sbuf(R_SEND, 0), 8);
        sched_dep(&sc[r], snd, rcv, 0);
    }
    struct sim s;
    sim_init(&s, 2, 0, 1);
    add_all(&s, sc, 2);
    cr_assert_eq(sim_run(&s, A, B, G), -1);
    cr_assert(strstr(s.err, "deadlock") && strstr(s.err, "never sends"), "%s", s.err);
    sim_free(&s);
}

Test(sim, unreceived_message_is_reported)
{
    struct sched sc[2];
    for (int r = 0; r < 2; r++)
        sched_init(&sc[r], FC_UINT8, FC_SUM, 2);
    sched_send(&sc[0], 1, 9, sbuf(R_SEND, 0), 16);
    sched_nop(&sc[1]);
    struct sim s;
    sim_init(&s, 2, 0, 1);
    add_all(&s, sc, 2);
    cr_assert_eq(sim_run(&s, A, B, G), -1);
    cr_assert(strstr(s.err, "never receives"), "%s", s.err);
    sim_free(&s);
}

/* rank 0 -> 1 -> 2, four chunks; rank 1 forwards chunk by chunk or after
 * the whole message */
static double relay(int chunked)
{
    const size_t C = 4096;
    struct sched sc[3];
    for (int r = 0; r < 3; r++)
        sched_init(&sc[r], FC_UINT8, FC_SUM, 3);
    sched_send(&sc[0], 1, 1, sbuf(R_SEND, 0), 4 * C);
    int rcv = sched_recv(&sc[1], 0, 1, sbuf(R_RECV, 0), 4 * C);
    int snd = sched_send(&sc[1], 2, 2, sbuf(R_RECV, 0), 4 * C);
    sched_dep(&sc[1], snd, rcv, chunked);
    sched_recv(&sc[2], 1, 2, sbuf(R_RECV, 0), 4 * C);
    struct sim s;
    sim_init(&s, 3, C, 4);
    add_all(&s, sc, 3);
    cr_assert_eq(sim_run(&s, A, B, G), 0, "%s", s.err);
    cr_assert_eq(s.max_msgs, 4, "4 chunks per sender, got %lu", (unsigned long)s.max_msgs);
    double end = s.end;
    sim_free(&s);
    return end;
}

Test(sim, chunks_pipeline_through_chunked_dependencies)
{
    const double Cb = 4096 * B;
    /* the first chunk crosses two hops, the three others follow one chunk
     * time apart */
    cr_assert_float_eq(relay(1), 2 * (A + Cb) + 3 * Cb, 1e-12);
    /* a full dependency forwards only after the whole message */
    cr_assert_float_eq(relay(0), 2 * (A + 4 * Cb), 1e-12);
}

static int simulate_chunked(const struct coll_algo *al, struct coll_args a, struct sim *s,
                            size_t chunk, int window)
{
    sim_init(s, a.nranks, chunk, window);
    for (int r = 0; r < a.nranks; r++) {
        struct sched sc;
        a.rank = r;
        sched_init(&sc, a.dt, a.op, a.nranks);
        fc_result_t rc = al->build(&sc, &a);
        cr_assert_eq(rc, FC_SUCCESS);
        cr_assert_eq(sc.build_err, FC_SUCCESS);
        int bad = sim_add(s, &sc);
        sched_release(&sc);
        if (bad)
            return -1;
    }
    return sim_run(s, A, B, G);
}

static int simulate(const struct coll_algo *al, struct coll_args a, struct sim *s)
{
    return simulate_chunked(al, a, s, 0, 1);
}

/* the v-collectives: uneven counts (count + j % 3, every fifth 0), packed;
 * alltoallv's the same row on every rank (a symmetric pattern by j only
 * would not be: rank i sends j what it expects from j, so use count flat) */
static size_t v_counts[4096], v_displs[4096];

static struct coll_args args_for(enum coll_kind k, int n, size_t count, int root)
{
    struct coll_args a = {.kind = k, .nranks = n, .root = root % n, .dt = FC_FLOAT32,
                          .op = FC_SUM, .esize = 4};
    a.count = k == COLL_BARRIER ? 0 : count;
    if (coll_is_v(k)) {
        cr_assert(n <= 4096);
        size_t at = 0;
        for (int j = 0; j < n; j++) {
            v_counts[j] = k == COLL_ALLTOALLV ? count : j % 5 == 4 ? 0 : count + (size_t)(j % 3);
            v_displs[j] = at;
            at += v_counts[j];
        }
        a.scounts = a.rcounts = v_counts;
        a.sdispls = a.rdispls = v_displs;
        a.count = k == COLL_ALLTOALLV ? at : v_counts[a.rank];
    }
    return a;
}

/* Every algorithm's schedules match message for message, at sizes the
 * loopback tests cannot reach with data. */
static void agree_at(int n)
{
    static const size_t counts[] = {1000, 0, 1};
    size_t ncounts = n > 100 ? 2 : 3;
    for (int i = 0; coll_algos[i]; i++) {
        const struct coll_algo *al = coll_algos[i];
        for (size_t c = 0; c < ncounts; c++) {
            struct coll_args a = args_for(al->kind, n, counts[c], n / 3 + (int)c);
            if (!al->check(&a))
                continue;
            struct sim s;
            int bad = simulate(al, a, &s);
            cr_assert_eq(bad, 0, "%s/%s n=%d count=%zu: %s", coll_kind_name(al->kind), al->name,
                         n, a.count, s.err);
            cr_assert_eq(s.done, s.nsteps);
            if (n > 1 && (a.count || al->kind == COLL_BARRIER))
                cr_assert_gt(s.end, 0.0, "%s/%s n=%d: no time passed", coll_kind_name(al->kind),
                             al->name, n);
            sim_free(&s);
        }
    }
}

/* Two link classes: a message between ranks of one node takes alpha_node
 * and beta_node; the node-aware allreduce matches message for message at
 * 64 nodes x 8 and on uneven nodes, and is faster than with one class when
 * the node's link is. */
Test(sim, two_link_classes)
{
    struct sched sc[2];
    for (int r = 0; r < 2; r++)
        sched_init(&sc[r], FC_UINT8, FC_SUM, 2);
    sched_send(&sc[0], 1, 7, sbuf(R_SEND, 0), 1000);
    sched_recv(&sc[1], 0, 7, sbuf(R_RECV, 0), 1000);
    static const int same[] = {0, 0};
    struct sim s;
    sim_init(&s, 2, 0, 1);
    s.node = same;
    s.alpha_node = A / 4;
    s.beta_node = B / 4;
    add_all(&s, sc, 2);
    cr_assert_eq(sim_run(&s, A, B, G), 0, "%s", s.err);
    cr_assert_float_eq(s.end, A / 4 + 1000 * B / 4, 1e-12);
    sim_free(&s);

    extern const struct coll_algo coll_allreduce_hier;
    static int big[512], uneven[] = {0, 0, 0, 1, 1, 2, 2, 2, 2, 3};
    for (int r = 0; r < 512; r++)
        big[r] = r / 8;
    struct {
        int *node, n, nnodes;
    } lay[] = {{big, 512, 64}, {uneven, 10, 4}};
    for (int li = 0; li < 2; li++) {
        struct coll_args a = args_for(COLL_ALLREDUCE, lay[li].n, 100003, 0);
        a.node = lay[li].node;
        a.nnodes = lay[li].nnodes;
        cr_assert(coll_allreduce_hier.check(&a));
        double t[2];
        for (int cls = 0; cls < 2; cls++) {
            sim_init(&s, a.nranks, 0, 1);
            s.node = cls ? a.node : NULL;
            s.alpha_node = A / 4;
            s.beta_node = B / 4;
            for (int r = 0; r < a.nranks; r++) {
                struct sched one;
                a.rank = r;
                sched_init(&one, a.dt, a.op, a.nranks);
                cr_assert_eq(coll_allreduce_hier.build(&one, &a), FC_SUCCESS);
                cr_assert_eq(sim_add(&s, &one), 0, "%s", s.err);
                sched_release(&one);
            }
            cr_assert_eq(sim_run(&s, A, B, G), 0, "n=%d: %s", a.nranks, s.err);
            cr_assert_eq(s.done, s.nsteps);
            t[cls] = s.end;
            sim_free(&s);
        }
        cr_assert_lt(t[1], t[0], "n=%d: %g s with a faster node link, %g s without",
                     a.nranks, t[1], t[0]);
    }
}

Test(sim, all_algorithms_agree_at_1_to_9_ranks)
{
    for (int n = 1; n <= 9; n++)
        agree_at(n);
}
Test(sim, all_algorithms_agree_at_33_and_64, .timeout = 300)
{
    agree_at(33);
    agree_at(64);
}
/* as long as 1024 ranks takes: under the sanitizers on 2 cores the two
 * together outlast one 300 s limit */
Test(sim, all_algorithms_agree_at_1000, .timeout = 600) { agree_at(1000); }
/* 4096 ranks is fc_sim's ceiling; the O(n)-step algorithms take about a
 * minute each there, so make check stops at 1024 (fc_sim -n 4096 goes on). */
Test(sim, all_algorithms_agree_at_1024, .timeout = 600) { agree_at(1024); }

/* The closed-form cost models describe the schedules they price: the
 * simulation of the real schedule lands near the model's prediction. */
static void model_close_c(const char *kind, const char *algo, int n, size_t count, double tol,
                          size_t chunk)
{
    enum coll_kind k = (enum coll_kind)coll_kind_from_name(kind, strlen(kind));
    const struct coll_algo *al = coll_algo_find(k, algo, strlen(algo));
    cr_assert_not_null(al);
    struct coll_args a = args_for(k, n, count, 0);
    struct sim s;
    cr_assert_eq(simulate_chunked(al, a, &s, chunk, 4), 0, "%s", s.err);
    struct coll_cost c = {.alpha = A, .beta = B, .gamma = G, .chunk = (double)chunk};
    double model = al->cost(&a, &c);
    cr_assert(fabs(s.end - model) <= tol * model,
              "%s/%s n=%d count=%zu: simulated %.3g us, model %.3g us (tolerance %.0f%%)", kind,
              algo, n, count, s.end * 1e6, model * 1e6, tol * 100);
    sim_free(&s);
}

static void model_close(const char *kind, const char *algo, int n, size_t count, double tol)
{
    model_close_c(kind, algo, n, count, tol, 0);
}

Test(sim, models_match_simulation)
{
    for (int n = 2; n <= 64; n *= 2) {
        model_close("allreduce", "ring", n, 1 << 20, 0.05);
        model_close("allreduce", "rd", n, 256, 0.05);
        model_close("allreduce", "rabenseifner", n, 1 << 20, 0.15);
        model_close("bcast", "binomial", n, 256, 0.05);
        model_close("allgather", "ring", n, 4096, 0.05);
        model_close("reduce_scatter", "ring", n, 4096, 0.05);
        model_close("barrier", "dissemination", n, 0, 0.05);
        /* pipelined: 16 chunks of 64 KiB */
        model_close_c("bcast", "chain", n, 1 << 18, 0.05, 65536);
    }
}

/* The tuner with the shm profile's cost parameters: small allreduces at
 * powers of two tie between gather and rd by a few bytes of beta, and the
 * tie is gather's (its tie_margin), while any real difference is not. */
Test(select, small_allreduce_ties_go_to_gather)
{
    extern const struct coll_algo coll_allreduce_gather, coll_allreduce_rd;
    struct coll_cost cc = {.alpha = 2e-6, .beta = 1.0 / 12e9, .gamma = 1.0 / 20e9};
    struct coll_tuning t;
    coll_tuning_init(&t, &cc);
    for (int n = 2; n <= 8; n++) {
        struct coll_args a = args_for(COLL_ALLREDUCE, n, 2, 0);
        cr_assert_eq(coll_select(&t, &a, NULL), &coll_allreduce_gather,
                     "8-byte allreduce at %d ranks: %s, not gather", n,
                     coll_select(&t, &a, NULL)->name);
        if (n == 4 || n == 8) /* rd predicts a hair less: the margin decides */
            cr_assert_lt(coll_allreduce_rd.cost(&a, &cc), coll_allreduce_gather.cost(&a, &cc));
    }
    struct coll_args a = args_for(COLL_ALLREDUCE, 4, 512, 0); /* 2 KiB: rd by 6% */
    cr_assert_eq(coll_select(&t, &a, NULL), &coll_allreduce_rd, "2 KiB at 4 ranks: %s",
                 coll_select(&t, &a, NULL)->name);
    a = args_for(COLL_ALLREDUCE, 4, 2 << 20, 0); /* 8 MiB: the margin is gather's alone */
    cr_assert_str_eq(coll_select(&t, &a, NULL)->name, "rabenseifner");
}

/* Ranks outnumbering CPUs (coll_cost.oversub, measured at init): with 2
 * ranks per CPU the shm profile's broadcast and reduce move from the
 * ring-based algorithms to the binomial tree where 4 ranks on a 2-core
 * VM measured the tree faster (fc_perf, 8-10 interleaved rounds, paired
 * medians: scatter_allgather 1.19-1.51x the tree's time at 256 KiB-1 MiB,
 * rsgather 1.23-2.27x at 64-256 KiB); without it nothing changes, and the
 * algorithms whose ranks all work in every step keep their order. */
Test(select, oversubscribed_ranks_prefer_trees)
{
    struct coll_cost cc = {.alpha = 2e-6, .beta = 1.0 / 12e9, .gamma = 1.0 / 20e9,
                           .chunk = 4 << 20};
    struct coll_tuning plain, over;
    coll_tuning_init(&plain, &cc);
    cc.oversub = 2;
    cc.handoff = COLL_HANDOFF_S;
    coll_tuning_init(&over, &cc);
    static const struct {
        enum coll_kind k;
        size_t bytes;
        const char *plain, *over;
    } want[] = {
        {COLL_BCAST, 256 << 10, "scatter_allgather", "binomial"},
        {COLL_BCAST, 1 << 20, "scatter_allgather", "binomial"},
        {COLL_REDUCE, 64 << 10, "rsgather", "binomial"},
        {COLL_REDUCE, 1 << 20, "rsgather", "binomial"},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        struct coll_args a = args_for(want[i].k, 4, want[i].bytes / 4, 0);
        const char *p = coll_select(&plain, &a, NULL)->name, *o = coll_select(&over, &a, NULL)->name;
        cr_expect_str_eq(p, want[i].plain, "%s %zu B, 4 ranks with CPUs: %s", coll_kind_name(want[i].k),
                         want[i].bytes, p);
        cr_expect_str_eq(o, want[i].over, "%s %zu B, 4 ranks on 2 CPUs: %s", coll_kind_name(want[i].k),
                         want[i].bytes, o);
    }
    /* a large broadcast still pipelines down the chain */
    struct coll_args a = args_for(COLL_BCAST, 4, 4 << 20, 0);
    cr_expect_str_eq(coll_select(&over, &a, NULL)->name, "chain");
    /* up to one rank per CPU is no oversubscription: the same predictions */
    cc.oversub = 1;
    struct coll_tuning one;
    coll_tuning_init(&one, &cc);
    for (int i = 0; coll_algos[i]; i++)
        for (int n = 2; n <= 16; n *= 2) {
            struct coll_args b = args_for(coll_algos[i]->kind, n, 1 << 16, 0);
            if (!coll_algos[i]->check(&b))
                continue;
            cr_assert_eq(coll_algo_cost(coll_algos[i], &b, &one.cost),
                         coll_algo_cost(coll_algos[i], &b, &plain.cost), "%s at %d ranks",
                         coll_algos[i]->name, n);
        }
    /* every-rank-works algorithms: k times the time, the same choice */
    for (int k = COLL_ALLREDUCE; k < COLL_NKINDS; k++) {
        if (k == COLL_BCAST || k == COLL_REDUCE)
            continue;
        for (size_t c = 2; c <= (4u << 20); c *= 8) {
            struct coll_args b = args_for((enum coll_kind)k, 8, k == COLL_BARRIER ? 0 : c, 0);
            double tp = 0, to = 0;
            const struct coll_algo *ap = coll_select_by_cost(&plain, &b, &tp);
            const struct coll_algo *ao = coll_select_by_cost(&over, &b, &to);
            cr_assert_eq(ap, ao, "%s of %zu elements: %s with CPUs, %s on half as many",
                         coll_kind_name((enum coll_kind)k), c, ap->name, ao->name);
            cr_assert_float_eq(to, 2 * tp, 1e-12 + 1e-9 * tp, "%s: %g vs %g",
                               coll_kind_name((enum coll_kind)k), to, tp);
        }
    }
}

/* The providers' own handshake past their eager sizes (coll_cost.hs_min,
 * prov/profile.c): each choice below was measured on a 2-core VM with the
 * algorithms forced, paired rounds, and the other choice was slower by the
 * factor given; without the handshake the tuner picked the other one in
 * all but the two cases that guard against overreach (24 KiB, one-way). */
Test(select, provider_handshakes_move_choices)
{
    struct coll_cost tcp = {.alpha = 15e-6, .beta = 1.0 / 5e9, .gamma = 1.0 / 20e9,
                            .chunk = 512 << 10, .hs_min = 16 << 10, .hs = 25e-6,
                            .hs_oneway = 25e-6};
    struct coll_cost shm = {.alpha = 2e-6, .beta = 1.0 / 12e9, .gamma = 1.0 / 20e9,
                            .chunk = 4 << 20, .hs_min = 4096, .hs = 3.3e-6};
    struct coll_cost shm2 = shm; /* 4 ranks on 2 CPUs */
    shm2.oversub = 2;
    shm2.handoff = COLL_HANDOFF_S;
    const struct {
        const struct coll_cost *c;
        enum coll_kind k;
        int n;
        size_t bytes;
        const char *want;
    } want[] = {
        /* rxm's rendezvous past 16 KiB: halves go eager (rd 1.5x) */
        {&tcp, COLL_ALLREDUCE, 2, 32 << 10, "ring"},
        {&tcp, COLL_ALLREDUCE, 4, 32 << 10, "rabenseifner"}, /* rd 1.8-2.0x */
        {&tcp, COLL_REDUCE, 2, 32 << 10, "rsgather"},         /* binomial 1.3x */
        {&tcp, COLL_BCAST, 2, 32 << 10, "scatter_allgather"}, /* binomial 1.85x */
        /* shm's CMA past 4 KiB, in exchanges: quarters stay inline (rd 1.6-1.8x) */
        {&shm2, COLL_ALLREDUCE, 4, 8 << 10, "rabenseifner"},
        /* ... but halves and quarters both past it cost twice (rab 1.25x) */
        {&shm2, COLL_ALLREDUCE, 4, 24 << 10, "rd"},
        {&shm, COLL_ALLREDUCE, 2, 128 << 10, "gather"}, /* ring 1.25x */
        /* a one-way message costs no more (SA 2.1x, rsgather 1.9x) */
        {&shm, COLL_BCAST, 2, 8 << 10, "binomial"},
        {&shm, COLL_REDUCE, 2, 128 << 10, "binomial"},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        struct coll_tuning t;
        coll_tuning_init(&t, want[i].c);
        size_t count = want[i].bytes / 4;
        if (want[i].k == COLL_ALLGATHER || want[i].k == COLL_REDUCE_SCATTER)
            count /= (size_t)want[i].n;
        struct coll_args a = args_for(want[i].k, want[i].n, count, 0);
        const char *got = coll_select(&t, &a, NULL)->name;
        cr_expect_str_eq(got, want[i].want, "%s %zu B at %d ranks (%s): %s, not %s",
                         coll_kind_name(want[i].k), want[i].bytes, want[i].n,
                         want[i].c == &tcp ? "tcp" : "shm", got, want[i].want);
    }
}

/* allreduce_gather's exchange is Bruck's allgather, message for message, so
 * the two costs carry the same handshakes: round 2^k sends min(2^k, n - 2^k)
 * vectors in one message, which passes the provider's size before a single
 * vector does (charging one vector's handshake per round would leave gather
 * free of them at 4 ranks, 3 KiB over shm). */
Test(select, gather_handshakes_are_bruck_rounds)
{
    extern const struct coll_algo coll_allreduce_gather, coll_allgather_bruck;
    struct coll_cost hs = {.alpha = 2e-6, .beta = 1.0 / 12e9, .gamma = 1.0 / 20e9,
                           .chunk = 4 << 20, .hs_min = 4096, .hs = 3.3e-6};
    struct coll_cost none = hs;
    none.hs_min = 0;
    for (int n = 2; n <= 17; n++) {
        for (size_t count = 64; count <= 4096; count *= 2) { /* 256 B .. 16 KiB */
            struct coll_args ar = args_for(COLL_ALLREDUCE, n, count, 0);
            struct coll_args ag = args_for(COLL_ALLGATHER, n, count, 0);
            double gather = coll_allreduce_gather.cost(&ar, &hs) - coll_allreduce_gather.cost(&ar, &none);
            double bruck = coll_allgather_bruck.cost(&ag, &hs) - coll_allgather_bruck.cost(&ag, &none);
            cr_assert_float_eq(gather, bruck, 1e-12, "%d ranks, %zu B: gather %g s, bruck %g s", n,
                               count * 4, gather, bruck);
        }
    }
    struct coll_args a = args_for(COLL_ALLREDUCE, 4, 768, 0); /* 3 KiB: round 2 sends 6 */
    cr_assert_float_eq(coll_allreduce_gather.cost(&a, &hs) - coll_allreduce_gather.cost(&a, &none),
                       3.3e-6, 1e-12);
}

/* Device tuning (coll_tuning.dev_gather_max, FC_TUNE_MEMORY): allreduces
 * whose n vectors fit go to gather, the fused device path's algorithm;
 * past the range, other collectives and FC_ALGO are as before. */
Test(select, device_tuning_gives_small_allreduces_to_gather)
{
    struct coll_cost cc = {.alpha = 2e-6, .beta = 1.0 / 12e9, .gamma = 1.0 / 20e9,
                           .chunk = 4 << 20, .hs_min = 4096, .hs = 3.3e-6};
    struct coll_tuning host, dev;
    coll_tuning_init(&host, &cc);
    dev = host;
    dev.dev_gather_max = 32 << 10;
    for (int n = 2; n <= 64; n *= 2) {
        for (size_t bytes = 8; bytes <= (size_t)(64 << 10); bytes *= 2) {
            struct coll_args a = args_for(COLL_ALLREDUCE, n, bytes / 4, 0);
            const char *why = NULL;
            const struct coll_algo *got = coll_select(&dev, &a, &why);
            if (bytes * (size_t)n <= (size_t)(32 << 10)) {
                cr_assert_str_eq(got->name, "gather", "%d ranks, %zu B: %s", n, bytes, got->name);
                cr_assert(strstr(why, "FC_TUNE_MEMORY"), "%s", why);
            } else {
                cr_assert_eq(got, coll_select(&host, &a, NULL), "%d ranks, %zu B", n, bytes);
                cr_assert_str_eq(why, "cost model");
            }
        }
    }
    struct coll_args a = args_for(COLL_ALLREDUCE, 4, 512, 0); /* 2 KiB */
    cr_assert_str_eq(coll_select(&host, &a, NULL)->name, "rd");
    a = args_for(COLL_ALLREDUCE, 65, 2, 0); /* gather takes at most 64 ranks */
    cr_assert_str_neq(coll_select(&dev, &a, NULL)->name, "gather");
    a = args_for(COLL_BCAST, 4, 512, 0);
    cr_assert_eq(coll_select(&dev, &a, NULL), coll_select(&host, &a, NULL));
    cr_assert_eq(coll_tuning_force(&dev, "allreduce:ring"), FC_SUCCESS);
    a = args_for(COLL_ALLREDUCE, 4, 512, 0);
    cr_assert_str_eq(coll_select(&dev, &a, NULL)->name, "ring");
}
