/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Algorithm choice (coll/select.c) apart from the cost model, which
 * test_sim checks against simulation: FC_ALGO and FC_TUNE_FILE parsing and
 * their errors, and the order in which the sources of a choice win
 * (FC_ALGO, then the tune file's rules, then device tuning, then the cost
 * model), with an algorithm whose check refuses the call passed over.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "coll.h"
#include "comm.h"
#include "log.h"
#include "select.h"

static struct coll_tuning tuning(void)
{
    struct coll_cost cc;
    comm_cost_params("shm", 1, &cc, NULL);
    struct coll_tuning t;
    coll_tuning_init(&t, &cc);
    return t;
}

static struct coll_args args(enum coll_kind k, int nranks, size_t bytes)
{
    return (struct coll_args){.kind = k, .rank = 0, .nranks = nranks, .count = bytes,
                              .dt = FC_UINT8, .op = FC_SUM, .esize = 1};
}

/* A tune file with these lines; its path in buf. */
static const char *tune_file(char *buf, size_t len, const char *text)
{
    snprintf(buf, len, "/tmp/fc_test_select_XXXXXX");
    int fd = mkstemp(buf);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return buf;
}

Test(select, every_algorithm_is_found_by_its_name)
{
    int n = 0;
    for (int i = 0; coll_algos[i]; i++, n++) {
        const struct coll_algo *al = coll_algos[i];
        const char *kn = coll_kind_name(al->kind);
        cr_assert_eq(coll_kind_from_name(kn, strlen(kn)), (int)al->kind, "%s", kn);
        cr_assert_eq(coll_algo_find(al->kind, al->name, strlen(al->name)), al, "%s:%s", kn,
                     al->name);
    }
    cr_assert_geq(n, 17, "only %d algorithms in the table", n);
    cr_assert_null(coll_algo_find(COLL_ALLREDUCE, "chain", 5), "bcast's chain for allreduce");
    cr_assert_eq(coll_kind_from_name("gather", 6), COLL_GATHER);
    cr_assert_eq(coll_kind_from_name("scan", 4), -1);
}

/* No caller tests an algorithm's functions for NULL: every one is there,
 * in the table and in the fused form the device branch picks. */
Test(select, every_algorithm_fills_in_every_function)
{
    extern const struct coll_algo coll_allreduce_gather_fused;
    const struct coll_algo *extra[] = {&coll_allreduce_gather_fused, NULL};
    for (int t = 0; t < 2; t++)
        for (int i = 0; (t ? extra : coll_algos)[i]; i++) {
            const struct coll_algo *al = (t ? extra : coll_algos)[i];
            cr_assert(al->name && al->check && al->build && al->cost, "%s:%s",
                      coll_kind_name(al->kind), al->name ? al->name : "(no name)");
        }
}

Test(select, fc_algo_forces_per_collective)
{
    struct coll_tuning t = tuning();
    cr_assert_eq(coll_tuning_force(&t, " allreduce:ring , bcast:chain,"), FC_SUCCESS, "%s",
                 err_get());
    const char *why = NULL;
    struct coll_args a = args(COLL_ALLREDUCE, 4, 8);
    cr_assert_str_eq(coll_select(&t, &a, &why)->name, "ring");
    cr_assert_str_eq(why, "FC_ALGO");
    a = args(COLL_BCAST, 4, 1 << 20);
    cr_assert_str_eq(coll_select(&t, &a, &why)->name, "chain");
    a = args(COLL_ALLGATHER, 4, 8); /* not forced: the model */
    coll_select(&t, &a, &why);
    cr_assert_str_eq(why, "cost model");
}

