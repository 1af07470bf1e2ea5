/* SPDX-License-Identifier: BSD-3-Clause */
/* The NCCL-style path without a launcher: this process forks N ranks, makes
 * a unique id and hands it to them; they join with fc_comm_init_rank (in
 * scrambled order), and
 * each runs an allreduce and a broadcast. This process never joins: once
 * its ranks are gone, the rendezvous fc_get_unique_id started must be gone
 * too, its thread and its descriptors (it frees itself). Usage: uid [N]
 * (default 3). */
#include <dirent.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

static int child(const fc_unique_id_t *id, int n, int r)
{
    struct ft t;
    memset(&t, 0, sizeof(t));
    t.name = "uid";
    t.rank = r;
    fc_result_t rc = fc_comm_init_rank(&t.comm, n, id, r);
    if (rc != FC_SUCCESS) {
        fprintf(stderr, "uid: rank %d: fc_comm_init_rank: %s\n", r, fc_last_error());
        return 1;
    }
    t.size = fc_comm_size(t.comm);
    FT_CHECK(&t, fc_comm_rank(t.comm) == r && t.size == n, "rank/size %d/%d", fc_comm_rank(t.comm),
             t.size);
    int64_t v[100], s[100];
    for (int i = 0; i < 100; i++)
        v[i] = r * 1000 + i;
    FT_OK(&t, fc_allreduce(v, s, 100, FC_INT64, FC_SUM, t.comm));
    for (int i = 0; i < 100; i++)
        FT_CHECK(&t, s[i] == 1000LL * n * (n - 1) / 2 + (int64_t)n * i, "sum[%d]=%lld", i,
                 (long long)s[i]);
    FT_OK(&t, fc_broadcast(v, s, 100, FC_INT64, n - 1, t.comm));
    for (int i = 0; i < 100; i++)
        FT_CHECK(&t, s[i] == (int64_t)(n - 1) * 1000 + i, "bcast[%d]=%lld", i, (long long)s[i]);
    fc_comm_attr_t a;
    FT_OK(&t, fc_comm_query(t.comm, &a));
    FT_CHECK(&t, a.nnodes == 1 && a.local_size == n, "nnodes %d local_size %d", a.nnodes,
             a.local_size);
    return ft_finish(&t);
}

/* open descriptors of this process */
static int nfds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* threads of this process named name (fabcoll names its threads) */
static int nthreads(const char *name)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char path[300], comm[32] = "";
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fgets(comm, sizeof(comm), f))
            comm[strcspn(comm, "\n")] = '\0';
        fclose(f);
        n += strcmp(comm, name) == 0;
    }
    closedir(d);
    return n;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 3;
    /* the ranks are forked before fc_get_unique_id starts its rendezvous
     * thread (a fork beside a running thread may copy a lock it holds, in
     * malloc or a sanitizer's allocator, into a child that then hangs on
     * it), and read the id from a pipe, as MPI ranks would from a bcast */
    pid_t *pids = calloc((size_t)n, sizeof(pid_t));
    int(*pipes)[2] = calloc((size_t)n, sizeof(*pipes));
    for (int k = 0; k < n; k++) {
        int r = (k * 2 + 1) % n; /* join out of order */
        if (n % 2 == 0)
            r = n - 1 - k;
        if (pipe(pipes[k]) != 0) {
            perror("uid: pipe");
            return 1;
        }
        pids[k] = fork();
        if (pids[k] == 0) {
            fc_unique_id_t cid;
            close(pipes[k][1]);
            size_t got = 0;
            while (got < sizeof(cid)) {
                ssize_t m = read(pipes[k][0], (char *)&cid + got, sizeof(cid) - got);
                if (m <= 0)
                    _exit(3); /* the parent failed before sending the id */
                got += (size_t)m;
            }
            _exit(child(&cid, n, r));
        }
        close(pipes[k][0]);
    }
    int fds0 = nfds();
    fc_unique_id_t id;
    if (fc_get_unique_id(&id) != FC_SUCCESS) {
        fprintf(stderr, "uid: fc_get_unique_id: %s\n", fc_last_error());
        return 1;
    }
    for (int k = 0; k < n; k++) {
        if (write(pipes[k][1], &id, sizeof(id)) != (ssize_t)sizeof(id))
            perror("uid: write");
        close(pipes[k][1]);
    }
    fds0 -= n; /* the write ends, closed */
    free(pipes);
    int bad = 0;
    for (int k = 0; k < n; k++) {
        int st;
        waitpid(pids[k], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "uid: a rank failed (status 0x%x)\n", st);
            bad = 1;
        }
    }
    /* the session ends when its ranks have left */
    int threads = nthreads("fc-rendezvous"), fds = nfds();
    for (int i = 0; i < 1000 && (threads > 0 || fds > fds0); i++) {
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
        threads = nthreads("fc-rendezvous");
        fds = nfds();
    }
    if (!bad && (threads > 0 || fds > fds0)) {
        fprintf(stderr, "uid: 10 s after the ranks left, %d rendezvous thread(s) and %d open "
                        "descriptors (%d before fc_get_unique_id): the rendezvous did not end\n",
                threads, fds, fds0);
        bad = 1;
    }
    if (!bad)
        printf("uid: %d ranks joined through the unique id\n", n);
    free(pids);
    return bad;
}
