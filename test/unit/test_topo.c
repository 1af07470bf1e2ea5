/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The NIC choice (src/topo_nic.c) on two synthetic machines written as
 * hwloc XML (test/unit/topo/): two_socket_8gpu_4nic.xml has on each socket
 * two PCI switches of two GPUs and a NIC (socket 0: both switches below one
 * host bridge; socket 1: each below its own), two_socket_1nic.xml one GPU
 * per socket and its only NIC on socket 0. Distance classes, the spread of
 * a node's ranks over equally near NICs, FC_NICS, unknown names and a
 * topology file that does not load.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "topo.h"

#ifndef FC_TOP_SRCDIR
#define FC_TOP_SRCDIR "."
#endif

/* A machine's file: below $srcdir (automake's test environment) or the
 * source tree this test was built from. */
static const char *machine(const char *file)
{
    static char path[4][1024];
    static int next;
    char *p = path[next++ % 4];
    const char *sd = getenv("srcdir");
    snprintf(p, sizeof(path[0]), "%s/test/unit/topo/%s", sd && sd[0] ? sd : FC_TOP_SRCDIR, file);
    if (access(p, R_OK) != 0)
        snprintf(p, sizeof(path[0]), "%s/test/unit/topo/%s", FC_TOP_SRCDIR, file);
    cr_assert_eq(access(p, R_OK), 0, "no topology file %s", p);
    return p;
}

#define BIG "two_socket_8gpu_4nic.xml"
#define ONE "two_socket_1nic.xml"

static const char *const mlx[] = {"mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"};
/* the GPUs of BIG, two per switch: cuda0-1 with mlx5_0, ... cuda6-7 with mlx5_3 */
static const char *const gpus[] = {"0000:03:00.0", "0000:04:00.0", "0000:13:00.0",
                                   "0000:14:00.0", "0000:43:00.0", "0000:44:00.0",
                                   "0000:53:00.0", "0000:54:00.0"};

static int order(const char *file, const char *const *names, int n, const char *gpu,
                 const uint64_t *cpus, int spread, const char *filter, struct topo_nic *out)
{
    int k = -1;
    fc_result_t rc = topo_nic_order(file, names, n, gpu, cpus, spread, filter, out, &k);
    cr_assert_eq(rc, FC_SUCCESS, "%s", err_get());
    return k;
}

Test(topo, each_gpu_picks_the_nic_below_its_switch)
{
    struct topo_nic o[TOPO_NIC_MAX];
    for (int g = 0; g < 8; g++) {
        int k = order(machine(BIG), mlx, 4, gpus[g], NULL, g, NULL, o);
        cr_assert_eq(k, 4);
        cr_assert_str_eq(o[0].name, mlx[g / 2], "GPU %s", gpus[g]);
        cr_assert_eq(o[0].cls, TOPO_PIX, "GPU %s: %s", gpus[g], topo_class_name(o[0].cls));
        cr_assert(strstr(o[0].why, "shares PCI switch with GPU") && strstr(o[0].why, gpus[g]),
                  "%s", o[0].why);
        /* the other socket's two NICs come last */
        cr_assert_eq(o[2].cls, TOPO_SYS, "GPU %s: %s", gpus[g], topo_class_name(o[2].cls));
        cr_assert_eq(o[3].cls, TOPO_SYS);
    }
}

Test(topo, the_second_nic_is_the_nearer_of_the_rest)
{
    struct topo_nic o[TOPO_NIC_MAX];
    /* socket 0: the other switch is below the same host bridge */
    order(machine(BIG), mlx, 4, gpus[0], NULL, 0, NULL, o);
    cr_assert_str_eq(o[1].name, "mlx5_1");
    cr_assert_eq(o[1].cls, TOPO_PHB, "%s", topo_class_name(o[1].cls));
    /* socket 1: below another host bridge of the same package */
    order(machine(BIG), mlx, 4, gpus[6], NULL, 0, NULL, o);
    cr_assert_str_eq(o[0].name, "mlx5_3");
    cr_assert_str_eq(o[1].name, "mlx5_2");
    cr_assert_eq(o[1].cls, TOPO_NODE, "%s", topo_class_name(o[1].cls));
}

