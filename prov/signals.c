/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Signal handlers that providers' libraries install behind the program's
 * back. Debian's libfabric links the psm provider, whose libinfinipath
 * installs handlers of SIGINT, SIGILL, SIGABRT, SIGBUS, SIGSEGV and SIGTERM
 * as it loads (even with FI_PROVIDER=tcp): they write a backtrace to a
 * *.btr file in the working directory and call exit() from the handler. A
 * SIGTERM that lands inside fi_getinfo then runs libfabric's destructors
 * while fi_getinfo holds a lock they wait on: the rank hangs instead of
 * ending. Such handlers are put back to the default when fabcoll loads
 * (after the libraries it depends on, before main), so a signal ends the
 * rank as it would without them; handlers of any other origin, and those a
 * program installs later, are left alone.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "prov_int.h"

static char reset_names[128];

static int foreign(const void *handler)
{
    Dl_info di;
    if (!dladdr(handler, &di) || !di.dli_fname)
        return 0;
    const char *base = strrchr(di.dli_fname, '/');
    base = base ? base + 1 : di.dli_fname;
    return strncmp(base, "libinfinipath", 13) == 0 || strncmp(base, "libpsm", 6) == 0;
}

__attribute__((constructor)) static void prov_reset_foreign_handlers(void)
{
    static const int sigs[] = {SIGINT, SIGILL, SIGABRT, SIGBUS, SIGSEGV, SIGTERM, SIGFPE,
                               SIGQUIT, SIGHUP};
    static const char *const names[] = {"INT", "ILL", "ABRT", "BUS", "SEGV", "TERM", "FPE",
                                        "QUIT", "HUP"};
    size_t o = 0;
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
        struct sigaction sa;
        if (sigaction(sigs[i], NULL, &sa) != 0)
            continue;
        const void *h = (sa.sa_flags & SA_SIGINFO) ? (const void *)sa.sa_sigaction
                                                   : (const void *)sa.sa_handler;
        if (h == (const void *)SIG_DFL || h == (const void *)SIG_IGN || !foreign(h))
            continue;
        struct sigaction dfl;
        memset(&dfl, 0, sizeof(dfl));
        dfl.sa_handler = SIG_DFL;
        sigemptyset(&dfl.sa_mask);
        if (sigaction(sigs[i], &dfl, NULL) == 0 && o + 12 < sizeof(reset_names))
            o += (size_t)snprintf(reset_names + o, sizeof(reset_names) - o, "%sSIG%s",
                                  o ? "," : "", names[i]);
    }
}

const char *prov_reset_handlers(void)
{
    return reset_names;
}
