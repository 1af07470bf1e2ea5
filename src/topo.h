/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Node topology from hwloc (or FC_TOPO_FILE, an hwloc XML export):
 * NUMA nodes, cores, GPUs and NICs with their PCI addresses and locality.
 */
#ifndef FC_TOPO_H
#define FC_TOPO_H

#include <stdio.h>

struct topo_summary {
    int numa, cores, pus, gpus, nics;
};

/* Reads the topology (FC_TOPO_FILE when set); 0 on success. */
int topo_summary(struct topo_summary *s);
/* Prints devices and locality for fc_info. */
void topo_print(FILE *fp, int verbose);

#endif /* FC_TOPO_H */
