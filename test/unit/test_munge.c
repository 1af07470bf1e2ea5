/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The MUNGE-authenticated rendezvous (plain srun's): ranks of this user get
 * in; a client of another user is refused and told why; a listener of
 * another user on one of the job's ports (a squatter) is detected, gets
 * nothing of the job, and the ranks go on to the real rendezvous; a
 * credential is good for one connection and one decode only.
 *
 * Needs munged (contrib/ci/slurm-up.sh starts one). Without it every test
 * skips, saying so, unless FC_TEST_MUNGE=require (the launcher tests set it:
 * munged runs there). "Another user" is nobody (uid 65534), which needs
 * root; without root those tests skip, saying so.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "boot.h"
#include "log.h"
#include "sock_int.h"

#define NOBODY 65534

static struct boot_auth auth;

static void need_munge(void)
{
    fc_result_t rc = boot_auth_open(NULL, "fabcoll-test.0:0:0", &auth);
    if (rc == FC_SUCCESS)
        return;
    const char *req = getenv("FC_TEST_MUNGE");
    if (req && !strcmp(req, "require"))
        cr_assert_fail("FC_TEST_MUNGE=require, but MUNGE is not usable: %s", err_get());
    cr_skip_test("MUNGE is not usable here (%s); contrib/ci/slurm-up.sh starts munged",
                 err_get());
}

static void need_root(void)
{
    if (geteuid() != 0)
        cr_skip_test("acting as another user (nobody) needs root; running as uid %u",
                     (unsigned)geteuid());
}

struct rank_arg {
    int port, nranks, rank;
    uint8_t secret[BOOT_SECRET_LEN];
    int ok;
    char err[1024];
};

static void *rank_main(void *p)
{
    struct rank_arg *a = p;
    struct boot *b = NULL;
    if (boot_sock_connect_auth("127.0.0.1", &a->port, 1, a->secret, &auth, 0, a->rank,
                               a->nranks, 20.0, &b) != FC_SUCCESS) {
        snprintf(a->err, sizeof(a->err), "%s", err_get());
        return NULL;
    }
    int mine = 100 + a->rank, all[8];
    if (b->ops->allgather(b, &mine, sizeof(mine), all) == FC_SUCCESS) {
        a->ok = 1;
        for (int r = 0; r < a->nranks; r++)
            a->ok &= all[r] == 100 + r;
    } else {
        snprintf(a->err, sizeof(a->err), "%s", err_get());
    }
    b->ops->close(b);
    return NULL;
}

/* nranks threads of this user through the rendezvous at port */
static void run_ranks(int port, const uint8_t *secret, int nranks)
{
    struct rank_arg args[8];
    pthread_t th[8];
    for (int r = 0; r < nranks; r++) {
        memset(&args[r], 0, sizeof(args[r]));
        args[r].port = port;
        args[r].nranks = nranks;
        args[r].rank = r;
        memcpy(args[r].secret, secret, BOOT_SECRET_LEN);
        pthread_create(&th[r], NULL, rank_main, &args[r]);
    }
    for (int r = 0; r < nranks; r++) {
        pthread_join(th[r], NULL);
        cr_assert(args[r].ok, "rank %d: %s", r, args[r].err);
    }
}

static struct boot_server *serve(uint8_t *secret, int *port)
{
    struct boot_server *sv = NULL;
    boot_random(secret, BOOT_SECRET_LEN);
    cr_assert_eq(boot_server_start_auth(secret, &auth, "127.0.0.1", 0, 0, 30, &sv, port),
                 FC_SUCCESS, "%s", err_get());
    return sv;
}

static void become_nobody(void)
{
    if (setgroups(0, NULL) != 0 || setgid(NOBODY) != 0 || setuid(NOBODY) != 0)
        _exit(99);
}

Test(munge, ranks_of_the_user_get_in)
{
    need_munge();
    uint8_t secret[BOOT_SECRET_LEN];
    int port;
    struct boot_server *sv = serve(secret, &port);
    run_ranks(port, secret, 4);
    boot_server_stop(sv);
}

Test(munge, another_users_client_is_refused)
{
    need_munge();
    need_root();
    uint8_t secret[BOOT_SECRET_LEN];
    int port;
    struct boot_server *sv = serve(secret, &port);
    int pfd[2];
    cr_assert_eq(pipe(pfd), 0);
    pid_t pid = fork();
    if (pid == 0) {
        /* knows everything anyone can derive: the key, the port, even the
         * secret; only its uid is wrong */
        close(pfd[0]);
        become_nobody();
        struct boot *b = NULL;
        fc_result_t rc = boot_sock_connect_auth("127.0.0.1", &port, 1, secret, &auth, 0, 1, 2,
                                                2.0, &b);
        const char *e = rc == FC_SUCCESS ? "JOINED" : err_get();
        if (write(pfd[1], e, strlen(e)) < 0)
            _exit(2);
        _exit(0);
    }
    close(pfd[1]);
    char msg[2048] = "";
    ssize_t n, got = 0;
    while ((n = read(pfd[0], msg + got, sizeof(msg) - 1 - (size_t)got)) > 0)
        got += n;
    msg[got > 0 ? got : 0] = '\0';
    close(pfd[0]);
    int st;
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the stranger process failed (status %d)",
              st);
    cr_assert(strstr(msg, "refused the client") && strstr(msg, "uid 65534"),
              "the stranger was not refused, or not told why: %s", msg);
    /* the job is undisturbed */
    run_ranks(port, secret, 3);
    boot_server_stop(sv);
}

