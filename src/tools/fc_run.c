/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_run: start N ranks of a fabcoll program on this node.
 *
 * fc_run serves the job's rendezvous itself (a thread), hands every rank
 * FC_RANK, FC_SIZE, FC_LOCAL_RANK, FC_LOCAL_SIZE, FC_ROOT_ADDR and
 * FC_JOB_SECRET, and supervises them: the first rank to fail decides the
 * exit status, and the others are stopped.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "boot.h"
#include "config.h"
#include "fabcoll.h"

static const char usage[] =
    "Usage: fc_run [options] [--] program [arguments...]\n"
    "\n"
    "Starts N ranks of a fabcoll program on this node. Each rank finds the\n"
    "others through a rendezvous that fc_run serves; fc_comm_init() picks it\n"
    "up from the environment. Output of the ranks is passed through untouched.\n"
    "\n"
    "Options:\n"
    "  -n, --np N            number of ranks (default 1)\n"
    "  -p, --provider NAME   set FI_PROVIDER=NAME for every rank (e.g. tcp, shm):\n"
    "                        only that libfabric provider may be used\n"
    "  -x, --env VAR=VALUE   set an environment variable for every rank\n"
    "                        (repeatable)\n"
    "  -t, --timeout SEC     stop the job after SEC seconds (exit status 124)\n"
    "  -q, --quiet           do not report failing ranks on stderr\n"
    "      --serve           start no program: serve a rendezvous for ranks started\n"
    "                        some other way (ssh, containers, network namespaces);\n"
    "                        prints FC_ROOT_ADDR=... and FC_JOB_SECRET=... lines for\n"
    "                        them (each also needs FC_RANK and FC_SIZE) and serves\n"
    "                        until killed or -t expires\n"
    "      --address IP      the address --serve advertises (default: this host's\n"
    "                        first non-loopback IPv4 address, or FC_IFACE's)\n"
    "  -h, --help            this text\n"
    "  -V, --version         print the fabcoll version\n"
    "\n"
    "Exit status: 0 when every rank exits with 0; otherwise the status of the\n"
    "first rank to fail (128+N when it was killed by signal N), after the other\n"
    "ranks have been stopped (SIGTERM, then SIGKILL after 3 s); 124 on timeout;\n"
    "125 when fc_run itself fails; 127 when the program cannot be executed.\n"
    "\n"
    "Environment given to each rank:\n"
    "  FC_RANK, FC_SIZE          rank and number of ranks\n"
    "  FC_LOCAL_RANK, FC_LOCAL_SIZE\n"
    "  FC_ROOT_ADDR, FC_JOB_SECRET   where the rendezvous is and the job's key\n"
    "\n"
    "Examples:\n"
    "  fc_run -n 4 ./my_app\n"
    "  fc_run -n 2 -p tcp -x FC_DEBUG=INFO fc_perf -b 8 -e 64M\n";

static pid_t *pids;
static int nranks = 1;
static char **envs; /* -x VAR=VALUE, in order */
static volatile sig_atomic_t got_signal;
static volatile sig_atomic_t timed_out;

static void on_signal(int sig)
{
    got_signal = sig;
}

static void on_alarm(int sig)
{
    (void)sig;
    timed_out = 1;
}

/* Each rank leads its own process group, so what it started goes too. */
static void kill_all(int sig)
{
    for (int r = 0; r < nranks; r++)
        if (pids[r] > 0)
            kill(-pids[r], sig);
}

static int alive(void)
{
    int n = 0;
    for (int r = 0; r < nranks; r++)
        n += pids[r] > 0;
    return n;
}

static int rank_of(pid_t pid)
{
    for (int r = 0; r < nranks; r++)
        if (pids[r] == pid)
            return r;
    return -1;
}

static int rank_failed(int st)
{
    return WIFSIGNALED(st) || (WIFEXITED(st) && WEXITSTATUS(st) != 0);
}

