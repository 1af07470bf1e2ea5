/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The one table of settings. Adding a setting = one row here + one field in
 * cfg_t. This is the only file of the library that reads the environment.
 */
#define _GNU_SOURCE
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "log.h"

enum row_type { T_INT, T_SIZE, T_SECONDS, T_STR, T_ENUM, T_BOOL, T_LEVEL, T_SUBSYS, T_MRMODE };

struct row {
    const char *name;
    enum row_type type;
    const char *def;     /* NULL: unset */
    size_t off;
    size_t size;         /* for T_STR */
    const char *choices; /* T_ENUM: comma list, index = value */
    const char *section;
    const char *help;
};

#define F(field) offsetof(cfg_t, field), sizeof(((cfg_t *)0)->field)

static const char *const S_USER = "settings";
static const char *const S_LAUNCH = "launcher (read, set by fc_run / Slurm / PMIx / PMI-2)";
/* libfabric's own variables with a default of fabcoll's: put into the
 * environment where unset, before libfabric reads them (global_load) */
static const char *const S_LIBFABRIC =
    "libfabric (its own variables: fabcoll's default is exported where unset)";

static const struct row rows[] = {
    /* logging */
    {"FC_DEBUG", T_LEVEL, "WARN", F(debug), "NONE,WARN,INFO,TRACE", S_USER,
     "Log level, written to stderr (or FC_DEBUG_FILE), never stdout. INFO shows the provider "
     "chosen per communicator and why better tiers were rejected."},
    {"FC_DEBUG_SUBSYS", T_SUBSYS, "ALL", F(debug_subsys), "INIT,BOOT,NET,MR,COLL,TUNE,TOPO,ALL",
     S_USER, "Comma list of subsystems to log; a leading ^ excludes the listed ones."},
    {"FC_DEBUG_FILE", T_STR, NULL, F(debug_file), NULL, S_USER,
     "Log to this file instead of stderr; %h host, %p pid, %r rank are expanded (x for %r "
     "in lines written before the rank is known)."},
    /* fabric */
    {"FI_PROVIDER", T_STR, NULL, F(fi_provider), NULL, S_USER,
     "libfabric's own filter (e.g. tcp, shm, verbs): only matching providers are candidates. "
     "Read here only to report it."},
    {"FC_IFACE", T_STR, NULL, F(iface), NULL, S_USER,
     "Network interface (libfabric domain, e.g. eth0, lo) for net providers such as tcp."},
    {"FC_NODE", T_STR, NULL, F(node), NULL, S_USER,
     "Which node this rank counts as (default: its host name), as NCCL_HOSTID: ranks with the "
     "same value share a node. Lets one machine run as several nodes for tests, e.g. "
     "FC_NODE=n$((FC_RANK / 2)) in each rank's environment."},
    {"FC_PATHS", T_ENUM, "auto", F(paths), "auto,single", S_USER,
     "auto: in a job of several nodes where a node has more than one rank, ranks of one node "
     "talk over shm and ranks of different nodes over the network provider (two endpoints "
     "per rank); single: one provider for every peer."},
    {"FC_NICS", T_STR, NULL, F(nics), NULL, S_USER,
     "Comma list of NICs (libfabric domains, e.g. mlx5_0,mlx5_1) an RDMA provider may use; "
     "each rank opens the one nearest its GPU (else its CPUs)."},
    {"FC_GDR", T_ENUM, "auto", F(gdr), "auto,on,off", S_USER,
     "Device buffers: auto = register them with the provider when it reports FI_HMEM, else "
     "stage through pinned host memory; on = require that (error if impossible); off = always "
     "stage."},
    {"FC_GPU_FUSED", T_ENUM, "auto", F(gpu_fused), "auto,on,off", S_USER,
     "Small blocking allreduces on device buffers (up to 32 KiB over all ranks, where the cost "
     "model picks the gather algorithm): on = one kernel does the GPU's part of the call (copies "
     "the vector out, spins on one SM while the host runs the exchange, reduces), one trip to "
     "the GPU instead of two; off = the staged path's copies and kernels; auto = on, until the "
     "kernel waits for the GPU over 150 us in 4 calls in a row (ranks sharing a GPU without "
     "MPS, whose time slices make the kernel ~10x slower than staging), then off, except where "
     "device memory goes direct (gdr tier), where it stays on (give off on every rank there)."},
    {"FC_TUNE_MEMORY", T_ENUM, "auto", F(tune_memory), "auto,host,device", S_USER,
     "The memory the tuner prices small allreduces for (n vectors of at most 32 KiB together, "
     "FC_GPU_FUSED's range). device: the gather algorithm, whose GPU part on device buffers is "
     "one fused kernel, one trip to the GPU (one H200, staged over shm, 4 ranks: 2 KiB 31 us, "
     "8 KiB 66 us, against 60 and 95 us for the host model's recursive doubling and "
     "Rabenseifner, which go to the GPU and back every round); host buffers then take up to "
     "2.3x longer there (4 KiB at 4 ranks on 16 cores: 15 against 7 us). host: the host "
     "cost model's choice, and (rank 0's setting) the provider's own pipeline chunk where a "
     "GPU would make it 512 KiB for staging (shm, 2-rank broadcast of 1-64 MiB on host "
     "buffers: 0.36-0.61x the time). "
     "auto: device when every rank sees a GPU at init and FC_GPU_FUSED is not off. Every rank "
     "must run the same algorithm, so the ranks agree at init: device only if every rank says "
     "device, and ranks on host and device buffers can still share a call."},
    {"FC_PROTO", T_ENUM, "auto", F(proto), "auto,eager,rndv", S_USER,
     "Message protocol: auto sends messages up to FC_EAGER_MAX (and the provider's inject "
     "limit) eagerly, by inject, messages of FC_RNDV_MIN bytes and more by fabcoll's zero-copy "
     "rendezvous (the receiver sends its registered buffer's key, the sender writes the data "
     "into it with fi_writedata) where the provider offers FI_RMA, and the rest as tagged "
     "messages through the provider's own protocol; eager injects everything the provider "
     "allows and never uses the rendezvous; rndv never injects and sends every nonempty "
     "message by the rendezvous (where FI_RMA is offered). Rank 0's value holds for all."},
    {"FC_RNDV_MIN", T_SIZE, "0", F(rndv_min), NULL, S_USER,
     "Smallest message sent by the RMA rendezvous under FC_PROTO=auto (bytes, K/M/G "
     "suffixes); 0 = the provider's default from fabcoll's profile. On endpoints that take "
     "device memory (gdr tier) smaller device messages are staged through host memory. Rank "
     "0's value holds for all."},
    {"FC_EAGER_MAX", T_SIZE, "0", F(eager_max), NULL, S_USER,
     "Largest message sent eagerly (bytes, K/M/G suffixes), capped by the provider's inject "
     "size; 0 = the provider's default from fabcoll's profile."},
    {"FC_CHUNK_SIZE", T_SIZE, "0", F(chunk_size), NULL, S_USER,
     "Pipeline chunk: large steps are cut into chunks of this many bytes; 0 = provider "
     "default."},
    {"FC_RAILS", T_INT, "0", F(rails), NULL, S_USER,
     "Endpoints per rank (1-8) over which the chunks of a message are dealt by their index "
     "(chunk 0, so every one-chunk message, stays on the first); every one but the first is "
     "driven by a thread of its own, so that several "
     "cores move one collective's data. 0 = auto: on tcp and shm one per two CPUs of each "
     "rank of rank 0's node (its CPU affinity), at most 4, and 1 where an endpoint takes "
     "device memory (gdr); elsewhere 1. Rank 0's value holds for all."},
    {"FC_INFLIGHT", T_INT, "0", F(inflight), NULL, S_USER,
     "Chunks of one step in flight at once (2 = double buffering); 0 = provider default."},
    {"FC_RETRY_COUNT", T_INT, "7", F(retry_count), NULL, S_USER,
     "Retries of a fabric operation that fails with a transient error (EAGAIN is never "
     "counted)."},
    {"FC_TIMEOUT", T_SECONDS, "300", F(timeout), NULL, S_USER,
     "Seconds an operation may wait without any progress before it fails with "
     "FC_ERR_TIMEOUT naming the ranks it waits for; 0 = wait forever."},
    {"FC_ALGO", T_STR, NULL, F(algo), NULL, S_USER,
     "Force algorithms: comma list of collective:algorithm, e.g. allreduce:ring,bcast:chain "
     "(fc_info -a lists them)."},
    {"FC_TUNE_FILE", T_STR, NULL, F(tune_file), NULL, S_USER,
     "File of size-range rules: lines 'collective min_bytes max_bytes algorithm'."},
    {"FC_TOPO_FILE", T_STR, NULL, F(topo_file), NULL, S_USER,
     "hwloc XML topology (lstopo --of xml) used instead of discovery, for the choice of "
     "each rank's NIC and fc_info; a file that does not load is an error."},
    {"FC_SPIN", T_INT, "0", F(spin), NULL, S_USER,
     "Completion-queue polls before a waiting rank yields its CPU (then it sleeps, so "
     "oversubscribed ranks do not starve each other). 0 = auto: 2000, or 1 (yield at once) "
     "where a node's ranks outnumber the CPUs they may run on."},
    {"FC_HANG_REPORT", T_BOOL, "1", F(hang_report), NULL, S_USER,
     "1 = when a collective times out, every rank sends what it was doing (the call, its "
     "step, the ranks it waits for) to rank 0 over TCP, not the fabric, and rank 0 prints "
     "one table naming the ranks the job waits on, after waiting up to half FC_TIMEOUT "
     "(at most 10 s) for the reports. Rank 0's value holds for all."},
    {"FC_PROFILER", T_STR, NULL, F(profiler), NULL, S_USER,
     "Profiler plugin: a shared object exporting fc_profiler_init (fabcoll_profiler.h), "
     "called with an event at the start and end of every call and transfer step."},
    {"FC_PROFILE_FILE", T_STR, NULL, F(profile_file), NULL, S_USER,
     "Write a Chrome trace (Perfetto, chrome://tracing) of every call and transfer step "
     "to this file; %r rank, %h host, %p pid are expanded (one file per rank)."},
    {"FC_REPRODUCIBLE", T_BOOL, "0", F(reproducible), NULL, S_USER,
     "1 = allreduce, reduce and reduce-scatter reduce every element in rank order, the same "
     "bits whatever the algorithm, message size, chunking, rails, provider or tier (the "
     "tuner picks only such algorithms). Any rank asking makes it so for the communicator."},
    {"FC_PROGRESS_THREAD", T_BOOL, "0", F(progress_thread), NULL, S_USER,
     "1 = a background thread drives nonblocking operations while the application computes."},
    {"FC_MR_MODE", T_MRMODE, NULL, F(mr_mode_force), "local,virt_addr,prov_key,allocated,endpoint,hmem,verbs",
     S_USER,
     "Honour these memory-registration modes even where the provider does not demand them "
     "(comma list; verbs = local,virt_addr,prov_key,allocated). Used to exercise verbs code "
     "paths on tcp."},
    {"FC_MR_CACHE_MAX", T_SIZE, "1G", F(mr_cache_max), NULL, S_USER,
     "Bytes of user buffers kept registered in the registration cache (LRU eviction)."},
    /* bootstrap */
    {"FC_BOOTSTRAP", T_ENUM, "auto", F(bootstrap), "auto,pmix,pmi2,fc_run,slurm", S_USER,
     "How fc_comm_init finds its peers; auto tries PMIx (PMIX_NAMESPACE set), then PMI-2 "
     "(PMI_FD set: srun --mpi=pmi2), then the fc_run environment, then Slurm's environment "
     "(plain srun: rank 0 serves a rendezvous)."},
    {"FC_BOOT_TIMEOUT", T_SECONDS, "120", F(boot_timeout), NULL, S_USER,
     "Seconds for every rank to join at communicator creation; 0: no limit."},
    {"FC_BOOT_AUTH", T_ENUM, "munge", F(boot_auth), "munge,none", S_USER,
     "Under plain srun (no PMI), how the ranks and rank 0's rendezvous prove to each other "
     "that they run as the job's user: munge = with credentials from munged (init fails, "
     "naming the fix, where MUNGE is missing); none = not at all: the port and secret are "
     "derived from the job id, which every user of the cluster can see (warns once). Every "
     "rank must use the same value; PMIx, PMI-2 and fc_run do not use it."},
    {"FC_MUNGE_SOCKET", T_STR, NULL, F(munge_socket), NULL, S_USER,
     "munged's socket for FC_BOOT_AUTH=munge, where it is not libmunge's default "
     "(/run/munge/munge.socket.2)."},
    /* libfabric's variables */
    {"FI_OFI_RXM_MSG_RX_SIZE", T_INT, "512", F(rxm_msg_rx_size), NULL, S_LIBFABRIC,
     "Receive buffers (16 KiB each) that ofi_rxm keeps posted for all tcp connections of an "
     "endpoint. libfabric's default, 4096, costs 64 MiB and the page faults of filling them "
     "when an endpoint opens; its pool grows by 1024 at a time, so with 4096 posted the first "
     "message that arrives before its receive grows the pool mid-call (7-15 ms on a small VM). "
     "512 leaves half of the first block spare. Exported when the process loads its settings, "
     "so it takes effect only where libfabric has not been used before in the process."},
    /* launcher variables */
    {"FC_RANK", T_INT, "-1", F(fc_rank), NULL, S_LAUNCH, "This process's rank (fc_run)."},
    {"FC_SIZE", T_INT, "-1", F(fc_size), NULL, S_LAUNCH, "Number of ranks (fc_run)."},
    {"FC_LOCAL_RANK", T_INT, "-1", F(fc_local_rank), NULL, S_LAUNCH, "Rank on this node (fc_run)."},
    {"FC_LOCAL_SIZE", T_INT, "-1", F(fc_local_size), NULL, S_LAUNCH, "Ranks on this node (fc_run)."},
    {"FC_ROOT_ADDR", T_STR, NULL, F(fc_root_addr), NULL, S_LAUNCH,
     "host:port of the rendezvous (fc_run serves it)."},
    {"FC_JOB_SECRET", T_STR, NULL, F(fc_job_secret), NULL, S_LAUNCH,
     "Hex secret a rank presents to the rendezvous (fc_run)."},
    {"SLURM_PROCID", T_INT, "-1", F(slurm_procid), NULL, S_LAUNCH, "Rank under srun."},
    {"SLURM_NTASKS", T_INT, "-1", F(slurm_ntasks), NULL, S_LAUNCH, "Number of tasks under srun."},
    {"SLURM_LOCALID", T_INT, "-1", F(slurm_localid), NULL, S_LAUNCH, "Task index on the node."},
    {"SLURM_STEP_NODELIST", T_STR, NULL, F(slurm_nodelist), NULL, S_LAUNCH,
     "Nodes of the step; the first one hosts the rendezvous under plain srun."},
    {"SLURM_JOB_ID", T_STR, NULL, F(slurm_job_id), NULL, S_LAUNCH,
     "Job id; feeds the rendezvous port and secret under plain srun."},
    {"SLURM_STEP_ID", T_STR, NULL, F(slurm_step_id), NULL, S_LAUNCH, "Step id (as SLURM_JOB_ID)."},
    {"PMIX_NAMESPACE", T_STR, NULL, F(pmix_namespace), NULL, S_LAUNCH,
     "Set by a PMIx server (srun --mpi=pmix, mpirun): PMIx bootstrap is possible."},
    {"PMIX_RANK", T_INT, "-1", F(pmix_rank), NULL, S_LAUNCH, "Rank under a PMIx server."},
    {"PMIX_SERVER_URI41", T_STR, NULL, F(pmix_server_uri), NULL, S_LAUNCH,
     "PMIx server contact (any PMIX_SERVER_URI* version)."},
    {"PMI_FD", T_INT, "-1", F(pmi_fd), NULL, S_LAUNCH,
     "Descriptor of the PMI-2 server connection (srun --mpi=pmi2): PMI-2 bootstrap is "
     "possible."},
    {"PMI_RANK", T_INT, "-1", F(pmi_rank), NULL, S_LAUNCH, "Rank under PMI-2."},
    {"PMI_SIZE", T_INT, "-1", F(pmi_size), NULL, S_LAUNCH, "Number of ranks under PMI-2."},
    {"PMI_JOBID", T_STR, NULL, F(pmi_jobid), NULL, S_LAUNCH,
     "PMI-2 job id (Slurm: job.step); names the job in fabcoll's log."},
};

