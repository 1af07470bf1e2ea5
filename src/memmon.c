/* SPDX-License-Identifier: BSD-3-Clause */
#define _GNU_SOURCE
#include "memmon.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"

#ifdef __linux__
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#endif

#define RING 4096

static struct {
    pthread_once_t once;
    int fd;
    int ok;
    char why[160];
    pthread_mutex_t lock;
    pthread_cond_t idle;
    int busy;     /* events are being taken and not yet recorded */
    uint64_t seq; /* invalidations recorded so far */
    uintptr_t start[RING], end[RING];
    pthread_t thread;
} mm = {.once = PTHREAD_ONCE_INIT, .fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER,
      .idle = PTHREAD_COND_INITIALIZER};

/* Lock held. */
static void record(uintptr_t s, uintptr_t e)
{
    mm.start[mm.seq % RING] = s;
    mm.end[mm.seq % RING] = e;
    mm.seq++;
}

#ifdef __linux__
static void *monitor_main(void *arg)
{
    (void)arg;
    struct uffd_msg msg[16];
    log_thread_name("fc-memmon");
    for (;;) {
        /* Wait without taking the events, mark busy, then take them: the
         * thread that unmapped is released by the read, and a drain it
         * does right after waits for "busy" to clear, so it cannot miss
         * its own invalidation. */
        struct pollfd pfd = {.fd = mm.fd, .events = POLLIN};
        if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
            break;
        pthread_mutex_lock(&mm.lock);
        mm.busy = 1;
        pthread_mutex_unlock(&mm.lock);
        ssize_t n = read(mm.fd, msg, sizeof(msg));
        pthread_mutex_lock(&mm.lock);
        if (n < 0) {
            mm.busy = 0;
            pthread_cond_broadcast(&mm.idle);
            pthread_mutex_unlock(&mm.lock);
            if (errno == EINTR || errno == EAGAIN)
                continue;
            break;
        }
        for (ssize_t i = 0; i < n / (ssize_t)sizeof(msg[0]); i++) {
            switch (msg[i].event) {
            case UFFD_EVENT_REMOVE:
            case UFFD_EVENT_UNMAP:
                record((uintptr_t)msg[i].arg.remove.start, (uintptr_t)msg[i].arg.remove.end);
                break;
            case UFFD_EVENT_REMAP:
                record((uintptr_t)msg[i].arg.remap.from,
                       (uintptr_t)msg[i].arg.remap.from + (uintptr_t)msg[i].arg.remap.len);
                break;
            default: /* no write-protected page exists, so no fault comes */
                break;
            }
        }
        mm.busy = 0;
        pthread_cond_broadcast(&mm.idle);
        pthread_mutex_unlock(&mm.lock);
    }
    return NULL;
}

static void start(void)
{
    int fd = -1;
#ifdef UFFD_USER_MODE_ONLY
    /* allowed without privileges on kernels >= 5.11 */
    fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
#endif
    if (fd < 0)
        fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        snprintf(mm.why, sizeof(mm.why), "userfaultfd: %s (vm.unprivileged_userfaultfd?)",
                 strerror(errno));
        return;
    }
    struct uffdio_api api = {.api = UFFD_API,
                             .features = UFFD_FEATURE_EVENT_UNMAP | UFFD_FEATURE_EVENT_REMOVE |
                                         UFFD_FEATURE_EVENT_REMAP};
    if (ioctl(fd, UFFDIO_API, &api) != 0) {
        snprintf(mm.why, sizeof(mm.why), "userfaultfd lacks unmap events: %s", strerror(errno));
        close(fd);
        return;
    }
    mm.fd = fd;
    if (pthread_create(&mm.thread, NULL, monitor_main, NULL) != 0) {
        snprintf(mm.why, sizeof(mm.why), "cannot start the monitor thread");
        close(fd);
        mm.fd = -1;
        return;
    }
    pthread_detach(mm.thread);
    mm.ok = 1;
    snprintf(mm.why, sizeof(mm.why), "userfaultfd unmap events");
}

int memmon_watch(const void *addr, size_t len)
{
    if (!memmon_available(NULL) || len == 0)
        return -1;
    long pg = sysconf(_SC_PAGESIZE);
    uintptr_t s = (uintptr_t)addr & ~(uintptr_t)(pg - 1);
    uintptr_t e = ((uintptr_t)addr + len + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1);
    struct uffdio_register r = {.range = {.start = s, .len = e - s},
                                .mode = UFFDIO_REGISTER_MODE_WP};
    if (ioctl(mm.fd, UFFDIO_REGISTER, &r) == 0)
        return 0;
    FC_TRACE(LOG_MR, "cannot watch %p+%zu: %m (not cached)", addr, len);
    return -1;
}
#else
static void start(void)
{
    snprintf(mm.why, sizeof(mm.why), "no userfaultfd on this system");
}

int memmon_watch(const void *addr, size_t len)
{
    (void)addr;
    (void)len;
    return -1;
}
#endif

int memmon_available(const char **why)
{
    pthread_once(&mm.once, start);
    if (why)
        *why = mm.why;
    return mm.ok;
}

uint64_t memmon_seq(void)
{
    pthread_mutex_lock(&mm.lock);
    uint64_t s = mm.seq;
    pthread_mutex_unlock(&mm.lock);
    return s;
}

int memmon_drain(uint64_t *seen, void (*fn)(uintptr_t, uintptr_t, void *), void *ctx)
{
    /* copy a batch out, then call fn without the lock: fn may deregister
     * memory, which may unmap, which the monitor thread must record */
    uintptr_t st[64], en[64];
    for (;;) {
        pthread_mutex_lock(&mm.lock);
        while (mm.busy)
            pthread_cond_wait(&mm.idle, &mm.lock);
        uint64_t now = mm.seq;
        if (now - *seen > RING) {
            *seen = now;
            pthread_mutex_unlock(&mm.lock);
            return 1;
        }
        int k = 0;
        while (*seen + (uint64_t)k < now && k < 64) {
            st[k] = mm.start[(*seen + (uint64_t)k) % RING];
            en[k] = mm.end[(*seen + (uint64_t)k) % RING];
            k++;
        }
        *seen += (uint64_t)k;
        pthread_mutex_unlock(&mm.lock);
        if (k == 0)
            return 0;
        for (int i = 0; i < k; i++)
            fn(st[i], en[i], ctx);
    }
}
