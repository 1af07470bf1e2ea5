/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE
#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <unistd.h>

int log_level_cur = LOG_WARN;
unsigned log_subsys_cur = LOG_ALL;

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *log_fp;            /* NULL: stderr */
static char log_pattern[256];   /* FC_DEBUG_FILE, opened at first write */
static int log_rank = -1;
static int log_configured;

static __thread char err_buf[1024];

static const char *level_name(int level)
{
    switch (level) {
    case LOG_WARN: return "WARN";
    case LOG_INFO: return "INFO";
    case LOG_TRACE: return "TRACE";
    default: return "?";
    }
}

static const char *subsys_name(unsigned s)
{
    if (s != LOG_ALL)
        s &= -s; /* a message of several subsystems is named by the first */
    switch (s) {
    case LOG_INIT: return "INIT";
    case LOG_BOOT: return "BOOT";
    case LOG_NET: return "NET";
    case LOG_MR: return "MR";
    case LOG_COLL: return "COLL";
    case LOG_TUNE: return "TUNE";
    case LOG_TOPO: return "TOPO";
    default: return "ALL";
    }
}

static char host_name[256];

static void host_fill(void)
{
    if (gethostname(host_name, sizeof(host_name) - 1) != 0)
        snprintf(host_name, sizeof(host_name), "unknown");
    host_name[sizeof(host_name) - 1] = '\0';
}

const char *log_hostname(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, host_fill);
    return host_name;
}

void log_setup(int level, unsigned subsys, const char *file_pattern)
{
    pthread_mutex_lock(&log_lock);
    if (!log_configured) {
        log_configured = 1;
        log_level_cur = level;
        log_subsys_cur = subsys ? subsys : LOG_ALL;
        if (file_pattern && *file_pattern)
            snprintf(log_pattern, sizeof(log_pattern), "%s", file_pattern);
    }
    pthread_mutex_unlock(&log_lock);
}

void log_set_rank(int rank)
{
    pthread_mutex_lock(&log_lock);
    if (log_rank < 0) {
        log_rank = rank;
        /* a file opened before the rank was known has "x" for %r: the lines
         * from now on go to the rank's own file */
        if (log_fp && strstr(log_pattern, "%r")) {
            fclose(log_fp);
            log_fp = NULL;
        }
    }
    pthread_mutex_unlock(&log_lock);
}

void log_expand_pattern(const char *pattern, int rank, char *out, size_t outlen)
{
    size_t o = 0;
    for (const char *p = pattern; *p && o + 1 < outlen; p++) {
        if (*p == '%' && p[1]) {
            char tmp[300];
            switch (p[1]) {
            case 'h': snprintf(tmp, sizeof(tmp), "%s", log_hostname()); break;
            case 'p': snprintf(tmp, sizeof(tmp), "%d", (int)getpid()); break;
            case 'r':
                if (rank >= 0)
                    snprintf(tmp, sizeof(tmp), "%d", rank);
                else
                    snprintf(tmp, sizeof(tmp), "x");
                break;
            case '%': snprintf(tmp, sizeof(tmp), "%%"); break;
            default: snprintf(tmp, sizeof(tmp), "%%%c", p[1]); break;
            }
            p++;
            size_t l = strlen(tmp);
            if (o + l >= outlen)
                break;
            memcpy(out + o, tmp, l);
            o += l;
        } else {
            out[o++] = *p;
        }
    }
    out[o] = '\0';
}

static FILE *log_stream(void)
{
    if (log_fp)
        return log_fp;
    if (log_pattern[0]) {
        char path[512];
        log_expand_pattern(log_pattern, log_rank, path, sizeof(path));
        log_fp = fopen(path, "a");
        if (log_fp) {
            setvbuf(log_fp, NULL, _IOLBF, 0);
            return log_fp;
        }
        log_pattern[0] = '\0';
        fprintf(stderr, "fabcoll: cannot open FC_DEBUG_FILE %s: %s; logging to stderr\n", path,
                strerror(errno));
    }
    return stderr;
}

