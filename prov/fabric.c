/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which providers this rank can use, and which one all ranks agree on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "prov_int.h"

#define FC_FI_VERSION FI_VERSION(1, 11)

uint64_t prov_mr_mode_of_cfg(unsigned b)
{
    uint64_t m = 0;
    if (b & CFG_MR_LOCAL)
        m |= FI_MR_LOCAL;
    if (b & CFG_MR_VIRT_ADDR)
        m |= FI_MR_VIRT_ADDR;
    if (b & CFG_MR_PROV_KEY)
        m |= FI_MR_PROV_KEY;
    if (b & CFG_MR_ALLOCATED)
        m |= FI_MR_ALLOCATED;
    if (b & CFG_MR_ENDPOINT)
        m |= FI_MR_ENDPOINT;
    if (b & CFG_MR_HMEM)
        m |= FI_MR_HMEM;
    return m;
}

struct fi_info *prov_hints(uint64_t caps_extra)
{
    struct fi_info *h = fi_allocinfo();
    if (!h)
        return NULL;
    h->ep_attr->type = FI_EP_RDM;
    /* receives name their source: two peers may use the same tag */
    h->caps = FI_TAGGED | FI_MSG | FI_DIRECTED_RECV | caps_extra;
    /* we hand the provider a 64-byte context with every operation */
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    /* every mode bit we honour: providers that need them (verbs: LOCAL,
     * VIRT_ADDR, PROV_KEY, ALLOCATED; efa, cxi: ENDPOINT; HMEM for device
     * memory) are then offered, the others ignore the bits */
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                              FI_MR_ENDPOINT | FI_MR_HMEM;
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    h->domain_attr->av_type = FI_AV_TABLE;
    return h;
}

int prov_is_loopback(const struct fi_info *fi)
{
    const char *d = fi->domain_attr ? fi->domain_attr->name : NULL;
    const char *f = fi->fabric_attr ? fi->fabric_attr->name : NULL;
    if (d && strcmp(d, "lo") == 0)
        return 1;
    if (f && (strncmp(f, "127.", 4) == 0 || strcmp(f, "::1/128") == 0))
        return 1;
    return 0;
}

/* IPv6 fabrics (tcp lists one per address) rank after IPv4 ones; link-local
 * ones last: they need a scope id to be reachable. */
static int fabric_penalty(const char *fabric)
{
    if (!fabric)
        return 0;
    if (strncmp(fabric, "fe80:", 5) == 0)
        return 20;
    if (strchr(fabric, ':'))
        return 10;
    return 0;
}

static int cand_cmp(const void *a, const void *b)
{
    const struct prov_cand *x = a, *y = b;
    if (x->pref != y->pref)
        return x->pref < y->pref ? -1 : 1;
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    c = strcmp(x->fabric, y->fabric);
    if (c)
        return c;
    return strcmp(x->domain, y->domain);
}

static void mark_caps(struct prov_list *l, uint64_t cap, int hmem)
{
    struct fi_info *h = prov_hints(cap), *info = NULL;
    if (!h)
        return;
    if (fi_getinfo(FC_FI_VERSION, NULL, NULL, 0, h, &info) == 0) {
        for (struct fi_info *fi = info; fi; fi = fi->next)
            for (uint32_t i = 0; i < l->n; i++)
                if (strcmp(l->c[i].name, fi->fabric_attr->prov_name) == 0 &&
                    strcmp(l->c[i].fabric, fi->fabric_attr->name) == 0) {
                    if (hmem)
                        l->c[i].hmem = 1;
                    else
                        l->c[i].rma = 1;
                }
        fi_freeinfo(info);
    }
    fi_freeinfo(h);
}

