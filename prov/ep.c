/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Opening a communicator's endpoint: fabric, domain, completion queue,
 * address vector, endpoint; inserting the peers; closing it all again.
 * Every failure names the call, the provider, and a likely fix.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "log.h"
#include "prov_int.h"

/* fabric.c: this rank's source address towards the rendezvous (0: known),
 * and whether a fabric's subnet holds an address */

static int fabric_penalty(const char *f)
{
    if (!f)
        return 0;
    if (strncmp(f, "fe80:", 5) == 0)
        return 20;
    return strchr(f, ':') ? 10 : 0;
}

/* A domain other than the one the rank's topology prefers: less than a
 * fabric other than the agreed one or the rendezvous's, so that neither is
 * ever given up for a nearer NIC. */
#define DOMAIN_PENALTY 40

/* Lower is better; -1: not allowed by FC_IFACE / FC_NICS, or loopback
 * across nodes. root_src: the source address towards the rendezvous, or
 * NULL. dom_pref: the domain to prefer, or NULL. */
static int score(const cfg_t *cfg, const struct fi_info *fi, int nnodes, const char *hint,
                 const char *dom_pref, const struct sockaddr_storage *root_src)
{
    const char *dom = fi->domain_attr->name ? fi->domain_attr->name : "";
    const char *fab = fi->fabric_attr->name ? fi->fabric_attr->name : "";
    fc_tier_t tier = prov_tier_of(fi->fabric_attr->prov_name);
    if (tier == FC_TIER_NET && cfg->iface[0] && !config_list_has(cfg->iface, dom))
        return -1;
    if (tier == FC_TIER_RDMA && cfg->nics[0] && !config_list_has(cfg->nics, dom))
        return -1;
    int s = fabric_penalty(fab);
    if (hint && hint[0] && strcmp(hint, fab) != 0)
        s += 100;
    if (dom_pref && dom_pref[0] && strcmp(dom_pref, dom) != 0)
        s += DOMAIN_PENALTY;
    int lo = prov_is_loopback(fi);
    if (nnodes == 1 && !lo)
        s += 5;
    /* ranks on other nodes cannot reach a loopback address: a rank whose
     * only domain is lo (its interface is down) must fail here, clearly,
     * not in the connectivity check (or worse, leave the others waiting
     * there). Unless FC_IFACE asks for it by name. */
    if (nnodes > 1 && lo && !(tier == FC_TIER_NET && cfg->iface[0]))
        return -1;
    /* across nodes, without a fabric common to all (routed subnets): the
     * one the rendezvous was reached over, not a host-local bridge */
    if (nnodes > 1 && root_src && !prov_fabric_holds(fab, root_src))
        s += 50;
    return s;
}

static void shm_clean_once(void)
{
    char prefix[32];
    int pl = snprintf(prefix, sizeof(prefix), "%d:", (int)getpid());
    DIR *d = opendir("/dev/shm");
    if (!d)
        return;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, (size_t)pl) != 0)
            continue;
        char path[300];
        snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
        n += unlink(path) == 0;
    }
    closedir(d);
    if (n)
        FC_INFO(LOG_NET, "removed %d stale /dev/shm file%s of a dead process that had pid %d",
                n, n > 1 ? "s" : "", (int)getpid());
}

/* libfabric's shm provider names its queues /dev/shm/<pid>:<...>. A process
 * that died without closing its endpoint (killed, _exit) leaves them
 * behind, and PIDs are reused (pid_max is often 32768): a later process
 * with that PID then fails to open shm with EBUSY. Before this process's
 * first shm endpoint, every such file with our PID is a dead process's. */
static void shm_remove_stale(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, shm_clean_once);
}

