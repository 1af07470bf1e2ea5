/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Choosing a bootstrap: the unique id path, and the launcher detection of
 * fc_comm_init. In auto mode (FC_BOOTSTRAP unset), in this order:
 *   PMIx     PMIX_NAMESPACE is set: srun --mpi=pmix, Open MPI's mpirun;
 *   PMI-2    PMI_FD is set: srun --mpi=pmi2;
 *   fc_run   FC_RANK, FC_SIZE, FC_ROOT_ADDR are set;
 *   Slurm    SLURM_PROCID, SLURM_NTASKS, SLURM_JOB_ID and SLURM_STEP_ID are
 *            set: a task of plain srun (no PMI); rank 0 serves a rendezvous.
 * A PMIx or PMI-2 failure falls through to the next method. One exception:
 * fc_run sets its variables for its own children only, while launcher
 * variables are inherited by every descendant, so under `srun --mpi=pmix
 * fc_run -n 4 prog` each rank also sees the srun task's PMIX_* (every one
 * claiming the same PMIx rank). When fc_run's variables are all there, fc_run
 * is the innermost launcher and wins.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "boot.h"
#include "build_config.h"
#include "log.h"

#define UID_MAGIC "FCU1"

struct uid_wire {
    char magic[4];
    uint16_t port; /* network order */
    uint16_t pad;
    char host[48];
    uint8_t secret[BOOT_SECRET_LEN];
    uint32_t session;
};
_Static_assert(sizeof(struct uid_wire) <= FC_UNIQUE_ID_BYTES, "unique id too small");

/* Rendezvous servers this process started for its unique ids whose
 * sessions still run: a rank that joins through its own id takes its
 * server and keeps it alive until all have joined (boot_sock_adopt_server);
 * a server nobody took (the id's maker does not join) leaves the table when
 * its session ends and frees itself (uid_server_end). */
#define UID_KEEP 64
static struct {
    pthread_mutex_t lock;
    uint8_t secret[UID_KEEP][BOOT_SECRET_LEN];
    struct boot_server *srv[UID_KEEP];
    pid_t pid[UID_KEEP]; /* a forked child has the table, not the thread */
} uid_servers = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int uid_server_keep(const uint8_t *secret, struct boot_server *srv)
{
    int kept = 0;
    pthread_mutex_lock(&uid_servers.lock);
    for (int i = 0; i < UID_KEEP && !kept; i++)
        if (!uid_servers.srv[i] || uid_servers.pid[i] != getpid()) {
            uid_servers.srv[i] = srv;
            uid_servers.pid[i] = getpid();
            memcpy(uid_servers.secret[i], secret, BOOT_SECRET_LEN);
            kept = 1;
        }
    pthread_mutex_unlock(&uid_servers.lock);
    return kept;
}

static struct boot_server *uid_server_take(const uint8_t *secret)
{
    struct boot_server *s = NULL;
    pthread_mutex_lock(&uid_servers.lock);
    for (int i = 0; i < UID_KEEP && !s; i++)
        if (uid_servers.srv[i] && uid_servers.pid[i] == getpid() &&
            !memcmp(uid_servers.secret[i], secret, BOOT_SECRET_LEN)) {
            s = uid_servers.srv[i];
            uid_servers.srv[i] = NULL;
        }
    pthread_mutex_unlock(&uid_servers.lock);
    return s;
}

/* The server's session ended (in its thread): still in the table means no
 * rank of this process took it, so nobody will wait for it. */
static int uid_server_end(struct boot_server *srv)
{
    int orphan = 0;
    pthread_mutex_lock(&uid_servers.lock);
    for (int i = 0; i < UID_KEEP && !orphan; i++)
        if (uid_servers.srv[i] == srv && uid_servers.pid[i] == getpid()) {
            uid_servers.srv[i] = NULL;
            orphan = 1;
        }
    pthread_mutex_unlock(&uid_servers.lock);
    return orphan;
}

