/* SPDX-License-Identifier: BSD-3-Clause */
/* Profiling events of a known schedule: with FC_ALGO=allreduce:ring and
 * the test plugin (FC_PROFILER, FT_PROF_OUT), one allreduce of 1000 x n
 * floats and one message to the right neighbour; after the communicator
 * is gone each rank reads its own event file and checks: one call begin
 * and end per call (allreduce ring, then send and recv), result 0; the
 * ring's 2(n-1) data sends all to the right neighbour and 2(n-1) receives
 * from the left, as many bytes each way; every step's end after its
 * begin, within its call. Run by profile_test.sh. */
#include <string.h>

#include "common.h"

int main(void)
{
    struct ft t;
    ft_init(&t, "profile");
    const char *out = getenv("FT_PROF_OUT");
    if (!out)
        return ft_skip(&t, "FT_PROF_OUT is not set (profile_test.sh sets it)");
    const int n = t.size, me = t.rank, right = (me + 1) % n, left = (me + n - 1) % n;
    const size_t C = 1000 * (size_t)n;
    float *a = malloc(C * 4), *b = malloc(C * 4);
    for (size_t i = 0; i < C; i++)
        a[i] = (float)(me + 1);
    FT_OK(&t, fc_allreduce(a, b, C, FC_FLOAT32, FC_SUM, t.comm));
    FT_CHECK(&t, b[C - 1] == (float)(n * (n + 1) / 2), "allreduce: %g", b[C - 1]);
    if (n > 1) {
        FT_OK(&t, fc_group_start());
        FT_OK(&t, fc_send(a, 100, FC_FLOAT32, right, t.comm));
        FT_OK(&t, fc_recv(b, 100, FC_FLOAT32, left, t.comm));
        FT_OK(&t, fc_group_end());
    }
    int fails = ft_finish(&t); /* the communicator's events are all out */
    char path[512], kind[32], coll[32], algo[32];
    snprintf(path, sizeof(path), "%s.%d", out, me);
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "profile: rank %d: no event file %s\n", me, path);
        return 1;
    }
    unsigned comm;
    unsigned long long seq;
    size_t bytes, sent = 0, got = 0;
    int peer, is_send, result, bad = 0;
    unsigned step;
    double tm, t0, call_t0 = 0, call_t1 = 0;
    int ar_begin = 0, ar_end = 0, sends = 0, recvs = 0, p2p_end = 0, open = 0;
    while (fscanf(f, "%31s %31s %31s %u %llu %zu %d %d %u %lf %lf %d", kind, coll, algo, &comm,
                  &seq, &bytes, &peer, &is_send, &step, &tm, &t0, &result) == 12) {
        int is_ar = !strcmp(coll, "allreduce");
        if (!strcmp(kind, "coll_begin") && is_ar) {
            ar_begin++;
            call_t0 = tm;
            bad |= strcmp(algo, "ring") != 0;
        } else if (!strcmp(kind, "coll_end") && is_ar) {
            ar_end++;
            call_t1 = tm;
            bad |= result != 0 || bytes != C * 4 || t0 != call_t0;
        } else if (!strcmp(kind, "coll_end")) {
            p2p_end += !strcmp(algo, "p2p") && result == 0 && bytes == 400;
        } else if (!strcmp(kind, "step_begin")) {
            open++;
        } else if (!strcmp(kind, "step_end")) {
            open--;
            bad |= t0 > tm || t0 <= 0;
            if (is_ar && bytes > 8) { /* the data; 8 bytes: the call's signature */
                bad |= tm > call_t1 && call_t1 > 0;
                if (is_send) {
                    sends++;
                    sent += bytes;
                    bad |= peer != right;
                } else {
                    recvs++;
                    got += bytes;
                    bad |= peer != left;
                }
            }
        }
    }
    fclose(f);
    int want = 2 * (n - 1);
    if (bad || ar_begin != 1 || ar_end != 1 || sends != want || recvs != want || sent != got ||
        open != 0 || p2p_end != (n > 1 ? 2 : 0)) {
        fprintf(stderr,
                "profile: rank %d: events do not match the ring: allreduce begin %d end %d, "
                "data sends %d and receives %d (want %d each), %zu bytes out, %zu in, %d steps "
                "without an end, %d messages ended, inconsistent fields %d\n",
                me, ar_begin, ar_end, sends, recvs, want, sent, got, open, p2p_end, bad);
        return 1;
    }
    fprintf(stderr, "profile: rank %d: %d sends and %d receives of the ring, %zu bytes each way\n",
            me, sends, recvs, sent);
    free(a);
    free(b);
    return fails;
}
