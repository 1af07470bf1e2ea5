/* SPDX-License-Identifier: BSD-3-Clause */
/* The settings table: parsing, defaults, errors that name the setting. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"

struct kv {
    const char *k, *v;
};

static const char *lookup(const char *name, void *ctx)
{
    for (const struct kv *p = ctx; p->k; p++)
        if (strcmp(p->k, name) == 0)
            return p->v;
    return NULL;
}

Test(config, defaults)
{
    struct kv env[] = {{NULL, NULL}};
    cfg_t c;
    cr_assert_eq(config_load_from(&c, lookup, env), FC_SUCCESS);
    cr_assert_eq(c.debug, LOG_WARN);
    cr_assert_eq(c.debug_subsys, LOG_ALL);
    cr_assert_eq(c.gdr, CFG_GDR_AUTO);
    cr_assert_eq(c.proto, CFG_PROTO_AUTO);
    cr_assert_eq(c.timeout, 300.0);
    cr_assert_eq(c.fc_rank, -1);
    cr_assert_eq(c.slurm_procid, -1);
    cr_assert_eq(c.mr_cache_max, (size_t)1 << 30);
    cr_assert_str_empty(c.algo);
}

Test(config, values)
{
    struct kv env[] = {{"FC_DEBUG", "info"},          {"FC_DEBUG_SUBSYS", "INIT,NET"},
                       {"FC_CHUNK_SIZE", "64K"},      {"FC_EAGER_MAX", "1MiB"},
                       {"FC_TIMEOUT", "1.5"},         {"FC_GDR", "off"},
                       {"FC_PROTO", "rndv"},          {"FC_ALGO", "allreduce:ring"},
                       {"FC_MR_MODE", "verbs,endpoint"}, {"FC_RANK", "3"},
                       {"FC_PROGRESS_THREAD", "yes"}, {"FC_MR_CACHE_MAX", "2g"},
                       {"PMIX_SERVER_URI2", "x"},     {NULL, NULL}};
    cfg_t c;
    cr_assert_eq(config_load_from(&c, lookup, env), FC_SUCCESS, "%s", err_get());
    cr_assert_eq(c.debug, LOG_INFO);
    cr_assert_eq(c.debug_subsys, LOG_INIT | LOG_NET);
    cr_assert_eq(c.chunk_size, 65536);
    cr_assert_eq(c.eager_max, 1 << 20);
    cr_assert_float_eq(c.timeout, 1.5, 1e-12);
    cr_assert_eq(c.gdr, CFG_GDR_OFF);
    cr_assert_eq(c.proto, CFG_PROTO_RNDV);
    cr_assert_str_eq(c.algo, "allreduce:ring");
    cr_assert_eq(c.mr_mode_force, CFG_MR_LOCAL | CFG_MR_VIRT_ADDR | CFG_MR_PROV_KEY |
                                      CFG_MR_ALLOCATED | CFG_MR_ENDPOINT);
    cr_assert_eq(c.fc_rank, 3);
    cr_assert_eq(c.progress_thread, 1);
    cr_assert_eq(c.mr_cache_max, (size_t)2 << 30);
    cr_assert_str_eq(c.pmix_server_uri, "x");
}

Test(config, subsys_negation)
{
    struct kv env[] = {{"FC_DEBUG_SUBSYS", "^NET,MR"}, {NULL, NULL}};
    cfg_t c;
    cr_assert_eq(config_load_from(&c, lookup, env), FC_SUCCESS);
    cr_assert_eq(c.debug_subsys, LOG_ALL & ~(LOG_NET | LOG_MR));
}

Test(config, bad_values_name_the_setting)
{
    const char *bad[][2] = {{"FC_TIMEOUT", "soon"},   {"FC_CHUNK_SIZE", "12Q"},
                            {"FC_CHUNK_SIZE", "-5"},  {"FC_GDR", "maybe"},
                            {"FC_DEBUG", "LOUD"},     {"FC_RANK", "two"},
                            {"FC_TIMEOUT", "-1"},     {"FC_DEBUG_SUBSYS", "NET,FOO"},
                            {"FC_MR_MODE", "raw"},    {"FC_PROGRESS_THREAD", "2"}};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct kv env[] = {{bad[i][0], bad[i][1]}, {NULL, NULL}};
        cfg_t c;
        err_clear();
        cr_assert_eq(config_load_from(&c, lookup, env), FC_ERR_INVALID_ARGUMENT, "%s=%s accepted",
                     bad[i][0], bad[i][1]);
        cr_assert(strstr(err_get(), bad[i][0]) != NULL, "message does not name %s: %s",
                  bad[i][0], err_get());
        cr_assert(strstr(err_get(), "expected") != NULL, "message says nothing expected: %s",
                  err_get());
    }
}

Test(config, sizes)
{
    size_t v;
    cr_assert_eq(config_parse_size("4096", &v), 0);
    cr_assert_eq(v, 4096);
    cr_assert_eq(config_parse_size("8k", &v), 0);
    cr_assert_eq(v, 8192);
    cr_assert_eq(config_parse_size("3G", &v), 0);
    cr_assert_eq(v, (size_t)3 << 30);
    cr_assert_eq(config_parse_size("1KB", &v), 0);
    cr_assert_eq(v, 1024);
    cr_assert_neq(config_parse_size("", &v), 0);
    cr_assert_neq(config_parse_size("K", &v), 0);
    cr_assert_neq(config_parse_size("1.5M", &v), 0);
    cr_assert_neq(config_parse_size("99999999999999999999", &v), 0);
    cr_assert_neq(config_parse_size("20000000000T", &v), 0);
}

Test(config, table_is_documented)
{
    int n = config_nrows();
    cr_assert_gt(n, 20);
    for (int i = 0; i < n; i++) {
        struct cfg_row_info r = config_row(i);
        cr_assert_not_null(r.name);
        cr_assert_gt(strlen(r.help), 12, "%s has no real help text", r.name);
        for (int j = 0; j < i; j++)
            cr_assert_str_neq(r.name, config_row(j).name, "duplicate row %s", r.name);
    }
}

/* libfabric's variables with a default of fabcoll's: the process's settings
 * put the default into the environment where it is unset (libfabric reads
 * it when its providers load), and leave a value of the user's alone.
 * Criterion runs each test in a process of its own, so each loads the
 * process's settings afresh. */
