/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * PMI-2 bootstrap: under `srun --mpi=pmi2` slurmstepd serves a key-value
 * space over the descriptor in PMI_FD. Each allgather round puts this
 * rank's blob hex-encoded (PMI-2 values are strings of at most
 * PMI2_MAX_VALLEN characters, so a blob is cut over several keys), fences
 * (a job-wide collective that makes every put visible), then gets every
 * rank's keys.
 *
 * One connection per process. Slurm's libpmi2 cannot be initialized again
 * after PMI2_Finalize (it closes the descriptor in PMI_FD and a second
 * PMI2_Init would talk to a closed or reused one), and a program may create
 * communicators one after another, each opening and closing a bootstrap. So
 * the first open calls PMI2_Init, later ones reuse it, and PMI2_Finalize
 * runs once when the process exits (or the library is unloaded). When
 * someone else (an MPI library using the same libpmi2) initialized PMI-2
 * first, we use their connection and leave finalizing to them.
 *
 * An MPI library with its own PMI client (MPICH and Intel MPI embed one)
 * talks over the same PMI_FD, and a second client on that descriptor would
 * corrupt its stream: in MPI programs, create communicators with
 * fc_get_unique_id + MPI_Bcast + fc_comm_init_rank (contrib/examples/
 * mpi_interop.c), which never touches the launcher.
 *
 * libpmi2 is not thread safe: every call is made under one lock.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <slurm/pmi2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot.h"
#include "log.h"

/* bytes of blob per key: 2 hex digits each, plus the NUL, within a value */
#define CHUNK_BYTES ((PMI2_MAX_VALLEN - 24) / 2)

struct boot_pmi2 {
    struct boot base;
    uint32_t session, round;
};

static pthread_mutex_t pmi2_lock = PTHREAD_MUTEX_INITIALIZER;
static enum { P2_NONE, P2_OURS, P2_THEIRS } pmi2_state;
static int pmi2_rank = -1, pmi2_size = -1;
static char pmi2_jobid[PMI2_MAX_VALLEN + 1];
static uint32_t pmi2_sessions; /* under pmi2_lock */

static const char *pmi2_strerror(int rc)
{
    switch (rc) {
    case PMI2_SUCCESS: return "success";
    case PMI2_FAIL: return "PMI2_FAIL";
    case PMI2_ERR_INIT: return "PMI2_ERR_INIT (not initialized)";
    case PMI2_ERR_NOMEM: return "PMI2_ERR_NOMEM";
    case PMI2_ERR_INVALID_ARG: return "PMI2_ERR_INVALID_ARG";
    case PMI2_ERR_INVALID_KEY: return "PMI2_ERR_INVALID_KEY";
    case PMI2_ERR_INVALID_KEY_LENGTH: return "PMI2_ERR_INVALID_KEY_LENGTH";
    case PMI2_ERR_INVALID_VAL: return "PMI2_ERR_INVALID_VAL";
    case PMI2_ERR_INVALID_VAL_LENGTH: return "PMI2_ERR_INVALID_VAL_LENGTH";
    case PMI2_ERR_INVALID_LENGTH: return "PMI2_ERR_INVALID_LENGTH";
    case PMI2_ERR_INVALID_NUM_ARGS: return "PMI2_ERR_INVALID_NUM_ARGS";
    case PMI2_ERR_INVALID_ARGS: return "PMI2_ERR_INVALID_ARGS";
    case PMI2_ERR_INVALID_NUM_PARSED: return "PMI2_ERR_INVALID_NUM_PARSED";
    case PMI2_ERR_INVALID_KEYVALP: return "PMI2_ERR_INVALID_KEYVALP";
    case PMI2_ERR_INVALID_SIZE: return "PMI2_ERR_INVALID_SIZE";
    case PMI2_ERR_OTHER: return "PMI2_ERR_OTHER (the server refused or went away)";
    }
    return "unknown PMI-2 error";
}

