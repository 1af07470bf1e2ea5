/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Every algorithm of every collective, over the in-process loopback
 * transport: rank counts 1..33 and 64 exhaustively, and a sample at 128,
 * 1000 and 1024 ranks; counts 0, 1,
 * fewer than the ranks, not divisible by the ranks, and large; every
 * datatype and op; in place and out of place; one chunk and many chunks;
 * completions in order and shuffled.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "reduce.h"

static const fc_datatype_t all_dt[] = {FC_INT8,    FC_UINT8,    FC_INT32,   FC_UINT32,
                                       FC_INT64,   FC_UINT64,   FC_FLOAT16, FC_BFLOAT16,
                                       FC_FLOAT32, FC_FLOAT64};
static const fc_op_t all_op[] = {FC_SUM, FC_PROD, FC_MIN, FC_MAX, FC_AVG};

static int is_reduction(enum coll_kind k)
{
    return k == COLL_ALLREDUCE || k == COLL_REDUCE || k == COLL_REDUCE_SCATTER;
}

static int has_root(enum coll_kind k)
{
    return k == COLL_BCAST || k == COLL_REDUCE || k == COLL_GATHER || k == COLL_SCATTER;
}

static void run_one(const struct coll_algo *al, struct check_case *c)
{
    struct coll_args a = {.kind = c->kind, .rank = 0, .nranks = c->nranks, .root = c->root,
                          .count = c->count, .dt = c->dt, .op = c->op,
                          .esize = fc_datatype_size(c->dt), .in_place = c->in_place,
                          .node = c->node, .nnodes = c->nnodes};
    if (!al->check(&a))
        return;
    char err[600];
    int bad = check_coll(al, c, err, sizeof(err));
    cr_assert(!bad,
              "%s/%s n=%d count=%zu dt=%s op=%s root=%d in_place=%d chunk=%zu window=%d seed=%u "
              "async_local=%d ordered_sends=%d: %s",
              coll_kind_name(c->kind), al->name, c->nranks, c->count, reduce_dt_name(c->dt),
              reduce_op_name(c->op), c->root, c->in_place, c->opts.chunk, c->opts.window,
              c->opts.seed, c->opts.async_local, c->opts.ordered_sends, err);
}

/* counts: 0, 1, < n, not divisible by n, larger */
static size_t counts_for(int n, int i)
{
    switch (i) {
    case 0: return 0;
    case 1: return 1;
    case 2: return n > 1 ? (size_t)n - 1 : 2;
    case 3: return 3 * (size_t)n + 2;
    default: return 1000 + 7 * (size_t)n;
    }
}

/* All datatypes x ops x counts x in-place for n in 1..33 and 64, two
 * engine settings (one chunk; 64-byte chunks shuffled), and for a sample of
 * n two more (sends completing in posting order; local steps later). */
static void sweep_algo(const struct coll_algo *al)
{
    static const int ns[] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17,
                             18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 64};
    for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
        int n = ns[ni];
        for (int ci = 0; ci < 5; ci++) {
            for (size_t di = 0; di < 10; di++) {
                for (size_t oi = 0; oi < 5; oi++) {
                    if (!is_reduction(al->kind) && oi > 0)
                        break;
                    /* the large count on every type only for small n */
                    if (ci == 4 && n > 17 && di != 8)
                        continue;
                    for (int ip = 0; ip < 2; ip++) {
                        struct check_case c = {
                            .kind = al->kind, .nranks = n,
                            .root = has_root(al->kind) ? (int)((ci * 7 + di) % (size_t)n) : 0,
                            .in_place = ip, .count = counts_for(n, ci), .dt = all_dt[di],
                            .op = all_op[oi],
                        };
                        c.opts = (struct h_opts){.chunk = 0, .window = 2, .seed = 0};
                        run_one(al, &c);
                        c.opts = (struct h_opts){.chunk = 64, .window = 3,
                                                 .seed = (unsigned)(n * 31 + ci + 1)};
                        run_one(al, &c);
                        /* sends completing in posting order across peers,
                         * as on libfabric 1.17 shm, with many small chunks
                         * and a short window: a receive posted late can
                         * then hold up a rank's other sends */
                        if (n <= 9 || n == 16 || n == 33) {
                            c.opts = (struct h_opts){.chunk = 64, .window = 2,
                                                     .ordered_sends = 1};
                            run_one(al, &c);
                        }
                        /* local steps completing later and out of order, as
                         * on a GPU (a sample of rank counts) */
                        if (n <= 7 || n == 16) {
                            c.opts = (struct h_opts){.chunk = 128, .window = 2,
                                                     .seed = (unsigned)(n * 7 + ci + 3),
                                                     .async_local = 1};
                            run_one(al, &c);
                        }
                    }
                }
            }
        }
    }
}

static void sweep(const char *kind_name, const char *algo)
{
    int k = coll_kind_from_name(kind_name, strlen(kind_name));
    const struct coll_algo *al = coll_algo_find((enum coll_kind)k, algo, strlen(algo));
    cr_assert_not_null(al, "no algorithm %s/%s", kind_name, algo);
    sweep_algo(al);
}

/* make distcheck's second pass (FC_CHECK_QUICK=1) leaves out the runs at
 * 128+ ranks, which the full pass ran on the same sources. */
static void skip_when_quick(void)
{
    const char *q = getenv("FC_CHECK_QUICK");
    if (q && !strcmp(q, "1"))
        cr_skip_test("FC_CHECK_QUICK=1: the 128-1024-rank runs are in the full make check");
}