Test(topo, ranks_bound_to_socket_1_spread_over_its_nics)
{
    struct topo_nic a[TOPO_NIC_MAX], b[TOPO_NIC_MAX];
    uint64_t cpus[TOPO_CPU_WORDS] = {0xf0}; /* CPUs 4-7: socket 1 */
    order(machine(BIG), mlx, 4, "", cpus, 0, NULL, a);
    order(machine(BIG), mlx, 4, NULL, cpus, 1, NULL, b);
    for (int i = 0; i < 2; i++) {
        cr_assert(!strcmp(a[i].name, "mlx5_2") || !strcmp(a[i].name, "mlx5_3"), "%s", a[i].name);
        cr_assert_eq(a[i].cls, TOPO_NODE);
        cr_assert_eq(b[i].cls, TOPO_NODE);
        cr_assert_eq(a[i + 2].cls, TOPO_SYS, "%s %s", a[i + 2].name, a[i + 2].why);
    }
    cr_assert_str_neq(a[0].name, b[0].name, "two ranks on the same NIC %s", a[0].name);
    cr_assert(strstr(a[0].why, "the rank's CPU binding"), "%s", a[0].why);
    /* socket 0's CPUs: socket 0's NICs */
    uint64_t s0[TOPO_CPU_WORDS] = {0x3};
    order(machine(BIG), mlx, 4, NULL, s0, 0, NULL, a);
    cr_assert(!strcmp(a[0].name, "mlx5_0") || !strcmp(a[0].name, "mlx5_1"), "%s", a[0].name);
}

Test(topo, unbound_ranks_take_every_nic_in_turn)
{
    struct topo_nic o[TOPO_NIC_MAX];
    int seen[4] = {0};
    for (int r = 0; r < 4; r++) {
        order(machine(BIG), mlx, 4, NULL, NULL, r, NULL, o);
        cr_assert_eq(o[0].cls, TOPO_NODE);
        cr_assert_eq(o[3].cls, TOPO_NODE);
        seen[o[0].name[5] - '0']++;
    }
    for (int i = 0; i < 4; i++)
        cr_assert_eq(seen[i], 1, "mlx5_%d first for %d ranks", i, seen[i]);
}

Test(topo, interface_names_are_nics_too)
{
    static const char *const ifs[] = {"ib0", "ib1", "ib2", "ib3"};
    struct topo_nic o[TOPO_NIC_MAX];
    order(machine(BIG), ifs, 4, gpus[5], NULL, 0, NULL, o);
    cr_assert_str_eq(o[0].name, "ib2");
    cr_assert_eq(o[0].cls, TOPO_PIX);
}

Test(topo, a_gpu_on_the_other_socket_still_gets_the_only_nic)
{
    static const char *const one[] = {"mlx5_0"};
    struct topo_nic o[TOPO_NIC_MAX];
    cr_assert_eq(order(machine(ONE), one, 1, "0000:43:00.0", NULL, 1, NULL, o), 1);
    cr_assert_str_eq(o[0].name, "mlx5_0");
    cr_assert_eq(o[0].cls, TOPO_SYS, "%s", topo_class_name(o[0].cls));
    cr_assert(strstr(o[0].why, "NUMA node 0") && strstr(o[0].why, "NUMA node 1"), "%s",
              o[0].why);
    order(machine(ONE), one, 1, "0000:03:00.0", NULL, 0, NULL, o);
    cr_assert_eq(o[0].cls, TOPO_PIX, "%s", topo_class_name(o[0].cls));
}

