/* SPDX-License-Identifier: BSD-3-Clause */
/* Paths (see paths.c): one transport over two, each peer reached through the
 * one its node says: the node's own (shm) for ranks of this node, the
 * network's for the others. */
#ifndef FC_PATHS_H
#define FC_PATHS_H

#include "transport.h"

struct paths;

/* net and local: transports with peer tables alike (transport peer = world
 * rank); local_peer[p] nonzero: peer p goes through local. The transports
 * stay the caller's; local_peer is copied. */
fc_result_t paths_create(struct transport *net, struct transport *local, int npeers,
                         const unsigned char *local_peer, struct paths **out);
struct transport *paths_transport(struct paths *p);
/* 1: peer goes through the local transport (a rank of this node). */
int paths_is_local(const struct paths *p, int peer);
void paths_destroy(struct paths *p);

#endif /* FC_PATHS_H */
