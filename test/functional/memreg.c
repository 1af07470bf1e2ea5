/* SPDX-License-Identifier: BSD-3-Clause */
/* fc_mem_register / fc_mem_deregister: collectives and point-to-point
 * messages on ranges inside registered buffers (odd offsets and lengths,
 * the whole buffer, a range that crosses its end), on the communicator and
 * on one dup'ed from it, before and after deregistration, with every
 * element checked; misuse refused. The registration itself is seen only by
 * the provider (FC_MR_MODE=verbs or FC_PROTO=rndv make tcp register; make
 * check runs it so). FT_MEMREG_MEMORY=device runs it on GPU buffers. */
#include <string.h>

#include "common.h"
#include "gpu_util.h"

static int dev; /* buffers on the GPU */

static void *alloc(size_t len)
{
    return dev ? gu_alloc(len) : aligned_alloc(64, (len + 63) / 64 * 64);
}

static void release(void *p)
{
    if (dev)
        gu_free(p);
    else
        free(p);
}

static void put(void *d, const void *h, size_t len)
{
    if (dev)
        gu_to_device(d, h, len);
    else
        memcpy(d, h, len);
}

static void get(void *h, const void *d, size_t len)
{
    if (dev)
        gu_to_host(h, d, len);
    else
        memcpy(h, d, len);
}

/* An allreduce of count floats at byte offset off of both buffers, and a
 * broadcast from rank size - 1 of the result; every element checked. */
static void one_range(struct ft *t, fc_comm_t comm, char *sb, char *rb, size_t off, size_t count,
                      const char *what)
{
    const int n = t->size;
    float *h = malloc(count * sizeof(float) + 4);
    if (!h) {
        FT_CHECK(t, 0, "%s: out of memory", what);
        return;
    }
    for (size_t i = 0; i < count; i++)
        h[i] = (float)((t->rank + (int)(i % 7)) % 7);
    put(sb + off, h, count * sizeof(float));
    FT_OK(t, fc_allreduce(sb + off, rb + off, count, FC_FLOAT32, FC_SUM, comm));
    get(h, rb + off, count * sizeof(float));
    int wrong = 0;
    for (size_t i = 0; i < count && wrong < 3; i++) {
        float e = 0;
        for (int r = 0; r < n; r++)
            e += (float)((r + (int)(i % 7)) % 7);
        if (h[i] != e) {
            FT_CHECK(t, 0, "%s: allreduce element %zu: %g, expected %g", what, i, (double)h[i],
                     (double)e);
            wrong++;
        }
    }
    for (size_t i = 0; i < count; i++)
        h[i] = t->rank == n - 1 ? (float)(i % 1000) : -1.0f;
    put(rb + off, h, count * sizeof(float));
    FT_OK(t, fc_broadcast(rb + off, rb + off, count, FC_FLOAT32, n - 1, comm));
    get(h, rb + off, count * sizeof(float));
    for (size_t i = 0; i < count && wrong < 6; i++)
        if (h[i] != (float)(i % 1000)) {
            FT_CHECK(t, 0, "%s: broadcast element %zu: %g", what, i, (double)h[i]);
            wrong++;
        }
    free(h);
}

/* a ring of sends inside the registered receive buffer */
static void ring(struct ft *t, fc_comm_t comm, char *sb, char *rb, size_t off, size_t count)
{
    if (t->size < 2)
        return;
    const int right = (t->rank + 1) % t->size, left = (t->rank + t->size - 1) % t->size;
    int *h = malloc(count * sizeof(int) + 4);
    if (!h) {
        FT_CHECK(t, 0, "ring: out of memory");
        return;
    }
    for (size_t i = 0; i < count; i++)
        h[i] = t->rank * 1000003 + (int)i;
    put(sb + off, h, count * sizeof(int));
    if (t->rank % 2 == 0) {
        FT_OK(t, fc_send(sb + off, count, FC_INT32, right, comm));
        FT_OK(t, fc_recv(rb + off, count, FC_INT32, left, comm));
    } else {
        FT_OK(t, fc_recv(rb + off, count, FC_INT32, left, comm));
        FT_OK(t, fc_send(sb + off, count, FC_INT32, right, comm));
    }
    get(h, rb + off, count * sizeof(int));
    for (size_t i = 0; i < count; i++)
        if (h[i] != left * 1000003 + (int)i) {
            FT_CHECK(t, 0, "ring element %zu: %d, expected %d", i, h[i], left * 1000003 + (int)i);
            break;
        }
    free(h);
}

