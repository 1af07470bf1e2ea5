/* SPDX-License-Identifier: BSD-3-Clause */
/* fp8 reductions (FC_FLOAT8_E4M3, FC_FLOAT8_E5M2) and pre-scaled sums
 * (fc_op_create_premulsum), through allreduce, reduce and reduce_scatter,
 * blocking and nonblocking, in place and not, at odd counts.
 *
 * fp8 expectations are order-free, so they hold whatever the algorithm:
 * each element has one nonzero contributor (it walks through every finite
 * code), or two whose sum or product needs rounding (ties among them), or
 * every rank contributing the largest value (the sum saturates); min and
 * max take any values. The expected value is the rounding of the exact
 * result, written from the formats' definitions (common.c), not from the
 * library's code. Pre-scaled sums give each rank its own scalar: float32
 * and float64 sums of small integers (exact), int32 (wrapping), float16,
 * and fp8 (one rounding at the scaling, then exact sums of one contributor).
 * FT_FP8_MEMORY=device or stream runs the same on GPU buffers. */
#include <math.h>
#include <string.h>

#include "common.h"
#include "gpu_util.h"

static int mem; /* 0 host, 1 device, 2 stream */
static void *stream;

enum kind { K_ALLREDUCE, K_REDUCE, K_RS };
static const char *const kind_name[] = {"allreduce", "reduce", "reduce_scatter"};

/* Runs one call on host buffers sb (in elements: the call's input) and rb:
 * copied to the device and back when mem != 0. rcount: reduce_scatter's
 * block; count: the others' vector. */
static fc_result_t call(struct ft *t, enum kind k, int nb, int in_place, void *sb, void *rb,
                        size_t count, fc_datatype_t dt, fc_op_t op, int root)
{
    const size_t es = fc_datatype_size(dt), n = (size_t)t->size;
    const size_t in = (k == K_RS ? count * n : count) * es, out = count * es;
    char *s = sb, *r = rb;
    if (mem) {
        s = gu_alloc(in + 64);
        r = k == K_RS && in_place ? s + (size_t)t->rank * out : in_place ? s : gu_alloc(out + 64);
        if (!s || !r)
            return FC_ERR_NO_MEMORY;
        if (in)
            gu_to_device(s, sb, in);
    } else if (in_place) {
        r = k == K_RS ? s + (size_t)t->rank * out : s;
    }
    const void *send = s;
    fc_result_t rc;
    fc_request_t req = NULL;
    if (mem == 2) {
        rc = k == K_ALLREDUCE ? fc_allreduce_stream(send, r, count, dt, op, t->comm, stream)
             : k == K_REDUCE  ? fc_reduce_stream(send, r, count, dt, op, root, t->comm, stream)
                              : fc_reduce_scatter_stream(send, r, count, dt, op, t->comm, stream);
        if (rc == FC_SUCCESS && gu_stream_sync(stream) != 0)
            rc = FC_ERR_CUDA;
    } else if (nb) {
        rc = k == K_ALLREDUCE ? fc_iallreduce(send, r, count, dt, op, t->comm, &req)
             : k == K_REDUCE  ? fc_ireduce(send, r, count, dt, op, root, t->comm, &req)
                              : fc_ireduce_scatter(send, r, count, dt, op, t->comm, &req);
        if (rc == FC_SUCCESS)
            rc = fc_wait(&req);
    } else {
        rc = k == K_ALLREDUCE ? fc_allreduce(send, r, count, dt, op, t->comm)
             : k == K_REDUCE  ? fc_reduce(send, r, count, dt, op, root, t->comm)
                              : fc_reduce_scatter(send, r, count, dt, op, t->comm);
    }
    if (mem) {
        if (rc == FC_SUCCESS && out && (k != K_REDUCE || t->rank == root))
            gu_to_host(rb, r, out);
        if (r != s && !(k == K_RS && in_place))
            gu_free(r);
        gu_free(s);
    } else if (in_place && (k != K_REDUCE || t->rank == root)) {
        memmove(rb, r, out);
    }
    return rc;
}

/* ---- fp8 ---------------------------------------------------------------- */

#define NFP8 7 /* element patterns */

/* Rank r's input at element i (global index g) of a call over n ranks, as
 * a value; *exp the expected result there. */
