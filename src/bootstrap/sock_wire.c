/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The TCP rendezvous on the wire: the framing its server (sock_server.c)
 * and its clients (sock_client.c) share, and the helpers boot.h offers
 * fc_run and the tests: the job secret's random bytes and hex form, and
 * this host's address.
 *
 * Protocol (network byte order; the constants are in sock_int.h):
 *   client -> server  HELLO  "FCB1", version, secret[32], session, rank, nranks
 *   server -> client  ACK | ERROR(text)
 *   client -> server  CONTRIB(len, blob) ... BYE
 *   server -> client  RESULT(nranks * len)  once every rank of the session
 *                     contributed to the round
 * The HELLO is HELLO_LEN bytes; every other message is its type and its
 * length (32 bits each), then the payload.
 *
 * Bytes only: nothing here knows sessions, ranks or connections beyond the
 * socket it is given, and it calls neither the server nor the client; both
 * call into it.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include "sock_int.h"

double sock_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void sock_put32(unsigned char *p, uint32_t v)
{
    v = htonl(v);
    memcpy(p, &v, 4);
}

uint32_t sock_get32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return ntohl(v);
}

/* Writes all of buf to a (possibly nonblocking) socket within timeout s. */
int sock_send_all(int fd, const void *buf, size_t len, double timeout)
{
    const char *p = buf;
    double end = sock_now_s() + timeout;
    while (len > 0) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
            return -1;
        double left = end - sock_now_s();
        if (left <= 0)
            return -1;
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        poll(&pfd, 1, left > 60.0 ? 60000 : (int)(left * 1000) + 1);
    }
    return 0;
}

/* Reads exactly len bytes within timeout s; 0 ok, -1 error/EOF, -2 timeout. */
int sock_recv_all(int fd, void *buf, size_t len, double timeout)
{
    char *p = buf;
    double end = sock_now_s() + timeout;
    while (len > 0) {
        double left = end - sock_now_s();
        if (left <= 0)
            return -2;
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int pr = poll(&pfd, 1, left > 60.0 ? 60000 : (int)(left * 1000) + 1);
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

int sock_send_msg(int fd, uint32_t type, const void *payload, size_t len, double timeout)
{
    unsigned char h[8];
    sock_put32(h, type);
    sock_put32(h + 4, (uint32_t)len);
    if (sock_send_all(fd, h, 8, timeout))
        return -1;
    return len ? sock_send_all(fd, payload, len, timeout) : 0;
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
