/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_perf --table: the seed article's comparison, allreduce at three sizes
 * as one row per (provider, buffers, ranks, nodes), merged with the rows
 * that earlier runs left in a table file and printed as one table.
 */
#define _GNU_SOURCE
#include "perf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- --table: the seed article's comparison -------------------------------
 * One row per (provider, buffer kind, ranks, nodes): allreduce latency at
 * the seed's three sizes. A table file keeps rows across runs, one line each:
 *   fc_perf-table 1 PROVIDER BUFFERS RANKS NODES US_256K US_1M US_16M
 * (PROVIDER as fi_info names it, without spaces, and /gdr or /staged for
 * device buffers; BUFFERS host or device). A run replaces the line of its
 * own key. */
#define TABLE_ROWS 32
static const size_t table_sizes[3] = {256u << 10, 1u << 20, 16u << 20};

struct table_row {
    char prov[80], bufs[16];
    int ranks, nodes;
    double us[3];
};

static int table_parse(const char *line, struct table_row *r)
{
    int ver;
    return sscanf(line, "fc_perf-table %d %79s %15s %d %d %lf %lf %lf", &ver, r->prov, r->bufs,
                  &r->ranks, &r->nodes, &r->us[0], &r->us[1], &r->us[2]) == 8 &&
           ver == 1;
}

/* Reads the rows of FILE (a missing file is an empty table), puts `mine`
 * in place of the row with its key, writes the file back. */
static int table_merge(const char *file, const struct table_row *mine, struct table_row *rows,
                       int *nrows)
{
    int n = 0, placed = 0;
    FILE *f = fopen(file, "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof(line), f) && n < TABLE_ROWS - 1) {
            struct table_row r;
            if (!table_parse(line, &r))
                continue;
            if (!strcmp(r.prov, mine->prov) && !strcmp(r.bufs, mine->bufs) &&
                r.ranks == mine->ranks && r.nodes == mine->nodes) {
                if (placed)
                    continue;
                r = *mine;
                placed = 1;
            }
            rows[n++] = r;
        }
        fclose(f);
    } else if (errno != ENOENT) {
        fprintf(stderr, "fc_perf: cannot read the table file %s: %s\n", file, strerror(errno));
        return 1;
    }
    if (!placed)
        rows[n++] = *mine;
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%d", file, (int)getpid());
    f = fopen(tmp, "w");
    if (!f) {
        fprintf(stderr, "fc_perf: cannot write %s: %s\n", tmp, strerror(errno));
        return 1;
    }
    for (int i = 0; i < n; i++)
        fprintf(f, "fc_perf-table 1 %s %s %d %d %.3f %.3f %.3f\n", rows[i].prov, rows[i].bufs,
                rows[i].ranks, rows[i].nodes, rows[i].us[0], rows[i].us[1], rows[i].us[2]);
    if (fclose(f) != 0 || rename(tmp, file) != 0) {
        fprintf(stderr, "fc_perf: cannot write the table file %s: %s\n", file, strerror(errno));
        unlink(tmp);
        return 1;
    }
    *nrows = n;
    return 0;
}

static void human_size(size_t b, char *buf, size_t len)
{
    if (b >= (1u << 20))
        snprintf(buf, len, "%zu MiB", b >> 20);
    else
        snprintf(buf, len, "%zu KiB", b >> 10);
}

/* Prints the rows with the key of `mine` but any provider, side by side,
 * and the speed-up of the fastest provider over the slowest (picked at 1 MiB,
 * the seed's middle row, so that every row compares the same two). */
