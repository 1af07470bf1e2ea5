/* SPDX-License-Identifier: BSD-3-Clause */
/* Rails (see rails.c): one transport over several endpoints of the same
 * provider. Chunks of large messages are dealt over the rails by their
 * index; every rail but the first is driven by its own thread, so on a
 * provider whose progress is a system call per message (tcp) several cores
 * move one collective's data. */
#ifndef FC_RAILS_H
#define FC_RAILS_H

#include "transport.h"

/* Messages shorter than this always take rail 0 (driven by the caller):
 * the cost of a hand-over to a rail's thread would show in their latency. */
#define RAILS_MIN_BYTES (64u << 10)

struct rails;

/* inner[0..n-1]: the rails' transports, peer tables alike; inner[0] is
 * driven by whoever calls progress on the rails, each other one by a thread
 * started here. n >= 1. */
fc_result_t rails_create(struct transport *const *inner, int n, struct rails **out);
struct transport *rails_transport(struct rails *r);
/* The rail a message takes: both ends compute it alike from the message's
 * tag (its chunk index) and length (a receive: the length expected). */
int rails_pick(int nrails, uint64_t tag, size_t len);
/* Stops the rails' threads; the inner transports are then the caller's
 * again (stop them before rails_destroy). */
void rails_stop(struct rails *r);
/* Frees what rails_create made (after rails_stop and after the inner
 * transports stopped: no callback can come). */
void rails_destroy(struct rails *r);

#endif /* FC_RAILS_H */