static void pmi2_at_exit(void)
{
    pthread_mutex_lock(&pmi2_lock);
    if (pmi2_state == P2_OURS)
        PMI2_Finalize();
    pmi2_state = P2_NONE;
    pthread_mutex_unlock(&pmi2_lock);
}

static void chunk_key(char *key, size_t len, uint32_t session, uint32_t round, int rank, size_t c)
{
    snprintf(key, len, "fc%u.%u.%d.%zu", session, round, rank, c);
}

static fc_result_t pmi2_allgather(struct boot *b, const void *mine, size_t len, void *all)
{
    struct boot_pmi2 *p = (struct boot_pmi2 *)b;
    uint32_t round = p->round++;
    size_t nchunks = (len + CHUNK_BYTES - 1) / CHUNK_BYTES;
    char key[PMI2_MAX_KEYLEN];
    char val[PMI2_MAX_VALLEN + 1];
    fc_result_t res = FC_SUCCESS;
    int rc;

    pthread_mutex_lock(&pmi2_lock);
    for (size_t c = 0; c < nchunks; c++) {
        size_t off = c * CHUNK_BYTES, n = len - off < CHUNK_BYTES ? len - off : CHUNK_BYTES;
        chunk_key(key, sizeof(key), p->session, round, b->rank, c);
        boot_hex_encode((const uint8_t *)mine + off, n, val, sizeof(val));
        rc = PMI2_KVS_Put(key, val);
        if (rc != PMI2_SUCCESS) {
            res = FC_ERR(FC_ERR_BOOTSTRAP,
                         "PMI2_KVS_Put of key %s (%zu of %zu bytes) failed: %s. Fix: is the "
                         "job step still running? Use srun --mpi=pmix or FC_BOOTSTRAP=slurm "
                         "if this Slurm's PMI-2 is unreliable",
                         key, n, len, pmi2_strerror(rc));
            goto out;
        }
    }
    rc = PMI2_KVS_Fence();
    if (rc != PMI2_SUCCESS) {
        res = FC_ERR(FC_ERR_BOOTSTRAP,
                     "PMI2_KVS_Fence (job %s, %d ranks, round %u) failed: %s: a rank may have "
                     "exited; see its own error output",
                     pmi2_jobid, b->nranks, round, pmi2_strerror(rc));
        goto out;
    }
    for (int r = 0; r < b->nranks; r++) {
        for (size_t c = 0; c < nchunks; c++) {
            size_t off = c * CHUNK_BYTES, n = len - off < CHUNK_BYTES ? len - off : CHUNK_BYTES;
            int vallen = 0;
            chunk_key(key, sizeof(key), p->session, round, r, c);
            rc = PMI2_KVS_Get(pmi2_jobid, r, key, val, (int)sizeof(val), &vallen);
            if (rc != PMI2_SUCCESS || vallen != (int)(2 * n) ||
                boot_hex_decode(val, (uint8_t *)all + (size_t)r * len + off, n) != 0) {
                res = FC_ERR(FC_ERR_BOOTSTRAP,
                             "PMI2_KVS_Get of rank %d's key %s failed: %s (expected %zu hex "
                             "digits, got %d). Fix: every rank must run the same fabcoll and "
                             "call fc_comm_init the same number of times",
                             r, key, rc != PMI2_SUCCESS ? pmi2_strerror(rc) : "malformed value",
                             2 * n, vallen);
                goto out;
            }
        }
    }
    FC_TRACE(LOG_BOOT,
             "PMI-2 allgather round %u of session %u: %zu bytes x %d ranks, %zu key%s "
             "per rank",
             round, p->session, len, b->nranks, nchunks, nchunks == 1 ? "" : "s");
out:
    pthread_mutex_unlock(&pmi2_lock);
    return res;
}

static void pmi2_close(struct boot *b)
{
    /* the connection stays open for later communicators: see the top */
    free(b);
}

