/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Per-provider facts: where a provider sits on the tier ladder, its
 * preference within the ladder, pipeline defaults, and the cost model's
 * parameters. One table, so adding a provider is one row.
 */
#include <string.h>

#include "gpu.h"
#include "prov_int.h"

struct profile {
    const char *prefix;  /* matches the core provider: "verbs" matches "verbs;ofi_rxm" */
    fc_tier_t tier;
    uint16_t pref;       /* lower is better */
    size_t chunk;        /* pipeline chunk, bytes */
    int window;          /* chunks in flight per step */
    size_t eager_max;    /* largest eager message */
    size_t rndv_min;     /* smallest message for the RMA rendezvous (0: never) */
    double alpha, beta;  /* cost model: s per message, s per byte */
    size_t hs_min;       /* cost model: messages above this take the provider's */
    double hs, hs_oneway; /* own handshake, this much more each (0: none known) */
};

/* Smallest message for fabcoll's RMA rendezvous (0: never). On host memory
 * shm already moves large messages with one copy (CMA): the rendezvous's
 * extra clear-to-send only costs there, so shm leaves them to the provider.
 * tcp;ofi_rxm sends messages past its SAR limit (8 x 16 KiB) by a rendezvous
 * of its own whose read request travels behind the bulk data queued the
 * other way on the same connection (socket buffers of megabytes), so on a
 * loaded link every chunk waits for a round trip through those queues;
 * fabcoll's clear-to-send goes out when the receive is posted, ahead of the
 * data, and the chunk is written as soon as it is ready. 2 namespace hosts
 * x 2 ranks, each host's link shaped to 1 Gbit/s, 32 MiB allreduce: 1.13-1.15x
 * the time its bytes need at the link's rate against 1.27-1.31x (1 rank per
 * host: 1.04x against 1.46-1.53x); unshaped, CPU-bound, 32 KiB-32 MiB busbw
 * moved within this machine's noise. Over loopback on one host (no link to
 * load) 2-rank allreduce gained 1.07-1.31x at 128 KiB-8 MiB while
 * broadcast lost from 2 MiB (0.77-0.94x; 4 ranks 0.81-0.85x at 2-8 MiB):
 * ranks of one host talk over shm. RDMA providers write user
 * memory directly (not measured; conservative defaults). Endpoints that
 * take device memory (gdr) send messages of R_DEV bytes and more this way,
 * whatever the provider: its FIN is the only sure sign that the provider's
 * copy out of a device buffer is over (libfabric's shm reports a tagged send
 * of device memory complete while the peer's cudaMemcpy may still read it;
 * reusing the buffer then corrupted results on 2 H200s). Device chunks below
 * R_DEV are staged through pinned host buffers by the device transport
 * (gpu_tp's direct_min is this threshold), so device memory never travels
 * by the eager path, and small messages skip the handshake and the
 * provider's own device copies. 2-rank allreduce on device buffers, one
 * H200 shared under MPS, libfabric 1.22 shm, medians of two rounds: staged
 * 8 B 33 us, 512 B 36, 4 KiB 41, 32 KiB 51; direct 39, 38, 39, 39. */
#define R_SHM 0
#define R_TCP (128u << 10)
#define R_DEV (4u << 10)
/* Device memory moves at NVLink speed on gdr endpoints: large chunks keep
 * the per-chunk handshakes off the critical path (allreduce busbw on 2
 * H200s, shm with CUDA IPC: 40 GB/s with 512 KiB chunks, 134-160 GB/s with
 * 8 MiB). */
#define GDR_CHUNK (8u << 20)
/* shm moves a large host message with one CMA copy done by the receiver,
 * under its region's lock (libfabric 1.17): there are no bounce buffers to
 * pipeline, and every extra chunk is another send that waits for the peer's
 * lock while that peer copies. 4 MiB chunks against 512 KiB, fc_perf on this
 * 2-core VM, medians: 2 ranks broadcast 16-32 MiB 10-20% faster (allreduce
 * within noise), 4 ranks allreduce and broadcast 15-45% faster at 4-16 MiB. */
#define SHM_CHUNK (4u << 20)
/* ... but between two ranks nothing relays a message, so chunks pipeline
 * nothing: the receiver's own thread does the CMA copy and then the
 * reduction, one after the other, and each extra chunk only adds a message.
 * 2 ranks, whole messages against 4 MiB chunks, 3 interleaved rounds on this
 * VM: broadcast 16-32 MiB 3.3-3.6 GB/s against 2.3-3.0, allreduce 16-32 MiB
 * 2.0-2.6 against 1.7-2.0 (4 ranks: 4 MiB chunks equal or better). */
#define SHM_PAIR_CHUNK (1u << 30)
/* tcp (tcp;ofi_rxm over loopback, 2 ranks, a 2-core VM): 512 KiB chunks against
 * 1 MiB, three interleaved rounds: allreduce 2 MiB 590-625 us against
 * 800-855 us, 4-32 MiB equal or up to 10% faster. */
