/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * What the files of fc_perf share: its options, the collectives it
 * measures, and the entry points of its parts. fc_perf.c (options, buffers,
 * the sweep and its output) calls perf_table.c (--table), perf_first.c
 * (--first-call), perf_time.c (how
 * a size is timed) and perf_calls.c (one call and its check); each calls
 * only those after it. Written against fabcoll.h alone, like any program.
 */
#ifndef FC_PERF_H
#define FC_PERF_H

#include <fabcoll.h>
#include <stddef.h>

enum perf_coll {
    ALLREDUCE, BCAST, REDUCE, ALLGATHER, REDUCE_SCATTER, ALLTOALL, BARRIER,
    GATHER, SCATTER, ALLGATHERV, ALLTOALLV, NCOLL
};
/* Collectives whose count is one rank's block of n (the v-collectives with
 * even counts, as OSU's osu_allgatherv and osu_alltoallv measure them). */
static inline int perf_blocked(enum perf_coll c)
{
    return c == ALLGATHER || c == REDUCE_SCATTER || c == ALLTOALL || c == GATHER ||
           c == SCATTER || c == ALLGATHERV || c == ALLTOALLV;
}
extern const char *const perf_coll_names[NCOLL];
#define PERF_NDT 12
extern const char *const perf_dt_names[PERF_NDT];
extern const char *const perf_op_names[5];

struct perf_opts {
    size_t minb, maxb, stepb;
    double factor;
    int iters, warmup, root, inplace, check, csv, json, cuda, stream, table;
    int batch; /* -S: calls queued per synchronize */
    int repeats; /* -R: timed blocks per size, the median printed */
    int latency; /* -l: OSU's method, a barrier before every timed call */
    int host_side; /* -H: 1 the send buffer, 2 the receive buffer in host memory */
    int host_pinned; /* -H SIDE:pinned: that buffer page-locked by CUDA */
    int first;       /* --first-call: the first call on new buffers vs the second */
    int reg;         /* --register: fc_mem_register the buffers ahead */
    int premul;      /* -o premulsum: a pre-scaled sum (by 1: checked as a sum) */
    const char *table_file;
    fc_datatype_t dt;
    fc_op_t op;
    int colls[NCOLL], ncolls;
};

/* ---- perf_calls.c ------------------------------------------------------------ */

/* the op the calls pass (perf_op_make): o->op, or with -o premulsum a
 * pre-scaled sum by 1 made on comm */
extern fc_op_t perf_op;
fc_result_t perf_op_make(const struct perf_opts *o, fc_comm_t comm);
/* -S: the stream of the stream-ordered calls (NULL: none) */
extern void *perf_stream;
/* -D cuda: host shadows of the device buffers (checked calls), and their size */
extern char *perf_host_send, *perf_host_recv;
extern size_t perf_host_bytes;
/* One call of collective c: the plain call, or with -S o->batch of its
 * stream-ordered twin on perf_stream followed by a stream synchronize. */
fc_result_t perf_run_once(enum perf_coll c, void *sb, void *rb, size_t count,
                          const struct perf_opts *o, fc_comm_t comm, int rank, int n);
/* One call on inputs that tell every rank and element apart; the number of
 * wrong elements (and changed guard or send bytes) on this rank. */
long perf_check_once(enum perf_coll c, char *sb, char *rb, size_t count,
                     const struct perf_opts *o, fc_comm_t comm, int rank, int n);

/* ---- perf_time.c ------------------------------------------------------------- */

/* The time per call of one size: the figure printed (nccl-tests' maximum
 * over ranks, or with --latency OSU's average over ranks) and the smallest,
 * mean and largest rank's time per call, all of the block printed. */
struct perf_timing {
    double time, min, avg, max;
};

/* One sentence on how fc_perf times, for the headers. */
void perf_method_desc(const struct perf_opts *o, char *buf, size_t len);
/* Runs one size (a checked call with -c, the warm-up, o->repeats timed
 * blocks); the median block's timing in *res, wrong elements in *wrong.
 * blk: 4 x o->repeats doubles. Nonzero, said on stderr, on a failure. */
int perf_measure(enum perf_coll c, size_t count, size_t real, char *sb, char *rb,
                 const struct perf_opts *o, fc_comm_t comm, int rank, int n, double *blk,
                 struct perf_timing *res, long *wrong);

/* ---- perf_table.c ------------------------------------------------------------ */

/* the sizes --table measures lie between these */
#define PERF_TABLE_MIN (256u << 10)
#define PERF_TABLE_MAX (16u << 20)
/* --table: allreduce at the seed article's three sizes, as one row of a
 * table kept in o->table_file. Nonzero on a failure or a wrong result. */
int perf_run_table(char *sb, char *rb, const struct perf_opts *o, fc_comm_t comm, int rank,
                   int n, const fc_comm_attr_t *attr, double *blk);

/* ---- perf_first.c ------------------------------------------------------------ */

/* --first-call: per size, rounds of new buffers (registered ahead with
 * --register), the first and the second call timed. Nonzero on a failure. */
int perf_run_first(const struct perf_opts *o, fc_comm_t comm, int rank, int n,
                   const fc_comm_attr_t *attr);

#endif /* FC_PERF_H */
