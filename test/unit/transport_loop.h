/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * In-process loopback transport: N ranks in one process, one thread.
 *
 * Used by the unit tests (every algorithm at 1..1024 ranks without a
 * network) and by fc_sim. Matching follows the fabric's rules: a receive
 * matches the oldest unmatched send from the same peer with the same tag.
 * A send completes only when it is matched and copied (rendezvous
 * semantics), which is stricter than an eager fabric: an algorithm that
 * would need the fabric to buffer for it deadlocks here instead of working
 * by luck. With a nonzero seed, completions are delivered in a shuffled
 * order to shake out missing dependencies.
 */
#ifndef FC_TRANSPORT_LOOP_H
#define FC_TRANSPORT_LOOP_H

#include <stdint.h>

#include "transport.h"

struct loop_fabric;

struct loop_fabric *loop_fabric_create(int nranks, unsigned seed);
/* With async_local, the transport also takes the engine's local steps and
 * runs them later, at a progress call (in shuffled order with a seed), as
 * a GPU would: the engine's asynchronous path without a GPU. */
struct loop_fabric *loop_fabric_create_async(int nranks, unsigned seed);
/* Sends complete in the order each rank posted them, across peers: a send
 * matched early waits for every earlier send of its rank to be matched.
 * This is libfabric 1.17 shm's behaviour (one response queue per endpoint,
 * completed from its head), under which a schedule that posts a receive
 * late can deadlock: call before the first send. With node (node[r]: rank
 * r's node; it must outlive f), only the sends between ranks of one node
 * are so ordered, as under per-peer paths, where shm carries a node's own
 * messages and the network provider, whose completions are not ordered,
 * the others; NULL: every send. */
void loop_fabric_order_sends(struct loop_fabric *f, const int *node);
struct transport *loop_transport(struct loop_fabric *f, int rank);
/* Messages and bytes delivered so far (all ranks). */
void loop_fabric_stats(const struct loop_fabric *f, uint64_t *msgs, uint64_t *bytes);
/* Messages delivered from rank `from` to rank `to` (fabrics of at most 64
 * ranks; 0 for larger ones). */
uint64_t loop_fabric_pair_msgs(const struct loop_fabric *f, int from, int to);
/* Unmatched sends/receives left (a correct run leaves none). */
int loop_fabric_pending(const struct loop_fabric *f);
void loop_fabric_destroy(struct loop_fabric *f);

/* A transport over another that passes everything on, first showing each
 * send and receive to a hook (is_send 1 or 0): tests that watch what the
 * engine posts. The hook may wrap x->done. */
struct loop_watch;
typedef void (*loop_watch_fn)(struct loop_watch *w, int is_send, int peer, const void *buf,
                              size_t len, struct xfer *x);
struct loop_watch {
    struct transport base;
    struct transport *inner;
    loop_watch_fn hook;
};
void loop_watch_init(struct loop_watch *w, struct transport *inner, loop_watch_fn hook);

#endif /* FC_TRANSPORT_LOOP_H */
