/* SPDX-License-Identifier: BSD-3-Clause */
/* FC_REPRODUCIBLE=1 (run.sh sets it): allreduce, reduce (every root) and
 * reduce-scatter of random floats whose sums depend on the order, from 1
 * element to 2 MiB, float32, float64, float16 and bfloat16, sum and avg:
 * every output element must equal the rank-order chain ((v0 + v1) + v2)
 * ... computed here, bit for bit, whatever FC_ALGO, FC_CHUNK_SIZE,
 * FC_RAILS, FC_PROTO, provider or memory (FT_REPRO_MEMORY=device) the run
 * has. Without FC_REPRODUCIBLE it reports how many elements differ from
 * that chain (no check). */
#include <string.h>

#include "common.h"
#include "gpu_util.h"

/* FT_REPRO_MEMORY=device: the calls on device buffers (inputs copied in,
 * results out), which must give the same bits */
static int on_dev;
static void *d_in, *d_out;

/* rank r's element i: either sign, values spread over 8 binades */
static double input(int r, size_t i, uint32_t seed)
{
    uint32_t x = (uint32_t)(i * 2654435761u) ^ (uint32_t)(r * 40503 + 1) ^ seed * 977u;
    x ^= x >> 15;
    x *= 0x2c1b3c6du;
    x ^= x >> 12;
    double v = (double)(x % 100000) / 997.0 * (double)(1u << ((x >> 20) % 8));
    return (x >> 28) & 1 ? -v : v;
}

/* the rank-order chain at element i, rounded to dt at every step */
static void chain(void *out, size_t at, size_t i, fc_datatype_t dt, fc_op_t op, int n,
                  uint32_t seed)
{
    char acc[8], v[8];
    double scale = dt == FC_FLOAT16 ? 1.0 / 64 : 1.0;
    ft_store(acc, 0, dt, input(0, i, seed) * scale);
    for (int r = 1; r < n; r++) {
        ft_store(v, 0, dt, input(r, i, seed) * scale);
        if (dt == FC_FLOAT64) {
            double a, b;
            memcpy(&a, acc, 8);
            memcpy(&b, v, 8);
            a = a + b;
            memcpy(acc, &a, 8);
        } else { /* float32 arithmetic, stored back in dt */
            float a = (float)ft_load(acc, 0, dt), b = (float)ft_load(v, 0, dt);
            float c = a + b;
            ft_store(acc, 0, dt, (double)c);
        }
    }
    if (op == FC_AVG) {
        if (dt == FC_FLOAT64) {
            double a;
            memcpy(&a, acc, 8);
            a = a / n;
            memcpy(acc, &a, 8);
        } else {
            float a = (float)ft_load(acc, 0, dt) / (float)n;
            ft_store(acc, 0, dt, (double)a);
        }
    }
    memcpy((char *)out + at * fc_datatype_size(dt), acc, fc_datatype_size(dt));
}

