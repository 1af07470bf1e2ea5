/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_perf: nccl-tests-style sweep of fabcoll's collectives, written
 * against the public API only. Run it under a launcher:
 *   fc_run -n 4 fc_perf -b 8 -e 256M -f 2
 * Times are measured as nccl-tests measures them: per size, warm-up calls,
 * a barrier, then N calls back to back timed as one interval on every rank;
 * a rank's time per call is that interval / N, and the time reported is the
 * largest over the ranks (with -R, the median of R such blocks). --latency
 * measures as OSU's latency tests do instead: a barrier before every call,
 * each rank timing only the call; a rank's times are averaged over the
 * iterations, and the average over ranks is reported with the smallest and
 * largest. Timing each call alone without a barrier between calls would let a
 * broadcast's root run ahead, so that receivers find their data already
 * there, and measure neither latency nor bandwidth.
 * algbw = size / time; busbw = algbw x the collective's bus factor
 * (nccl-tests' definitions). This file holds the options, the buffers, the
 * sweep and its output; perf.h says what the others hold.
 */
#define _GNU_SOURCE
#include "perf.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "gpu_util.h"

static const char usage[] =
    "Usage: fc_run -n N fc_perf [options]\n"
    "\n"
    "Sweeps message sizes for fabcoll collectives and prints, per size, the\n"
    "time per call and the algorithm and bus bandwidths as nccl-tests defines\n"
    "them (algbw = size / time; busbw = algbw x 2(n-1)/n for allreduce, (n-1)/n\n"
    "for allgather, reduce_scatter, alltoall, gather, scatter, allgatherv and\n"
    "alltoallv, 1 for broadcast and reduce). SIZE is the whole vector: for the\n"
    "blocked collectives n blocks of SIZE/n; allgatherv and alltoallv take even\n"
    "counts (as OSU's osu_allgatherv and osu_alltoallv).\n"
    "\n"
    "Time, by default as nccl-tests measures it: per size, the warm-up calls\n"
    "and a warm-up barrier, then a barrier and N calls back to back timed as\n"
    "one interval on every rank; a rank's time per call is that interval / N,\n"
    "and the time printed is the maximum over ranks (with -R R, the median of\n"
    "R such blocks, each a barrier and N calls). With --latency, as OSU's\n"
    "latency tests measure it: a barrier before every call, each rank timing\n"
    "only the call; each rank's times are averaged over the N calls, and the\n"
    "average over ranks is printed with the smallest and the largest rank's\n"
    "(avg, min, max).\n"
    "\n"
    "Options:\n"
    "  -C, --coll LIST       collectives, comma separated (default allreduce):\n"
    "                        allreduce bcast reduce allgather reduce_scatter\n"
    "                        alltoall barrier gather scatter allgatherv alltoallv,\n"
    "                        or 'all'\n"
    "  -b, --minbytes SIZE   smallest size (default 8; K/M/G suffixes)\n"
    "  -e, --maxbytes SIZE   largest size (default 32M)\n"
    "  -f, --stepfactor F    multiply the size by F each step (default 2)\n"
    "  -i, --stepbytes SIZE  add SIZE each step instead of multiplying\n"
    "  -n, --iters N         calls per timed block, N (default 20); with --latency\n"
    "                        the timed calls, each after its barrier\n"
    "  -w, --warmup N        untimed warm-up calls per size (default 5)\n"
    "  -R, --repeats R       timed blocks per size; the median block is printed\n"
    "                        (default 1)\n"
    "  -l, --latency         OSU's method: a barrier before every timed call; the\n"
    "                        average over ranks of each rank's mean time per call,\n"
    "                        with the minimum and maximum over ranks\n"
    "  -d, --datatype T      int8 uint8 int32 uint32 int64 uint64 float16 bfloat16\n"
    "                        float32 float64 float8_e4m3 float8_e5m2 (default\n"
    "                        float32)\n"
    "  -o, --op OP           sum prod min max avg (default sum), or premulsum: a\n"
    "                        pre-scaled sum (fc_op_create_premulsum) by 1, checked\n"
    "                        as a sum\n"
    "  -r, --root R          root of bcast and reduce (default 0)\n"
    "  -a, --algo NAME       force an algorithm (sets FC_ALGO=coll:NAME)\n"
    "  -I, --inplace         run in place\n"
    "  -D, --device KIND     host (default) or cuda: buffers in GPU memory (GPU\n"
    "                        local_rank % count), through the staged or gdr path\n"
    "  -S, --stream          with -D cuda: the stream-ordered twins (fc_allreduce_stream\n"
    "                        ...) on a stream of fc_perf's own, each call followed by\n"
    "                        cuStreamSynchronize: the time until the result is there\n"
    "                        (allreduce bcast reduce allgather reduce_scatter); a timed\n"
    "                        block or call ends with its synchronize\n"
    "  -B, --batch N         with -S: N calls queued on the stream before each\n"
    "                        synchronize, as a training step queues them; -n counts\n"
    "                        batches, and times are per call (a batch's time / N).\n"
    "                        Default 1\n"
    "  -H, --host-buffer SIDE  with -D cuda: mixed calls, the SIDE buffer (send or\n"
    "                        recv) in pageable host memory and the other on the GPU\n"
    "                        (not with -I). With -S a rank needs one buffer on the GPU:\n"
    "                        reduce's non-roots under -H send and bcast's under -H recv\n"
    "                        have none, and fabcoll refuses their calls. SIDE:pinned\n"
    "                        (send:pinned, recv:pinned) puts it in page-locked host\n"
    "                        memory (cuMemHostAlloc) instead\n"
    "  -c, --check           check every result against closed-form values\n"
    "                        (#wrong column; exit 1 if any is wrong): one untimed\n"
    "                        call per size, before its warm-up\n"
    "      --csv             comma-separated output\n"
    "      --json            one JSON object per line\n"
    "      --table           the seed article's table instead of a sweep: allreduce\n"
    "                        latency (ms) at 256 KiB, 1 MiB and 16 MiB on this run's\n"
    "                        provider (-d, -o, -n, -w, -R, -l, -D and -c apply)\n"
    "      --table-file FILE keep the table's rows in FILE (implies --table): each\n"
    "                        run adds or replaces the row of its provider, then the\n"
    "                        rows of every provider measured at the same rank count,\n"
    "                        node count and buffer kind print side by side with the\n"
    "                        speed-up of the fastest over the slowest. Run once per\n"
    "                        provider (FI_PROVIDER=... or fc_run -p ...); with --csv\n"
    "                        the table prints as CSV\n"
    "      --first-call      the first call on new buffers against the second: per\n"
    "                        size, -R rounds (default 1) each allocating and\n"
    "                        writing a new pair of buffers, timing one call and\n"
    "                        then another on them (the largest time over ranks;\n"
    "                        medians printed, with their ratio)\n"
    "      --register        register the buffers ahead with fc_mem_register (with\n"
    "                        --first-call: timed in the reg column)\n"
    "  -h, --help            this text\n"
    "\n"
    "Example, the seed article's TCP-vs-RDMA table on this machine's providers:\n"
    "  fc_run -n 2 -p tcp fc_perf --table-file t.txt\n"
    "  fc_run -n 2 -p shm fc_perf --table-file t.txt\n"
    "\n"
    "Sizes are nccl-tests' sizes: the bytes of one rank's buffer for allreduce,\n"
    "bcast and reduce; the whole receive (allgather) or send (reduce_scatter,\n"
    "alltoall) buffer of n blocks for the others.\n"
    "\n"
    "--csv columns: time_us is the time printed; min_us, avg_us and max_us are\n"
    "the smallest, mean and largest rank's time per call (of the median block).\n";

static int lookup(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcasecmp(s, names[i]) == 0)
            return i;
    return -1;
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    double v = strtod(s, &end);
    double mul = 1;
    switch (*end) {
    case 'k':
    case 'K':
        mul = 1024;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1024.0 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1024.0 * 1024 * 1024;
        end++;
        break;
    default: break;
    }
    if (end == s || *end || v < 0)
        return -1;
    *out = (size_t)(v * mul);
    return 0;
}