fc_result_t prov_discover(const cfg_t *cfg, struct prov_list *out)
{
    memset(out, 0, sizeof(*out));
    out->fi_version = fi_version();
    struct fi_info *h = prov_hints(0), *info = NULL;
    if (!h)
        return FC_ERR(FC_ERR_NO_MEMORY, "fi_allocinfo failed");
    int ret = fi_getinfo(FC_FI_VERSION, NULL, NULL, 0, h, &info);
    fi_freeinfo(h);
    if (ret) {
        if (cfg->fi_provider[0])
            return FC_ERR(FC_ERR_FABRIC,
                          "fi_getinfo found no provider matching FI_PROVIDER=%s that offers "
                          "reliable tagged messaging (FI_EP_RDM, FI_TAGGED): %s (%d). Fix: "
                          "check the name with `fi_info -l` and that its hardware/driver is "
                          "present on host %s, or unset FI_PROVIDER",
                          cfg->fi_provider, fi_strerror(-ret), ret, log_hostname());
        return FC_ERR(FC_ERR_FABRIC,
                      "fi_getinfo found no libfabric provider offering reliable tagged "
                      "messaging (FI_EP_RDM, FI_TAGGED) on host %s: %s (%d). Fix: install a "
                      "libfabric with the tcp or shm provider (fi_info -l lists them)",
                      log_hostname(), fi_strerror(-ret), ret);
    }
    struct prov_cand all[64];
    int n = 0;
    for (struct fi_info *fi = info; fi && n < 64; fi = fi->next) {
        const char *name = fi->fabric_attr->prov_name;
        if (!name)
            continue;
        /* utility providers layered for other apps (rxd over verbs etc.)
         * are fine; the hook providers are not endpoints of their own */
        if (strstr(name, "ofi_hook") || strstr(name, "ofi_mrail"))
            continue;
        struct prov_cand *c = &all[n];
        memset(c, 0, sizeof(*c));
        snprintf(c->name, sizeof(c->name), "%s", name);
        snprintf(c->fabric, sizeof(c->fabric), "%s",
                 fi->fabric_attr->name ? fi->fabric_attr->name : "");
        snprintf(c->domain, sizeof(c->domain), "%s",
                 fi->domain_attr->name ? fi->domain_attr->name : "");
        c->tier = (uint8_t)prov_tier_of(name);
        c->loopback = (uint8_t)prov_is_loopback(fi);
        c->pref = (uint16_t)(prov_pref_of(name) + fabric_penalty(c->fabric));
        int dup = 0;
        for (int j = 0; j < n; j++)
            if (!strcmp(all[j].name, c->name) && !strcmp(all[j].fabric, c->fabric) &&
                !strcmp(all[j].domain, c->domain))
                dup = 1;
        if (!dup)
            n++;
    }
    fi_freeinfo(info);
    qsort(all, (size_t)n, sizeof(all[0]), cand_cmp);
    /* keep the list short but every provider name in it: at most three
     * fabrics per provider (tcp lists one per address) */
    for (int i = 0; i < n && out->n < PROV_MAX_CANDS; i++) {
        int same = 0;
        for (uint32_t k = 0; k < out->n; k++)
            same += !strcmp(out->c[k].name, all[i].name);
        if (same < 3)
            out->c[out->n++] = all[i];
    }
    mark_caps(out, FI_RMA, 0);
    mark_caps(out, FI_HMEM, 1);
    return FC_SUCCESS;
}

static int list_has(const struct prov_list *l, const char *name)
{
    for (uint32_t i = 0; i < l->n; i++)
        if (strcmp(l->c[i].name, name) == 0)
            return 1;
    return 0;
}

static int list_has_fabric(const struct prov_list *l, const char *name, const char *fabric)
{
    for (uint32_t i = 0; i < l->n; i++)
        if (strcmp(l->c[i].name, name) == 0 && strcmp(l->c[i].fabric, fabric) == 0)
            return 1;
    return 0;
}

static const char *tier_name(int t)
{
    switch (t) {
    case FC_TIER_SHM: return "shm";
    case FC_TIER_NET: return "net";
    case FC_TIER_RDMA: return "rdma";
    case FC_TIER_GDR: return "gdr";
    }
    return "?";
}

#define APPEND(buf, len, o, ...)                                                               \
    do {                                                                                       \
        if ((o) < (len))                                                                       \
            (o) += (size_t)snprintf((buf) + (o), (len) - (o), __VA_ARGS__);                    \
    } while (0)