#define TCP_CHUNK (512u << 10)
/* Where this process has a GPU (so device buffers will be staged through
 * pinned host buffers unless the endpoint takes them directly), chunks are
 * at most 512 KiB whatever the provider: the D2H/H2D copies of one chunk
 * overlap the transfers of others. On 2 H200s, staged allreduce over shm
 * 64-256 MiB: 6.3-7.3 GB/s busbw with 512 KiB chunks, 3.2-4.6 GB/s with
 * shm's 4 MiB. Host buffers pay for it: on a 16-core node with one H200
 * (libfabric 1.17 shm, 3 alternating rounds) the provider's own chunks took
 * 0.36-0.61x the time of 512 KiB ones for a 2-rank broadcast of 1-64 MiB,
 * 0.65-0.87x for a 4-rank allgather of 256 KiB-64 MiB, 0.72x for a 4-rank
 * 64 MiB broadcast; only the 2-rank allreduce from 16 MiB was faster in 512
 * KiB pieces (whole messages 1.2-1.7x). So FC_TUNE_MEMORY=host (a job whose
 * collectives run on host memory) keeps the provider's chunks. The decision
 * is rank 0's, like every chunk. */
#define STAGED_CHUNK (512u << 10)

/* The providers' own protocol step (coll_cost.hs_min, .hs): a message past
 * shm's 4 KiB inject buffers is copied by the receiver (CMA) and
 * acknowledged; past tcp;ofi_rxm's 16 KiB eager buffers it waits for a
 * request-to-send round trip. Forced algorithms on a 2-core VM, 3
 * interleaved rounds, medians: 2-rank allreduce by recursive doubling (one
 * message of the whole vector) shm 4.2 us at 4 KiB, 7.4 at 5 KiB; tcp 25.7
 * us at 16 KiB, 67.9 at 24 KiB, while Rabenseifner's halves stay eager up
 * to 32 KiB (46.8 us) and step at 40 KiB (131). With 2 ranks per CPU the
 * step is about k times as long (coll_algo_cost). shm's step is charged
 * in exchanges only: a receiver that is not sending copies at once (2-rank
 * tree broadcast: 4.4 us at 4 KiB, 3.2 at 8 KiB).
 * tcp's alpha is an eager message's, 15 us, and the rendezvous 25 us more
 * (one alpha fitted to 64 KiB-2 MiB, handshake included, would be 35 us).
 * Chosen by the picks they give against every algorithm forced on a
 * 16-core node (4 and 8 ranks with a CPU each, Debian's libfabric 1.17, 2 KiB-16
 * MiB, 3+3 rounds): the geometric mean of picked/best time over 136 cases
 * per provider is 1.047 without handshakes (shm alpha 2 us) and 1.034 with
 * them; tcp 1.058 with alpha 35 us and no handshake, 1.038 with them. Other
 * providers: not measured, no step modelled. */
#define HS_SHM 4096, 3.3e-6, 0
#define HS_TCP (16 << 10), 25e-6, 25e-6
#define HS_NONE 0, 0, 0

/* The ladder: shm (single node) first, native RDMA providers, then tcp,
 * other emulations, sockets last. The cost model's alpha and beta of shm and
 * tcp are fitted to 2-rank allreduce times on a 2-core VM (shm: CMA
 * messages ~2 us, ~12 GB/s from cache; tcp;ofi_rxm over loopback: ~15 us
 * per eager message, ~40 us past the eager size with the handshake above,
 * ~5 GB/s); the others are conservative defaults. */
static const struct profile profiles[] = {
    {"shm", FC_TIER_SHM, 0, SHM_CHUNK, 4, 16 << 10, R_SHM, 2e-6, 1.0 / 12e9, HS_SHM},
    {"verbs", FC_TIER_RDMA, 100, 512 << 10, 8, 8 << 10, 256 << 10, 3e-6, 1.0 / 10e9, HS_NONE},
    {"efa", FC_TIER_RDMA, 101, 512 << 10, 8, 8 << 10, 256 << 10, 15e-6, 1.0 / 10e9, HS_NONE},
    {"psm3", FC_TIER_RDMA, 102, 512 << 10, 8, 8 << 10, 256 << 10, 3e-6, 1.0 / 10e9, HS_NONE},
    {"cxi", FC_TIER_RDMA, 103, 512 << 10, 8, 8 << 10, 256 << 10, 3e-6, 1.0 / 20e9, HS_NONE},
    {"opx", FC_TIER_RDMA, 104, 512 << 10, 8, 8 << 10, 256 << 10, 3e-6, 1.0 / 10e9, HS_NONE},
    {"psm2", FC_TIER_RDMA, 105, 512 << 10, 8, 8 << 10, 256 << 10, 3e-6, 1.0 / 10e9, HS_NONE},
    {"ucx", FC_TIER_RDMA, 106, 512 << 10, 8, 8 << 10, 256 << 10, 3e-6, 1.0 / 10e9, HS_NONE},
    {"usnic", FC_TIER_RDMA, 107, 512 << 10, 8, 8 << 10, 256 << 10, 5e-6, 1.0 / 5e9, HS_NONE},
    {"tcp", FC_TIER_NET, 200, TCP_CHUNK, 4, 64 << 10, R_TCP, 15e-6, 1.0 / 5e9, HS_TCP},
    {"net", FC_TIER_NET, 250, TCP_CHUNK, 4, 64 << 10, R_TCP, 35e-6, 1.0 / 5e9, HS_NONE},
    {"udp", FC_TIER_NET, 300, 256 << 10, 4, 16 << 10, 0, 50e-6, 1.0 / 0.5e9, HS_NONE},
    {"sockets", FC_TIER_NET, 350, 256 << 10, 4, 16 << 10, 0, 50e-6, 1.0 / 0.8e9, HS_NONE},
};
static const struct profile unknown = {"", FC_TIER_NET, 275, 512 << 10, 4, 16 << 10,
                                       0, 25e-6, 1.0 / 1e9, HS_NONE};

