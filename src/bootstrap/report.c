/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The hang report's channel: when a collective times out, each rank sends
 * what it was doing to one collector (a thread of the top-level rank 0's
 * process) over a TCP connection of its own, not over the fabric, which may
 * be what broke. The collector keeps the reports that carry the job's token
 * until the rank that prints the table takes them (boot_collector_take).
 */
#define _GNU_SOURCE
#include "boot.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "sock_int.h"

#define REPORT_KEEP 4096      /* reports held at most */
#define REPORT_MAX_AGE 600.0  /* seconds a report is kept for a table */

struct boot_collector {
    int lfd, wake[2];
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    uint8_t token[BOOT_TOKEN_LEN];
    struct boot_report *r;
    double *at;
    int n;
};

static void keep(struct boot_collector *c, const struct boot_report *in)
{
    double now = sock_now_s();
    pthread_mutex_lock(&c->lock);
    int k = 0;
    for (int i = 0; i < c->n; i++) /* forget the old, and an earlier report of this rank */
        if (now - c->at[i] < REPORT_MAX_AGE &&
            !(c->r[i].comm_id == in->comm_id && c->r[i].rank == in->rank)) {
            c->r[k] = c->r[i];
            c->at[k++] = c->at[i];
        }
    c->n = k;
    if (c->n < REPORT_KEEP) {
        c->r[c->n] = *in;
        c->r[c->n].host[sizeof(in->host) - 1] = '\0';
        c->r[c->n].desc[sizeof(in->desc) - 1] = '\0';
        c->at[c->n++] = now;
    }
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

static void *collector_main(void *arg)
{
    struct boot_collector *c = arg;
    log_thread_name("fc-hangreport");
    for (;;) {
        struct pollfd p[2] = {{c->lfd, POLLIN, 0}, {c->wake[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents)
            break;
        if (!(p[0].revents & POLLIN))
            continue;
        int fd = accept4(c->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE)
                poll(NULL, 0, 50); /* out of descriptors: let them drain */
            continue;
        }
        struct boot_report in;
        /* one report per connection, within a second: a stranger that
         * sends nothing holds the thread no longer */
        if (sock_recv_all(fd, &in, sizeof(in), 1.0) == 0 && in.magic == BOOT_REPORT_MAGIC &&
            memcmp(in.token, c->token, BOOT_TOKEN_LEN) == 0 && in.nranks > 0 &&
            in.rank >= 0 && in.rank < in.nranks)
            keep(c, &in);
        close(fd);
    }
    return NULL;
}

fc_result_t boot_collector_start(const char *ip, struct boot_collector **out, int *port,
                                 uint8_t token[BOOT_TOKEN_LEN])
{
    struct boot_collector *c = calloc(1, sizeof(*c));
    if (!c)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    c->lfd = c->wake[0] = c->wake[1] = -1;
    c->r = calloc(REPORT_KEEP, sizeof(*c->r));
    c->at = calloc(REPORT_KEEP, sizeof(*c->at));
    fc_result_t rc = FC_SUCCESS;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t sl = sizeof(sa);
    if (!c->r || !c->at) {
        rc = FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
        goto fail;
    }
    if (boot_random(c->token, BOOT_TOKEN_LEN) != 0) {
        rc = FC_ERR(FC_ERR_SYSTEM, "no random bytes for the hang report's token");
        goto fail;
    }
    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1) {
        rc = FC_ERR(FC_ERR_INVALID_ARGUMENT, "%s is not an IPv4 address", ip);
        goto fail;
    }
    c->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->lfd < 0 || bind(c->lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        listen(c->lfd, 128) != 0 || getsockname(c->lfd, (struct sockaddr *)&sa, &sl) != 0 ||
        pipe2(c->wake, O_CLOEXEC) != 0) {
        rc = FC_ERR(FC_ERR_SYSTEM, "cannot listen on %s for hang reports: %m", ip);
        goto fail;
    }
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    if (pthread_create(&c->thread, NULL, collector_main, c) != 0) {
        pthread_mutex_destroy(&c->lock);
        pthread_cond_destroy(&c->cond);
        rc = FC_ERR(FC_ERR_SYSTEM, "cannot start the hang report's thread");
        goto fail;
    }
    memcpy(token, c->token, BOOT_TOKEN_LEN);
    *port = ntohs(sa.sin_port);
    *out = c;
    return FC_SUCCESS;
fail:
    if (c->lfd >= 0)
        close(c->lfd);
    if (c->wake[0] >= 0) {
        close(c->wake[0]);
        close(c->wake[1]);
    }
    free(c->r);
    free(c->at);
    free(c);
    return rc;
}

void boot_collector_stop(struct boot_collector *c)
{
    if (!c)
        return;
    ssize_t w = write(c->wake[1], "x", 1);
    (void)w;
    pthread_join(c->thread, NULL);
    close(c->lfd);
    close(c->wake[0]);
    close(c->wake[1]);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    free(c->r);
    free(c->at);
    free(c);
}

int boot_collector_take(struct boot_collector *c, uint32_t comm_id, int n, double grace,
                        struct boot_report *out)
{
    memset(out, 0, (size_t)n * sizeof(*out));
    double end = sock_now_s() + grace;
    pthread_mutex_lock(&c->lock);
    int got = 0;
    for (;;) {
        got = 0;
        for (int i = 0; i < c->n; i++)
            if (c->r[i].comm_id == comm_id && c->r[i].nranks == n)
                got++;
        double now = sock_now_s();
        if (got >= n || now >= end)
            break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double d = end - now < 0.05 ? end - now : 0.05;
        ts.tv_nsec += (long)(d * 1e9);
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        pthread_cond_timedwait(&c->cond, &c->lock, &ts);
    }
    got = 0;
    int k = 0;
    for (int i = 0; i < c->n; i++) {
        if (c->r[i].comm_id == comm_id && c->r[i].nranks == n) {
            out[c->r[i].rank] = c->r[i];
            got++;
            continue;
        }
        c->r[k] = c->r[i];
        c->at[k++] = c->at[i];
    }
    c->n = k;
    pthread_mutex_unlock(&c->lock);
    return got;
}

int boot_report_send(const char *ip, int port, const struct boot_report *r, double timeout)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
        return -1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    int ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EINPROGRESS;
    if (ok) {
        struct pollfd p = {fd, POLLOUT, 0};
        int e = 0;
        socklen_t el = sizeof(e);
        ok = poll(&p, 1, (int)(timeout * 1000)) == 1 &&
             getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) == 0 && e == 0;
    }
    if (ok)
        ok = sock_send_all(fd, r, sizeof(*r), timeout) == 0;
    close(fd);
    return ok ? 0 : -1;
}