fc_result_t boot_make_unique_id(const cfg_t *cfg, fc_unique_id_t *id)
{
    struct uid_wire w;
    memset(&w, 0, sizeof(w));
    memcpy(w.magic, UID_MAGIC, 4);
    if (boot_random(w.secret, BOOT_SECRET_LEN) != 0)
        return FC_ERR(FC_ERR_SYSTEM, "getrandom() failed: %m");
    int port = 0;
    struct boot_server *srv = NULL;
    fc_result_t rc = boot_server_start(w.secret, NULL, 0, 1, cfg->boot_timeout, &srv, &port);
    if (rc != FC_SUCCESS)
        return rc;
    if (!uid_server_keep(w.secret, srv)) {
        boot_server_stop(srv);
        return FC_ERR(FC_ERR_UNSUPPORTED,
                      "%d unique ids of this process still wait for their ranks to join; "
                      "initialise communicators from some of them (fc_comm_init_rank) first",
                      UID_KEEP);
    }
    boot_server_on_end(srv, uid_server_end);
    boot_local_address(cfg, w.host, sizeof(w.host));
    w.port = htons((uint16_t)port);
    memset(id, 0, sizeof(*id));
    memcpy(id->internal, &w, sizeof(w));
    FC_INFO(LOG_BOOT, "unique id: rendezvous served by this process at %s:%d", w.host, port);
    return FC_SUCCESS;
}

fc_result_t boot_from_unique_id(const cfg_t *cfg, const fc_unique_id_t *id, int nranks, int rank,
                                struct boot **out)
{
    struct uid_wire w;
    memcpy(&w, id->internal, sizeof(w));
    if (memcmp(w.magic, UID_MAGIC, 4) != 0 || w.host[sizeof(w.host) - 1] != '\0')
        return FC_ERR(FC_ERR_INVALID_ARGUMENT,
                      "the unique id is not one fc_get_unique_id made (was all of "
                      "fc_unique_id_t, %d bytes, broadcast intact?)",
                      FC_UNIQUE_ID_BYTES);
    int port = ntohs(w.port);
    fc_result_t rc = boot_sock_connect(w.host, &port, 1, w.secret, w.session, rank, nranks,
                                       cfg->boot_timeout, out);
    if (rc == FC_SUCCESS)
        boot_sock_adopt_server(*out, uid_server_take(w.secret));
    return rc;
}

/* Per process: the n-th fc_comm_init of every rank joins session n. */
static atomic_uint fcrun_session;

static fc_result_t from_fcrun(const cfg_t *cfg, struct boot **out)
{
    uint8_t secret[BOOT_SECRET_LEN];
    if (boot_hex_decode(cfg->fc_job_secret, secret, BOOT_SECRET_LEN) != 0)
        return FC_ERR(FC_ERR_BOOTSTRAP,
                      "FC_JOB_SECRET is missing or malformed (expected %d hex digits): start the "
                      "program with fc_run",
                      2 * BOOT_SECRET_LEN);
    char host[CFG_STR];
    snprintf(host, sizeof(host), "%s", cfg->fc_root_addr);
    char *colon = strrchr(host, ':');
    if (!colon || cfg->fc_rank < 0 || cfg->fc_size <= 0 || cfg->fc_rank >= cfg->fc_size)
        return FC_ERR(FC_ERR_BOOTSTRAP,
                      "fc_run environment is inconsistent: FC_RANK=%d FC_SIZE=%d "
                      "FC_ROOT_ADDR='%s' (expected host:port)",
                      cfg->fc_rank, cfg->fc_size, cfg->fc_root_addr);
    *colon = '\0';
    int port = atoi(colon + 1);
    uint32_t session = atomic_fetch_add(&fcrun_session, 1);
    fc_result_t rc = boot_sock_connect(host, &port, 1, secret, session, cfg->fc_rank,
                                       cfg->fc_size, cfg->boot_timeout, out);
    if (rc == FC_SUCCESS)
        snprintf((*out)->how, sizeof((*out)->how), "fc_run rendezvous at %.80s:%d, session %u",
                 host, port, session);
    return rc;
}

/* First host of a Slurm node list: "n[01-04,07],x" -> "n01". */
static int first_node(const char *list, char *out, size_t len)
{
    size_t o = 0;
    const char *p = list;
    while (*p && *p != ',' && *p != '[' && o + 1 < len)
        out[o++] = *p++;
    if (*p == '[') {
        p++;
        while (*p && *p != '-' && *p != ',' && *p != ']' && o + 1 < len)
            out[o++] = *p++;
    }
    out[o] = '\0';
    return o ? 0 : -1;
}

/* A 64-bit mix (splitmix64) to derive the job's port and secret. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t hash_str(const char *s, uint64_t seed)
{
    uint64_t h = mix64(seed);
    for (; *s; s++)
        h = mix64(h ^ (unsigned char)*s);
    return h;
}

#define SLURM_PORTS 8

/* Per process: the n-th plain-srun fc_comm_init of every rank is session n.
 * n feeds the ports and the secret, so a communicator created right after
 * another never reaches the previous one's rendezvous, which rank 0 still
 * serves until every rank has left it. */
static atomic_uint slurm_session;
static atomic_int slurm_warned; /* FC_BOOT_AUTH=none: warned once */

