/* SPDX-License-Identifier: BSD-3-Clause */
/* Inside the fabric layer: the endpoint object and the helpers its files
 * share. Only prov/ includes this (and with it <rdma/fabric.h>). */
#ifndef FC_PROV_INT_H
#define FC_PROV_INT_H

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "prov.h"

/* One registered range. Persistent entries back memory the transport
 * handed out (scratch); the others are user buffers registered for the
 * duration of transfers (FI_MR_LOCAL) and kept in an LRU cache. */
struct prov_mr {
    struct prov_mr *next;
    struct prov_mr *lru_prev, *lru_next; /* cached entries with no user */
    char *base;
    size_t len;
    struct fid_mr *mr;
    void *desc;
    uint64_t key;
    int refs;
    int persistent; /* memory the transport handed out */
    int cached;     /* a watched user buffer: kept after its last use */
    int stale;      /* its memory was freed or unmapped: never reuse */
    int remote;     /* registered with remote read/write access */
    uint64_t dev_buffer_id; /* device memory: the allocation it belongs to (0: host) */
};

struct prov_mr_stats {
    uint64_t hits, misses, evictions, invalidations;
};

struct prov_pool {
    int n;
    void *buf[4];
};

struct prov_done {
    struct xfer *x;
    size_t len;
};

struct prov_ep {
    struct transport base;
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_av *av;
    struct fid_cq *cq;
    struct fid_ep *ep;
    int wait_fd;          /* -1: no fd to block on */
    char prov_name[PROV_NAME_LEN];
    fc_tier_t tier;
    int hmem;             /* device buffers go to the fabric directly (gdr) */
    char hmem_why[200];   /* why not, for logs and FC_GDR=on */
    uint64_t mr_mode;     /* what we honour: provider's demand | FC_MR_MODE */
    uint64_t prov_mr_mode; /* what the provider itself demands */
    size_t inject_size;   /* what fabcoll injects: provider's limit, FC_PROTO, FC_EAGER_MAX */
    size_t rndv_min;      /* messages of this many bytes and more go by the RMA
                             rendezvous (0: never; FI_RMA and remote keys needed) */
    uint64_t rndv_count;  /* messages sent and received that way */
    struct rndv **rndv_tab; /* by index, for the remote CQ data that names them */
    uint32_t rndv_n;
    struct rndv *rndv_free;  /* idle */
    struct rndv *rndv_retry; /* writes to post again (the provider said EAGAIN) */
    void **rndv_slabs;       /* registered memory the entries live in */
    int rndv_nslabs;
    int retry_count;      /* FC_RETRY_COUNT */
    uint64_t next_key;    /* requested keys when the provider does not pick them */
    struct prov_mr *mrs;  /* registrations */
    struct prov_mr *lru_head, *lru_tail; /* idle cached entries, most recent first */
    size_t mr_cached_bytes;
    size_t mr_cache_max;  /* 0: user buffers are not cached */
    size_t dev_cache_max; /* FC_MR_CACHE_MAX, for device registrations */
    uint64_t mm_seen;     /* memory-monitor invalidations processed */
    struct prov_mr_stats mr_stats;
    struct prov_pool pool[64]; /* idle scratch by power-of-two size class */
    size_t pool_bytes;
    /* peers */
    int nranks, self;
    fi_addr_t *addrs;
    char (*names)[64];
    /* completions made locally (injects), delivered at the next progress */
    struct prov_done *local;
    size_t nlocal, caplocal;
    char errbuf[512];
};

static inline struct prov_ep *ep_of(struct transport *t)
{
    return (struct prov_ep *)t;
}

/* fi_getinfo hints for an RDM tagged endpoint honouring every mr_mode bit
 * we can. caps_extra: FI_RMA / FI_HMEM probes. */
struct fi_info *prov_hints(uint64_t caps_extra);
uint64_t prov_mr_mode_of_cfg(unsigned cfg_bits);
/* The source address this host uses towards the rendezvous (FC_ROOT_ADDR):
 * 0 and *src filled when known and not loopback. */
