/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Inside the topology files (topo.c, topo_nic.c): loading an hwloc
 * topology from discovery or an XML export. Only builds with hwloc include
 * this, and only src/topo*.c include it.
 */
#ifndef FC_TOPO_INT_H
#define FC_TOPO_INT_H

#include <hwloc.h>

#include "fabcoll.h"

/* Loads the topology with its I/O devices: from the hwloc XML file `file`,
 * or by discovery when file is NULL or empty. A file that cannot be loaded
 * is an error (FC_ERR_INVALID_ARGUMENT naming the file and the fix), not a
 * silent fall back to discovery. */
fc_result_t topo_load(hwloc_topology_t *t, const char *file);

/* OS devices: a GPU (or CUDA coprocessor); a NIC (RDMA device or network
 * interface). */
int topo_is_gpu(hwloc_obj_t o);
int topo_is_nic(hwloc_obj_t o);
/* The PCI device an OS device belongs to (NULL: none, a virtual one), and
 * its bus id as "dddd:bb:dd.f". */
hwloc_obj_t topo_pci_of(hwloc_obj_t o);
void topo_bus_string(hwloc_obj_t pci, char *buf, size_t len);

#endif /* FC_TOPO_INT_H */
