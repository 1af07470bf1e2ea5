/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_sim: runs the real schedules of a collective at cluster scale (up to
 * 4096 ranks and beyond) in one process, without data, and prints per
 * algorithm the cost model's predicted time next to the time a
 * discrete-event simulation of the schedules gives under the same
 * alpha-beta-gamma parameters, so the tuner's choice at scale can be read
 * and checked on paper.
 *
 * It builds every rank's schedule with the algorithm's own build() (the
 * code the library runs) and plays all of them at once with src/sim.c
 * (its model is described in sim.h). A message whose length differs from
 * its receive, or a step left unfinished, is reported as a schedule error:
 * fc_sim is also a check that an algorithm's schedules agree with each
 * other at that size.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../coll/coll.h"
#include "../../coll/select.h"
#include "../../prov/prov.h"
#include "../comm.h"
#include "../log.h"
#include "../sim.h"

#define FC_STR_(x) #x
#define FC_STR(x) FC_STR_(x)
static const char usage[] =
    "Usage: fc_sim [OPTIONS]\n"
    "\n"
    "Runs the schedules of fabcoll's algorithms at simulated scale (no data, no\n"
    "network) and prints, per algorithm, the cost model's predicted time and the\n"
    "time a discrete-event simulation of the real schedules gives under the same\n"
    "parameters. The algorithm the tuner would pick is marked with '*'.\n"
    "\n"
    "Options:\n"
    "  -c, --colls LIST     collectives, comma-separated (default: all of\n"
    "                       allreduce,bcast,reduce,allgather,reduce_scatter,alltoall,barrier)\n"
    "  -n, --ranks LIST     communicator sizes (default 64,1024,4096); algorithms with\n"
    "                       O(n) steps per rank (ring, chain, pairwise) take about a\n"
    "                       minute and 5 GB at 4096 ranks\n"
    "  -b, --bytes LIST     the collective's total bytes, with K/M/G suffixes\n"
    "                       (default 8,64K,16M); for allgather, reduce_scatter and\n"
    "                       alltoall the per-rank count is bytes / (4 * ranks)\n"
    "  -a, --algo NAME      only this algorithm\n"
    "  -p, --provider P     cost parameters of this provider's table (default tcp)\n"
    "  -N, --nodes N        N nodes of -L ranks each (N * L ranks, rank r on node\n"
    "                       r / L; replaces -n): a message between ranks of one node\n"
    "                       takes the node provider's alpha and beta, across nodes\n"
    "                       the -p provider's, in the model and the simulation, and\n"
    "                       node-aware algorithms (hier) take part\n"
    "  -L, --local L        ranks per node with -N (default 8)\n"
    "      --node-provider P  the table for ranks of one node (default shm)\n"
    "      --alpha US       override: latency per message, microseconds\n"
    "      --beta NS        override: time per byte on the wire, nanoseconds\n"
    "      --gamma NS       override: time per byte reduced, nanoseconds\n"
    "      --hs US          override: the provider's handshake for a message above\n"
    "                       --hs-min bytes, microseconds, in exchanges and one-way\n"
    "                       steps alike (shm: CMA copy and acknowledgement past 4 KiB,\n"
    "                       3.3 us in exchanges only; tcp: rendezvous past 16 KiB,\n"
    "                       25 us). The model column only: the simulation has no\n"
    "                       handshake\n"
    "      --hs-oneway US   override: the handshake in one-way steps alone\n"
    "      --hs-min BYTES   override: the largest message without it (0: none)\n"
    "      --chunk BYTES    override: the engine's pipeline chunk (0: steps not cut)\n"
    "      --window N       override: chunks of a step in flight (1..64)\n"
    "      --oversub K      model K ranks per CPU (as when a node runs more ranks\n"
    "                       than it has CPUs; fabcoll measures it at init): each\n"
    "                       step costs a handoff more and the ranks working in a\n"
    "                       step share the CPUs. Changes the model column and the\n"
    "                       pick, not the simulation, which gives every rank a CPU\n"
    "      --handoff US     with --oversub: the handoff per step, microseconds\n"
    "                       (default " FC_STR(COLL_HANDOFF_US) ")\n"
    "      --csv            one line per algorithm, comma-separated\n"
    "  -h, --help           this text\n"
    "\n"
    "Output columns: model = the algorithm's closed-form cost; simulated = the\n"
    "end of the last rank's last step in the simulation; msgs and sent = the\n"
    "most messages (chunks) and bytes any one rank sends; steps = simulated steps\n"
    "(chunks) of all ranks together.\n"
    "\n"
    "Exit status: 0 when every schedule completed and matched, 1 when a schedule\n"
    "error was found (printed to stderr), 2 on a usage error.\n"
    "\n"
    "Examples: fc_sim -c allreduce -n 4096 -b 8,1M,256M -p verbs\n"
    "          fc_sim -c allreduce -N 512 -L 8 -b 8,1M,256M -p verbs\n";