static double fp8_in(int e5m2, fc_op_t op, int r, int n, size_t g, double *exp)
{
    const int maxc = e5m2 ? 0x7b : 0x7e;
    const double max = ft_fp8_value((uint8_t)maxc, e5m2);
    const int owner = (int)(g % (size_t)n), second = (owner + 1) % n;
    const uint8_t code = (uint8_t)((g * 37) % (size_t)(maxc + 1)); /* a finite code >= 0 */
    const double v = ft_fp8_value(code, e5m2) * ((g / 3) % 2 ? -1 : 1);
    double x = 0;
    switch (op) {
    case FC_SUM:
    case FC_AVG:
        switch (g % NFP8) {
        case 0: /* every rank the largest: the sum saturates (one rank: exact) */
            x = max;
            *exp = max;
            break;
        case 1: /* two contributors, the second small: rounding, ties among them */
        case 2: {
            const double big = ft_fp8_value((uint8_t)(0x38 + g % 16), e5m2); /* ~1..4 */
            const double small = ldexp(1.0, -(int)(3 + g % 3)) * (g % 2 ? 1 : 3);
            const double sm = ft_fp8_value(ft_fp8_code(small, e5m2), e5m2);
            x = r == owner ? big : r == second && n > 1 ? sm : 0;
            *exp = n > 1 ? big + sm : big;
            break;
        }
        default: /* one contributor, any code */
            x = r == owner ? v : 0;
            *exp = v;
            break;
        }
        if (op == FC_AVG) /* the exact sum's rounding, divided once (exact in double) */
            *exp = ft_fp8_value(ft_fp8_code(*exp, e5m2), e5m2) / n;
        break;
    case FC_PROD:
        if (g % NFP8 == 1 && n > 1) { /* two factors whose product rounds */
            const double a = ft_fp8_value((uint8_t)(0x31 + g % 13), e5m2);
            x = r == owner ? a : r == second ? a : 1;
            *exp = a * a;
        } else {
            x = r == owner ? v : 1;
            *exp = v;
        }
        break;
    case FC_MIN:
    case FC_MAX: {
        /* any values: rank r's code shifts with r */
        double best = 0;
        for (int q = 0; q < n; q++) {
            double y = ft_fp8_value((uint8_t)((g * 37 + (size_t)q * 11) % (size_t)(maxc + 1)),
                                    e5m2) * ((g + (size_t)q) % 2 ? -1 : 1);
            if (q == r)
                x = y;
            if (q == 0 || (op == FC_MIN ? y < best : y > best))
                best = y;
        }
        *exp = best;
        break;
    }
    }
    return x;
}

static int check_fp8(struct ft *t, fc_datatype_t dt)
{
    const int e5m2 = dt == FC_FLOAT8_E5M2, n = t->size;
    static const size_t counts[] = {0, 1, 7, 1001, 70001};
    int bad = 0;
    for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
        for (int k = 0; k < 3; k++)
            for (int o = 0; o < 5; o++)
                for (int ip = 0; ip < 2; ip++) {
                    const size_t count = counts[ci], tot = k == K_RS ? count * (size_t)n : count;
                    const fc_op_t op = ft_ops[o];
                    const int root = n - 1, nb = (int)((ci + (size_t)o) % 2);
                    uint8_t *in = malloc(tot + 1), *out = malloc(count + 1);
                    for (size_t g = 0; g < tot; g++) {
                        double e;
                        in[g] = ft_fp8_code(fp8_in(e5m2, op, t->rank, n, g, &e), e5m2);
                    }
                    memset(out, 0xee, count + 1);
                    if (ip && k != K_RS)
                        memcpy(out, in, count);
                    fc_result_t rc = call(t, (enum kind)k, nb, ip, ip && k != K_RS ? out : in,
                                          out, count, dt, op, root);
                    FT_CHECK(t, rc == FC_SUCCESS, "%s %s %s count %zu%s: %s: %s",
                             kind_name[k], ft_dt_name(dt), ft_op_name(op), count,
                             ip ? " in place" : "", fc_strerror(rc), fc_last_error());
                    if (rc != FC_SUCCESS || (k == K_REDUCE && t->rank != root)) {
                        free(in), free(out);
                        continue;
                    }
                    int wrong = 0;
                    for (size_t i = 0; i < count && wrong < 3; i++) {
                        const size_t g = k == K_RS ? (size_t)t->rank * count + i : i;
                        double e;
                        fp8_in(e5m2, op, t->rank, n, g, &e);
                        const uint8_t want = ft_fp8_code(e, e5m2);
                        /* -0 and +0: a sum of +0 and -0 is +0 */
                        const int zeros = (want & 0x7f) == 0 && (out[i] & 0x7f) == 0;
                        if (out[i] != want && !zeros) {
                            FT_CHECK(t, 0,
                                     "%s %s %s count %zu%s, element %zu: %#04x (%g), "
                                     "expected %#04x (%g)",
                                     kind_name[k], ft_dt_name(dt), ft_op_name(op), count,
                                     ip ? " in place" : "", i, out[i],
                                     ft_fp8_value(out[i], e5m2), want, ft_fp8_value(want, e5m2));
                            wrong++;
                        }
                    }
                    bad += wrong;
                    free(in), free(out);
                }
    return bad;
}