#define NROWS ((int)(sizeof(rows) / sizeof(rows[0])))

static const char *type_name(enum row_type t)
{
    switch (t) {
    case T_INT: return "int";
    case T_SIZE: return "bytes";
    case T_SECONDS: return "seconds";
    case T_STR: return "string";
    case T_ENUM: return "choice";
    case T_BOOL: return "bool";
    case T_LEVEL: return "level";
    case T_SUBSYS: return "list";
    case T_MRMODE: return "list";
    }
    return "?";
}

int config_parse_size(const char *s, size_t *out)
{
    if (!s)
        return -1;
    while (isspace((unsigned char)*s))
        s++;
    if (!isdigit((unsigned char)*s))
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    unsigned long long mul = 1;
    switch (tolower((unsigned char)*end)) {
    case 'k': mul = 1ull << 10; end++; break;
    case 'm': mul = 1ull << 20; end++; break;
    case 'g': mul = 1ull << 30; end++; break;
    case 't': mul = 1ull << 40; end++; break;
    default: break;
    }
    if (mul > 1 && (*end == 'b' || *end == 'B'))
        end++;
    else if (mul > 1 && (*end == 'i') && (end[1] == 'b' || end[1] == 'B'))
        end += 2;
    while (isspace((unsigned char)*end))
        end++;
    if (*end != '\0')
        return -1;
    if (v > (unsigned long long)SIZE_MAX / mul)
        return -1;
    *out = (size_t)(v * mul);
    return 0;
}

