/* SPDX-License-Identifier: BSD-3-Clause */
/* Rails (see rails.c): one transport over several endpoints of the same
 * provider. Chunks of large messages are dealt over the rails by their
 * index; every rail but the first is driven by its own thread, so on a
 * provider whose progress copies on the calling core (tcp's sockets, shm's
 * CMA) several cores move one collective's data. */
#ifndef FC_RAILS_H
#define FC_RAILS_H

#include "transport.h"

struct rails;

/* inner[0..n-1]: the rails' transports, peer tables alike; inner[0] is
 * driven by whoever calls progress on the rails, each other one by a thread
 * started here. n >= 1. */
fc_result_t rails_create(struct transport *const *inner, int n, struct rails **out);
struct transport *rails_transport(struct rails *r);
/* The rail a message takes: both ends compute it alike from the message's
 * tag, by its chunk index (so chunk 0, and every message of one chunk,
 * takes rail 0, with no hand-over). */
int rails_pick(int nrails, uint64_t tag);
/* Stops the rails' threads; the inner transports are then the caller's
 * again (stop them before rails_destroy). A failure seen by progress stops
 * them too. */
void rails_stop(struct rails *r);
/* Frees what rails_create made (after rails_stop and after the inner
 * transports stopped: no callback can come). */
void rails_destroy(struct rails *r);

#endif /* FC_RAILS_H */
