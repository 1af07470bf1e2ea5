/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The TCP rendezvous: a small server (a thread of the process that made
 * the unique id, of fc_run, or of rank 0 under plain srun) and its clients.
 *
 * Protocol (network byte order):
 *   client -> server  HELLO  "FCB1", version, secret[32], session, rank, nranks
 *   server -> client  ACK | ERROR(text)
 *   client -> server  CONTRIB(len, blob) ... BYE
 *   server -> client  RESULT(nranks * len)  once every rank of the session
 *                     contributed to the round
 * A connection that does not present the job's secret within a few seconds
 * is closed and logged; it never touches a session. A rank that vanishes
 * mid-session fails the session for everyone with a message naming it,
 * instead of leaving the others waiting.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "boot.h"
#include "log.h"

#define MAGIC "FCB1"
#define VERSION 1u
#define HELLO_LEN 56
#define MSG_ACK 1u
#define MSG_RESULT 2u
#define MSG_ERROR 3u
#define MSG_CONTRIB 4u
#define MSG_BYE 5u
#define MAX_BLOB (16u << 20)
#define HELLO_TIMEOUT 10.0

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void put32(unsigned char *p, uint32_t v)
{
    v = htonl(v);
    memcpy(p, &v, 4);
}

static uint32_t get32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return ntohl(v);
}

/* Writes all of buf to a (possibly nonblocking) socket within timeout s. */
static int send_all(int fd, const void *buf, size_t len, double timeout)
{
    const char *p = buf;
    double end = now_s() + timeout;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return -1;
        double left = end - now_s();
        if (left <= 0)
            return -1;
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        poll(&pfd, 1, (int)(left * 1000) + 1);
    }
    return 0;
}

