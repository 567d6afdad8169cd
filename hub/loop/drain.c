/*
 * hub/loop/drain.c - the drain. Each session gets its 4200 from its own idle
 * entry at a random point of the window (hub_session_drain), so a large
 * loop does not close every connection in one pass and the clients do not
 * all reconnect at once; a per-loop timer checks each tick whether the
 * loop is empty or out of time.
 */
#include "hub/loop/drain.h"

#include <stdatomic.h>

#include "hub/loop/loop.h"

static void drain_timer_cb(struct hub_timer *t, uint64_t now_ms)
{
    struct hub_loop *l = hub_container_of(t, struct hub_loop, drain_timer);

    if (l->shard.count == 0 || now_ms >= l->drain_deadline_ms) {
        l->stop = true;
        if (l->wake)
            l->wake(l->wake_ctx);
        return;
    }
    hub_wheel_start(l->wheel, t, now_ms, (int64_t)l->cfg->tick_ms);
}

/* The drain order came out of l's inbox: start draining l. */
static void start_drain(struct hub_loop *l, uint64_t now_ms)
{
    uint64_t spread;
    const struct hub_config *cfg = l->cfg;

    if (l->draining)
        return;
    l->draining = true;
    hub_task_stop(&l->heartbeat);
    l->drain_deadline_ms = now_ms + cfg->drain_timeout_ms;
    /* Leave room for the close handshake (and its timeout) at the end. */
    spread = cfg->drain_timeout_ms > cfg->close_timeout_ms + 500
                 ? cfg->drain_timeout_ms - cfg->close_timeout_ms - 500
                 : 0;
    for (uint32_t i = 0; i < l->shard.count; i++) {
        struct hub_session *s = l->shard.slots[i].s;

        if (hub_session_is_open(s))
            hub_session_drain(s, now_ms,
                              spread ? hub_loop_random(l) % spread : 0);
    }
    hub_wheel_start(l->wheel, &l->drain_timer, now_ms, 0);
}

/* The drain order (hub_start_drain): the node is part of the loop. */
static void drain_run(struct hub_inbox_node *n, struct hub_loop *l,
                      uint64_t now_ms)
{
    (void)n;
    start_drain(l, now_ms);
}

static void drain_drop(struct hub_inbox_node *n)
{
    (void)n; /* Embedded in the loop: nothing to release. */
}

const struct hub_inbox_ops hub_drain_ops = {
    .run = drain_run,
    .drop = drain_drop,
};

void hub_drain_init(struct hub_loop *l)
{
    l->drain_node.ops = &hub_drain_ops;
    hub_timer_init(&l->drain_timer, drain_timer_cb);
}

void hub_start_drain(struct hub *h)
{
    /* Each loop's drain node may sit in its inbox only once. */
    if (atomic_exchange(&h->draining, true))
        return;
    for (unsigned i = 0; i < h->n_loops; i++)
        hub_loop_post(h->loops[i], &h->loops[i]->drain_node);
}
