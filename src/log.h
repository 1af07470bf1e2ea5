/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Logging and error recording.
 *
 * FC_LOG(level, subsys, fmt, ...) checks the level and subsystem before it
 * formats anything, prefixes host:pid:[rank] and the function, and writes to
 * stderr or FC_DEBUG_FILE. The library never writes to stdout.
 *
 * Errors: the place that detects a failure calls FC_ERR(code, fmt, ...)
 * once; it records the detail (call, provider, peer, errno or fi_strerror,
 * the fix) in this thread's last-error buffer, logs it at WARN, and returns
 * the code so callers can `return FC_ERR(...)`. Callers pass the code up.
 */
#ifndef FC_LOG_H
#define FC_LOG_H

#include <stdarg.h>

#include "fabcoll.h"

enum log_level { LOG_NONE = 0, LOG_WARN = 1, LOG_INFO = 2, LOG_TRACE = 3 };

enum log_subsys {
    LOG_INIT = 1u << 0,
    LOG_BOOT = 1u << 1,
    LOG_NET = 1u << 2,
    LOG_MR = 1u << 3,
    LOG_COLL = 1u << 4,
    LOG_TUNE = 1u << 5,
    LOG_TOPO = 1u << 6,
    LOG_ALL = 0x7f
};

/* Current level and subsystem mask (set from FC_DEBUG / FC_DEBUG_SUBSYS). */
extern int log_level_cur;
extern unsigned log_subsys_cur;

/* Applies the settings once (level, subsystems, destination); later calls
 * only update the rank shown in the prefix. */
void log_setup(int level, unsigned subsys, const char *file_pattern);
void log_set_rank(int rank);

void log_write(int level, unsigned subsys, const char *func, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define FC_LOG(level, subsys, ...)                                                    \
    do {                                                                              \
        if ((level) <= log_level_cur && ((subsys) & log_subsys_cur))                  \
            log_write((level), (subsys), __func__, __VA_ARGS__);                      \
    } while (0)

#define FC_WARN(subsys, ...) FC_LOG(LOG_WARN, subsys, __VA_ARGS__)
#define FC_INFO(subsys, ...) FC_LOG(LOG_INFO, subsys, __VA_ARGS__)
#define FC_TRACE(subsys, ...) FC_LOG(LOG_TRACE, subsys, __VA_ARGS__)

/* Records the detail of an error in this thread's buffer, logs it (WARN for
 * runtime failures, INFO for invalid arguments: those are the caller's
 * business and must not spam a job's stderr), returns code. */
fc_result_t err_set(fc_result_t code, const char *func, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define FC_ERR(code, ...) err_set((code), __func__, __VA_ARGS__)
/* The same, logged at INFO: for repeats of an error already reported. */
fc_result_t err_set_quiet(fc_result_t code, const char *func, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
#define FC_ERR_QUIET(code, ...) err_set_quiet((code), __func__, __VA_ARGS__)

/* Replaces this thread's message (used to hand a request's error to the
 * thread that waits on it). */
void err_restore(const char *msg);
/* Prepends "prefix: " to this thread's message, once. */
void err_prefix(const char *prefix);
void err_clear(void);
const char *err_get(void);
/* "invalid argument", "timed out": what fc_strerror answers. */
const char *err_code_name(fc_result_t code);

/* Expands %h (host), %p (pid), %r (rank; "x" when rank < 0) and %% in a
 * file pattern (FC_DEBUG_FILE, FC_PROFILE_FILE). */
void log_expand_pattern(const char *pattern, int rank, char *out, size_t outlen);
/* Hostname of this process (cached). */
const char *log_hostname(void);
/* "64 KiB", "1.5 MiB": bytes in binary units, 4 significant digits (tools'
 * tables). */
void log_fmt_bytes(double bytes, char *out, size_t len);
/* Names the calling thread (at most 15 characters) as ps -L, top -H, gdb
 * and /proc/PID/task/TID/comm show it: "fc-progress", "fc-rail2" ... */
void log_thread_name(const char *name);

#endif /* FC_LOG_H */
