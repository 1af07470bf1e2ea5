/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The fabric layer's face to the core. Everything that includes
 * <rdma/fabric.h> lives behind this header; src/ and coll/ see providers as
 * names, tiers and a struct transport.
 *
 * Life of a communicator's fabric:
 *   prov_discover()  each rank lists the providers it could use (ranked);
 *   prov_agree()     every rank runs the same pure function on every
 *                    rank's list and gets the same choice (or error);
 *   prov_open()      opens fabric/domain/endpoint/AV/CQ for the choice and
 *                    returns this rank's address blob;
 *   prov_connect()   inserts every rank's address into the AV;
 *   prov_transport() the struct transport the engine runs schedules on;
 *   prov_close()     tears down whatever exists (works half-built).
 */
#ifndef FC_PROV_H
#define FC_PROV_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "fabcoll.h"
#include "transport.h"

#define PROV_NAME_LEN 32
#define PROV_FABRIC_LEN 48
#define PROV_MAX_CANDS 12
#define PROV_ADDR_MAX 160

struct prov_cand {
    char name[PROV_NAME_LEN];     /* fi_info's prov_name, e.g. "tcp;ofi_rxm" */
    char fabric[PROV_FABRIC_LEN]; /* fabric name (a subnet for tcp) */
    char domain[PROV_NAME_LEN];   /* domain (an interface for tcp) */
    uint8_t tier;                 /* fc_tier_t */
    uint8_t hmem, rma, loopback;  /* FI_HMEM, FI_RMA offered; domain is loopback */
    uint16_t pref;                /* lower is better, within the ladder */
};

/* What one rank can use; fixed size so it travels in an allgather. */
struct prov_list {
    uint32_t n;
    uint32_t fi_version;          /* libfabric runtime version */
    struct prov_cand c[PROV_MAX_CANDS];
};

/* Lists usable providers (FI_EP_RDM with FI_TAGGED|FI_MSG), best first by
 * tier ladder: shm, RDMA providers, tcp, others, sockets last. FI_PROVIDER
 * narrows it (libfabric applies it). Empty list: FC_ERR_FABRIC with the
 * reason and the fix. */
fc_result_t prov_discover(const cfg_t *cfg, struct prov_list *out);

/* Chooses the provider every rank will use: the best tier all ranks have
 * (shm only when nnodes == 1). lists[r] is rank r's list. On success
 * writes the provider name to choice, a fabric every rank has for it to
 * fabric (empty if none is common: each rank then picks its own), and, to
 * why, the rejected better tiers with reasons ("shm: ranks on 2 nodes;
 * verbs;ofi_rxm: rank 3 lacks it"). Deterministic: every rank computes the
 * same answer. */
fc_result_t prov_agree(const struct prov_list *lists, int nranks, int nnodes,
                       const char *const *hostnames, char *choice, size_t choice_len,
                       char *fabric, size_t fabric_len, char *why, size_t why_len);

struct prov_ep;
struct prov_mr;

/* Opens the endpoint for provider `name` on this rank: on fabric_hint where
 * it has it (the one all ranks share), else loopback on a single node,
 * else the fabric that reaches the rendezvous, else the first
 * non-loopback one; among those, on domain_pref where it can (NULL or "":
 * no preference; the NIC nearest the rank, topo_nic_order). Writes the
 * endpoint address into addr (PROV_ADDR_MAX bytes). */
fc_result_t prov_open(const cfg_t *cfg, const char *name, int nnodes, const char *fabric_hint,
                      const char *domain_pref, struct prov_ep **out, void *addr,
                      size_t *addrlen);
/* The domains (NICs; interfaces for tcp) provider `name` offers, each
 * once, in fi_getinfo's order: up to max into out; returns their number (0
 * when fi_getinfo finds none). Unlike prov_discover's list, not capped per
 * provider. */
int prov_domains(const char *name, char (*out)[PROV_NAME_LEN], int max);
/* addrs: nranks blobs of PROV_ADDR_MAX bytes; names: "host:pid" per rank
 * for error messages; only: NULL, or nonzero for the ranks this endpoint
 * reaches (the others are not inserted: another endpoint reaches them). */
fc_result_t prov_connect(struct prov_ep *p, int nranks, const char *addrs,
                         const char *const *names, int self, const unsigned char *only);
struct transport *prov_transport(struct prov_ep *p);
/* 1 when the endpoint takes device buffers directly (gdr tier). */
int prov_hmem(const struct prov_ep *p);
/* Fills provider, fabric, domain, tier, hmem, and nrails with 1; leaves the
 * other fields as they are. */
void prov_describe(const struct prov_ep *p, fc_comm_attr_t *attr);
/* Per-provider defaults (profile.c) after FC_* overrides, for a job of
 * nranks ranks (0: unknown). */
void prov_tuning(const struct prov_ep *p, const cfg_t *cfg, int nranks, size_t *chunk,
                 int *window, size_t *eager_max);
/* The provider table's cost model and pipeline, before FC_* overrides: what
 * the tuner's coll_cost is made of (comm_cost_params). Zeros where none is
 * known (hs_min 0: no handshake step). */
struct prov_model {
    double alpha, beta, gamma; /* s per message, s per byte sent, reduced */
    double hs_min;             /* messages above this many bytes take ... */
    double hs, hs_oneway;      /* ... the provider's own handshake, s each */
    size_t chunk;              /* pipeline chunk (bytes) ... */
    int window;                /* ... and chunks in flight per step */
};
void prov_model_of(const char *prov_name, int nnodes, struct prov_model *m);
/* The endpoint's RMA rendezvous threshold (0: none); every rank must use
 * the same, so the communicator agrees on it after the endpoints open. */
size_t prov_rndv_min_get(const struct prov_ep *p);
void prov_rndv_min_set(struct prov_ep *p, size_t v);
/* Messages sent and received by the RMA rendezvous so far. */
uint64_t prov_rndv_count(const struct prov_ep *p);
/* Rails (endpoints per rank, each driven by a thread) a provider gains
 * from at most: 4 where progress copies on the calling core (tcp's
 * sockets, shm's CMA), else 1. */
int prov_auto_rails(const char *prov_name);
/* Tier of a provider by name (the ladder). */
fc_tier_t prov_tier_of(const char *prov_name);
/* Closes the endpoint: no transfer runs and no completion arrives after
 * this; registrations and memory stay valid until prov_close. */
/* fc_mem_register: [buf, buf + len) registered now (host memory; device
 * memory on an endpoint that takes it directly: its whole allocation) and
 * kept until prov_mr_unpin, so transfers inside it find the registration
 * instead of making one. *out is NULL where the endpoint registers nothing
 * (no FI_MR_LOCAL and no rendezvous), or device memory it stages. Under the
 * lock that serialises the endpoint's use. */
fc_result_t prov_mr_pin(struct prov_ep *p, void *buf, size_t len, struct prov_mr **out);
void prov_mr_unpin(struct prov_ep *p, struct prov_mr *m);

void prov_stop(struct prov_ep *p);
void prov_close(struct prov_ep *p);

/* fc_info: prints every provider fi_getinfo reports, with tier, caps and
 * mr_mode, to file (a FILE *). */
void prov_print_info(void *file, int verbose);
/* The libfabric version "1.17" for messages. */
const char *prov_fi_version(void);

#endif /* FC_PROV_H */
