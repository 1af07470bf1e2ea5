/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The request layer (collective.c, request.c, rcache.c) over the in-process
 * loopback: communicators of 1-5 ranks in one process, each with a family of
 * its own (struct comm_shared) on one loopback fabric, driven by comm_test
 * in turn (one thread plays every rank). Checks that calls complete with
 * the right bytes, that a repeated call reuses its schedule and a different
 * one does not, that a request without progress times out naming the rank
 * it waits for and breaks its communicator, and that the first reason to
 * break one holds. And per-peer paths (paths.c) under the request layer:
 * each peer's messages on its node's fabric or the network's, no other.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "log.h"
#include "paths.h"
#include "transport_loop.h"

#define MAXR 5

struct world {
    int n;
    struct loop_fabric *f;
    struct comm_shared sh[MAXR];
    struct fc_comm c[MAXR];
};

static void world_init(struct world *w, int n, double timeout)
{
    memset(w, 0, sizeof(*w));
    w->n = n;
    w->f = loop_fabric_create(n, 7);
    cr_assert_not_null(w->f);
    struct coll_cost cc;
    int window = 0;
    comm_cost_params("shm", 1, &cc, &window);
    for (int r = 0; r < n; r++) {
        struct comm_shared *sh = &w->sh[r];
        pthread_mutex_init(&sh->lock, NULL);
        pthread_mutex_init(&sh->launch_lock, NULL);
        pthread_cond_init(&sh->cond, NULL);
        sh->refs = 1;
        sh->dev = &comm_host_only;
        sh->tp = sh->ptp = loop_transport(w->f, r);
        sh->nworld = n;
        struct fc_comm *c = &w->c[r];
        c->sh = sh;
        c->rank = r;
        c->size = n;
        c->peers = calloc((size_t)n, sizeof(int));
        cr_assert_not_null(c->peers);
        for (int q = 0; q < n; q++)
            c->peers[q] = q;
        c->cfg.timeout = timeout;
        c->cfg.spin = 1;
        c->chunk = 4096; /* messages of many chunks */
        c->window = window > 0 ? window : 4;
        c->gpu_device = -1;
        coll_tuning_init(&c->tuning, &cc);
    }
}

static void world_fini(struct world *w)
{
    /* requests first: their scratch goes back to the transport; the
     * fabric calls nothing back when it is destroyed after them */
    for (int r = 0; r < w->n; r++) {
        struct fc_comm *c = &w->c[r];
        for (struct fc_request *q; (q = comm_rcache_pop(c));)
            comm_request_free(q);
        while (w->sh[r].zombies) {
            struct fc_request *z = w->sh[r].zombies;
            w->sh[r].zombies = z->next;
            comm_request_free(z);
        }
        free(c->peers);
        pthread_mutex_destroy(&w->sh[r].lock);
        pthread_mutex_destroy(&w->sh[r].launch_lock);
        pthread_cond_destroy(&w->sh[r].cond);
    }
    loop_fabric_destroy(w->f);
}

static struct coll_args allreduce_args(const struct fc_comm *c, size_t count)
{
    return (struct coll_args){.kind = COLL_ALLREDUCE, .rank = c->rank, .nranks = c->size,
                              .count = count, .dt = FC_FLOAT32, .op = FC_SUM, .esize = 4};
}

/* Runs rank r's requests by comm_test in turn until all are done; every
 * result must be FC_SUCCESS. */
static void drive(struct world *w, struct fc_request **req)
{
    int left = w->n;
    int done[MAXR] = {0};
    for (long spins = 0; left > 0; spins++) {
        cr_assert_lt(spins, 10000000L, "the requests made no progress");
        for (int r = 0; r < w->n; r++) {
            if (done[r])
                continue;
            int d = 0;
            fc_result_t rc = comm_test(req[r], &d);
            cr_assert_eq(rc, FC_SUCCESS, "rank %d: %s", r, err_get());
            if (d) {
                done[r] = 1;
                left--;
            }
        }
    }
}

