/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MUNGE for the rendezvous of plain srun: each side of a connection proves
 * its uid to the other with a credential that munged signs, before the
 * client sends anything of the job's.
 *
 * A credential carries "fabcoll-auth-1 ROLE KEY NONCE TUPLE": the role (c
 * from a client, s from the server), the job's key (job id, step, uid,
 * session), the client's random nonce and the connection's two ends as
 * each side sees them. munged lets a credential be decoded only once, the
 * nonce ties the server's answer to this client's question, and the tuple
 * ties both to this connection: a process that listens on a port of the
 * job and relays what it gets to the real rank 0 presents the wrong ends.
 *
 * libmunge.so.2 is loaded at run time (every node of a Slurm cluster that
 * authenticates with MUNGE has it), so the build needs no MUNGE headers.
 * A context is made per call: the server's thread and the ranks' threads
 * never share one.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <unistd.h>

#include "boot.h"
#include "log.h"

/* what libmunge's munge.h declares, as far as it is used here */
typedef struct munge_ctx *munge_ctx_t;
#define MUNGE_OPT_SOCKET 8
#define MUNGE_CRED_REPLAYED 17

static struct {
    void *lib;
    char why[256];
    munge_ctx_t (*ctx_create)(void);
    void (*ctx_destroy)(munge_ctx_t);
    int (*ctx_set)(munge_ctx_t, int, ...);
    const char *(*ctx_strerror)(munge_ctx_t);
    int (*encode)(char **, munge_ctx_t, const void *, int);
    int (*decode)(const char *, munge_ctx_t, void **, int *, uid_t *, gid_t *);
} mg;
static pthread_once_t mg_once = PTHREAD_ONCE_INIT;

static void mg_load(void)
{
    mg.lib = dlopen("libmunge.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!mg.lib) {
        snprintf(mg.why, sizeof(mg.why), "libmunge.so.2 cannot be loaded (%s)", dlerror());
        return;
    }
    *(void **)&mg.ctx_create = dlsym(mg.lib, "munge_ctx_create");
    *(void **)&mg.ctx_destroy = dlsym(mg.lib, "munge_ctx_destroy");
    *(void **)&mg.ctx_set = dlsym(mg.lib, "munge_ctx_set");
    *(void **)&mg.ctx_strerror = dlsym(mg.lib, "munge_ctx_strerror");
    *(void **)&mg.encode = dlsym(mg.lib, "munge_encode");
    *(void **)&mg.decode = dlsym(mg.lib, "munge_decode");
    if (!mg.ctx_create || !mg.ctx_destroy || !mg.ctx_set || !mg.ctx_strerror || !mg.encode ||
        !mg.decode) {
        snprintf(mg.why, sizeof(mg.why), "libmunge.so.2 lacks the munge_* functions");
        dlclose(mg.lib);
        mg.lib = NULL;
    }
}

static munge_ctx_t ctx_new(const struct boot_auth *a, char *why, size_t len)
{
    munge_ctx_t ctx = mg.ctx_create();
    if (!ctx) {
        snprintf(why, len, "munge_ctx_create failed");
        return NULL;
    }
    if (a->socket[0] && mg.ctx_set(ctx, MUNGE_OPT_SOCKET, a->socket) != 0) {
        snprintf(why, len, "munge_ctx_set(socket %s): %s", a->socket, mg.ctx_strerror(ctx));
        mg.ctx_destroy(ctx);
        return NULL;
    }
    return ctx;
}

static int encode(const struct boot_auth *a, const char *payload, char **cred, char *why,
                  size_t len)
{
    munge_ctx_t ctx = ctx_new(a, why, len);
    if (!ctx)
        return -1;
    *cred = NULL;
    int e = mg.encode(cred, ctx, payload, (int)strlen(payload));
    if (e != 0) {
        snprintf(why, len, "munge_encode: %s", mg.ctx_strerror(ctx));
        free(*cred);
        *cred = NULL;
    }
    mg.ctx_destroy(ctx);
    return e ? -1 : 0;
}