int config_list_has(const char *list, const char *word)
{
    size_t wl = strlen(word);
    for (const char *p = list; p && *p;) {
        const char *c = strchr(p, ',');
        size_t l = c ? (size_t)(c - p) : strlen(p);
        while (l && *p == ' ')
            p++, l--;
        while (l && p[l - 1] == ' ')
            l--;
        if (l == wl && strncmp(p, word, l) == 0)
            return 1;
        p = c ? c + 1 : NULL;
    }
    return 0;
}

int config_parse_double(const char *s, double *out)
{
    if (!s || !*s)
        return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || end == s)
        return -1;
    while (isspace((unsigned char)*end))
        end++;
    if (*end != '\0' || !(v >= 0) || v > 1e9)
        return -1;
    *out = v;
    return 0;
}

static int parse_int(const char *s, int *out)
{
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (errno || end == s)
        return -1;
    while (isspace((unsigned char)*end))
        end++;
    if (*end || v < -2147483647L || v > 2147483647L)
        return -1;
    *out = (int)v;
    return 0;
}

/* Index of word [w, w+len) in the comma list, -1 if absent (case-insensitive). */
static int choice_index(const char *choices, const char *w, size_t len)
{
    int idx = 0;
    const char *p = choices;
    while (*p) {
        const char *c = strchr(p, ',');
        size_t l = c ? (size_t)(c - p) : strlen(p);
        if (l == len && strncasecmp(p, w, len) == 0)
            return idx;
        idx++;
        if (!c)
            break;
        p = c + 1;
    }
    return -1;
}