static double bus_factor(enum perf_coll c, int n)
{
    switch (c) {
    case ALLREDUCE: return n > 1 ? 2.0 * (n - 1) / n : 0;
    case ALLGATHER:
    case REDUCE_SCATTER:
    case ALLTOALL:
    case GATHER:
    case SCATTER:
    case ALLGATHERV:
    case ALLTOALLV: return n > 1 ? (double)(n - 1) / n : 0;
    case BCAST:
    case REDUCE: return 1;
    default: return 0;
    }
}

/* Whether the send (side 1) or receive (side 2) buffer is GPU memory:
 * with -D cuda, unless -H puts that side in host memory. */
static int on_gpu(const struct perf_opts *o, int side)
{
    return o->cuda && o->host_side != side;
}

/* Whether that side is the -H SIDE:pinned buffer (page-locked by CUDA). */
static int host_pinned(const struct perf_opts *o, int side)
{
    return o->host_pinned && o->host_side == side;
}

/* len bytes of GPU or page-aligned host memory (page-locked by CUDA for
 * -H SIDE:pinned), every byte set to byte. */
static char *buf_new(const struct perf_opts *o, int side, size_t len, int byte)
{
    int gpu = on_gpu(o, side);
    char *p = gpu                    ? gu_alloc(len)
              : host_pinned(o, side) ? gu_host_alloc(len)
                                     : aligned_alloc(4096, len);
    if (p && gpu)
        gu_memset(p, byte, len);
    else if (p)
        memset(p, byte, len);
    return p;
}