/* Big rank counts: a sample of counts, float32 sum and int32 max. */
static void big(const char *kind_name, const char *algo, int n)
{
    skip_when_quick();
    int k = coll_kind_from_name(kind_name, strlen(kind_name));
    const struct coll_algo *al = coll_algo_find((enum coll_kind)k, algo, strlen(algo));
    cr_assert_not_null(al);
    size_t cnts[] = {0, 1, (size_t)n - 1, (size_t)n * 2 + 1};
    if (coll_blocked(al->kind)) {
        /* buffers of n * count elements per rank, n of them: keep it small */
        size_t small[] = {0, 1, 2, 7};
        memcpy(cnts, small, sizeof(cnts));
    }
    for (size_t i = 0; i < 4; i++) {
        struct check_case c = {.kind = al->kind, .nranks = n, .root = (int)(i * 5) % n,
                               .in_place = (int)(i & 1), .count = cnts[i], .dt = FC_FLOAT32,
                               .op = FC_SUM};
        c.opts = (struct h_opts){.chunk = 256, .window = 2, .seed = (unsigned)i + 3};
        run_one(al, &c);
        c.dt = FC_INT32;
        c.op = FC_MAX;
        run_one(al, &c);
    }
}

/* A barrier: no rank may finish before the last one has started, whoever
 * is last, in any completion order. */
static void barrier_waits_for_everyone(const char *algo)
{
    const struct coll_algo *al = coll_algo_find(COLL_BARRIER, algo, strlen(algo));
    cr_assert_not_null(al);
    for (int n = 2; n <= 33; n++)
        for (int late = 0; late < n; late++)
            for (unsigned seed = 0; seed < 3; seed++) {
                struct coll_args a = {.kind = COLL_BARRIER, .nranks = n, .dt = FC_UINT8,
                                      .op = FC_SUM, .esize = 1};
                struct h_opts o = {.chunk = 0, .window = 2, .seed = seed};
                char err[300];
                int early = h_run_late(al, &a, late, &o, err, sizeof(err));
                cr_assert_eq(early, 0, "barrier/%s n=%d: %d ranks left before rank %d arrived "
                             "(seed %u) %s", algo, n, early, late, seed, err);
            }
}

Test(barrier, dissemination_waits_for_everyone, .timeout = 120)
{
    barrier_waits_for_everyone("dissemination");
}

/* The node-aware barrier, the same way, over nodes of 2 and 3 ranks in
 * order, interleaved, and uneven (the last node short). */
Test(barrier, hier_waits_for_everyone, .timeout = 120)
{
    const struct coll_algo *al = coll_algo_find(COLL_BARRIER, "hier", 4);
    cr_assert_not_null(al);
    int node[33];
    for (int n = 3; n <= 33; n++)
        for (int lay = 0; lay < 3; lay++) {
            const int per = lay == 1 ? 3 : 2, nnodes = (n + per - 1) / per;
            if (nnodes < 2)
                continue; /* one node: refused, as the layouts test checks */
            for (int q = 0; q < n; q++)
                node[q] = lay == 2 ? q % nnodes : q / per;
            for (int late = 0; late < n; late++)
                for (unsigned seed = 0; seed < 2; seed++) {
                    struct coll_args a = {.kind = COLL_BARRIER, .nranks = n, .dt = FC_UINT8,
                                          .op = FC_SUM, .esize = 1, .node = node,
                                          .nnodes = nnodes};
                    cr_assert(al->check(&a), "n=%d layout %d refused", n, lay);
                    struct h_opts o = {.chunk = 0, .window = 2, .seed = seed};
                    char err[300];
                    int early = h_run_late(al, &a, late, &o, err, sizeof(err));
                    cr_assert_eq(early, 0, "barrier/hier n=%d layout %d: %d ranks left before "
                                 "rank %d arrived (seed %u) %s", n, lay, early, late, seed, err);
                }
        }
}

