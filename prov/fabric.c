/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which providers this rank can use, and which one all ranks agree on.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

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

/* ---- the network that reaches the rendezvous ----------------------------
 * A name common to all ranks does not make a fabric common: docker0,
 * virbr0, cni0 and the like carry the same subnet (and address) on every
 * host and reach nothing. The fabric whose subnet holds this rank's source
 * address towards the rendezvous (FC_ROOT_ADDR) is one the bootstrap has
 * just crossed: that is the cluster's network. */

int prov_root_source(const cfg_t *cfg, struct sockaddr_storage *src)
{
    char host[CFG_STR];
    memset(src, 0, sizeof(*src));
    if (!cfg || !cfg->fc_root_addr[0])
        return -1;
    snprintf(host, sizeof(host), "%s", cfg->fc_root_addr);
    char *colon = strrchr(host, ':');
    if (!colon)
        return -1;
    *colon = '\0';
    char *h = host;
    if (h[0] == '[') { /* [v6]:port */
        h++;
        char *e = strchr(h, ']');
        if (e)
            *e = '\0';
    }
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_DGRAM;
    hints.ai_flags = AI_NUMERICHOST;
    if (getaddrinfo(h, "9", &hints, &ai) != 0) {
        hints.ai_flags = 0; /* a host name: the bootstrap resolved it just now */
        if (getaddrinfo(h, "9", &hints, &ai) != 0)
            return -1;
    }
    int ok = -1;
    for (struct addrinfo *a = ai; a && ok; a = a->ai_next) {
        /* connecting a datagram socket only looks the route up */
        int fd = socket(a->ai_family, SOCK_DGRAM, 0);
        if (fd < 0)
            continue;
        socklen_t sl = sizeof(*src);
        if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
            getsockname(fd, (struct sockaddr *)src, &sl) == 0)
            ok = 0;
        close(fd);
    }
    freeaddrinfo(ai);
    if (ok)
        return -1;
    /* the rendezvous on this host, reached over loopback: no information */
    if (src->ss_family == AF_INET) {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)src;
        if ((ntohl(v4->sin_addr.s_addr) >> 24) == 127)
            return -1;
    } else if (src->ss_family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)src;
        if (IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr) || IN6_IS_ADDR_V4MAPPED(&v6->sin6_addr))
            return -1;
    } else {
        return -1;
    }
    return 0;
}

/* Whether fabric "a.b.c.d/len" (or an IPv6 prefix) holds the address. */
int prov_fabric_holds(const char *fabric, const struct sockaddr_storage *src)
{
    char buf[PROV_FABRIC_LEN];
    if (!fabric || !src || (src->ss_family != AF_INET && src->ss_family != AF_INET6))
        return 0;
    snprintf(buf, sizeof(buf), "%s", fabric);
    char *slash = strchr(buf, '/');
    if (!slash)
        return 0;
    *slash = '\0';
    char *end = NULL;
    long bits = strtol(slash + 1, &end, 10);
    if (!end || *end || bits < 0)
        return 0;
    unsigned char net[16], addr[16];
    size_t len;
    if (src->ss_family == AF_INET) {
        if (inet_pton(AF_INET, buf, net) != 1 || bits > 32)
            return 0;
        memcpy(addr, &((const struct sockaddr_in *)src)->sin_addr, 4);
        len = 4;
    } else {
        if (inet_pton(AF_INET6, buf, net) != 1 || bits > 128)
            return 0;
        memcpy(addr, &((const struct sockaddr_in6 *)src)->sin6_addr, 16);
        len = 16;
    }
    for (size_t i = 0; i < len && bits > 0; i++, bits -= 8) {
        unsigned char mask = bits >= 8 ? 0xff : (unsigned char)(0xff << (8 - bits));
        if ((net[i] & mask) != (addr[i] & mask))
            return 0;
    }
    return 1;
}

/* The preference a candidate gets: the ladder's, IPv6 after IPv4, and one
 * better for the fabric that reaches the rendezvous (prov_agree reads the
 * mark back with is_root_facing). */