static void log_vwrite(int level, unsigned subsys, const char *func, const char *fmt, va_list ap)
{
    char msg[1200];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    struct timeval tv;
    gettimeofday(&tv, NULL);
    pthread_mutex_lock(&log_lock);
    FILE *fp = log_stream();
    char rank[16] = "-";
    if (log_rank >= 0)
        snprintf(rank, sizeof(rank), "%d", log_rank);
    /* one write per line: ranks share the stream (a launcher's pipe or
     * terminal), and glibc 2.37+ prints to an unbuffered stream through a
     * 128-byte stage, several writes per line, which other ranks' lines
     * then split (seen on Ubuntu 24.04) */
    char line[1400];
    int len = snprintf(line, sizeof(line), "%s:%d:[%s] %ld.%06ld fabcoll %s %s %s: %s\n",
                       log_hostname(), (int)getpid(), rank, (long)tv.tv_sec, (long)tv.tv_usec,
                       level_name(level), subsys_name(subsys), func, msg);
    if (len >= (int)sizeof(line)) { /* cut: still one line */
        len = (int)sizeof(line) - 1;
        line[len - 1] = '\n';
    }
    if (len > 0) {
        fwrite(line, 1, (size_t)len, fp);
        fflush(fp);
    }
    pthread_mutex_unlock(&log_lock);
}

void log_write(int level, unsigned subsys, const char *func, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_vwrite(level, subsys, func, fmt, ap);
    va_end(ap);
}

const char *err_code_name(fc_result_t r)
{
    switch (r) {
    case FC_SUCCESS: return "success";
    case FC_IN_PROGRESS: return "in progress";
    case FC_ERR_INVALID_ARGUMENT: return "invalid argument";
    case FC_ERR_UNSUPPORTED: return "unsupported";
    case FC_ERR_NO_MEMORY: return "out of memory";
    case FC_ERR_SYSTEM: return "system call failed";
    case FC_ERR_FABRIC: return "fabric (libfabric) error";
    case FC_ERR_BOOTSTRAP: return "bootstrap failed";
    case FC_ERR_TIMEOUT: return "timed out";
    case FC_ERR_PEER_FAILED: return "peer failed";
    case FC_ERR_CUDA: return "CUDA error";
    case FC_ERR_INTERNAL: return "internal error";
    }
    return "unknown result code";
}

static fc_result_t err_vset(fc_result_t code, int level, const char *func, const char *fmt,
                            va_list ap)
{
    /* through a copy: the arguments may be err_get() itself (the message
     * of the call that failed underneath) */
    char tmp[sizeof(err_buf)];
    vsnprintf(tmp, sizeof(tmp), fmt, ap);
    memcpy(err_buf, tmp, sizeof(err_buf));
    if (level <= log_level_cur)
        log_write(level, LOG_ALL, func, "%s (%s)", err_buf, err_code_name(code));
    return code;
}

fc_result_t err_set(fc_result_t code, const char *func, const char *fmt, ...)
{
    int level = (code == FC_ERR_INVALID_ARGUMENT || code == FC_ERR_UNSUPPORTED) ? LOG_INFO : LOG_WARN;
    va_list ap;
    va_start(ap, fmt);
    err_vset(code, level, func, fmt, ap);
    va_end(ap);
    return code;
}

fc_result_t err_set_quiet(fc_result_t code, const char *func, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err_vset(code, LOG_INFO, func, fmt, ap);
    va_end(ap);
    return code;
}

void err_restore(const char *msg)
{
    snprintf(err_buf, sizeof(err_buf), "%s", msg ? msg : "");
}

void err_prefix(const char *prefix)
{
    size_t pl = strlen(prefix);
    if (strncmp(err_buf, prefix, pl) == 0 && err_buf[pl] == ':')
        return;
    char tmp[sizeof(err_buf)];
    size_t n = strlen(err_buf);
    if (pl + 2 + n >= sizeof(tmp))
        n = sizeof(tmp) - pl - 3;
    memcpy(tmp, prefix, pl);
    memcpy(tmp + pl, ": ", 2);
    memcpy(tmp + pl + 2, err_buf, n);
    tmp[pl + 2 + n] = '\0';
    memcpy(err_buf, tmp, sizeof(err_buf));
}

void err_clear(void)
{
    err_buf[0] = '\0';
}

const char *err_get(void)
{
    return err_buf;
}

void log_fmt_bytes(double b, char *out, size_t len)
{
    static const char *const u[] = {"B", "KiB", "MiB", "GiB"};
    int i = 0;
    while (b >= 1024 && i < 3) {
        b /= 1024;
        i++;
    }
    snprintf(out, len, "%.4g %s", b, u[i]);
}

void log_thread_name(const char *name)
{
    char n[16];
    snprintf(n, sizeof(n), "%s", name);
    prctl(PR_SET_NAME, (unsigned long)n, 0, 0, 0);
}