#define ALGO_TESTS(kind, algo)                                                                 \
    Test(kind, algo##_sweep, .timeout = 300) { sweep(#kind, #algo); }                          \
    Test(kind, algo##_128, .timeout = 300) { big(#kind, #algo, 128); }                         \
    Test(kind, algo##_1000, .timeout = 300) { big(#kind, #algo, 1000); }                       \
    Test(kind, algo##_1024, .timeout = 300) { big(#kind, #algo, 1024); }

ALGO_TESTS(allreduce, ring)
ALGO_TESTS(allreduce, rd)
Test(allreduce, gather_sweep, .timeout = 300) { sweep("allreduce", "gather"); }
Test(allreduce, gather_64, .timeout = 300) { big("allreduce", "gather", 64); }

extern const struct coll_algo coll_allreduce_gather, coll_allreduce_gather_fused;

/* The fused form (what src/gpu/fused.c's transport runs), on the host
 * engine and on a transport that runs local steps late: every element. */
Test(allreduce, gather_fused_sweep, .timeout = 300) { sweep_algo(&coll_allreduce_gather_fused); }

/* Ranks on device buffers run gather's fused form while ranks on host
 * buffers run the whole algorithm: the messages (peer, tag, length, in
 * posting order) must be the same, rank for rank; and the fused form's
 * local steps are the two its kernel does: the own vector out first, one
 * reduction of all vectors last. */
Test(allreduce, gather_fused_sends_the_same_messages)
{
    for (int n = 2; n <= 64; n++)
        for (int r = 0; r < n; r++)
            for (int ip = 0; ip < 2; ip++) {
                struct coll_args a = {.kind = COLL_ALLREDUCE, .rank = r, .nranks = n,
                                      .count = 3, .dt = FC_FLOAT32, .op = FC_AVG, .esize = 4,
                                      .in_place = ip};
                struct sched full, fused;
                sched_init(&full, a.dt, a.op, n);
                sched_init(&fused, a.dt, a.op, n);
                cr_assert_eq(coll_allreduce_gather.build(&full, &a), FC_SUCCESS);
                cr_assert_eq(coll_allreduce_gather_fused.build(&fused, &a), FC_SUCCESS);
                uint32_t i = 0, j = 0, nmsg = 0;
                for (;;) {
                    while (i < full.nsteps && full.steps[i].op != SOP_SEND &&
                           full.steps[i].op != SOP_RECV)
                        i++;
                    while (j < fused.nsteps && fused.steps[j].op != SOP_SEND &&
                           fused.steps[j].op != SOP_RECV)
                        j++;
                    if (i == full.nsteps || j == fused.nsteps)
                        break;
                    const struct sched_step *x = &full.steps[i++], *y = &fused.steps[j++];
                    cr_assert(x->op == y->op && x->peer == y->peer && x->tag == y->tag &&
                                  x->len == y->len,
                              "n=%d rank %d message %u: %s to/from %d tag %u %zu B, fused: "
                              "%s %d tag %u %zu B",
                              n, r, nmsg, x->op == SOP_SEND ? "send" : "recv", x->peer, x->tag,
                              x->len, y->op == SOP_SEND ? "send" : "recv", y->peer, y->tag,
                              y->len);
                    nmsg++;
                }
                cr_assert(i == full.nsteps && j == fused.nsteps,
                          "n=%d rank %d: the two schedules have different message counts", n, r);
                cr_assert_eq(nmsg, 2u * (unsigned)ceil_log2(n), "n=%d: %u messages", n, nmsg);
                int ncopy = 0, nall = 0;
                for (uint32_t k = 0; k < fused.nsteps; k++) {
                    const struct sched_step *st = &fused.steps[k];
                    cr_assert(st->op != SOP_REDUCE && st->op != SOP_SCALE);
                    if (st->op == SOP_COPY) {
                        ncopy++;
                        cr_assert_eq(k, 0u, "n=%d: the own vector goes out first", n);
                        cr_assert_eq(st->a.region, ip ? R_RECV : R_SEND);
                    }
                    if (st->op == SOP_REDUCE_ALL) {
                        nall++;
                        cr_assert_eq(k, fused.nsteps - 1, "n=%d: the reduction comes last", n);
                        cr_assert_eq(st->peer, r);
                        cr_assert_eq(st->dst.region, R_RECV);
                    }
                }
                cr_assert(ncopy == 1 && nall == 1, "n=%d: %d copies, %d reductions", n, ncopy,
                          nall);
                sched_release(&full);
                sched_release(&fused);
            }
}

/* The node-aware algorithms over node layouts: even, uneven (3, 2, 4, 1),
 * interleaved, 1+2+2+2, 4+4 and 9+8; counts below and around the slices;
 * every type at a few layouts, every op; roots on every kind of node; in
 * place and not; one chunk and many, completions shuffled, local steps
 * late, sends inside a node completing in posting order. One node, a rank
 * per node and no map are refused. */
static void hier_layouts(const struct coll_algo *al)
{
    static const int l22[] = {0, 0, 1, 1}, l3241[] = {0, 0, 0, 1, 1, 2, 2, 2, 2, 3},
                     lint[] = {0, 1, 2, 0, 1, 2, 0}, l1222[] = {0, 1, 1, 2, 2, 3, 3},
                     l44[] = {1, 1, 1, 1, 0, 0, 0, 0},
                     l17[] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    static const struct {
        const int *node;
        int n, nnodes;
    } lay[] = {{l22, 4, 2}, {l3241, 10, 4}, {lint, 7, 3}, {l1222, 7, 4},
               {l44, 8, 2}, {l17, 17, 2}};
    static const int lone[] = {0, 1, 2}, lsame[] = {0, 0, 0};
    struct coll_args one = {.kind = al->kind, .nranks = 3, .count = 9, .dt = FC_FLOAT32,
                            .op = FC_SUM, .esize = 4, .node = lone, .nnodes = 3};
    cr_assert(!al->check(&one), "%s: a rank per node", al->name);
    one.node = lsame;
    one.nnodes = 1;
    cr_assert(!al->check(&one), "%s: one node", al->name);
    one.node = NULL;
    cr_assert(!al->check(&one), "%s: no node map", al->name);
    const int reduction = is_reduction(al->kind);
    for (size_t li = 0; li < sizeof(lay) / sizeof(lay[0]); li++) {
        const int n = lay[li].n;
        const size_t counts[] = {0, 1, 3, (size_t)n + 1, 1000 + 7 * (size_t)n};
        struct coll_args a = {.kind = al->kind, .nranks = n, .count = 1, .dt = FC_FLOAT32,
                              .op = FC_SUM, .esize = 4, .node = lay[li].node,
                              .nnodes = lay[li].nnodes};
        cr_assert(al->check(&a), "%s: layout %zu refused", al->name, li);
        for (size_t ci = 0; ci < 5; ci++)
            for (size_t di = 0; di < 10; di++)
                for (size_t oi = 0; oi < 5; oi++) {
                    if (!reduction && oi > 0)
                        break;
                    if (di != 8 && (oi > 0 || ci < 3 || li > 2))
                        continue; /* every type: sum, larger counts, first layouts */
                    for (int ip = 0; ip < 2; ip++) {
                        struct check_case c = {.kind = al->kind, .nranks = n,
                                               .root = has_root(al->kind)
                                                           ? (int)((ci * 5 + di + li) % (size_t)n)
                                                           : 0,
                                               .in_place = ip, .count = counts[ci],
                                               .dt = all_dt[di], .op = all_op[oi],
                                               .node = lay[li].node,
                                               .nnodes = lay[li].nnodes};
                        c.opts = (struct h_opts){.chunk = 0, .window = 2, .seed = 0};
                        run_one(al, &c);
                        c.opts = (struct h_opts){.chunk = 64, .window = 3,
                                                 .seed = (unsigned)(li * 31 + ci + 1)};
                        run_one(al, &c);
                        c.opts = (struct h_opts){.chunk = 128, .window = 2,
                                                 .seed = (unsigned)(li * 7 + ci + 3),
                                                 .async_local = 1};
                        run_one(al, &c);
                        /* the node's own sends complete in posting order,
                         * as on libfabric 1.17 shm under per-peer paths */
                        c.opts = (struct h_opts){.chunk = 64, .window = 2,
                                                 .ordered_sends = 1};
                        run_one(al, &c);
                    }
                }
    }
}

Test(allreduce, hier_over_node_layouts, .timeout = 300)
{
    extern const struct coll_algo coll_allreduce_hier;
    hier_layouts(&coll_allreduce_hier);
}

Test(bcast, hier_over_node_layouts, .timeout = 300)
{
    extern const struct coll_algo coll_bcast_hier;
    hier_layouts(&coll_bcast_hier);
}

Test(reduce, hier_over_node_layouts, .timeout = 300)
{
    extern const struct coll_algo coll_reduce_hier;
    hier_layouts(&coll_reduce_hier);
}

/* The node-aware algorithms at 64 nodes x 8 ranks and at 64 nodes of 1 to
 * 8 ranks (288), through big()'s counts, float32 sum and int32 max. */
static void hier_big(enum coll_kind k)
{
    const struct coll_algo *al = coll_algo_find(k, "hier", 4);
    cr_assert_not_null(al);
    static int even[512], uneven[288];
    for (int r = 0; r < 512; r++)
        even[r] = r / 8;
    for (int x = 0, r = 0; x < 64; x++)
        for (int i = 0; i <= x % 8; i++)
            uneven[r++] = x;
    const int *node[] = {even, uneven}, nr[] = {512, 288};
    for (int li = 0; li < 2; li++) {
        const int n = nr[li];
        size_t cnts[] = {0, 1, (size_t)n - 1, (size_t)n * 2 + 1};
        if (k == COLL_ALLGATHER || k == COLL_REDUCE_SCATTER) {
            size_t small[] = {0, 1, 2, 7};
            memcpy(cnts, small, sizeof(cnts));
        }
        for (size_t i = 0; i < 4; i++) {
            struct check_case c = {.kind = k, .nranks = n, .root = (int)(i * 37) % n,
                                   .in_place = (int)(i & 1), .count = cnts[i],
                                   .dt = FC_FLOAT32, .op = FC_SUM, .node = node[li],
                                   .nnodes = 64};
            c.opts = (struct h_opts){.chunk = 256, .window = 2, .seed = (unsigned)i + 3};
            run_one(al, &c);
            c.dt = FC_INT32;
            c.op = FC_MAX;
            run_one(al, &c);
        }
    }
}

/* hier allreduce's step across nodes takes a ring at few nodes or large
 * slices and a tree otherwise: both at 5, 6 and 9 nodes (uneven, odd
 * node counts), with slices just below, at and above the ring's threshold
 * (8 KiB per node of a slice), an odd count, every op on float32. */
Test(hier, allreduce_ring_and_tree_across_nodes, .timeout = 300)
{
    static int l5[10], l6[15], l9[18];
    for (int r = 0; r < 10; r++)
        l5[r] = r / 2; /* 5 nodes of 2 */
    for (int r = 0; r < 15; r++)
        l6[r] = r < 3 ? 0 : 1 + (r - 3) % 5 + (r >= 13); /* 3, then interleaved */
    for (int r = 0; r < 18; r++)
        l9[r] = r % 9; /* 9 nodes of 2, interleaved */
    static const struct {
        const int *node;
        int n, m;
    } lay[] = {{l5, 10, 5}, {l6, 15, 6}, {l9, 18, 9}};
    const struct coll_algo *al = coll_algo_find(COLL_ALLREDUCE, "hier", 4);
    cr_assert_not_null(al);
    for (size_t li = 0; li < 3; li++) {
        struct coll_nodes N;
        struct coll_args a = {.kind = COLL_ALLREDUCE, .nranks = lay[li].n, .count = 1,
                              .dt = FC_FLOAT32, .op = FC_SUM, .esize = 4,
                              .node = lay[li].node, .nnodes = lay[li].m};
        cr_assert_eq(coll_nodes_make(&a, &N), 0);
        const size_t lmax = (size_t)N.lmax, m = (size_t)lay[li].m;
        coll_nodes_free(&N);
        /* a slice of len bytes: len = count / lmax * 4; the ring from
         * m * 8192 bytes */
        const size_t at = lmax * m * 2048;
        const size_t cnts[] = {3, at - lmax - 1, at + 1, at * 2 + 7};
        for (size_t i = 0; i < 4; i++)
            for (int oi = 0; oi < 5; oi++) {
                struct check_case c = {.kind = COLL_ALLREDUCE, .nranks = lay[li].n,
                                       .in_place = (int)((i + (size_t)oi) & 1),
                                       .count = cnts[i], .dt = FC_FLOAT32, .op = all_op[oi],
                                       .node = lay[li].node, .nnodes = lay[li].m};
                c.opts = (struct h_opts){.chunk = i == 3 ? 8192 : 0, .window = 2,
                                         .seed = (unsigned)(li * 5 + i + 1)};
                run_one(al, &c);
            }
    }
}

Test(hier, allreduce_at_64_nodes, .timeout = 300) { hier_big(COLL_ALLREDUCE); }
Test(hier, bcast_at_64_nodes, .timeout = 300) { hier_big(COLL_BCAST); }
Test(hier, reduce_at_64_nodes, .timeout = 300) { hier_big(COLL_REDUCE); }
Test(hier, allgather_at_64_nodes, .timeout = 300) { hier_big(COLL_ALLGATHER); }
Test(hier, reduce_scatter_at_64_nodes, .timeout = 300) { hier_big(COLL_REDUCE_SCATTER); }
Test(hier, barrier_at_64_nodes, .timeout = 300) { hier_big(COLL_BARRIER); }

Test(allgather, hier_over_node_layouts, .timeout = 300)
{
    extern const struct coll_algo coll_allgather_hier;
    hier_layouts(&coll_allgather_hier);
}

Test(reduce_scatter, hier_over_node_layouts, .timeout = 300)
{
    extern const struct coll_algo coll_reduce_scatter_hier;
    hier_layouts(&coll_reduce_scatter_hier);
}

Test(barrier, hier_over_node_layouts, .timeout = 300)
{
    extern const struct coll_algo coll_barrier_hier;
    hier_layouts(&coll_barrier_hier);
}

ALGO_TESTS(bcast, binomial)
ALGO_TESTS(bcast, chain)
ALGO_TESTS(allreduce, rabenseifner)
ALGO_TESTS(bcast, scatter_allgather)
ALGO_TESTS(reduce, binomial)
ALGO_TESTS(reduce, rsgather)
ALGO_TESTS(allgather, ring)
ALGO_TESTS(allgather, rd)
ALGO_TESTS(allgather, bruck)
ALGO_TESTS(reduce_scatter, ring)
ALGO_TESTS(reduce_scatter, halving)
ALGO_TESTS(alltoall, pairwise)
ALGO_TESTS(alltoall, bruck)
ALGO_TESTS(barrier, dissemination)

/* Odd sizes around chunk boundaries: with the engine's chunk at 64 and 192
 * bytes (the smallest it cuts, and one that is not a power of two), counts
 * of chunk-1, chunk and chunk+1 elements, 2 chunks + 1, 7 chunks - 3, a
 * chunk per rank +- 1 (ring and halving blocks ending just either side of
 * a chunk boundary) and primes that cross many chunks; element sizes 1, 2,
 * 4 and 8; every algorithm of the collective at 1-9, 13, 16, 17 and 31
 * ranks, in place and out of place, completions shuffled (out of place)
 * or sends completing in posting order (in place), and again (up to 9
 * ranks and at 17) with local steps completing late, as on the GPU path.
 * check_coll checks every element and the guard bytes around every
 * buffer. About 15 s on 2 cores. */
static void odd_sizes(enum coll_kind kind)
{
    static const int ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 17, 31};
    /* element sizes 1, 2, 4, 8; int8 with max (another kernel's tail) */
    static const fc_datatype_t dts[] = {FC_INT8, FC_BFLOAT16, FC_FLOAT32, FC_FLOAT64};
    static const fc_op_t ops[] = {FC_MAX, FC_SUM, FC_SUM, FC_SUM};
    static const size_t chunks[] = {64, 192};
    static const size_t primes[] = {61, 127, 257, 1021};
    int nalgo = 0;
    for (int ai = 0; coll_algos[ai]; ai++) {
        const struct coll_algo *al = coll_algos[ai];
        if (al->kind != kind)
            continue;
        nalgo++;
        for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
            const int n = ns[ni];
            /* per-rank blocks: n * count elements on every rank */
            const int blocks = coll_blocked(kind);
            for (size_t di = 0; di < sizeof(dts) / sizeof(dts[0]); di++)
                for (size_t hi = 0; hi < sizeof(chunks) / sizeof(chunks[0]); hi++) {
                    const size_t es = fc_datatype_size(dts[di]), ce = chunks[hi] / es;
                    size_t cnt[16];
                    int nc = 0;
                    const size_t want[] = {ce - 1, ce, ce + 1, 2 * ce + 1, 7 * ce - 3,
                                           (size_t)n * ce - 1, (size_t)n * ce + 1};
                    for (size_t k = 0; k < sizeof(want) / sizeof(want[0]); k++)
                        cnt[nc++] = want[k];
                    /* the primes do not depend on the chunk: with the first only */
                    for (size_t k = 0; hi == 0 && k < sizeof(primes) / sizeof(primes[0]); k++)
                        if (!(blocks && n > 9 && primes[k] > 257))
                            cnt[nc++] = primes[k];
                    for (int ci = 0; ci < nc; ci++) {
                        int dup = 0;
                        for (int cj = 0; cj < ci; cj++)
                            dup |= cnt[cj] == cnt[ci];
                        if (dup)
                            continue;
                        for (int ip = 0; ip < 2; ip++) {
                            struct check_case c = {
                                .kind = kind, .nranks = n,
                                .root = has_root(kind) ? (int)((ci * 5 + di + ip) % (size_t)n) : 0,
                                .in_place = ip, .count = cnt[ci], .dt = dts[di],
                                .op = is_reduction(kind) ? ops[di] : FC_SUM,
                            };
                            c.opts = (struct h_opts){
                                .chunk = chunks[hi], .window = 2 + (ci & 1),
                                .seed = ip ? 0 : (unsigned)(n * 131 + ci * 7 + di + 1),
                                .ordered_sends = ip};
                            run_one(al, &c);
                            /* local steps completing later and out of order,
                             * as the GPU path's copies and kernels do */
                            if (n <= 9 || n == 17) {
                                c.opts = (struct h_opts){
                                    .chunk = chunks[hi], .window = 2,
                                    .seed = (unsigned)(n * 17 + ci * 3 + di + ip + 5),
                                    .async_local = 1};
                                run_one(al, &c);
                            }
                        }
                    }
                }
        }
    }
    cr_assert(nalgo > 0, "no algorithm of %s", coll_kind_name(kind));
}

Test(odd_sizes, allreduce, .timeout = 300) { odd_sizes(COLL_ALLREDUCE); }
Test(odd_sizes, bcast, .timeout = 300) { odd_sizes(COLL_BCAST); }
Test(odd_sizes, reduce, .timeout = 300) { odd_sizes(COLL_REDUCE); }
Test(odd_sizes, allgather, .timeout = 300) { odd_sizes(COLL_ALLGATHER); }
Test(odd_sizes, reduce_scatter, .timeout = 300) { odd_sizes(COLL_REDUCE_SCATTER); }
Test(odd_sizes, alltoall, .timeout = 300) { odd_sizes(COLL_ALLTOALL); }
Test(odd_sizes, gather, .timeout = 300) { odd_sizes(COLL_GATHER); }
Test(odd_sizes, scatter, .timeout = 300) { odd_sizes(COLL_SCATTER); }

/* coll_region_bytes (what a stream-ordered call stages for a host buffer)
 * bounds every byte each algorithm's schedule touches in R_SEND and R_RECV
 * on every rank, and a region it calls unused (0) is never touched. */
static void region_bound(const struct sched *s, const struct sched_buf *b, size_t len,
                         const size_t lim[R_NREGIONS], const struct coll_algo *al,
                         const struct coll_args *a, uint32_t step)
{
    if ((b->region != R_SEND && b->region != R_RECV) || len == 0)
        return;
    cr_assert(b->off + len <= lim[b->region],
              "%s/%s n=%d rank=%d root=%d count=%zu in_place=%d: step %u touches %s bytes "
              "%zu..%zu, past coll_region_bytes %zu",
              coll_kind_name(a->kind), al->name, a->nranks, a->rank, a->root, a->count,
              a->in_place, step, b->region == R_SEND ? "R_SEND" : "R_RECV", b->off,
              b->off + len, lim[b->region]);
    (void)s;
}

Test(algos, region_bytes_bound_every_step, .timeout = 300)
{
    static const int ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 16, 31, 64};
    for (int ai = 0; coll_algos[ai]; ai++) {
        const struct coll_algo *al = coll_algos[ai];
        if (al->kind == COLL_BARRIER)
            continue;
        for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++)
            for (int ci = 0; ci < 4; ci++)
                for (int ip = 0; ip < 2; ip++)
                    for (int rank = 0; rank < ns[ni]; rank++) {
                        int n = ns[ni];
                        struct coll_args a = {.kind = al->kind, .rank = rank, .nranks = n,
                                              .root = (ci * 3 + ip) % n,
                                              .count = counts_for(n, ci), .dt = FC_INT32,
                                              .op = FC_SUM, .esize = 4, .in_place = ip};
                        /* the v-collectives: uneven counts, some 0, packed
                         * (alltoallv: a symmetric matrix, so one row serves
                         * as both) */
                        size_t vc[64], vd[64];
                        if (coll_is_v(al->kind)) {
                            size_t at = 0;
                            for (int j = 0; j < n; j++) {
                                int m = al->kind == COLL_ALLTOALLV ? j + rank : j;
                                vc[j] = (m * 7 + ci) % 5 == 0 ? 0 : counts_for(n, ci) + (size_t)m;
                                vd[j] = at;
                                at += vc[j];
                            }
                            a.scounts = a.rcounts = vc;
                            a.sdispls = a.rdispls = vd;
                            a.count = al->kind == COLL_ALLTOALLV ? at : vc[rank];
                        }
                        if (!al->check(&a))
                            continue;
                        size_t lim[R_NREGIONS] = {0};
                        lim[R_SEND] = coll_region_bytes(&a, 0);
                        lim[R_RECV] = coll_region_bytes(&a, 1);
                        struct sched s;
                        sched_init(&s, a.dt, a.op, n);
                        cr_assert_eq(al->build(&s, &a), FC_SUCCESS, "%s/%s n=%d",
                                     coll_kind_name(a.kind), al->name, n);
                        for (uint32_t i = 0; i < s.nsteps; i++) {
                            const struct sched_step *st = &s.steps[i];
                            region_bound(&s, &st->dst, st->len, lim, al, &a, i);
                            region_bound(&s, &st->a, st->len, lim, al, &a, i);
                            region_bound(&s, &st->b, st->len, lim, al, &a, i);
                        }
                        sched_release(&s);
                    }
    }
}

