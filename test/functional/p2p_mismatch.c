/* SPDX-License-Identifier: BSD-3-Clause */
/* fc_send / fc_recv of messages of a chunk or more (run with FC_CHUNK_SIZE=64K)
 * whose counts differ: both ends fail with FC_ERR_INVALID_ARGUMENT naming
 * both counts, rather than a receive cut to its own count taking the
 * first chunks of a longer message and reporting success. Each case runs on a
 * communicator split off for it (a mismatched large message leaves its
 * communicator unusable); the job's own communicator goes on working, and
 * matching messages of whole chunks still arrive intact. */
#include <stdio.h>
#include <string.h>

#include "common.h"

#define CH 65536

static void one_case(struct ft *t, int last, size_t sent, size_t expected)
{
    fc_comm_t sub = NULL;
    int in = t->rank == 0 || t->rank == last;
    FT_OK(t, fc_comm_split(t->comm, in ? 0 : FC_SPLIT_NOCOLOR, 0, &sub));
    if (!in)
        return;
    int peer = t->rank == 0 ? 1 : 0; /* ranks of sub */
    size_t n = sent > expected ? sent : expected;
    unsigned char *buf = malloc(n);
    memset(buf, 7, n);
    fc_result_t rc = t->rank == 0 ? fc_send(buf, sent, FC_UINT8, peer, sub)
                                  : fc_recv(buf, expected, FC_UINT8, peer, sub);
    char want[64];
    snprintf(want, sizeof(want), "%zu bytes where this", t->rank == 0 ? expected : sent);
    if (sent == expected) {
        FT_CHECK(t, rc == FC_SUCCESS, "%zu bytes, counts equal: %s (%s)", sent, fc_strerror(rc),
                 fc_last_error());
    } else {
        FT_CHECK(t, rc == FC_ERR_INVALID_ARGUMENT, "sent %zu, expected %zu: got %s (%s)", sent,
                 expected, fc_strerror(rc), fc_last_error());
        FT_CHECK(t, strstr(fc_last_error(), want) != NULL, "sent %zu, expected %zu: '%s' lacks '%s'",
                 sent, expected, fc_last_error(), want);
    }
    free(buf);
    FT_OK(t, fc_comm_destroy(sub));
}

int main(void)
{
    struct ft t;
    ft_init(&t, "p2p_mismatch");
    int last = t.size - 1;
    one_case(&t, last, CH + 4, CH);         /* one whole chunk expected, 4 bytes more sent */
    one_case(&t, last, 2 * CH, 3 * CH);     /* whole chunks short */
    one_case(&t, last, 3 * CH, 2 * CH);     /* whole chunks over */
    one_case(&t, last, CH, CH + 100);       /* one chunk sent, a little more expected */
    one_case(&t, last, 2 * CH, 2 * CH);     /* equal: no false alarm */
    /* and the data of equal ones arrives intact */
    if (t.rank == 0 || t.rank == last) {
        size_t n = 5 * CH + 12;
        int32_t *b = malloc(n * 4);
        for (size_t i = 0; i < n; i++)
            b[i] = t.rank == 0 ? (int32_t)(i * 7 + 1) : 0;
        if (t.rank == 0)
            FT_OK(&t, fc_send(b, n, FC_INT32, last, t.comm));
        else {
            FT_OK(&t, fc_recv(b, n, FC_INT32, 0, t.comm));
            for (size_t i = 0; i < n; i++)
                if (b[i] != (int32_t)(i * 7 + 1)) {
                    ft_fail(&t, __FILE__, __LINE__, "element %zu: %d", i, b[i]);
                    break;
                }
        }
        free(b);
    }
    int32_t v = t.rank + 1, s = 0;
    FT_OK(&t, fc_allreduce(&v, &s, 1, FC_INT32, FC_SUM, t.comm));
    FT_CHECK(&t, s == t.size * (t.size + 1) / 2, "allreduce afterwards: %d", s);
    return ft_finish(&t);
}
