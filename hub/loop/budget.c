/*
 * hub/loop/budget.c - eviction and admission under the queue budget
 * (hub/loop/budget.h).
 */
#include "hub/loop/budget.h"

#include <stdlib.h>

#include "hub/loop/session.h"

/*
 * The queue budget (hub_loop_budget). Eviction closes the sessions
 * furthest behind first: one scan of the shard collects the open sessions
 * holding more than an even share of the loop's budget (budget / its
 * sessions, so readers that keep up are not candidates), sorted by queued
 * bytes, and closes them in that order until the loop is down to goal.
 * Rare by construction (past 7/8 of the budget), so one allocation per
 * scan is fine; unforced scans are limited to one a tick.
 */
struct evict_cand {
    uint64_t bytes;
    struct hub_session *s;
};

static int evict_cmp(const void *a, const void *b)
{
    const struct evict_cand *x = a, *y = b;

    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

unsigned hub_loop_evict(struct hub_loop *l, uint64_t goal, bool force)
{
    uint64_t budget = hub_loop_budget(l), share;
    struct evict_cand *c;
    uint32_t n = 0;
    unsigned closed = 0;

    if (!budget || hub_loop_queued(l) <= goal || !l->shard.count)
        return 0;
    if (!force && l->evict_last_ms &&
        l->now_ms - l->evict_last_ms < l->cfg->tick_ms)
        return 0;
    l->evict_last_ms = l->now_ms ? l->now_ms : 1;
    share = budget / l->shard.count;
    c = malloc((size_t)l->shard.count * sizeof(*c));
    if (!c)
        return 0;
    for (uint32_t i = 0; i < l->shard.count; i++) {
        struct hub_session *s = l->shard.slots[i].s;

        if (s->state == HUB_SESSION_OPEN && s->q.bytes > share)
            c[n++] = (struct evict_cand){ s->q.bytes, s };
    }
    qsort(c, n, sizeof(*c), evict_cmp);
    for (uint32_t i = 0; i < n && hub_loop_queued(l) > goal; i++) {
        hub_session_close_behind(c[i].s, "Over the hub's send queue budget",
                                 HUB_CLOSE_QUEUE_BUDGET);
        closed++;
    }
    free(c);
    return closed;
}

/*
 * Whether n more bytes fit the loop's budget; the first time one does not,
 * evict (forced) and look again.
 */
static bool budget_fits(struct hub_loop *l, uint64_t budget, uint64_t n,
                        bool *forced)
{
    if (hub_loop_queued(l) + n <= budget)
        return true;
    if (!*forced) {
        *forced = true;
        hub_loop_evict(l, budget - n, true);
    }
    return hub_loop_queued(l) + n <= budget;
}

bool hub_budget_admit(struct hub_loop *l, struct hub_session *s,
                      uint64_t share, uint64_t budget, uint64_t n,
                      bool *forced)
{
    if (s->state != HUB_SESSION_OPEN)
        return false;
    if (s->q.bytes > share || !budget_fits(l, budget, n, forced)) {
        HUB_STAT_ADD(l->stats.queue_budget_drops, 1);
        hub_session_close_behind(s, "Over the hub's send queue budget",
                                 HUB_CLOSE_QUEUE_BUDGET);
        return false;
    }
    return true;
}