/* ---- the v-collectives ---------------------------------------------------
 * Every algorithm at 1..33 and 64 ranks over count patterns that users
 * have: even, all 0, one rank 1000x the others with most counts 0, sparse
 * random, a single nonzero block (first rank, last rank); packed and
 * reversed-with-gaps displacements; in place (allgatherv); every datatype
 * on two patterns; one chunk and many, shuffled, sends in posting order,
 * local steps late. Every element checked, gaps and guards intact. */
static const char *const vpat_name[] = {"even", "zero", "skewed", "sparse", "first", "last"};
#define NVPAT 6

/* Pattern p's count of block b (allgatherv: rank b's; alltoallv: b = i*n+j). */
static size_t vpat(int p, int n, size_t b, unsigned seed, int a2a)
{
    switch (p) {
    case 0: return 3;
    case 1: return 0;
    case 2: { /* rank n/2's blocks 1000x, a few others 1, the rest 0 */
        size_t heavy = (size_t)(n / 2);
        size_t who = a2a ? b / (size_t)n : b;
        if (who == heavy)
            return 1000;
        return (b * 2654435761u + seed) % 5 == 0 ? 1 : 0;
    }
    case 3: { /* about half 0, the rest 1 .. 40 */
        unsigned x = (unsigned)(b * 2654435761u) ^ seed * 40503u;
        x ^= x >> 13;
        x *= 0x5bd1e995u;
        x ^= x >> 15;
        return x % 2 ? 0 : 1 + x % 40;
    }
    case 4: return b == 0 ? 777 : 0;
    default: return 0;
    }
}

