/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * PMIx bootstrap: under `srun --mpi=pmix` or Open MPI's mpirun the PMIx
 * server already knows every process; each allgather round is a
 * put/commit/fence(collect)/get of one key per rank.
 */
#define _GNU_SOURCE
#include <pmix.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "boot.h"
#include "log.h"

struct boot_pmix {
    struct boot base;
    pmix_proc_t me;
    uint32_t session, round;
};

static atomic_uint pmix_session;

static fc_result_t pmix_allgather(struct boot *b, const void *mine, size_t len, void *all)
{
    struct boot_pmix *p = (struct boot_pmix *)b;
    char key[PMIX_MAX_KEYLEN + 1];
    snprintf(key, sizeof(key), "fc.%u.%u", p->session, p->round++);
    pmix_value_t v;
    memset(&v, 0, sizeof(v));
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = (char *)mine;
    v.data.bo.size = len;
    pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, key, &v);
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
    }
    return FC_SUCCESS;
}

static void pmix_close(struct boot *b)
{
    PMIx_Finalize(NULL, 0);
    free(b);
}

static const struct boot_ops pmix_ops = {"pmix", pmix_allgather, pmix_close};

fc_result_t boot_pmix_open(const cfg_t *cfg, struct boot **out)
{
    (void)cfg;
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
        return FC_ERR(FC_ERR_BOOTSTRAP, "PMIx_Get(PMIX_JOB_SIZE) failed: %s",
                      PMIx_Error_string(rc));
    }
    uint32_t size = 0;
    if (val->type == PMIX_UINT32)
        size = val->data.uint32;
    else if (val->type == PMIX_INT)
        size = (uint32_t)val->data.integer;
    PMIX_VALUE_RELEASE(val);
    p->base.ops = &pmix_ops;
    p->base.rank = (int)p->me.rank;
    p->base.nranks = (int)size;
    p->session = atomic_fetch_add(&pmix_session, 1);
    snprintf(p->base.how, sizeof(p->base.how), "PMIx (namespace %s, rank %u of %u)", p->me.nspace,
             p->me.rank, size);
    *out = &p->base;
    return FC_SUCCESS;
}
