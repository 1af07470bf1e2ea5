/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Algorithms: each file in coll/ builds the schedule of one algorithm of
 * one collective, and describes itself with a struct coll_algo at its end.
 * No fi_* calls, no getenv, no globals: a build() is a pure function of its
 * arguments (that is what lets the unit tests run every algorithm at 1024
 * ranks in one process).
 *
 * Regions an algorithm sees (the engine binds them to the user's buffers):
 *   collective      R_SEND (bytes)             R_RECV (bytes)
 *   allreduce       count*es                   count*es
 *   bcast           count*es (root only)       count*es
 *   reduce          count*es                   count*es (root only; NULL elsewhere)
 *   allgather       count*es                   n*count*es
 *   reduce_scatter  n*count*es                 count*es
 *   alltoall        n*count*es                 n*count*es
 *   barrier         -                          -
 *   gather          count*es                   n*count*es (root only)
 *   scatter         n*count*es (root only)     count*es
 *   allgatherv      count*es (= rcounts[rank]) extent of rdispls/rcounts
 *   alltoallv       extent of sdispls/scounts  extent of rdispls/rcounts
 * (the extent: the end of the furthest nonzero block, coll_v_extent).
 * In place (a->in_place): allreduce/bcast/alltoall: R_SEND == R_RECV;
 * allgather: R_SEND is block `rank` of R_RECV; reduce_scatter: R_RECV is
 * block `rank` of R_SEND; reduce: R_SEND == R_RECV at the root; gather
 * (scatter): at the root, R_SEND (R_RECV) is block `root` of the other;
 * elsewhere in_place means nothing; allgatherv: R_SEND is block `rank` of
 * R_RECV (at rdispls[rank]); alltoallv has no in-place form.
 */
#ifndef FC_COLL_H
#define FC_COLL_H

#include <stddef.h>

#include "fabcoll.h"
#include "schedule.h"

enum coll_kind {
    COLL_ALLREDUCE,
    COLL_BCAST,
    COLL_REDUCE,
    COLL_ALLGATHER,
    COLL_REDUCE_SCATTER,
    COLL_ALLTOALL,
    COLL_BARRIER,
    COLL_GATHER,
    COLL_SCATTER,
    COLL_ALLGATHERV,
    COLL_ALLTOALLV,
    COLL_NKINDS
};

/* Kinds whose count is one rank's block of n (the call moves n blocks). */
static inline int coll_blocked(enum coll_kind k)
{
    return k == COLL_ALLGATHER || k == COLL_REDUCE_SCATTER || k == COLL_ALLTOALL ||
           k == COLL_GATHER || k == COLL_SCATTER;
}

struct coll_args {
    enum coll_kind kind;
    int rank, nranks, root;
    size_t count; /* see the table above */
    fc_datatype_t dt;
    fc_op_t op;
    size_t esize;
    int in_place;
    /* The node of every rank (0 .. nnodes - 1), for node-aware algorithms;
     * NULL: not known (such algorithms refuse the call). */
    const int *node;
    int nnodes;
    /* The v-collectives' counts and displacements, in elements, one per
     * rank (NULL elsewhere). allgatherv: rcounts and rdispls, the same
     * counts on every rank (count is rcounts[rank]); alltoallv: all four,
     * scounts[j] to rank j and rcounts[j] from it (count is the sum of
     * scounts, for messages). Read only while the schedule is built. */
    const size_t *scounts, *sdispls, *rcounts, *rdispls;
    /* A pre-scaled sum (fc_op_create_premulsum; op is then FC_SUM): this
     * rank's scalar, esize bytes of dt, by which its input is multiplied
     * before the sum; NULL: none. The builders ignore it (the input is
     * scaled before their steps run: sched_premul_input). */
    const void *premul;
};

/* Kinds that reduce (FC_REPRODUCIBLE's business). */
static inline int coll_kind_reduces(enum coll_kind k)
{
    return k == COLL_ALLREDUCE || k == COLL_REDUCE || k == COLL_REDUCE_SCATTER;
}

/* The v-collectives: per-rank counts, never cached, signed per peer. */
static inline int coll_is_v(enum coll_kind k)
{
    return k == COLL_ALLGATHERV || k == COLL_ALLTOALLV;
}

/* The end, in elements, of the furthest nonzero block of counts/displs. */
static inline size_t coll_v_extent(const size_t *counts, const size_t *displs, int n)
{
    size_t e = 0;
    for (int i = 0; counts && i < n; i++)
        if (counts[i] && displs[i] + counts[i] > e)
            e = displs[i] + counts[i];
    return e;
}

/* The sum of n counts. */
static inline size_t coll_v_sum(const size_t *counts, int n)
{
    size_t t = 0;
    for (int i = 0; counts && i < n; i++)
        t += counts[i];
    return t;
}

/* Network parameters of the alpha-beta-gamma cost model, in seconds. */
struct coll_cost {
    double alpha; /* per message (latency) */
    double beta;  /* per byte on the wire */
    double gamma; /* per byte reduced (local memory pass) */
    /* The same between ranks of one node, where that path differs (per-peer
     * paths: shm inside, the network across); 0: alpha and beta. */
    double alpha_node, beta_node;
    double chunk; /* the engine's pipeline chunk, bytes (0: steps are not cut) */
    /* Ranks per CPU on the node where they are most crowded (ranks over the
     * CPUs they may run on; 0 or up to 1: every rank has a CPU). Above 1,
     * a step in which more ranks copy or reduce at once than there are
     * CPUs runs slower by that ratio (coll_share), and in trees and chains
     * (coll_algo.shares), where a rank waits for one particular peer that
     * may be waiting for its CPU, each step costs a handoff more.
     * Algorithms whose ranks all work in every step (ring, recursive
     * doubling ...) just run k times slower, in the same order; trees,
     * where some ranks idle while others work, gain on them. Applied by
     * coll_algo_cost. */
    double oversub;
    double handoff; /* seconds per tree step when oversub > 1 */
    /* Messages of more than hs_min bytes take the provider's own handshake
     * (libfabric 1.17's shm: past its 4 KiB inject buffers the receiver
     * copies with CMA and acknowledges; tcp;ofi_rxm: past its 16 KiB eager
     * buffers a request-to-send round trip): hs seconds more each in a
     * step where ranks exchange (each sends and receives: rings, recursive
     * doubling and halving, pairwise), hs_oneway in one where a rank only
     * receives (trees, chains, scatter and gather rounds). shm's costs
     * only in exchanges: a receiver that is not sending copies at once. 0:
     * no such step. Applied per message by coll_hs and coll_hs1. */
    double hs_min;
    double hs, hs_oneway;
};

/* The provider's handshake for one message of `bytes` in an exchange (0
 * at or below hs_min) ... */
static inline double coll_hs(const struct coll_cost *c, double bytes)
{
    return c->hs_min > 0 && bytes > c->hs_min ? c->hs : 0;
}

/* ... and in a one-way step */
static inline double coll_hs1(const struct coll_cost *c, double bytes)
{
    return c->hs_min > 0 && bytes > c->hs_min ? c->hs_oneway : 0;
}

/* How much slower a step runs in which `active` of the n ranks copy or
 * reduce at once, when ranks outnumber CPUs (1: not at all). */
static inline double coll_share(const struct coll_cost *c, int n, double active)
{
    double s = c->oversub * active / (n > 0 ? n : 1);
    return s > 1 ? s : 1;
}

struct coll_algo {
    const char *name;
    enum coll_kind kind;
    /* Every function is filled in: no caller tests one for NULL. */
    /* Nonzero when the algorithm can run these arguments (coll_any: all). */
    int (*check)(const struct coll_args *a);
    fc_result_t (*build)(struct sched *s, const struct coll_args *a);
    /* Predicted time (s) for these arguments, for the tuner. */
    double (*cost)(const struct coll_args *a, const struct coll_cost *c);
    /* Once this algorithm is the cheapest so far, a later one in the table
     * must predict below (1 - tie_margin) times its cost to displace it
     * (0: any lower prediction does). */
    double tie_margin;
    /* Nonzero when cost() applies coll_share to its steps itself (trees,
     * chains); otherwise every step counts all ranks as working. */
    int shares;
    /* Nonzero when every element is reduced in rank order, ((v0 op v1) op
     * v2) ..., one rounding per step, whatever the chunking: the same bits
     * as every other such algorithm (FC_REPRODUCIBLE picks only these). */
    int rank_order;
    /* Nonzero: the tuner considers it only under FC_REPRODUCIBLE (FC_ALGO
     * and FC_TUNE_FILE may still name it). */
    int reproducible_only;
};

/* Builds al's schedule of the call a: al->build, except that a pre-scaled
 * sum (a->premul), which no builder sees, is built out of place and then
 * its input scaled (sched_premul_input). */
fc_result_t coll_build(const struct coll_algo *al, struct sched *s, const struct coll_args *a);

/* Ranks grouped by node (coll/nodes.c): node x's ranks, in rank order, are
 * ranks[first[x] .. first[x + 1]); lmax: the most on one node. */
struct coll_nodes {
    int *first, *ranks;
    int lmax;
};
int coll_nodes_make(const struct coll_args *a, struct coll_nodes *N); /* 0, or -1: no memory */
void coll_nodes_free(struct coll_nodes *N);
/* The trees of the node-aware broadcast and reduce: lead[0 .. nnodes), the
 * leaders (the root on its node, the lowest rank elsewhere; the root's node
 * first, then by node), and local[0 .. *L), this rank's node (its leader
 * first); *me_lead and *me_local: this rank's places (-1: not a leader). */
void coll_nodes_trees(const struct coll_args *a, const struct coll_nodes *N, int *lead,
                      int *me_lead, int *local, int *me_local, int *L);
/* The node-aware algorithms' check: several nodes, one with several ranks
 * (on one node, or with a rank per node, the flat algorithms do the same
 * with fewer messages). */
int coll_nodes_apply(const struct coll_args *a);
/* The alpha and beta of a message between ranks of one node (the
 * network's where c has none of its own). */
static inline void coll_node_link(const struct coll_cost *c, double *alpha, double *beta)
{
    *alpha = c->alpha_node > 0 ? c->alpha_node : c->alpha;
    *beta = c->beta_node > 0 ? c->beta_node : c->beta;
}
/* The check of an algorithm that runs any arguments. */
int coll_any(const struct coll_args *a);
const char *coll_kind_name(enum coll_kind k); /* "allreduce", "bcast", ... */
/* Bytes of R_SEND (recv 0) or R_RECV (recv 1) this rank's call touches,
 * by the table above (0: the buffer is not used on this rank). */
size_t coll_region_bytes(const struct coll_args *a, int recv);
int coll_kind_from_name(const char *name, size_t len);

/* Every algorithm, in table order; NULL-terminated. */
extern const struct coll_algo *const coll_algos[];
const struct coll_algo *coll_algo_find(enum coll_kind k, const char *name, size_t len);

/* ---- peer and block arithmetic shared by the algorithms ------------------ */
/* count elements split into n blocks: the first count%n blocks get one more. */
static inline size_t blk_count(size_t count, int n, int i)
{
    size_t q = count / (size_t)n, r = count % (size_t)n;
    return q + ((size_t)i < r ? 1 : 0);
}
static inline size_t blk_first(size_t count, int n, int i)
{
    size_t q = count / (size_t)n, r = count % (size_t)n;
    return q * (size_t)i + ((size_t)i < r ? (size_t)i : r);
}
static inline int mod(int a, int n)
{
    int m = a % n;
    return m < 0 ? m + n : m;
}
static inline int floor_pow2(int n)
{
    int p = 1;
    while (p * 2 <= n)
        p *= 2;
    return p;
}
static inline int ilog2(int n)
{
    int l = 0;
    while ((1 << (l + 1)) <= n)
        l++;
    return l;
}
static inline int ceil_log2(int n)
{
    int l = 0;
    while ((1 << l) < n)
        l++;
    return l;
}

/* The non-power-of-two fold used by the doubling/halving algorithms: with
 * n = p + rem (p a power of two), ranks below 2*rem pair up and the odd one
 * of each pair stays in as virtual rank v = r/2; ranks from 2*rem on are
 * v = r - rem. fold_real is the real rank of virtual rank v; fold_start the
 * first real rank (and block) v stands for. */
static inline int fold_real(int v, int rem)
{
    return v < rem ? 2 * v + 1 : v + rem;
}
static inline int fold_start(int v, int rem)
{
    return v < rem ? 2 * v : v + rem;
}

/* Ranks that receive in the binomial tree's round of distance mask (the
 * ranks v with v % (2 mask) == 0 send to v + mask when that is below n;
 * broadcast, scatter, reduce and gather trees alike). */
static inline int binomial_receivers(int n, int mask)
{
    return mask < n ? (n - mask - 1) / (2 * mask) + 1 : 0;
}

/* The handshakes of a ring of n - 1 exchanges of bytes / n each plus a
 * binomial scatter or gather moving bytes * mask / n one way in round
 * mask (scatter + allgather broadcast, reduce-scatter + gather reduce). */
static inline double coll_hs_ring_tree(const struct coll_cost *c, int n, double bytes)
{
    double t = (n - 1) * coll_hs(c, bytes / n);
    for (int mask = 1; mask < n; mask *= 2)
        t += coll_hs1(c, bytes * mask / n);
    return t;
}

/* The handshakes of Bruck's allgather rounds among n ranks, blocks of bc
 * bytes: the round at distance 2^k sends min(2^k, n - 2^k) blocks in one
 * message (allgather_bruck, and allreduce_gather's exchange). */
static inline double coll_hs_bruck(const struct coll_cost *c, int n, double bc)
{
    double t = 0;
    for (int k = 1; k < n; k *= 2)
        t += coll_hs(c, (k < n - k ? k : n - k) * bc);
    return t;
}

/* Binomial subtree of virtual rank v among n (root 0): v .. sub_end - 1. */
static inline int binomial_sub_end(int v, int n)
{
    if (v == 0)
        return n;
    int e = v + (v & -v);
    return e < n ? e : n;
}

#endif /* FC_COLL_H */