static int trimmed_word(const char **p, const char **w, size_t *len)
{
    while (**p == ' ' || **p == ',')
        (*p)++;
    if (!**p)
        return 0;
    *w = *p;
    while (**p && **p != ',')
        (*p)++;
    const char *e = *p;
    while (e > *w && e[-1] == ' ')
        e--;
    *len = (size_t)(e - *w);
    return 1;
}

static int parse_subsys(const char *s, unsigned *out)
{
    static const unsigned bits[] = {LOG_INIT, LOG_BOOT, LOG_NET, LOG_MR,
                                    LOG_COLL, LOG_TUNE, LOG_TOPO, LOG_ALL};
    int negate = 0;
    while (*s == ' ')
        s++;
    if (*s == '^') {
        negate = 1;
        s++;
    }
    unsigned m = 0;
    const char *w;
    size_t len;
    const char *p = s;
    while (trimmed_word(&p, &w, &len)) {
        int i = choice_index("INIT,BOOT,NET,MR,COLL,TUNE,TOPO,ALL", w, len);
        if (i < 0)
            return -1;
        m |= bits[i];
    }
    *out = negate ? (LOG_ALL & ~m) : m;
    return 0;
}

static int parse_mrmode(const char *s, unsigned *out)
{
    static const unsigned bits[] = {CFG_MR_LOCAL, CFG_MR_VIRT_ADDR, CFG_MR_PROV_KEY,
                                    CFG_MR_ALLOCATED, CFG_MR_ENDPOINT, CFG_MR_HMEM,
                                    CFG_MR_LOCAL | CFG_MR_VIRT_ADDR | CFG_MR_PROV_KEY |
                                        CFG_MR_ALLOCATED};
    unsigned m = 0;
    const char *w;
    size_t len;
    const char *p = s;
    while (trimmed_word(&p, &w, &len)) {
        int i = choice_index("local,virt_addr,prov_key,allocated,endpoint,hmem,verbs", w, len);
        if (i < 0)
            return -1;
        m |= bits[i];
    }
    *out = m;
    return 0;
}