Test(config, libfabric_default_is_exported_where_unset)
{
    unsetenv("FI_OFI_RXM_MSG_RX_SIZE");
    const cfg_t *c = config_global(NULL);
    const char *v = getenv("FI_OFI_RXM_MSG_RX_SIZE");
    cr_assert_not_null(v, "the default was not exported");
    cr_assert_str_eq(v, "512");
    cr_assert_eq(c->rxm_msg_rx_size, 512);
}

Test(config, libfabric_variable_of_the_user_is_kept)
{
    setenv("FI_OFI_RXM_MSG_RX_SIZE", "300", 1);
    const cfg_t *c = config_global(NULL);
    cr_assert_str_eq(getenv("FI_OFI_RXM_MSG_RX_SIZE"), "300");
    cr_assert_eq(c->rxm_msg_rx_size, 300);
}

/* fc_info -e's heading lines: "NAME (type[: choices], default VALUE)", the
 * default inside the parentheses (it once printed after them) */
Test(config, printed_table_puts_defaults_inside)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *fp = open_memstream(&buf, &len);
    cr_assert_not_null(fp);
    config_print_table(fp, 1);
    fclose(fp);
    cr_assert(strstr(buf, "\nFC_GDR (choice: auto,on,off, default auto)\n"), "%.300s", buf);
    cr_assert(strstr(buf, "\nFC_TUNE_MEMORY (choice: auto,host,device, default auto)\n"));
    cr_assert(strstr(buf, "\nFC_NICS (string, default unset)\n"));
    cr_assert_null(strstr(buf, ")auto\n"));
    free(buf);
}

/* An error that quotes the one underneath it (err_get() as an argument)
 * keeps both: the message is formatted before it replaces the old one. */
Test(errors, a_message_may_quote_the_previous_one)
{
    FC_ERR_QUIET(FC_ERR_CUDA, "cuMemAlloc(%d bytes) failed: out of memory", 4096);
    FC_ERR_QUIET(FC_ERR_NO_MEMORY, "cannot stage a host buffer: %s", err_get());
    cr_assert_str_eq(err_get(),
                     "cannot stage a host buffer: cuMemAlloc(4096 bytes) failed: out of memory");
}
