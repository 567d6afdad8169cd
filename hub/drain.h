/*
 * hub/drain.h - the graceful drain (SIGTERM): every loop closes its
 * sessions with 4200, jittered over drain_timeout less the close
 * handshake's time, then leaves its service loop when its shard is empty
 * or the deadline passed.
 *
 * Thread: hub_start_drain() any thread; the rest on the loop's own.
 */
#ifndef HUB_DRAIN_H
#define HUB_DRAIN_H

#include <stdint.h>

struct hub;
struct hub_loop;

/* From hub_loop_create: the loop's drain timer and inbox node. */
void hub_drain_init(struct hub_loop *l);
/* The loop's drain node came out of its inbox: start draining it. */
void hub_drain_loop(struct hub_loop *l, uint64_t now_ms);

#endif