static const char *expected(const struct row *r, char *buf, size_t len)
{
    switch (r->type) {
    case T_INT: return "an integer";
    case T_SIZE: return "a byte count such as 4096, 64K, 1M or 2G";
    case T_SECONDS: return "a number of seconds >= 0";
    case T_BOOL: return "0 or 1";
    case T_ENUM:
    case T_LEVEL:
    case T_SUBSYS:
    case T_MRMODE: snprintf(buf, len, "one of %s", r->choices); return buf;
    case T_STR: return "a string";
    }
    return "?";
}

/* Parses s into the field of row r; 0 on success. */
static int parse_row(const struct row *r, const char *s, cfg_t *cfg)
{
    char *field = (char *)cfg + r->off;
    switch (r->type) {
    case T_INT: return parse_int(s, (int *)field);
    case T_SIZE: return config_parse_size(s, (size_t *)field);
    case T_SECONDS: return config_parse_double(s, (double *)field);
    case T_BOOL: {
        int v;
        if (parse_int(s, &v) == 0 && (v == 0 || v == 1)) {
            *(int *)field = v;
            return 0;
        }
        int i = choice_index("no,yes,false,true,off,on", s, strlen(s));
        if (i < 0)
            return -1;
        *(int *)field = i & 1;
        return 0;
    }
    case T_ENUM:
    case T_LEVEL: {
        int i = choice_index(r->choices, s, strlen(s));
        if (i < 0 && r->type == T_LEVEL && strcasecmp(s, "VERSION") == 0)
            i = 1; /* NCCL habit: VERSION prints little; map to WARN */
        if (i < 0)
            return -1;
        *(int *)field = i;
        return 0;
    }
    case T_SUBSYS: return parse_subsys(s, (unsigned *)field);
    case T_MRMODE: return parse_mrmode(s, (unsigned *)field);
    case T_STR:
        if (strlen(s) >= r->size)
            return -1;
        memcpy(field, s, strlen(s) + 1);
        return 0;
    }
    return -1;
}