int main(void)
{
    struct ft t;
    ft_init(&t, "memreg");
    if ((dev = ft_memory(&t, "FT_MEMREG_MEMORY", NULL)) < 0)
        return FT_SKIP;
    const size_t len = (8u << 20) + 4096;
    char *sb = alloc(len), *rb = alloc(len);
    FT_CHECK(&t, sb && rb, "cannot allocate 2 x %zu bytes", len);
    if (!sb || !rb)
        return ft_finish(&t);
    fc_memhandle_t hs, hr;
    FT_OK(&t, fc_mem_register(t.comm, sb, len, &hs));
    /* the receive buffer registered short of its end: the last range
     * reaches past the registration */
    FT_OK(&t, fc_mem_register(t.comm, rb, len - 4096, &hr));
    fc_comm_t dup;
    FT_OK(&t, fc_comm_dup(t.comm, &dup));
    static const struct {
        size_t off, count;
        const char *what;
    } ranges[] = {
        {0, 1, "first element"},
        {4, 1023, "odd offset"},
        {4096 * 3 + 12, 262147, "1 MiB at an odd offset"},
        {0, (8u << 20) / 4, "the whole 8 MiB"},
        {(8u << 20) - 4096, 2048, "across the registration's end"},
    };
    for (int pass = 0; pass < 3; pass++) {
        /* 0: registered, on comm; 1: registered, on the dup; 2: after
         * deregistration */
        if (pass == 2) {
            FT_OK(&t, fc_mem_deregister(t.comm, hs));
            FT_OK(&t, fc_mem_deregister(dup, hr)); /* any communicator of the family */
        }
        fc_comm_t c = pass == 1 ? dup : t.comm;
        for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
            char what[128];
            snprintf(what, sizeof(what), "%s (%s)", ranges[i].what,
                     pass == 0 ? "registered" : pass == 1 ? "registered, dup" : "deregistered");
            one_range(&t, c, sb, rb, ranges[i].off, ranges[i].count, what);
            ring(&t, c, sb, rb, ranges[i].off, ranges[i].count);
        }
    }
    /* misuse, refused on the calling rank */
    fc_memhandle_t h = (fc_memhandle_t)&t;
    fc_result_t rc = fc_mem_register(t.comm, NULL, 64, &h);
    FT_CHECK(&t, rc == FC_ERR_INVALID_ARGUMENT && h == NULL, "NULL buf: %s", fc_strerror(rc));
    rc = fc_mem_register(t.comm, sb, 64, NULL);
    FT_CHECK(&t, rc == FC_ERR_INVALID_ARGUMENT, "NULL handle pointer: %s", fc_strerror(rc));
    rc = fc_mem_register(NULL, sb, 64, &h);
    FT_CHECK(&t, rc == FC_ERR_INVALID_ARGUMENT, "NULL comm: %s", fc_strerror(rc));
    rc = fc_mem_deregister(t.comm, NULL);
    FT_CHECK(&t, rc == FC_ERR_INVALID_ARGUMENT, "deregistering NULL: %s", fc_strerror(rc));
    /* nothing to register is fine */
    FT_OK(&t, fc_mem_register(t.comm, NULL, 0, &h));
    FT_OK(&t, fc_mem_deregister(t.comm, h));
    /* a handle made through a communicator destroyed since: still deregistered through
     * another of its family */
    fc_comm_t dup2;
    FT_OK(&t, fc_comm_dup(t.comm, &dup2));
    FT_OK(&t, fc_mem_register(dup2, sb, 4096, &h));
    FT_OK(&t, fc_comm_destroy(dup2));
    one_range(&t, t.comm, sb, rb, 0, 1024, "after the dup that registered went");
    FT_OK(&t, fc_mem_deregister(t.comm, h));
    FT_OK(&t, fc_comm_destroy(dup));
    release(sb);
    release(rb);
    if (t.rank == 0)
        printf("memreg: %d ranks, %s buffers\n", t.size, dev ? "device" : "host");
    return ft_finish(&t);
}