static fc_result_t from_slurm(const cfg_t *cfg, struct boot **out)
{
    char host[256];
    if (!cfg->slurm_nodelist[0] || first_node(cfg->slurm_nodelist, host, sizeof(host)) != 0)
        return FC_ERR(FC_ERR_BOOTSTRAP,
                      "under srun without PMI, fabcoll needs SLURM_STEP_NODELIST to find rank "
                      "0's node; it is '%s'. Fix: use srun --mpi=pmix, or fc_run",
                      cfg->slurm_nodelist);
    /* the job, step and session feed port and secret: another job, step or
     * communicator derives others */
    uint32_t session = atomic_fetch_add(&slurm_session, 1);
    char key[256];
    snprintf(key, sizeof(key), "fabcoll:%.40s.%.40s:%u:%u:%.140s", cfg->slurm_job_id,
             cfg->slurm_step_id, (unsigned)getuid(), session, cfg->slurm_nodelist);
    uint8_t secret[BOOT_SECRET_LEN];
    for (int i = 0; i < BOOT_SECRET_LEN / 8; i++) {
        uint64_t h = hash_str(key, 0x5eed0000u + (uint64_t)i);
        memcpy(secret + 8 * i, &h, 8);
    }
    int ports[SLURM_PORTS];
    int base = 20000 + (int)(hash_str(key, 7) % 30000);
    for (int i = 0; i < SLURM_PORTS; i++)
        ports[i] = base + i * 37;
    /* everyone can derive the ports and the secret: MUNGE proves who is on
     * the other end of each connection */
    struct boot_auth auth, *a = NULL;
    if (cfg->boot_auth == CFG_AUTH_MUNGE) {
        fc_result_t rc = boot_auth_open(cfg->munge_socket, key, &auth);
        if (rc != FC_SUCCESS)
            return rc;
        a = &auth;
    } else if (cfg->slurm_procid == 0 && !atomic_exchange(&slurm_warned, 1)) {
        /* once for the job: rank 0, its first communicator */
        FC_WARN(LOG_BOOT, "FC_BOOT_AUTH=none: plain srun's rendezvous (rank 0's node %s) uses a "
                "port and secret derived from the job id, which every user of the cluster can "
                "see: another user could join it or listen in rank 0's place. Use srun "
                "--mpi=pmix or --mpi=pmi2, or MUNGE (FC_BOOT_AUTH=munge)", host);
    }
    struct boot_server *srv = NULL;
    if (cfg->slurm_procid == 0) {
        fc_result_t rc = FC_ERR_SYSTEM;
        int bound = 0;
        for (int i = 0; i < SLURM_PORTS && rc != FC_SUCCESS; i++)
            rc = boot_server_start_auth(secret, a, NULL, ports[i], 1, cfg->boot_timeout, &srv,
                                        &bound);
        if (rc != FC_SUCCESS)
            return FC_ERR(FC_ERR_BOOTSTRAP,
                          "rank 0 could not listen on any of the %d ports derived from job "
                          "%s.%s (%d, %d, ...): %s. Fix: use srun --mpi=pmix",
                          SLURM_PORTS, cfg->slurm_job_id, cfg->slurm_step_id, ports[0], ports[1],
                          err_get());
        FC_INFO(LOG_BOOT, "srun without PMI: rank 0 serves the rendezvous on port %d (%s)",
                bound, a ? "MUNGE-authenticated" : "not authenticated: FC_BOOT_AUTH=none");
    }
    fc_result_t rc = boot_sock_connect_auth(host, ports, SLURM_PORTS, secret, a, session,
                                            cfg->slurm_procid, cfg->slurm_ntasks,
                                            cfg->boot_timeout, out);
    if (rc != FC_SUCCESS)
        boot_server_stop(srv);
    else
        boot_sock_adopt_server(*out, srv);
    if (rc == FC_SUCCESS)
        snprintf((*out)->how, sizeof((*out)->how),
                 "Slurm environment (job %.20s.%.20s), rendezvous at rank 0's node %.40s, "
                 "session %u, %s",
                 cfg->slurm_job_id, cfg->slurm_step_id, host, session,
                 a ? "MUNGE" : "unauthenticated");
    return rc;
}