static uint16_t cand_pref(const char *name, const char *fabric, int root_facing)
{
    return (uint16_t)(prov_pref_of(name) + 1 + fabric_penalty(fabric) - (root_facing ? 1 : 0));
}

static int is_root_facing(const struct prov_cand *c)
{
    return c->pref + 1 == cand_pref(c->name, c->fabric, 0);
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
    if (prov_reset_handlers()[0])
        FC_INFO(LOG_INIT, "signal handlers of %s that libinfinipath installed as libfabric loaded "
                "(they write *.btr files and call exit() inside the handler) were put back to "
                "the default", prov_reset_handlers());
    struct fi_info *h = prov_hints(0), *info = NULL;
    if (!h)
        return FC_ERR(FC_ERR_NO_MEMORY, "fi_allocinfo failed");
    int ret = fi_getinfo(FC_FI_VERSION, NULL, NULL, 0, h, &info);
    fi_freeinfo(h);
    struct sockaddr_storage root_src;
    int have_root = prov_root_source(cfg, &root_src) == 0;
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
        c->pref = cand_pref(name, c->fabric,
                            have_root && !c->loopback && prov_fabric_holds(c->fabric, &root_src));
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
     * fabrics per provider (tcp lists one per address). Taken in rounds:
     * first one fabric of every provider (a non-loopback one where it has
     * one: that is what a multi-node job needs), then a second of each,
     * then a third. Taking three of each in ladder order would fill the
     * list with tcp, net, udp and lo before sockets is reached, and a
     * rank would seem to lack a provider it has (the agreement then fails
     * or picks another one). */
    char taken[64] = {0};
    for (int round = 0; round < 3 && out->n < PROV_MAX_CANDS; round++)
        for (int i = 0; i < n && out->n < PROV_MAX_CANDS; i++) {
            if (taken[i])
                continue;
            int same = 0;
            for (uint32_t k = 0; k < out->n; k++)
                same += !strcmp(out->c[k].name, all[i].name);
            if (same != round)
                continue;
            if (round == 0 && all[i].loopback) {
                int other = 0; /* a non-loopback fabric of the same provider */
                for (int j = 0; j < n && !other; j++)
                    other = !taken[j] && !all[j].loopback && !strcmp(all[j].name, all[i].name);
                if (other)
                    continue;
            }
            taken[i] = 1;
            out->c[out->n++] = all[i];
        }
    /* back into ladder order: prov_agree takes fabrics in this order */
    qsort(out->c, out->n, sizeof(out->c[0]), cand_cmp);
    mark_caps(out, FI_RMA, 0);
    mark_caps(out, FI_HMEM, 1);
    return FC_SUCCESS;
}

