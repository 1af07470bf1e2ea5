/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The MPI side of the side-by-side comparison: the same loop as fc_perf
 * (float buffers, warm-up, each iteration timed, the slowest rank's time
 * per iteration, the median), with MPI_Allreduce / MPI_Bcast, printing
 * fc_perf's CSV columns so the two can be joined row by row.
 *   mpirun -n 2 mpi_bench -C allreduce,bcast -b 8 -e 32M -f 2 -n 20 -w 5 -l LABEL
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

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    size_t minb = 8, maxb = 32u << 20;
    double factor = 2;
    int iters = 20, warm = 5;
    const char *colls = "allreduce", *label = "mpi";
    int c;
    while ((c = getopt(argc, argv, "C:b:e:f:n:w:l:")) != -1) {
        switch (c) {
        case 'C': colls = optarg; break;
        case 'b': minb = parse_size(optarg); break;
        case 'e': maxb = parse_size(optarg); break;
        case 'f': factor = atof(optarg); break;
        case 'n': iters = atoi(optarg); break;
        case 'w': warm = atoi(optarg); break;
        case 'l': label = optarg; break;
        default: MPI_Abort(MPI_COMM_WORLD, 2);
        }
    }
    float *sb = malloc(maxb + 64), *rb = malloc(maxb + 64);
    memset(sb, 0, maxb + 64);
    memset(rb, 0, maxb + 64);
    double *t = malloc(sizeof(double) * (size_t)iters), *tm = malloc(sizeof(double) * (size_t)iters);
    if (rank == 0)
        printf("collective,ranks,provider,size,count,type,op,root,time_us,min_us,avg_us,"
               "algbw_GBps,busbw_GBps,wrong\n");
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", colls);
    for (char *coll = strtok(buf, ","); coll; coll = strtok(NULL, ",")) {
        int is_bcast = strcmp(coll, "bcast") == 0;
        for (size_t bytes = minb; bytes <= maxb; bytes = (size_t)(bytes * factor)) {
            int count = (int)(bytes / 4);
            for (int i = 0; i < warm + iters; i++) {
                double t0 = MPI_Wtime();
                if (is_bcast)
                    MPI_Bcast(rb, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
                else
                    MPI_Allreduce(sb, rb, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                if (i >= warm)
                    t[i - warm] = MPI_Wtime() - t0;
            }
            MPI_Allreduce(t, tm, iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            double avg = 0;
            for (int i = 0; i < iters; i++)
                avg += tm[i] / iters;
            qsort(tm, (size_t)iters, sizeof(double), cmp);
            double med = iters % 2 ? tm[iters / 2] : 0.5 * (tm[iters / 2 - 1] + tm[iters / 2]);
            double algbw = (double)count * 4 / med / 1e9;
            double bus = is_bcast ? algbw : algbw * 2.0 * (n - 1) / n;
            if (rank == 0)
                printf("%s,%d,%s,%zu,%d,float32,%s,%s,%.3f,%.3f,%.3f,%.4f,%.4f,0\n",
                       is_bcast ? "bcast" : "allreduce", n, label, (size_t)count * 4, count,
                       is_bcast ? "-" : "sum", is_bcast ? "0" : "-", med * 1e6, tm[0] * 1e6,
                       avg * 1e6, algbw, bus);
            if ((size_t)(bytes * factor) <= bytes)
                break;
        }
    }
    free(sb);
    free(rb);
    free(t);
    free(tm);
    MPI_Finalize();
    return 0;
}