static const struct profile *profile_of(const char *name)
{
    for (size_t i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++) {
        size_t l = strlen(profiles[i].prefix);
        if (strncmp(name, profiles[i].prefix, l) == 0 && (name[l] == '\0' || name[l] == ';'))
            return &profiles[i];
    }
    return &unknown;
}

fc_tier_t prov_tier_of(const char *name)
{
    return profile_of(name)->tier;
}

int prov_auto_rails(const char *name)
{
    /* tcp (and libfabric's "net", its successor): every message is a
     * send/recv system call that copies on the calling core; shm: the
     * receiver's progress copies each message (CMA). 2 ranks on 2 H200s (32
     * cores), 5 interleaved rounds, allreduce busbw 4-256 MiB: staged over
     * tcp 2.0-2.3 GB/s on 1 rail, 3.5-4.1 on 2, 4.4-6.1 on 4; staged over
     * shm 4.7-5.6, 5.8-7.4, 6.1-8.6 (README, Measured). */
    const char *pre = profile_of(name)->prefix;
    return strcmp(pre, "tcp") == 0 || strcmp(pre, "net") == 0 || strcmp(pre, "shm") == 0 ? 4
                                                                                          : 1;
}

uint16_t prov_pref_of(const char *name)
{
    return profile_of(name)->pref;
}

void prov_tuning(const struct prov_ep *p, const cfg_t *cfg, int nranks, size_t *chunk,
                 int *window, size_t *eager_max)
{
    const struct profile *pr = profile_of(p->prov_name);
    if (cfg->chunk_size)
        *chunk = cfg->chunk_size;
    else if (p->hmem)
        *chunk = GDR_CHUNK;
    else if (pr->chunk > STAGED_CHUNK && cfg->tune_memory != CFG_TUNE_MEM_HOST &&
             gpu_available(NULL))
        *chunk = STAGED_CHUNK;
    else if (nranks == 2 && pr->tier == FC_TIER_SHM)
        *chunk = SHM_PAIR_CHUNK;
    else
        *chunk = pr->chunk;
    *window = cfg->inflight > 0 ? cfg->inflight : pr->window;
    *eager_max = cfg->eager_max ? cfg->eager_max : pr->eager_max;
}

size_t prov_rndv_min(const struct prov_ep *p, const cfg_t *cfg)
{
    if (cfg->proto == CFG_PROTO_EAGER)
        return 0;
    if (cfg->proto == CFG_PROTO_RNDV)
        return 1;
    if (cfg->rndv_min)
        return cfg->rndv_min;
    /* device memory on the gdr tier: the provider's RMA (CUDA IPC, GPUDirect
     * RDMA) moves it without staging in its own bounce buffers */
    return p->hmem ? R_DEV : profile_of(p->prov_name)->rndv_min;
}

void prov_model_of(const char *name, int nnodes, struct prov_model *m)
{
    const struct profile *pr = profile_of(name);
    m->alpha = pr->alpha;
    m->beta = pr->beta;
    /* a local reduction pass (dst = a op b, float sum) on one core, per
     * byte of one input: 13 GB/s from memory, 25-40 GB/s from cache on our
     * 2-core VM; a step's reduction mostly finds its operands in cache.
     * Fitted with alpha and beta of shm and tcp to 2-rank allreduce times
     * of rd (alpha + n(beta + gamma)) and ring (2 alpha + n beta + n gamma
     * / 2), 64 KiB-2 MiB: gamma 0.03-0.05 ns/byte */
    m->gamma = 1.0 / 20.0e9;
    m->hs_min = (double)pr->hs_min;
    m->hs = pr->hs;
    m->hs_oneway = pr->hs_oneway;
    m->chunk = pr->chunk;
    m->window = pr->window;
    (void)nnodes;
}
