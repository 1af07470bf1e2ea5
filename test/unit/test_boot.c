/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The TCP rendezvous: ranks (threads here) exchange blobs; strangers,
 * wrong secrets and silent connections are turned away without disturbing
 * the job; a rank that vanishes fails the session for everyone with a
 * message naming it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "boot.h"
#include "log.h"

struct job {
    int port, nranks, rounds;
    uint8_t secret[BOOT_SECRET_LEN];
    uint32_t session;
};

struct rank_arg {
    struct job *job;
    int rank;
    int vanish_after; /* close without BYE after this many rounds (-1: never) */
    fc_result_t rc;
    char err[1024];
    int ok;
};

static void *rank_main(void *p)
{
    struct rank_arg *a = p;
    struct boot *b = NULL;
    a->rc = boot_sock_connect("127.0.0.1", &a->job->port, 1, a->job->secret, a->job->session,
                              a->rank, a->job->nranks, 20.0, &b);
    if (a->rc != FC_SUCCESS) {
        snprintf(a->err, sizeof(a->err), "%s", err_get());
        return NULL;
    }
    a->ok = 1;
    for (int round = 0; round < a->job->rounds; round++) {
        if (round == a->vanish_after) {
            /* drop the connection without a goodbye, as if the process died:
             * white-box, the socket client begins with its base and fd */
            struct boot_sock_peek {
                struct boot base;
                int fd;
            } *bs = (void *)b;
            close(bs->fd);
            free(b);
            return NULL;
        }
        int blob[4] = {a->rank, round, a->rank * round, 0x5eed};
        int *all = calloc((size_t)a->job->nranks, sizeof(blob));
        a->rc = b->ops->allgather(b, blob, sizeof(blob), all);
        if (a->rc != FC_SUCCESS) {
            snprintf(a->err, sizeof(a->err), "%s", err_get());
            free(all);
            a->ok = 0;
            break;
        }
        for (int r = 0; r < a->job->nranks; r++)
            if (all[4 * r] != r || all[4 * r + 1] != round || all[4 * r + 2] != r * round)
                a->ok = 0;
        free(all);
    }
    b->ops->close(b);
    return NULL;
}

static void run_job(struct job *job, struct rank_arg *args)
{
    pthread_t th[64];
    for (int r = 0; r < job->nranks; r++) {
        args[r].job = job;
        args[r].rank = r;
        pthread_create(&th[r], NULL, rank_main, &args[r]);
    }
    for (int r = 0; r < job->nranks; r++)
        pthread_join(th[r], NULL);
}

static struct boot_server *start(struct job *job, double join_timeout)
{
    struct boot_server *sv = NULL;
    boot_random(job->secret, BOOT_SECRET_LEN);
    cr_assert_eq(boot_server_start(job->secret, NULL, 0, 0, join_timeout, &sv, &job->port),
                 FC_SUCCESS);
    return sv;
}

static int raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    return fd;
}

Test(boot, ranks_exchange_blobs)
{
    struct job job = {.nranks = 7, .rounds = 3};
    struct boot_server *sv = start(&job, 30);
    struct rank_arg args[7];
    memset(args, 0, sizeof(args));
    for (int r = 0; r < 7; r++)
        args[r].vanish_after = -1;
    run_job(&job, args);
    for (int r = 0; r < 7; r++)
        cr_assert(args[r].ok && args[r].rc == FC_SUCCESS, "rank %d: %s", r, args[r].err);
    boot_server_stop(sv);
}

Test(boot, strangers_do_not_disturb_the_job)
{
    struct job job = {.nranks = 4, .rounds = 2};
    struct boot_server *sv = start(&job, 30);
    /* garbage, an HTTP request, and a connection that says nothing */
    int g = raw_connect(job.port);
    char junk[200];
    memset(junk, 'A', sizeof(junk));
    cr_assert_eq(write(g, junk, sizeof(junk)), (ssize_t)sizeof(junk));
    int h = raw_connect(job.port);
    const char *get = "GET / HTTP/1.0\r\n\r\n";
    cr_assert_eq(write(h, get, strlen(get)), (ssize_t)strlen(get));
    int silent = raw_connect(job.port);
    /* a client with the wrong secret is refused */
    struct job wrong = job;
    wrong.secret[0] ^= 1;
    struct boot *b = NULL;
    fc_result_t rc = boot_sock_connect("127.0.0.1", &wrong.port, 1, wrong.secret, 0, 0, 4, 1.0, &b);
    cr_assert_neq(rc, FC_SUCCESS, "a wrong secret was accepted");
    /* the job still forms and works */
    struct rank_arg args[4];
    memset(args, 0, sizeof(args));
    for (int r = 0; r < 4; r++)
        args[r].vanish_after = -1;
    run_job(&job, args);
    for (int r = 0; r < 4; r++)
        cr_assert(args[r].ok && args[r].rc == FC_SUCCESS, "rank %d: %s", r, args[r].err);
    /* the strangers were shown the door */
    char c;
    cr_assert_eq(read(g, &c, 1), 0, "garbage connection still open");
    cr_assert_eq(read(h, &c, 1), 0, "http connection still open");
    close(g);
    close(h);
    close(silent);
    boot_server_stop(sv);
}

Test(boot, a_vanished_rank_fails_the_session_for_everyone)
{
    struct job job = {.nranks = 4, .rounds = 3};
    struct boot_server *sv = start(&job, 30);
    struct rank_arg args[4];
    memset(args, 0, sizeof(args));
    for (int r = 0; r < 4; r++)
        args[r].vanish_after = r == 2 ? 1 : -1;
    run_job(&job, args);
    for (int r = 0; r < 4; r++) {
        if (r == 2)
            continue;
        cr_assert_eq(args[r].rc, FC_ERR_BOOTSTRAP, "rank %d: %s", r, args[r].err);
        cr_assert(strstr(args[r].err, "rank 2") && strstr(args[r].err, "left"),
                  "rank %d's message does not name rank 2: %s", r, args[r].err);
    }
    boot_server_stop(sv);
}