static void vcoll_sweep(const char *kind_name, const char *algo)
{
    int k = coll_kind_from_name(kind_name, strlen(kind_name));
    const struct coll_algo *al = coll_algo_find((enum coll_kind)k, algo, strlen(algo));
    cr_assert_not_null(al, "no algorithm %s/%s", kind_name, algo);
    const int a2a = al->kind == COLL_ALLTOALLV;
    static const int ns[] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17,
                             18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 64};
    size_t *counts = malloc(sizeof(size_t) * 64 * 64);
    cr_assert_not_null(counts);
    for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
        const int n = ns[ni];
        const size_t nb = a2a ? (size_t)n * (size_t)n : (size_t)n;
        for (int p = 0; p < NVPAT; p++) {
            for (size_t b = 0; b < nb; b++)
                counts[b] = vpat(p, n, b, (unsigned)n, a2a);
            if (p == 5) /* only the last block */
                counts[nb - 1] = 555;
            for (size_t di = 0; di < 10; di++) {
                /* every type on even and sparse counts at small n; else
                 * float32, int8 and float64 */
                if (!(di == 8 || di == 0 || di == 9) && (n > 9 || (p != 0 && p != 3)))
                    continue;
                for (int ip = 0; ip < (a2a ? 1 : 2); ip++)
                    for (int lay = 0; lay < 2; lay++) {
                        struct check_vcase c = {.kind = al->kind, .nranks = n, .in_place = ip,
                                                .layout = lay, .counts = counts,
                                                .dt = all_dt[di]};
                        struct h_opts opts[4] = {
                            {.chunk = 0, .window = 2, .seed = 0},
                            {.chunk = 64, .window = 3, .seed = (unsigned)(n * 31 + p + 1)},
                            {.chunk = 64, .window = 2, .ordered_sends = 1},
                            {.chunk = 128, .window = 2, .seed = (unsigned)(n * 7 + p + 3),
                             .async_local = 1},
                        };
                        for (int o = 0; o < 4; o++) {
                            if (o >= 2 && (n > 9 || di != 8))
                                continue;
                            c.opts = opts[o];
                            char err[600];
                            int bad = check_vcoll(al, &c, err, sizeof(err));
                            cr_assert(!bad,
                                      "%s/%s n=%d counts %s dt=%s in_place=%d layout=%d "
                                      "chunk=%zu window=%d seed=%u ordered_sends=%d "
                                      "async_local=%d: %s",
                                      kind_name, algo, n, vpat_name[p], reduce_dt_name(c.dt), ip,
                                      lay, c.opts.chunk, c.opts.window, c.opts.seed,
                                      c.opts.ordered_sends, c.opts.async_local, err);
                        }
                    }
            }
        }
    }
    free(counts);
}

