/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_info: what fabcoll sees on this node, and the checks that catch the
 * usual deployment problems before a job does.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "build_config.h"
#include "coll.h"
#include "comm.h"
#include "config.h"
#include "log.h"
#include "prov.h"
#include "select.h"
#include "topo.h"

static const char usage[] =
    "Usage: fc_info [options]\n"
    "\n"
    "Shows what fabcoll sees on this node: libfabric providers with their tier on\n"
    "the ladder (gdr > rdma > shm > net), capabilities and memory-registration\n"
    "modes; GPUs, NICs and NUMA nodes; the NIC map: for each local rank (one per\n"
    "GPU, else one per NUMA node) the NIC it would use with an RDMA provider, the\n"
    "nearest to its GPU or CPUs (PIX same PCI switch, PXB, PHB same host bridge,\n"
    "NODE same NUMA node, SYS other socket); and checks the usual causes of failed\n"
    "or slow jobs (locked-memory limit, /dev/shm space, missing providers).\n"
    "\n"
    "Options:\n"
    "  (none)              summary: version, providers, topology, checks\n"
    "  -e, --env           the FC_* settings: type, default, current value, help\n"
    "  -E                  -e plus the launcher variables fabcoll reads\n"
    "  -a, --algorithms    every algorithm of every collective\n"
    "  -t, --tuner         the tuner's decision table (use -p and -n)\n"
    "  -p, --provider P    provider for -t (default tcp)\n"
    "  -n, --ranks N       communicator size for -t (default 4)\n"
    "  -c, --check         run the checks only; one summary line per check and a\n"
    "                      final 'fc_info check: host ... status' line; exit 1 when a\n"
    "                      check fails (for a preflight job on every node)\n"
    "  -v, --verbose       more detail (IPv6 fabrics, all hwloc devices)\n"
    "  -h, --help          this text\n"
    "\n"
    "Settings are read from the environment (fc_info -e lists them). FI_PROVIDER\n"
    "narrows the providers exactly as it does for fabcoll programs; FC_TOPO_FILE\n"
    "(an `lstopo --of xml` export) replaces discovery, FC_NICS narrows the map.\n";

static int check_line(const char *status, const char *what, const char *detail, const char *fix)
{
    printf("  [%-4s] %-22s %s\n", status, what, detail);
    if (fix && *fix)
        printf("         fix: %s\n", fix);
    return strcmp(status, "FAIL") == 0;
}