Test(boot, inconsistent_nranks_is_an_error)
{
    struct job job = {.nranks = 3, .rounds = 1};
    struct boot_server *sv = start(&job, 30);
    struct rank_arg args[3];
    memset(args, 0, sizeof(args));
    for (int r = 0; r < 3; r++)
        args[r].vanish_after = -1;
    run_job(&job, args); /* a correct job first: session 0 */
    /* now rank 0 says 3 ranks, rank 1 says 5 (session 1) */
    job.session = 1;
    struct boot *b0 = NULL, *b1 = NULL;
    cr_assert_eq(boot_sock_connect("127.0.0.1", &job.port, 1, job.secret, 1, 0, 3, 5.0, &b0),
                 FC_SUCCESS);
    fc_result_t rc = boot_sock_connect("127.0.0.1", &job.port, 1, job.secret, 1, 1, 5, 5.0, &b1);
    cr_assert_eq(rc, FC_ERR_BOOTSTRAP);
    cr_assert(strstr(err_get(), "5 ranks"), "%s", err_get());
    int x = 1, all[3];
    rc = b0->ops->allgather(b0, &x, sizeof(x), all);
    cr_assert_neq(rc, FC_SUCCESS, "rank 0 was left waiting on a failed session");
    b0->ops->close(b0);
    boot_server_stop(sv);
}

Test(boot, missing_ranks_time_out_with_their_numbers)
{
    struct job job = {.nranks = 5, .rounds = 1};
    struct boot_server *sv = start(&job, 1.0); /* join timeout 1 s */
    struct boot *b = NULL;
    cr_assert_eq(boot_sock_connect("127.0.0.1", &job.port, 1, job.secret, 0, 3, 5, 5.0, &b),
                 FC_SUCCESS);
    int x = 3, all[5];
    fc_result_t rc = b->ops->allgather(b, &x, sizeof(x), all);
    cr_assert_eq(rc, FC_ERR_BOOTSTRAP);
    cr_assert(strstr(err_get(), "0,1,2,4") && strstr(err_get(), "did not join"), "%s",
              err_get());
    b->ops->close(b);
    boot_server_stop(sv);
}

Test(boot, hex)
{
    uint8_t in[32], out[32];
    char hex[65];
    for (int i = 0; i < 32; i++)
        in[i] = (uint8_t)(i * 37 + 1);
    cr_assert_eq(boot_hex_encode(in, 32, hex, sizeof(hex)), 0);
    cr_assert_eq(strlen(hex), 64);
    cr_assert_eq(boot_hex_decode(hex, out, 32), 0);
    cr_assert_arr_eq(in, out, 32);
    cr_assert_neq(boot_hex_decode("zz", out, 1), 0);
    cr_assert_neq(boot_hex_decode(hex, out, 31), 0);
    cr_assert_neq(boot_hex_encode(in, 32, hex, 64), 0);
}

/* The hang report's collector: reports with its token are kept, by rank;
 * a wrong token and a silent stranger are ignored; take waits for all n or
 * the grace, and takes them out. */
Test(boot, hang_report_collector)
{
    struct boot_collector *col = NULL;
    int port = 0;
    uint8_t token[BOOT_TOKEN_LEN];
    cr_assert_eq(boot_collector_start("127.0.0.1", &col, &port, token), FC_SUCCESS, "%s",
                 err_get());
    cr_assert(port > 0);
    /* a stranger that connects and says nothing holds the collector <= 1 s */
    int silent = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    cr_assert_eq(connect(silent, (struct sockaddr *)&a, sizeof(a)), 0);
    struct boot_report r;
    memset(&r, 0, sizeof(r));
    r.magic = BOOT_REPORT_MAGIC;
    r.comm_id = 7;
    r.nranks = 3;
    r.seq = 42;
    /* the wrong token: ignored */
    memset(r.token, 0xab, sizeof(r.token));
    r.rank = 2;
    cr_assert_eq(boot_report_send("127.0.0.1", port, &r, 2.0), 0);
    memcpy(r.token, token, sizeof(r.token));
    for (int q = 0; q < 2; q++) {
        r.rank = q;
        r.nwait = 1;
        r.wait[0] = 2;
        snprintf(r.desc, sizeof(r.desc), "allreduce #42 from %d", q);
        cr_assert_eq(boot_report_send("127.0.0.1", port, &r, 2.0), 0);
    }
    struct boot_report out[3];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int got = boot_collector_take(col, 7, 3, 2.5, out);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double dt = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    cr_assert_eq(got, 2, "%d reports kept (the wrong token's must not count)", got);
    cr_assert(dt > 2.0 && dt < 5.0, "took %.2f s: it waits the grace for the missing rank", dt);
    cr_assert_eq(out[0].rank, 0);
    cr_assert_str_eq(out[1].desc, "allreduce #42 from 1");
    cr_assert_eq(out[2].magic, 0u, "rank 2 sent nothing with the right token");
    /* taken out: a second take finds none, at once when all are in */
    cr_assert_eq(boot_collector_take(col, 7, 3, 0.2, out), 0);
    r.nranks = 1;
    r.rank = 0;
    r.comm_id = 8;
    cr_assert_eq(boot_report_send("127.0.0.1", port, &r, 2.0), 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cr_assert_eq(boot_collector_take(col, 8, 1, 5.0, out), 1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    dt = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    cr_assert(dt < 2.0, "all in: no wait for the grace (%.2f s)", dt);
    close(silent);
    boot_collector_stop(col);
}
