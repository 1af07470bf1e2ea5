/* SPDX-License-Identifier: BSD-3-Clause */
/* fc_send / fc_recv: order between two ranks, sizes from 0 to several
 * chunks, a ring exchange, and a count mismatch that is an error (never a
 * silent truncation) after which the communicator still works. */
#include <string.h>

#include "common.h"

int main(void)
{
    struct ft t;
    ft_init(&t, "sendrecv");
    const size_t sizes[] = {0, 1, 7, 1000, 65537, 3000001};
    const int nsizes = (int)(sizeof(sizes) / sizeof(sizes[0]));
    int32_t *buf = malloc(sizes[nsizes - 1] * 4 + 64);
    /* 1. ordered stream 0 -> last: sizes in order, twice */
    int last = t.size - 1;
    for (int rep = 0; rep < 2; rep++)
        for (int k = 0; k < nsizes; k++) {
            size_t n = sizes[k];
            if (t.rank == 0) {
                for (size_t i = 0; i < n; i++)
                    buf[i] = (int32_t)(k * 1000003 + (int)i + rep);
                FT_OK(&t, fc_send(buf, n, FC_INT32, last, t.comm));
            } else if (t.rank == last) {
                memset(buf, 0, n * 4);
                FT_OK(&t, fc_recv(buf, n, FC_INT32, 0, t.comm));
                for (size_t i = 0; i < n; i++)
                    if (buf[i] != (int32_t)(k * 1000003 + (int)i + rep)) {
                        ft_fail(&t, __FILE__, __LINE__, "message %d element %zu: %d", k, i,
                                buf[i]);
                        break;
                    }
            }
        }
    /* 2. ring: even ranks send first, odd receive first (no deadlock either way) */
    if (t.size > 1) {
        int right = (t.rank + 1) % t.size, left = (t.rank + t.size - 1) % t.size;
        double out[100], in[100];
        for (int i = 0; i < 100; i++)
            out[i] = t.rank * 100 + i;
        if (t.rank % 2 == 0) {
            FT_OK(&t, fc_send(out, 100, FC_FLOAT64, right, t.comm));
            FT_OK(&t, fc_recv(in, 100, FC_FLOAT64, left, t.comm));
        } else {
            FT_OK(&t, fc_recv(in, 100, FC_FLOAT64, left, t.comm));
            FT_OK(&t, fc_send(out, 100, FC_FLOAT64, right, t.comm));
        }
        for (int i = 0; i < 100; i++)
            FT_CHECK(&t, in[i] == left * 100 + i, "ring element %d: %g", i, in[i]);
    }
    /* 3. count mismatch, both ways: an error on the receiver, then all is well */
    if (t.size > 1 && (t.rank == 0 || t.rank == last)) {
        int32_t small[16];
        for (int i = 0; i < 16; i++)
            small[i] = i;
        if (t.rank == 0) {
            FT_OK(&t, fc_send(small, 8, FC_INT32, last, t.comm));
            FT_OK(&t, fc_send(small, 16, FC_INT32, last, t.comm));
        } else {
            fc_result_t rc = fc_recv(small, 16, FC_INT32, 0, t.comm); /* 8 sent */
            FT_CHECK(&t, rc == FC_ERR_INVALID_ARGUMENT, "short message: got %s",
                     fc_strerror(rc));
            FT_CHECK(&t, strstr(fc_last_error(), "rank 0") != NULL, "message: %s",
                     fc_last_error());
            rc = fc_recv(small, 8, FC_INT32, 0, t.comm); /* 16 sent */
            FT_CHECK(&t, rc == FC_ERR_INVALID_ARGUMENT, "long message: got %s", fc_strerror(rc));
        }
    }
    int32_t v = t.rank + 1, s = 0;
    FT_OK(&t, fc_allreduce(&v, &s, 1, FC_INT32, FC_SUM, t.comm));
    FT_CHECK(&t, s == t.size * (t.size + 1) / 2, "allreduce after p2p errors: %d", s);
    free(buf);
    return ft_finish(&t);
}