Test(allgatherv, ring_sweep, .timeout = 300) { vcoll_sweep("allgatherv", "ring"); }
Test(allgatherv, bruck_sweep, .timeout = 300) { vcoll_sweep("allgatherv", "bruck"); }
Test(alltoallv, pairwise_sweep, .timeout = 300) { vcoll_sweep("alltoallv", "pairwise"); }

/* The same counts, two rank counts far apart: 128 and 1000 ranks, skewed
 * and sparse (allgatherv; alltoallv's n x n matrix at 128 only). */
static void vcoll_big(const char *kind_name, const char *algo)
{
    skip_when_quick();
    int k = coll_kind_from_name(kind_name, strlen(kind_name));
    const struct coll_algo *al = coll_algo_find((enum coll_kind)k, algo, strlen(algo));
    cr_assert_not_null(al);
    const int a2a = al->kind == COLL_ALLTOALLV;
    static const int ns[] = {128, 1000};
    for (int ni = 0; ni < (a2a ? 1 : 2); ni++) {
        const int n = ns[ni];
        const size_t nb = a2a ? (size_t)n * (size_t)n : (size_t)n;
        size_t *counts = malloc(sizeof(size_t) * nb);
        cr_assert_not_null(counts);
        for (int p = 2; p <= 3; p++) {
            for (size_t b = 0; b < nb; b++)
                counts[b] = vpat(p, n, b, 99u, a2a);
            struct check_vcase c = {.kind = al->kind, .nranks = n, .layout = p == 3,
                                    .counts = counts, .dt = FC_FLOAT32,
                                    .opts = {.chunk = 256, .window = 2, .seed = (unsigned)p}};
            char err[600];
            int bad = check_vcoll(al, &c, err, sizeof(err));
            cr_assert(!bad, "%s/%s n=%d counts %s: %s", kind_name, algo, n, vpat_name[p], err);
        }
        free(counts);
    }
}

