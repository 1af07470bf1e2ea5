/* SPDX-License-Identifier: BSD-3-Clause */
#include "topo.h"

#include <string.h>

#include "build_config.h"
#include "config.h"
#include "log.h"

#ifdef HAVE_HWLOC
#include "topo_int.h"

fc_result_t topo_load(hwloc_topology_t *t, const char *file)
{
    if (hwloc_topology_init(t) != 0)
        return FC_ERR(FC_ERR_SYSTEM, "hwloc_topology_init failed: %m");
    hwloc_topology_set_io_types_filter(*t, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    if (file && file[0] && hwloc_topology_set_xml(*t, file) != 0) {
        hwloc_topology_destroy(*t);
        return FC_ERR(FC_ERR_INVALID_ARGUMENT,
                      "FC_TOPO_FILE=%s is not a readable hwloc XML topology (%m). Fix: write "
                      "one with `lstopo --of xml FILE` on the node it describes, or unset "
                      "FC_TOPO_FILE to use discovery",
                      file);
    }
    if (hwloc_topology_load(*t) != 0) {
        hwloc_topology_destroy(*t);
        if (file && file[0])
            return FC_ERR(FC_ERR_INVALID_ARGUMENT,
                          "FC_TOPO_FILE=%s could not be loaded as an hwloc XML topology (%m). "
                          "Fix: write one with `lstopo --of xml FILE` on the node it "
                          "describes, or unset FC_TOPO_FILE to use discovery",
                          file);
        return FC_ERR(FC_ERR_SYSTEM, "hwloc could not discover this node's topology: %m");
    }
    return FC_SUCCESS;
}

fc_result_t topo_check_file(const char *file)
{
    hwloc_topology_t t;
    fc_result_t rc = topo_load(&t, file);
    if (rc == FC_SUCCESS)
        hwloc_topology_destroy(t);
    return rc;
}

static int load(hwloc_topology_t *t)
{
    return topo_load(t, config_global(NULL)->topo_file) == FC_SUCCESS ? 0 : -1;
}

int topo_is_gpu(hwloc_obj_t o)
{
    return o->attr->osdev.type == HWLOC_OBJ_OSDEV_GPU ||
           o->attr->osdev.type == HWLOC_OBJ_OSDEV_COPROC;
}

int topo_is_nic(hwloc_obj_t o)
{
    return o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS ||
           o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK;
}

hwloc_obj_t topo_pci_of(hwloc_obj_t o)
{
    while (o && o->type != HWLOC_OBJ_PCI_DEVICE && hwloc_obj_type_is_io(o->type))
        o = o->parent;
    return o && o->type == HWLOC_OBJ_PCI_DEVICE ? o : NULL;
}

void topo_bus_string(hwloc_obj_t pci, char *buf, size_t len)
{
    snprintf(buf, len, "%04x:%02x:%02x.%01x", pci->attr->pcidev.domain, pci->attr->pcidev.bus,
             pci->attr->pcidev.dev, pci->attr->pcidev.func);
}

int topo_summary(struct topo_summary *s)
{
    memset(s, 0, sizeof(*s));
    hwloc_topology_t t;
    if (load(&t) != 0)
        return -1;
    s->numa = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
    s->cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
    s->pus = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU);
    for (hwloc_obj_t o = hwloc_get_next_osdev(t, NULL); o; o = hwloc_get_next_osdev(t, o)) {
        s->gpus += topo_is_gpu(o);
        s->nics += o->attr->osdev.type == HWLOC_OBJ_OSDEV_OPENFABRICS;
    }
    hwloc_topology_destroy(t);
    return 0;
}

void topo_print(FILE *fp, int verbose)
{
    hwloc_topology_t t;
    if (load(&t) != 0) {
        fprintf(fp, "  hwloc could not read the topology: %s\n", err_get());
        return;
    }
    fprintf(fp, "  %d NUMA node(s), %d core(s), %d hardware thread(s)\n",
            hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE),
            hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE), hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU));
    int shown = 0;
    for (hwloc_obj_t o = hwloc_get_next_osdev(t, NULL); o; o = hwloc_get_next_osdev(t, o)) {
        if (!topo_is_gpu(o) && !topo_is_nic(o))
            continue;
        if (!verbose && o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && o->name &&
            strcmp(o->name, "lo") == 0)
            continue;
        char bus[32] = "-";
        hwloc_obj_t pci = topo_pci_of(o);
        if (pci)
            topo_bus_string(pci, bus, sizeof(bus));
        hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(t, o);
        char cpus[64] = "-";
        if (anc && anc->cpuset)
            hwloc_bitmap_list_snprintf(cpus, sizeof(cpus), anc->cpuset);
        fprintf(fp, "  %-4s %-12s pci %-14s near cpus %s\n", topo_is_gpu(o) ? "GPU" : "NIC",
                o->name ? o->name : "?", bus, cpus);
        shown++;
    }
    if (!shown)
        fprintf(fp, "  no GPU or RDMA/network device reported by hwloc\n");
    hwloc_topology_destroy(t);
}
#else
fc_result_t topo_check_file(const char *file)
{
    FC_WARN(LOG_TOPO, "FC_TOPO_FILE=%s is ignored: this build has no hwloc", file);
    return FC_SUCCESS;
}

int topo_summary(struct topo_summary *s)
{
    memset(s, 0, sizeof(*s));
    return -1;
}

void topo_print(FILE *fp, int verbose)
{
    (void)verbose;
    fprintf(fp, "  this build has no hwloc: topology unknown\n");
}
#endif