/* ---- pre-scaled sums ---------------------------------------------------- */

/* rank r's scalar and input for dt; the exact expected sum */
static double pm_scalar(fc_datatype_t dt, int r)
{
    switch (dt) {
    case FC_FLOAT8_E4M3:
    case FC_FLOAT8_E5M2: return 0.5 * (r % 2 ? 3 : 1); /* 0.5 or 1.5: rounding */
    case FC_INT32: return r % 2 ? -3 : 1000003;        /* products wrap */
    default: return r + 1;
    }
}

static double pm_input(fc_datatype_t dt, int r, int n, size_t g)
{
    if (dt == FC_FLOAT8_E4M3 || dt == FC_FLOAT8_E5M2) /* one contributor */
        return (int)(g % (size_t)n) == r ? ft_fp8_value((uint8_t)(g % 0x60), dt == FC_FLOAT8_E5M2)
                                         : 0;
    if (dt == FC_INT32)
        return (double)(int32_t)(uint32_t)((g * 2654435761u) ^ (uint32_t)r * 40503u);
    return (double)((r + (int)(g % 7)) % 7 - 3);
}

static void pm_expected(void *out, size_t i, size_t g, fc_datatype_t dt, int n)
{
    if (dt == FC_FLOAT8_E4M3 || dt == FC_FLOAT8_E5M2) {
        const int e5m2 = dt == FC_FLOAT8_E5M2, r = (int)(g % (size_t)n);
        const double s = ft_fp8_value(ft_fp8_code(pm_scalar(dt, r), e5m2), e5m2);
        ft_store(out, i, dt, pm_input(dt, r, n, g) * s); /* one rounding */
        return;
    }
    if (dt == FC_INT32) {
        uint32_t acc = 0;
        for (int r = 0; r < n; r++)
            acc += (uint32_t)(int32_t)pm_input(dt, r, n, g) * (uint32_t)(int32_t)pm_scalar(dt, r);
        ((int32_t *)out)[i] = (int32_t)acc;
        return;
    }
    double acc = 0;
    for (int r = 0; r < n; r++)
        acc += pm_input(dt, r, n, g) * pm_scalar(dt, r);
    ft_store(out, i, dt, acc); /* small integers: exact in every float type here */
}

static int check_premul(struct ft *t)
{
    static const fc_datatype_t dts[] = {FC_FLOAT32, FC_FLOAT64, FC_INT32, FC_FLOAT16,
                                        FC_FLOAT8_E4M3, FC_FLOAT8_E5M2};
    static const size_t counts[] = {0, 1, 13, 4099, 300007};
    const int n = t->size;
    int bad = 0;
    for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++) {
        const fc_datatype_t dt = dts[d];
        const size_t es = fc_datatype_size(dt);
        unsigned char scalar[8];
        ft_store(scalar, 0, dt, pm_scalar(dt, t->rank));
        fc_op_t op;
        FT_OK(t, fc_op_create_premulsum(&op, scalar, dt, t->comm));
        for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++)
            for (int k = 0; k < 3; k++)
                for (int ip = 0; ip < 2; ip++) {
                    const size_t count = counts[ci], tot = k == K_RS ? count * (size_t)n : count;
                    const int root = (int)(ci % (size_t)n), nb = (int)((ci + d) % 2);
                    char *in = malloc(tot * es + 8), *out = malloc(count * es + 8),
                         *exp = malloc(count * es + 8);
                    for (size_t g = 0; g < tot; g++)
                        ft_store(in, g, dt, pm_input(dt, t->rank, n, g));
                    if (ip && k != K_RS)
                        memcpy(out, in, count * es);
                    fc_result_t rc = call(t, (enum kind)k, nb, ip, ip && k != K_RS ? out : in,
                                          out, count, dt, op, root);
                    FT_CHECK(t, rc == FC_SUCCESS, "pre-scaled %s %s count %zu%s: %s: %s",
                             kind_name[k], ft_dt_name(dt), count, ip ? " in place" : "",
                             fc_strerror(rc), fc_last_error());
                    int wrong = 0;
                    for (size_t i = 0; rc == FC_SUCCESS && i < count && wrong < 3 &&
                                       (k != K_REDUCE || t->rank == root);
                         i++) {
                        const size_t g = k == K_RS ? (size_t)t->rank * count + i : i;
                        pm_expected(exp, i, g, dt, n);
                        if (!ft_same(out, exp, i, dt)) {
                            FT_CHECK(t, 0,
                                     "pre-scaled %s %s count %zu%s, element %zu: %g, expected %g",
                                     kind_name[k], ft_dt_name(dt), count, ip ? " in place" : "",
                                     i, ft_load(out, i, dt), ft_load(exp, i, dt));
                            wrong++;
                        }
                    }
                    bad += wrong;
                    free(in), free(out), free(exp);
                }
        FT_OK(t, fc_op_destroy(op, t->comm));
    }
    return bad;
}

