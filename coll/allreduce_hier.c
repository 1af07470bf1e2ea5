/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * AllReduce across nodes: reduce-scatter inside each node, an allreduce of
 * each slice across the nodes among the ranks that hold it, allgather
 * inside each node.
 *
 * Idea (Open MPI's HAN, NCCL's trees and rings over nodes): the bytes that
 * cross the network are the slices, not the vectors. Every rank of a node
 * holds some slices, so every rank (and every NIC of the node) carries
 * part of the network traffic, and none of the node's own bytes go on the
 * network when ranks of a node talk over shared memory (paths.c).
 *
 * The vector is cut into Lmax slices, Lmax the number of ranks on the
 * fullest node; on a node of L ranks the slice s belongs to its
 * (s mod L)-th rank, so uneven nodes (3, 2, 4, 1 ranks) work and a rank
 * alone on its node holds every slice.
 *   1. Inside the node: every rank sends each slice it does not hold to
 *      the rank that does, which reduces them, its own first, then in rank
 *      order.
 *   2. Across nodes, for each slice, among its holders (one per node, in
 *      node order): a ring (reduce-scatter, then allgather of the slice's
 *      m blocks) where there are at most 3 nodes or the blocks are large,
 *      else a binomial tree (reduce to the first node's holder, broadcast
 *      back). Either way each block is reduced once, on one holder, and
 *      copied to the others, so every holder ends with the same bytes.
 *   3. Inside the node: the holder sends the result (divided by n for
 *      FC_AVG) to the other ranks of its node.
 * Steps 1 and 3 are direct (L - 1 messages per slice): a node's ranks are
 * few. Where step 2 is a ring and its blocks are large, steps 1 and 3 go
 * block by block too, with every dependency chunk by chunk, so the three
 * steps overlap: a block's first chunks cross the network while the node
 * still reduces its last ones, and a block the ring has finished goes back
 * to the node while the ring works on the next (a link shaped to its
 * rate is then busy for the whole call, not a third of it). Step 2 sends 2 (m - 1) / m of a slice per holder (ring) or
 * log2(m) slices (tree), not the (m - 1) slices of a direct exchange,
 * so the hierarchy still pays at hundreds of nodes.
 *
 * Needs the node of every rank (coll_args.node).
 */
#include <stdlib.h>

#include "coll.h"
#include "log.h"

static int holder(const struct coll_nodes *N, int x, int slice)
{
    int L = N->first[x + 1] - N->first[x];
    return N->ranks[N->first[x] + slice % L];
}

/* Step 2's shape for a slice of len bytes across m nodes (build and cost
 * agree on it): a ring at few nodes or large blocks, else a tree. */
static int cross_ring(int m, size_t len)
{
    return m <= 3 || len >= (size_t)m * 8192;
}

/* Step 2 as a ring among the slice's holders H[0 .. m-1] (this rank is
 * H[k]): the slice at byte off of the receive buffer, cnt elements, cut in
 * the ring's m blocks. Block b holds this node's partial once step
 * after[b] is done: chunk by chunk where `chunked` (after[b] covers block b
 * alone, from its first byte), else whole. Tags tag .. tag + 2(m-1). Sets
 * fin[b], the step after which block b holds the result, and rd[b], the
 * allgather's send that reads it (-1: none); both cover block b alone. */