fc_result_t boot_auth_open(const char *socket, const char *key, struct boot_auth *out)
{
    pthread_once(&mg_once, mg_load);
    memset(out, 0, sizeof(*out));
    snprintf(out->key, sizeof(out->key), "%s", key);
    snprintf(out->socket, sizeof(out->socket), "%s", socket ? socket : "");
    if (!mg.lib)
        return FC_ERR(FC_ERR_BOOTSTRAP,
                      "srun without PMI: the rendezvous is authenticated with MUNGE, but %s. "
                      "Fix: srun --mpi=pmix or --mpi=pmi2 (the launcher then carries the "
                      "exchange), or install MUNGE (libmunge2) as Slurm's auth/munge does, or "
                      "FC_BOOT_AUTH=none to accept a rendezvous that other users of the "
                      "cluster can join",
                      mg.why);
    char *cred = NULL, why[256];
    if (encode(out, "fabcoll-probe", &cred, why, sizeof(why)) != 0)
        return FC_ERR(FC_ERR_BOOTSTRAP,
                      "srun without PMI: the rendezvous is authenticated with MUNGE, but munged "
                      "does not answer at %s (%s). Fix: srun --mpi=pmix or --mpi=pmi2, start "
                      "munged (FC_MUNGE_SOCKET names a socket other than libmunge's default), "
                      "or FC_BOOT_AUTH=none to accept a rendezvous that other users of the "
                      "cluster can join",
                      out->socket[0] ? out->socket : "libmunge's default socket", why);
    free(cred);
    return FC_SUCCESS;
}

static void addr_str(const struct sockaddr_storage *ss, char *buf, size_t len)
{
    char host[64] = "?";
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
    snprintf(buf, len, "%s:%d", host, port);
}

int boot_auth_tuple(int fd, int server_side, char *buf, size_t len)
{
    struct sockaddr_storage me, peer;
    socklen_t l1 = sizeof(me), l2 = sizeof(peer);
    if (getsockname(fd, (struct sockaddr *)&me, &l1) != 0 ||
        getpeername(fd, (struct sockaddr *)&peer, &l2) != 0)
        return -1;
    char a[80], b[80];
    addr_str(server_side ? &peer : &me, a, sizeof(a));
    addr_str(server_side ? &me : &peer, b, sizeof(b));
    snprintf(buf, len, "%s>%s", a, b);
    return 0;
}

static void payload(const struct boot_auth *a, char role, const uint8_t nonce[BOOT_NONCE_LEN],
                    const char *tuple, char *buf, size_t len)
{
    char hex[2 * BOOT_NONCE_LEN + 1];
    boot_hex_encode(nonce, BOOT_NONCE_LEN, hex, sizeof(hex));
    snprintf(buf, len, "fabcoll-auth-1 %c %s %s %s", role, a->key, hex, tuple);
}

int boot_auth_encode(const struct boot_auth *a, char role, const uint8_t nonce[BOOT_NONCE_LEN],
                     const char *tuple, char **cred, char *why, size_t len)
{
    char p[512];
    payload(a, role, nonce, tuple, p, sizeof(p));
    return encode(a, p, cred, why, len);
}

int boot_auth_check(const struct boot_auth *a, const char *cred, char role, const char *tuple,
                    uint8_t nonce[BOOT_NONCE_LEN], unsigned *uid_out, char *why, size_t len)
{
    *uid_out = (unsigned)-1;
    munge_ctx_t ctx = ctx_new(a, why, len);
    if (!ctx)
        return -1;
    void *buf = NULL;
    int blen = 0;
    uid_t uid = (uid_t)-1;
    gid_t gid = (gid_t)-1;
    int e = mg.decode(cred, ctx, &buf, &blen, &uid, &gid);
    int rc = -1;
    if (e != 0) {
        snprintf(why, len, "its MUNGE credential does not decode (%s%s)", mg.ctx_strerror(ctx),
                 e == MUNGE_CRED_REPLAYED ? ": someone presented it before" : "");
        goto out;
    }
    *uid_out = (unsigned)uid;
    if (uid != getuid()) {
        snprintf(why, len, "its MUNGE credential is for uid %u, not %u (this job's user)",
                 (unsigned)uid, (unsigned)getuid());
        goto out;
    }
    char got[512], want[512];
    size_t n = blen > 0 && (size_t)blen < sizeof(got) ? (size_t)blen : 0;
    memcpy(got, buf ? buf : "", n);
    got[n] = '\0';
    if (role == 'c') {
        /* the client's nonce is what it asks the server to sign back */
        char hex[2 * BOOT_NONCE_LEN + 1];
        char fmt[64];
        snprintf(fmt, sizeof(fmt), "fabcoll-auth-1 c %%*s %%%ds", 2 * BOOT_NONCE_LEN);
        if (sscanf(got, fmt, hex) != 1 || boot_hex_decode(hex, nonce, BOOT_NONCE_LEN) != 0) {
            snprintf(why, len, "its MUNGE credential does not carry a fabcoll client's request");
            goto out;
        }
    }
    payload(a, role, nonce, tuple, want, sizeof(want));
    if (strcmp(got, want) != 0) {
        snprintf(why, len, "its MUNGE credential is for another rendezvous or connection "
                 "(it says '%.160s', this end expects '%.160s')", got, want);
        goto out;
    }
    rc = 0;
out:
    free(buf);
    mg.ctx_destroy(ctx);
    return rc;
}
