/* SPDX-License-Identifier: BSD-3-Clause */
/* fc_comm_split: color by parity, keys that reverse the order, NOCOLOR for
 * one rank, a nested split, collectives on parent and children at once,
 * children destroyed while the parent keeps working; fc_comm_dup. */
#include <string.h>

#include "common.h"

int main(void)
{
    struct ft t;
    ft_init(&t, "split");
    int n = t.size, me = t.rank;
    int color = (me == n - 1 && n > 2) ? FC_SPLIT_NOCOLOR : me % 2;
    fc_comm_t child = (fc_comm_t)1;
    FT_OK(&t, fc_comm_split(t.comm, color, -me, &child));
    /* a parent collective in flight (every rank) while the children work */
    int64_t pv = me, ps = -1;
    fc_request_t rq;
    FT_OK(&t, fc_iallreduce(&pv, &ps, 1, FC_INT64, FC_SUM, t.comm, &rq));
    if (color == FC_SPLIT_NOCOLOR) {
        FT_CHECK(&t, child == NULL, "NOCOLOR gave a communicator");
    } else {
        /* members: same parity, excluding the NOCOLOR rank; key -rank reverses */
        int members = 0, myrank = 0;
        for (int r = 0; r < n; r++) {
            if (r % 2 != color || (r == n - 1 && n > 2))
                continue;
            members++;
            if (r > me)
                myrank++;
        }
        FT_CHECK(&t, child != NULL, "no child communicator");
        if (child) {
            FT_CHECK(&t, fc_comm_size(child) == members, "child size %d, expected %d",
                     fc_comm_size(child), members);
            FT_CHECK(&t, fc_comm_rank(child) == myrank, "child rank %d, expected %d",
                     fc_comm_rank(child), myrank);
            /* the child's blocking allreduce while the parent's runs */
            int64_t cv = me, cs = -1;
            FT_OK(&t, fc_allreduce(&cv, &cs, 1, FC_INT64, FC_SUM, child));
            int64_t exp = 0;
            for (int r = 0; r < n; r++)
                if (r % 2 == color && !(r == n - 1 && n > 2))
                    exp += r;
            FT_CHECK(&t, cs == exp, "child sum %lld, expected %lld", (long long)cs,
                     (long long)exp);
            /* nested: split the child in two halves by child rank */
            fc_comm_t grand = NULL;
            int cr = fc_comm_rank(child), cn = fc_comm_size(child);
            FT_OK(&t, fc_comm_split(child, cr < cn / 2 ? 0 : 1, cr, &grand));
            if (grand) {
                int32_t g = 1, gs = 0;
                FT_OK(&t, fc_allreduce(&g, &gs, 1, FC_INT32, FC_SUM, grand));
                int expect = cr < cn / 2 ? cn / 2 : cn - cn / 2;
                FT_CHECK(&t, gs == expect, "grandchild size sum %d, expected %d", gs, expect);
                FT_OK(&t, fc_comm_destroy(grand));
            }
            fc_comm_attr_t a;
            FT_OK(&t, fc_comm_query(child, &a));
            FT_CHECK(&t, a.nnodes >= 1 && a.local_size == members, "child attr: %d nodes, %d local",
                     a.nnodes, a.local_size);
            FT_OK(&t, fc_comm_destroy(child));
        }
    }
    FT_OK(&t, fc_wait(&rq));
    FT_CHECK(&t, ps == (int64_t)n * (n - 1) / 2, "parent sum %lld", (long long)ps);
    /* the parent keeps working after the children are gone */
    for (int k = 0; k < 5; k++) {
        float v[100], s[100];
        for (int i = 0; i < 100; i++)
            v[i] = (float)(me + i + k);
        FT_OK(&t, fc_allreduce(v, s, 100, FC_FLOAT32, FC_MAX, t.comm));
        for (int i = 0; i < 100; i++)
            FT_CHECK(&t, s[i] == (float)(n - 1 + i + k), "parent after split: %g", s[i]);
    }
    /* many splits and destroys in a row */
    for (int k = 0; k < 20; k++) {
        fc_comm_t c2 = NULL;
        FT_OK(&t, fc_comm_split(t.comm, me % 3, me, &c2));
        FT_OK(&t, fc_barrier(c2));
        FT_OK(&t, fc_comm_destroy(c2));
    }
    /* fc_comm_dup: the same ranks in the same order, calls that never match
     * the parent's (a nonblocking allreduce on each, started in opposite
     * orders on even and odd ranks), a dup of the dup, destroyed apart */
    fc_comm_t d = NULL, dd = NULL;
    FT_OK(&t, fc_comm_dup(t.comm, &d));
    FT_CHECK(&t, d && fc_comm_rank(d) == me && fc_comm_size(d) == n, "dup: rank %d of %d",
             fc_comm_rank(d), fc_comm_size(d));
    if (d) {
        int64_t xv = me + 1, xs = -1, yv = 10 * (me + 1), ys = -1;
        fc_request_t r1, r2;
        if (me % 2 == 0) {
            FT_OK(&t, fc_iallreduce(&xv, &xs, 1, FC_INT64, FC_SUM, t.comm, &r1));
            FT_OK(&t, fc_iallreduce(&yv, &ys, 1, FC_INT64, FC_SUM, d, &r2));
        } else {
            FT_OK(&t, fc_iallreduce(&yv, &ys, 1, FC_INT64, FC_SUM, d, &r2));
            FT_OK(&t, fc_iallreduce(&xv, &xs, 1, FC_INT64, FC_SUM, t.comm, &r1));
        }
        FT_OK(&t, fc_wait(&r1));
        FT_OK(&t, fc_wait(&r2));
        int64_t want = (int64_t)n * (n + 1) / 2;
        FT_CHECK(&t, xs == want && ys == 10 * want, "parent %lld, dup %lld, want %lld and %lld",
                 (long long)xs, (long long)ys, (long long)want, (long long)(10 * want));
        FT_OK(&t, fc_comm_dup(d, &dd));
        FT_CHECK(&t, dd && fc_comm_rank(dd) == me, "dup of a dup: rank %d", fc_comm_rank(dd));
        FT_OK(&t, fc_comm_destroy(d));
        if (dd) {
            FT_OK(&t, fc_barrier(dd));
            FT_OK(&t, fc_comm_destroy(dd));
        }
    }
    FT_CHECK(&t, fc_comm_dup(NULL, &d) == FC_ERR_INVALID_ARGUMENT, "dup of NULL accepted");
    return ft_finish(&t);
}