fc_result_t config_load_from(cfg_t *cfg, cfg_lookup_fn lookup, void *ctx)
{
    memset(cfg, 0, sizeof(*cfg));
    fc_result_t rc = FC_SUCCESS;
    for (int i = 0; i < NROWS; i++) {
        const struct row *r = &rows[i];
        if (r->def && parse_row(r, r->def, cfg) != 0)
            return FC_ERR(FC_ERR_INTERNAL, "default of %s does not parse", r->name);
    }
    for (int i = 0; i < NROWS; i++) {
        const struct row *r = &rows[i];
        const char *v = lookup ? lookup(r->name, ctx) : NULL;
        if (!v && strcmp(r->name, "PMIX_SERVER_URI41") == 0 && lookup) {
            /* any version of the PMIx server URI says a server is there */
            static const char *const alt[] = {"PMIX_SERVER_URI4", "PMIX_SERVER_URI3",
                                              "PMIX_SERVER_URI21", "PMIX_SERVER_URI2",
                                              "PMIX_SERVER_URI"};
            for (size_t k = 0; !v && k < sizeof(alt) / sizeof(alt[0]); k++)
                v = lookup(alt[k], ctx);
        }
        if (!v)
            continue;
        if (parse_row(r, v, cfg) != 0) {
            char buf[128];
            if (r->def)
                parse_row(r, r->def, cfg);
            if (rc == FC_SUCCESS)
                rc = FC_ERR(FC_ERR_INVALID_ARGUMENT,
                            "setting %s='%s' is not valid: expected %s (fc_info -e lists the "
                            "settings)",
                            r->name, v, expected(r, buf, sizeof(buf)));
        }
    }
    /* 0 waits without a limit, as FC_TIMEOUT=0 does (a deadline of "now"
     * would fail every bootstrap at once) */
    if (cfg->boot_timeout <= 0)
        cfg->boot_timeout = 1e9;
    return rc;
}