struct sockaddr_storage;
int prov_root_source(const cfg_t *cfg, struct sockaddr_storage *src);
/* Whether fabric "a.b.c.d/len" (or an IPv6 prefix) holds the address. */
int prov_fabric_holds(const char *fabric, const struct sockaddr_storage *src);
int prov_is_loopback(const struct fi_info *fi);

/* mr.c */
/* Decides whether user buffers are cached (FC_MR_CACHE_MAX > 0 and the
 * memory monitor runs) and logs the decision. */
void prov_mr_cache_init(struct prov_ep *p, size_t max_bytes);
fc_result_t prov_mr_acquire(struct prov_ep *p, const void *buf, size_t len, struct prov_mr **out);
void prov_mr_release(struct prov_ep *p, struct prov_mr *m);
/* Whether a registration of host memory gets remote write access: one
 * made and closed at once, outside the cache and its counters. */
int prov_mr_remote_ok(struct prov_ep *p);
void prov_mr_close_all(struct prov_ep *p);
void *prov_mem_alloc(struct transport *t, size_t len);
void prov_mem_free(struct transport *t, void *ptr, size_t len);
void prov_mem_pool_drain(struct prov_ep *p);

/* xfer.c: the transport's entry points */
extern const struct transport_ops prov_transport_ops;

/* post.c: what every post shares */
/* Errors worth trying again, and the pause before try attempt + 1. */
int prov_transient(ssize_t ret);
void prov_backoff(int attempt);
/* Sets and returns the error of a failed post (call names it). */
fc_result_t prov_post_error(struct prov_ep *p, const char *call, int peer, size_t len, int ret);
int prov_is_device(const struct prov_ep *p, const void *buf);

/* rndv.c: the RMA rendezvous */
/* Whether a message of len bytes goes by the rendezvous (both ends agree). */
int prov_use_rndv(const struct prov_ep *p, const struct xfer *x, size_t len);
fc_result_t prov_rndv_send(struct prov_ep *p, int peer, uint64_t tag, const void *buf, size_t len,
                           struct xfer *x);
fc_result_t prov_rndv_recv(struct prov_ep *p, int peer, uint64_t tag, void *buf, size_t len,
                           struct xfer *x);
/* A completion carrying remote CQ data: a rendezvous write landed. */
void prov_rndv_data_arrived(struct prov_ep *p, uint64_t data);
/* Posts again what the provider refused for now (p->rndv_retry). */
void prov_rndv_retry(struct prov_ep *p);
/* Frees the rendezvous entries (after the endpoint is closed). */
void prov_rndv_fini(struct prov_ep *p);

/* cq.c: completion progress */
fc_result_t prov_progress(struct transport *t, int *ncomp);
/* Under the engine's lock (fi_trywait may read the completion queue). */
int prov_wait_prepare(struct transport *t, struct transport_wait *w);

/* hmem.c */
/* Whether to ask the provider for FI_HMEM (a GPU is here, FC_GDR != off). */
int prov_hmem_wanted(const cfg_t *cfg);
/* After the endpoint is up: can it take device memory? Sets hmem and
 * hmem_why; FC_ERR_UNSUPPORTED when FC_GDR=on and it cannot. */
fc_result_t prov_hmem_probe(struct prov_ep *p, const cfg_t *cfg);
/* Registers device memory (iface CUDA) into *mr; probe: a refusal logs at
 * INFO only (the probe expects it where libfabric lacks CUDA). */
fc_result_t prov_hmem_reg(struct prov_ep *p, void *buf, size_t len, int device, uint64_t key,
                          int probe, struct fid_mr **mr);

/* profile.c */
uint16_t prov_pref_of(const char *prov_name);
/* Smallest message for the RMA rendezvous under cfg (FC_PROTO, FC_RNDV_MIN,
 * the profile); 0: never. */
size_t prov_rndv_min(const struct prov_ep *p, const cfg_t *cfg);

/* The signals whose handlers from a provider's library (libinfinipath,
 * libpsm) were put back to the default as fabcoll loaded ("SIGINT,SIGTERM";
 * "" for none): signals.c. */
const char *prov_reset_handlers(void);

#endif /* FC_PROV_INT_H */