/* "fc_run: rank 1 (pid 42) exited with status 3" for a failed rank. */
static void report(int r, pid_t pid, int st, const char *also)
{
    if (WIFSIGNALED(st))
        fprintf(stderr, "fc_run: %srank %d (pid %d) was killed by signal %d (%s)\n", also, r,
                (int)pid, WTERMSIG(st), strsignal(WTERMSIG(st)));
    else if (WIFEXITED(st) && WEXITSTATUS(st) != 0)
        fprintf(stderr, "fc_run: %srank %d (pid %d) exited with status %d\n", also, r, (int)pid,
                WEXITSTATUS(st));
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"np", required_argument, NULL, 'n'},      {"provider", required_argument, NULL, 'p'},
        {"env", required_argument, NULL, 'x'},     {"timeout", required_argument, NULL, 't'},
        {"quiet", no_argument, NULL, 'q'},         {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},       {"serve", no_argument, NULL, 'S'},
        {"address", required_argument, NULL, 'A'}, {NULL, 0, NULL, 0}};
    int serve = 0;
    const char *address = NULL;
    const char *provider = NULL;
    double timeout = 0;
    int quiet = 0;
    /* file scope: still reachable on the early exits below (a leak checker
     * would otherwise fail fc_run's own exit codes) */
    envs = calloc((size_t)argc + 1, sizeof(char *));
    if (!envs) {
        fprintf(stderr, "fc_run: out of memory\n");
        return 125;
    }
    int nenv = 0;
    int c;
    while ((c = getopt_long(argc, argv, "+n:p:x:t:qhV", opts, NULL)) != -1) {
        switch (c) {
        case 'n': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || v < 1 || v > 4096) {
                fprintf(stderr, "fc_run: -n %s: expected a number of ranks from 1 to 4096\n",
                        optarg);
                return 125;
            }
            nranks = (int)v;
            break;
        }
        case 'p': provider = optarg; break;
        case 'x':
            if (!strchr(optarg, '=')) {
                fprintf(stderr, "fc_run: -x %s: expected VAR=VALUE\n", optarg);
                return 125;
            }
            envs[nenv++] = optarg;
            break;
        case 't':
            if (config_parse_double(optarg, &timeout) != 0) {
                fprintf(stderr, "fc_run: -t %s: expected a number of seconds\n", optarg);
                return 125;
            }
            break;
        case 'q': quiet = 1; break;
        case 'S': serve = 1; break;
        case 'A': address = optarg; break;
        case 'h': fputs(usage, stdout); return 0;
        case 'V': printf("fc_run (fabcoll) %s\n", fc_version()); return 0;
        default: fputs(usage, stderr); return 125;
        }
    }
    if (optind >= argc && !serve) {
        fprintf(stderr, "fc_run: no program given\n\n%s", usage);
        return 125;
    }
    char **prog = argv + optind;

    uint8_t secret[BOOT_SECRET_LEN];
    char hex[2 * BOOT_SECRET_LEN + 1];
    if (boot_random(secret, sizeof(secret)) != 0) {
        fprintf(stderr, "fc_run: getrandom failed: %s\n", strerror(errno));
        return 125;
    }
    boot_hex_encode(secret, sizeof(secret), hex, sizeof(hex));
    const cfg_t *cfg = config_global(NULL);
    struct boot_server *srv = NULL;
    int port = 0;
    /* one node: the rendezvous listens where it is advertised, on loopback
     * only; --serve: on the address given, else on every interface (the
     * ranks come from other hosts) */
    struct in_addr ip4;
    const char *bind_ip = !serve ? "127.0.0.1"
                          : address && inet_pton(AF_INET, address, &ip4) == 1 ? address
                                                                              : NULL;
    if (boot_server_start(secret, bind_ip, 0, 0, cfg->boot_timeout, &srv, &port) != FC_SUCCESS) {
        fprintf(stderr, "fc_run: cannot start the rendezvous: %s\n", fc_last_error());
        return 125;
    }
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    if (serve) {
        char host[64];
        if (address)
            snprintf(host, sizeof(host), "%s", address);
        else
            boot_local_address(cfg, host, sizeof(host));
        printf("FC_ROOT_ADDR=%s:%d\nFC_JOB_SECRET=%s\n", host, port, hex);
        fflush(stdout);
        struct sigaction sq;
        memset(&sq, 0, sizeof(sq));
        sq.sa_handler = on_signal;
        sigaction(SIGINT, &sq, NULL);
        sigaction(SIGTERM, &sq, NULL);
        sigaction(SIGHUP, &sq, NULL);
        struct timespec t0, tn;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        while (!got_signal) {
            struct timespec nap = {0, 100000000L};
            nanosleep(&nap, NULL);
            clock_gettime(CLOCK_MONOTONIC, &tn);
            if (timeout > 0 && (double)(tn.tv_sec - t0.tv_sec) > timeout)
                break;
        }
        boot_server_stop(srv);
        return 0;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);

    pids = calloc((size_t)nranks, sizeof(pid_t));
    if (!pids)
        return 125;
    pid_t parent = getpid();
    /* libinfinipath and libpsm2, which Debian's libfabric loads for its psm
     * providers, install signal handlers as they load that write *.btr files
     * and call exit() (fabcoll puts them back as it loads, but a signal can
     * land before that); these ask them not to (a value already set wins) */
    setenv("IPATH_NO_BACKTRACE", "1", 0);
    setenv("HFI_NO_BACKTRACE", "1", 0);
    for (int r = 0; r < nranks; r++) {
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "fc_run: fork failed for rank %d: %s\n", r, strerror(errno));
            kill_all(SIGKILL);
            return 125;
        }
        if (pid == 0) {
            /* ranks die with fc_run, whatever kills it */
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (getppid() != parent)
                _exit(125);
            setpgid(0, 0);
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            signal(SIGHUP, SIG_DFL);
            char v[32];
            snprintf(v, sizeof(v), "%d", r);
            setenv("FC_RANK", v, 1);
            setenv("FC_LOCAL_RANK", v, 1);
            snprintf(v, sizeof(v), "%d", nranks);
            setenv("FC_SIZE", v, 1);
            setenv("FC_LOCAL_SIZE", v, 1);
            setenv("FC_ROOT_ADDR", addr, 1);
            setenv("FC_JOB_SECRET", hex, 1);
            if (provider)
                setenv("FI_PROVIDER", provider, 1);
            for (int i = 0; i < nenv; i++)
                putenv(envs[i]);
            execvp(prog[0], prog);
            fprintf(stderr, "fc_run: cannot execute '%s': %s\n", prog[0], strerror(errno));
            _exit(127);
        }
        setpgid(pid, pid); /* also here: no race with kill_all */
        pids[r] = pid;
    }
    if (timeout > 0) {
        struct itimerval it;
        memset(&it, 0, sizeof(it));
        it.it_value.tv_sec = (time_t)timeout;
        it.it_value.tv_usec = (suseconds_t)((timeout - (double)(time_t)timeout) * 1e6);
        if (it.it_value.tv_sec == 0 && it.it_value.tv_usec == 0)
            it.it_value.tv_usec = 1;
        setitimer(ITIMER_REAL, &it, NULL);
    }

    int status_out = 0, first = -1;
    double kill_deadline = 0;
    while (alive()) {
        int st;
        pid_t pid = waitpid(-1, &st, 0);
        if (pid < 0) {
            if (errno != EINTR)
                break;
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            double now = (double)ts.tv_sec + ts.tv_nsec * 1e-9;
            if (got_signal && first < 0) {
                if (!quiet)
                    fprintf(stderr, "fc_run: got signal %d; stopping the ranks\n",
                            (int)got_signal);
                first = nranks; /* no rank failed: fc_run was told to stop */
                status_out = 128 + got_signal;
                kill_all(SIGTERM);
                kill_deadline = now + 3;
                alarm(1);
            } else if (timed_out && first < 0) {
                if (!quiet) {
                    fprintf(stderr, "fc_run: timed out after %g s; stopping ranks", timeout);
                    for (int r = 0; r < nranks; r++)
                        if (pids[r] > 0)
                            fprintf(stderr, " %d", r);
                    fprintf(stderr, "\n");
                }
                first = nranks;
                status_out = 124;
                kill_all(SIGTERM);
                kill_deadline = now + 3;
                timed_out = 0;
                alarm(1);
            } else if (kill_deadline > 0 && now >= kill_deadline) {
                kill_all(SIGKILL);
            } else if (kill_deadline > 0) {
                alarm(1);
            }
            continue;
        }
        int r = rank_of(pid);
        if (r < 0)
            continue;
        pids[r] = 0;
        struct {
            int r, st;
            pid_t pid;
        } also[16];
        int nalso = 0;
        if (first < 0 && rank_failed(st)) {
            /* ranks that fail together: the one a signal killed is the
             * cause (its peers exit with a status when they see it go),
             * whichever of them waitpid returns first; it is reported
             * first, the others after it */
            for (int k = 0; k < 20 && alive() && !WIFSIGNALED(st); k++) {
                int st2;
                pid_t p2 = waitpid(-1, &st2, WNOHANG);
                if (p2 == 0) {
                    struct timespec nap = {0, 10 * 1000 * 1000};
                    nanosleep(&nap, NULL);
                    continue;
                }
                int r2 = p2 > 0 ? rank_of(p2) : -1;
                if (r2 < 0)
                    break;
                pids[r2] = 0;
                if (!rank_failed(st2) || nalso == 16)
                    continue;
                if (WIFSIGNALED(st2)) {
                    also[nalso].r = r, also[nalso].pid = pid, also[nalso].st = st;
                    r = r2, pid = p2, st = st2;
                } else {
                    also[nalso].r = r2, also[nalso].pid = p2, also[nalso].st = st2;
                }
                nalso++;
            }
        }
        int failed = 0, code = 0;
        if (WIFSIGNALED(st)) {
            failed = 1;
            code = 128 + WTERMSIG(st);
            if (!quiet && first < 0)
                fprintf(stderr, "fc_run: rank %d (pid %d) was killed by signal %d (%s)\n", r,
                        (int)pid, WTERMSIG(st), strsignal(WTERMSIG(st)));
        } else if (WIFEXITED(st) && WEXITSTATUS(st) != 0) {
            failed = 1;
            code = WEXITSTATUS(st);
            if (!quiet && first < 0)
                fprintf(stderr, "fc_run: rank %d (pid %d) exited with status %d\n", r, (int)pid,
                        code);
        }
        if (failed && first < 0) {
            first = r;
            status_out = code;
            for (int k = 0; k < nalso && !quiet; k++)
                report(also[k].r, also[k].pid, also[k].st, "then ");
            if (alive()) {
                if (!quiet)
                    fprintf(stderr, "fc_run: stopping the other %d rank%s\n", alive(),
                            alive() > 1 ? "s" : "");
                kill_all(SIGTERM);
                struct timespec ts;
                clock_gettime(CLOCK_MONOTONIC, &ts);
                kill_deadline = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + 3;
                alarm(1);
            }
        }
    }
    boot_server_stop(srv);
    free(pids);
    free(envs);
    return status_out;
}