Test(allgatherv, ring_big, .timeout = 300) { vcoll_big("allgatherv", "ring"); }
Test(allgatherv, bruck_big, .timeout = 300) { vcoll_big("allgatherv", "bruck"); }
Test(alltoallv, pairwise_big, .timeout = 300) { vcoll_big("alltoallv", "pairwise"); }

/* ---- rank-order reductions (FC_REPRODUCIBLE) -------------------------------
 * The ordered algorithms through the standard sweep (exact inputs), and on
 * random floats whose sums depend on the order: every output byte equals
 * the rank-order chain ((v0 op v1) op v2) ... computed here with the same
 * kernels, for allreduce ordered and gather, reduce ordered at every root
 * and reduce_scatter ordered, at 1-9 ranks, odd counts, chunkings, engine
 * orderings, in place and not. */
ALGO_TESTS(allreduce, ordered)
Test(reduce, ordered_sweep, .timeout = 300) { sweep("reduce", "ordered"); }
Test(reduce_scatter, ordered_sweep, .timeout = 300) { sweep("reduce_scatter", "ordered"); }

static uint32_t lcg(uint32_t *x)
{
    *x = *x * 1664525u + 1013904223u;
    return *x >> 8;
}

/* element i of rank r: a float of either sign spanning 8 binades, stored in dt */
static void rand_fill(void *p, fc_datatype_t dt, int r, size_t n, uint32_t seed)
{
    uint32_t x = seed * 7919u + (uint32_t)r * 104729u + 1;
    for (size_t i = 0; i < n; i++) {
        float f = (float)(lcg(&x) % 100000) / 997.0f * (float)(1 << (lcg(&x) % 8));
        if (lcg(&x) & 1)
            f = -f;
        switch (dt) {
        case FC_FLOAT16: ((uint16_t *)p)[i] = reduce_float_to_half(f / 64); break;
        case FC_BFLOAT16: ((uint16_t *)p)[i] = reduce_float_to_bf16(f); break;
        case FC_FLOAT64: ((double *)p)[i] = (double)f * 1.0000001; break;
        default: ((float *)p)[i] = f; break;
        }
    }
}

