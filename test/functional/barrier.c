/* SPDX-License-Identifier: BSD-3-Clause */
/* fc_barrier: nobody leaves before the last one arrives (ranks arrive
 * staggered; clocks are compared on one machine), and 200 in a row work. */
#include <string.h>
#include <unistd.h>

#include "common.h"

int main(void)
{
    struct ft t;
    ft_init(&t, "barrier");
    for (int round = 0; round < 3; round++) {
        /* a different rank arrives last each round */
        int last = (round * 5 + 1) % t.size;
        if (t.rank == last)
            usleep(150000);
        double times[2];
        times[0] = ft_now();
        FT_OK(&t, fc_barrier(t.comm));
        times[1] = ft_now();
        double *all = malloc(sizeof(double) * 2 * (size_t)t.size);
        FT_OK(&t, fc_allgather(times, all, 2, FC_FLOAT64, t.comm));
        double latest_in = 0;
        for (int r = 0; r < t.size; r++)
            latest_in = all[2 * r] > latest_in ? all[2 * r] : latest_in;
        for (int r = 0; r < t.size; r++)
            FT_CHECK(&t, all[2 * r + 1] >= latest_in,
                     "round %d: rank %d left the barrier %.6f s before rank %d arrived", round, r,
                     latest_in - all[2 * r + 1], last);
        free(all);
    }
    for (int i = 0; i < 200; i++)
        FT_OK(&t, fc_barrier(t.comm));
    return ft_finish(&t);
}
