/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Shared helper of the functional tests: small mains written only against
 * the public API (fabcoll.h), run as real multi-process jobs by run.sh.
 *
 * Exit codes: 0 pass, 77 not run (printed reason), anything else a failure.
 * Expected values are closed forms of the rank and element index, in
 * ranges where every datatype represents sums and products exactly.
 */
#ifndef FC_FT_COMMON_H
#define FC_FT_COMMON_H

#include <fabcoll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FT_SKIP 77

struct ft {
    fc_comm_t comm;
    int rank, size;
    int failures;
    const char *name;
};

/* fc_comm_init or exit(1) with the error. */
void ft_init(struct ft *t, const char *name);
/* Destroys the communicator; returns the exit code (0 when no failure). */
int ft_finish(struct ft *t);
/* A test that cannot run here: rank 0 says why ("<name>: not run: why"),
 * the communicator goes; returns FT_SKIP for main to return. */
int ft_skip(struct ft *t, const char *why);
/* The buffers a test's variable (FT_VCOLL_MEMORY, ...) asks for: 0 host;
 * "device": 1, with this rank's GPU ready; "stream" (only where stream is
 * not NULL): 2, with *stream a CUDA stream of the test's. Where the GPU
 * cannot be used: -1, after ft_skip said why (return FT_SKIP then). */
int ft_memory(struct ft *t, const char *var, void **stream);
/* The ranks' FC_TIMEOUT in seconds (300 when unset), for tests that time it. */
double ft_timeout(void);
/* With a peer gone without a word: fc_allreduce(buf, buf, count,
 * FC_FLOAT32, FC_SUM) must fail (peer failed or timed out) within
 * FC_TIMEOUT (10 s of slack); returns its result, *dt how long it took. */
fc_result_t ft_allreduce_peer_gone(struct ft *t, float *buf, size_t count, double *dt);

/* Records a failure with its location; keeps going (up to a limit). */
void ft_fail(struct ft *t, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
#define FT_CHECK(t, cond, ...)                                                                 \
    do {                                                                                       \
        if (!(cond))                                                                           \
            ft_fail((t), __FILE__, __LINE__, __VA_ARGS__);                                     \
    } while (0)
/* An fc_* call that must succeed. */
#define FT_OK(t, call)                                                                         \
    do {                                                                                       \
        fc_result_t rc_ = (call);                                                              \
        if (rc_ != FC_SUCCESS)                                                                 \
            ft_fail((t), __FILE__, __LINE__, "%s returned %s: %s", #call, fc_strerror(rc_),   \
                    fc_last_error());                                                          \
    } while (0)

extern const fc_datatype_t ft_dtypes[10];
extern const fc_op_t ft_ops[5];
const char *ft_dt_name(fc_datatype_t dt);
const char *ft_op_name(fc_op_t op);
int ft_is_float(fc_datatype_t dt);
int ft_is_unsigned(fc_datatype_t dt);

/* Element value conversions (double <-> every datatype; half types round to
 * nearest even, integers wrap). */
void ft_store(void *buf, size_t i, fc_datatype_t dt, double v);
double ft_load(const void *buf, size_t i, fc_datatype_t dt);
/* fp8 from the formats' definitions: a code's value; the nearest finite
 * code to v (ties to even, saturating; e5m2: 0 for e4m3, 1 for e5m2) */
double ft_fp8_value(uint8_t c, int e5m2);
uint8_t ft_fp8_code(double v, int e5m2);

/* Closed-form input of rank r at element i for op. */
double ft_input(fc_op_t op, fc_datatype_t dt, int r, size_t i);
/* The reduction of ft_input over ranks 0..n-1 at element i, computed the
 * way API.md defines it (wrap for integers, one final division for AVG),
 * and stored in dt. */
void ft_expected(void *out, size_t i, fc_op_t op, fc_datatype_t dt, int n);
/* Compares element i of got with expected (bitwise, NaN-insensitive). */
int ft_same(const void *got, const void *exp, size_t i, fc_datatype_t dt);

/* Counts worth testing for a communicator of n ranks. */
size_t ft_count(int idx, int n); /* idx 0..FT_NCOUNTS-1 */
#define FT_NCOUNTS 5

/* Wall clock in seconds. */
double ft_now(void);

#endif