static void cross_by_ring(struct sched *s, const struct coll_args *a, const int *H, int m,
                          int k, size_t off, size_t cnt, uint32_t tag, const int *after,
                          int chunked, int *fin, int *rd)
{
    const size_t es = a->esize;
    const int left = H[mod(k - 1, m)], right = H[mod(k + 1, m)];
    const size_t maxblk = blk_count(cnt, m, 0) * es;
    const size_t slot[2] = {sched_scratch(s, maxblk), sched_scratch(s, maxblk)};
    for (int b = 0; b < m; b++)
        rd[b] = -1;
    /* the reduce-scatter's sends: the allgather's receives wait for them */
    int steps[64], *rs_send = steps;
    if (m - 1 > 64 && !(rs_send = malloc((size_t)(m - 1) * sizeof(int)))) {
        s->build_err = FC_ERR(FC_ERR_NO_MEMORY, "allreduce hier: out of memory");
        return;
    }
    int prev_red = -1, prev2_red = -1;
    for (int st = 0; st < m - 1; st++) { /* reduce-scatter */
        int sb = mod(k - st, m), rb = mod(k - st - 1, m);
        size_t so = off + blk_first(cnt, m, sb) * es, sl = blk_count(cnt, m, sb) * es;
        size_t ro = off + blk_first(cnt, m, rb) * es, rl = blk_count(cnt, m, rb) * es;
        int snd = sched_send(s, right, tag + (uint32_t)st, sbuf(R_RECV, so), sl);
        if (st == 0)
            sched_dep(s, snd, after[sb], chunked);
        else
            sched_dep(s, snd, prev_red, 1);
        int rcv = sched_recv(s, left, tag + (uint32_t)st, sbuf(R_SCRATCH, slot[st % 2]), rl);
        sched_dep(s, rcv, prev2_red, 1);
        int red = sched_reduce(s, sbuf(R_RECV, ro), sbuf(R_RECV, ro),
                               sbuf(R_SCRATCH, slot[st % 2]), rl);
        sched_dep(s, red, rcv, 1);
        sched_dep(s, red, after[rb], chunked);
        rs_send[st] = snd;
        prev2_red = prev_red;
        prev_red = red;
    }
    /* the last reduction finished block k + 1 here; the allgather brings
     * the others, k first, and sends on each one but the last it gets */
    int prev = fin[mod(k + 1, m)] = prev_red;
    for (int t = 0; t < m - 1; t++) { /* allgather */
        int sb = mod(k + 1 - t, m), rb = mod(k - t, m);
        size_t so = off + blk_first(cnt, m, sb) * es, sl = blk_count(cnt, m, sb) * es;
        size_t ro = off + blk_first(cnt, m, rb) * es, rl = blk_count(cnt, m, rb) * es;
        uint32_t tg = tag + (uint32_t)(m - 1 + t);
        int snd = sched_send(s, right, tg, sbuf(R_RECV, so), sl);
        sched_dep(s, snd, prev, 1);
        rd[sb] = snd;
        int rcv = sched_recv(s, left, tg, sbuf(R_RECV, ro), rl);
        sched_dep(s, rcv, rs_send[t], 1); /* that block went out in step t */
        fin[rb] = prev = rcv;
    }
    if (rs_send != steps)
        free(rs_send);
}

/* Step 2 as a binomial tree among the holders: reduce to H[0] (each
 * parent adds its children's partials in increasing distance), then
 * broadcast from H[0]. Tags tag (reduce) and tag + 1 (broadcast). */
static int cross_by_tree(struct sched *s, const int *H, int m,
                         int k, size_t off, size_t len, uint32_t tag, int after)
{
    const struct sched_buf mine = sbuf(R_RECV, off);
    int acc = after, up = -1, mask = 1;
    for (; mask < m; mask <<= 1) {
        if (k & mask) { /* to the parent, then done reducing */
            up = sched_send(s, H[k - mask], tag, mine, len);
            sched_dep(s, up, acc, 1);
            break;
        }
        if (k + mask < m) {
            size_t tmp = sched_scratch(s, len);
            int rcv = sched_recv(s, H[k + mask], tag, sbuf(R_SCRATCH, tmp), len);
            int red = sched_reduce(s, mine, mine, sbuf(R_SCRATCH, tmp), len);
            sched_dep(s, red, rcv, 1);
            sched_dep(s, red, acc, 1);
            acc = red;
        }
    }
    /* broadcast: from the parent (the mask this rank sent at), then to the
     * children below that mask, farthest first */
    if (k != 0) {
        int rcv = sched_recv(s, H[k - mask], tag + 1, mine, len);
        sched_dep(s, rcv, up, 0);
        acc = rcv;
    }
    int sends[32], ns = 0;
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (k + mask < m) {
            int snd = sched_send(s, H[k + mask], tag + 1, mine, len);
            sched_dep(s, snd, acc, 1);
            sends[ns++] = snd;
        }
    /* done once the children have been sent the result (it may be scaled
     * next) */
    int done = sched_nop(s);
    sched_dep(s, done, acc, 0);
    for (int i = 0; i < ns; i++)
        sched_dep(s, done, sends[i], 0);
    return done;
}

/* The groups a slice of len bytes across m nodes goes by inside the node
 * (1: whole). Where the ring crosses and its blocks are large, steps 1
 * and 3 go in groups of the ring's blocks, each its own message inside the
 * node, so that a group crosses the network while the node still reduces
 * the next and a group the ring has finished goes back to the node's
 * ranks while the ring runs on: at most 8 groups (more would multiply the
 * node's messages, not the overlap), one block each up to 8 nodes. Below
 * 64 KiB a block, the messages would only multiply. */
static int groups(int m, size_t len)
{
    if (!cross_ring(m, len) || len / (size_t)m < 65536)
        return 1;
    return m < 8 ? m : 8;
}

