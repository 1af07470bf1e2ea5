/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Which NIC a rank uses: candidate NICs (libfabric domains) ordered by how
 * near each is to the rank's GPU, or to its CPUs where it has none, in
 * NCCL's path classes, with equally near ones dealt out over the ranks of
 * a node; and fc_info's map of that choice for every local rank slot.
 *
 * This file owns the distance classes and the order. It reads the
 * topology through topo.c's loader and nothing else: the caller supplies
 * the candidates, the GPU, the binding and FC_NICS, so the same inputs give
 * the same order wherever it runs (the unit tests feed it XML machines).
 */
#include "topo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "build_config.h"
#include "config.h"
#include "log.h"

static const char *const class_names[] = {"PIX", "PXB", "PHB", "NODE", "SYS", "UNKNOWN"};

const char *topo_class_name(enum topo_class c)
{
    return (unsigned)c <= TOPO_UNKNOWN ? class_names[c] : "?";
}

/* The candidates FC_NICS allows, in their order, into out (TOPO_NIC_MAX at
 * most, duplicates dropped); an error when it allows none. */
static fc_result_t filter_names(const char *const *names, int n, const char *filter,
                                struct topo_nic *out, int *nout)
{
    int k = 0;
    for (int i = 0; i < n && k < TOPO_NIC_MAX; i++) {
        if (!names[i] || !names[i][0] ||
            (filter && filter[0] && !config_list_has(filter, names[i])))
            continue;
        int dup = 0;
        for (int j = 0; j < k && !dup; j++)
            dup = strcmp(out[j].name, names[i]) == 0;
        if (dup)
            continue;
        memset(&out[k], 0, sizeof(out[k]));
        snprintf(out[k].name, sizeof(out[k].name), "%s", names[i]);
        out[k].cls = TOPO_UNKNOWN;
        k++;
    }
    *nout = k;
    if (k == 0 && filter && filter[0]) {
        char all[256] = "";
        size_t o = 0;
        for (int i = 0; i < n && o < sizeof(all); i++)
            o += (size_t)snprintf(all + o, sizeof(all) - o, "%s%s", i ? ", " : "", names[i]);
        return FC_ERR(FC_ERR_INVALID_ARGUMENT,
                      "FC_NICS=%s names none of the NICs on host %s (there are: %s). Fix: "
                      "set FC_NICS to some of those, or unset it",
                      filter, log_hostname(), n ? all : "none");
    }
    return FC_SUCCESS;
}

/* Equally near NICs in turn from the spread-th on: rotates every run of
 * one class (out is sorted by class). */
static void deal(struct topo_nic *out, int n, int spread)
{
    if (spread < 0)
        spread = 0;
    for (int s = 0; s < n;) {
        int e = s + 1;
        while (e < n && out[e].cls == out[s].cls)
            e++;
        int k = e - s, r = spread % k;
        if (r) {
            struct topo_nic tmp[TOPO_NIC_MAX];
            for (int i = 0; i < k; i++)
                tmp[i] = out[s + (i + r) % k];
            memcpy(&out[s], tmp, (size_t)k * sizeof(tmp[0]));
        }
        s = e;
    }
}

/* Stable: by class, the given order within one. */
static void sort_by_class(struct topo_nic *out, int n)
{
    for (int i = 1; i < n; i++) {
        struct topo_nic x = out[i];
        int j = i - 1;
        while (j >= 0 && out[j].cls > x.cls) {
            out[j + 1] = out[j];
            j--;
        }
        out[j + 1] = x;
    }
}

#ifdef HAVE_HWLOC
#include "topo_int.h"

static hwloc_obj_t find_nic(hwloc_topology_t t, const char *name)
{
    for (hwloc_obj_t o = hwloc_get_next_osdev(t, NULL); o; o = hwloc_get_next_osdev(t, o))
        if (topo_is_nic(o) && o->name && strcmp(o->name, name) == 0)
            return o;
    return NULL;
}

static int is_host_bridge(hwloc_obj_t o)
{
    return o->type == HWLOC_OBJ_BRIDGE && o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST;
}

/* Bridges strictly between o and its ancestor a. */
static int bridges_between(hwloc_obj_t o, hwloc_obj_t a)
{
    int k = 0;
    for (o = o->parent; o && o != a; o = o->parent)
        k += o->type == HWLOC_OBJ_BRIDGE;
    return k;
}

/* The nearest object above both (I/O objects included). */
static hwloc_obj_t common_ancestor(hwloc_obj_t x, hwloc_obj_t y)
{
    for (hwloc_obj_t a = x; a; a = a->parent)
        for (hwloc_obj_t b = y; b; b = b->parent)
            if (a == b)
                return a;
    return NULL;
}

