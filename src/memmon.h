/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Memory monitor: tells registration caches when memory they cached was
 * freed or unmapped, so a stale registration is never used for a buffer
 * that now lives at the same address.
 *
 * Linux userfaultfd in write-protect mode: a watched range raises no fault
 * (nothing is ever write-protected) but the kernel reports munmap, mremap
 * and madvise(DONTNEED/REMOVE) on it, and the thread that unmaps waits
 * until the report is read. A monitor thread reads the reports into a ring
 * of invalidated ranges; caches drain the ring (under their own lock) before
 * every lookup. Because the unmapping thread waits for the read, by the time
 * free() returns to the application the invalidation is in the ring: no
 * window in which a lookup could hit a stale entry. Where userfaultfd is
 * not allowed (unprivileged with vm.unprivileged_userfaultfd=0 on kernels
 * without UFFD_USER_MODE_ONLY), memmon_available() is 0 and callers must
 * not cache user buffers.
 */
#ifndef FC_MEMMON_H
#define FC_MEMMON_H

#include <stddef.h>
#include <stdint.h>

/* Starts the monitor on first use; 1 when it runs. *why says otherwise. */
int memmon_available(const char **why);
/* Watches [addr, addr+len) (rounded to pages); 0 on success, -1 if the
 * range cannot be watched (not anonymous memory, ...): do not cache it. */
int memmon_watch(const void *addr, size_t len);
/* The sequence number of the next invalidation to be recorded. */
uint64_t memmon_seq(void);
/* Calls fn for every range invalidated since *seen (exclusive), then
 * advances *seen. Returns 1 if the ring overflowed since *seen (the caller
 * must then drop everything it cached), else 0. */
int memmon_drain(uint64_t *seen, void (*fn)(uintptr_t start, uintptr_t end, void *ctx),
                 void *ctx);

#endif /* FC_MEMMON_H */
