/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Picking an algorithm: FC_ALGO forces one per collective; FC_TUNE_FILE
 * rules (collective, byte range, rank range -> algorithm) come next; else
 * the alpha-beta-gamma cost model predicts each applicable algorithm's time
 * and the cheapest wins.
 */
#include "select.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <strings.h>

#include "log.h"

static const char *const kind_names[COLL_NKINDS] = {
    "allreduce", "bcast", "reduce", "allgather", "reduce_scatter", "alltoall", "barrier",
    "gather", "scatter", "allgatherv", "alltoallv"};

const char *coll_kind_name(enum coll_kind k)
{
    return (unsigned)k < COLL_NKINDS ? kind_names[k] : "?";
}

size_t coll_region_bytes(const struct coll_args *a, int recv)
{
    size_t b = a->count * a->esize, n = (size_t)a->nranks;
    int root = a->rank == a->root;
    switch (a->kind) {
    case COLL_ALLREDUCE: return b;
    case COLL_BCAST: return recv || root ? b : 0;
    case COLL_REDUCE: return !recv || root ? b : 0;
    case COLL_ALLGATHER: return recv ? n * b : b;
    case COLL_REDUCE_SCATTER: return recv ? b : n * b;
    case COLL_ALLTOALL: return n * b;
    case COLL_GATHER: return !recv ? b : root ? n * b : 0;
    case COLL_SCATTER: return recv ? b : root ? n * b : 0;
    case COLL_ALLGATHERV:
        return recv ? coll_v_extent(a->rcounts, a->rdispls, a->nranks) * a->esize : b;
    case COLL_ALLTOALLV:
        return (recv ? coll_v_extent(a->rcounts, a->rdispls, a->nranks)
                     : coll_v_extent(a->scounts, a->sdispls, a->nranks)) * a->esize;
    default: return 0;
    }
}

int coll_kind_from_name(const char *name, size_t len)
{
    for (int k = 0; k < COLL_NKINDS; k++)
        if (strlen(kind_names[k]) == len && strncasecmp(kind_names[k], name, len) == 0)
            return k;
    if (len == 9 && strncasecmp(name, "broadcast", 9) == 0)
        return COLL_BCAST;
    return -1;
}

const struct coll_algo *coll_algo_find(enum coll_kind k, const char *name, size_t len)
{
    for (int i = 0; coll_algos[i]; i++)
        if (coll_algos[i]->kind == k && strlen(coll_algos[i]->name) == len &&
            strncasecmp(coll_algos[i]->name, name, len) == 0)
            return coll_algos[i];
    return NULL;
}

static void list_algos(enum coll_kind k, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; coll_algos[i] && o < len; i++)
        if (coll_algos[i]->kind == k)
            o += (size_t)snprintf(buf + o, len - o, "%s%s", o ? ", " : "", coll_algos[i]->name);
}

void coll_tuning_init(struct coll_tuning *t, const struct coll_cost *c)
{
    memset(t, 0, sizeof(*t));
    t->cost = *c;
}

fc_result_t coll_tuning_force(struct coll_tuning *t, const char *spec)
{
    const char *p = spec;
    while (p && *p) {
        while (*p == ' ' || *p == ',')
            p++;
        if (!*p)
            break;
        const char *colon = strchr(p, ':');
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        if (!colon || colon > end)
            return FC_ERR(FC_ERR_INVALID_ARGUMENT,
                          "FC_ALGO='%s': expected collective:algorithm pairs such as "
                          "allreduce:ring,bcast:chain",
                          spec);
        int k = coll_kind_from_name(p, (size_t)(colon - p));
        if (k < 0)
            return FC_ERR(FC_ERR_INVALID_ARGUMENT,
                          "FC_ALGO='%s': unknown collective '%.*s' (allreduce, bcast, reduce, "
                          "allgather, reduce_scatter, alltoall, barrier)",
                          spec, (int)(colon - p), p);
        const char *an = colon + 1;
        size_t alen = (size_t)(end - an);
        while (alen && an[alen - 1] == ' ')
            alen--;
        const struct coll_algo *al = coll_algo_find((enum coll_kind)k, an, alen);
        if (!al) {
            char have[256];
            list_algos((enum coll_kind)k, have, sizeof(have));
            return FC_ERR(FC_ERR_INVALID_ARGUMENT,
                          "FC_ALGO='%s': no algorithm '%.*s' for %s (have: %s)", spec, (int)alen,
                          an, kind_names[k], have);
        }
        t->forced[k] = al;
        p = end;
    }
    return FC_SUCCESS;
}