/* A listener of nobody's on a port of the job: it answers every client
 * with its own credential and counts the bytes it gets after the client's
 * credential (the job's hello would be the first), until ctl closes. */
static void squatter(int lfd, int ctl, int report)
{
    become_nobody();
    long extra = 0, conns = 0;
    for (;;) {
        struct pollfd p[2] = {{.fd = lfd, .events = POLLIN}, {.fd = ctl, .events = POLLIN}};
        if (poll(p, 2, 30000) <= 0 || p[1].revents)
            break;
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0)
            break;
        conns++;
        unsigned char h[8];
        if (sock_recv_all(fd, h, 8, 5.0) == 0 && !memcmp(h, MAGIC_AUTH, 4)) {
            uint32_t len = sock_get32(h + 4);
            char *cred = malloc(len);
            if (cred && len <= AUTH_MAX && sock_recv_all(fd, cred, len, 5.0) == 0) {
                char *mine = NULL, why[256], tuple[200];
                uint8_t nonce[BOOT_NONCE_LEN] = {0};
                boot_auth_tuple(fd, 1, tuple, sizeof(tuple));
                if (boot_auth_encode(&auth, 's', nonce, tuple, &mine, why, sizeof(why)) == 0)
                    sock_send_msg(fd, MSG_AUTH, mine, strlen(mine), 2.0);
                free(mine);
            }
            free(cred);
        }
        unsigned char buf[256];
        ssize_t n;
        while ((n = sock_recv_all(fd, buf, 1, 3.0)) == 0)
            extra++;
        close(fd);
    }
    dprintf(report, "%ld %ld", extra, conns);
}

