/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Bootstrap: how ranks find each other before the fabric is up.
 *
 * Every method offers the same thing, an allgather of fixed-size blobs
 * among the ranks of a job, which communicator creation runs twice (who is
 * where and which providers they have; then endpoint addresses). Methods:
 *   socket  a TCP rendezvous: fc_get_unique_id's process or fc_run serves
 *           it, or rank 0 under plain srun; a rank must present the job's
 *           secret or it is turned away without disturbing the job;
 *   pmix    PMIx put/commit/fence/get (srun --mpi=pmix, Open MPI's mpirun);
 *   pmi2    Slurm's PMI-2 (srun --mpi=pmi2).
 */
#ifndef FC_BOOT_H
#define FC_BOOT_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "fabcoll.h"

struct boot;
struct boot_ops {
    const char *name;
    /* all receives nranks * len bytes: rank r's blob at r * len. Every rank
     * passes the same len. */
    fc_result_t (*allgather)(struct boot *b, const void *mine, size_t len, void *all);
    void (*close)(struct boot *b);
};
struct boot {
    const struct boot_ops *ops;
    int rank, nranks;
    char how[256]; /* for the log: "fc_run rendezvous at 127.0.0.1:4321" */
};

#define BOOT_SECRET_LEN 32

/* fc_comm_init: PMIx, then PMI-2, then the fc_run environment, then Slurm's
 * (or what FC_BOOTSTRAP forces). Logs which one and why. */
fc_result_t boot_from_launcher(const cfg_t *cfg, struct boot **out);
/* fc_get_unique_id: starts a rendezvous thread in this process. */
fc_result_t boot_make_unique_id(const cfg_t *cfg, fc_unique_id_t *id);
/* fc_comm_init_rank. */
fc_result_t boot_from_unique_id(const cfg_t *cfg, const fc_unique_id_t *id, int nranks, int rank,
                                struct boot **out);

/* PMIx (pmix.c, built when configure finds PMIx). */
fc_result_t boot_pmix_open(const cfg_t *cfg, struct boot **out);
/* Slurm's PMI-2 (pmi2.c, built when configure finds <slurm/pmi2.h> and -lpmi2). */
fc_result_t boot_pmi2_open(const cfg_t *cfg, struct boot **out);

/* ---- MUNGE (auth.c): who is at the other end of a rendezvous connection -----
 * Under plain srun each side proves its uid with a credential from munged
 * before the client presents anything of the job's; a listener of another
 * user (a port squatter) or a client of another user is refused. */
#define BOOT_NONCE_LEN 16
struct boot_auth {
    char key[192];    /* the rendezvous a credential must name (job, step, uid, session) */
    char socket[256]; /* munged's socket; "" = libmunge's default */
};
/* Loads libmunge and checks that munged answers; fails naming why and the
 * fix (srun --mpi=pmix/pmi2, munged, FC_BOOT_AUTH=none). */
fc_result_t boot_auth_open(const char *socket, const char *key, struct boot_auth *out);
/* The connection's two ends, "client_ip:port>server_ip:port", as one end
 * (server_side or not) sees them. 0 ok, -1 error. */
int boot_auth_tuple(int fd, int server_side, char *buf, size_t len);
/* A credential (malloc'd, NUL-terminated) for role 'c' (client) or 's'
 * (server) on this connection. 0 ok; -1 with why. */
int boot_auth_encode(const struct boot_auth *a, char role, const uint8_t nonce[BOOT_NONCE_LEN],
                     const char *tuple, char **cred, char *why, size_t len);
/* Checks the other side's credential: it decodes (once: munged refuses a
 * replay), its uid is ours, it names this rendezvous, role and tuple. Role
 * 'c': nonce is set from it; role 's': it must carry nonce. uid: the
 * credential's (or -1). 0 ok; -1 with why. */
int boot_auth_check(const struct boot_auth *a, const char *cred, char role, const char *tuple,
                    uint8_t nonce[BOOT_NONCE_LEN], unsigned *uid, char *why, size_t len);

/* ---- the socket rendezvous (sock_server.c, sock_client.c, sock_wire.c) ---- */
struct boot_server;
/* Listens on port (0: any) of the IPv4 address bind_ip (NULL: of all
 * interfaces). single_session: serve one session and stop when its ranks
 * have left (fc_get_unique_id); else serve sessions until boot_server_stop
 * (fc_run). Connections that are not fabcoll clients of this job are
 * refused and counted (one warning for the first, a count at the end); when
 * the process runs out of descriptors, accepting pauses instead of spinning. */
fc_result_t boot_server_start(const uint8_t secret[BOOT_SECRET_LEN], const char *bind_ip, int port,
                              int single_session, double join_timeout, struct boot_server **out,
                              int *bound_port);
/* The same, asking every client for a MUNGE credential first (auth copied). */
fc_result_t boot_server_start_auth(const uint8_t secret[BOOT_SECRET_LEN],
                                   const struct boot_auth *auth, const char *bind_ip, int port,
                                   int single_session, double join_timeout,
                                   struct boot_server **out, int *bound_port);
void boot_server_stop(struct boot_server *s);
/* For a single-session server started with an owner (out != NULL): waits
 * (at most timeout s) for its session to end, then frees it. */
void boot_server_wait(struct boot_server *s, double timeout);
/* Called by an owned single-session server's thread when its session ends:
 * 1 when nobody owns it any more (then the thread frees the server and
 * nobody may touch it), 0 when its owner will boot_server_wait. */
typedef int (*boot_server_end_fn)(struct boot_server *s);
void boot_server_on_end(struct boot_server *s, boot_server_end_fn fn);
/* The client b closes only after server s (this process's) is done. */
void boot_sock_adopt_server(struct boot *b, struct boot_server *s);

/* Connects to a rendezvous. host: name or address; ports: candidates tried
 * in order (a server that refuses the secret sends us to the next). */
fc_result_t boot_sock_connect(const char *host, const int *ports, int nports,
                              const uint8_t secret[BOOT_SECRET_LEN], uint32_t session, int rank,
                              int nranks, double timeout, struct boot **out);
/* The same with MUNGE (auth not NULL): a port whose listener does not prove
 * it runs as this user is warned about once, refused and skipped. */
fc_result_t boot_sock_connect_auth(const char *host, const int *ports, int nports,
                                   const uint8_t secret[BOOT_SECRET_LEN],
                                   const struct boot_auth *auth, uint32_t session, int rank,
                                   int nranks, double timeout, struct boot **out);

/* ---- the hang report's channel (report.c) ----------------------------------
 * What a rank was doing when its collective timed out, sent over TCP to one
 * collector (a thread in the top-level rank 0's process), never over the
 * fabric. */
#define BOOT_TOKEN_LEN 16
#define BOOT_REPORT_MAGIC 0x46434852u /* "FCHR" */
#define BOOT_REPORT_WAIT 16
struct boot_report {
    uint32_t magic;
    uint8_t token[BOOT_TOKEN_LEN]; /* the collector's: strangers are ignored */
    uint32_t comm_id;
    int32_t rank, nranks;          /* in that communicator */
    int32_t pid;
    uint64_t seq;                  /* the call's sequence number */
    uint32_t ndone, nsteps;        /* its schedule's steps */
    int32_t nwait;                 /* communicator ranks it waits for (the first
                                      BOOT_REPORT_WAIT in wait) */
    int32_t wait[BOOT_REPORT_WAIT];
    double idle_s;                 /* how long it had gone without progress */
    char host[64];
    char desc[200];                /* "allreduce #7 (ring, 4096 x float32)" */
};
struct boot_collector;
/* Listens on ip (port chosen by the system) with a thread; writes the
 * port and the token reports must carry. */
fc_result_t boot_collector_start(const char *ip, struct boot_collector **out, int *port,
                                 uint8_t token[BOOT_TOKEN_LEN]);
void boot_collector_stop(struct boot_collector *c); /* NULL: nothing */
/* Takes the reports of communicator comm_id (n ranks) out of c into out[rank]
 * (magic 0 where none came), waiting until all n are in or grace seconds
 * have passed; returns how many came. */
int boot_collector_take(struct boot_collector *c, uint32_t comm_id, int n, double grace,
                        struct boot_report *out);
/* Sends r to the collector at ip:port within timeout s; 0 when sent. */
int boot_report_send(const char *ip, int port, const struct boot_report *r, double timeout);

/* helpers shared with fc_run and the tests */
int boot_hex_encode(const uint8_t *in, size_t n, char *out, size_t outlen);
int boot_hex_decode(const char *in, uint8_t *out, size_t n);
int boot_random(uint8_t *out, size_t n);
/* A routable IPv4 address of this host (FC_IFACE's if set), else 127.0.0.1. */
void boot_local_address(const cfg_t *cfg, char *buf, size_t len);

#endif /* FC_BOOT_H */
