/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The TCP rendezvous client: connecting (the candidate ports in turn until
 * a server accepts this job's secret) and the boot ops over the connection,
 * an allgather as one CONTRIB and its RESULT, a close as a BYE. The ERROR
 * a server sent before it closed on us becomes the caller's error.
 *
 * Owns struct boot_sock and its socket. It frames through sock_wire.c and
 * knows the server only through boot.h: a process serving the rendezvous
 * waits, on close, until the server is done (boot_server_wait); it never
 * touches a server's state, and the server never calls it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "sock_int.h"

struct boot_sock {
    struct boot base;
    int fd;
    double timeout;
    char where[96];
    struct boot_server *srv; /* the rendezvous this process serves, if any */
};

/* After the server closed on us: the ERROR it sent first, if any. */
static int pending_error(struct boot_sock *s, char *buf, size_t len)
{
    unsigned char h[8];
    if (sock_recv_all(s->fd, h, 8, 1.0) || sock_get32(h) != MSG_ERROR)
        return -1;
    size_t l = sock_get32(h + 4);
    if (l >= len)
        l = len - 1;
    if (sock_recv_all(s->fd, buf, l, 1.0))
        return -1;
    buf[l] = '\0';
    return 0;
}

static fc_result_t sock_allgather(struct boot *b, const void *mine, size_t len, void *all)
{
    struct boot_sock *s = (struct boot_sock *)b;
    if (sock_send_msg(s->fd, MSG_CONTRIB, mine, len, s->timeout)) {
        char why[512];
        if (pending_error(s, why, sizeof(why)) == 0)
            return FC_ERR(FC_ERR_BOOTSTRAP, "rendezvous at %s: %s", s->where, why);
        return FC_ERR(FC_ERR_BOOTSTRAP, "sending to the rendezvous at %s failed: %m", s->where);
    }
    unsigned char h[8];
    int r = sock_recv_all(s->fd, h, 8, s->timeout);
    char who[512] = "";
    if (r == -2) {
        /* ask the rendezvous whom it waits for: its answer, or the result
         * that came just now */
        if (sock_send_msg(s->fd, MSG_WHO, NULL, 0, 1.0) == 0 &&
            sock_recv_all(s->fd, h, 8, 2.0) == 0) {
            r = 0;
            if (sock_get32(h) == MSG_STATUS) {
                size_t l = sock_get32(h + 4);
                if (l >= sizeof(who))
                    l = sizeof(who) - 1;
                if (sock_recv_all(s->fd, who, l, 1.0) == 0)
                    who[l] = '\0';
                else
                    who[0] = '\0';
                r = -2;
            }
        }
    }
    if (r == -2)
        return FC_ERR(FC_ERR_TIMEOUT,
                      "the rendezvous at %s sent nothing for %.0f s (FC_BOOT_TIMEOUT): %s",
                      s->where, s->timeout,
                      who[0] ? who : "some ranks have not reached this point");
    if (r)
        return FC_ERR(FC_ERR_BOOTSTRAP,
                      "the rendezvous at %s closed the connection: the process serving it "
                      "(fc_run, rank 0, or the caller of fc_get_unique_id) may have exited",
                      s->where);
    uint32_t type = sock_get32(h), mlen = sock_get32(h + 4);
    if (mlen > (uint32_t)MAX_BLOB * 64u)
        return FC_ERR(FC_ERR_BOOTSTRAP, "the rendezvous at %s sent a %u-byte message", s->where,
                      mlen);
    char *buf = malloc(mlen + 1);
    if (!buf)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory for %u bytes", mlen);
    if (sock_recv_all(s->fd, buf, mlen, s->timeout)) {
        free(buf);
        return FC_ERR(FC_ERR_BOOTSTRAP, "the rendezvous at %s went away mid-message", s->where);
    }
    fc_result_t rc = FC_SUCCESS;
    if (type == MSG_ERROR) {
        buf[mlen] = '\0';
        rc = FC_ERR(FC_ERR_BOOTSTRAP, "rendezvous at %s: %s", s->where, buf);
    } else if (type != MSG_RESULT || mlen != (uint32_t)(len * (size_t)b->nranks)) {
        rc = FC_ERR(FC_ERR_BOOTSTRAP, "the rendezvous at %s sent an unexpected reply", s->where);
    } else {
        memcpy(all, buf, mlen);
    }
    free(buf);
    return rc;
}

static void sock_close(struct boot *b)
{
    struct boot_sock *s = (struct boot_sock *)b;
    if (s->fd >= 0) {
        sock_send_msg(s->fd, MSG_BYE, NULL, 0, 1.0);
        close(s->fd);
    }
    /* the process serving the rendezvous stays until every rank has had its
     * answers: leaving at once (a failed init returns, the program exits)
     * would cut the others off mid-reply */
    boot_server_wait(s->srv, s->timeout);
    free(s);
}

void boot_sock_adopt_server(struct boot *b, struct boot_server *sv)
{
    ((struct boot_sock *)b)->srv = sv;
}

static const struct boot_ops sock_ops = {"socket", sock_allgather, sock_close};

/* Reads one message of type want (at most max bytes, NUL-terminated into a
 * malloc'd *out) within t s. 0 ok; 1 another type (its text, if an ERROR,
 * in msg); -1 nothing readable. */
static int recv_text(int fd, uint32_t want, size_t max, double t, char **out, char *msg,
                     size_t msglen)
{
    unsigned char h[8];
    if (sock_recv_all(fd, h, 8, t))
        return -1;
    uint32_t type = sock_get32(h), mlen = sock_get32(h + 4);
    if (mlen > max)
        return -1;
    char *buf = malloc((size_t)mlen + 1);
    if (!buf)
        return -1;
    if (sock_recv_all(fd, buf, mlen, 2.0)) {
        free(buf);
        return -1;
    }
    buf[mlen] = '\0';
    if (type != want) {
        if (type == MSG_ERROR)
            snprintf(msg, msglen, "%s", buf);
        free(buf);
        return 1;
    }
    *out = buf;
    return 0;
}

/* MUNGE on a fresh connection: our credential out, the server's checked.
 * 0 ok; 1 refused (msg says why); 2 the listener is not ours (msg). A listener that is not this
 * user's is warned about once per connect (*warned). */
static int prove(int fd, int port, const struct boot_auth *auth, double t, int *warned,
                 char *msg, size_t msglen)
{
    char tuple[200], why[512] = "no address";
    uint8_t nonce[BOOT_NONCE_LEN];
    char *cred = NULL;
    if (boot_auth_tuple(fd, 0, tuple, sizeof(tuple)) != 0 ||
        boot_random(nonce, BOOT_NONCE_LEN) != 0 ||
        boot_auth_encode(auth, 'c', nonce, tuple, &cred, why, sizeof(why)) != 0) {
        snprintf(msg, msglen, "no MUNGE credential for port %d: %.300s", port, why);
        free(cred);
        return 1;
    }
    size_t clen = strlen(cred);
    unsigned char *m = malloc(8 + clen);
    int r = -1;
    if (m) {
        memcpy(m, MAGIC_AUTH, 4);
        sock_put32(m + 4, (uint32_t)clen);
        memcpy(m + 8, cred, clen);
        r = sock_send_all(fd, m, 8 + clen, t);
        free(m);
    }
    free(cred);
    if (r != 0) {
        snprintf(msg, msglen, "the listener at port %d closed the connection", port);
        return 1;
    }
    char err[512] = "";
    char *theirs = NULL;
    r = recv_text(fd, MSG_AUTH, AUTH_MAX, t < 5 ? t : 5, &theirs, err, sizeof(err));
    if (r == 1 && err[0]) {
        /* a fabcoll rendezvous that turned us away: another job's, or ours
         * with another FC_BOOT_AUTH */
        snprintf(msg, msglen, "%s", err);
        return 1;
    }
    unsigned uid = (unsigned)-1;
    if (r == 0 && boot_auth_check(auth, theirs, 's', tuple, nonce, &uid, why, sizeof(why)) == 0) {
        free(theirs);
        return 0;
    }
    free(theirs);
    if (r != 0)
        snprintf(why, sizeof(why), "it answered without a MUNGE credential");
    snprintf(msg, msglen,
             "the process listening on port %d is not this job's rank 0: %.300s. Another user's "
             "process may hold the port (squatting it); nothing of the job was sent to it",
             port, why);
    if (!(*warned)++)
        FC_WARN(LOG_BOOT, "rendezvous: refused the listener on port %d (%s): %s; trying the "
                "job's other ports", port, tuple, why);
    return 2;
}

/* One attempt: connect, MUNGE both ways where asked, hello, wait for the
 * ACK. 0 ok; 1 try again later (refused: not up yet, another job's server);
 * 2 the same, the listener proved it is not ours; -1 fatal (msg set). */
static int try_port(const struct addrinfo *ai, int port, const unsigned char *hello,
                    const struct boot_auth *auth, double t, int *warned, int *fd_out, char *msg,
                    size_t msglen)
{
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(msg, msglen, "socket(): %s", strerror(errno));
        return -1;
    }
    struct sockaddr_storage ss;
    memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
    if (ss.ss_family == AF_INET)
        ((struct sockaddr_in *)&ss)->sin_port = htons((uint16_t)port);
    else
        ((struct sockaddr_in6 *)&ss)->sin6_port = htons((uint16_t)port);
    if (connect(fd, (struct sockaddr *)&ss, ai->ai_addrlen) != 0) {
        snprintf(msg, msglen, "connect: %s", strerror(errno));
        close(fd);
        return 1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int pr = auth ? prove(fd, port, auth, t, warned, msg, msglen) : 0;
    if (pr != 0) {
        close(fd);
        return pr;
    }
    if (sock_send_all(fd, hello, HELLO_LEN, t)) {
        close(fd);
        return 1;
    }
    unsigned char h[8];
    if (sock_recv_all(fd, h, 8, t < 5 ? t : 5)) {
        snprintf(msg, msglen, "the server at port %d did not accept this job's secret", port);
        close(fd);
        return 1;
    }
    uint32_t type = sock_get32(h), mlen = sock_get32(h + 4);
    if (type == MSG_ERROR) {
        char buf[512];
        size_t l = mlen < sizeof(buf) - 1 ? mlen : sizeof(buf) - 1;
        if (sock_recv_all(fd, buf, l, 2.0) == 0)
            buf[l] = '\0';
        else
            snprintf(buf, sizeof(buf), "(unreadable)");
        snprintf(msg, msglen, "%s", buf);
        close(fd);
        return -1;
    }
    if (type != MSG_ACK) {
        close(fd);
        return 1;
    }
    *fd_out = fd;
    return 0;
}

fc_result_t boot_sock_connect(const char *host, const int *ports, int nports,
                              const uint8_t secret[BOOT_SECRET_LEN], uint32_t session, int rank,
                              int nranks, double timeout, struct boot **out)
{
    return boot_sock_connect_auth(host, ports, nports, secret, NULL, session, rank, nranks,
                                  timeout, out);
}

fc_result_t boot_sock_connect_auth(const char *host, const int *ports, int nports,
                                   const uint8_t secret[BOOT_SECRET_LEN],
                                   const struct boot_auth *auth, uint32_t session, int rank,
                                   int nranks, double timeout, struct boot **out)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int gr = getaddrinfo(host, NULL, &hints, &res);
    if (gr != 0)
        return FC_ERR(FC_ERR_BOOTSTRAP, "cannot resolve the rendezvous host '%s': %s", host,
                      gai_strerror(gr));
    unsigned char hello[HELLO_LEN];
    memset(hello, 0, sizeof(hello));
    memcpy(hello, MAGIC, 4);
    sock_put32(hello + 4, VERSION);
    memcpy(hello + 8, secret, BOOT_SECRET_LEN);
    sock_put32(hello + 40, session);
    sock_put32(hello + 44, (uint32_t)rank);
    sock_put32(hello + 48, (uint32_t)nranks);
    double end = sock_now_s() + timeout;
    char msg[512] = "no attempt";
    int fd = -1, port = 0, warned = 0;
    char squat[512] = ""; /* a listener that proved it is not ours */
    for (int attempt = 0; fd < 0; attempt++) {
        for (int k = 0; k < nports && fd < 0; k++) {
            int r = try_port(res, ports[k], hello, auth, 10.0, &warned, &fd, msg, sizeof(msg));
            if (r < 0) {
                freeaddrinfo(res);
                return FC_ERR(FC_ERR_BOOTSTRAP, "rendezvous at %s:%d refused rank %d: %s", host,
                              ports[k], rank, msg);
            }
            if (r == 0)
                port = ports[k];
            if (r == 2)
                snprintf(squat, sizeof(squat), "%s", msg);
        }
        if (fd >= 0)
            break;
        if (sock_now_s() > end) {
            freeaddrinfo(res);
            return FC_ERR(FC_ERR_BOOTSTRAP,
                          "rank %d could not reach the rendezvous at %s:%d within %.0f s "
                          "(FC_BOOT_TIMEOUT): %s. Fix: is the process serving it (fc_run, rank "
                          "0, or the caller of fc_get_unique_id) alive and reachable from host "
                          "%s? Firewalls must allow the port",
                          rank, host, ports[0], timeout, squat[0] ? squat : msg,
                          log_hostname());
        }
        struct timespec ts = {0, attempt < 20 ? 20000000L : 100000000L};
        nanosleep(&ts, NULL);
    }
    freeaddrinfo(res);
    struct boot_sock *s = calloc(1, sizeof(*s));
    if (!s) {
        close(fd);
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    }
    s->base.ops = &sock_ops;
    s->base.rank = rank;
    s->base.nranks = nranks;
    s->fd = fd;
    s->timeout = timeout;
    snprintf(s->where, sizeof(s->where), "%s:%d", host, port);
    snprintf(s->base.how, sizeof(s->base.how), "rendezvous at %s, session %u", s->where, session);
    *out = &s->base;
    return FC_SUCCESS;
}