static const struct boot_ops pmi2_ops = {"pmi2", pmi2_allgather, pmi2_close};

fc_result_t boot_pmi2_open(const cfg_t *cfg, struct boot **out)
{
    if (cfg->pmi_fd < 0)
        return FC_ERR(FC_ERR_BOOTSTRAP,
                      "PMI-2 bootstrap, but PMI_FD is not set: the process was not started by "
                      "a PMI-2 server. Fix: srun --mpi=pmi2 (srun --mpi=list shows what this "
                      "Slurm has)");
    struct boot_pmi2 *p = calloc(1, sizeof(*p));
    if (!p)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory");
    fc_result_t res = FC_SUCCESS;
    pthread_mutex_lock(&pmi2_lock);
    if (pmi2_state == P2_NONE) {
        int rc;
        if (PMI2_Initialized()) {
            /* an MPI library (or the application) got there first */
            int rank = -1, size = -1;
            rc = PMI2_Job_GetRank(&rank);
            if (rc == PMI2_SUCCESS)
                rc = PMI2_Info_GetSize(&size);
            if (rc != PMI2_SUCCESS) {
                res = FC_ERR(FC_ERR_BOOTSTRAP,
                             "PMI-2 was initialized by someone else, but PMI2_Job_GetRank/"
                             "PMI2_Info_GetSize failed: %s. Fix: FC_BOOTSTRAP=slurm, or "
                             "fc_get_unique_id + fc_comm_init_rank",
                             pmi2_strerror(rc));
                goto out;
            }
            pmi2_rank = rank;
            pmi2_size = size;
            pmi2_state = P2_THEIRS;
        } else {
            int spawned = 0, size = -1, rank = -1, appnum = 0;
            rc = PMI2_Init(&spawned, &size, &rank, &appnum);
            if (rc != PMI2_SUCCESS) {
                res = FC_ERR(FC_ERR_BOOTSTRAP,
                             "PMI2_Init (PMI_FD=%d) failed: %s. Fix: start the program with "
                             "srun --mpi=pmi2 directly (not through a shell that closes "
                             "descriptors), or use srun --mpi=pmix",
                             cfg->pmi_fd, pmi2_strerror(rc));
                goto out;
            }
            pmi2_rank = rank;
            pmi2_size = size;
            pmi2_state = P2_OURS;
            atexit(pmi2_at_exit);
        }
        if (PMI2_Job_GetId(pmi2_jobid, (int)sizeof(pmi2_jobid)) != PMI2_SUCCESS)
            snprintf(pmi2_jobid, sizeof(pmi2_jobid), "%s", cfg->pmi_jobid);
    }
    if (pmi2_size <= 0 || pmi2_rank < 0 || pmi2_rank >= pmi2_size ||
        (cfg->pmi_size > 0 && cfg->pmi_size != pmi2_size) ||
        (cfg->pmi_rank >= 0 && cfg->pmi_rank != pmi2_rank)) {
        res = FC_ERR(FC_ERR_BOOTSTRAP,
                     "PMI-2 says rank %d of %d, the environment says PMI_RANK=%d PMI_SIZE=%d: "
                     "inconsistent. Fix: start the program with srun --mpi=pmi2 directly",
                     pmi2_rank, pmi2_size, cfg->pmi_rank, cfg->pmi_size);
        goto out;
    }
    p->base.ops = &pmi2_ops;
    p->base.rank = pmi2_rank;
    p->base.nranks = pmi2_size;
    p->session = pmi2_sessions++;
    snprintf(p->base.how, sizeof(p->base.how), "PMI-2 (job %.40s, rank %d of %d, session %u)",
             pmi2_jobid[0] ? pmi2_jobid : "?", pmi2_rank, pmi2_size, p->session);
out:
    pthread_mutex_unlock(&pmi2_lock);
    if (res != FC_SUCCESS) {
        free(p);
        return res;
    }
    *out = &p->base;
    return FC_SUCCESS;
}
