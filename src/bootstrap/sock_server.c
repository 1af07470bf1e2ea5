/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The TCP rendezvous server: a thread of the process that made the unique
 * id, of fc_run, or of rank 0 under plain srun. It groups the ranks that
 * connect by the session of their HELLO and answers each round of their
 * contributions with all of them (the protocol: sock_wire.c).
 *
 * A connection that does not present the job's secret within a few seconds
 * is closed and logged; it never touches a session. A rank that vanishes
 * mid-session fails the session for everyone with a message naming it,
 * instead of leaving the others waiting.
 *
 * Owns struct boot_server, its thread, connections and sessions: only that
 * thread touches them, but for the atomics (stop, finished, on_end) and
 * what boot_server_start, _stop and _wait do before it runs or after it was
 * joined. It frames through sock_wire.c and never calls the client.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "sock_int.h"

#define HELLO_TIMEOUT 10.0

struct srv_sess;
/* Out of descriptors, connections that sent no hello for this long go. */
#define STRANGER_AGE 0.25

struct srv_conn {
    int fd;
    struct srv_sess *s;
    int rank;
    int authed; /* it proved its uid (MUNGE), or none is asked */
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
    unsigned char *seen;   /* per rank: it joined (it may have left since) */
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
    struct boot_auth auth; /* key "" : no MUNGE */
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
    int nrefused;           /* connections turned away (warned once, counted) */
    double accept_pause_until; /* out of descriptors: accept again after this */
    int nfd_pauses;
};

/* A connection turned away: the first is a warning with its reason, the
 * rest are counted (a port scan or a flood would write a line each) and
 * summed up when the server ends. */
static void refused(struct boot_server *sv, const char *peer, const char *why)
{
    if (sv->nrefused++ == 0)
        FC_WARN(LOG_BOOT, "rendezvous: refused a connection from %s: %s (further refusals are "
                "counted, not logged)", peer, why);
    else
        FC_TRACE(LOG_BOOT, "rendezvous: refused a connection from %s: %s", peer, why);
}

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
    free(s->seen);
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
            sock_send_msg(s->by_rank[r]->fd, MSG_ERROR, msg, strlen(msg), 2.0);
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
    s->seen = calloc((size_t)nranks, 1);
    if (!s->by_rank || !s->have || !s->seen) {
        free(s->by_rank);
        free(s->have);
        free(s->seen);
        free(s);
        return NULL;
    }
    s->id = id;
    s->nranks = nranks;
    s->t0 = sock_now_s();
    s->next = sv->sessions;
    sv->sessions = s;
    return s;
}

/* "1,4,7" (at most 16, then ",..."): the ranks whose byte in flags is 0
 * (s->seen: never joined; s->have: no contribution to this round) */
static void list_missing(const struct srv_sess *s, const unsigned char *flags, char *buf,
                         size_t len)
{
    size_t o = 0;
    int shown = 0;
    buf[0] = '\0';
    for (int r = 0; r < s->nranks && o + 16 < len; r++)
        if (!flags[r]) {
            if (shown == 16) {
                o += (size_t)snprintf(buf + o, len - o, ",...");
                break;
            }
            o += (size_t)snprintf(buf + o, len - o, "%s%d", shown ? "," : "", r);
            shown++;
        }
}

/* The MUNGE credential (NUL-terminated) that connection i presents before
 * its HELLO: checked, then answered with ours. 0 keeps it, -1 drops it. */