fc_result_t prov_open(const cfg_t *cfg, const char *name, int nnodes, const char *fabric_hint,
                      const char *domain_pref, struct prov_ep **out, void *addr, size_t *addrlen)
{
    fc_result_t rc = FC_SUCCESS;
    struct fi_info *hints = NULL, *list = NULL;
    int ret;
    struct prov_ep *p = calloc(1, sizeof(*p));
    if (!p)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory opening provider %s", name);
    p->base.ops = &prov_transport_ops;
    p->wait_fd = -1;
    p->next_key = 1;
    snprintf(p->prov_name, sizeof(p->prov_name), "%s", name);
    p->tier = prov_tier_of(name);
    if (p->tier == FC_TIER_SHM)
        shm_remove_stale();

    /* RMA where offered (the rendezvous protocol writes with it), else
     * tagged messages alone */
    /* device memory (FI_HMEM) when a GPU is here and FC_GDR allows it, RMA
     * where offered; then with less, down to tagged messages alone */
    const uint64_t want[4] = {FI_RMA | FI_HMEM, FI_HMEM, FI_RMA, 0};
    int first = prov_hmem_wanted(cfg) ? 0 : 2;
    for (int pass = first; pass < 4 && !list; pass++) {
        hints = prov_hints(want[pass]);
        if (!hints) {
            rc = FC_ERR(FC_ERR_NO_MEMORY, "fi_allocinfo failed");
            goto fail;
        }
        hints->fabric_attr->prov_name = strdup(name);
        ret = fi_getinfo(FI_VERSION(1, 11), NULL, NULL, 0, hints, &list);
        fi_freeinfo(hints);
        hints = NULL;
        if (ret)
            list = NULL;
    }
    if (!list) {
        rc = FC_ERR(FC_ERR_FABRIC,
                    "fi_getinfo for provider %s on host %s returned nothing, although it was "
                    "listed moments ago. Fix: check `fi_info -p %s`",
                    name, log_hostname(), name);
        goto fail;
    }
    struct sockaddr_storage root_src;
    int have_root = nnodes > 1 && prov_root_source(cfg, &root_src) == 0;
    struct fi_info *best = NULL;
    int best_score = 0;
    char domains[256];
    size_t dl = 0;
    domains[0] = '\0';
    for (struct fi_info *fi = list; fi; fi = fi->next) {
        if (!fi->fabric_attr->prov_name || strcmp(fi->fabric_attr->prov_name, name) != 0)
            continue;
        if (dl < sizeof(domains) && !strstr(domains, fi->domain_attr->name))
            dl += (size_t)snprintf(domains + dl, sizeof(domains) - dl, "%s%s", dl ? ", " : "",
                                   fi->domain_attr->name);
        int s = score(cfg, fi, nnodes, fabric_hint, domain_pref, have_root ? &root_src : NULL);
        if (s < 0)
            continue;
        if (!best || s < best_score) {
            best = fi;
            best_score = s;
        }
    }
    if (!best) {
        if (p->tier == FC_TIER_NET && cfg->iface[0])
            rc = FC_ERR(FC_ERR_FABRIC,
                        "FC_IFACE=%s is not offered by provider %s on host %s (it offers: %s). "
                        "Fix: set FC_IFACE to one of those, or unset it",
                        cfg->iface, name, log_hostname(), domains);
        else if (cfg->nics[0])
            rc = FC_ERR(FC_ERR_FABRIC,
                        "FC_NICS=%s names no domain of provider %s on host %s (it offers: %s)",
                        cfg->nics, name, log_hostname(), domains);
        else if (nnodes > 1)
            rc = FC_ERR(FC_ERR_FABRIC,
                        "provider %s offers only loopback on host %s (it offers: %s), and the "
                        "ranks are on %d nodes. Fix: check that the network interface is up "
                        "(`ip addr`, `fc_info`), or set FC_IFACE",
                        name, log_hostname(), domains, nnodes);
        else
            rc = FC_ERR(FC_ERR_FABRIC, "provider %s offers no usable domain on host %s", name,
                        log_hostname());
        goto fail;
    }
    p->info = fi_dupinfo(best);
    fi_freeinfo(list);
    list = NULL;
    if (!p->info) {
        rc = FC_ERR(FC_ERR_NO_MEMORY, "fi_dupinfo failed");
        goto fail;
    }
    const char *fab = p->info->fabric_attr->name, *dom = p->info->domain_attr->name;

    ret = fi_fabric(p->info->fabric_attr, &p->fabric, NULL);
    if (ret) {
        rc = FC_ERR(FC_ERR_FABRIC, "fi_fabric(%s, provider %s) failed on host %s: %s (%d)", fab,
                    name, log_hostname(), fi_strerror(-ret), ret);
        goto fail;
    }
    ret = fi_domain(p->fabric, p->info, &p->domain, NULL);
    if (ret) {
        rc = FC_ERR(FC_ERR_FABRIC,
                    "fi_domain(%s, provider %s) failed on host %s: %s (%d). Fix: check the "
                    "device with `fi_info -p %s -v` (and ibv_devinfo for verbs)",
                    dom, name, log_hostname(), fi_strerror(-ret), ret, name);
        goto fail;
    }
    struct fi_cq_attr cq_attr;
    memset(&cq_attr, 0, sizeof(cq_attr));
    cq_attr.format = FI_CQ_FORMAT_TAGGED;
    cq_attr.size = p->info->rx_attr->size + p->info->tx_attr->size;
    if (cq_attr.size < 1024)
        cq_attr.size = 1024;
    /* a file descriptor lets a waiting rank sleep in poll() instead of
     * spinning (oversubscribed nodes); not every provider has one */
    cq_attr.wait_obj = FI_WAIT_FD;
    ret = fi_cq_open(p->domain, &cq_attr, &p->cq, NULL);
    if (ret == 0) {
        if (fi_control(&p->cq->fid, FI_GETWAIT, &p->wait_fd) != 0)
            p->wait_fd = -1;
    } else {
        cq_attr.wait_obj = FI_WAIT_NONE;
        ret = fi_cq_open(p->domain, &cq_attr, &p->cq, NULL);
    }
    if (ret) {
        rc = FC_ERR(FC_ERR_FABRIC, "fi_cq_open(size %zu, provider %s) failed on host %s: %s (%d)",
                    cq_attr.size, name, log_hostname(), fi_strerror(-ret), ret);
        goto fail;
    }
    struct fi_av_attr av_attr;
    memset(&av_attr, 0, sizeof(av_attr));
    av_attr.type = FI_AV_TABLE;
    ret = fi_av_open(p->domain, &av_attr, &p->av, NULL);
    if (ret) {
        rc = FC_ERR(FC_ERR_FABRIC, "fi_av_open(provider %s) failed on host %s: %s (%d)", name,
                    log_hostname(), fi_strerror(-ret), ret);
        goto fail;
    }
    ret = fi_endpoint(p->domain, p->info, &p->ep, NULL);
    if (ret) {
        rc = FC_ERR(FC_ERR_FABRIC,
                    "fi_endpoint(provider %s, domain %s) failed on host %s: %s (%d)%s", name, dom,
                    log_hostname(), fi_strerror(-ret), ret,
                    p->tier == FC_TIER_SHM ? ". Fix: check free space in /dev/shm" : "");
        goto fail;
    }
    if ((ret = fi_ep_bind(p->ep, &p->cq->fid, FI_TRANSMIT | FI_RECV)) ||
        (ret = fi_ep_bind(p->ep, &p->av->fid, 0)) || (ret = fi_enable(p->ep))) {
        rc = FC_ERR(FC_ERR_FABRIC, "binding/enabling the endpoint (provider %s) failed: %s (%d)",
                    name, fi_strerror(-ret), ret);
        goto fail;
    }
    size_t alen = PROV_ADDR_MAX;
    memset(addr, 0, PROV_ADDR_MAX);
    ret = fi_getname(&p->ep->fid, addr, &alen);
    if (ret) {
        rc = FC_ERR(FC_ERR_FABRIC, "fi_getname(provider %s) failed: %s (%d) (address of %zu bytes)",
                    name, fi_strerror(-ret), ret, alen);
        goto fail;
    }
    *addrlen = alen;
    p->prov_mr_mode = p->info->domain_attr->mr_mode;
    p->mr_mode = p->prov_mr_mode | prov_mr_mode_of_cfg(cfg->mr_mode_force);
    /* eager (inject: copied out at once, no completion to wait for) up to
     * the provider's limit, FC_EAGER_MAX and the profile's default; FC_PROTO
     * =eager uses the provider's limit alone, =rndv never injects (every
     * send then goes through the provider's own protocol, rendezvous for
     * large messages) */
    size_t chunk_unused, eager;
    int win_unused;
    prov_tuning(p, cfg, 0, &chunk_unused, &win_unused, &eager);
    p->inject_size = p->info->tx_attr->inject_size;
    if (cfg->proto == CFG_PROTO_RNDV)
        p->inject_size = 0;
    else if (cfg->proto == CFG_PROTO_AUTO && eager < p->inject_size)
        p->inject_size = eager;
    p->retry_count = cfg->retry_count;
    /* fabcoll's RMA rendezvous needs writes with remote CQ data of at least
     * 4 bytes that need no posted receive, and keys that fit 64 bits */
    const char *no_rndv = NULL;
    if (!(p->info->caps & FI_RMA))
        no_rndv = "the provider offers no FI_RMA";
    else if (p->info->domain_attr->cq_data_size < 4)
        no_rndv = "remote CQ data is shorter than 4 bytes";
    else if (p->info->mode & FI_RX_CQ_DATA)
        no_rndv = "remote CQ data would consume posted receives (FI_RX_CQ_DATA)";
    else if (p->mr_mode & FI_MR_RAW)
        no_rndv = "keys are raw (FI_MR_RAW)";
    p->dev_cache_max = cfg->mr_cache_max;
    rc = prov_hmem_probe(p, cfg);
    if (rc != FC_SUCCESS)
        goto fail;
    if (!p->hmem && (p->info->caps & FI_HMEM)) {
        /* asked for FI_HMEM but device memory cannot be registered: an
         * endpoint without it is faster for host memory (shm, for one,
         * gives up inject with FI_HMEM), and staging needs nothing more */
        char why[sizeof(p->hmem_why)];
        snprintf(why, sizeof(why), "%s", p->hmem_why);
        cfg_t plain = *cfg;
        plain.gdr = CFG_GDR_OFF;
        prov_close(p);
        rc = prov_open(&plain, name, nnodes, fabric_hint, domain_pref, out, addr, addrlen);
        if (rc == FC_SUCCESS)
            snprintf((*out)->hmem_why, sizeof((*out)->hmem_why), "%s", why);
        return rc;
    }
    /* the threshold depends on whether device memory goes to the fabric;
     * the registration cache is wanted when the rendezvous may register
     * user buffers */
    p->rndv_min = no_rndv ? 0 : prov_rndv_min(p, cfg);
    prov_mr_cache_init(p, cfg->mr_cache_max);
    if (p->rndv_min) {
        if (!prov_mr_remote_ok(p)) {
            p->rndv_min = 0;
            no_rndv = "registrations cannot be given remote write access";
        }
    }
    if (!p->rndv_min && no_rndv && cfg->proto == CFG_PROTO_RNDV)
        FC_INFO(LOG_NET, "%s: FC_PROTO=rndv, but no RMA rendezvous: %s; large messages use "
                "the provider's tagged protocol", name, no_rndv);
    char rv[48] = "off", rxm[64] = "";
    if (p->rndv_min)
        snprintf(rv, sizeof(rv), "from %zu bytes", p->rndv_min);
    if (strstr(name, "ofi_rxm") && cfg->rxm_msg_rx_size > 0)
        snprintf(rxm, sizeof(rxm), ", FI_OFI_RXM_MSG_RX_SIZE %d", cfg->rxm_msg_rx_size);
    FC_INFO(LOG_NET, "opened %s: fabric %s, domain %s, inject %zu, RMA rendezvous %s, mr_mode "
            "0x%llx%s, wait %s%s",
            name, fab, dom, p->inject_size, rv, (unsigned long long)p->mr_mode,
            cfg->mr_mode_force ? " (FC_MR_MODE adds bits)" : "", p->wait_fd >= 0 ? "fd" : "poll",
            rxm);
    *out = p;
    return FC_SUCCESS;
fail:
    if (list)
        fi_freeinfo(list);
    prov_close(p);
    return rc;
}