int prov_domains(const char *name, char (*out)[PROV_NAME_LEN], int max)
{
    struct fi_info *h = prov_hints(0), *info = NULL;
    if (!h)
        return 0;
    h->fabric_attr->prov_name = strdup(name);
    int ret = fi_getinfo(FC_FI_VERSION, NULL, NULL, 0, h, &info);
    fi_freeinfo(h);
    if (ret)
        return 0;
    int n = 0;
    for (struct fi_info *fi = info; fi && n < max; fi = fi->next) {
        const char *d = fi->domain_attr ? fi->domain_attr->name : NULL;
        if (!d || !fi->fabric_attr->prov_name || strcmp(fi->fabric_attr->prov_name, name) != 0)
            continue;
        int dup = 0;
        for (int k = 0; k < n && !dup; k++)
            dup = strcmp(out[k], d) == 0;
        if (!dup)
            snprintf(out[n++], PROV_NAME_LEN, "%s", d);
    }
    fi_freeinfo(info);
    return n;
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

/* Whether the rank has the provider on something other nodes can reach. */
static int list_has_remote(const struct prov_list *l, const char *name)
{
    for (uint32_t i = 0; i < l->n; i++)
        if (strcmp(l->c[i].name, name) == 0 && !l->c[i].loopback)
            return 1;
    return 0;
}

/* The fabric every rank opens (empty: each rank picks its own, see
 * prov_open). Across nodes: when every rank knows the fabric it reached
 * the rendezvous over, that one (empty when they differ: routed subnets);
 * otherwise the first fabric all ranks have, in rank 0's order, that is
 * neither loopback nor IPv6 link-local (fe80::/64 is called the same on
 * every link; a common name proves nothing there). On one node: loopback
 * where all have it. */
static void pick_fabric(const struct prov_list *lists, int nranks, int nnodes, const char *nm,
                        char *fabric, size_t fabric_len)
{
    fabric[0] = '\0';
    if (nnodes > 1) {
        const char *root_fab = NULL;
        int known = 1, same = 1;
        for (int r = 0; r < nranks && known; r++) {
            const char *f = NULL;
            for (uint32_t i = 0; i < lists[r].n && !f; i++)
                if (!strcmp(lists[r].c[i].name, nm) && is_root_facing(&lists[r].c[i]))
                    f = lists[r].c[i].fabric;
            known = f != NULL;
            if (f && root_fab && strcmp(f, root_fab) != 0)
                same = 0;
            if (!root_fab)
                root_fab = f;
        }
        if (known) {
            if (same)
                snprintf(fabric, fabric_len, "%s", root_fab);
            return;
        }
    }
    for (int pass = nnodes > 1 ? 1 : 0; pass < 2 && !fabric[0]; pass++)
        for (uint32_t i = 0; i < lists[0].n && !fabric[0]; i++) {
            const struct prov_cand *c = &lists[0].c[i];
            if (strcmp(c->name, nm) != 0)
                continue;
            if (pass == 0 && !c->loopback) /* one node: loopback first */
                continue;
            if (nnodes > 1 && (c->loopback || strncmp(c->fabric, "fe80:", 5) == 0))
                continue;
            int all = 1;
            for (int r = 1; r < nranks && all; r++)
                all = list_has_fabric(&lists[r], nm, c->fabric);
            if (all)
                snprintf(fabric, fabric_len, "%s", c->fabric);
        }
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
            APPEND(why, why_len, o,
                   "%s%s: ranks on %d nodes (shared memory reaches one node only)",
                   o ? "; " : "", nm, nnodes);
            continue;
        }
        if (missing >= 0) {
            APPEND(why, why_len, o, "%s%s: rank %d (host %s) lacks it", o ? "; " : "", nm,
                   missing, hostnames ? hostnames[missing] : "?");
            continue;
        }
        /* across nodes a rank that has the provider only on loopback (its
         * interface down, or not up yet) cannot be reached: say so here,
         * on every rank alike, rather than fail in the connectivity check */
        int lo_only = -1;
        for (int r = 0; r < nranks && lo_only < 0 && nnodes > 1; r++)
            if (!list_has_remote(&lists[r], nm))
                lo_only = r;
        if (lo_only >= 0) {
            APPEND(why, why_len, o,
                   "%s%s: rank %d (host %s) has it only on loopback (no interface up that "
                   "other nodes can reach)",
                   o ? "; " : "", nm, lo_only, hostnames ? hostnames[lo_only] : "?");
            continue;
        }
        snprintf(choice, choice_len, "%s", nm);
        pick_fabric(lists, nranks, nnodes, nm, fabric, fabric_len);
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
    int only_shm = nn > 0 && nnodes > 1;
    for (int j = 0; j < nn; j++)
        if (prov_tier_of(names[j].name) != FC_TIER_SHM)
            only_shm = 0;
    return FC_ERR(FC_ERR_FABRIC,
                  "no libfabric provider is usable by all %d ranks (%s). Providers: %s. Fix: %s",
                  nranks, why[0] ? why : "no candidates", detail,
                  only_shm
                      ? "shm cannot be used across nodes: unset FI_PROVIDER (or name a network "
                        "provider such as tcp) for a job that spans nodes"
                      : "install the same libfabric providers on every node, or set "
                        "FI_PROVIDER to one every node has");
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
