/*
 * hub/loop/drain.h - the graceful drain (SIGTERM): every loop closes its
 * sessions with 4200, jittered over drain_timeout less the close
 * handshake's time, then leaves its service loop when its shard is empty
 * or the deadline passed.
 *
 * hub_start_drain() (any thread) is declared in hub/loop/loop.h.
 *
 * Thread: hub_start_drain() any thread; the rest on the loop's own.
 */
#ifndef HUB_DRAIN_H
#define HUB_DRAIN_H

#include <stdint.h>

#include "hub/loop/inbox.h"

struct hub;
struct hub_loop;

/* The loop's drain node: run starts the drain, drop releases nothing. */
extern const struct hub_inbox_ops hub_drain_ops;

/* From hub_loop_create: the loop's drain timer and inbox node. */
void hub_drain_init(struct hub_loop *l);

#endif
