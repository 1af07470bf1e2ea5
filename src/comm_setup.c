/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The steps of comm_create (comm_setup.h): what the ranks tell each other
 * over the bootstrap, the provider they agree on, the endpoints, addresses
 * and rails they open, the tuning they derive, and the connectivity check
 * that proves the fabric before a communicator is returned.
 *
 * This file owns the bootstrap's wire records (struct rank_info, struct
 * addr_info) and the decisions made from them. It allocates neither the
 * communicator nor the family's shared state (comm.c does, and frees them),
 * and it runs requests only through request.c.
 */
#define _GNU_SOURCE
#include "comm_setup.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "boot.h"
#include "log.h"
#include "paths.h"
#include "rails.h"
#include "topo.h"

/* ---- what ranks tell each other --------------------------------------------- */

struct rank_info {
    char host[64];
    uint64_t host_hash;
    int32_t pid;
    int32_t status;
    uint32_t version;
    int32_t rails; /* FC_RAILS (0: auto) */
    uint64_t chunk;
    int32_t window;
    uint64_t cpumask[16]; /* this process's CPU affinity (CPUs 0-1023) */
    uint64_t rndv_min;
    int32_t proto;
    int32_t cpus; /* in this process's CPU affinity */
    int32_t tune_device; /* FC_TUNE_MEMORY's verdict here (device: 1) */
    int32_t reproducible; /* FC_REPRODUCIBLE (any rank's 1 holds) */
    int32_t paths;       /* FC_PATHS (rank 0's holds) */
    char err[384];
    char node[64];      /* FC_NODE, else the host name: which node this rank counts as */
    uint64_t node_hash;
    uint64_t pidns; /* the process id namespace (its inode; 0: unknown) */
    /* rank 0's hang report collector (port 0: none) */
    char report_ip[48];
    int32_t report_port;
    uint8_t report_token[BOOT_TOKEN_LEN];
    struct prov_list provs;
};

struct addr_info {
    int32_t status;
    uint32_t len;
    uint64_t rndv_min;
    uint64_t chunk; /* the pipeline chunk this endpoint would use */
    int32_t hmem;   /* the endpoint takes device memory (gdr tier) */
    int32_t pad;
    char err[384];
    char addr[PROV_ADDR_MAX];
};

