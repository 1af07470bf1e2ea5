/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fabcoll inside an MPI program: MPI starts the ranks and carries fabcoll's
 * unique id; fabcoll then runs its own collectives over libfabric.
 *
 *   rank 0: fc_get_unique_id (starts a rendezvous in this process)
 *   all:    MPI_Bcast of the fc_unique_id_t (plain bytes)
 *   all:    fc_comm_init_rank(MPI rank, MPI size)
 *   all:    fc_allreduce, compared element by element with MPI_Allreduce
 *   all:    fc_comm_destroy, MPI_Finalize
 *
 * Build: make (see Makefile: mpicc + pkg-config fabcoll). Run with any MPI
 * launcher: mpirun -n 4 ./mpi_interop, srun --mpi=pmix -n 4 ./mpi_interop.
 * Prints one line on rank 0; exit status 0 when fabcoll and MPI agree.
 *
 *   ./mpi_interop [COUNT]   elements per rank (default 1048576)
 */
#include <fabcoll.h>
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

/* On a fabcoll error: say which call and why on this rank, end the job. */
#define FC_CHECK(call)                                                                             \
    do {                                                                                           \
        fc_result_t rc_ = (call);                                                                  \
        if (rc_ != FC_SUCCESS) {                                                                   \
            fprintf(stderr, "mpi_interop: rank %d: %s failed: %s: %s\n", rank, #call,              \
                    fc_strerror(rc_), fc_last_error());                                            \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t count = argc > 1 ? strtoul(argv[1], NULL, 10) : 1u << 20;

    /* 1. rank 0 makes the id; MPI carries it to everyone as raw bytes */
    fc_unique_id_t id;
    if (rank == 0)
        FC_CHECK(fc_get_unique_id(&id));
    MPI_Bcast(&id, (int)sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);

    /* 2. one fabcoll rank per MPI rank, same numbering */
    fc_comm_t comm;
    FC_CHECK(fc_comm_init_rank(&comm, size, &id, rank));
    fc_comm_attr_t attr;
    FC_CHECK(fc_comm_query(comm, &attr));

    /* 3. the same sum both ways; values are small integers, so float sums
     *    are exact in any order and must match bit for bit */
    float *in = malloc(count * sizeof(float));
    float *fc_out = malloc(count * sizeof(float));
    float *mpi_out = malloc(count * sizeof(float));
    if (!in || !fc_out || !mpi_out) {
        fprintf(stderr, "mpi_interop: rank %d: out of memory for %zu floats\n", rank, count);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < count; i++)
        in[i] = (float)((rank + 1) * (int)(i % 7 + 1));
    double t0 = MPI_Wtime();
    FC_CHECK(fc_allreduce(in, fc_out, count, FC_FLOAT32, FC_SUM, comm));
    double t_fc = MPI_Wtime() - t0;
    t0 = MPI_Wtime();
    MPI_Allreduce(in, mpi_out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double t_mpi = MPI_Wtime() - t0;

    long bad = 0, first_bad = -1;
    for (size_t i = 0; i < count; i++)
        if (fc_out[i] != mpi_out[i]) {
            if (first_bad < 0)
                first_bad = (long)i;
            bad++;
        }
    if (bad)
        fprintf(stderr,
                "mpi_interop: rank %d: %ld of %zu elements differ; first at %ld: fabcoll %g, "
                "MPI %g\n",
                rank, bad, count, first_bad, fc_out[first_bad], mpi_out[first_bad]);
    long total_bad = 0;
    MPI_Allreduce(&bad, &total_bad, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);

    /* 4. both libraries close in the usual order: fabcoll first */
    FC_CHECK(fc_comm_destroy(comm));
    if (rank == 0)
        printf("mpi_interop: %s: %d ranks, %zu floats, fabcoll (%s) %.2f ms, MPI %.2f ms, "
               "%ld mismatches\n",
               total_bad ? "FAIL" : "OK", size, count, attr.provider, t_fc * 1e3, t_mpi * 1e3,
               total_bad);
    free(in);
    free(fc_out);
    free(mpi_out);
    MPI_Finalize();
    return total_bad ? 1 : 0;
}