/* Builds every rank's schedule into the simulation, then plays it. */
static int simulate(struct sim *s, const struct coll_algo *al, struct coll_args a,
                    const struct coll_cost *c, int window)
{
    sim_init(s, a.nranks, (size_t)c->chunk, window);
    s->node = a.node;
    s->alpha_node = c->alpha_node;
    s->beta_node = c->beta_node;
    for (int r = 0; r < a.nranks; r++) {
        struct sched sc;
        a.rank = r;
        sched_init(&sc, a.dt, a.op, a.nranks);
        fc_result_t rc = al->build(&sc, &a);
        if (rc == FC_SUCCESS)
            rc = sc.build_err;
        if (rc != FC_SUCCESS) {
            snprintf(s->err, sizeof(s->err), "build failed at rank %d: %s", r, fc_strerror(rc));
            sched_release(&sc);
            return -1;
        }
        int bad = sim_add(s, &sc);
        sched_release(&sc);
        if (bad)
            return -1;
    }
    return sim_run(s, c->alpha, c->beta, c->gamma);
}

/* ---- command line ----------------------------------------------------------- */
static int parse_size(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -1;
    switch (*end) {
    case 'k': case 'K': v *= 1024; end++; break;
    case 'm': case 'M': v *= 1024 * 1024; end++; break;
    case 'g': case 'G': v *= 1024.0 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end)
        return -1;
    *out = v;
    return 0;
}

static void fmt_time(double t, char *out, size_t len)
{
    if (t < 1e-3)
        snprintf(out, len, "%.4g us", t * 1e6);
    else if (t < 1)
        snprintf(out, len, "%.4g ms", t * 1e3);
    else
        snprintf(out, len, "%.4g s", t);
}

#define MAXLIST 32

static int split_list(char *s, char **items)
{
    int k = 0;
    for (char *tok = strtok(s, ","); tok && k < MAXLIST; tok = strtok(NULL, ","))
        items[k++] = tok;
    return k;
}

