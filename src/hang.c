/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The job-wide view of a collective that timed out. Each rank whose call
 * timed out sends its state (the call, its steps, the ranks it waits for,
 * how long it had gone without progress) over TCP to the collector in the
 * top-level rank 0's process (bootstrap/report.c), not over the fabric,
 * which may be what broke. In that process, the rank whose own call timed
 * out waits for the others' reports (half FC_TIMEOUT, at most 10 s, or
 * until all came) and logs one table: a line per rank, then the ranks the
 * job waits on: those others wait for that sent no report (busy in the
 * application, blocked elsewhere, or dead), else those behind the others
 * (an earlier call), else the ones most waited for.
 *
 * The table needs the collector's process alive and in the communicator
 * that timed out; without it each rank's own message (request.c) still
 * names the ranks it waited for.
 */
#define _GNU_SOURCE
#include "comm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "boot.h"
#include "log.h"

#define HANG_GRACE_MAX 10.0

/* "1,4,7" (at most about len bytes) */
static void list(const int *v, int n, char *buf, size_t len)
{
    size_t o = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && o + 16 < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%d", i ? "," : "", v[i]);
    if (o + 16 >= len && n > 0)
        snprintf(buf + o, len - o, ",...");
}

/* The table of the n reports in rep (magic 0: none came). */
static void table(struct fc_comm *c, const struct boot_report *rep, int n, int got, double waited)
{
    int *indeg = calloc((size_t)n, sizeof(int));
    int *pick = calloc((size_t)n, sizeof(int));
    if (!indeg || !pick) {
        free(indeg);
        free(pick);
        return;
    }
    FC_WARN(LOG_COLL,
            "hang report of communicator %u (%d ranks): %s timed out; what each rank was "
            "doing (%d of %d reports over TCP within %.1f s):",
            (unsigned)c->id, n, rep[c->rank].desc, got, n, waited);
    uint64_t lo = UINT64_MAX, hi = 0;
    for (int q = 0; q < n; q++) {
        const struct boot_report *p = &rep[q];
        if (!p->magic) {
            FC_WARN(LOG_COLL, "  rank %d (%s pid %d): no report: not in a call that timed out "
                    "(busy in the application, blocked elsewhere, or dead)",
                    q, c->hosts[q], c->host_pid[q]);
            continue;
        }
        char w[128];
        int nw = p->nwait < BOOT_REPORT_WAIT ? p->nwait : BOOT_REPORT_WAIT;
        list(p->wait, nw, w, sizeof(w));
        for (int k = 0; k < nw; k++)
            if (p->wait[k] >= 0 && p->wait[k] < n)
                indeg[p->wait[k]]++;
        lo = p->seq < lo ? p->seq : lo;
        hi = p->seq > hi ? p->seq : hi;
        FC_WARN(LOG_COLL, "  rank %d (%s pid %d): %s: %u of %u steps done, no progress for "
                "%.1f s, waits for %s",
                q, p->host, p->pid, p->desc, p->ndone, p->nsteps, p->idle_s,
                nw ? w : "nothing posted");
    }
    /* the verdict: silent ranks others wait for; else silent ones; else
     * the ones behind; else the most waited for */
    int np = 0;
    const char *why = "";
    for (int q = 0; q < n; q++)
        if (!rep[q].magic && indeg[q] > 0)
            pick[np++] = q;
    if (np) {
        why = "the others wait for them and they sent no report";
    } else {
        for (int q = 0; q < n; q++)
            if (!rep[q].magic)
                pick[np++] = q;
        if (np)
            why = "they sent no report";
    }
    if (!np && lo != hi) {
        for (int q = 0; q < n; q++)
            if (rep[q].seq == lo)
                pick[np++] = q;
        why = "they are at an earlier call than the others";
    }
    if (!np) {
        int most = 0;
        for (int q = 0; q < n; q++)
            most = indeg[q] > most ? indeg[q] : most;
        for (int q = 0; q < n && most; q++)
            if (indeg[q] == most)
                pick[np++] = q;
        why = "every rank reported; these are the most waited for";
    }
    char who[160];
    list(pick, np, who, sizeof(who));
    if (np)
        FC_WARN(LOG_COLL, "  the job waits on rank%s %s: %s", np > 1 ? "s" : "", who, why);
    free(indeg);
    free(pick);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void comm_hang_report(struct fc_request *r, const char *desc)
{
    struct fc_comm *c = r->comm;
    struct comm_shared *sh = c->sh;
    if (sh->report_port <= 0 || !r->algo)
        return;
    struct boot_report me;
    memset(&me, 0, sizeof(me));
    me.magic = BOOT_REPORT_MAGIC;
    memcpy(me.token, sh->report_token, BOOT_TOKEN_LEN);
    me.comm_id = c->id;
    me.rank = c->rank;
    me.nranks = c->size;
    me.pid = (int32_t)getpid();
    me.seq = r->seq;
    me.ndone = r->s.ndone;
    me.nsteps = r->s.nsteps;
    me.nwait = sched_waiting_for(&r->s, me.wait, BOOT_REPORT_WAIT);
    me.idle_s = now_s() - r->last_change;
    snprintf(me.host, sizeof(me.host), "%s", c->hosts[c->rank]);
    snprintf(me.desc, sizeof(me.desc), "%s", desc);
    if (boot_report_send(sh->report_ip, sh->report_port, &me, 2.0) != 0) {
        FC_INFO(LOG_COLL, "the hang report could not reach rank 0 at %s:%d", sh->report_ip,
                sh->report_port);
        return;
    }
    if (!sh->collector)
        return;
    double grace = c->cfg.timeout / 2;
    grace = grace > HANG_GRACE_MAX ? HANG_GRACE_MAX : grace < 0.5 ? 0.5 : grace;
    struct boot_report *rep = calloc((size_t)c->size, sizeof(*rep));
    if (!rep)
        return;
    double t0 = now_s();
    int got = boot_collector_take(sh->collector, c->id, c->size, grace, rep);
    table(c, rep, c->size, got, now_s() - t0);
    free(rep);
}