static int numa_of(hwloc_obj_t o)
{
    hwloc_obj_t a = o;
    while (a && (hwloc_obj_type_is_io(a->type) || !a->nodeset))
        a = a->parent;
    return a && a->nodeset ? hwloc_bitmap_first(a->nodeset) : -1;
}

/* Two devices whose nearest common non-I/O object is a: NODE within one
 * NUMA node or one package, SYS across them. */
static enum topo_class cpu_class(hwloc_obj_t a)
{
    if (!a || !a->nodeset || hwloc_bitmap_weight(a->nodeset) <= 1)
        return TOPO_NODE;
    for (hwloc_obj_t p = a; p; p = p->parent)
        if (p->type == HWLOC_OBJ_PACKAGE)
            return TOPO_NODE;
    return TOPO_SYS;
}

static void classify_gpu(hwloc_obj_t gpu, const char *bus, hwloc_obj_t nic, struct topo_nic *e)
{
    hwloc_obj_t np = topo_pci_of(nic);
    hwloc_obj_t a = common_ancestor(gpu, np ? np : nic);
    if (a && a->type == HWLOC_OBJ_BRIDGE && np) {
        if (is_host_bridge(a)) {
            e->cls = TOPO_PHB;
            snprintf(e->why, sizeof(e->why), "same host bridge as GPU %s", bus);
        } else if (bridges_between(gpu, a) <= 1 && bridges_between(np, a) <= 1) {
            e->cls = TOPO_PIX;
            snprintf(e->why, sizeof(e->why), "shares PCI switch with GPU %s", bus);
        } else {
            e->cls = TOPO_PXB;
            snprintf(e->why, sizeof(e->why), "below the same PCI bridges as GPU %s, through "
                     "several switches", bus);
        }
        return;
    }
    hwloc_obj_t x = gpu, y = nic;
    while (x && hwloc_obj_type_is_io(x->type))
        x = x->parent;
    while (y && hwloc_obj_type_is_io(y->type))
        y = y->parent;
    e->cls = cpu_class(common_ancestor(x, y));
    if (e->cls == TOPO_NODE)
        snprintf(e->why, sizeof(e->why), "NUMA node %d as GPU %s, through another host bridge",
                 numa_of(nic), bus);
    else
        snprintf(e->why, sizeof(e->why), "NUMA node %d, GPU %s is on NUMA node %d",
                 numa_of(nic), bus, numa_of(gpu));
}

static void classify_cpus(hwloc_topology_t t, hwloc_const_bitmap_t cpus, int all,
                          const char *note, hwloc_obj_t nic, struct topo_nic *e)
{
    hwloc_obj_t a = hwloc_get_non_io_ancestor_obj(t, nic);
    int near = all || (a && a->cpuset && hwloc_bitmap_intersects(a->cpuset, cpus));
    e->cls = near ? TOPO_NODE : TOPO_SYS;
    if (all)
        snprintf(e->why, sizeof(e->why), "NUMA node %d; the rank may run on every CPU%s",
                 numa_of(nic), note);
    else if (near)
        snprintf(e->why, sizeof(e->why), "NUMA node %d, the rank's CPU binding%s", numa_of(nic),
                 note);
    else
        snprintf(e->why, sizeof(e->why), "NUMA node %d, outside the rank's CPU binding%s",
                 numa_of(nic), note);
}

/* topo_nic_order on a loaded topology; cpus NULL: every CPU. */
static void order_in(hwloc_topology_t t, const char *gpu_bus, hwloc_const_bitmap_t cpus,
                     int spread, struct topo_nic *out, int n)
{
    hwloc_obj_t gpu = NULL;
    char note[96] = "";
    if (gpu_bus && gpu_bus[0]) {
        gpu = hwloc_get_pcidev_by_busidstring(t, gpu_bus);
        if (!gpu)
            snprintf(note, sizeof(note), " (GPU %s is not in the topology)", gpu_bus);
    }
    int all = !cpus || hwloc_bitmap_iszero(cpus) ||
              hwloc_bitmap_isincluded(hwloc_topology_get_topology_cpuset(t), cpus);
    for (int i = 0; i < n; i++) {
        struct topo_nic *e = &out[i];
        hwloc_obj_t nic = find_nic(t, e->name);
        if (!nic) {
            e->cls = TOPO_UNKNOWN;
            snprintf(e->why, sizeof(e->why), "not in the topology");
        } else if (gpu) {
            classify_gpu(gpu, gpu_bus, nic, e);
        } else {
            classify_cpus(t, cpus, all, note, nic, e);
        }
    }
    sort_by_class(out, n);
    deal(out, n, spread);
}