int main(void)
{
    struct ft t;
    ft_init(&t, "reproducible");
    const char *e = getenv("FC_REPRODUCIBLE");
    const int strict = e && !strcmp(e, "1");
    const int n = t.size, me = t.rank;
    if ((on_dev = ft_memory(&t, "FT_REPRO_MEMORY", NULL)) < 0)
        return FT_SKIP;
    static const fc_datatype_t dts[] = {FC_FLOAT32, FC_FLOAT64, FC_FLOAT16, FC_BFLOAT16};
    const size_t counts[] = {1, 1000, 300007, 524288};
    if (on_dev) {
        /* room for any case below: cnt elements, or n blocks of cnt / n + 1
         * for the reduce-scatter */
        size_t dev_bytes = 0;
        for (int d = 0; d < 4; d++)
            for (int ci = 0; ci < 4; ci++) {
                const size_t b = (counts[ci] + (size_t)n) * fc_datatype_size(dts[d]);
                dev_bytes = b > dev_bytes ? b : dev_bytes;
            }
        d_in = gu_alloc(dev_bytes + 64);
        d_out = gu_alloc(dev_bytes + 64);
        if (!d_in || !d_out)
            return ft_skip(&t, "cannot allocate device memory");
    }
    size_t differ = 0, total = 0;
    for (int d = 0; d < 4; d++)
        for (int ci = 0; ci < 4; ci++)
            for (int o = 0; o < 2; o++) {
                fc_datatype_t dt = dts[d];
                fc_op_t op = o ? FC_AVG : FC_SUM;
                size_t cnt = counts[ci], es = fc_datatype_size(dt);
                if (ci == 3 && d != 0)
                    continue; /* the largest on float32 only */
                uint32_t seed = (uint32_t)(d * 16 + ci * 2 + o);
                double scale = dt == FC_FLOAT16 ? 1.0 / 64 : 1.0;
                char *in = malloc(cnt * es * (size_t)n + 8),
                     *out = malloc(cnt * es * (size_t)n + 8);
                char *want = malloc(cnt * es * (size_t)n + 8);
                /* allreduce and reduce: cnt elements */
                for (size_t i = 0; i < cnt; i++) {
                    ft_store(in, i, dt, input(me, i, seed) * scale);
                    chain(want, i, i, dt, op, n, seed);
                }
                int root = (int)((size_t)(d + ci + o) % (size_t)n);
                for (int k = 0; k < 3; k++) {
                    fc_result_t rc;
                    void *ib = in, *ob = out;
                    const char *what = k == 0 ? "allreduce" : k == 1 ? "reduce" : "reduce_scatter";
                    size_t len = cnt;
                    if (k == 2) { /* n blocks of cnt / n + 1: this rank's block me */
                        len = cnt / (size_t)n + 1;
                        for (size_t i = 0; i < len * (size_t)n; i++)
                            ft_store(in, i, dt, input(me, i, seed) * scale);
                        for (size_t i = 0; i < len; i++)
                            chain(want, i, (size_t)me * len + i, dt, op, n, seed);
                    }
                    if (on_dev) {
                        gu_to_device(d_in, in, (k == 2 ? len * (size_t)n : cnt) * es);
                        ib = d_in;
                        ob = d_out;
                    }
                    if (k == 0)
                        rc = fc_allreduce(ib, ob, cnt, dt, op, t.comm);
                    else if (k == 1)
                        rc = fc_reduce(ib, ob, cnt, dt, op, root, t.comm);
                    else
                        rc = fc_reduce_scatter(ib, ob, len, dt, op, t.comm);
                    if (on_dev && rc == FC_SUCCESS && (k != 1 || me == root))
                        gu_to_host(out, d_out, len * es);
                    FT_CHECK(&t, rc == FC_SUCCESS, "%s %s: %s", what, ft_dt_name(dt),
                             fc_last_error());
                    if (rc != FC_SUCCESS || (k == 1 && me != root))
                        continue;
                    size_t bad = 0, first = 0;
                    for (size_t i = 0; i < len; i++)
                        if (memcmp(out + i * es, want + i * es, es)) {
                            if (!bad)
                                first = i;
                            bad++;
                        }
                    differ += bad;
                    total += len;
                    if (strict && bad)
                        ft_fail(&t, __FILE__, __LINE__,
                                "%s of %zu x %s (%s): %zu elements differ from the rank-order "
                                "chain, the first at %zu: %.9g, expected %.9g",
                                what, len, ft_dt_name(dt), ft_op_name(op), bad, first,
                                ft_load(out, first, dt), ft_load(want, first, dt));
                }
                free(in);
                free(out);
                free(want);
            }
    fprintf(stderr,
            "reproducible: rank %d: %s, %s buffers: %zu of %zu elements differ from the "
            "rank-order chain\n",
            me, strict ? "FC_REPRODUCIBLE=1" : "default mode", on_dev ? "device" : "host",
            differ, total);
    if (on_dev) {
        gu_free(d_in);
        gu_free(d_out);
    }
    return ft_finish(&t);
}