fc_result_t prov_connect(struct prov_ep *p, int nranks, const char *addrs,
                         const char *const *names, int self, const unsigned char *only)
{
    p->nranks = nranks;
    p->self = self;
    p->addrs = calloc((size_t)nranks, sizeof(*p->addrs));
    p->names = calloc((size_t)nranks, sizeof(*p->names));
    if (!p->addrs || !p->names)
        return FC_ERR(FC_ERR_NO_MEMORY, "out of memory for %d peers", nranks);
    for (int r = 0; r < nranks; r++) {
        snprintf(p->names[r], sizeof(p->names[r]), "%s", names ? names[r] : "?");
        if (only && !only[r] && r != self) {
            p->addrs[r] = FI_ADDR_NOTAVAIL; /* reached another way */
            continue;
        }
        int ret = fi_av_insert(p->av, addrs + (size_t)r * PROV_ADDR_MAX, 1, &p->addrs[r], 0, NULL);
        if (ret != 1)
            return FC_ERR(FC_ERR_FABRIC,
                          "fi_av_insert of rank %d's address (%s, provider %s) failed: %s (%d). "
                          "Fix: every rank must reach the others over the chosen fabric (%s); "
                          "check routes and firewalls, or FC_IFACE",
                          r, p->names[r], p->prov_name, ret < 0 ? fi_strerror(-ret) : "not inserted",
                          ret, p->info->fabric_attr->name);
    }
    return FC_SUCCESS;
}