fc_result_t prov_agree(const struct prov_list *lists, int nranks, int nnodes,
                       const char *const *hostnames, char *choice, size_t choice_len,
                       char *fabric, size_t fabric_len, char *why, size_t why_len)
{
    /* candidate names in ladder order: the union over ranks, sorted by pref */
    struct {
        char name[PROV_NAME_LEN];
        uint16_t pref;
    } names[64];
    int nn = 0;
    for (int r = 0; r < nranks; r++)
        for (uint32_t i = 0; i < lists[r].n; i++) {
            int seen = 0;
            for (int j = 0; j < nn; j++)
                if (!strcmp(names[j].name, lists[r].c[i].name))
                    seen = 1;
            if (!seen && nn < 64) {
                snprintf(names[nn].name, PROV_NAME_LEN, "%s", lists[r].c[i].name);
                names[nn].pref = prov_pref_of(lists[r].c[i].name);
                nn++;
            }
        }
    for (int i = 1; i < nn; i++) /* insertion sort: tiny */
        for (int j = i; j > 0 && (names[j].pref < names[j - 1].pref ||
                                  (names[j].pref == names[j - 1].pref &&
                                   strcmp(names[j].name, names[j - 1].name) < 0));
             j--) {
            char tn[PROV_NAME_LEN];
            uint16_t tp = names[j].pref;
            memcpy(tn, names[j].name, PROV_NAME_LEN);
            memcpy(names[j].name, names[j - 1].name, PROV_NAME_LEN);
            names[j].pref = names[j - 1].pref;
            memcpy(names[j - 1].name, tn, PROV_NAME_LEN);
            names[j - 1].pref = tp;
        }
    size_t o = 0;
    why[0] = '\0';
    int have_rdma = 0;
    for (int j = 0; j < nn; j++)
        if (prov_tier_of(names[j].name) == FC_TIER_RDMA)
            have_rdma = 1;
    for (int j = 0; j < nn; j++) {
        const char *nm = names[j].name;
        int missing = -1;
        for (int r = 0; r < nranks && missing < 0; r++)
            if (!list_has(&lists[r], nm))
                missing = r;
        if (prov_tier_of(nm) == FC_TIER_SHM && nnodes > 1) {
            APPEND(why, why_len, o, "%s%s: ranks on %d nodes", o ? "; " : "", nm, nnodes);
            continue;
        }
        if (missing >= 0) {
            APPEND(why, why_len, o, "%s%s: rank %d (host %s) lacks it", o ? "; " : "", nm,
                   missing, hostnames ? hostnames[missing] : "?");
            continue;
        }
        snprintf(choice, choice_len, "%s", nm);
        /* a fabric every rank has: the first in rank 0's order */
        fabric[0] = '\0';
        for (uint32_t i = 0; i < lists[0].n && !fabric[0]; i++) {
            const struct prov_cand *c = &lists[0].c[i];
            if (strcmp(c->name, nm) != 0)
                continue;
            if (nnodes > 1 && c->loopback)
                continue;
            int all = 1;
            for (int r = 1; r < nranks && all; r++)
                all = list_has_fabric(&lists[r], nm, c->fabric);
            if (all)
                snprintf(fabric, fabric_len, "%s", c->fabric);
        }
        if (prov_tier_of(nm) == FC_TIER_NET && !have_rdma)
            APPEND(why, why_len, o, "%srdma: no RDMA provider (verbs, efa, psm3, cxi, opx, ...) "
                   "on any rank", o ? "; " : "");
        return FC_SUCCESS;
    }
    /* nothing common: say what each rank has (the first few) */
    char detail[768];
    size_t d = 0;
    detail[0] = '\0';
    for (int r = 0; r < nranks && r < 8; r++) {
        APPEND(detail, sizeof(detail), d, "%srank %d (%s): ", r ? "; " : "", r,
               hostnames ? hostnames[r] : "?");
        for (uint32_t i = 0; i < lists[r].n; i++) {
            int shown = 0;
            for (uint32_t k = 0; k < i; k++)
                if (!strcmp(lists[r].c[k].name, lists[r].c[i].name))
                    shown = 1;
            if (!shown)
                APPEND(detail, sizeof(detail), d, "%s%s", i ? " " : "", lists[r].c[i].name);
        }
        if (lists[r].n == 0)
            APPEND(detail, sizeof(detail), d, "none");
    }
    return FC_ERR(FC_ERR_FABRIC,
                  "no libfabric provider is usable by all %d ranks (%s). Providers: %s. Fix: "
                  "install the same libfabric providers on every node, or set FI_PROVIDER to "
                  "one every node has",
                  nranks, why[0] ? why : "no candidates", detail);
}