/* Reads exactly len bytes within timeout s; 0 ok, -1 error/EOF, -2 timeout. */
static int recv_all(int fd, void *buf, size_t len, double timeout)
{
    char *p = buf;
    double end = now_s() + timeout;
    while (len > 0) {
        double left = end - now_s();
        if (left <= 0)
            return -2;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int pr = poll(&pfd, 1, (int)(left * 1000) + 1);
        if (pr < 0 && errno != EINTR)
            return -1;
        if (pr <= 0)
            continue;
        ssize_t n = recv(fd, p, len, 0);
        if (n == 0)
            return -1;
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int send_msg(int fd, uint32_t type, const void *payload, size_t len, double timeout)
{
    unsigned char h[8];
    put32(h, type);
    put32(h + 4, (uint32_t)len);
    if (send_all(fd, h, 8, timeout))
        return -1;
    return len ? send_all(fd, payload, len, timeout) : 0;
}

/* ============================ server ===================================== */

struct srv_sess;
struct srv_conn {
    int fd;
    struct srv_sess *s;
    int rank;
    unsigned char *in;
    size_t inlen, incap;
    double t0;
    char peer[64];
};

struct srv_sess {
    uint32_t id;
    int nranks;
    struct srv_conn **by_rank;
    int njoined, nbye;
    size_t len;
    unsigned char *buf;
    unsigned char *have;
    int ncontrib;
    double t0;
    int failed;
    struct srv_sess *next;
};

struct boot_server {
    int lfd;
    int wake[2];
    pthread_t th;
    int started;
    uint8_t secret[BOOT_SECRET_LEN];
    int single;
    double join_timeout;
    struct srv_conn **conns;
    int nconns, capconns;
    struct srv_sess *sessions;
    int sessions_done;
    int stop; /* atomic: set by boot_server_stop, read by the server thread */
    int owned;              /* single session with an owner who waits for it */
    volatile int finished;  /* an owned server's session is over */
    boot_server_end_fn on_end; /* atomic: boot_server_on_end */
};

static void conn_close(struct boot_server *sv, int i)
{
    struct srv_conn *c = sv->conns[i];
    if (c->s && c->rank >= 0 && c->s->by_rank[c->rank] == c)
        c->s->by_rank[c->rank] = NULL;
    close(c->fd);
    free(c->in);
    free(c);
    sv->conns[i] = sv->conns[--sv->nconns];
}

static int conn_index(struct boot_server *sv, struct srv_conn *c)
{
    for (int i = 0; i < sv->nconns; i++)
        if (sv->conns[i] == c)
            return i;
    return -1;
}

static void sess_free(struct boot_server *sv, struct srv_sess *s)
{
    for (struct srv_sess **pp = &sv->sessions; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    for (int i = sv->nconns - 1; i >= 0; i--)
        if (sv->conns[i]->s == s)
            conn_close(sv, i);
    free(s->by_rank);
    free(s->buf);
    free(s->have);
    free(s);
    sv->sessions_done++;
}

/* Fails a session: every connected rank gets the message, then all close. */
static void sess_fail(struct boot_server *sv, struct srv_sess *s, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void sess_fail(struct boot_server *sv, struct srv_sess *s, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    FC_WARN(LOG_BOOT, "rendezvous session %u: %s", s->id, msg);
    for (int r = 0; r < s->nranks; r++)
        if (s->by_rank[r])
            send_msg(s->by_rank[r]->fd, MSG_ERROR, msg, strlen(msg), 2.0);
    sess_free(sv, s);
}

static struct srv_sess *sess_get(struct boot_server *sv, uint32_t id, int nranks)
{
    for (struct srv_sess *s = sv->sessions; s; s = s->next)
        if (s->id == id)
            return s;
    struct srv_sess *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->by_rank = calloc((size_t)nranks, sizeof(*s->by_rank));
    s->have = calloc((size_t)nranks, 1);
    if (!s->by_rank || !s->have) {
        free(s->by_rank);
        free(s->have);
        free(s);
        return NULL;
    }
    s->id = id;
    s->nranks = nranks;
    s->t0 = now_s();
    s->next = sv->sessions;
    sv->sessions = s;
    return s;
}

static void list_missing(struct srv_sess *s, char *buf, size_t len)
{
    size_t o = 0;
    int shown = 0;
    buf[0] = '\0';
    for (int r = 0; r < s->nranks && o + 16 < len; r++)
        if (!s->by_rank[r]) {
            if (shown == 16) {
                o += (size_t)snprintf(buf + o, len - o, ",...");
                break;
            }
            o += (size_t)snprintf(buf + o, len - o, "%s%d", shown ? "," : "", r);
            shown++;
        }
}

/* Handles the HELLO of connection i; returns 0 to keep it, -1 to drop it
 * (it is not attached to any session then). */
static int on_hello(struct boot_server *sv, int i)
{
    struct srv_conn *c = sv->conns[i];
    const unsigned char *h = c->in;
    unsigned diff = 0;
    for (int k = 0; k < BOOT_SECRET_LEN; k++) /* constant time */
        diff |= (unsigned)(h[8 + k] ^ sv->secret[k]);
    if (memcmp(h, MAGIC, 4) != 0 || get32(h + 4) != VERSION || diff) {
        FC_WARN(LOG_BOOT, "rendezvous: refused a connection from %s: %s", c->peer,
                memcmp(h, MAGIC, 4) ? "not a fabcoll client" : "wrong job secret");
        return -1;
    }
    uint32_t sid = get32(h + 40);
    int rank = (int)get32(h + 44), nranks = (int)get32(h + 48);
    if (nranks <= 0 || nranks > (1 << 24) || rank < 0 || rank >= nranks) {
        char m[128];
        snprintf(m, sizeof(m), "rank %d of %d is not a valid rank", rank, nranks);
        send_msg(c->fd, MSG_ERROR, m, strlen(m), 1.0);
        return -1;
    }
    struct srv_sess *s = sess_get(sv, sid, nranks);
    if (!s)
        return -1;
    if (s->nranks != nranks) {
        char m[160];
        snprintf(m, sizeof(m), "rank %d says the job has %d ranks, others said %d: every rank "
                 "must pass the same nranks", rank, nranks, s->nranks);
        send_msg(c->fd, MSG_ERROR, m, strlen(m), 1.0);
        sess_fail(sv, s, "%s", m);
        return -1;
    }
    if (s->by_rank[rank]) {
        char m[256];
        snprintf(m, sizeof(m), "two processes joined as rank %d (from %.60s and %.60s): every "
                 "rank must pass a distinct rank", rank, s->by_rank[rank]->peer, c->peer);
        send_msg(c->fd, MSG_ERROR, m, strlen(m), 1.0);
        sess_fail(sv, s, "%s", m);
        return -1;
    }
    c->s = s;
    c->rank = rank;
    s->by_rank[rank] = c;
    s->njoined++;
    FC_TRACE(LOG_BOOT, "rendezvous session %u: rank %d joined from %s (%d/%d)", sid, rank,
             c->peer, s->njoined, nranks);
    send_msg(c->fd, MSG_ACK, NULL, 0, 2.0);
    return 0;
}

/* A complete CONTRIB or BYE from a joined connection. */
static int on_message(struct boot_server *sv, struct srv_conn *c, uint32_t type,
                      const unsigned char *p, size_t len)
{
    struct srv_sess *s = c->s;
    if (type == MSG_BYE) {
        s->by_rank[c->rank] = NULL;
        c->s = NULL;
        s->nbye++;
        if (s->nbye == s->nranks)
            sess_free(sv, s);
        return -1;
    }
    if (type != MSG_CONTRIB) {
        sess_fail(sv, s, "rank %d sent an unknown message", c->rank);
        return -2;
    }
    if (s->ncontrib == 0) {
        s->len = len;
        free(s->buf);
        s->buf = malloc((size_t)s->nranks * (len ? len : 1));
        if (!s->buf) {
            sess_fail(sv, s, "out of memory for %d x %zu bytes", s->nranks, len);
            return -2;
        }
        memset(s->have, 0, (size_t)s->nranks);
    }
    if (len != s->len) {
        sess_fail(sv, s, "rank %d contributed %zu bytes where the others contributed %zu: "
                  "mismatched fabcoll versions?", c->rank, len, s->len);
        return -2;
    }
    if (s->have[c->rank]) {
        sess_fail(sv, s, "rank %d contributed twice to one round", c->rank);
        return -2;
    }
    memcpy(s->buf + (size_t)c->rank * len, p, len);
    s->have[c->rank] = 1;
    s->ncontrib++;
    if (s->ncontrib == s->nranks) {
        s->ncontrib = 0;
        s->t0 = now_s();
        for (int r = 0; r < s->nranks; r++)
            if (s->by_rank[r] &&
                send_msg(s->by_rank[r]->fd, MSG_RESULT, s->buf, (size_t)s->nranks * len, 30.0)) {
                sess_fail(sv, s, "could not send the result to rank %d", r);
                return -2;
            }
    }
    return 0;
}

/* Reads what connection i has; processes complete messages. Returns -1
 * when the connection must be closed, -2 when it was closed already. */
static int on_readable(struct boot_server *sv, int i)
{
    struct srv_conn *c = sv->conns[i];
    if (c->incap - c->inlen < 65536) {
        size_t nc = c->incap ? c->incap * 2 : 65536 * 2;
        unsigned char *n = realloc(c->in, nc);
        if (!n)
            return -1;
        c->in = n;
        c->incap = nc;
    }
    ssize_t n = recv(c->fd, c->in + c->inlen, c->incap - c->inlen, 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        if (c->s) {
            struct srv_sess *s = c->s;
            int rank = c->rank;
            s->by_rank[rank] = NULL;
            c->s = NULL;
            sess_fail(sv, s, "rank %d (%s) left the rendezvous before the end: it has "
                      "probably failed; see its own error output", rank, c->peer);
        }
        return -1;
    }
    if (n < 0)
        return 0;
    c->inlen += (size_t)n;
    for (;;) {
        if (!c->s) {
            /* a stranger is turned away as soon as its first bytes show it */
            if (c->inlen >= 4 && memcmp(c->in, MAGIC, 4) != 0) {
                FC_WARN(LOG_BOOT, "rendezvous: refused a connection from %s: not a fabcoll "
                        "client", c->peer);
                return -1;
            }
            if (c->inlen < HELLO_LEN)
                return 0;
            if (on_hello(sv, i) < 0)
                return -1;
            memmove(c->in, c->in + HELLO_LEN, c->inlen - HELLO_LEN);
            c->inlen -= HELLO_LEN;
            continue;
        }
        if (c->inlen < 8)
            return 0;
        uint32_t type = get32(c->in), len = get32(c->in + 4);
        if (len > MAX_BLOB) {
            sess_fail(sv, c->s, "rank %d sent a %u-byte message", c->rank, len);
            return -2;
        }
        if (c->inlen < 8 + (size_t)len)
            return 0;
        int r = on_message(sv, c, type, c->in + 8, len);
        if (r < 0)
            return r;
        memmove(c->in, c->in + 8 + len, c->inlen - 8 - len);
        c->inlen -= 8 + len;
    }
}

static void check_timeouts(struct boot_server *sv)
{
    double t = now_s();
    for (int i = sv->nconns - 1; i >= 0; i--)
        if (!sv->conns[i]->s && t - sv->conns[i]->t0 > HELLO_TIMEOUT) {
            FC_WARN(LOG_BOOT, "rendezvous: dropped a connection from %s that sent no valid hello "
                    "in %.0f s", sv->conns[i]->peer, HELLO_TIMEOUT);
            conn_close(sv, i);
        }
    for (struct srv_sess *s = sv->sessions; s;) {
        struct srv_sess *next = s->next;
        if (sv->join_timeout > 0 && t - s->t0 > sv->join_timeout) {
            char miss[256];
            list_missing(s, miss, sizeof(miss));
            if (s->njoined < s->nranks)
                sess_fail(sv, s, "ranks %s of %d did not join within %.0f s (FC_BOOT_TIMEOUT): "
                          "were they started, with the same unique id / FC_ROOT_ADDR?", miss,
                          s->nranks, sv->join_timeout);
            else
                sess_fail(sv, s, "a round waited %.0f s (FC_BOOT_TIMEOUT) for ranks that did "
                          "not contribute", sv->join_timeout);
        }
        s = next;
    }
}

static int add_conn(struct boot_server *sv, int fd, const struct sockaddr_storage *ss)
{
    if (sv->nconns == sv->capconns) {
        int nc = sv->capconns * 2 + 16;
        struct srv_conn **n = realloc(sv->conns, (size_t)nc * sizeof(*n));
        if (!n)
            return -1;
        sv->conns = n;
        sv->capconns = nc;
    }
    struct srv_conn *c = calloc(1, sizeof(*c));
    if (!c)
        return -1;
    c->fd = fd;
    c->rank = -1;
    c->t0 = now_s();
    char host[48] = "?";
    int port = 0;
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)ss;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        port = ntohs(in->sin_port);
    } else if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *in = (const struct sockaddr_in6 *)ss;
        inet_ntop(AF_INET6, &in->sin6_addr, host, sizeof(host));
        port = ntohs(in->sin6_port);
    }
    snprintf(c->peer, sizeof(c->peer), "%s:%d", host, port);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    sv->conns[sv->nconns++] = c;
    return 0;
}

static void *server_main(void *arg)
{
    struct boot_server *sv = arg;
    struct pollfd *pf = NULL;
    log_thread_name("fc-rendezvous");
    int cap = 0;
    while (!__atomic_load_n(&sv->stop, __ATOMIC_ACQUIRE)) {
        if (cap < sv->nconns + 2) {
            cap = (sv->nconns + 2) * 2;
            struct pollfd *n = realloc(pf, (size_t)cap * sizeof(*pf));
            if (!n)
                break;
            pf = n;
        }
        pf[0].fd = sv->lfd;
        pf[0].events = POLLIN;
        pf[1].fd = sv->wake[0];
        pf[1].events = POLLIN;
        int nc = sv->nconns;
        for (int i = 0; i < nc; i++) {
            pf[i + 2].fd = sv->conns[i]->fd;
            pf[i + 2].events = POLLIN;
            pf[i + 2].revents = 0;
        }
        int pr = poll(pf, (nfds_t)nc + 2, 200);
        if (pr < 0 && errno != EINTR)
            break;
        if (pr > 0 && (pf[0].revents & POLLIN)) {
            struct sockaddr_storage ss;
            socklen_t sl = sizeof(ss);
            int fd = accept4(sv->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd >= 0 && add_conn(sv, fd, &ss) != 0)
                close(fd);
        }
        /* connections may be closed while handling others: match by fd */
        for (int k = 0; k < nc; k++) {
            if (!(pf[k + 2].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            int i = -1;
            for (int j = 0; j < sv->nconns; j++)
                if (sv->conns[j]->fd == pf[k + 2].fd) {
                    i = j;
                    break;
                }
            if (i < 0)
                continue;
            struct srv_conn *c = sv->conns[i];
            int r = on_readable(sv, i);
            if (r == -1) {
                i = conn_index(sv, c);
                if (i >= 0)
                    conn_close(sv, i);
            }
        }
        check_timeouts(sv);
        if (sv->single && sv->sessions_done > 0 && !sv->sessions)
            break;
    }
    free(pf);
    while (sv->nconns)
        conn_close(sv, sv->nconns - 1);
    while (sv->sessions)
        sess_free(sv, sv->sessions);
    return NULL;
}

static void *single_main(void *arg)
{
    struct boot_server *sv = arg;
    server_main(sv);
    if (sv->owned) {
        boot_server_end_fn fn = __atomic_load_n(&sv->on_end, __ATOMIC_ACQUIRE);
        if (!fn || !fn(sv)) { /* the owner joins and frees (boot_server_wait) */
            __atomic_store_n(&sv->finished, 1, __ATOMIC_RELEASE);
            return NULL;
        }
        pthread_detach(pthread_self()); /* nobody owns it any more */
    }
    close(sv->lfd);
    close(sv->wake[0]);
    close(sv->wake[1]);
    free(sv->conns);
    free(sv);
    return NULL;
}

fc_result_t boot_server_start(const uint8_t secret[BOOT_SECRET_LEN], int port, int single_session,
                              double join_timeout, struct boot_server **out, int *bound_port)
{
    struct boot_server *sv = calloc(1, sizeof(*sv));
    if (!sv)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory for the rendezvous");
    memcpy(sv->secret, secret, BOOT_SECRET_LEN);
    sv->single = single_session;
    sv->owned = single_session && out != NULL;
    sv->join_timeout = join_timeout;
    sv->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (sv->lfd < 0) {
        free(sv);
        return FC_ERR(FC_ERR_SYSTEM, "socket() for the rendezvous failed: %m");
    }
    int one = 1;
    setsockopt(sv->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_ANY)};
    if (bind(sv->lfd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(sv->lfd, 4096) != 0) {
        /* a taken port is routine for a caller with candidates (rank 0 under
         * plain srun tries several): it reports when all of them fail */
        fc_result_t rc = port != 0 && errno == EADDRINUSE
                             ? FC_ERR_QUIET(FC_ERR_SYSTEM,
                                            "binding the rendezvous to port %d failed: %m", port)
                             : FC_ERR(FC_ERR_SYSTEM,
                                      "binding the rendezvous to port %d failed: %m", port);
        close(sv->lfd);
        free(sv);
        return rc;
    }
    socklen_t sl = sizeof(a);
    getsockname(sv->lfd, (struct sockaddr *)&a, &sl);
    *bound_port = ntohs(a.sin_port);
    if (pipe2(sv->wake, O_CLOEXEC) != 0) {
        close(sv->lfd);
        free(sv);
        return FC_ERR(FC_ERR_SYSTEM, "pipe() failed: %m");
    }
    int rc = pthread_create(&sv->th, NULL, single_session ? single_main : server_main, sv);
    if (rc != 0) {
        close(sv->lfd);
        close(sv->wake[0]);
        close(sv->wake[1]);
        free(sv);
        return FC_ERR(FC_ERR_SYSTEM, "pthread_create for the rendezvous failed: %s",
                      strerror(rc));
    }
    if (single_session && !out) {
        pthread_detach(sv->th); /* it frees itself when its session ends */
        sv = NULL;
    }
    if (out)
        *out = sv;
    return FC_SUCCESS;
}

void boot_server_on_end(struct boot_server *sv, boot_server_end_fn fn)
{
    __atomic_store_n(&sv->on_end, fn, __ATOMIC_RELEASE);
}

void boot_server_wait(struct boot_server *sv, double timeout)
{
    if (!sv)
        return;
    double end = now_s() + timeout;
    while (!__atomic_load_n(&sv->finished, __ATOMIC_ACQUIRE) && now_s() < end) {
        struct timespec ts = {0, 5000000L};
        nanosleep(&ts, NULL);
    }
    boot_server_stop(sv);
}

void boot_server_stop(struct boot_server *sv)
{
    if (!sv)
        return;
    __atomic_store_n(&sv->stop, 1, __ATOMIC_RELEASE);
    if (write(sv->wake[1], "x", 1) < 0) {
        /* the poll timeout wakes it anyway */
    }
    pthread_join(sv->th, NULL);
    close(sv->lfd);
    close(sv->wake[0]);
    close(sv->wake[1]);
    free(sv->conns);
    free(sv);
}

/* ============================ client ===================================== */

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
    if (recv_all(s->fd, h, 8, 1.0) || get32(h) != MSG_ERROR)
        return -1;
    size_t l = get32(h + 4);
    if (l >= len)
        l = len - 1;
    if (recv_all(s->fd, buf, l, 1.0))
        return -1;
    buf[l] = '\0';
    return 0;
}

static fc_result_t sock_allgather(struct boot *b, const void *mine, size_t len, void *all)
{
    struct boot_sock *s = (struct boot_sock *)b;
    if (send_msg(s->fd, MSG_CONTRIB, mine, len, s->timeout)) {
        char why[512];
        if (pending_error(s, why, sizeof(why)) == 0)
            return FC_ERR(FC_ERR_BOOTSTRAP, "rendezvous at %s: %s", s->where, why);
        return FC_ERR(FC_ERR_BOOTSTRAP, "sending to the rendezvous at %s failed: %m", s->where);
    }
    unsigned char h[8];
    int r = recv_all(s->fd, h, 8, s->timeout);
    if (r == -2)
        return FC_ERR(FC_ERR_TIMEOUT,
                      "the rendezvous at %s sent nothing for %.0f s (FC_BOOT_TIMEOUT): some "
                      "ranks have not reached this point",
                      s->where, s->timeout);
    if (r)
        return FC_ERR(FC_ERR_BOOTSTRAP,
                      "the rendezvous at %s closed the connection: the process serving it "
                      "(fc_run, rank 0, or the caller of fc_get_unique_id) may have exited",
                      s->where);
    uint32_t type = get32(h), mlen = get32(h + 4);
    if (mlen > (uint32_t)MAX_BLOB * 64u)
        return FC_ERR(FC_ERR_BOOTSTRAP, "the rendezvous at %s sent a %u-byte message", s->where,
                      mlen);
    char *buf = malloc(mlen + 1);
    if (!buf)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory for %u bytes", mlen);
    if (recv_all(s->fd, buf, mlen, s->timeout)) {
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
        send_msg(s->fd, MSG_BYE, NULL, 0, 1.0);
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

/* One attempt: connect, hello, wait for the ACK. 0 ok; 1 try again later
 * (refused: not up yet, or another job's server); -1 fatal (msg set). */
static int try_port(const struct addrinfo *ai, int port, const unsigned char *hello, double t,
                    int *fd_out, char *msg, size_t msglen)
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
    if (send_all(fd, hello, HELLO_LEN, t)) {
        close(fd);
        return 1;
    }
    unsigned char h[8];
    if (recv_all(fd, h, 8, t < 5 ? t : 5)) {
        snprintf(msg, msglen, "the server at port %d did not accept this job's secret", port);
        close(fd);
        return 1;
    }
    uint32_t type = get32(h), mlen = get32(h + 4);
    if (type == MSG_ERROR) {
        char buf[512];
        size_t l = mlen < sizeof(buf) - 1 ? mlen : sizeof(buf) - 1;
        if (recv_all(fd, buf, l, 2.0) == 0)
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
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int gr = getaddrinfo(host, NULL, &hints, &res);
    if (gr != 0)
        return FC_ERR(FC_ERR_BOOTSTRAP, "cannot resolve the rendezvous host '%s': %s", host,
                      gai_strerror(gr));
    unsigned char hello[HELLO_LEN];
    memset(hello, 0, sizeof(hello));
    memcpy(hello, MAGIC, 4);
    put32(hello + 4, VERSION);
    memcpy(hello + 8, secret, BOOT_SECRET_LEN);
    put32(hello + 40, session);
    put32(hello + 44, (uint32_t)rank);
    put32(hello + 48, (uint32_t)nranks);
    double end = now_s() + timeout;
    char msg[512] = "no attempt";
    int fd = -1, port = 0;
    for (int attempt = 0; fd < 0; attempt++) {
        for (int k = 0; k < nports && fd < 0; k++) {
            int r = try_port(res, ports[k], hello, 10.0, &fd, msg, sizeof(msg));
            if (r < 0) {
                freeaddrinfo(res);
                return FC_ERR(FC_ERR_BOOTSTRAP, "rendezvous at %s:%d refused rank %d: %s", host,
                              ports[k], rank, msg);
            }
            if (r == 0)
                port = ports[k];
        }
        if (fd >= 0)
            break;
        if (now_s() > end) {
            freeaddrinfo(res);
            return FC_ERR(FC_ERR_BOOTSTRAP,
                          "rank %d could not reach the rendezvous at %s:%d within %.0f s "
                          "(FC_BOOT_TIMEOUT): %s. Fix: is the process serving it (fc_run, rank "
                          "0, or the caller of fc_get_unique_id) alive and reachable from host "
                          "%s? Firewalls must allow the port",
                          rank, host, ports[0], timeout, msg, log_hostname());
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

/* ============================ helpers ==================================== */

int boot_hex_encode(const uint8_t *in, size_t n, char *out, size_t outlen)
{
    static const char hx[] = "0123456789abcdef";
    if (outlen < 2 * n + 1)
        return -1;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hx[in[i] >> 4];
        out[2 * i + 1] = hx[in[i] & 15];
    }
    out[2 * n] = '\0';
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int boot_hex_decode(const char *in, uint8_t *out, size_t n)
{
    if (strlen(in) != 2 * n)
        return -1;
    for (size_t i = 0; i < n; i++) {
        int h = hexval(in[2 * i]), l = hexval(in[2 * i + 1]);
        if (h < 0 || l < 0)
            return -1;
        out[i] = (uint8_t)(h << 4 | l);
    }
    return 0;
}

int boot_random(uint8_t *out, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(out + got, n - got, 0);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

void boot_local_address(const cfg_t *cfg, char *buf, size_t len)
{
    struct ifaddrs *ifa = NULL;
    snprintf(buf, len, "127.0.0.1");
    if (getifaddrs(&ifa) != 0)
        return;
    for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP))
            continue;
        if (cfg->iface[0]) {
            if (strcmp(i->ifa_name, cfg->iface) != 0)
                continue;
        } else if (i->ifa_flags & IFF_LOOPBACK) {
            continue;
        }
        inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, buf, (socklen_t)len);
        break;
    }
    freeifaddrs(ifa);
}