/* An allreduce of count floats at every rank; checks every element. */
static void allreduce_once(struct world *w, size_t count, struct fc_request **started)
{
    float *in[MAXR], *out[MAXR];
    struct fc_request *req[MAXR];
    for (int r = 0; r < w->n; r++) {
        in[r] = malloc((count ? count : 1) * sizeof(float));
        out[r] = malloc((count ? count : 1) * sizeof(float));
        cr_assert(in[r] && out[r]);
        for (size_t i = 0; i < count; i++)
            in[r][i] = (float)((i % 97) + 1000 * r);
        memset(out[r], 0xff, count * sizeof(float));
    }
    for (int r = 0; r < w->n; r++) {
        struct coll_args a = allreduce_args(&w->c[r], count);
        cr_assert_eq(comm_collective(&w->c[r], &a, COMM_NONBLOCKING, in[r], out[r], &req[r]),
                     FC_SUCCESS, "%s", err_get());
        if (started)
            started[r] = req[r];
    }
    drive(w, req);
    float base = 0;
    for (int r = 0; r < w->n; r++)
        base += (float)(1000 * r);
    for (int r = 0; r < w->n; r++) {
        for (size_t i = 0; i < count; i++)
            cr_assert_eq(out[r][i], (float)w->n * (float)((i % 97)) + base,
                         "rank %d element %zu of %zu: %g", r, i, count, out[r][i]);
        free(in[r]);
        free(out[r]);
    }
}

Test(request, collectives_complete_with_every_element_right)
{
    const size_t counts[] = {0, 1, 7, 1023, 1025, 4099, 100003};
    for (int n = 1; n <= MAXR; n++) {
        struct world w;
        world_init(&w, n, 30);
        for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++)
            allreduce_once(&w, counts[k], NULL);
        cr_assert_eq(loop_fabric_pending(w.f), 0, "%d ranks: messages left unmatched", n);
        world_fini(&w);
    }
}

Test(request, a_repeated_call_reuses_its_schedule)
{
    struct world w;
    world_init(&w, 3, 30);
    struct fc_request *first[MAXR], *again[MAXR], *other[MAXR];
    allreduce_once(&w, 1000, first);
    for (int r = 0; r < 3; r++)
        cr_assert_eq(w.c[r].nrcache, 1, "rank %d kept %d schedules", r, w.c[r].nrcache);
    allreduce_once(&w, 1000, again);
    for (int r = 0; r < 3; r++)
        cr_assert_eq(again[r], first[r], "rank %d built the same call anew", r);
    allreduce_once(&w, 1001, other); /* another call: built, and kept beside */
    for (int r = 0; r < 3; r++) {
        cr_assert_neq(other[r], first[r]);
        cr_assert_eq(w.c[r].nrcache, 2);
    }
    /* beyond COMM_RCACHE_MAX_BYTES nothing is kept */
    allreduce_once(&w, COMM_RCACHE_MAX_BYTES / 4 + 1, NULL);
    for (int r = 0; r < 3; r++)
        cr_assert_eq(w.c[r].nrcache, 2);
    /* at most COMM_RCACHE: the oldest goes */
    for (size_t k = 0; k < COMM_RCACHE + 2; k++)
        allreduce_once(&w, 10 + k, NULL);
    for (int r = 0; r < 3; r++)
        cr_assert_eq(w.c[r].nrcache, COMM_RCACHE);
    world_fini(&w);
}

Test(request, no_progress_times_out_naming_the_rank_and_breaks_the_comm, .timeout = 60)
{
    struct world w;
    world_init(&w, 2, 0.3);
    /* rank 0 enters a broadcast from rank 1, which never comes */
    float buf[64];
    struct coll_args a = {.kind = COLL_BCAST, .rank = 0, .nranks = 2, .root = 1, .count = 64,
                          .dt = FC_FLOAT32, .op = FC_SUM, .esize = 4};
    struct fc_request *r = NULL;
    cr_assert_eq(comm_collective(&w.c[0], &a, COMM_BLOCKING, NULL, buf, &r), FC_SUCCESS, "%s",
                 err_get());
    double t0 = comm_now();
    fc_result_t rc = comm_wait(r);
    double took = comm_now() - t0;
    cr_assert_eq(rc, FC_ERR_TIMEOUT, "%s", err_get());
    cr_assert_geq(took, 0.25, "timed out after %.3f s of a 0.3 s FC_TIMEOUT", took);
    cr_assert_lt(took, 20);
    const char *msg = err_get();
    cr_assert(strstr(msg, "FC_TIMEOUT") && strstr(msg, "rank 1"), "message: %s", msg);
    cr_assert_neq(w.c[0].broken, FC_SUCCESS);
    /* every later call fails at once, with the first reason */
    struct coll_args b = allreduce_args(&w.c[0], 4);
    float x[4] = {0};
    t0 = comm_now();
    cr_assert_eq(comm_collective(&w.c[0], &b, COMM_BLOCKING, x, x, &r), FC_ERR_TIMEOUT);
    cr_assert_lt(comm_now() - t0, 0.1);
    cr_assert(strstr(err_get(), "unusable"), "message: %s", err_get());
    world_fini(&w);
}