/* What a rank can tell alone is refused before anything is sent. */
static void check_premul_errors(struct ft *t)
{
    float s = 2, x[4] = {1, 2, 3, 4};
    fc_op_t op, op2;
    FT_OK(t, fc_op_create_premulsum(&op, &s, FC_FLOAT32, t->comm));
    fc_result_t rc = fc_allreduce(x, x, 4, FC_FLOAT64, op, t->comm);
    FT_CHECK(t, rc == FC_ERR_INVALID_ARGUMENT && strstr(fc_last_error(), "float32"),
             "a float32 op on float64: %s (%s)", fc_strerror(rc), fc_last_error());
    fc_comm_t dup;
    FT_OK(t, fc_comm_dup(t->comm, &dup));
    rc = fc_allreduce(x, x, 4, FC_FLOAT32, op, dup);
    FT_CHECK(t, rc == FC_ERR_INVALID_ARGUMENT, "an op of another communicator: %s",
             fc_strerror(rc));
    FT_OK(t, fc_comm_destroy(dup));
    FT_OK(t, fc_op_create_premulsum(&op2, &s, FC_FLOAT32, t->comm));
    FT_CHECK(t, op2 != op, "two live ops share the value %d", (int)op);
    FT_OK(t, fc_op_destroy(op, t->comm));
    rc = fc_allreduce(x, x, 4, FC_FLOAT32, op, t->comm);
    FT_CHECK(t, rc == FC_ERR_INVALID_ARGUMENT && strstr(fc_last_error(), "destroyed"),
             "a destroyed op: %s (%s)", fc_strerror(rc), fc_last_error());
    rc = fc_op_destroy(op, t->comm);
    FT_CHECK(t, rc == FC_ERR_INVALID_ARGUMENT, "destroying twice: %s", fc_strerror(rc));
    rc = fc_op_destroy(FC_SUM, t->comm);
    FT_CHECK(t, rc == FC_ERR_INVALID_ARGUMENT, "destroying FC_SUM: %s", fc_strerror(rc));
    rc = fc_op_create_premulsum(&op, NULL, FC_FLOAT32, t->comm);
    FT_CHECK(t, rc == FC_ERR_INVALID_ARGUMENT, "a NULL scalar: %s", fc_strerror(rc));
    /* small calls are kept and run again: two ops of other scalars, in turn,
     * must each get their own */
    fc_op_t two, three;
    float s2 = 2, s3 = 3;
    FT_OK(t, fc_op_create_premulsum(&two, &s2, FC_FLOAT32, t->comm));
    FT_OK(t, fc_op_create_premulsum(&three, &s3, FC_FLOAT32, t->comm));
    for (int k = 0; k < 6; k++) {
        float y[8];
        for (int i = 0; i < 8; i++)
            y[i] = (float)(i + 1);
        FT_OK(t, fc_allreduce(y, y, 8, FC_FLOAT32, k % 2 ? three : two, t->comm));
        for (int i = 0; i < 8; i++)
            FT_CHECK(t, y[i] == (float)((k % 2 ? 3 : 2) * (i + 1) * t->size),
                     "call %d (scalar %d), y[%d] = %g", k, k % 2 ? 3 : 2, i, (double)y[i]);
    }
    FT_OK(t, fc_op_destroy(two, t->comm));
    FT_OK(t, fc_op_destroy(three, t->comm));
    /* the slot is used again, and the op works */
    FT_OK(t, fc_op_create_premulsum(&op, &s, FC_FLOAT32, t->comm));
    FT_OK(t, fc_allreduce(x, x, 4, FC_FLOAT32, op, t->comm));
    for (int i = 0; i < 4; i++)
        FT_CHECK(t, x[i] == 2.0f * (float)(i + 1) * (float)t->size, "x[%d] = %g", i, (double)x[i]);
    FT_OK(t, fc_op_destroy(op, t->comm));
    FT_OK(t, fc_op_destroy(op2, t->comm));
}

int main(void)
{
    struct ft t;
    ft_init(&t, "fp8_premul");
    if ((mem = ft_memory(&t, "FT_FP8_MEMORY", &stream)) < 0)
        return FT_SKIP;
    int bad = check_fp8(&t, FC_FLOAT8_E4M3);
    bad += check_fp8(&t, FC_FLOAT8_E5M2);
    bad += check_premul(&t);
    if (!mem)
        check_premul_errors(&t);
    if (t.rank == 0)
        printf("fp8_premul: %d ranks, %s memory: %d wrong elements\n", t.size,
               mem == 2 ? "device (stream)" : mem ? "device" : "host", bad);
    if (stream)
        gu_stream_destroy(stream);
    return ft_finish(&t);
}
