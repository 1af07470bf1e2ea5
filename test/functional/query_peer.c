/* SPDX-License-Identifier: BSD-3-Clause */
/* fc_comm_query_peer: the path to each peer. Every rank learns the others'
 * nodes (FC_NODE, else the host name) by an allgather. With an argument
 * "paths" (a job of several nodes over shm and tcp), the other ranks of its
 * node must be reached over shm and the rest over fc_comm_query's provider;
 * without it, every peer's path must be fc_comm_query's. Either way the
 * other attributes are fc_comm_query's, a rank outside the communicator is
 * an invalid argument, and a sub-communicator (split by node parity) maps
 * its ranks to the same paths. */
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static uint64_t node_hash(void)
{
    char host[256] = "";
    const char *n = getenv("FC_NODE");
    if (!n || !*n) {
        gethostname(host, sizeof(host) - 1);
        n = host;
    }
    uint64_t h = 1469598103934665603ull;
    for (const char *p = n; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

/* The number of distinct nodes among the ranks before rank r's node first
 * appears: the node's number in order of its first rank. */
static int node_ordinal(const uint64_t *node, int r)
{
    int f = 0, k = 0;
    while (node[f] != node[r])
        f++;
    for (int q = 0; q < f; q++) {
        int seen = 0;
        for (int s = 0; s < q; s++)
            seen |= node[s] == node[q];
        k += !seen;
    }
    return k;
}

/* Checks every peer of comm; world[r]: comm rank r's rank in the job. */
static void check_peers(struct ft *t, fc_comm_t comm, const uint64_t *node, const int *world,
                        int me_world, int paths)
{
    fc_comm_attr_t all, p;
    FT_OK(t, fc_comm_query(comm, &all));
    const int n = fc_comm_size(comm), me = fc_comm_rank(comm);
    for (int r = 0; r < n; r++) {
        FT_OK(t, fc_comm_query_peer(comm, r, &p));
        const int same_node = r != me && node[world[r]] == node[me_world];
        const char *want = paths && same_node ? "shm" : all.provider;
        FT_CHECK(t, strcmp(p.provider, want) == 0, "rank %d of %d: path to rank %d: %s, not %s",
                 me, n, r, p.provider, want);
        FT_CHECK(t, p.nnodes == all.nnodes && p.local_rank == all.local_rank &&
                        p.local_size == all.local_size,
                 "rank %d: the node attributes of peer %d's path differ from fc_comm_query's",
                 me, r);
        if (!(paths && same_node))
            FT_CHECK(t, !strcmp(p.fabric, all.fabric) && !strcmp(p.domain, all.domain) &&
                            p.tier == all.tier && p.hmem == all.hmem && p.nrails == all.nrails,
                     "rank %d: the path to peer %d is not fc_comm_query's", me, r);
        else
            FT_CHECK(t, p.tier == FC_TIER_SHM || p.tier == FC_TIER_GDR,
                     "rank %d: the path to peer %d over shm has tier %d", me, r, (int)p.tier);
    }
    FT_CHECK(t, fc_comm_query_peer(comm, n, &p) == FC_ERR_INVALID_ARGUMENT,
             "peer %d (one past the last rank) accepted", n);
    FT_CHECK(t, fc_comm_query_peer(comm, -1, &p) == FC_ERR_INVALID_ARGUMENT,
             "peer -1 accepted");
    FT_CHECK(t, fc_comm_query_peer(comm, 0, NULL) == FC_ERR_INVALID_ARGUMENT,
             "a NULL attr accepted");
}

int main(int argc, char **argv)
{
    struct ft t;
    ft_init(&t, "query_peer");
    const int paths = argc > 1 && !strcmp(argv[1], "paths");
    uint64_t mine = node_hash();
    uint64_t *node = malloc(sizeof(*node) * (size_t)t.size);
    int *world = malloc(sizeof(*world) * (size_t)t.size);
    FT_OK(&t, fc_allgather(&mine, node, 1, FC_UINT64, t.comm));
    for (int r = 0; r < t.size; r++)
        world[r] = r;
    check_peers(&t, t.comm, node, world, t.rank, paths);

    /* the ranks of even and of odd nodes (numbered in order of their first
     * rank), each in a communicator of their own: its ranks keep their paths */
    const int color = node_ordinal(node, t.rank) % 2;
    fc_comm_t sub = NULL;
    FT_OK(&t, fc_comm_split(t.comm, color, t.rank, &sub));
    if (sub) {
        int m = 0;
        for (int r = 0; r < t.size; r++)
            if (node_ordinal(node, r) % 2 == color)
                world[m++] = r;
        FT_CHECK(&t, m == fc_comm_size(sub), "split: %d ranks expected, %d in it", m,
                 fc_comm_size(sub));
        if (m == fc_comm_size(sub))
            check_peers(&t, sub, node, world, t.rank, paths);
        FT_OK(&t, fc_comm_destroy(sub));
    }
    free(node);
    free(world);
    return ft_finish(&t);
}