static uint64_t hash_host(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

#define FC_VERSION_CODE ((FC_VERSION_MAJOR << 16) | (FC_VERSION_MINOR << 8) | FC_VERSION_PATCH)

/* ---- tuning, the connectivity check, rails ------------------------------------ */

static int cmp_host(const void *x, const void *y)
{
    uint64_t a = (*(const struct rank_info *const *)x)->host_hash;
    uint64_t b = (*(const struct rank_info *const *)y)->host_hash;
    return a < b ? -1 : a > b;
}

/* Ranks per CPU on the job's most crowded node (0: no node has more ranks
 * than CPUs for them): the same on every rank, from everyone's rank_info,
 * since every rank must pick the same algorithm. *here: the ratio on the
 * node of host hash `mine` (0 where its ranks' affinity is unknown).
 * -1: out of memory. */
static double job_oversub(const struct rank_info *infos, int n, uint64_t mine, double *here)
{
    const struct rank_info **by = malloc((size_t)n * sizeof(*by));
    if (!by)
        return -1;
    for (int r = 0; r < n; r++)
        by[r] = &infos[r];
    qsort(by, (size_t)n, sizeof(*by), cmp_host);
    double worst = 0;
    for (int r = 0; r < n;) {
        uint64_t u[16] = {0};
        int q = r;
        for (; q < n && by[q]->host_hash == by[r]->host_hash; q++)
            for (int w = 0; w < 16; w++)
                u[w] |= by[q]->cpumask[w];
        int cpus = 0;
        for (int w = 0; w < 16; w++)
            cpus += __builtin_popcountll(u[w]);
        double ratio = cpus > 0 ? (double)(q - r) / cpus : 0;
        if (by[r]->host_hash == mine)
            *here = ratio;
        if (ratio > 1 && ratio > worst)
            worst = ratio;
        r = q;
    }
    free(by);
    return worst;
}

void comm_cost_params(const char *prov_name, int nnodes, struct coll_cost *cc, int *window)
{
    struct prov_model m;
    prov_model_of(prov_name, nnodes, &m);
    *cc = (struct coll_cost){.alpha = m.alpha, .beta = m.beta, .gamma = m.gamma,
                             .chunk = (double)m.chunk, .hs_min = m.hs_min, .hs = m.hs,
                             .hs_oneway = m.hs_oneway};
    if (window)
        *window = m.window;
}

/* The tuning of a top-level communicator (split ones copy their parent's);
 * tune_device: every rank asked for device tuning (FC_TUNE_MEMORY). */
static fc_result_t setup_tuning(struct fc_comm *c, const char *prov_name, int nnodes,
                                int tune_device)
{
    struct coll_cost cc;
    comm_cost_params(prov_name, nnodes, &cc, NULL);
    if (c->sh->paths) { /* ranks of one node talk over shm */
        struct coll_cost node;
        comm_cost_params("shm", 1, &node, NULL);
        cc.alpha_node = node.alpha;
        cc.beta_node = node.beta;
    }
    cc.chunk = (double)c->chunk;
    cc.oversub = c->oversub;
    cc.handoff = COLL_HANDOFF_S;
    coll_tuning_init(&c->tuning, &cc);
    c->tuning.dev_gather_max = tune_device ? COMM_FUSED_MAX : 0;
    fc_result_t rc = FC_SUCCESS;
    if (c->cfg.algo[0])
        rc = coll_tuning_force(&c->tuning, c->cfg.algo);
    if (rc == FC_SUCCESS && c->cfg.tune_file[0])
        rc = coll_tuning_load_file(&c->tuning, c->cfg.tune_file);
    return rc;
}

/* One dissemination barrier on the control tag space over the rail that
 * the chunk index of its tags picks (rails_pick), under the boot timeout
 * the caller set. */
static fc_result_t fabric_check_rail(struct fc_comm *c, uint64_t seq, int rail)
{
    const struct coll_algo *al = coll_algo_find(COLL_BARRIER, "dissemination", 13);
    struct coll_args a = {.kind = COLL_BARRIER, .rank = c->rank, .nranks = c->size,
                          .dt = FC_UINT8, .op = FC_SUM, .esize = 1};
    struct fc_request *r = comm_request_new(c, FC_UINT8, FC_SUM);
    if (!r)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    r->s.coll_name = "connectivity check";
    r->s.algo_name = al->name;
    fc_result_t rc = al->build(&r->s, &a);
    if (rc != FC_SUCCESS) {
        comm_request_free(r);
        return rc;
    }
    /* sends that complete once delivered: at destroy, the endpoint closes
     * right after, and a signal merely buffered locally (an inject) could
     * be dropped with it and leave a peer waiting; at creation, they take
     * the provider's first send buffers (ofi_rxm fills a pool of 1024 x
     * 16 KiB on its first one: 7-15 ms of page faults here, not in the
     * application's first call past the inject size) */
    r->delivery = 1;
    rc = comm_start(r, NULL, NULL, tag_base(c->id, TAG_KIND_CTRL, seq) | (uint64_t)rail,
                    "connectivity check over the fabric", 0);
    if (rc == FC_SUCCESS)
        rc = comm_wait(r);
    return rc;
}

/* Verifies the fabric carries messages among all ranks before anyone
 * relies on it (and, at destroy, that no peer still sends to us), once
 * over each rail, so every rail's connections are made here and not in
 * the first large call. */
fc_result_t comm_fabric_check(struct fc_comm *c, uint64_t seq)
{
    double saved = c->cfg.timeout;
    c->cfg.timeout = c->cfg.boot_timeout;
    fc_result_t rc = FC_SUCCESS;
    for (int rail = 0; rail < c->sh->nrails && rc == FC_SUCCESS; rail++)
        rc = fabric_check_rail(c, seq, rail);
    c->cfg.timeout = saved;
    return rc;
}

/* How many rails (endpoints per rank, rails.c) the job uses: rank 0's
 * FC_RAILS, or under auto what the provider gains from, at most one per two
 * CPUs of each rank of rank 0's node, and one where any rank's endpoint
 * takes device memory. Every rank computes the same. */
static fc_result_t rails_count(const struct rank_info *infos, int n, const char *choice,
                               int any_hmem, int *out)
{
    int k = infos[0].rails;
    if (k < 0 || k > COMM_MAX_RAILS)
        return FC_ERR(FC_ERR_INVALID_ARGUMENT,
                      "FC_RAILS=%d (rank 0's value holds): give 0 (auto) or 1 to %d", k,
                      COMM_MAX_RAILS);
    if (k == 0) {
        int local0 = 0;
        for (int r = 0; r < n; r++)
            local0 += infos[r].host_hash == infos[0].host_hash;
        /* a rail thread per two CPUs of each rank, up to the provider's
         * number: where ranks have a core or two each, none */
        int per_rank = infos[0].cpus / (local0 > 0 ? local0 : 1);
        k = prov_auto_rails(choice);
        if (k > per_rank / 2)
            k = per_rank / 2 > 1 ? per_rank / 2 : 1;
        /* endpoints that take device memory: the provider's copies run on
         * the GPU's copy engines, not the progressing core; on one H200, 2
         * ranks, 2 rails were slower at 64-256 MiB (200-220 GB/s busbw
         * against 286-293). FC_RAILS still asks for them. */
        if (any_hmem)
            k = 1;
    }
    *out = k;
    return FC_SUCCESS;
}

/* One bootstrap round of endpoint setup: every rank's status and address
 * (copied to addrbuf, PROV_ADDR_MAX bytes each, unless NULL); the first
 * failing rank's error, "rank R (host H) <what>: <its error><hint>", for
 * all. */
static fc_result_t exchange_addrs(struct boot *b, const struct rank_info *infos, int n,
                                  struct addr_info *am, struct addr_info *addrs, char *addrbuf,
                                  const char *what, const char *hint)
{
    fc_result_t rc = b->ops->allgather(b, am, sizeof(*am), addrs);
    for (int r = 0; r < n && rc == FC_SUCCESS; r++) {
        if (addrs[r].status != FC_SUCCESS) {
            addrs[r].err[sizeof(addrs[r].err) - 1] = '\0';
            rc = FC_ERR((fc_result_t)addrs[r].status, "rank %d (host %s) %s: %s%s", r,
                        infos[r].host, what, addrs[r].err, hint);
        } else if (addrbuf) {
            memcpy(addrbuf + (size_t)r * PROV_ADDR_MAX, addrs[r].addr, PROV_ADDR_MAX);
        }
    }
    return rc;
}

#define RAILS_HINT "; FC_RAILS=1 uses one endpoint per rank"

/* Opens rails 1..k-1 (rail 0 is sh->ep, connected) and puts the rails'
 * transport in sh->tp. Each rail is an endpoint of the chosen provider with
 * its own address exchange. Every rank takes part in every round (k-1
 * address rounds and a last status round) and carries a failure of its own
 * into the next one, so all ranks stop at the same round with the same
 * reason. */
static fc_result_t open_rails(struct comm_shared *sh, struct fc_comm *c, struct boot *b,
                              const struct rank_info *infos, const char *choice, int nnodes,
                              const char *fabric, char (*pnames)[64], int any_hmem,
                              const char (*nic)[PROV_NAME_LEN], int nnic)
{
    int n = c->size, k = 1;
    sh->nrails = 1;
    fc_result_t rc = rails_count(infos, n, choice, any_hmem, &k);
    if (rc != FC_SUCCESS || k == 1)
        return rc;
    struct addr_info *addrs = calloc((size_t)n, sizeof(*addrs));
    char *addrbuf = calloc((size_t)n, PROV_ADDR_MAX);
    const char **pn = calloc((size_t)n, sizeof(*pn));
    struct transport *tps[COMM_MAX_RAILS] = {sh->tp};
    struct addr_info am;
    memset(&am, 0, sizeof(am));
    if (!addrs || !addrbuf || !pn) {
        free(addrs);
        free(addrbuf);
        free(pn);
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory for %d ranks' rail addresses", n);
    }
    for (int r = 0; r < n; r++)
        pn[r] = pnames[r];
    char what[96];
    for (int i = 1; i < k && rc == FC_SUCCESS; i++) {
        if (am.status == FC_SUCCESS) {
            size_t alen = 0;
            sh->nrails = i + 1; /* closed with the rest, half-built or not */
            /* with several NICs, the rails of a rank go one per NIC */
            fc_result_t orc = prov_open(&c->cfg, choice, nnodes, fabric,
                                        nnic ? nic[i % nnic] : NULL, &sh->rail_ep[i], am.addr,
                                        &alen);
            am.len = (uint32_t)alen;
            if (orc != FC_SUCCESS) {
                am.status = orc;
                snprintf(am.err, sizeof(am.err), "%s", err_get());
            }
        }
        snprintf(what, sizeof(what), "could not open rail %d of %d (%s)", i, k, choice);
        rc = exchange_addrs(b, infos, n, &am, addrs, addrbuf, what, RAILS_HINT);
        if (rc != FC_SUCCESS)
            break;
        /* the same protocol choice as rail 0, agreed above */
        prov_rndv_min_set(sh->rail_ep[i], prov_rndv_min_get(sh->ep));
        fc_result_t crc = prov_connect(sh->rail_ep[i], n, addrbuf, pn, c->rank, NULL);
        if (crc != FC_SUCCESS) { /* told in the next round */
            am.status = crc;
            snprintf(am.err, sizeof(am.err), "%s", err_get());
        }
        tps[i] = prov_transport(sh->rail_ep[i]);
    }
    if (rc == FC_SUCCESS) {
        if (am.status == FC_SUCCESS) {
            fc_result_t crc = rails_create(tps, k, &sh->rails);
            if (crc != FC_SUCCESS) {
                am.status = crc;
                snprintf(am.err, sizeof(am.err), "%s", err_get());
            }
        }
        snprintf(what, sizeof(what), "could not set up %d rails (%s)", k, choice);
        rc = exchange_addrs(b, infos, n, &am, addrs, NULL, what, RAILS_HINT);
    }
    if (rc == FC_SUCCESS)
        sh->tp = rails_transport(sh->rails);
    free(addrs);
    free(addrbuf);
    free(pn);
    return rc;
}

/* The node's own path (paths.c): in a job of several nodes where a node
 * has more than one rank, an endpoint of shm for the ranks of this node,
 * the network's (sh->tp) for the others; sh->tp becomes the paths over
 * both. Every rank decides alike from the records of step 1 (FC_PATHS is
 * rank 0's); every rank that opens takes part in both address rounds. */
static fc_result_t open_local_path(struct comm_setup *st, struct fc_comm *c,
                                   struct comm_shared *sh)
{
    const int n = st->n, me = st->me;
    const struct rank_info *infos = st->infos;
    if (st->nnodes == 1 || st->infos[0].paths == CFG_PATHS_SINGLE)
        return FC_SUCCESS;
    int shared = 0, have = 1, lacking = -1;
    for (int r = 0; r < n; r++) {
        for (int q = 0; q < r && !shared; q++)
            shared = infos[q].node_hash == infos[r].node_hash;
        int shm = 0;
        for (uint32_t i = 0; i < infos[r].provs.n; i++)
            shm |= !strcmp(infos[r].provs.c[i].name, "shm");
        if (!shm && lacking < 0)
            lacking = r;
        have &= shm;
    }
    if (!shared)
        return FC_SUCCESS; /* one rank per node: the network for every peer */
    if (!have) {
        FC_INFO(LOG_INIT | LOG_NET, "ranks of one node talk over %s too: rank %d (host %s) "
                "has no shm provider%s", st->choice, lacking, infos[lacking].host,
                c->cfg.fi_provider[0] ? " (FI_PROVIDER narrows the candidates)" : "");
        return FC_SUCCESS;
    }
    unsigned char *mine = calloc((size_t)n, 1);
    struct addr_info *addrs = calloc((size_t)n, sizeof(*addrs));
    char *addrbuf = calloc((size_t)n, PROV_ADDR_MAX);
    const char **pn = calloc((size_t)n, sizeof(*pn));
    struct addr_info am;
    memset(&am, 0, sizeof(am));
    fc_result_t rc = FC_SUCCESS;
    int nlocal = 0;
    if (!mine || !addrs || !addrbuf || !pn) {
        rc = FC_ERR(FC_ERR_NO_MEMORY, "out of memory for %d ranks' paths", n);
        goto out;
    }
    for (int r = 0; r < n; r++) {
        mine[r] = r != me && infos[r].node_hash == infos[me].node_hash;
        nlocal += mine[r];
        pn[r] = st->pnames[r];
    }
    size_t alen = 0;
    fc_result_t orc = prov_open(&c->cfg, "shm", 1, NULL, NULL, &sh->local_ep, am.addr, &alen);
    am.len = (uint32_t)alen;
    if (orc != FC_SUCCESS) {
        am.status = orc;
        snprintf(am.err, sizeof(am.err), "%s", err_get());
    }
    rc = exchange_addrs(st->b, infos, n, &am, addrs, addrbuf, "could not open shm for the "
                        "ranks of its node", "; FC_PATHS=single uses one provider for all");
    if (rc != FC_SUCCESS)
        goto out;
    orc = prov_connect(sh->local_ep, n, addrbuf, pn, me, mine);
    if (orc == FC_SUCCESS)
        orc = paths_create(sh->tp, prov_transport(sh->local_ep), n, mine, &sh->paths);
    if (orc != FC_SUCCESS) {
        am.status = orc;
        snprintf(am.err, sizeof(am.err), "%s", err_get());
    }
    rc = exchange_addrs(st->b, infos, n, &am, addrs, NULL, "could not connect shm to the "
                        "ranks of its node", "; FC_PATHS=single uses one provider for all");
    if (rc != FC_SUCCESS)
        goto out;
    sh->tp = paths_transport(sh->paths);
    FC_INFO(LOG_INIT | LOG_NET, "paths: the %d other rank%s of node %s over shm, the %d of "
            "other nodes over %s (FC_PATHS=single: one provider for all)",
            nlocal, nlocal == 1 ? "" : "s", infos[me].node, n - 1 - nlocal, st->choice);
out:
    free(mine);
    free(addrs);
    free(addrbuf);
    free(pn);
    return rc;
}

/* ---- the steps ---------------------------------------------------------------- */

fc_result_t comm_setup_init(struct comm_setup *st, struct boot *b, struct fc_comm *c)
{
    memset(st, 0, sizeof(*st));
    st->b = b;
    st->n = b->nranks;
    st->me = b->rank;
    st->infos = calloc((size_t)st->n, sizeof(*st->infos));
    st->names = calloc((size_t)st->n, sizeof(*st->names));
    st->pnames = calloc((size_t)st->n, sizeof(*st->pnames));
    c->hosts = calloc((size_t)st->n, sizeof(*c->hosts));
    c->host_pid = calloc((size_t)st->n, sizeof(int));
    c->pidns = calloc((size_t)st->n, sizeof(uint64_t));
    if (!st->infos || !st->names || !st->pnames || !c->hosts || !c->host_pid || !c->pidns)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory for %d ranks", st->n);
    return FC_SUCCESS;
}

void comm_setup_free(struct comm_setup *st)
{
    boot_collector_stop(st->collector); /* creation failed before the family took it */
    st->collector = NULL;
    free(st->infos);
    free(st->names);
    free(st->pnames);
    st->infos = NULL;
    st->names = NULL;
    st->pnames = NULL;
}

/* This rank's record: host, CPUs, settings, the providers it can open. */
static void rank_info_mine(struct rank_info *mine, const cfg_t *cfg, const struct comm_device *dev)
{
    memset(mine, 0, sizeof(*mine));
    snprintf(mine->host, sizeof(mine->host), "%s", log_hostname());
    mine->host_hash = hash_host(mine->host);
    snprintf(mine->node, sizeof(mine->node), "%.63s", cfg->node[0] ? cfg->node : mine->host);
    mine->node_hash = hash_host(mine->node);
    mine->pid = (int32_t)getpid();
    mine->version = FC_VERSION_CODE;
    mine->chunk = cfg->chunk_size;
    mine->window = cfg->inflight;
    mine->proto = cfg->proto;
    mine->rndv_min = cfg->rndv_min;
    mine->rails = cfg->rails;
    mine->paths = cfg->paths;
    mine->reproducible = cfg->reproducible;
    mine->tune_device = cfg->tune_memory == CFG_TUNE_MEM_DEVICE ||
                        (cfg->tune_memory == CFG_TUNE_MEM_AUTO &&
                         cfg->gpu_fused != CFG_FUSED_OFF && dev->present());
    cpu_set_t cpus;
    if (sched_getaffinity(0, sizeof(cpus), &cpus) == 0) {
        mine->cpus = CPU_COUNT(&cpus);
        for (int i = 0; i < 1024 && i < CPU_SETSIZE; i++)
            if (CPU_ISSET(i, &cpus))
                mine->cpumask[i / 64] |= 1ull << (i % 64);
    } else {
        mine->cpus = (int32_t)sysconf(_SC_NPROCESSORS_ONLN);
        for (int i = 0; i < 1024 && i < mine->cpus; i++)
            mine->cpumask[i / 64] |= 1ull << (i % 64);
    }
    /* a topology file is read only where there are NICs to choose from:
     * one that cannot be loaded is an error on every node, not only there */
    struct stat ns;
    if (stat("/proc/self/ns/pid", &ns) == 0)
        mine->pidns = ((uint64_t)ns.st_dev << 32) ^ (uint64_t)ns.st_ino;
    fc_result_t rc = cfg->topo_file[0] ? topo_check_file(cfg->topo_file) : FC_SUCCESS;
    if (rc == FC_SUCCESS)
        rc = prov_discover(cfg, &mine->provs);
    if (rc != FC_SUCCESS) {
        mine->status = rc; /* told to every rank by the exchange */
        snprintf(mine->err, sizeof(mine->err), "%s", err_get());
    }
}

fc_result_t comm_setup_gather(struct comm_setup *st, struct fc_comm *c,
                              const struct comm_device *dev)
{
    const int n = st->n;
    struct rank_info mine;
    rank_info_mine(&mine, &c->cfg, dev);
    if (st->me == 0 && n > 1 && c->cfg.hang_report) {
        /* where the others send their state when a collective times out */
        boot_local_address(&c->cfg, mine.report_ip, sizeof(mine.report_ip));
        int port = 0;
        if (boot_collector_start(mine.report_ip, &st->collector, &port, mine.report_token) ==
            FC_SUCCESS)
            mine.report_port = port;
        else
            FC_WARN(LOG_INIT, "no hang report for this job: %s", err_get());
    }
    fc_result_t rc = st->b->ops->allgather(st->b, &mine, sizeof(mine), st->infos);
    if (rc != FC_SUCCESS)
        return rc;
    struct rank_info *infos = st->infos;
    for (int r = 0; r < n; r++) {
        infos[r].host[sizeof(infos[r].host) - 1] = '\0';
        infos[r].node[sizeof(infos[r].node) - 1] = '\0';
        snprintf(c->hosts[r], sizeof(c->hosts[r]), "%s", infos[r].host);
        c->host_pid[r] = infos[r].pid;
        c->pidns[r] = infos[r].pidns;
        snprintf(st->pnames[r], sizeof(st->pnames[r]), "%.40s pid %d", infos[r].host,
                 infos[r].pid);
        st->names[r] = c->hosts[r];
        /* nodes as the ranks name them (FC_NODE); CPUs are counted per
         * host (job_oversub, rails_count) */
        int first = 1;
        for (int q = 0; q < r; q++)
            if (infos[q].node_hash == infos[r].node_hash)
                first = 0;
        st->nnodes += first;
        if (infos[r].node_hash == mine.node_hash) {
            st->local_size++;
            if (r < st->me)
                st->local_rank++;
        }
    }
    for (int r = 0; r < n; r++) {
        if (infos[r].version != FC_VERSION_CODE)
            return FC_ERR(FC_ERR_BOOTSTRAP,
                          "rank %d (host %s) runs fabcoll version 0x%x, this rank 0x%x: every "
                          "rank must use the same library",
                          r, infos[r].host, infos[r].version, FC_VERSION_CODE);
        if (infos[r].status != FC_SUCCESS) {
            infos[r].err[sizeof(infos[r].err) - 1] = '\0';
            return FC_ERR((fc_result_t)infos[r].status, "rank %d (host %s): %s", r,
                          infos[r].host, infos[r].err);
        }
    }
    /* more ranks on this node than CPUs they may run on, all together: a
     * waiting rank that spins holds the CPU its peer needs for a whole
     * time slice (4 ranks on 2 cores: 8-byte allreduce 240-470 us over shm
     * with 2000 polls, 25 us yielding at once; Open MPI, which yields when
     * oversubscribed, 8-11 us), so FC_SPIN=0 (auto) yields at once there.
     * The busiest node's ratio goes to the cost model (setup_tuning). */
    double here = 0;
    c->oversub = job_oversub(infos, n, mine.host_hash, &here);
    if (c->oversub < 0)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    c->oversubscribed = here > 1; /* local_size > this node's CPUs */
    /* device tuning only where every rank asks for it: one algorithm for all */
    st->tune_device = 1;
    st->reproducible = 0;
    for (int r = 0; r < n; r++) {
        st->tune_device &= infos[r].tune_device != 0;
        st->reproducible |= infos[r].reproducible != 0;
    }
    if (c->cfg.spin <= 0)
        c->cfg.spin = c->oversubscribed ? 1 : COMM_SPIN_DEFAULT;

    /* rank 0's pipeline and protocol settings for everyone: both ends of a
     * message must cut it into the same chunks and pick the same protocol */
    c->cfg.chunk_size = infos[0].chunk;
    c->cfg.inflight = infos[0].window;
    c->cfg.proto = infos[0].proto;
    c->cfg.rndv_min = infos[0].rndv_min;
    return FC_SUCCESS;
}

fc_result_t comm_setup_agree(struct comm_setup *st)
{
    struct prov_list *lists = calloc((size_t)st->n, sizeof(*lists));
    if (!lists)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    for (int r = 0; r < st->n; r++)
        lists[r] = st->infos[r].provs;
    fc_result_t rc = prov_agree(lists, st->n, st->nnodes, st->names, st->choice,
                                sizeof(st->choice), st->fabric, sizeof(st->fabric), st->why,
                                sizeof(st->why));
    free(lists);
    return rc;
}

/* This rank's NICs for the agreed provider, nearest first, into st->nic:
 * for an RDMA provider, every domain it offers, ordered by the node's
 * topology (FC_TOPO_FILE or discovery) from the GPU whose context is
 * current here, else from the rank's CPU binding; equally near ones dealt
 * over the node's ranks by local rank. tcp keeps FC_IFACE and the
 * rendezvous's subnet (prov_open), shm has one domain: no order. */
static fc_result_t nic_order(struct comm_setup *st, struct fc_comm *c,
                             const struct comm_device *dev)
{
    st->nnic = 0;
    if (prov_tier_of(st->choice) < FC_TIER_RDMA)
        return FC_SUCCESS;
    char doms[TOPO_NIC_MAX][PROV_NAME_LEN];
    const char *names[TOPO_NIC_MAX];
    _Static_assert(sizeof(st->infos[0].cpumask) == TOPO_CPU_WORDS * sizeof(uint64_t),
                   "rank_info's CPU mask is topo_nic_order's");
    int nd = prov_domains(st->choice, doms, TOPO_NIC_MAX);
    if (nd == 1)
        FC_INFO(LOG_TOPO | LOG_NET, "NIC %s: the only one %s offers here", doms[0], st->choice);
    if (nd <= 1)
        return FC_SUCCESS; /* nothing to choose (prov_open says what is wrong) */
    for (int i = 0; i < nd; i++)
        names[i] = doms[i];
    char gpu[32] = "";
    dev->current_gpu(gpu, sizeof(gpu));
    struct topo_nic order[TOPO_NIC_MAX];
    int k = 0;
    fc_result_t rc = topo_nic_order(c->cfg.topo_file, names, nd, gpu,
                                    st->infos[st->me].cpumask, st->local_rank, c->cfg.nics,
                                    order, &k);
    if (rc != FC_SUCCESS)
        return rc;
    for (int i = 0; i < k && i < COMM_MAX_RAILS; i++)
        snprintf(st->nic[i], sizeof(st->nic[i]), "%.*s", PROV_NAME_LEN - 1, order[i].name);
    st->nnic = k < COMM_MAX_RAILS ? k : COMM_MAX_RAILS;
    if (k)
        FC_INFO(LOG_TOPO | LOG_NET, "NIC %s (%s, local rank %d%s%s): %s", order[0].name,
                topo_class_name(order[0].cls), st->local_rank, gpu[0] ? ", GPU " : "", gpu,
                order[0].why);
    return FC_SUCCESS;
}

/* Opens sh's endpoint of the agreed provider and tells every rank its
 * address (or why it has none); rank 0's chunk and, where the ranks
 * differ, no RMA rendezvous for all. */
static fc_result_t open_endpoint(struct comm_setup *st, struct fc_comm *c, struct comm_shared *sh,
                                 struct addr_info *addrs, char *addrbuf, int *any_hmem)
{
    const int n = st->n;
    struct addr_info am;
    memset(&am, 0, sizeof(am));
    size_t alen = 0;
    fc_result_t rc = nic_order(st, c, sh->dev);
    if (rc == FC_SUCCESS)
        rc = prov_open(&c->cfg, st->choice, st->nnodes, st->fabric,
                       st->nnic ? st->nic[0] : NULL, &sh->ep, am.addr, &alen);
    if (rc == FC_SUCCESS && st->nnic) {
        fc_comm_attr_t at;
        prov_describe(sh->ep, &at);
        if (strcmp(at.domain, st->nic[0]) != 0)
            FC_INFO(LOG_TOPO | LOG_NET, "%s opened on %s, not the nearest NIC %s: the "
                    "fabric all ranks share (%s) decides first",
                    st->choice, at.domain, st->nic[0], st->fabric[0] ? st->fabric : "none");
    }
    if (rc != FC_SUCCESS) {
        am.status = rc;
        snprintf(am.err, sizeof(am.err), "%s", err_get());
    }
    am.len = (uint32_t)alen;
    if (rc == FC_SUCCESS) {
        am.rndv_min = prov_rndv_min_get(sh->ep);
        size_t ch, em;
        int w;
        prov_tuning(sh->ep, &c->cfg, n, &ch, &w, &em);
        am.chunk = ch;
        am.hmem = prov_hmem(sh->ep);
    }
    char what[96];
    snprintf(what, sizeof(what), "could not open %s", st->choice);
    rc = exchange_addrs(st->b, st->infos, n, &am, addrs, addrbuf, what, "");
    if (rc != FC_SUCCESS)
        return rc;
    /* rank 0's chunk for all (endpoints that take device memory default to
     * larger ones; a rank whose endpoint does not must still cut alike) */
    c->cfg.chunk_size = addrs[0].chunk;
    /* both ends of a message choose its protocol from its length: one RMA
     * rendezvous threshold for all, or none */
    for (int r = 0; r < n; r++)
        if (addrs[r].rndv_min != am.rndv_min) {
            FC_INFO(LOG_NET, "RMA rendezvous off: rank %d's endpoint would use it from %llu "
                    "bytes, this rank's from %llu (0: never)",
                    r, (unsigned long long)addrs[r].rndv_min,
                    (unsigned long long)am.rndv_min);
            prov_rndv_min_set(sh->ep, 0);
            break;
        }
    *any_hmem = 0;
    for (int r = 0; r < n; r++)
        *any_hmem |= addrs[r].hmem != 0;
    return FC_SUCCESS;
}

fc_result_t comm_setup_endpoints(struct comm_setup *st, struct fc_comm *c, struct comm_shared *sh)
{
    const int n = st->n;
    struct addr_info *addrs = calloc((size_t)n, sizeof(*addrs));
    char *addrbuf = calloc((size_t)n, PROV_ADDR_MAX);
    const char **pn = calloc((size_t)n, sizeof(*pn));
    fc_result_t rc;
    int any_hmem = 0;
    if (!addrs || !addrbuf || !pn) {
        rc = FC_ERR(FC_ERR_NO_MEMORY, "out of memory for %d ranks' addresses", n);
        goto out;
    }
    rc = open_endpoint(st, c, sh, addrs, addrbuf, &any_hmem);
    if (rc != FC_SUCCESS)
        goto out;
    for (int r = 0; r < n; r++)
        pn[r] = st->pnames[r];
    rc = prov_connect(sh->ep, n, addrbuf, pn, st->me, NULL);
    if (rc != FC_SUCCESS)
        goto out;
    sh->tp = prov_transport(sh->ep);
    rc = open_rails(sh, c, st->b, st->infos, st->choice, st->nnodes, st->fabric, st->pnames,
                    any_hmem, (const char(*)[PROV_NAME_LEN])st->nic, st->nnic);
    if (rc == FC_SUCCESS)
        rc = open_local_path(st, c, sh);
    if (rc != FC_SUCCESS)
        goto out;
    sh->ptp = sh->tp;
    sh->nworld = n;
out:
    free(addrs);
    free(addrbuf);
    free(pn);
    return rc;
}

fc_result_t comm_setup_comm(struct comm_setup *st, struct fc_comm *c)
{
    const int n = st->n;
    struct comm_shared *sh = c->sh;
    _Static_assert(sizeof(sh->report_token) == BOOT_TOKEN_LEN, "the hang report's token");
    sh->collector = st->collector; /* the family stops it */
    st->collector = NULL;
    if (st->infos[0].report_port > 0) {
        st->infos[0].report_ip[sizeof(st->infos[0].report_ip) - 1] = '\0';
        snprintf(sh->report_ip, sizeof(sh->report_ip), "%s", st->infos[0].report_ip);
        sh->report_port = st->infos[0].report_port;
        memcpy(sh->report_token, st->infos[0].report_token, BOOT_TOKEN_LEN);
    }
    c->peers = calloc((size_t)n, sizeof(int));
    c->p2p_sent = calloc((size_t)n, sizeof(uint64_t));
    c->p2p_recvd = calloc((size_t)n, sizeof(uint64_t));
    if (!c->peers || !c->p2p_sent || !c->p2p_recvd)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    for (int r = 0; r < n; r++)
        c->peers[r] = r;
    c->node = calloc((size_t)n, sizeof(int));
    if (!c->node)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    c->nnodes = 0;
    for (int r = 0; r < n; r++) { /* numbered in order of first appearance */
        int q = 0;
        while (q < r && st->infos[q].node_hash != st->infos[r].node_hash)
            q++;
        c->node[r] = q < r ? c->node[q] : c->nnodes++;
    }
    c->id = 0;
    prov_tuning(c->sh->ep, &c->cfg, n, &c->chunk, &c->window, &c->eager_max);
    fc_result_t rc = setup_tuning(c, st->choice, st->nnodes, st->tune_device);
    if (rc != FC_SUCCESS)
        return rc;
    c->tuning.reproducible = st->reproducible;
    if (st->reproducible)
        FC_INFO(LOG_TUNE, "reproducible reductions (FC_REPRODUCIBLE%s): allreduce, reduce and "
                "reduce-scatter reduce every element in rank order",
                c->cfg.reproducible ? "" : ", asked by another rank");
    if (c->oversub > 1)
        FC_INFO(LOG_TUNE,
                "up to %.3g ranks per CPU on a node: the cost model counts the CPUs a step's "
                "working ranks share, and %.0f us per step of a tree or chain (broadcast and "
                "reduce lean to trees)",
                c->oversub, COLL_HANDOFF_S * 1e6);
    FC_INFO(LOG_TUNE, "small allreduces (%zu bytes over all ranks) tuned for %s",
            COMM_FUSED_MAX,
            st->tune_device ? "device buffers: gather, one GPU trip (FC_TUNE_MEMORY)"
            : st->infos[st->me].tune_device
                ? "host buffers: a rank does not ask for device tuning"
                : "host buffers");
    memset(&c->attr, 0, sizeof(c->attr));
    prov_describe(c->sh->ep, &c->attr);
    c->attr.nrails = c->sh->nrails;
    c->attr.nnodes = st->nnodes;
    c->attr.local_rank = st->local_rank;
    c->attr.local_size = st->local_size;
    if (c->cfg.progress_thread) {
        if (pthread_create(&c->sh->thread, NULL, comm_progress_main, c->sh) == 0)
            c->sh->thread_on = 1;
        else
            FC_WARN(LOG_INIT, "could not start the progress thread: %m; continuing without");
    }
    return FC_SUCCESS;
}

fc_result_t comm_setup_check(struct comm_setup *st, struct fc_comm *c)
{
    fc_result_t rc = comm_fabric_check(c, 0);
    if (rc != FC_SUCCESS)
        return rc;
    FC_INFO(LOG_INIT | LOG_NET,
            "comm %p rank %d of %d: provider %s (tier %s, fabric %s, domain %s); %d node%s, "
            "local rank %d of %d%s; rejected: %s%s%s; bootstrap: %s; chunk %zu, window %d, "
            "rails %d, spin %d",
            (void *)c, st->me, st->n, c->attr.provider,
            c->attr.tier == FC_TIER_SHM    ? "shm"
            : c->attr.tier == FC_TIER_RDMA ? "rdma"
            : c->attr.tier == FC_TIER_GDR  ? "gdr"
                                           : "net",
            c->attr.fabric, c->attr.domain, st->nnodes, st->nnodes > 1 ? "s" : "",
            st->local_rank, st->local_size,
            c->oversubscribed ? " (more ranks than CPUs here: waits yield at once)" : "",
            st->why[0] ? st->why : "none (best tier available)",
            c->cfg.fi_provider[0] ? "; candidates narrowed by FI_PROVIDER=" : "",
            c->cfg.fi_provider, st->b->how, c->chunk, c->window, c->sh->nrails, c->cfg.spin);
    return FC_SUCCESS;
}
