/*
 * hub/loop/heartbeat.c - the heartbeat scan. The per-session decision (skip a
 * session closing or already waiting for a pong, arm the pong deadline,
 * queue the ping) is hub_session_queue_ping()'s; this file only decides
 * which sessions are silent, from the shard's last_rx stamps, a slice at a
 * time.
 */
#include "hub/loop/heartbeat.h"

#include <errno.h>

#include "hub/loop/loop.h"

/* heartbeat_interval, or a fifth of the ping interval up to 1 s; never
 * under a tick. */
static uint64_t heartbeat_period(const struct hub_config *cfg)
{
    uint64_t p = cfg->heartbeat_interval_ms;

    if (!p) {
        p = cfg->ping_interval_ms / 5;
        if (p > 1000)
            p = 1000;
    }
    if (p < cfg->tick_ms)
        p = cfg->tick_ms;
    return p;
}

static int heartbeat_slice(struct hub_task *t, uint64_t now_ms, unsigned slice,
                           void *arg)
{
    struct hub_loop *l = arg;
    struct hub_shard *sh = &l->shard;
    uint32_t end;
    uint64_t threshold;
    int failures = 0;

    (void)t;
    if (slice == 0) {
        const struct hub *h = l->hub;

        sh->cursor = 0;
        /* Once a run: the features' upkeep (hub/loop/feature.h, beat). */
        for (unsigned i = 0; i < h->n_features; i++)
            if (h->features[i]->beat)
                h->features[i]->beat(l, now_ms);
    }
    end = sh->cursor + HUB_HEARTBEAT_SLICE < sh->count
              ? sh->cursor + HUB_HEARTBEAT_SLICE
              : sh->count;
    if (now_ms < l->cfg->ping_interval_ms) {
        sh->cursor = end;
        return end < sh->count ? HUB_TASK_MORE : HUB_TASK_DONE;
    }
    threshold = now_ms - l->cfg->ping_interval_ms;
    for (uint32_t i = sh->cursor; i < end; i++) {
        if (sh->slots[i].last_rx_ms > threshold)
            continue;
        if (hub_session_queue_ping(sh->slots[i].s, now_ms) < 0)
            failures++;
    }
    sh->cursor = end;
    if (failures)
        return -EIO;
    return end < sh->count ? HUB_TASK_MORE : HUB_TASK_DONE;
}

int hub_heartbeat_start(struct hub_loop *l, uint64_t now_ms)
{
    uint64_t p = heartbeat_period(l->cfg);

    hub_task_init(&l->heartbeat, l->wheel, l->clock, heartbeat_slice, l);
    return hub_task_start(&l->heartbeat, now_ms, p, p);
}
