/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Ranks grouped by node, for the node-aware algorithms (coll_args.node):
 * every node's ranks in rank order, the size of the fullest node, and the
 * check they share.
 */
#include <stdlib.h>

#include "coll.h"

int coll_nodes_make(const struct coll_args *a, struct coll_nodes *N)
{
    const int n = a->nranks, m = a->nnodes;
    N->first = calloc((size_t)m + 1, sizeof(int));
    N->ranks = malloc((size_t)n * sizeof(int));
    int *fill = calloc((size_t)m, sizeof(int));
    if (!N->first || !N->ranks || !fill) {
        free(fill);
        coll_nodes_free(N);
        return -1;
    }
    for (int q = 0; q < n; q++)
        N->first[a->node[q] + 1]++;
    N->lmax = 0;
    for (int x = 0; x < m; x++) {
        if (N->first[x + 1] > N->lmax)
            N->lmax = N->first[x + 1];
        N->first[x + 1] += N->first[x];
    }
    for (int q = 0; q < n; q++) {
        int x = a->node[q];
        N->ranks[N->first[x] + fill[x]++] = q;
    }
    free(fill);
    return 0;
}

void coll_nodes_free(struct coll_nodes *N)
{
    free(N->first);
    free(N->ranks);
    N->first = N->ranks = NULL;
}

void coll_nodes_trees(const struct coll_args *a, const struct coll_nodes *N, int *lead,
                      int *me_lead, int *local, int *me_local, int *L)
{
    const int m = a->nnodes, xr = a->node[a->root], k = a->node[a->rank];
    *me_lead = -1;
    for (int i = 0; i < m; i++) {
        int x = (xr + i) % m;
        lead[i] = x == xr ? a->root : N->ranks[N->first[x]];
        if (lead[i] == a->rank)
            *me_lead = i;
    }
    const int leader = lead[(k - xr + m) % m];
    *L = 0;
    local[(*L)++] = leader;
    for (int i = N->first[k]; i < N->first[k + 1]; i++)
        if (N->ranks[i] != leader)
            local[(*L)++] = N->ranks[i];
    for (int i = 0; i < *L; i++)
        if (local[i] == a->rank)
            *me_local = i;
}

int coll_nodes_apply(const struct coll_args *a)
{
    return a->node && a->nnodes >= 2 && a->nnodes < a->nranks;
}
