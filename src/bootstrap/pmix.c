/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * PMIx bootstrap: under `srun --mpi=pmix` or Open MPI's mpirun the PMIx
 * server already knows every process; each allgather round is a
 * put/commit/fence(collect)/get of one key per rank.
 *
 * The first communicator of a process uses PMIx and finalizes it when its
 * bootstrap closes, so afterwards the launcher no longer counts the process
 * as a PMIx client: a rank that later dies without PMIx_Finalize is then a
 * peer failure fabcoll reports (FC_ERR_PEER_FAILED on the others), where
 * Slurm and mpirun would kill the whole job step at once for a client that
 * vanished.
 *
 * Later communicators of the process do not initialize PMIx again. A second
 * PMIx_Init after the finalize races with the other ranks' finalize: the
 * server counts a rank whose old connection closes after this rank's next
 * fence began as departed from that fence, which then fails with PARTIAL
 * SUCCESS on some ranks and never completes on others (seen with two
 * fc_comm_init back to back under srun --mpi=pmix). Instead, the first
 * session also publishes rank 0's address, and later sessions meet at a
 * socket rendezvous there (as under plain srun), on ports and with a secret
 * derived from the PMIx namespace and the session number.
 */
#define _GNU_SOURCE
#include <pmix.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "boot.h"
#include "log.h"

#define ROOT_KEY "fc.root"
#define DERIVED_PORTS 8

struct boot_pmix {
    struct boot base;
    const cfg_t *cfg;
    pmix_proc_t me;
    uint32_t session, round;
};

/* the process's PMIx state, under pmix_lock */
static pthread_mutex_t pmix_lock = PTHREAD_MUTEX_INITIALIZER;
static int pmix_active; /* a PMIx bootstrap is open */
static int pmix_done;   /* the first session finalized: later ones derive */
static char pmix_ns[PMIX_MAX_NSLEN + 1];
static int pmix_rank = -1, pmix_size = -1;
static char pmix_root[64]; /* rank 0's address, published in the first session */
static uint32_t pmix_sessions;

static fc_result_t pmix_allgather(struct boot *b, const void *mine, size_t len, void *all)
{
    struct boot_pmix *p = (struct boot_pmix *)b;
    uint32_t round = p->round++;
    char key[PMIX_MAX_KEYLEN + 1];
    snprintf(key, sizeof(key), "fc.%u.%u", p->session, round);
    pmix_value_t v;
    memset(&v, 0, sizeof(v));
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = (char *)mine;
    v.data.bo.size = len;
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key, &v);
    char root[64] = "";
    if (rc == PMIX_SUCCESS && round == 0 && b->rank == 0) {
        /* where later sessions of this process meet (see the top) */
        boot_local_address(p->cfg, root, sizeof(root));
        pmix_value_t rv;
        memset(&rv, 0, sizeof(rv));
        rv.type = PMIX_STRING;
        rv.data.string = root;
        rc = PMIx_Put(PMIX_GLOBAL, ROOT_KEY, &rv);
    }
    if (rc == PMIX_SUCCESS)
        rc = PMIx_Commit();
    if (rc != PMIX_SUCCESS)
        return FC_ERR(FC_ERR_BOOTSTRAP, "PMIx_Put/Commit of %zu bytes (key %s) failed: %s", len,
                      key, PMIx_Error_string(rc));
    pmix_proc_t all_procs;
    PMIX_PROC_CONSTRUCT(&all_procs);
    PMIX_LOAD_PROCID(&all_procs, p->me.nspace, PMIX_RANK_WILDCARD);
    pmix_info_t info;
    PMIX_INFO_CONSTRUCT(&info);
    bool collect = true;
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    rc = PMIx_Fence(&all_procs, 1, &info, 1);
    PMIX_INFO_DESTRUCT(&info);
    if (rc != PMIX_SUCCESS)
        return FC_ERR(FC_ERR_BOOTSTRAP,
                      "PMIx_Fence (namespace %s, %d ranks) failed: %s: a rank may have exited",
                      p->me.nspace, b->nranks, PMIx_Error_string(rc));
    for (int r = 0; r < b->nranks; r++) {
        pmix_proc_t peer;
        PMIX_PROC_CONSTRUCT(&peer);
        PMIX_LOAD_PROCID(&peer, p->me.nspace, (pmix_rank_t)r);
        pmix_value_t *val = NULL;
        rc = PMIx_Get(&peer, key, NULL, 0, &val);
        if (rc != PMIX_SUCCESS || !val || val->type != PMIX_BYTE_OBJECT ||
            val->data.bo.size != len) {
            if (val)
                PMIX_VALUE_RELEASE(val);
            return FC_ERR(FC_ERR_BOOTSTRAP, "PMIx_Get of rank %d's %s failed: %s", r, key,
                          rc != PMIX_SUCCESS ? PMIx_Error_string(rc) : "wrong size or type");
        }
        memcpy((char *)all + (size_t)r * len, val->data.bo.bytes, len);
        PMIX_VALUE_RELEASE(val);
        if (round == 0 && r == 0) {
            val = NULL;
            rc = PMIx_Get(&peer, ROOT_KEY, NULL, 0, &val);
            pthread_mutex_lock(&pmix_lock);
            if (rc == PMIX_SUCCESS && val && val->type == PMIX_STRING && val->data.string)
                snprintf(pmix_root, sizeof(pmix_root), "%s", val->data.string);
            pthread_mutex_unlock(&pmix_lock);
            if (val)
                PMIX_VALUE_RELEASE(val);
        }
    }
    return FC_SUCCESS;
}

