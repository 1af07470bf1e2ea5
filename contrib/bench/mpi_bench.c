/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The MPI side of the side-by-side comparison, timed as fc_perf times by
 * default (nccl-tests' method): float buffers, warm-up calls, then a
 * barrier and N calls back to back timed as one interval, total/N, the
 * largest over ranks; with -R R, R such blocks and their median. Calls
 * the MPI collective and prints fc_perf's CSV columns (time_us the
 * maximum over ranks, min_us the smallest, avg_us the mean, max_us again)
 * so the two can be joined row by row. Collectives: allreduce, bcast, and
 * allgather, alltoall, allgatherv, alltoallv, whose size is the whole
 * buffer of n blocks (the v-collectives with even counts), as fc_perf's.
 *   mpirun -n 2 mpi_bench -C allreduce,bcast -b 8 -e 32M -f 2 -n 20 -w 5 [-R 1] -l LABEL
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static size_t parse_size(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    switch (*end) {
    case 'k': case 'K': v *= 1024; break;
    case 'm': case 'M': v *= 1024.0 * 1024; break;
    case 'g': case 'G': v *= 1024.0 * 1024 * 1024; break;
    default: break;
    }
    return (size_t)v;
}

enum coll { ALLREDUCE, BCAST, ALLGATHER, ALLTOALL, ALLGATHERV, ALLTOALLV, NCOLL };
static const char *const names[NCOLL] = {"allreduce", "bcast",      "allgather",
                                         "alltoall",  "allgatherv", "alltoallv"};
static int *vcounts, *vdispls; /* the v-collectives: even counts, packed */

/* count: the vector (allreduce, bcast) or one rank's block (the others) */
static void one_call(enum coll c, float *sb, float *rb, int count)
{
    switch (c) {
    case ALLREDUCE: MPI_Allreduce(sb, rb, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case BCAST: MPI_Bcast(rb, count, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    case ALLGATHER:
        MPI_Allgather(sb, count, MPI_FLOAT, rb, count, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case ALLTOALL: MPI_Alltoall(sb, count, MPI_FLOAT, rb, count, MPI_FLOAT, MPI_COMM_WORLD); break;
    case ALLGATHERV:
        MPI_Allgatherv(sb, count, MPI_FLOAT, rb, vcounts, vdispls, MPI_FLOAT, MPI_COMM_WORLD);
        break;
    case ALLTOALLV:
        MPI_Alltoallv(sb, vcounts, vdispls, MPI_FLOAT, rb, vcounts, vdispls, MPI_FLOAT,
                      MPI_COMM_WORLD);
        break;
    default: break;
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    size_t minb = 8, maxb = 32u << 20;
    double factor = 2;
    int iters = 20, warm = 5, reps = 1;
    const char *colls = "allreduce", *label = "mpi";
    int c;
    while ((c = getopt(argc, argv, "C:b:e:f:n:w:R:l:")) != -1) {
        switch (c) {
        case 'C': colls = optarg; break;
        case 'b': minb = parse_size(optarg); break;
        case 'e': maxb = parse_size(optarg); break;
        case 'f': factor = atof(optarg); break;
        case 'n': iters = atoi(optarg); break;
        case 'w': warm = atoi(optarg); break;
        case 'R': reps = atoi(optarg); break;
        case 'l': label = optarg; break;
        default: MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    if (iters < 1 || warm < 0 || reps < 1)
        MPI_Abort(MPI_COMM_WORLD, 2);
    float *sb = malloc(maxb + 64), *rb = malloc(maxb + 64);
    memset(sb, 0, maxb + 64);
    memset(rb, 0, maxb + 64);
    /* per block: the time per call, and its negation (one MPI_MAX gives the
     * largest and the smallest over ranks); then the sum for the mean */
    double *t = malloc(sizeof(double) * 2 * (size_t)reps);
    double *tm = malloc(sizeof(double) * 2 * (size_t)reps);
    double *ts = malloc(sizeof(double) * (size_t)reps);
    if (rank == 0)
        printf("collective,ranks,provider,size,count,type,op,root,time_us,min_us,avg_us,"
               "algbw_GBps,busbw_GBps,wrong,max_us\n");
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", colls);
    vcounts = malloc(sizeof(int) * (size_t)n);
    vdispls = malloc(sizeof(int) * (size_t)n);
    for (char *coll = strtok(buf, ","); coll; coll = strtok(NULL, ",")) {
        enum coll k = NCOLL;
        for (int i = 0; i < NCOLL; i++)
            if (!strcmp(coll, names[i]))
                k = (enum coll)i;
        if (k == NCOLL) {
            if (rank == 0)
                fprintf(stderr, "mpi_bench: unknown collective %s\n", coll);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        const int is_bcast = k == BCAST, blocked = k >= ALLGATHER;
        for (size_t bytes = minb; bytes <= maxb; bytes = (size_t)(bytes * factor)) {
            int count = (int)(bytes / 4);
            if (blocked) /* one rank's block of n, as fc_perf */
                count /= n;
            for (int j = 0; j < n; j++) {
                vcounts[j] = count;
                vdispls[j] = j * count;
            }
            for (int i = 0; i < warm; i++)
                one_call(k, sb, rb, count);
            for (int b = 0; b < reps; b++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                for (int i = 0; i < iters; i++)
                    one_call(k, sb, rb, count);
                t[2 * b] = (MPI_Wtime() - t0) / iters;
                t[2 * b + 1] = -t[2 * b];
                ts[b] = t[2 * b];
            }
            MPI_Allreduce(t, tm, 2 * reps, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            MPI_Allreduce(MPI_IN_PLACE, ts, reps, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            /* the median block by its largest time over ranks */
            int *ord = malloc(sizeof(int) * (size_t)reps);
            for (int b = 0; b < reps; b++)
                ord[b] = b;
            for (int i = 1; i < reps; i++) /* insertion sort: reps is small */
                for (int j = i; j > 0 && tm[2 * ord[j]] < tm[2 * ord[j - 1]]; j--) {
                    int x = ord[j];
                    ord[j] = ord[j - 1];
                    ord[j - 1] = x;
                }
            int m = ord[(reps - 1) / 2]; /* the lower middle, as fc_perf */
            free(ord);
            double med = tm[2 * m], mn = -tm[2 * m + 1], avg = ts[m] / n;
            const size_t real = (size_t)count * 4 * (blocked ? (size_t)n : 1);
            double algbw = (double)real / med / 1e9;
            double bus = is_bcast ? algbw
                         : blocked ? algbw * (n - 1) / n
                                   : algbw * 2.0 * (n - 1) / n;
            if (rank == 0)
                printf("%s,%d,%s,%zu,%d,float32,%s,%s,%.3f,%.3f,%.3f,%.4f,%.4f,0,%.3f\n",
                       names[k], n, label, real, count, k == ALLREDUCE ? "sum" : "-",
                       is_bcast ? "0" : "-", med * 1e6, mn * 1e6, avg * 1e6, algbw, bus,
                       med * 1e6);
            if ((size_t)(bytes * factor) <= bytes)
                break;
        }
    }
    free(sb);
    free(rb);
    free(t);
    free(tm);
    free(ts);
    MPI_Finalize();
    return 0;
}