/* The i-th group a slice's holder on node k needs (of nb groups of the
 * ring's m blocks): the ring's reduce-scatter reads block k first, then
 * k - 1, k - 2 ..., so the group of block k, then down from it. Steps 1's
 * groups go in this order, one after the other (all at once, they would
 * share the node's bandwidth and all end late). */
static int group_at(int m, int nb, int k, int i)
{
    int gk = 0;
    while (gk + 1 < nb && (long)(gk + 1) * m / nb <= k)
        gk++;
    return mod(gk - i, nb);
}

/* Group g's first byte in a slice of cnt elements (len bytes) in nb groups
 * of the ring's m blocks; g = nb: the end. */
static size_t group_off(size_t cnt, size_t es, int m, int nb, int g)
{
    if (nb == 1)
        return g ? cnt * es : 0;
    return blk_first(cnt, m, (int)((long)g * m / nb)) * es;
}

static fc_result_t build(struct sched *s, const struct coll_args *a)
{
    const int r = a->rank, m = a->nnodes, k = a->node[r];
    const int src = a->in_place ? R_RECV : R_SEND;
    const size_t es = a->esize;
    struct coll_nodes N;
    /* a slice's holders in node order; per group: the node's partial, the
     * result, the ring's reader of it; per ring block: its group's partial,
     * its result, its reader */
    int *H = malloc(7 * (size_t)m * sizeof(int));
    if (!H || coll_nodes_make(a, &N) != 0) {
        free(H);
        return FC_ERR(FC_ERR_NO_MEMORY, "allreduce hier: out of memory for %d ranks", a->nranks);
    }
    int *part = H + m, *gfin = part + m, *grd = gfin + m, *after = grd + m, *fin = after + m,
        *rd = fin + m;
    const int L = N.first[k + 1] - N.first[k], lmax = N.lmax;
    /* tags: steps 1 and 3 one per group (at most m per slice), step 2 W
     * per slice */
    const uint32_t W = 2u * (uint32_t)(m - 1), T1 = 0, T2 = (uint32_t)lmax * (uint32_t)m,
                   T3 = T2 + (uint32_t)lmax * W;
    for (int sl = 0; sl < lmax; sl++) {
        const size_t off = a->count * (size_t)sl / (size_t)lmax * es;
        const size_t len = a->count * (size_t)(sl + 1) / (size_t)lmax * es - off;
        if (!len)
            continue;
        const size_t cnt = len / es;
        const int h = holder(&N, k, sl), nb = groups(m, len);
        const uint32_t t1 = T1 + (uint32_t)(sl * m), t3 = T3 + (uint32_t)(sl * m);
        if (h != r) {
            /* 1: to its holder, group after group in the order it needs
             * them; 3: the result back (after the send, in place) */
            for (int i = 0, prev = -1; i < nb; i++) {
                const int g = group_at(m, nb, k, i);
                const size_t go = off + group_off(cnt, es, m, nb, g),
                             gl = off + group_off(cnt, es, m, nb, g + 1) - go;
                if (!gl)
                    continue;
                int snd = sched_send(s, h, t1 + (uint32_t)g, sbuf(src, go), gl);
                sched_dep(s, snd, prev, 0);
                int rcv = sched_recv(s, h, t3 + (uint32_t)g, sbuf(R_RECV, go), gl);
                sched_dep(s, rcv, snd, 1);
                prev = snd;
            }
            continue;
        }
        /* 1: my slice first, then the node's other ranks' in rank order,
         * group by group in the order the ring needs them, each group's
         * receives once the one before is in */
        const size_t tmp = L > 1 ? sched_scratch(s, (size_t)(L - 1) * len) : 0;
        for (int i = 0, prev = -1; i < nb; i++) {
            const int g = group_at(m, nb, k, i);
            const size_t go = group_off(cnt, es, m, nb, g),
                         gl = group_off(cnt, es, m, nb, g + 1) - go;
            const struct sched_buf mine = sbuf(R_RECV, off + go);
            int acc = -1;
            if (gl && !a->in_place)
                acc = sched_copy(s, mine, sbuf(src, off + go), gl);
            for (int i = 0, slot = 0; gl && i < L; i++) {
                int q = N.ranks[N.first[k] + i];
                if (q == r)
                    continue;
                struct sched_buf t = sbuf(R_SCRATCH, tmp + (size_t)slot++ * len + go);
                int rcv = sched_recv(s, q, t1 + (uint32_t)g, t, gl);
                sched_dep(s, rcv, prev, 0);
                int red = sched_reduce(s, mine, mine, t, gl);
                sched_dep(s, red, rcv, 1);
                sched_dep(s, red, acc, 1);
                acc = red;
            }
            part[g] = gfin[g] = acc;
            grd[g] = -1;
            if (acc >= 0)
                prev = acc;
        }
        /* 2: across the nodes, among the slice's holders */
        if (m > 1) {
            for (int x = 0; x < m; x++)
                H[x] = holder(&N, x, sl);
            const uint32_t tag = T2 + (uint32_t)sl * W;
            if (cross_ring(m, len)) {
                for (int g = 0; g < nb; g++)
                    for (int b = (int)((long)g * m / nb); b < (int)((long)(g + 1) * m / nb); b++)
                        after[b] = part[g];
                /* a group of one block lines up with it chunk by chunk */
                cross_by_ring(s, a, H, m, k, off, cnt, tag, after, nb == m, fin, rd);
                for (int g = 0; nb < m && g < nb; g++) {
                    /* a group of several blocks (or the slice whole) is
                     * done once each block is in and has been sent on */
                    int done = sched_nop(s);
                    for (int b = (int)((long)g * m / nb); b < (int)((long)(g + 1) * m / nb);
                         b++) {
                        sched_dep(s, done, fin[b], 0);
                        sched_dep(s, done, rd[b], 0);
                    }
                    gfin[g] = done;
                }
                for (int g = 0; nb == m && g < nb; g++) {
                    gfin[g] = fin[g];
                    grd[g] = rd[g];
                }
            } else {
                gfin[0] = cross_by_tree(s, H, m, k, off, len, tag, part[0]);
            }
        }
        for (int g = 0; g < nb; g++) {
            const size_t go = off + group_off(cnt, es, m, nb, g),
                         gl = off + group_off(cnt, es, m, nb, g + 1) - go;
            if (!gl)
                continue;
            const struct sched_buf mine = sbuf(R_RECV, go);
            int acc = gfin[g];
            if (a->op == FC_AVG) { /* once the ring's send has read the sum */
                int sc = sched_scale(s, mine, gl);
                sched_dep(s, sc, acc, 1);
                sched_dep(s, sc, grd[g], 1);
                acc = sc;
            }
            /* 3: the result to the node's other ranks */
            for (int i = 0; i < L; i++) {
                int q = N.ranks[N.first[k] + i];
                if (q == r)
                    continue;
                int snd = sched_send(s, q, t3 + (uint32_t)g, mine, gl);
                sched_dep(s, snd, acc, 1);
            }
        }
    }
    coll_nodes_free(&N);
    free(H);
    return s->build_err;
}