static void pmix_close(struct boot *b)
{
    PMIx_Finalize(NULL, 0);
    pthread_mutex_lock(&pmix_lock);
    pmix_active = 0;
    pmix_done = 1;
    pthread_mutex_unlock(&pmix_lock);
    free(b);
}

static const struct boot_ops pmix_ops = {"pmix", pmix_allgather, pmix_close};

/* splitmix64, to derive the later sessions' ports and secret */
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

/* A later session: a socket rendezvous at rank 0's address (see the top). */
static fc_result_t derived_open(const cfg_t *cfg, const char *ns, const char *root, int rank,
                                int size, uint32_t session, struct boot **out)
{
    char key[PMIX_MAX_NSLEN + 96];
    snprintf(key, sizeof(key), "fabcoll-pmix:%s:%u:%u", ns, (unsigned)getuid(), session);
    uint8_t secret[BOOT_SECRET_LEN];
    for (int i = 0; i < BOOT_SECRET_LEN / 8; i++) {
        uint64_t h = hash_str(key, 0x5eed0000u + (uint64_t)i);
        memcpy(secret + 8 * i, &h, 8);
    }
    int ports[DERIVED_PORTS];
    int base = 20000 + (int)(hash_str(key, 7) % 30000);
    for (int i = 0; i < DERIVED_PORTS; i++)
        ports[i] = base + i * 37;
    struct boot_server *srv = NULL;
    if (rank == 0) {
        fc_result_t rc = FC_ERR_SYSTEM;
        int bound = 0;
        for (int i = 0; i < DERIVED_PORTS && rc != FC_SUCCESS; i++)
            rc = boot_server_start(secret, NULL, ports[i], 1, cfg->boot_timeout, &srv, &bound);
        if (rc != FC_SUCCESS)
            return FC_ERR(FC_ERR_BOOTSTRAP,
                          "rank 0 could not listen on any of the %d ports derived from PMIx "
                          "namespace %s, session %u (%d, %d, ...): %s. Fix: free those ports, "
                          "or create the communicators with fc_comm_split",
                          DERIVED_PORTS, ns, session, ports[0], ports[1], err_get());
        FC_INFO(LOG_BOOT, "PMIx session %u: rank 0 serves the rendezvous on port %d", session,
                bound);
    }
    fc_result_t rc = boot_sock_connect(root, ports, DERIVED_PORTS, secret, session, rank, size,
                                       cfg->boot_timeout, out);
    if (rc != FC_SUCCESS)
        boot_server_stop(srv);
    else
        boot_sock_adopt_server(*out, srv);
    if (rc == FC_SUCCESS)
        snprintf((*out)->how, sizeof((*out)->how),
                 "PMIx namespace %.50s (session %u): rendezvous at rank 0's address %.40s", ns,
                 session, root);
    return rc;
}

