/* SPDX-License-Identifier: BSD-3-Clause */
/* A profiler plugin for the tests: writes every event it is given, one
 * line each, to $FT_PROF_OUT.<rank>:
 *   kind coll algo comm seq bytes peer is_send step time t_begin result */
#include <fabcoll_profiler.h>
#include <stdio.h>
#include <stdlib.h>

/* one word: spaces (the "connectivity check" call) become '_' */
static const char *word(const char *s, char *buf, size_t len)
{
    size_t i = 0;
    for (; s[i] && i + 1 < len; i++)
        buf[i] = s[i] == ' ' ? '_' : s[i];
    buf[i] = '\0';
    return buf;
}

static void event(void *ctx, const struct fc_prof_event *e)
{
    static const char *const kinds[] = {"coll_begin", "coll_end", "step_begin", "step_end"};
    char c[64], a[64];
    fprintf((FILE *)ctx, "%s %s %s %u %llu %zu %d %d %u %.9f %.9f %d\n", kinds[e->kind & 3],
            word(e->coll, c, sizeof(c)), word(e->algo, a, sizeof(a)), e->comm_id, (unsigned long long)e->seq, e->bytes, e->peer, e->is_send,
            e->step, e->time, e->t_begin, e->result);
}

static void fini(void *ctx)
{
    fclose((FILE *)ctx);
}

int fc_profiler_init(struct fc_profiler *p, int rank, int nranks)
{
    const char *out = getenv("FT_PROF_OUT");
    char path[512];
    (void)nranks;
    if (!out || p->version != FC_PROFILER_VERSION)
        return -1;
    snprintf(path, sizeof(path), "%s.%d", out, rank);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    setvbuf(f, NULL, _IOLBF, 0);
    p->ctx = f;
    p->event = event;
    p->fini = fini;
    return 0;
}