Test(topo, a_gpu_missing_from_the_topology_falls_back_to_the_binding)
{
    struct topo_nic o[TOPO_NIC_MAX];
    uint64_t cpus[TOPO_CPU_WORDS] = {0x10};
    order(machine(BIG), mlx, 4, "0000:99:00.0", cpus, 0, NULL, o);
    cr_assert_str_eq(o[0].name, "mlx5_2");
    cr_assert_eq(o[0].cls, TOPO_NODE);
    cr_assert(strstr(o[0].why, "0000:99:00.0 is not in the topology"), "%s", o[0].why);
}

Test(topo, fc_nics_narrows_and_an_empty_result_is_an_error)
{
    struct topo_nic o[TOPO_NIC_MAX];
    int k = order(machine(BIG), mlx, 4, gpus[0], NULL, 0, "mlx5_3, mlx5_1", o);
    cr_assert_eq(k, 2);
    cr_assert_str_eq(o[0].name, "mlx5_1");
    cr_assert_eq(o[0].cls, TOPO_PHB);
    cr_assert_str_eq(o[1].name, "mlx5_3");
    k = -1;
    fc_result_t rc = topo_nic_order(machine(BIG), mlx, 4, gpus[0], NULL, 0, "mlx5_9", o, &k);
    cr_assert_eq(rc, FC_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err_get(), "FC_NICS=mlx5_9") && strstr(err_get(), "mlx5_0, mlx5_1"), "%s",
              err_get());
}

Test(topo, names_not_in_the_topology_come_last)
{
    static const char *const names[] = {"bogus0", "mlx5_3", "efa_x", "mlx5_0"};
    struct topo_nic o[TOPO_NIC_MAX];
    cr_assert_eq(order(machine(BIG), names, 4, gpus[1], NULL, 0, NULL, o), 4);
    cr_assert_str_eq(o[0].name, "mlx5_0");
    cr_assert_str_eq(o[1].name, "mlx5_3");
    cr_assert_str_eq(o[2].name, "bogus0");
    cr_assert_str_eq(o[3].name, "efa_x");
    cr_assert_eq(o[2].cls, TOPO_UNKNOWN);
    cr_assert_eq(o[3].cls, TOPO_UNKNOWN);
}

Test(topo, a_topology_file_that_does_not_load_is_an_error)
{
    char path[] = "/tmp/fc_test_topo_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    const char *junk = "<topology><object type=\"Nonsense\" this is not hwloc";
    cr_assert_eq(write(fd, junk, strlen(junk)), (ssize_t)strlen(junk));
    close(fd);
    struct topo_nic o[TOPO_NIC_MAX];
    int k = -1;
    fc_result_t rc = topo_nic_order(path, mlx, 4, gpus[0], NULL, 0, NULL, o, &k);
    unlink(path);
    cr_assert_eq(rc, FC_ERR_INVALID_ARGUMENT, "garbage loaded: %d NICs", k);
    cr_assert(strstr(err_get(), path) && strstr(err_get(), "lstopo --of xml"), "%s", err_get());
    rc = topo_nic_order("/nonexistent/topo.xml", mlx, 4, NULL, NULL, 0, NULL, o, &k);
    cr_assert_eq(rc, FC_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err_get(), "FC_TOPO_FILE=/nonexistent/topo.xml"), "%s", err_get());
}

Test(topo, the_map_gives_each_gpu_its_switch_nic)
{
    char buf[8192] = "";
    FILE *f = fmemopen(buf, sizeof(buf) - 1, "w");
    cr_assert_not_null(f);
    topo_print_nic_map(f, machine(BIG), NULL, 0, NULL);
    fclose(f);
    for (int g = 0; g < 8; g++) {
        char line[160];
        snprintf(line, sizeof(line), "local rank %d (GPU %s): %s PIX, shares PCI switch", g,
                 gpus[g], mlx[g / 2]);
        cr_assert(strstr(buf, line), "no '%s' in:\n%s", line, buf);
    }
}