fc_result_t coll_tuning_load_file(struct coll_tuning *t, const char *path)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return FC_ERR(FC_ERR_INVALID_ARGUMENT, "FC_TUNE_FILE=%s cannot be opened: %m", path);
    struct stat sb;
    if (fstat(fileno(fp), &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fclose(fp);
        return FC_ERR(FC_ERR_INVALID_ARGUMENT,
                      "FC_TUNE_FILE=%s is a directory: name a file of rules", path);
    }
    char line[512];
    int lineno = 0;
    fc_result_t rc = FC_SUCCESS;
    while (fgets(line, sizeof(line), fp)) {
        lineno++;
        char *h = strchr(line, '#');
        if (h)
            *h = '\0';
        char coll[64], algo[64], lo[32], hi[32], rlo[32] = "0", rhi[32] = "max";
        int nf = sscanf(line, "%63s %31s %31s %63s %31s %31s", coll, lo, hi, algo, rlo, rhi);
        if (nf <= 0)
            continue;
        struct coll_rule ru;
        memset(&ru, 0, sizeof(ru));
        int k = nf >= 4 ? coll_kind_from_name(coll, strlen(coll)) : -1;
        size_t vlo, vhi;
        if (k < 0 || config_parse_size(lo, &vlo) ||
            (strcmp(hi, "max") != 0 && config_parse_size(hi, &vhi))) {
            rc = FC_ERR(FC_ERR_INVALID_ARGUMENT,
                        "FC_TUNE_FILE=%s line %d: expected 'collective min_bytes max_bytes "
                        "algorithm [min_ranks max_ranks]'",
                        path, lineno);
            break;
        }
        if (strcmp(hi, "max") == 0)
            vhi = (size_t)-1;
        const struct coll_algo *al = coll_algo_find((enum coll_kind)k, algo, strlen(algo));
        if (!al) {
            char have[256];
            list_algos((enum coll_kind)k, have, sizeof(have));
            rc = FC_ERR(FC_ERR_INVALID_ARGUMENT,
                        "FC_TUNE_FILE=%s line %d: no algorithm '%s' for %s (have: %s)", path,
                        lineno, algo, coll, have);
            break;
        }
        ru.kind = (enum coll_kind)k;
        ru.min_bytes = vlo;
        ru.max_bytes = vhi;
        ru.min_ranks = atoi(rlo);
        ru.max_ranks = strcmp(rhi, "max") == 0 ? 1 << 30 : atoi(rhi);
        ru.algo = al;
        if (t->nrules == COLL_MAX_RULES) {
            rc = FC_ERR(FC_ERR_INVALID_ARGUMENT, "FC_TUNE_FILE=%s: more than %d rules", path,
                        COLL_MAX_RULES);
            break;
        }
        t->rules[t->nrules++] = ru;
    }
    fclose(fp);
    return rc;
}

static size_t coll_bytes(const struct coll_args *a)
{
    if (coll_is_v(a->kind)) /* allgatherv: every rank's; alltoallv: this rank's sends */
        return coll_v_sum(a->kind == COLL_ALLGATHERV ? a->rcounts : a->scounts, a->nranks) *
               a->esize;
    size_t b = a->count * a->esize;
    return coll_blocked(a->kind) ? b * (size_t)a->nranks : b;
}