int main(int argc, char **argv)
{
    enum { O_ALPHA = 256, O_BETA, O_GAMMA, O_CHUNK, O_WINDOW, O_CSV, O_OVERSUB, O_HANDOFF,
           O_HS, O_HS_MIN, O_HS1, O_NODE_PROV };
    static const struct option opts[] = {
        {"colls", required_argument, NULL, 'c'}, {"ranks", required_argument, NULL, 'n'},
        {"bytes", required_argument, NULL, 'b'}, {"algo", required_argument, NULL, 'a'},
        {"provider", required_argument, NULL, 'p'}, {"alpha", required_argument, NULL, O_ALPHA},
        {"beta", required_argument, NULL, O_BETA}, {"gamma", required_argument, NULL, O_GAMMA},
        {"chunk", required_argument, NULL, O_CHUNK}, {"window", required_argument, NULL, O_WINDOW},
        {"csv", no_argument, NULL, O_CSV}, {"help", no_argument, NULL, 'h'},
        {"oversub", required_argument, NULL, O_OVERSUB},
        {"handoff", required_argument, NULL, O_HANDOFF}, {"hs", required_argument, NULL, O_HS},
        {"hs-min", required_argument, NULL, O_HS_MIN}, {"hs-oneway", required_argument, NULL, O_HS1},
        {"nodes", required_argument, NULL, 'N'}, {"local", required_argument, NULL, 'L'},
        {"node-provider", required_argument, NULL, O_NODE_PROV},
        {NULL, 0, NULL, 0}};
    char colls_s[256] = "allreduce,bcast,reduce,allgather,reduce_scatter,alltoall,barrier";
    char ranks_s[256] = "64,1024,4096";
    char bytes_s[256] = "8,64K,16M";
    const char *prov = "tcp", *only = NULL, *node_prov = "shm";
    long nodes = 0, local = 8;
    double alpha = -1, beta = -1, gamma_ = -1, chunk_ = -1, oversub = 0,
           handoff = COLL_HANDOFF_S, hs = -1, hs_min = -1, hs1 = -1;
    int window = 0;
    int csv = 0, c;
    while ((c = getopt_long(argc, argv, "c:n:b:a:p:N:L:h", opts, NULL)) != -1) {
        char *end = NULL;
        switch (c) {
        case 'c': snprintf(colls_s, sizeof(colls_s), "%s", optarg); break;
        case 'n': snprintf(ranks_s, sizeof(ranks_s), "%s", optarg); break;
        case 'b': snprintf(bytes_s, sizeof(bytes_s), "%s", optarg); break;
        case 'a': only = optarg; break;
        case 'p': prov = optarg; break;
        case O_NODE_PROV: node_prov = optarg; break;
        case 'N':
        case 'L': {
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > (1 << 20)) {
                fprintf(stderr, "fc_sim: -%c %s: want 1..1048576\n", c, optarg);
                return 2;
            }
            *(c == 'N' ? &nodes : &local) = v;
            break;
        }
        case O_ALPHA: case O_BETA: case O_GAMMA: case O_OVERSUB: case O_HANDOFF: case O_HS:
        case O_HS1: {
            double v = strtod(optarg, &end);
            if (!end || *end || v < 0 || ((c == O_OVERSUB || c == O_HANDOFF) && v > 1e6)) {
                fprintf(stderr, "fc_sim: %s: not a non-negative number\n", optarg);
                return 2;
            }
            if (c == O_OVERSUB)
                oversub = v;
            else if (c == O_HS)
                hs = v * 1e-6;
            else if (c == O_HS1)
                hs1 = v * 1e-6;
            else if (c == O_HANDOFF)
                handoff = v * 1e-6;
            else if (c == O_ALPHA)
                alpha = v * 1e-6;
            else if (c == O_BETA)
                beta = v * 1e-9;
            else
                gamma_ = v * 1e-9;
            break;
        }
        case O_HS_MIN:
        case O_CHUNK:
            if (parse_size(optarg, c == O_CHUNK ? &chunk_ : &hs_min)) {
                fprintf(stderr, "fc_sim: --%s %s: want bytes with an optional K, M or G\n",
                        c == O_CHUNK ? "chunk" : "hs-min", optarg);
                return 2;
            }
            break;
        case O_WINDOW: {
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 64) {
                fprintf(stderr, "fc_sim: --window %s: want 1..64\n", optarg);
                return 2;
            }
            window = (int)v;
            break;
        }
        case O_CSV: csv = 1; break;
        case 'h': fputs(usage, stdout); return 0;
        default: fputs(usage, stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "fc_sim: unexpected argument '%s'\n%s", argv[optind], usage);
        return 2;
    }
    struct coll_cost cc;
    int pwindow;
    comm_cost_params(prov, 1, &cc, &pwindow);
    if (alpha >= 0)
        cc.alpha = alpha;
    if (beta >= 0)
        cc.beta = beta;
    if (gamma_ >= 0)
        cc.gamma = gamma_;
    if (hs >= 0)
        cc.hs = cc.hs_oneway = hs;
    if (hs1 >= 0)
        cc.hs_oneway = hs1;
    if (hs_min >= 0)
        cc.hs_min = hs_min;
    if (chunk_ >= 0)
        cc.chunk = chunk_;
    cc.oversub = oversub;
    cc.handoff = handoff;
    if (!window)
        window = pwindow;
    int *node = NULL;
    if (nodes) { /* two link classes: the node's own and the network's */
        if (nodes * local > (1 << 20)) {
            fprintf(stderr, "fc_sim: -N %ld -L %ld: more than 1048576 ranks\n", nodes, local);
            return 2;
        }
        struct coll_cost nc;
        comm_cost_params(node_prov, 1, &nc, NULL);
        cc.alpha_node = nc.alpha;
        cc.beta_node = nc.beta;
        snprintf(ranks_s, sizeof(ranks_s), "%ld", nodes * local);
        node = malloc((size_t)(nodes * local) * sizeof(int));
        if (!node) {
            fprintf(stderr, "fc_sim: out of memory\n");
            return 1;
        }
        for (long r = 0; r < nodes * local; r++)
            node[r] = (int)(r / local);
    }
    struct coll_tuning tun;
    coll_tuning_init(&tun, &cc);

    char *cl[MAXLIST], *rl[MAXLIST], *bl[MAXLIST];
    int ncl = split_list(colls_s, cl), nrl = split_list(ranks_s, rl), nbl = split_list(bytes_s, bl);
    int kinds[MAXLIST], ranks[MAXLIST];
    double bytes[MAXLIST];
    for (int i = 0; i < ncl; i++) {
        kinds[i] = coll_kind_from_name(cl[i], strlen(cl[i]));
        if (kinds[i] < 0) {
            fprintf(stderr, "fc_sim: unknown collective '%s' (fc_info -a lists them)\n", cl[i]);
            return 2;
        }
    }
    for (int i = 0; i < nrl; i++) {
        char *end;
        long v = strtol(rl[i], &end, 10);
        if (*end || v < 1 || v > (1 << 20)) {
            fprintf(stderr, "fc_sim: ranks '%s': want 1..1048576\n", rl[i]);
            return 2;
        }
        ranks[i] = (int)v;
    }
    for (int i = 0; i < nbl; i++)
        if (parse_size(bl[i], &bytes[i])) {
            fprintf(stderr, "fc_sim: bytes '%s': want a number with an optional K, M or G\n",
                    bl[i]);
            return 2;
        }
    if (only) {
        int found = 0;
        for (int i = 0; coll_algos[i]; i++)
            if (!strcmp(coll_algos[i]->name, only))
                found = 1;
        if (!found) {
            fprintf(stderr, "fc_sim: unknown algorithm '%s' (fc_info -a lists them)\n", only);
            return 2;
        }
    }

    if (csv)
        printf("collective,ranks,bytes,algorithm,model_us,simulated_us,max_msgs_per_rank,"
               "max_bytes_sent_per_rank,steps,tuner_choice\n");
    else
        printf("fc_sim: provider table %s: alpha %.2f us/message, beta %.4f ns/byte "
               "(%.2f GB/s), gamma %.4f ns/byte, chunk %.0f bytes, window %d",
               prov, cc.alpha * 1e6, cc.beta * 1e9, 1e-9 / cc.beta, cc.gamma * 1e9, cc.chunk,
               window);
    if (!csv && node)
        printf("; %ld nodes x %ld ranks, inside a node %s's table: alpha %.2f us, beta %.4f "
               "ns/byte", nodes, local, node_prov, cc.alpha_node * 1e6, cc.beta_node * 1e9);
    if (!csv && cc.hs_min > 0 && (cc.hs > 0 || cc.hs_oneway > 0))
        printf(", handshake above %.0f bytes %.1f us (%.1f one way)", cc.hs_min, cc.hs * 1e6,
               cc.hs_oneway * 1e6);
    if (!csv)
        printf(oversub > 1 ? "; %.3g ranks per CPU, handoff %.1f us per step\n" : "\n", oversub,
               handoff * 1e6);
    int errors = 0;
    for (int ki = 0; ki < ncl; ki++)
        for (int ri = 0; ri < nrl; ri++)
            for (int bi = 0; bi < nbl; bi++) {
                enum coll_kind k = (enum coll_kind)kinds[ki];
                int n = ranks[ri];
                if (k == COLL_BARRIER && bi > 0)
                    break;
                size_t count = (size_t)(bytes[bi] / 4);
                if (coll_blocked(k) || k == COLL_ALLGATHERV)
                    count = count / (size_t)n ? count / (size_t)n : 1;
                struct coll_args a = {.kind = k, .rank = 0, .nranks = n, .root = 0,
                                      .count = k == COLL_BARRIER ? 0 : count,
                                      .dt = FC_FLOAT32, .op = FC_SUM, .esize = 4,
                                      .node = node, .nnodes = node ? (int)nodes : 0};
                /* the v-collectives: count per rank (per pair for alltoallv),
                 * the same on every rank */
                size_t *vc = NULL;
                if (coll_is_v(k)) {
                    vc = malloc(2 * sizeof(size_t) * (size_t)n);
                    if (!vc) {
                        fprintf(stderr, "fc_sim: out of memory\n");
                        return 1;
                    }
                    if (k == COLL_ALLTOALLV) { /* count: per pair; a.count: per rank */
                        count = count / (size_t)n ? count / (size_t)n : 1;
                        a.count = count * (size_t)n;
                    }
                    for (int j = 0; j < n; j++) {
                        vc[j] = count;
                        vc[n + j] = (size_t)j * count;
                    }
                    a.scounts = a.rcounts = vc;
                    a.sdispls = a.rdispls = vc + n;
                }
                const struct coll_algo *pick = coll_select_by_cost(&tun, &a, NULL);
                if (!csv) {
                    char b[32];
                    log_fmt_bytes((double)count * 4 * (coll_blocked(k) || coll_is_v(k) ? n : 1),
                              b, sizeof(b));
                    printf("\n%s, %d ranks, %s%s\n", coll_kind_name(k), n,
                           k == COLL_BARRIER ? "" : b,
                           k == COLL_BARRIER ? "" : " (float32 sum)");
                    printf("  %-19s %12s %12s %8s %11s %11s\n", "algorithm", "model",
                           "simulated", "msgs", "sent", "steps");
                }
                for (int i = 0; coll_algos[i]; i++) {
                    const struct coll_algo *al = coll_algos[i];
                    if (al->kind != k || (only && strcmp(al->name, only)))
                        continue;
                    if (!al->check(&a)) {
                        if (!csv)
                            printf("  %-19s (does not apply here)\n", al->name);
                        continue;
                    }
                    double model = al->cost ? coll_algo_cost(al, &a, &cc) : NAN;
                    struct sim s;
                    int bad = simulate(&s, al, a, &cc, window);
                    uint64_t mx_msgs = s.max_msgs, mx_sent = s.max_sent;
                    if (bad) {
                        fprintf(stderr, "fc_sim: %s/%s at %d ranks, count %zu: %s\n",
                                coll_kind_name(k), al->name, n, a.count, s.err);
                        errors++;
                    }
                    char tm[32], ts[32], sb[32];
                    fmt_time(model, tm, sizeof(tm));
                    fmt_time(s.end, ts, sizeof(ts));
                    log_fmt_bytes((double)mx_sent, sb, sizeof(sb));
                    if (csv)
                        printf("%s,%d,%.0f,%s,%.6g,%s%.6g,%" PRIu64 ",%" PRIu64 ",%" PRIu64
                               ",%d\n", coll_kind_name(k), n,
                               (double)count * 4 * (coll_blocked(k) || coll_is_v(k) ? n : 1),
                               al->name, model * 1e6, bad ? "error:" : "", s.end * 1e6, mx_msgs,
                               mx_sent, s.nsteps, al == pick);
                    else
                        printf("  %c %-17s %12s %12s %8" PRIu64 " %11s %11" PRIu64 "%s\n",
                               al == pick ? '*' : ' ', al->name, tm, bad ? "ERROR" : ts, mx_msgs,
                               sb, s.nsteps, bad ? "  (see stderr)" : "");
                    fflush(stdout);
                    sim_free(&s);
                }
                free(vc);
            }
    free(node);
    return errors ? 1 : 0;
}