static const char *env_lookup(const char *name, void *ctx)
{
    (void)ctx;
    const char *v = getenv(name);
    return (v && *v) ? v : NULL;
}

static cfg_t global_cfg;
static fc_result_t global_status;
static char global_error[1024];

static void global_load(void)
{
    /* before any fi_getinfo of this library: libfabric reads its variables
     * once, when its providers load */
    for (int i = 0; i < NROWS; i++)
        if (rows[i].section == S_LIBFABRIC && rows[i].def)
            setenv(rows[i].name, rows[i].def, 0);
    global_status = config_load_from(&global_cfg, env_lookup, NULL);
    if (global_status != FC_SUCCESS)
        snprintf(global_error, sizeof(global_error), "%s", err_get());
    log_setup(global_cfg.debug, global_cfg.debug_subsys, global_cfg.debug_file);
}

const cfg_t *config_global(fc_result_t *status)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, global_load);
    if (status) {
        *status = global_status;
        if (global_status != FC_SUCCESS)
            err_restore(global_error);
    }
    return &global_cfg;
}

int config_nrows(void)
{
    return NROWS;
}

struct cfg_row_info config_row(int i)
{
    struct cfg_row_info ri = {0};
    if (i < 0 || i >= NROWS)
        return ri;
    ri.name = rows[i].name;
    ri.type = type_name(rows[i].type);
    ri.def = rows[i].def ? rows[i].def : "";
    ri.help = rows[i].help;
    ri.section = rows[i].section;
    return ri;
}

/* Wraps help text at ~76 columns with the given indent. */
static void print_wrapped(FILE *fp, const char *text, int indent)
{
    int col = indent;
    fprintf(fp, "%*s", indent, "");
    const char *p = text;
    while (*p) {
        const char *sp = strchr(p, ' ');
        size_t wl = sp ? (size_t)(sp - p) : strlen(p);
        if (col + (int)wl > 78 && col > indent) {
            fprintf(fp, "\n%*s", indent, "");
            col = indent;
        }
        fprintf(fp, "%.*s", (int)wl, p);
        col += (int)wl;
        p += wl;
        if (*p == ' ') {
            fputc(' ', fp);
            col++;
            p++;
        }
    }
    fputc('\n', fp);
}

void config_print_table(void *file, int verbose)
{
    FILE *fp = file;
    const char *section = NULL;
    for (int i = 0; i < NROWS; i++) {
        const struct row *r = &rows[i];
        if (!verbose && r->section == S_LAUNCH)
            continue;
        if (section != r->section) {
            section = r->section;
            fprintf(fp, "%s# %s\n", i ? "\n" : "", section);
        }
        const char *cur = env_lookup(r->name, NULL);
        fprintf(fp, "%s (%s%s%s%s%s)\n", r->name, type_name(r->type),
                r->choices ? ": " : "", r->choices ? r->choices : "",
                r->def ? (r->def[0] ? ", default " : "") : ", default unset",
                r->def ? r->def : "");
        if (cur)
            fprintf(fp, "    current value: %s\n", cur);
        print_wrapped(fp, r->help, 4);
    }
}