struct transport *prov_transport(struct prov_ep *p)
{
    return &p->base;
}

void prov_describe(const struct prov_ep *p, fc_comm_attr_t *attr)
{
    snprintf(attr->provider, sizeof(attr->provider), "%s", p->prov_name);
    snprintf(attr->fabric, sizeof(attr->fabric), "%s", p->info->fabric_attr->name);
    snprintf(attr->domain, sizeof(attr->domain), "%s", p->info->domain_attr->name);
    attr->tier = p->hmem ? FC_TIER_GDR : p->tier;
    attr->hmem = p->hmem;
    attr->nrails = 1;
}

size_t prov_rndv_min_get(const struct prov_ep *p)
{
    return p->rndv_min;
}

void prov_rndv_min_set(struct prov_ep *p, size_t v)
{
    p->rndv_min = v;
}

uint64_t prov_rndv_count(const struct prov_ep *p)
{
    return p->rndv_count;
}

void prov_stop(struct prov_ep *p)
{
    if (p && p->ep) {
        fi_close(&p->ep->fid);
        p->ep = NULL;
    }
}

void prov_close(struct prov_ep *p)
{
    if (!p)
        return;
    prov_stop(p);
    prov_rndv_fini(p);
    prov_mem_pool_drain(p);
    prov_mr_close_all(p);
    if (p->av)
        fi_close(&p->av->fid);
    if (p->cq)
        fi_close(&p->cq->fid);
    if (p->domain)
        fi_close(&p->domain->fid);
    if (p->fabric)
        fi_close(&p->fabric->fid);
    if (p->info)
        fi_freeinfo(p->info);
    free(p->addrs);
    free(p->names);
    free(p->local);
    free(p);
}