static void free_buffers(const struct perf_opts *o, char *sb, char *rb)
{
    char *b[2] = {sb, rb};
    for (int side = 1; side <= 2; side++) {
        if (on_gpu(o, side))
            gu_free(b[side - 1]);
        else if (host_pinned(o, side))
            gu_host_free(b[side - 1]);
        else
            free(b[side - 1]);
    }
    free(perf_host_send);
    free(perf_host_recv);
}

int main(int argc, char **argv)
{
    struct perf_opts o = {.minb = 8,
                          .maxb = 32u << 20,
                          .factor = 2,
                          .iters = 20,
                          .warmup = 5,
                          .batch = 1,
                          .repeats = 1,
                          .dt = FC_FLOAT32,
                          .op = FC_SUM};
    const char *algo = NULL, *collist = "allreduce";
    static const struct option lo[] = {{"coll", required_argument, NULL, 'C'},
                                       {"minbytes", required_argument, NULL, 'b'},
                                       {"maxbytes", required_argument, NULL, 'e'},
                                       {"stepfactor", required_argument, NULL, 'f'},
                                       {"stepbytes", required_argument, NULL, 'i'},
                                       {"iters", required_argument, NULL, 'n'},
                                       {"warmup", required_argument, NULL, 'w'},
                                       {"datatype", required_argument, NULL, 'd'},
                                       {"op", required_argument, NULL, 'o'},
                                       {"root", required_argument, NULL, 'r'},
                                       {"algo", required_argument, NULL, 'a'},
                                       {"inplace", no_argument, NULL, 'I'},
                                       {"check", no_argument, NULL, 'c'},
                                       {"csv", no_argument, NULL, 1},
                                       {"device", required_argument, NULL, 'D'},
                                       {"stream", no_argument, NULL, 'S'},
                                       {"batch", required_argument, NULL, 'B'},
                                       {"host-buffer", required_argument, NULL, 'H'},
                                       {"json", no_argument, NULL, 2},
                                       {"help", no_argument, NULL, 'h'},
                                       {"table", no_argument, NULL, 3},
                                       {"table-file", required_argument, NULL, 4},
                                       {"repeats", required_argument, NULL, 'R'},
                                       {"latency", no_argument, NULL, 'l'},
                                       {"first-call", no_argument, NULL, 5},
                                       {"register", no_argument, NULL, 6},
                                       {NULL, 0, NULL, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "C:b:e:f:i:n:w:d:o:r:a:IcD:SB:H:R:lh", lo, NULL)) != -1) {
        switch (ch) {
        case 'C': collist = optarg; break;
        case 'b':
            if (parse_size(optarg, &o.minb))
                goto bad;
            break;
        case 'e':
            if (parse_size(optarg, &o.maxb))
                goto bad;
            break;
        case 'f': o.factor = atof(optarg); break;
        case 'i':
            if (parse_size(optarg, &o.stepb))
                goto bad;
            break;
        case 'n': o.iters = atoi(optarg); break;
        case 'w': o.warmup = atoi(optarg); break;
        case 'R': o.repeats = atoi(optarg); break;
        case 'l': o.latency = 1; break;
        case 'd': {
            int v = lookup(optarg, perf_dt_names, PERF_NDT);
            if (v < 0)
                goto bad;
            o.dt = (fc_datatype_t)v;
            break;
        }
        case 'o': {
            if (!strcasecmp(optarg, "premulsum")) { /* a sum's check; the op made below */
                o.premul = 1;
                o.op = FC_SUM;
                break;
            }
            int v = lookup(optarg, perf_op_names, 5);
            if (v < 0)
                goto bad;
            o.op = (fc_op_t)v;
            break;
        }
        case 'r': o.root = atoi(optarg); break;
        case 'a': algo = optarg; break;
        case 'I': o.inplace = 1; break;
        case 'c': o.check = 1; break;
        case 'S': o.stream = 1; break;
        case 'B': o.batch = atoi(optarg); break;
        case 'H': {
            const char *colon = strchr(optarg, ':');
            size_t k = colon ? (size_t)(colon - optarg) : strlen(optarg);
            if (k == 4 && !strncasecmp(optarg, "send", 4))
                o.host_side = 1;
            else if (k == 4 && !strncasecmp(optarg, "recv", 4))
                o.host_side = 2;
            else
                goto bad;
            if (colon && strcasecmp(colon + 1, "pinned"))
                goto bad;
            o.host_pinned = colon != NULL;
            break;
        }
        case 'D':
            if (!strcasecmp(optarg, "cuda"))
                o.cuda = 1;
            else if (strcasecmp(optarg, "host"))
                goto bad;
            break;
        case 1: o.csv = 1; break;
        case 2: o.json = 1; break;
        case 3: o.table = 1; break;
        case 4:
            o.table = 1;
            o.table_file = optarg;
            break;
        case 5: o.first = 1; break;
        case 6: o.reg = 1; break;
        case 'h': fputs(usage, stdout); return 0;
        default: goto bad;
        }
    }
    if (o.iters < 1 || o.warmup < 0 || o.batch < 1 || o.repeats < 1 ||
        (o.factor <= 1 && !o.stepb) || o.minb > o.maxb)
        goto bad;
    if (o.batch > 1 && !o.stream) {
        fprintf(stderr, "fc_perf: -B (calls per synchronize) needs -S\n");
        return 2;
    }
    if (o.host_side && (!o.cuda || o.inplace || o.table)) {
        fprintf(stderr, "fc_perf: -H (a host buffer in mixed calls) needs -D cuda, and no -I "
                        "or --table\n");
        return 2;
    }
    if (o.first && (o.table || o.check || o.stream)) {
        fprintf(stderr, "fc_perf: --first-call times plain calls: not with --table, -c or -S\n");
        return 2;
    }
    if (o.stream && (!o.cuda || o.table)) {
        fprintf(stderr, "fc_perf: -S (stream-ordered calls) needs -D cuda and no --table\n");
        return 2;
    }
    if (o.table) {
        /* the seed's table: allreduce at its three sizes, whatever -C/-b/-e say */
        collist = "allreduce";
        o.minb = PERF_TABLE_MIN;
        o.maxb = PERF_TABLE_MAX;
        o.json = 0;
    }
    {
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", collist);
        for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
            if (!strcasecmp(tok, "all")) {
                for (int k = 0; k < NCOLL; k++)
                    o.colls[o.ncolls++] = k;
                continue;
            }
            int k = lookup(tok, perf_coll_names, NCOLL);
            if (k < 0 && !strcasecmp(tok, "broadcast"))
                k = BCAST;
            if (k < 0) {
                fprintf(stderr, "fc_perf: unknown collective '%s'\n", tok);
                return 2;
            }
            if (o.ncolls < NCOLL)
                o.colls[o.ncolls++] = k;
        }
    }
    for (int k = 0; k < o.ncolls && o.inplace; k++)
        if (o.colls[k] == ALLTOALLV) {
            fprintf(stderr, "fc_perf: -I: alltoallv has no in-place form\n");
            return 2;
        }
    for (int k = 0; k < o.ncolls && o.stream; k++)
        if (o.colls[k] == ALLTOALL || o.colls[k] == BARRIER) {
            fprintf(stderr, "fc_perf: -S: %s has no stream-ordered twin\n",
                    perf_coll_names[o.colls[k]]);
            return 2;
        }
    if (algo) {
        /* before the first fabcoll call: settings are read once */
        char spec[512] = "";
        size_t off = 0;
        for (int k = 0; k < o.ncolls; k++)
            off += (size_t)snprintf(spec + off, sizeof(spec) - off, "%s%s:%s", k ? "," : "",
                                    perf_coll_names[o.colls[k]], algo);
        setenv("FC_ALGO", spec, 1);
    }

    fc_comm_t comm;
    fc_result_t rc = fc_comm_init(&comm);
    if (rc != FC_SUCCESS) {
        fprintf(stderr, "fc_perf: %s\n", fc_last_error());
        return 1;
    }
    int rank = fc_comm_rank(comm), n = fc_comm_size(comm);
    if (o.root < 0 || o.root >= n)
        o.root = 0;
    fc_comm_attr_t attr;
    fc_comm_query(comm, &attr);
    size_t es = fc_datatype_size(o.dt);
    size_t bufb = o.maxb + 4096;
    if (perf_op_make(&o, comm) != FC_SUCCESS) {
        fprintf(stderr, "fc_perf: -o premulsum: %s\n", fc_last_error());
        return 1;
    }
    char *sb, *rb;
    if (o.cuda) { /* the GPU first: buffers there need it */
        const char *why;
        if (gu_init(attr.local_rank, &why) != 0) {
            fprintf(stderr, "fc_perf: -D cuda: %s\n", why);
            return 1;
        }
        if (o.stream && !(perf_stream = gu_stream_create())) {
            fprintf(stderr, "fc_perf: -S: cannot create a CUDA stream\n");
            return 1;
        }
        perf_host_send = malloc(bufb);
        perf_host_recv = malloc(bufb);
        perf_host_bytes = bufb;
    }
    /* -H: that side in pageable host memory (the copies to and from the
     * shadows go through CUDA's unified addressing either way) */
    sb = buf_new(&o, 1, bufb, 1);
    rb = buf_new(&o, 2, bufb, 0);
    if (!sb || !rb) {
        fprintf(stderr, "fc_perf: cannot allocate 2 x %zu bytes%s\n", bufb,
                o.cuda ? " of GPU memory" : "");
        return 1;
    }
    double *times = malloc(sizeof(double) * 4 * (size_t)o.repeats); /* measure's blk */
    if (!times) {
        fprintf(stderr, "fc_perf: out of memory\n");
        return 1;
    }
    if (o.first) {
        int frc = perf_run_first(&o, comm, rank, n, &attr);
        free(times);
        free_buffers(&o, sb, rb);
        fc_comm_destroy(comm);
        return frc;
    }
    fc_memhandle_t hs = NULL, hr = NULL; /* --register: the sweep's buffers, ahead */
    if (o.reg && (fc_mem_register(comm, sb, bufb, &hs) != FC_SUCCESS ||
                  fc_mem_register(comm, rb, bufb, &hr) != FC_SUCCESS)) {
        fprintf(stderr, "fc_perf: --register: %s\n", fc_last_error());
        return 1;
    }
    if (o.table) {
        int trc = perf_run_table(sb, rb, &o, comm, rank, n, &attr, times);
        free(times);
        free_buffers(&o, sb, rb);
        fc_comm_destroy(comm);
        return trc;
    }
    static const char *tiers[] = {"shm", "net", "rdma", "gdr"};
    long total_wrong = 0;
    char how[512], reps[32] = "";
    perf_method_desc(&o, how, sizeof(how));
    if (o.repeats > 1)
        snprintf(reps, sizeof(reps), "%d x ", o.repeats);
    if (rank == 0 && !o.csv && !o.json)
        printf("# fc_perf: %d ranks on %d node(s), provider %s (tier %s), %s %s%s, %s buffers%s%s, "
               "%d warm-up and %s%d timed %s per size\n# time: %s\n",
               n, attr.nnodes, attr.provider, tiers[attr.tier & 3], perf_dt_names[o.dt],
               o.premul ? "premulsum" : perf_op_names[o.op], o.inplace ? ", in place" : "",
               !o.cuda ? "host"
               : o.host_side == 1
                   ? (o.host_pinned ? "pinned host send, GPU receive" : "host send, GPU receive")
               : o.host_side == 2
                   ? (o.host_pinned ? "GPU send, pinned host receive" : "GPU send, host receive")
                   : "GPU",
               o.cuda ? (attr.hmem ? " (direct, gdr)" : " (staged)") : "",
               o.stream ? (o.batch > 1 ? ", stream-ordered calls (time per call of batches "
                                         "queued before a synchronize)"
                                       : ", stream-ordered calls")
                        : "",
               o.warmup, reps, o.iters, o.stream && o.batch > 1 ? "batches" : "calls", how);
    if (rank == 0 && o.csv)
        printf("collective,ranks,provider,size,count,type,op,root,time_us,min_us,avg_us,"
               "algbw_GBps,busbw_GBps,wrong,max_us\n");
    for (int ci = 0; ci < o.ncolls; ci++) {
        enum perf_coll c = (enum perf_coll)o.colls[ci];
        if (rank == 0 && !o.csv && !o.json) {
            printf("#\n# %s\n# %12s %12s %8s %6s %5s %11s", perf_coll_names[c], "size(B)", "count",
                   "type", "redop", "root", o.latency ? "avg(us)" : "time(us)");
            if (o.latency)
                printf(" %11s %11s", "min(us)", "max(us)");
            printf(" %11s %11s %7s\n", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
        }
        for (size_t bytes = o.minb; bytes <= o.maxb;) {
            size_t count = bytes / es;
            if (perf_blocked(c))
                count /= (size_t)n;
            if (c == BARRIER)
                count = 0;
            size_t real = perf_blocked(c) ? count * (size_t)n * es : count * es;
            struct perf_timing tm;
            long wrong;
            if (perf_measure(c, count, real, sb, rb, &o, comm, rank, n, times, &tm, &wrong))
                return 1;
            total_wrong += wrong;
            double algbw = tm.time > 0 ? (double)real / tm.time / 1e9 : 0;
            double busbw = algbw * bus_factor(c, n);
            if (rank == 0) {
                const char *rootstr =
                    (c == BCAST || c == REDUCE || c == GATHER || c == SCATTER) ? "" : "-";
                char rootbuf[16];
                snprintf(rootbuf, sizeof(rootbuf), "%d", o.root);
                if (*rootstr == '\0')
                    rootstr = rootbuf;
                const char *opstr = (c == ALLREDUCE || c == REDUCE || c == REDUCE_SCATTER)
                                        ? (o.premul ? "premulsum" : perf_op_names[o.op])
                                        : "-";
                if (o.csv)
                    printf("%s,%d,%s,%zu,%zu,%s,%s,%s,%.3f,%.3f,%.3f,%.4f,%.4f,%ld,%.3f\n",
                           perf_coll_names[c], n, attr.provider, real, count, perf_dt_names[o.dt],
                           opstr, rootstr, tm.time * 1e6, tm.min * 1e6, tm.avg * 1e6, algbw, busbw,
                           wrong, tm.max * 1e6);
                else if (o.json)
                    printf("{\"collective\":\"%s\",\"ranks\":%d,\"provider\":\"%s\",\"size\":%zu,"
                           "\"count\":%zu,\"type\":\"%s\",\"op\":\"%s\",\"root\":\"%s\","
                           "\"method\":\"%s\",\"time_us\":%.3f,\"min_us\":%.3f,\"avg_us\":%.3f,"
                           "\"max_us\":%.3f,\"algbw\":%.4f,\"busbw\":%.4f,\"wrong\":%ld}\n",
                           perf_coll_names[c], n, attr.provider, real, count, perf_dt_names[o.dt],
                           opstr, rootstr, o.latency ? "osu" : "nccl-tests", tm.time * 1e6,
                           tm.min * 1e6, tm.avg * 1e6, tm.max * 1e6, algbw, busbw, wrong);
                else if (o.latency)
                    printf("  %12zu %12zu %8s %6s %5s %11.2f %11.2f %11.2f %11.3f %11.3f %7ld\n",
                           real, count, perf_dt_names[o.dt], opstr, rootstr, tm.time * 1e6,
                           tm.min * 1e6, tm.max * 1e6, algbw, busbw, wrong);
                else
                    printf("  %12zu %12zu %8s %6s %5s %11.2f %11.3f %11.3f %7ld\n", real, count,
                           perf_dt_names[o.dt], opstr, rootstr, tm.time * 1e6, algbw, busbw, wrong);
            }
            if (c == BARRIER)
                break;
            size_t next = o.stepb ? bytes + o.stepb : (size_t)((double)bytes * o.factor);
            if (next <= bytes)
                break;
            bytes = next;
        }
    }
    free(times);
    if (perf_stream)
        gu_stream_destroy(perf_stream);
    if (hs)
        fc_mem_deregister(comm, hs);
    if (hr)
        fc_mem_deregister(comm, hr);
    free_buffers(&o, sb, rb);
    fc_comm_destroy(comm);
    if (o.check && rank == 0 && !o.csv && !o.json)
        printf("# %s\n", total_wrong ? "WRONG RESULTS" : "all results correct");
    return total_wrong ? 1 : 0;
bad:
    fprintf(stderr, "fc_perf: bad arguments\n\n%s", usage);
    return 2;
}