fc_result_t boot_from_launcher(const cfg_t *cfg, struct boot **out)
{
    int forced = cfg->bootstrap;
    int have_pmix_env = cfg->pmix_namespace[0] != '\0';
    int have_pmi2_env = cfg->pmi_fd >= 0;
    int have_fcrun = cfg->fc_rank >= 0 && cfg->fc_size > 0 && cfg->fc_root_addr[0];
    /* a batch script or salloc shell has SLURM_PROCID=0 and the job's
     * SLURM_NTASKS too, but no step: only srun's tasks are ranks */
    int have_slurm = cfg->slurm_procid >= 0 && cfg->slurm_ntasks > 0 && cfg->slurm_job_id[0] &&
                     cfg->slurm_step_id[0];
    fc_result_t rc;

    if (forced == CFG_BOOT_AUTO && have_fcrun && (have_pmix_env || have_pmi2_env)) {
        FC_INFO(LOG_BOOT, "the fc_run environment (FC_RANK=%d FC_SIZE=%d) wins over %s inherited "
                "from an outer launcher: fc_run started this process",
                cfg->fc_rank, cfg->fc_size, have_pmix_env ? "PMIX_NAMESPACE" : "PMI_FD");
        return from_fcrun(cfg, out);
    }
    if (forced == CFG_BOOT_PMIX || (forced == CFG_BOOT_AUTO && have_pmix_env)) {
#ifdef HAVE_PMIX
        rc = boot_pmix_open(cfg, out);
        if (rc == FC_SUCCESS || forced == CFG_BOOT_PMIX)
            return rc;
        FC_INFO(LOG_BOOT, "PMIx bootstrap failed (%s); trying the next method", err_get());
#else
        if (forced == CFG_BOOT_PMIX)
            return FC_ERR(FC_ERR_UNSUPPORTED,
                          "FC_BOOTSTRAP=pmix, but this fabcoll was built without PMIx (install "
                          "libpmix-dev and rebuild)");
        FC_INFO(LOG_BOOT, "PMIX_NAMESPACE is set but this build has no PMIx support");
#endif
    }
    if (forced == CFG_BOOT_PMI2 || (forced == CFG_BOOT_AUTO && have_pmi2_env)) {
#ifdef HAVE_PMI2
        rc = boot_pmi2_open(cfg, out);
        if (rc == FC_SUCCESS || forced == CFG_BOOT_PMI2)
            return rc;
        FC_INFO(LOG_BOOT, "PMI-2 bootstrap failed (%s); trying the next method", err_get());
#else
        if (forced == CFG_BOOT_PMI2)
            return FC_ERR(FC_ERR_UNSUPPORTED,
                          "FC_BOOTSTRAP=pmi2, but this fabcoll was built without PMI-2 (install "
                          "libpmi2-0-dev and rebuild), or use srun --mpi=pmix");
        FC_INFO(LOG_BOOT, "PMI_FD is set but this build has no PMI-2 support");
#endif
    }
    if (forced == CFG_BOOT_FCRUN || (forced == CFG_BOOT_AUTO && have_fcrun)) {
        if (!have_fcrun)
            return FC_ERR(FC_ERR_BOOTSTRAP,
                          "FC_BOOTSTRAP=fc_run, but FC_RANK/FC_SIZE/FC_ROOT_ADDR are not set: "
                          "start the program with fc_run -n N");
        return from_fcrun(cfg, out);
    }
    if (forced == CFG_BOOT_SLURM || (forced == CFG_BOOT_AUTO && have_slurm)) {
        if (!have_slurm)
            return FC_ERR(FC_ERR_BOOTSTRAP,
                          "FC_BOOTSTRAP=slurm, but SLURM_PROCID/SLURM_NTASKS/SLURM_JOB_ID/"
                          "SLURM_STEP_ID are not all set: start the program with srun");
        return from_slurm(cfg, out);
    }
    if (cfg->slurm_job_id[0] && !cfg->slurm_step_id[0])
        return FC_ERR(FC_ERR_BOOTSTRAP,
                      "fc_comm_init found no launcher: SLURM_JOB_ID=%s is set but SLURM_STEP_ID "
                      "is not, so this process runs in a batch script or salloc shell, not as a "
                      "task of srun. Fix: start it with `srun -n N [--mpi=pmix] prog` (or "
                      "`fc_run -n N prog`, `mpirun -n N prog`)",
                      cfg->slurm_job_id);
    return FC_ERR(FC_ERR_BOOTSTRAP,
                  "fc_comm_init found no launcher: the process was not started by a PMIx server "
                  "(srun --mpi=pmix, mpirun; PMIX_NAMESPACE unset), by a PMI-2 server (srun "
                  "--mpi=pmi2; PMI_FD unset), by fc_run (FC_RANK unset), or by srun "
                  "(SLURM_PROCID unset). Fix: start it with `fc_run -n N prog`, `srun -n N "
                  "[--mpi=pmix] prog` or `mpirun -n N prog`, or use fc_get_unique_id + "
                  "fc_comm_init_rank");
}