static void table_print(const struct table_row *rows, int nrows, const struct table_row *mine,
                        const struct perf_opts *o)
{
    const struct table_row *cols[TABLE_ROWS];
    int nc = 0;
    for (int i = 0; i < nrows; i++)
        if (!strcmp(rows[i].bufs, mine->bufs) && rows[i].ranks == mine->ranks &&
            rows[i].nodes == mine->nodes)
            cols[nc++] = &rows[i];
    int fast = 0, slow = 0;
    for (int i = 1; i < nc; i++) {
        if (cols[i]->us[1] < cols[fast]->us[1])
            fast = i;
        if (cols[i]->us[1] > cols[slow]->us[1])
            slow = i;
    }
    char sp[200] = "";
    if (nc > 1)
        snprintf(sp, sizeof(sp), "%s over %s", cols[fast]->prov, cols[slow]->prov);
    if (o->csv) {
        printf("message_bytes");
        for (int i = 0; i < nc; i++)
            printf(",%s_ms", cols[i]->prov);
        printf("%s\n", nc > 1 ? ",speedup" : "");
    } else {
        char how[512];
        perf_method_desc(o, how, sizeof(how));
        printf("# fc_perf --table: allreduce latency (ms), %s %s, %d ranks on %d node(s), %s "
               "buffers%s\n# time: %s\n",
               perf_dt_names[o->dt], perf_op_names[o->op], mine->ranks, mine->nodes, mine->bufs,
               nc > 1 ? "; the other columns are earlier runs kept in the table file" : "", how);
        printf("# %8s", "message");
        for (int i = 0; i < nc; i++)
            printf(" | %12.12s", cols[i]->prov);
        if (nc > 1)
            printf(" | speed-up, %s", sp);
        printf("\n");
    }
    for (int k = 0; k < 3; k++) {
        char hs[32];
        human_size(table_sizes[k], hs, sizeof(hs));
        if (o->csv)
            printf("%zu", table_sizes[k]);
        else
            printf("  %8s", hs);
        for (int i = 0; i < nc; i++)
            printf(o->csv ? ",%.4f" : " | %12.3f", cols[i]->us[k] / 1000.0);
        if (nc > 1) {
            double x = cols[fast]->us[k] > 0 ? cols[slow]->us[k] / cols[fast]->us[k] : 0;
            printf(o->csv ? ",%.2f" : " | %.1fx", x);
        }
        printf("\n");
    }
}

int perf_run_table(char *sb, char *rb, const struct perf_opts *o, fc_comm_t comm, int rank, int n,
                   const fc_comm_attr_t *attr, double *blk)
{
    struct table_row mine;
    memset(&mine, 0, sizeof(mine));
    /* device buffers: the column says the path (the seed's TCP vs RDMA is
     * staged tcp vs gdr on a GPU cluster) */
    snprintf(mine.prov, sizeof(mine.prov), "%s%s", attr->provider,
             !o->cuda     ? ""
             : attr->hmem ? "/gdr"
                          : "/staged");
    for (char *p = mine.prov; *p; p++)
        if (*p == ' ' || *p == '\t')
            *p = '_';
    snprintf(mine.bufs, sizeof(mine.bufs), "%s", o->cuda ? "device" : "host");
    mine.ranks = n;
    mine.nodes = attr->nnodes;
    size_t es = fc_datatype_size(o->dt);
    long wrong_total = 0;
    for (int k = 0; k < 3; k++) {
        size_t count = table_sizes[k] / es;
        struct perf_timing tm;
        long wrong;
        if (perf_measure(ALLREDUCE, count, count * es, sb, rb, o, comm, rank, n, blk, &tm, &wrong))
            return 1;
        mine.us[k] = tm.time * 1e6;
        wrong_total += wrong;
    }
    if (rank != 0)
        return wrong_total ? 1 : 0;
    struct table_row rows[TABLE_ROWS];
    int nrows = 1;
    rows[0] = mine;
    if (o->table_file && table_merge(o->table_file, &mine, rows, &nrows))
        return 1;
    table_print(rows, nrows, &mine, o);
    if (o->check && !o->csv)
        printf("# %s\n", wrong_total ? "WRONG RESULTS" : "all results correct");
    return wrong_total ? 1 : 0;
}