double coll_algo_cost(const struct coll_algo *al, const struct coll_args *a,
                      const struct coll_cost *c)
{
    if (!(c->oversub > 1))
        return al->cost(a, c);
    struct coll_cost e = *c;
    if (al->shares) {
        e.alpha += c->handoff; /* and cost() shares the CPUs per step */
        if (e.alpha_node > 0)
            e.alpha_node += c->handoff;
        if (e.hs > 0) /* the acknowledgement waits for the peer's turn */
            e.hs += c->handoff;
        if (e.hs_oneway > 0)
            e.hs_oneway += c->handoff;
    } else {
        /* every rank works in every step, in lockstep: all of it runs k
         * times slower, which keeps these algorithms' order (4 ranks on 2
         * CPUs, shm: rabenseifner's 4 steps still beat rd's 2 from 16 KiB,
         * as with a CPU per rank; a handoff per step would have put rd
         * first up to 64 KiB, 14% slower there) */
        double k = coll_share(c, a->nranks, a->nranks);
        e.alpha *= k;
        e.beta *= k;
        e.alpha_node *= k;
        e.beta_node *= k;
        e.gamma *= k;
        e.hs *= k;
        e.hs_oneway *= k;
    }
    return al->cost(a, &e);
}

const struct coll_algo *coll_select_by_cost(const struct coll_tuning *t,
                                            const struct coll_args *a, double *predicted)
{
    const struct coll_algo *best = NULL;
    double best_cost = 0;
    for (int i = 0; coll_algos[i]; i++) {
        const struct coll_algo *al = coll_algos[i];
        if (al->kind != a->kind || !al->check(a))
            continue;
        const int repro = t->reproducible && coll_kind_reduces(a->kind);
        if (repro ? !al->rank_order : al->reproducible_only)
            continue;
        double c = coll_algo_cost(al, a, &t->cost);
        if (!best || c < best_cost * (1 - best->tie_margin)) {
            best = al;
            best_cost = c;
        }
    }
    if (predicted)
        *predicted = best_cost;
    return best;
}

extern const struct coll_algo coll_allreduce_gather;

const struct coll_algo *coll_select(const struct coll_tuning *t, const struct coll_args *a,
                                    const char **why)
{
    const int repro = t->reproducible && coll_kind_reduces(a->kind);
    const struct coll_algo *f = t->forced[a->kind];
    if (f && (!f->check || f->check(a)) && (!repro || f->rank_order)) {
        if (why)
            *why = "FC_ALGO";
        return f;
    }
    size_t bytes = coll_bytes(a);
    for (int i = 0; i < t->nrules; i++) {
        const struct coll_rule *ru = &t->rules[i];
        if (ru->kind == a->kind && bytes >= ru->min_bytes && bytes <= ru->max_bytes &&
            a->nranks >= ru->min_ranks && a->nranks <= ru->max_ranks &&
            (!ru->algo->check || ru->algo->check(a)) && (!repro || ru->algo->rank_order)) {
            if (why)
                *why = "FC_TUNE_FILE";
            return ru->algo;
        }
    }
    if (a->kind == COLL_ALLREDUCE && t->dev_gather_max && a->nranks > 1 &&
        bytes <= t->dev_gather_max / (size_t)a->nranks && coll_allreduce_gather.check(a)) {
        if (why)
            *why = "device tuning (FC_TUNE_MEMORY: one GPU trip)";
        return &coll_allreduce_gather;
    }
    if (why)
        *why = f && repro && !f->rank_order
                   ? "FC_REPRODUCIBLE (FC_ALGO's choice does not reduce in rank order)"
               : f ? "cost model (FC_ALGO's choice does not apply here)"
                   : repro ? "cost model among the algorithms that reduce in rank order "
                             "(FC_REPRODUCIBLE)"
                           : "cost model";
    return coll_select_by_cost(t, a, NULL);
}