const char *prov_fi_version(void)
{
    static char v[32];
    uint32_t fv = fi_version();
    snprintf(v, sizeof(v), "%u.%u", FI_MAJOR(fv), FI_MINOR(fv));
    return v;
}

static void print_mr_mode(FILE *fp, uint64_t m)
{
    static const struct {
        uint64_t bit;
        const char *name;
    } bits[] = {{FI_MR_LOCAL, "local"},       {FI_MR_VIRT_ADDR, "virt_addr"},
                {FI_MR_ALLOCATED, "allocated"}, {FI_MR_PROV_KEY, "prov_key"},
                {FI_MR_ENDPOINT, "endpoint"}, {FI_MR_HMEM, "hmem"},
                {FI_MR_RAW, "raw"},           {FI_MR_MMU_NOTIFY, "mmu_notify"}};
    int any = 0;
    for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++)
        if (m & bits[i].bit) {
            fprintf(fp, "%s%s", any ? "," : "", bits[i].name);
            any = 1;
        }
    if (!any)
        fprintf(fp, "none");
}

void prov_print_info(void *file, int verbose)
{
    FILE *fp = file;
    struct fi_info *h = prov_hints(0), *info = NULL;
    if (!h)
        return;
    int ret = fi_getinfo(FC_FI_VERSION, NULL, NULL, 0, h, &info);
    fi_freeinfo(h);
    if (ret) {
        fprintf(fp, "  no provider offers FI_EP_RDM + FI_TAGGED here: %s (%d)\n",
                fi_strerror(-ret), ret);
        return;
    }
    struct prov_list l;
    cfg_t dummy;
    memset(&dummy, 0, sizeof(dummy));
    prov_discover(&dummy, &l);
    fprintf(fp, "  %-16s %-5s %-22s %-8s %-5s %-4s %-9s %s\n", "provider", "tier", "fabric",
            "domain", "rma", "hmem", "inject", "mr_mode");
    for (struct fi_info *fi = info; fi; fi = fi->next) {
        const char *name = fi->fabric_attr->prov_name;
        if (!name || strstr(name, "ofi_hook"))
            continue;
        int seen = 0; /* providers list several variants of one domain */
        for (struct fi_info *g = info; g != fi && !seen; g = g->next)
            seen = g->fabric_attr->prov_name && !strcmp(g->fabric_attr->prov_name, name) &&
                   !strcmp(g->fabric_attr->name, fi->fabric_attr->name) &&
                   !strcmp(g->domain_attr->name, fi->domain_attr->name);
        if (seen)
            continue;
        if (!verbose && strchr(fi->fabric_attr->name ? fi->fabric_attr->name : "", ':'))
            continue; /* IPv6 duplicates of tcp: -v shows them */
        int rma = 0, hmem = 0;
        for (uint32_t i = 0; i < l.n; i++)
            if (!strcmp(l.c[i].name, name) && !strcmp(l.c[i].fabric, fi->fabric_attr->name)) {
                rma = l.c[i].rma;
                hmem = l.c[i].hmem;
            }
        fprintf(fp, "  %-16s %-5s %-22s %-8s %-5s %-4s %-9zu ", name,
                tier_name(prov_tier_of(name)), fi->fabric_attr->name, fi->domain_attr->name,
                rma ? "yes" : "no", hmem ? "yes" : "no", fi->tx_attr->inject_size);
        print_mr_mode(fp, fi->domain_attr->mr_mode);
        fputc('\n', fp);
    }
    fi_freeinfo(info);
}