Test(select, fc_algo_errors_name_what_is_wrong)
{
    static const struct {
        const char *spec, *says;
    } bad[] = {
        {"allreduce", "expected collective:algorithm"},
        {"allreduce=ring", "expected collective:algorithm"},
        {"nosuch:ring", "unknown collective 'nosuch'"},
        {"allreduce:nosuch", "no algorithm 'nosuch' for allreduce (have: "},
        {"bcast:chain,allreduce:", "no algorithm '' for allreduce"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct coll_tuning t = tuning();
        cr_assert_eq(coll_tuning_force(&t, bad[i].spec), FC_ERR_INVALID_ARGUMENT,
                     "FC_ALGO=%s accepted", bad[i].spec);
        cr_assert(strstr(err_get(), bad[i].says), "FC_ALGO=%s: %s", bad[i].spec, err_get());
    }
    struct coll_tuning t = tuning();
    coll_tuning_force(&t, "allreduce:nosuch");
    cr_assert(strstr(err_get(), "ring") && strstr(err_get(), "rabenseifner"),
              "the list of algorithms: %s", err_get());
}

Test(select, a_forced_algorithm_that_refuses_the_call_is_passed_over)
{
    struct coll_tuning t = tuning();
    cr_assert_eq(coll_tuning_force(&t, "allreduce:gather"), FC_SUCCESS);
    const char *why = NULL;
    struct coll_args a = args(COLL_ALLREDUCE, 64, 8);
    cr_assert_str_eq(coll_select(&t, &a, &why)->name, "gather");
    a = args(COLL_ALLREDUCE, 65, 8); /* gather takes at most 64 ranks */
    const struct coll_algo *al = coll_select(&t, &a, &why);
    cr_assert_str_neq(al->name, "gather");
    cr_assert_str_eq(why, "cost model (FC_ALGO's choice does not apply here)");
}

Test(select, tune_file_rules_by_bytes_and_ranks)
{
    char path[64];
    tune_file(path, sizeof(path),
              "# comment line\n"
              "\n"
              "allreduce 0 1K rd   # small\n"
              "allreduce 1K max ring 2 4\n"
              "bcast 64K max scatter_allgather\n");
    struct coll_tuning t = tuning();
    cr_assert_eq(coll_tuning_load_file(&t, path), FC_SUCCESS, "%s", err_get());
    unlink(path);
    cr_assert_eq(t.nrules, 3);
    const char *why = NULL;
    struct coll_args a = args(COLL_ALLREDUCE, 8, 1024);
    cr_assert_str_eq(coll_select(&t, &a, &why)->name, "rd");
    cr_assert_str_eq(why, "FC_TUNE_FILE");
    a = args(COLL_ALLREDUCE, 4, 1 << 20);
    cr_assert_str_eq(coll_select(&t, &a, &why)->name, "ring");
    a = args(COLL_ALLREDUCE, 8, 1 << 20); /* more ranks than the rule's */
    coll_select(&t, &a, &why);
    cr_assert_str_eq(why, "cost model");
    a = args(COLL_BCAST, 3, 65536);
    cr_assert_str_eq(coll_select(&t, &a, &why)->name, "scatter_allgather");
    /* FC_ALGO wins over the file */
    cr_assert_eq(coll_tuning_force(&t, "allreduce:rabenseifner"), FC_SUCCESS);
    a = args(COLL_ALLREDUCE, 4, 1 << 20);
    cr_assert_str_eq(coll_select(&t, &a, &why)->name, "rabenseifner");
    cr_assert_str_eq(why, "FC_ALGO");
}

Test(select, tune_file_errors_name_the_file_and_line)
{
    static const struct {
        const char *text, *says;
    } bad[] = {
        {"allreduce 0 1K\n", "line 1: expected 'collective min_bytes max_bytes"},
        {"# ok\nallreduce x 1K ring\n", "line 2: expected"},
        {"allreduce 0 1K chain\n", "line 1: no algorithm 'chain' for allreduce"},
        {"nosuch 0 1K ring\n", "line 1: expected"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char path[64];
        tune_file(path, sizeof(path), bad[i].text);
        struct coll_tuning t = tuning();
        cr_assert_eq(coll_tuning_load_file(&t, path), FC_ERR_INVALID_ARGUMENT, "%s accepted",
                     bad[i].text);
        cr_assert(strstr(err_get(), path) && strstr(err_get(), bad[i].says), "%s: %s",
                  bad[i].text, err_get());
        unlink(path);
    }
    struct coll_tuning t = tuning();
    cr_assert_eq(coll_tuning_load_file(&t, "/nonexistent/tune"), FC_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err_get(), "cannot be opened"), "%s", err_get());
    /* a directory opens for reading and reads as nothing: refused */
    cr_assert_eq(coll_tuning_load_file(&t, "/tmp"), FC_ERR_INVALID_ARGUMENT, "a directory accepted");
    cr_assert(strstr(err_get(), "is a directory"), "%s", err_get());
    /* more rules than the table holds */
    size_t cap = (size_t)(COLL_MAX_RULES + 1) * 32;
    char *many = malloc(cap);
    cr_assert_not_null(many);
    many[0] = '\0';
    for (int i = 0; i <= COLL_MAX_RULES; i++)
        strcat(many, "allreduce 0 8 rd\n");
    char path[64];
    tune_file(path, sizeof(path), many);
    free(many);
    t = tuning();
    cr_assert_eq(coll_tuning_load_file(&t, path), FC_ERR_INVALID_ARGUMENT);
    cr_assert(strstr(err_get(), "more than"), "%s", err_get());
    unlink(path);
}

Test(select, device_tuning_comes_after_the_file_and_before_the_model)
{
    struct coll_tuning t = tuning();
    t.dev_gather_max = COMM_FUSED_MAX;
    const char *why = NULL;
    struct coll_args a = args(COLL_ALLREDUCE, 4, 1024); /* 4 KiB over all ranks */
    cr_assert_str_eq(coll_select(&t, &a, &why)->name, "gather");
    cr_assert(strstr(why, "FC_TUNE_MEMORY"), "%s", why);
    a = args(COLL_ALLREDUCE, 4, COMM_FUSED_MAX); /* past the range: the model */
    coll_select(&t, &a, &why);
    cr_assert_str_eq(why, "cost model");
    char path[64];
    tune_file(path, sizeof(path), "allreduce 0 max ring\n");
    cr_assert_eq(coll_tuning_load_file(&t, path), FC_SUCCESS, "%s", err_get());
    unlink(path);
    a = args(COLL_ALLREDUCE, 4, 1024);
    cr_assert_str_eq(coll_select(&t, &a, &why)->name, "ring");
    cr_assert_str_eq(why, "FC_TUNE_FILE");
}
