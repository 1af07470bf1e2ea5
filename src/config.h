/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The one table of settings.
 *
 * Every environment variable fabcoll reads is a row of the table in
 * config.c (name, type, default, help): the FC_* settings users set, and the
 * launcher variables (FC_RANK from fc_run, SLURM_*, PMIX_*, PMI_*) fabcoll only
 * reads. config_load() reads them all once into a cfg_t snapshot; nothing
 * else in the library calls getenv. Tests build their own snapshot with
 * config_load_from().
 */
#ifndef FC_CONFIG_H
#define FC_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "fabcoll.h"

enum cfg_gdr { CFG_GDR_AUTO, CFG_GDR_ON, CFG_GDR_OFF };
enum cfg_fused { CFG_FUSED_AUTO, CFG_FUSED_ON, CFG_FUSED_OFF };
enum cfg_paths { CFG_PATHS_AUTO, CFG_PATHS_SINGLE };
enum cfg_tune_mem { CFG_TUNE_MEM_AUTO, CFG_TUNE_MEM_HOST, CFG_TUNE_MEM_DEVICE };
enum cfg_proto { CFG_PROTO_AUTO, CFG_PROTO_EAGER, CFG_PROTO_RNDV };
enum cfg_boot { CFG_BOOT_AUTO, CFG_BOOT_PMIX, CFG_BOOT_PMI2, CFG_BOOT_FCRUN, CFG_BOOT_SLURM };
enum cfg_boot_auth { CFG_AUTH_MUNGE, CFG_AUTH_NONE };
/* FC_MR_MODE bits (prov/ maps them to FI_MR_*); "verbs" = LOCAL|VIRT_ADDR|PROV_KEY|ALLOCATED */
enum cfg_mr {
    CFG_MR_LOCAL = 1,
    CFG_MR_VIRT_ADDR = 2,
    CFG_MR_PROV_KEY = 4,
    CFG_MR_ALLOCATED = 8,
    CFG_MR_ENDPOINT = 16,
    CFG_MR_HMEM = 32
};

#define CFG_STR 256

typedef struct cfg {
    /* logging */
    int debug;            /* enum log_level */
    unsigned debug_subsys; /* enum log_subsys mask */
    char debug_file[CFG_STR];
    char profiler[CFG_STR];     /* FC_PROFILER */
    char profile_file[CFG_STR]; /* FC_PROFILE_FILE */
    /* fabric */
    char fi_provider[CFG_STR]; /* FI_PROVIDER as libfabric sees it (report only) */
    int rxm_msg_rx_size;       /* FI_OFI_RXM_MSG_RX_SIZE asked of libfabric (exported default) */
    char iface[CFG_STR];
    char node[CFG_STR];   /* FC_NODE: this rank's node identity (empty: its host name) */
    int paths;            /* enum cfg_paths */
    char nics[CFG_STR];
    int gdr;              /* enum cfg_gdr */
    int gpu_fused;        /* enum cfg_fused */
    int tune_memory;      /* enum cfg_tune_mem */
    int proto;            /* enum cfg_proto */
    size_t eager_max;     /* 0: provider default */
    size_t rndv_min;      /* 0: provider default */
    size_t chunk_size;    /* 0: provider default */
    int inflight;         /* chunks in flight per step; 0: provider default */
    int rails;            /* endpoints per rank; 0: auto */
    int retry_count;
    double timeout;       /* seconds without progress before FC_ERR_TIMEOUT; 0: none */
    char algo[CFG_STR];   /* FC_ALGO */
    char tune_file[CFG_STR];
    char topo_file[CFG_STR];
    int spin;             /* polls before yielding the CPU */
    int progress_thread;
    int hang_report;
    int reproducible; /* FC_REPRODUCIBLE */
    unsigned mr_mode_force; /* FC_MR_MODE: enum cfg_mr bits honoured as if demanded */
    size_t mr_cache_max;  /* registration cache bound, bytes */
    /* bootstrap */
    int bootstrap;        /* enum cfg_boot */
    double boot_timeout;  /* seconds for every rank to join */
    int boot_auth;        /* enum cfg_boot_auth: plain srun's rendezvous */
    char munge_socket[CFG_STR]; /* "" = libmunge's default */
    /* launcher variables (read only) */
    int fc_rank, fc_size, fc_local_rank, fc_local_size; /* -1 when unset */
    char fc_root_addr[CFG_STR];
    char fc_job_secret[CFG_STR];
    int slurm_procid, slurm_ntasks, slurm_localid; /* -1 when unset */
    char slurm_nodelist[1024];
    char slurm_job_id[64], slurm_step_id[64];
    char pmix_namespace[CFG_STR];
    int pmix_rank;        /* -1 when unset */
    char pmix_server_uri[CFG_STR];
    int pmi_fd, pmi_rank, pmi_size; /* PMI-2 (srun --mpi=pmi2); -1 when unset */
    char pmi_jobid[CFG_STR];
} cfg_t;

typedef const char *(*cfg_lookup_fn)(const char *name, void *ctx);

/* Fills *cfg from lookup (defaults for absent names). On a value that does
 * not parse returns FC_ERR_INVALID_ARGUMENT and records which setting and
 * what was expected; *cfg then holds defaults for the bad entries. */
fc_result_t config_load_from(cfg_t *cfg, cfg_lookup_fn lookup, void *ctx);

/* The process snapshot, read from the environment on first use. The
 * result of that first parse is returned in *status (may be NULL). */
const cfg_t *config_global(fc_result_t *status);

/* Parsers shared with tools; return 0 on success. */
int config_parse_size(const char *s, size_t *out);   /* "64K", "1M", "2g", "4096" */
int config_parse_double(const char *s, double *out);
/* Whether the comma list (FC_NICS, FC_IFACE) names word, spaces around
 * an item ignored ("mlx5_0, mlx5_1"). */
int config_list_has(const char *list, const char *word);

/* Prints the table: name, type, default, current value, help. */
void config_print_table(void *file, int verbose);

/* Number of rows and access for tests/tools. */
struct cfg_row_info {
    const char *name, *type, *def, *help, *section;
};
int config_nrows(void);
struct cfg_row_info config_row(int i);

#endif /* FC_CONFIG_H */
