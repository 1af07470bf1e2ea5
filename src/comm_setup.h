/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The steps of creating a top-level communicator (comm_create in comm.c
 * runs them in order and undoes them in reverse on failure).
 *
 * Every step is collective over the bootstrap: all ranks take part in
 * every exchange of a step and agree on its outcome, so they fail at the
 * same step with the same message (the first failing rank's, naming it and
 * its host). A step that fails leaves what it made in the setup state or in
 * the communicator, where comm_setup_free, shared_release and comm_free find it.
 */
#ifndef FC_COMM_SETUP_H
#define FC_COMM_SETUP_H

#include "comm.h"
#include "prov.h"

struct boot;
struct rank_info;

/* What the steps learn and pass on; only comm_setup.c reads its rank_info. */
struct comm_setup {
    struct boot *b;
    int n, me;
    struct rank_info *infos; /* every rank's, from step 1 */
    const char **names;      /* every rank's host (points into c->hosts) */
    char (*pnames)[64];      /* "host pid P" of every rank, for messages */
    int nnodes, local_rank, local_size;
    int tune_device; /* every rank asked for device tuning (FC_TUNE_MEMORY) */
    int reproducible; /* a rank asked for FC_REPRODUCIBLE */
    char choice[PROV_NAME_LEN], fabric[PROV_FABRIC_LEN];
    char why[512]; /* the providers passed over, and why */
    /* this rank's NICs for an RDMA provider, nearest first (topo_nic_order):
     * rail i opens on nic[i % nnic]; nnic 0: no preference (tcp, shm) */
    char nic[COMM_MAX_RAILS][PROV_NAME_LEN];
    int nnic;
    struct boot_collector *collector; /* rank 0's hang reports, until the family has it */
};

/* Zeroes st and allocates its per-rank arrays and c's (hosts, host_pid). */
fc_result_t comm_setup_init(struct comm_setup *st, struct boot *b, struct fc_comm *c);
/* Step 1, who is where: every rank's host, CPUs, settings and providers;
 * the version check; rank 0's pipeline and protocol settings for all. */
fc_result_t comm_setup_gather(struct comm_setup *st, struct fc_comm *c,
                              const struct comm_device *dev);
/* Step 2: the provider every rank can use (prov_agree). */
fc_result_t comm_setup_agree(struct comm_setup *st);
/* Step 3: sh's endpoint opened, addresses exchanged, peers connected,
 * rails opened; sh->tp and sh->ptp set. */
fc_result_t comm_setup_endpoints(struct comm_setup *st, struct fc_comm *c, struct comm_shared *sh);
/* Step 4: the communicator itself (peers, tuning, attributes) and the
 * progress thread; c->sh is set. */
fc_result_t comm_setup_comm(struct comm_setup *st, struct fc_comm *c);
/* Step 5: the fabric carries messages among all ranks; the INFO line. */
fc_result_t comm_setup_check(struct comm_setup *st, struct fc_comm *c);
void comm_setup_free(struct comm_setup *st);

/* The connectivity check (a barrier on the control tags): at creation
 * (seq 0) and at destruction (seq 1, no peer still sends to us). */
fc_result_t comm_fabric_check(struct fc_comm *c, uint64_t seq);

#endif /* FC_COMM_SETUP_H */