Test(request, the_first_reason_to_break_holds)
{
    struct world w;
    world_init(&w, 1, 30);
    cr_assert_eq(comm_break(&w.c[0], FC_SUCCESS, "not a failure"), 0);
    cr_assert_eq(w.c[0].broken, FC_SUCCESS);
    cr_assert_eq(comm_break(&w.c[0], FC_ERR_SYSTEM, "first %d", 1), 1);
    cr_assert_eq(comm_break(&w.c[0], FC_ERR_TIMEOUT, "second"), 0);
    cr_assert_eq(w.c[0].broken, FC_ERR_SYSTEM);
    cr_assert_str_eq(w.c[0].brokenmsg, "first 1");
    world_fini(&w);
}

Test(request, a_request_is_described_by_its_call)
{
    struct world w;
    world_init(&w, 2, 30);
    struct fc_request *r[MAXR];
    float in[2][10] = {{0}}, out[2][10];
    for (int q = 0; q < 2; q++) {
        struct coll_args a = allreduce_args(&w.c[q], 10);
        cr_assert_eq(comm_collective(&w.c[q], &a, COMM_NONBLOCKING, in[q], out[q], &r[q]),
                     FC_SUCCESS);
    }
    const char *d = comm_request_desc(r[0]);
    cr_assert(strstr(d, "allreduce #0") && strstr(d, "10 x float32"), "description: %s", d);
    drive(&w, r);
    world_fini(&w);
}

/* Per-peer paths: each rank's family transport is the paths over a
 * "network" loopback and a "node" one; ranks of one node (node[]) must
 * exchange every message on the node fabric, all others on the network,
 * for every algorithm the tuner picks from 8 bytes to many chunks, uneven
 * nodes included, and the results must be right. */
static void paths_case(int n, const int *node)
{
    struct world w;
    world_init(&w, n, 30);
    struct loop_fabric *local = loop_fabric_create(n, 11);
    cr_assert_not_null(local);
    struct paths *p[MAXR];
    for (int r = 0; r < n; r++) {
        unsigned char mine[MAXR];
        for (int q = 0; q < n; q++)
            mine[q] = q != r && node[q] == node[r];
        cr_assert_eq(paths_create(loop_transport(w.f, r), loop_transport(local, r), n, mine,
                                  &p[r]),
                     FC_SUCCESS);
        w.sh[r].tp = w.sh[r].ptp = paths_transport(p[r]);
    }
    static const size_t counts[] = {2, 1001, 40000};
    for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
        allreduce_once(&w, counts[i], NULL);
    uint64_t on_node = 0, across = 0;
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            uint64_t ln = loop_fabric_pair_msgs(local, a, b);
            uint64_t nt = loop_fabric_pair_msgs(w.f, a, b);
            if (node[a] == node[b])
                cr_assert_eq(nt, 0, "ranks %d and %d share node %d, yet %llu messages took the "
                             "network", a, b, node[a], (unsigned long long)nt);
            else
                cr_assert_eq(ln, 0, "ranks %d (node %d) and %d (node %d): %llu messages on "
                             "the node fabric", a, node[a], b, node[b],
                             (unsigned long long)ln);
            on_node += ln;
            across += nt;
        }
    int shared = 0, split = 0;
    for (int a = 0; a < n; a++)
        for (int b = 0; b < n; b++) {
            shared |= a != b && node[a] == node[b];
            split |= node[a] != node[b];
        }
    cr_assert(!shared || on_node > 0, "no message took the node fabric");
    cr_assert(!split || across > 0, "no message took the network");
    for (int r = 0; r < n; r++)
        w.sh[r].tp = w.sh[r].ptp = loop_transport(w.f, r);
    world_fini(&w);
    for (int r = 0; r < n; r++)
        paths_destroy(p[r]);
    loop_fabric_destroy(local);
}

Test(paths, each_peer_takes_its_nodes_path)
{
    paths_case(4, (const int[]){0, 0, 1, 1});
    paths_case(5, (const int[]){0, 0, 0, 1, 1}); /* uneven */
    paths_case(5, (const int[]){0, 1, 0, 2, 1}); /* interleaved, one alone */
    paths_case(3, (const int[]){0, 1, 2});       /* one rank per node */
}