/* Returns the number of failed checks. */
static int run_checks(const cfg_t *cfg, int verbose)
{
    int fails = 0;
    char d[256];
    struct rlimit rl;
    getrlimit(RLIMIT_MEMLOCK, &rl);
    if (rl.rlim_cur == RLIM_INFINITY) {
        fails += check_line("OK", "locked memory", "unlimited", NULL);
    } else {
        snprintf(d, sizeof(d), "%llu KiB", (unsigned long long)rl.rlim_cur / 1024);
        /* RDMA providers pin every registered buffer */
        fails += check_line(rl.rlim_cur < (64ull << 20) ? "WARN" : "OK", "locked memory", d,
                            rl.rlim_cur < (64ull << 20)
                                ? "RDMA providers (verbs, efa) pin registered buffers: set "
                                  "'ulimit -l unlimited' (limits.conf memlock, and Slurm's "
                                  "PropagateResourceLimits)"
                                : NULL);
    }
    struct statvfs vfs;
    if (statvfs("/dev/shm", &vfs) == 0) {
        unsigned long long freemb = (unsigned long long)vfs.f_bavail * vfs.f_frsize >> 20;
        snprintf(d, sizeof(d), "%llu MiB free", freemb);
        fails += check_line(freemb < 256 ? "WARN" : "OK", "/dev/shm", d,
                            freemb < 256 ? "the shm provider keeps its queues there: enlarge "
                                           "/dev/shm (docker --shm-size)"
                                         : NULL);
    } else {
        fails += check_line("WARN", "/dev/shm", "missing", "the shm provider needs /dev/shm");
    }
    struct prov_list l;
    fc_result_t rc = prov_discover(cfg, &l);
    if (rc != FC_SUCCESS) {
        fails += check_line("FAIL", "providers", err_get(), NULL);
    } else {
        size_t o = 0;
        int rdma = 0, shm = 0, net = 0;
        d[0] = '\0';
        for (uint32_t i = 0; i < l.n; i++) {
            int dup = 0;
            for (uint32_t k = 0; k < i; k++)
                dup |= !strcmp(l.c[k].name, l.c[i].name);
            if (dup)
                continue;
            o += (size_t)snprintf(d + o, sizeof(d) - o, "%s%s", o ? " " : "", l.c[i].name);
            rdma |= l.c[i].tier == FC_TIER_RDMA;
            shm |= l.c[i].tier == FC_TIER_SHM;
            net |= l.c[i].tier == FC_TIER_NET;
        }
        fails += check_line("OK", "providers", d, NULL);
        fails += check_line(rdma ? "OK" : "WARN", "RDMA provider",
                            rdma ? "present" : "none: multi-node traffic goes over tcp",
                            rdma ? NULL
                                 : "for RoCE/InfiniBand install the NIC driver and rdma-core "
                                   "(ibv_devinfo must list a device); check `fi_info -p verbs`");
        (void)shm;
        (void)net;
    }
    snprintf(d, sizeof(d), "%s", prov_fi_version());
    fails += check_line("OK", "libfabric", d, NULL);
    /* subnets: multi-node jobs need every node on a common routed network */
    struct ifaddrs *ifa = NULL;
    size_t o = 0;
    d[0] = '\0';
    if (getifaddrs(&ifa) == 0) {
        for (struct ifaddrs *i = ifa; i; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || (i->ifa_flags & IFF_LOOPBACK) ||
                !(i->ifa_flags & IFF_UP) || !i->ifa_netmask)
                continue;
            uint32_t a = ntohl(((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr);
            uint32_t m = ntohl(((struct sockaddr_in *)i->ifa_netmask)->sin_addr.s_addr);
            int bits = __builtin_popcount(m);
            uint32_t net = a & m;
            o += (size_t)snprintf(d + o, sizeof(d) - o, "%s%s=%u.%u.%u.%u/%d", o ? " " : "",
                                  i->ifa_name, net >> 24, (net >> 16) & 255, (net >> 8) & 255,
                                  net & 255, bits);
        }
        freeifaddrs(ifa);
    }
    fails += check_line(o ? "OK" : "WARN", "IPv4 subnets", o ? d : "none (loopback only)",
                        o ? NULL : "multi-node jobs need a routed network between nodes");
    (void)verbose;
    return fails;
}

static void print_algorithms(void)
{
    for (int k = 0; k < COLL_NKINDS; k++) {
        printf("  %-15s", coll_kind_name((enum coll_kind)k));
        for (int i = 0; coll_algos[i]; i++)
            if (coll_algos[i]->kind == (enum coll_kind)k)
                printf(" %s", coll_algos[i]->name);
        printf("\n");
    }
    printf("\nForce one with FC_ALGO, e.g. FC_ALGO=allreduce:ring,bcast:chain\n");
}

/* FC_ALGO strings that together force every algorithm at least once. */
static void print_algo_specs(void)
{
    int maxn = 0;
    for (int k = 0; k < COLL_NKINDS; k++) {
        int c = 0;
        for (int i = 0; coll_algos[i]; i++)
            c += coll_algos[i]->kind == (enum coll_kind)k;
        maxn = c > maxn ? c : maxn;
    }
    for (int j = 0; j < maxn; j++) {
        int first = 1;
        for (int k = 0; k < COLL_NKINDS; k++) {
            const struct coll_algo *pick = NULL;
            int c = 0;
            for (int i = 0; coll_algos[i]; i++)
                if (coll_algos[i]->kind == (enum coll_kind)k) {
                    if (c <= j)
                        pick = coll_algos[i];
                    c++;
                }
            if (pick) {
                printf("%s%s:%s", first ? "" : ",", coll_kind_name((enum coll_kind)k),
                       pick->name);
                first = 0;
            }
        }
        printf("\n");
    }
}

static void print_tuner(const char *prov, int n)
{
    struct coll_cost cc;
    comm_cost_params(prov, 1, &cc, NULL);
    struct coll_tuning t;
    coll_tuning_init(&t, &cc);
    printf("Tuner decisions for provider %s (tier %s), %d ranks\n", prov,
           prov_tier_of(prov) == FC_TIER_SHM ? "shm"
           : prov_tier_of(prov) == FC_TIER_RDMA ? "rdma" : "net", n);
    printf("cost model: alpha %.2f us/message, beta %.3f ns/byte (%.2f GB/s), gamma %.3f ns/byte, "
           "chunk %zu KiB",
           cc.alpha * 1e6, cc.beta * 1e9, 1e-9 / cc.beta, cc.gamma * 1e9, (size_t)cc.chunk >> 10);
    if (cc.hs_min > 0)
        printf(", handshake above %.0f B %.1f us (%.1f one way)", cc.hs_min, cc.hs * 1e6,
               cc.hs_oneway * 1e6);
    printf("\n");
    printf("%-15s %10s  %-18s %12s   %s\n", "collective", "bytes", "algorithm", "predicted",
           "runner-up");
    for (int k = 0; k < COLL_NKINDS; k++) {
        for (double bytes = 8; bytes <= (double)(1u << 30); bytes *= 16) {
            struct coll_args a = {.kind = (enum coll_kind)k, .rank = 0, .nranks = n, .root = 0,
                                  .dt = FC_FLOAT32, .op = FC_SUM, .esize = 4, .in_place = 0};
            /* bytes is the collective's total: per-rank counts for the
             * gather/scatter family */
            size_t count = (size_t)(bytes / 4);
            if (coll_blocked(k) || coll_is_v(k))
                count = count / (size_t)n ? count / (size_t)n : 1;
            a.count = k == COLL_BARRIER ? 0 : count;
            /* the v-collectives: even counts (alltoallv's per pair: count / n) */
            size_t *vc = NULL;
            if (coll_is_v(k)) {
                vc = malloc(2 * sizeof(size_t) * (size_t)n);
                if (!vc)
                    return;
                size_t each = k == COLL_ALLTOALLV ? (count / (size_t)n ? count / (size_t)n : 1)
                                                  : count;
                for (int j = 0; j < n; j++) {
                    vc[j] = each;
                    vc[n + j] = (size_t)j * each;
                }
                a.scounts = a.rcounts = vc;
                a.sdispls = a.rdispls = vc + n;
            }
            double best_t = 0;
            const struct coll_algo *best = coll_select_by_cost(&t, &a, &best_t);
            const struct coll_algo *second = NULL;
            double second_t = 0;
            for (int i = 0; coll_algos[i]; i++) {
                const struct coll_algo *al = coll_algos[i];
                if (al->kind != a.kind || al == best || !al->check(&a))
                    continue;
                double c = coll_algo_cost(al, &a, &t.cost);
                if (!second || c < second_t) {
                    second = al;
                    second_t = c;
                }
            }
            char b[32];
            log_fmt_bytes(bytes, b, sizeof(b));
            char rup[64] = "-";
            if (second)
                snprintf(rup, sizeof(rup), "%s (%.3g us)", second->name, second_t * 1e6);
            printf("%-15s %10s  %-18s %9.3g us   %s\n", coll_kind_name(a.kind),
                   k == COLL_BARRIER ? "-" : b, best ? best->name : "?", best_t * 1e6, rup);
            free(vc);
            if (k == COLL_BARRIER)
                break;
        }
    }
}

/* The NIC each local rank would use: one per GPU of the node (local rank i
 * on GPU i), or per NUMA node without GPUs; over the RDMA providers'
 * domains where there are any, else the NICs hwloc reports. */
static void print_nic_map(const cfg_t *cfg)
{
    struct prov_list l;
    char doms[TOPO_NIC_MAX][PROV_NAME_LEN];
    const char *names[TOPO_NIC_MAX];
    int n = 0;
    if (prov_discover(cfg, &l) == FC_SUCCESS)
        for (uint32_t i = 0; i < l.n && n < TOPO_NIC_MAX; i++) {
            int seen = l.c[i].tier < FC_TIER_RDMA;
            for (uint32_t k = 0; k < i && !seen; k++)
                seen = !strcmp(l.c[k].name, l.c[i].name);
            if (seen)
                continue;
            char d[TOPO_NIC_MAX][PROV_NAME_LEN];
            int nd = prov_domains(l.c[i].name, d, TOPO_NIC_MAX);
            for (int j = 0; j < nd && n < TOPO_NIC_MAX; j++) {
                int dup = 0;
                for (int k = 0; k < n && !dup; k++)
                    dup = !strcmp(doms[k], d[j]);
                if (!dup) {
                    memcpy(doms[n], d[j], sizeof(doms[n]));
                    names[n] = doms[n];
                    n++;
                }
            }
        }
    printf("  from %s; the NICs of %s%s%s\n",
           cfg->topo_file[0] ? "FC_TOPO_FILE" : "hwloc discovery",
           n ? "the RDMA providers" : "hwloc (no RDMA provider)",
           cfg->nics[0] ? ", FC_NICS=" : "", cfg->nics);
    topo_print_nic_map(stdout, cfg->topo_file, names, n, cfg->nics);
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"env", no_argument, NULL, 'e'},        {"algorithms", no_argument, NULL, 'a'},
        {"tuner", no_argument, NULL, 't'},      {"provider", required_argument, NULL, 'p'},
        {"ranks", required_argument, NULL, 'n'}, {"check", no_argument, NULL, 'c'},
        {"verbose", no_argument, NULL, 'v'},    {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int mode = 0, verbose = 0, n = 4;
    const char *prov = "tcp";
    int c;
    while ((c = getopt_long(argc, argv, "eEaAtp:n:cvh", opts, NULL)) != -1) {
        switch (c) {
        case 'e':
        case 'E':
        case 'a':
        case 'A':
        case 't':
        case 'c': mode = c; if (c == 'E') verbose = 1; break;
        case 'p': prov = optarg; break;
        case 'n': n = atoi(optarg); break;
        case 'v': verbose = 1; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    fc_result_t st;
    const cfg_t *cfg = config_global(&st);
    if (st != FC_SUCCESS)
        fprintf(stderr, "fc_info: %s\n", fc_last_error());
    switch (mode) {
    case 'e':
    case 'E': config_print_table(stdout, verbose); return 0;
    case 'a': print_algorithms(); return 0;
    case 'A': print_algo_specs(); return 0;
    case 't':
        if (n < 1 || n > (1 << 20)) {
            fprintf(stderr, "fc_info: -n %d: expected 1..1048576 ranks\n", n);
            return 2;
        }
        print_tuner(prov, n);
        return 0;
    case 'c': {
        printf("fc_info checks on %s:\n", log_hostname());
        int f = run_checks(cfg, verbose);
        struct prov_list l;
        char provs[256] = "";
        size_t o = 0;
        if (prov_discover(cfg, &l) == FC_SUCCESS)
            for (uint32_t i = 0; i < l.n; i++) {
                int dup = 0;
                for (uint32_t k = 0; k < i; k++)
                    dup |= !strcmp(l.c[k].name, l.c[i].name);
                if (!dup)
                    o += (size_t)snprintf(provs + o, sizeof(provs) - o, "%s%s", o ? "," : "",
                                          l.c[i].name);
            }
        struct rlimit rl;
        getrlimit(RLIMIT_MEMLOCK, &rl);
        char ml[32];
        if (rl.rlim_cur == RLIM_INFINITY)
            snprintf(ml, sizeof(ml), "unlimited");
        else
            snprintf(ml, sizeof(ml), "%llu", (unsigned long long)rl.rlim_cur / 1024);
        printf("fc_info check: host=%s libfabric=%s providers=%s memlock_kib=%s status=%s\n",
               log_hostname(), prov_fi_version(), provs[0] ? provs : "none", ml,
               f ? "FAIL" : "OK");
        return f ? 1 : 0;
    }
    default: break;
    }
    printf("fabcoll %s\n", fc_version());
    printf("host %s; CUDA support: %s\n", log_hostname(),
#ifdef HAVE_CUDA
           "built in (the driver is loaded at run time)"
#else
           "not built"
#endif
    );
    if (cfg->fi_provider[0])
        printf("FI_PROVIDER=%s narrows the list below\n", cfg->fi_provider);
    printf("\nProviders (FI_EP_RDM with tagged messages):\n");
    prov_print_info(stdout, verbose);
    printf("\nTopology:\n");
    topo_print(stdout, verbose);
    printf("\nNIC map (the NIC each local rank would use, its distance class, why):\n");
    print_nic_map(cfg);
    printf("\nChecks:\n");
    int f = run_checks(cfg, verbose);
    printf("\nfc_info -e lists the FC_* settings; fc_info -t -p shm -n 8 shows the tuner's "
           "choices.\n");
    return f ? 1 : 0;
}
