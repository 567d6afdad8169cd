/*
 * hub/loop/budget.h - the hub-wide queue budget (max_queued_total), enforced
 * per loop: each loop's share, the low and high marks, eviction of the
 * sessions furthest behind, and the per-recipient admission a fan-out
 * uses when a publication's copies do not all fit. The count itself is
 * the loop's queued_bytes gauge (hub_loop_queued_add/_sub in hub/loop/loop.h,
 * kept by the send queues).
 *
 * Thread: the owning loop only.
 */
#ifndef HUB_BUDGET_H
#define HUB_BUDGET_H

#include <stdbool.h>
#include <stdint.h>

#include "hub/loop/loop.h"

struct hub_session;

/*
 * The queue budget is split evenly between the loops: each loop holds at
 * most max_queued_total / loops queued bytes, so the sum never passes the
 * total. A loop accounts only its own queues, single-threaded (the
 * queued_bytes gauge is the count: no atomic anywhere, and one loop's slow
 * readers can never cost another loop's readers their share). The kernel
 * spreads connections evenly over the loops (SO_REUSEPORT), so even
 * shares lose little. 0 when there is no budget.
 */
static inline uint64_t hub_loop_budget(const struct hub_loop *l)
{
    unsigned n = l->hub->n_loops ? l->hub->n_loops : 1;

    return l->cfg->max_queued_total / n;
}

/*
 * Close this loop's sessions furthest behind (most queued bytes, and more
 * than an even share of the loop's budget) with 4100 until the loop holds
 * at most goal queued bytes. Without force, at most one scan per tick.
 * Returns the sessions closed.
 */
unsigned hub_loop_evict(struct hub_loop *l, uint64_t goal, bool force);

/* Eviction aims for the low mark, 3/4 of the loop's budget, and starts
 * past the high mark, 7/8. */
static inline uint64_t hub_budget_low(uint64_t budget)
{
    return budget - budget / 4;
}

static inline uint64_t hub_budget_high(uint64_t budget)
{
    return budget - budget / 8;
}

/*
 * A fan-out found that its copies do not all fit the loop's budget and
 * goes recipient by recipient: whether s gets the next n bytes. No when s
 * is not open (skipped), or holds more than share queued bytes, or n does
 * not fit the budget even after one forced eviction per fan-out (*forced
 * starts false): then s is closed 4100 (queue_budget) and counted in
 * queue_budget_drops, since a Pusher stream with a hole in it is worse
 * than a reconnect.
 */
bool hub_budget_admit(struct hub_loop *l, struct hub_session *s,
                      uint64_t share, uint64_t budget, uint64_t n,
                      bool *forced);

#endif