fc_result_t boot_pmix_open(const cfg_t *cfg, struct boot **out)
{
    pthread_mutex_lock(&pmix_lock);
    if (pmix_active) {
        pthread_mutex_unlock(&pmix_lock);
        return FC_ERR(FC_ERR_BOOTSTRAP,
                      "a PMIx bootstrap is already open in this process: create communicators "
                      "one at a time (fc_comm_init is collective)");
    }
    if (pmix_done && pmix_root[0]) {
        char ns[sizeof(pmix_ns)], root[sizeof(pmix_root)];
        snprintf(ns, sizeof(ns), "%s", pmix_ns);
        snprintf(root, sizeof(root), "%s", pmix_root);
        int rank = pmix_rank, size = pmix_size;
        uint32_t session = pmix_sessions++;
        pthread_mutex_unlock(&pmix_lock);
        return derived_open(cfg, ns, root, rank, size, session, out);
    }
    pthread_mutex_unlock(&pmix_lock);

    struct boot_pmix *p = calloc(1, sizeof(*p));
    if (!p)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    pmix_status_t rc = PMIx_Init(&p->me, NULL, 0);
    if (rc != PMIX_SUCCESS) {
        free(p);
        return FC_ERR(FC_ERR_BOOTSTRAP,
                      "PMIx_Init failed: %s. Under srun, pass --mpi=pmix (srun --mpi=list shows "
                      "what this Slurm has)",
                      PMIx_Error_string(rc));
    }
    pmix_proc_t wild;
    PMIX_PROC_CONSTRUCT(&wild);
    PMIX_LOAD_PROCID(&wild, p->me.nspace, PMIX_RANK_WILDCARD);
    pmix_value_t *val = NULL;
    rc = PMIx_Get(&wild, PMIX_JOB_SIZE, NULL, 0, &val);
    if (rc != PMIX_SUCCESS || !val) {
        PMIx_Finalize(NULL, 0);
        free(p);
        return FC_ERR(FC_ERR_BOOTSTRAP,
                      "PMIx_Get(PMIX_JOB_SIZE) failed: %s. Fix: the PMIx server (srun "
                      "--mpi=pmix, mpirun) must describe the job",
                      PMIx_Error_string(rc));
    }
    uint32_t size = 0;
    if (val->type == PMIX_UINT32)
        size = val->data.uint32;
    else if (val->type == PMIX_INT)
        size = (uint32_t)val->data.integer;
    PMIX_VALUE_RELEASE(val);
    if (size == 0 || p->me.rank >= size) {
        unsigned rank = p->me.rank;
        PMIx_Finalize(NULL, 0);
        free(p);
        return FC_ERR(FC_ERR_BOOTSTRAP,
                      "PMIx says rank %u of a job of %u ranks: inconsistent. Fix: start the "
                      "program with srun --mpi=pmix or mpirun",
                      rank, size);
    }
    pthread_mutex_lock(&pmix_lock);
    pmix_active = 1;
    snprintf(pmix_ns, sizeof(pmix_ns), "%s", p->me.nspace);
    pmix_rank = (int)p->me.rank;
    pmix_size = (int)size;
    pmix_root[0] = '\0';
    uint32_t session = pmix_sessions++;
    pthread_mutex_unlock(&pmix_lock);
    p->base.ops = &pmix_ops;
    p->cfg = cfg;
    p->session = session;
    p->base.rank = (int)p->me.rank;
    p->base.nranks = (int)size;
    snprintf(p->base.how, sizeof(p->base.how), "PMIx (namespace %.80s, rank %u of %u, session %u)",
             p->me.nspace, p->me.rank, size, session);
    *out = &p->base;
    return FC_SUCCESS;
}