static int on_auth(struct boot_server *sv, int i, const char *cred)
{
    struct srv_conn *c = sv->conns[i];
    char tuple[200], why[512];
    uint8_t nonce[BOOT_NONCE_LEN];
    unsigned uid;
    if (boot_auth_tuple(c->fd, 1, tuple, sizeof(tuple)) != 0) {
        refused(sv, c->peer, "its connection has no address");
        return -1;
    }
    if (boot_auth_check(&sv->auth, cred, 'c', tuple, nonce, &uid, why, sizeof(why)) != 0) {
        char m[640];
        snprintf(m, sizeof(m), "this rendezvous refused the client at %s: %s", c->peer, why);
        refused(sv, c->peer, why);
        sock_send_msg(c->fd, MSG_ERROR, m, strlen(m), 1.0);
        return -1;
    }
    char *mine = NULL;
    if (boot_auth_encode(&sv->auth, 's', nonce, tuple, &mine, why, sizeof(why)) != 0) {
        FC_WARN(LOG_BOOT, "rendezvous: cannot answer %s with a MUNGE credential: %s", c->peer,
                why);
        sock_send_msg(c->fd, MSG_ERROR, why, strlen(why), 1.0);
        return -1;
    }
    int r = sock_send_msg(c->fd, MSG_AUTH, mine, strlen(mine), 2.0);
    free(mine);
    if (r != 0)
        return -1;
    c->authed = 1;
    return 0;
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
    if (memcmp(h, MAGIC, 4) != 0 || sock_get32(h + 4) != VERSION || diff) {
        refused(sv, c->peer, memcmp(h, MAGIC, 4) ? "not a fabcoll client" : "wrong job secret");
        return -1;
    }
    uint32_t sid = sock_get32(h + 40);
    int rank = (int)sock_get32(h + 44), nranks = (int)sock_get32(h + 48);
    if (nranks <= 0 || nranks > (1 << 24) || rank < 0 || rank >= nranks) {
        char m[128];
        snprintf(m, sizeof(m), "rank %d of %d is not a valid rank", rank, nranks);
        sock_send_msg(c->fd, MSG_ERROR, m, strlen(m), 1.0);
        return -1;
    }
    struct srv_sess *s = sess_get(sv, sid, nranks);
    if (!s)
        return -1;
    if (s->nranks != nranks) {
        char m[160];
        snprintf(m, sizeof(m), "rank %d says the job has %d ranks, others said %d: every rank "
                 "must pass the same nranks", rank, nranks, s->nranks);
        sock_send_msg(c->fd, MSG_ERROR, m, strlen(m), 1.0);
        sess_fail(sv, s, "%s", m);
        return -1;
    }
    if (s->by_rank[rank]) {
        char m[256];
        snprintf(m, sizeof(m), "two processes joined as rank %d (from %.60s and %.60s): every "
                 "rank must pass a distinct rank", rank, s->by_rank[rank]->peer, c->peer);
        sock_send_msg(c->fd, MSG_ERROR, m, strlen(m), 1.0);
        sess_fail(sv, s, "%s", m);
        return -1;
    }
    c->s = s;
    c->rank = rank;
    s->by_rank[rank] = c;
    s->seen[rank] = 1;
    s->njoined++;
    FC_TRACE(LOG_BOOT, "rendezvous session %u: rank %d joined from %s (%d/%d)", sid, rank,
             c->peer, s->njoined, nranks);
    sock_send_msg(c->fd, MSG_ACK, NULL, 0, 2.0);
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
    if (type == MSG_WHO) {
        char miss[256], msg[512];
        if (s->njoined < s->nranks) {
            list_missing(s, s->seen, miss, sizeof(miss));
            snprintf(msg, sizeof(msg),
                     "ranks %s of %d have not joined it (not started, started with another "
                     "FC_ROOT_ADDR or unique id, or exited before fc_comm_init)",
                     miss, s->nranks);
        } else if (s->ncontrib > 0) {
            list_missing(s, s->have, miss, sizeof(miss));
            snprintf(msg, sizeof(msg),
                     "every rank joined it, but ranks %s of %d have not reached this step of "
                     "fc_comm_init (stuck or slow before it)",
                     miss, s->nranks);
        } else {
            snprintf(msg, sizeof(msg), "it waits for no rank now");
        }
        sock_send_msg(c->fd, MSG_STATUS, msg, strlen(msg), 1.0);
        return 0;
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
        s->t0 = sock_now_s();
        for (int r = 0; r < s->nranks; r++)
            if (s->by_rank[r] && sock_send_msg(s->by_rank[r]->fd, MSG_RESULT, s->buf,
                                               (size_t)s->nranks * len, 30.0)) {
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
        if (!c->s && !c->authed) {
            /* MUNGE first: "FCA1", length, credential */
            if (c->inlen < 4)
                return 0;
            int is_auth = memcmp(c->in, MAGIC_AUTH, 4) == 0;
            if (is_auth != (sv->auth.key[0] != 0)) {
                const char *m = !is_auth && memcmp(c->in, MAGIC, 4) != 0
                                    ? NULL
                                    : is_auth ? "this rendezvous asks for no MUNGE credential "
                                                "(FC_BOOT_AUTH=none where it runs): every rank "
                                                "must use the same FC_BOOT_AUTH"
                                              : "this rendezvous asks for a MUNGE credential "
                                                "first (FC_BOOT_AUTH=munge where it runs): every "
                                                "rank must use the same FC_BOOT_AUTH";
                refused(sv, c->peer, m ? m : "not a fabcoll client");
                if (m)
                    sock_send_msg(c->fd, MSG_ERROR, m, strlen(m), 1.0);
                return -1;
            }
            if (!is_auth) {
                c->authed = 1;
                continue;
            }
            if (c->inlen < 8)
                return 0;
            uint32_t len = sock_get32(c->in + 4);
            if (len == 0 || len > AUTH_MAX) {
                refused(sv, c->peer, "its MUNGE credential has an impossible length");
                return -1;
            }
            if (c->inlen < 8 + (size_t)len)
                return 0;
            char *cred = malloc((size_t)len + 1);
            if (!cred)
                return -1;
            memcpy(cred, c->in + 8, len);
            cred[len] = '\0';
            int r = on_auth(sv, i, cred);
            free(cred);
            if (r < 0)
                return -1;
            memmove(c->in, c->in + 8 + len, c->inlen - 8 - len);
            c->inlen -= 8 + len;
            continue;
        }
        if (!c->s) {
            /* a stranger is turned away as soon as its first bytes show it */
            if (c->inlen >= 4 && memcmp(c->in, MAGIC, 4) != 0) {
                refused(sv, c->peer, "not a fabcoll client");
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
        uint32_t type = sock_get32(c->in), len = sock_get32(c->in + 4);
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

/* Drops the connections that sent no valid hello for more than age s. */
static void drop_silent(struct boot_server *sv, double now, double age, const char *why)
{
    for (int i = sv->nconns - 1; i >= 0; i--)
        if (!sv->conns[i]->s && now - sv->conns[i]->t0 > age) {
            refused(sv, sv->conns[i]->peer, why);
            conn_close(sv, i);
        }
}

static void check_timeouts(struct boot_server *sv)
{
    double t = sock_now_s();
    drop_silent(sv, t, HELLO_TIMEOUT, "it sent no valid hello in time");
    for (struct srv_sess *s = sv->sessions; s;) {
        struct srv_sess *next = s->next;
        if (sv->join_timeout > 0 && t - s->t0 > sv->join_timeout) {
            char miss[256];
            list_missing(s, s->seen, miss, sizeof(miss));
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
    c->t0 = sock_now_s();
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
        /* out of descriptors: leave the pending connections in the backlog
         * for a while instead of waking for them again at once */
        int paused = sv->accept_pause_until > sock_now_s();
        pf[0].fd = paused ? -1 : sv->lfd;
        pf[0].events = POLLIN;
        pf[0].revents = 0;
        pf[1].fd = sv->wake[0];
        pf[1].events = POLLIN;
        int nc = sv->nconns;
        for (int i = 0; i < nc; i++) {
            pf[i + 2].fd = sv->conns[i]->fd;
            pf[i + 2].events = POLLIN;
            pf[i + 2].revents = 0;
        }
        int pr = poll(pf, (nfds_t)nc + 2, paused ? 50 : 200);
        if (pr < 0 && errno != EINTR)
            break;
        if (pr > 0 && (pf[0].revents & POLLIN)) {
            struct sockaddr_storage ss;
            socklen_t sl = sizeof(ss);
            int fd = accept4(sv->lfd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd >= 0 && add_conn(sv, fd, &ss) != 0)
                close(fd);
            if (fd < 0 && (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                           errno == ENOMEM)) {
                if (sv->nfd_pauses++ == 0)
                    FC_WARN(LOG_BOOT, "rendezvous: accept failed: %m; %d connections open; "
                            "dropping the ones that sent no hello and pausing (raise ulimit "
                            "-n if the job needs more)", sv->nconns);
                /* a client sends its hello as it connects: the silent ones
                 * that hold descriptors are strangers, and go */
                double now = sock_now_s();
                drop_silent(sv, now, STRANGER_AGE, "it sent nothing while descriptors ran out");
                sv->accept_pause_until = now + 0.05;
            }
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
    if (sv->nrefused > 1)
        FC_WARN(LOG_BOOT, "rendezvous: refused %d connections in all (not fabcoll clients of "
                "this job)", sv->nrefused);
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

fc_result_t boot_server_start(const uint8_t secret[BOOT_SECRET_LEN], const char *bind_ip, int port,
                              int single_session, double join_timeout, struct boot_server **out,
                              int *bound_port)
{
    return boot_server_start_auth(secret, NULL, bind_ip, port, single_session, join_timeout, out,
                                  bound_port);
}

fc_result_t boot_server_start_auth(const uint8_t secret[BOOT_SECRET_LEN],
                                   const struct boot_auth *auth, const char *bind_ip, int port,
                                   int single_session, double join_timeout,
                                   struct boot_server **out, int *bound_port)
{
    struct boot_server *sv = calloc(1, sizeof(*sv));
    if (!sv)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory for the rendezvous");
    memcpy(sv->secret, secret, BOOT_SECRET_LEN);
    if (auth)
        sv->auth = *auth;
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
    if (bind_ip && inet_pton(AF_INET, bind_ip, &a.sin_addr) != 1) {
        close(sv->lfd);
        free(sv);
        return FC_ERR(FC_ERR_INVALID_ARGUMENT, "the rendezvous address %s is not an IPv4 address",
                      bind_ip);
    }
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
    double end = sock_now_s() + timeout;
    while (!__atomic_load_n(&sv->finished, __ATOMIC_ACQUIRE) && sock_now_s() < end) {
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