static int check(const struct coll_args *a)
{
    if (!coll_nodes_apply(a))
        return 0;
    /* tags: lmax slices times 2 m + 2 (m - 1), below 4 nranks^2: counted
     * only where that could exceed the range (the tuner asks at every
     * call) */
    if (4ull * (unsigned)a->nranks * (unsigned)a->nranks <= TAG_STEP_MAX)
        return 1;
    struct coll_nodes N;
    if (coll_nodes_make(a, &N) != 0)
        return 0;
    int ok = 4ull * (unsigned)N.lmax * (unsigned)a->nnodes <= TAG_STEP_MAX;
    coll_nodes_free(&N);
    return ok;
}

static double cost(const struct coll_args *a, const struct coll_cost *c)
{
    if (!a->node || a->nranks == 1)
        return 1e30;
    const int m = a->nnodes;
    const double L = (double)a->nranks / m; /* ranks per node, on average */
    double an, bn;
    coll_node_link(c, &an, &bn);
    const double bytes = (double)a->count * (double)a->esize, share = bytes / L;
    /* 1 and 3: (L - 1) messages of a slice each way inside the node */
    double t = 2 * ((L - 1) * an + (L - 1) / L * bytes * bn) + (L - 1) / L * bytes * c->gamma;
    /* 2: a rank's share across the nodes, by ring or tree */
    double x = 0;
    if (m > 1) {
        if (cross_ring(m, (size_t)share))
            x = 2.0 * (m - 1) * (c->alpha + coll_hs(c, share / m)) +
                2.0 * (m - 1) / m * share * c->beta + (double)(m - 1) / m * share * c->gamma;
        else
            x = 2.0 * ceil_log2(m) * (c->alpha + coll_hs(c, share) + share * c->beta) +
                ceil_log2(m) * share * c->gamma;
    }
    /* by blocks the node's steps and the ring overlap: the longer of the
     * two, and the shorter one's first and last block */
    if (m > 1 && groups(m, (size_t)share) > 1)
        return (t > x ? t : x) + (t > x ? x : t) / m;
    return t + x;
}

const struct coll_algo coll_allreduce_hier = {
    .name = "hier",
    .kind = COLL_ALLREDUCE,
    .check = check,
    .build = build,
    .cost = cost,
};
