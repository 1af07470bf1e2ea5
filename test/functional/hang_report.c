/* SPDX-License-Identifier: BSD-3-Clause */
/* The job-wide view of a hang: the last rank stays in "the application"
 * (asleep) while the others call an allreduce, which times out. Each of
 * them sends its state to rank 0 over TCP, and rank 0's log must carry the
 * table: a line for every rank, a report from every rank that timed out,
 * "no report" for the sleeping one, and a verdict naming it. Run with
 * FC_TIMEOUT=4 (rank 0 waits up to 2 s for the reports). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

int main(void)
{
    struct ft t;
    ft_init(&t, "hang_report");
    if (t.size < 2)
        return ft_skip(&t, "needs at least 2 ranks");
    const double limit = ft_timeout();
    const int stuck = t.size - 1;
    if (t.rank == stuck) {
        usleep((useconds_t)(2 * limit * 1e6)); /* past rank 0's table */
        FT_OK(&t, fc_comm_abort(t.comm));
        return t.failures ? 1 : 0;
    }
    /* rank 0 keeps what the library logs, to read the table back */
    char path[] = "/tmp/fc_hang_report.XXXXXX";
    int saved = -1, fd = -1;
    if (t.rank == 0) {
        fd = mkstemp(path);
        saved = dup(2);
        FT_CHECK(&t, fd >= 0 && saved >= 0, "cannot capture stderr");
        if (fd >= 0)
            dup2(fd, 2);
    }
    float x[4096] = {0};
    fc_result_t rc = fc_allreduce(x, x, 4096, FC_FLOAT32, FC_SUM, t.comm);
    FT_CHECK(&t, rc == FC_ERR_TIMEOUT, "got %s, expected a timeout", fc_strerror(rc));
    if (t.rank == 0 && fd >= 0) {
        fflush(stderr);
        dup2(saved, 2);
        close(saved);
        size_t cap = 1 << 16, len = 0;
        char *log = calloc(1, cap + 1);
        lseek(fd, 0, SEEK_SET);
        for (ssize_t n; len < cap && (n = read(fd, log + len, cap - len)) > 0;)
            len += (size_t)n;
        close(fd);
        unlink(path);
        fputs(log, stderr); /* the run's log, as it would have been */
        FT_CHECK(&t, strstr(log, "hang report of communicator 0"), "no hang report in the log");
        int lines = 0, reports = 0;
        for (int q = 0; q < t.size; q++) {
            char key[64];
            snprintf(key, sizeof(key), "  rank %d (", q);
            const char *l = strstr(log, key);
            if (!l)
                continue;
            lines++;
            const char *eol = strchr(l, '\n');
            int none = eol && memmem(l, (size_t)(eol - l), "no report", 9) != NULL;
            FT_CHECK(&t, none == (q == stuck), "rank %d's line %s", q,
                     none ? "says no report, but it timed out" : "has a report, but it slept");
            reports += !none;
        }
        FT_CHECK(&t, lines == t.size, "%d of %d ranks have a line in the table", lines, t.size);
        char verdict[64];
        snprintf(verdict, sizeof(verdict), "the job waits on rank %d: ", stuck);
        FT_CHECK(&t, strstr(log, verdict), "the table does not name rank %d as the one waited on",
                 stuck);
        printf("hang_report: rank 0's table has %d lines, %d reports, and names rank %d\n", lines,
               reports, stuck);
        free(log);
    }
    FT_OK(&t, fc_comm_abort(t.comm));
    return t.failures ? 1 : 0;
}