static void rank_order_case(enum coll_kind kind, const char *algo, int n, size_t count,
                            fc_datatype_t dt, fc_op_t op, int root, int ip, struct h_opts o)
{
    const struct coll_algo *al = coll_algo_find(kind, algo, strlen(algo));
    cr_assert_not_null(al);
    const size_t es = fc_datatype_size(dt);
    /* inputs: allreduce/reduce count elements; reduce_scatter n blocks of count */
    const size_t nin = kind == COLL_REDUCE_SCATTER ? count * (size_t)n : count;
    char **in = calloc((size_t)n, sizeof(char *)), **sb = calloc((size_t)n, sizeof(char *));
    char **rb = calloc((size_t)n, sizeof(char *));
    char *ref = malloc(nin * es + 8);
    for (int r = 0; r < n; r++) {
        in[r] = malloc(nin * es + 8);
        rand_fill(in[r], dt, r, nin, (uint32_t)(count + (size_t)n));
    }
    /* the reference: the rank-order chain with the engine's own kernels */
    reduce_fn fn = reduce_fn_get(dt, op);
    memcpy(ref, in[0], nin * es);
    if (n > 1) {
        fn(ref, in[0], in[1], nin);
        for (int r = 2; r < n; r++)
            fn(ref, ref, in[r], nin);
    }
    if (op == FC_AVG)
        reduce_scale_get(dt)(ref, ref, nin, (uint32_t)n);
    for (int r = 0; r < n; r++) {
        const int use_recv = kind != COLL_REDUCE || r == root;
        size_t rl = kind == COLL_REDUCE_SCATTER ? count : nin;
        rb[r] = use_recv ? malloc((ip ? nin : rl) * es + 8) : NULL;
        if (ip && use_recv) {
            memcpy(rb[r], in[r], nin * es);
            sb[r] = rb[r];
            if (kind == COLL_REDUCE_SCATTER) { /* the result is block r of the input */
                sb[r] = rb[r];
                rb[r] = sb[r] + (size_t)r * count * es;
            }
        } else {
            sb[r] = malloc(nin * es + 8);
            memcpy(sb[r], in[r], nin * es);
        }
    }
    struct coll_args t = {.kind = kind, .nranks = n, .root = root, .count = count, .dt = dt,
                          .op = op, .esize = es, .in_place = ip};
    char err[512];
    fc_result_t rc = h_run(al, &t, (void **)sb, (void **)rb, &o, err, sizeof(err));
    cr_assert_eq(rc, FC_SUCCESS, "%s/%s n=%d: %s", coll_kind_name(kind), algo, n, err);
    for (int r = 0; r < n; r++) {
        const char *got = rb[r], *want = ref;
        size_t len = nin * es;
        if (kind == COLL_REDUCE && r != root)
            continue;
        if (kind == COLL_REDUCE_SCATTER) {
            want = ref + (size_t)r * count * es;
            len = count * es;
        }
        cr_assert(memcmp(got, want, len) == 0,
                  "%s/%s n=%d count=%zu %s %s root=%d in_place=%d chunk=%zu seed=%u: rank %d's "
                  "result differs from the rank-order chain",
                  coll_kind_name(kind), algo, n, count, reduce_dt_name(dt), reduce_op_name(op),
                  root, ip, o.chunk, o.seed, r);
    }
    for (int r = 0; r < n; r++) {
        int ipr = ip && (kind != COLL_REDUCE || r == root);
        free(in[r]);
        if (ipr)
            free(kind == COLL_REDUCE_SCATTER ? sb[r] : rb[r]);
        else {
            free(sb[r]);
            free(rb[r]);
        }
    }
    free(in);
    free(sb);
    free(rb);
    free(ref);
}

Test(reproducible, every_output_byte_is_the_rank_order_chain, .timeout = 300)
{
    static const fc_datatype_t dts[] = {FC_FLOAT32, FC_FLOAT16, FC_BFLOAT16, FC_FLOAT64};
    static const fc_op_t ops[] = {FC_SUM, FC_AVG, FC_PROD};
    const size_t counts[] = {1, 7, 1001, 4099};
    const struct h_opts opts[] = {{.chunk = 0, .window = 2},
                                  {.chunk = 64, .window = 3, .seed = 5},
                                  {.chunk = 192, .window = 2, .ordered_sends = 1},
                                  {.chunk = 128, .window = 2, .seed = 9, .async_local = 1}};
    for (int n = 1; n <= 9; n++)
        for (size_t ci = 0; ci < 4; ci++)
            for (size_t di = 0; di < 4; di++)
                for (size_t oi = 0; oi < 3; oi++) {
                    if (oi == 2 && di != 0)
                        continue;
                    for (int ip = 0; ip < 2; ip++)
                        for (size_t k = 0; k < 4; k++) {
                            struct h_opts o = opts[k];
                            size_t c = counts[ci];
                            rank_order_case(COLL_ALLREDUCE, "ordered", n, c, dts[di], ops[oi], 0,
                                            ip, o);
                            rank_order_case(COLL_ALLREDUCE, "gather", n, c, dts[di], ops[oi], 0,
                                            ip, o);
                            rank_order_case(COLL_REDUCE, "ordered", n, c, dts[di], ops[oi],
                                            (int)(ci + k) % n, ip, o);
                            rank_order_case(COLL_REDUCE_SCATTER, "ordered", n, c / 7 + 1,
                                            dts[di], ops[oi], 0, ip, o);
                        }
                }
}

/* Pre-scaled sums (fc_op_create_premulsum): every reduction algorithm built
 * as collective.c builds them (sched_premul_input: copies that scale,
 * reductions that scale an operand, sends that follow a scaled copy, or the
 * whole input scaled first in place), each rank's scalar 1 or 2, at 1-17,
 * 31, 33 and 64 ranks on nodes of two ranks (the node-aware algorithms
 * too); counts 0 to large, in place and out of place, one chunk and 64-byte
 * chunks shuffled, and local steps completing late up to 9 ranks; int8
 * (wrapping), bfloat16, float32 and float64 in turn. Every element and the
 * guards checked. */
Test(premul, every_reduction_algorithm, .timeout = 600)
{
    static const int ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 31, 33, 64};
    static const fc_datatype_t dts[] = {FC_FLOAT32, FC_INT8, FC_BFLOAT16, FC_FLOAT64};
    int node[64], runs = 0;
    for (int r = 0; r < 64; r++)
        node[r] = r / 2;
    for (int ai = 0; coll_algos[ai]; ai++) {
        const struct coll_algo *al = coll_algos[ai];
        if (!is_reduction(al->kind))
            continue;
        for (size_t ni = 0; ni < sizeof(ns) / sizeof(ns[0]); ni++) {
            const int n = ns[ni];
            for (int ci = 0; ci < 5; ci++)
                for (int ip = 0; ip < 2; ip++)
                    for (int e = 0; e < (n <= 9 ? 3 : 2); e++) {
                        struct check_case c = {
                            .kind = al->kind, .nranks = n, .root = (ci + 1) % n,
                            .in_place = ip, .count = counts_for(n, ci),
                            .dt = dts[(ni + (size_t)ci) % 4], .op = FC_SUM, .node = node,
                            .nnodes = (n + 1) / 2, .premul = 1,
                            .opts = {.chunk = e ? 64 : 0, .window = 4,
                                     .seed = e == 1 ? (unsigned)(n * 31 + ci) : 0,
                                     .async_local = e == 2},
                        };
                        run_one(al, &c);
                        runs++;
                    }
        }
    }
    cr_assert_gt(runs, 1000, "only %d cases ran", runs);
}