fc_result_t topo_nic_order(const char *file, const char *const *names, int n,
                           const char *gpu_bus, const uint64_t *cpus, int spread,
                           const char *filter, struct topo_nic *out, int *nout)
{
    fc_result_t rc = filter_names(names, n, filter, out, nout);
    if (rc != FC_SUCCESS || *nout == 0)
        return rc;
    hwloc_topology_t t;
    rc = topo_load(&t, file);
    if (rc != FC_SUCCESS)
        return rc;
    hwloc_bitmap_t b = NULL;
    if (cpus) {
        b = hwloc_bitmap_alloc();
        for (int i = 0; b && i < TOPO_CPU_WORDS * 64; i++)
            if (cpus[i / 64] >> (i % 64) & 1)
                hwloc_bitmap_set(b, (unsigned)i);
    }
    order_in(t, gpu_bus, b, spread, out, *nout);
    hwloc_bitmap_free(b);
    hwloc_topology_destroy(t);
    return FC_SUCCESS;
}

static void map_line(FILE *fp, hwloc_topology_t t, const char *slot, const char *gpu_bus,
                     hwloc_const_bitmap_t cpus, int spread, struct topo_nic *cand, int n)
{
    struct topo_nic tmp[TOPO_NIC_MAX];
    memcpy(tmp, cand, (size_t)n * sizeof(tmp[0]));
    order_in(t, gpu_bus, cpus, spread, tmp, n);
    fprintf(fp, "  local rank %d (%s): %s %s, %s\n", spread, slot, tmp[0].name,
            topo_class_name(tmp[0].cls), tmp[0].why);
}

void topo_print_nic_map(FILE *fp, const char *file, const char *const *names, int n,
                        const char *filter)
{
    hwloc_topology_t t;
    if (topo_load(&t, file) != FC_SUCCESS) {
        fprintf(fp, "  %s\n", err_get());
        return;
    }
    const char *found[TOPO_NIC_MAX];
    if (!names || n <= 0) {
        n = 0;
        for (int pass = 0; pass < 2 && n == 0; pass++)
            for (hwloc_obj_t o = hwloc_get_next_osdev(t, NULL); o && n < TOPO_NIC_MAX;
                 o = hwloc_get_next_osdev(t, o)) {
                hwloc_obj_osdev_type_t want =
                    pass ? HWLOC_OBJ_OSDEV_NETWORK : HWLOC_OBJ_OSDEV_OPENFABRICS;
                if (o->attr->osdev.type == want && o->name && strcmp(o->name, "lo") != 0)
                    found[n++] = o->name;
            }
        names = found;
    }
    struct topo_nic cand[TOPO_NIC_MAX];
    int nc = 0;
    if (n == 0) {
        fprintf(fp, "  no NIC: neither an RDMA provider nor hwloc reports one\n");
    } else if (filter_names(names, n, filter, cand, &nc) != FC_SUCCESS) {
        fprintf(fp, "  %s\n", err_get());
    } else {
        int slots = 0;
        hwloc_obj_t last = NULL;
        for (hwloc_obj_t o = hwloc_get_next_osdev(t, NULL); o; o = hwloc_get_next_osdev(t, o)) {
            hwloc_obj_t pci = topo_is_gpu(o) ? topo_pci_of(o) : NULL;
            if (!pci || pci == last)
                continue; /* one slot per GPU, whatever names it has */
            last = pci;
            char bus[32], slot[64];
            topo_bus_string(pci, bus, sizeof(bus));
            snprintf(slot, sizeof(slot), "GPU %s", bus);
            map_line(fp, t, slot, bus, NULL, slots++, cand, nc);
        }
        int numa = slots ? 0 : hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
        for (int i = 0; i < numa; i++) {
            hwloc_obj_t nn = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, (unsigned)i);
            char slot[64];
            snprintf(slot, sizeof(slot), "NUMA node %u", nn->os_index);
            map_line(fp, t, slot, NULL, nn->cpuset, i, cand, nc);
        }
    }
    hwloc_topology_destroy(t);
}
#else
fc_result_t topo_nic_order(const char *file, const char *const *names, int n,
                           const char *gpu_bus, const uint64_t *cpus, int spread,
                           const char *filter, struct topo_nic *out, int *nout)
{
    (void)file, (void)gpu_bus, (void)cpus, (void)spread;
    fc_result_t rc = filter_names(names, n, filter, out, nout);
    for (int i = 0; rc == FC_SUCCESS && i < *nout; i++)
        snprintf(out[i].why, sizeof(out[i].why), "this build has no hwloc");
    return rc;
}

void topo_print_nic_map(FILE *fp, const char *file, const char *const *names, int n,
                        const char *filter)
{
    (void)file, (void)names, (void)n, (void)filter;
    fprintf(fp, "  this build has no hwloc: no NIC map\n");
}
#endif
