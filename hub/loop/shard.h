/*
 * hub/loop/shard.h - a loop's shard of the session registry.
 *
 * A dense array of {last_rx_ms, session} slots: add and remove are O(1)
 * (remove moves another slot into the hole), and the heartbeat scans
 * last_rx_ms in one sequential pass, touching a session only when it is
 * due. Stamping inbound traffic writes only the session's slot.
 *
 * The scan keeps a cursor. Removal keeps the invariant "slots below the
 * cursor were scanned this run, slots from the cursor on were not", so a
 * run visits every session that stays linked exactly once.
 *
 * Thread: the owning loop only.
 */
#ifndef HUB_SHARD_H
#define HUB_SHARD_H

#include <stdint.h>

struct hub_session;

struct hub_shard_slot {
    uint64_t last_rx_ms;
    struct hub_session *s;
};

struct hub_shard {
    struct hub_shard_slot *slots;
    uint32_t count, cap;
    uint32_t cursor;           /* heartbeat scan position */
};

void hub_shard_init(struct hub_shard *sh);
void hub_shard_fini(struct hub_shard *sh);
/* 0, or -ENOMEM. Sets s->shard_idx. */
int hub_shard_add(struct hub_shard *sh, struct hub_session *s, uint64_t now);
void hub_shard_remove(struct hub_shard *sh, struct hub_session *s);
/* Verify indexes and the cursor; 0 or -EFAULT. For tests. */
int hub_shard_check(const struct hub_shard *sh);

#endif
