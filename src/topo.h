/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Node topology from hwloc (or FC_TOPO_FILE, an hwloc XML export):
 * NUMA nodes, cores, GPUs and NICs with their PCI addresses and locality.
 */
#ifndef FC_TOPO_H
#define FC_TOPO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "fabcoll.h"

struct topo_summary {
    int numa, cores, pus, gpus, nics;
};

/* FC_TOPO_FILE can be loaded as an hwloc XML topology (FC_SUCCESS), or
 * the error naming it and the fix. A build without hwloc warns that it is
 * ignored. */
fc_result_t topo_check_file(const char *file);
/* Reads the topology (FC_TOPO_FILE when set); 0 on success. */
int topo_summary(struct topo_summary *s);
/* Prints devices and locality for fc_info. */
void topo_print(FILE *fp, int verbose);

/* ---- which NIC a rank uses (topo_nic.c) ------------------------------------ */

/* How far a NIC is from the rank's GPU (or CPUs), nearest first, as NCCL's
 * path types: PIX the same PCI switch (or bridge), PXB several PCI bridges
 * below one host bridge, PHB the same host bridge, NODE the same NUMA node
 * or package through different host bridges, SYS across the sockets'
 * interconnect, UNKNOWN not in the topology. */
enum topo_class { TOPO_PIX, TOPO_PXB, TOPO_PHB, TOPO_NODE, TOPO_SYS, TOPO_UNKNOWN };
const char *topo_class_name(enum topo_class c);

#define TOPO_NIC_NAME 64
#define TOPO_NIC_MAX 32
#define TOPO_CPU_WORDS 16 /* CPUs 0-1023 */

struct topo_nic {
    char name[TOPO_NIC_NAME];
    enum topo_class cls;
    char why[200]; /* "mlx5_1: shares PCI switch with GPU 0000:41:00.0" */
};

/* Orders candidate NICs for one rank, nearest first.
 *   file     hwloc XML to read (NULL or "": discovery);
 *   names    n candidate names: libfabric domains (verbs: mlx5_0, the
 *            OPENFABRICS device; tcp: an interface, the NETWORK device);
 *   gpu_bus  the rank's GPU's PCI bus id ("0000:41:00.0"; NULL or "": none):
 *            classes are the path from it; without it, a NIC near the
 *            rank's CPUs is NODE and the others SYS;
 *   cpus     the rank's CPU binding, TOPO_CPU_WORDS words of a bit mask
 *            (NULL: every CPU, which makes every NIC as near as the next);
 *   spread   the rank's index on its node: equally near NICs are taken in
 *            turn from this one on, so a node's ranks spread over them;
 *   filter   FC_NICS: comma list of the names allowed (NULL or "": all).
 * Writes up to TOPO_NIC_MAX entries to out and their number to nout; names
 * not in the topology come last, as UNKNOWN. Errors: the file cannot be
 * loaded, or the filter leaves no candidate (the message names both). A
 * build without hwloc keeps the given order (filtered), all UNKNOWN. */
fc_result_t topo_nic_order(const char *file, const char *const *names, int n,
                           const char *gpu_bus, const uint64_t *cpus, int spread,
                           const char *filter, struct topo_nic *out, int *nout);

/* fc_info's NIC map: one line per local rank slot (a GPU of the node, or a
 * NUMA node where there is none) with the NIC topo_nic_order gives it from
 * names (NULL or n == 0: the NICs hwloc reports: OPENFABRICS devices, else
 * NETWORK ones but lo), its class and why. */
void topo_print_nic_map(FILE *fp, const char *file, const char *const *names, int n,
                        const char *filter);

#endif /* FC_TOPO_H */