Test(munge, a_squatter_is_detected_and_skipped)
{
    need_munge();
    need_root();
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(a);
    cr_assert_eq(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(listen(lfd, 16), 0);
    getsockname(lfd, (struct sockaddr *)&a, &sl);
    int pfd[2], ctl[2];
    cr_assert_eq(pipe(pfd), 0);
    cr_assert_eq(pipe(ctl), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        close(ctl[1]);
        squatter(lfd, ctl[0], pfd[1]);
        _exit(0);
    }
    close(pfd[1]);
    close(ctl[0]);
    close(lfd);
    uint8_t secret[BOOT_SECRET_LEN];
    int real;
    struct boot_server *sv = serve(secret, &real);
    /* only the squatter's port: refused, with a message that says why */
    int ports[2] = {ntohs(a.sin_port), real};
    struct boot *b = NULL;
    fc_result_t rc = boot_sock_connect_auth("127.0.0.1", ports, 1, secret, &auth, 0, 0, 1, 1.0,
                                            &b);
    cr_assert_neq(rc, FC_SUCCESS, "a rank joined the squatter's rendezvous");
    const char *e = err_get();
    cr_assert(strstr(e, "not this job's rank 0") && strstr(e, "uid 65534") &&
                  strstr(e, "squatting"),
              "the squatter was not named: %s", e);
    /* the squatter's port first, the real one next: the rank gets in */
    rc = boot_sock_connect_auth("127.0.0.1", ports, 2, secret, &auth, 0, 0, 1, 10.0, &b);
    cr_assert_eq(rc, FC_SUCCESS, "%s", err_get());
    int mine = 7, all = 0;
    cr_assert_eq(b->ops->allgather(b, &mine, sizeof(mine), &all), FC_SUCCESS, "%s", err_get());
    cr_assert_eq(all, 7);
    b->ops->close(b);
    boot_server_stop(sv);
    close(ctl[1]);
    char buf[64] = "";
    ssize_t n = read(pfd[0], buf, sizeof(buf) - 1);
    buf[n > 0 ? n : 0] = '\0';
    int st;
    waitpid(pid, &st, 0);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the squatter process failed (%d)", st);
    long extra = -1, conns = -1;
    cr_assert_eq(sscanf(buf, "%ld %ld", &extra, &conns), 2, "squatter said '%s'", buf);
    cr_assert_gt(conns, 0, "no rank ever reached the squatter");
    cr_assert_eq(extra, 0, "the squatter got %ld bytes after the credentials", extra);
}

Test(munge, a_credential_is_for_one_connection_and_one_decode)
{
    need_munge();
    uint8_t nonce[BOOT_NONCE_LEN], got[BOOT_NONCE_LEN];
    boot_random(nonce, BOOT_NONCE_LEN);
    char *cred = NULL, why[512];
    unsigned uid;
    const char *tuple = "10.0.0.1:4000>10.0.0.2:20001";
    cr_assert_eq(boot_auth_encode(&auth, 'c', nonce, tuple, &cred, why, sizeof(why)), 0, "%s",
                 why);
    /* relayed: presented on another connection */
    cr_assert_neq(boot_auth_check(&auth, cred, 'c', "10.0.0.9:5000>10.0.0.2:20001", got, &uid,
                                  why, sizeof(why)),
                  0);
    cr_assert(strstr(why, "another rendezvous or connection"), "%s", why);
    free(cred);
    cr_assert_eq(boot_auth_encode(&auth, 'c', nonce, tuple, &cred, why, sizeof(why)), 0, "%s",
                 why);
    cr_assert_eq(boot_auth_check(&auth, cred, 'c', tuple, got, &uid, why, sizeof(why)), 0, "%s",
                 why);
    cr_assert_arr_eq(got, nonce, BOOT_NONCE_LEN);
    /* replayed: munged decodes a credential once */
    cr_assert_neq(boot_auth_check(&auth, cred, 'c', tuple, got, &uid, why, sizeof(why)), 0);
    cr_assert(strstr(why, "does not decode"), "%s", why);
    /* a server's answer is not a client's request, and names its nonce */
    free(cred);
    cr_assert_eq(boot_auth_encode(&auth, 's', nonce, tuple, &cred, why, sizeof(why)), 0, "%s",
                 why);
    uint8_t other[BOOT_NONCE_LEN];
    memcpy(other, nonce, BOOT_NONCE_LEN);
    other[0] ^= 1;
    cr_assert_neq(boot_auth_check(&auth, cred, 's', tuple, other, &uid, why, sizeof(why)), 0);
    free(cred);
}
