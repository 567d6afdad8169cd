/*
 * hub/loop/feature.h - the table of feature hooks through which the core
 * reaches the features built on it (cache channels, subscription counts,
 * the online registry, the console's tail), as nginx's core reaches its
 * modules only through init_module / init_process.
 *
 * A feature is one struct hub_feature, defined by the feature's own module
 * (hub/channel/cache.c's hub_cache_feature ...). The composition root
 * (hub/hub.c) lists the features a hub has and hands the list to
 * hub_create_core() (hub/loop/loop.h); the core then walks it and never
 * names a feature:
 * - hub_init at the hub's creation, in the list's order: the feature's
 *   hub-wide state into *state (kept in the hub's slot for it); hub_fini
 *   at hub_destroy(), in the reverse order, after the backplane ended and
 *   every loop is gone.
 * - loop_init at each hub_loop_create(), in the list's order: the
 *   feature's state for that loop into *state (NULL is fine: nothing for
 *   this loop); loop_fini at hub_loop_destroy(), in the reverse order,
 *   before the inbox's leftover nodes are dropped.
 * - beat at the start of each run of a loop's heartbeat (hub/loop/heartbeat.h),
 *   on that loop's thread: periodic upkeep that needs no wheel entry of its
 *   own, so a loop's wheel still holds its sessions' entries and the
 *   heartbeat alone (wheel_pending in docs/OPERATIONS.md). Keep it short:
 *   it runs inside the heartbeat's first slice.
 * - published for every publication that enters this process's loops
 *   (hub_fanout_loops, hub/loop/publish.h), before it is posted: the
 *   request is borrowed for the call; never blocks.
 * Every hook is optional (NULL = nothing to do). An init returns 0 or a
 * negative errno; when one fails, the hooks that ran are undone (fini) and
 * the creation fails.
 *
 * A feature finds its state with hub_feature_state() /
 * hub_loop_feature_state() (hub/loop/loop.h), given its own descriptor: the
 * slot is opaque to the core. A hub created without a feature answers
 * NULL, which every feature treats as "off".
 *
 * Thread: hub_init / hub_fini on the thread that creates and destroys the
 * hub; loop_init / loop_fini where hub_loop_create() / hub_loop_destroy()
 * run (the loop's own thread for the fini); beat on the loop's thread;
 * published from any thread.
 */
#ifndef HUB_FEATURE_H
#define HUB_FEATURE_H

#include <stdint.h>

struct hub;
struct hub_loop;
struct hub_pub_req;

/* Features a hub can hold. */
#define HUB_MAX_FEATURES 8

struct hub_feature {
    const char *name;              /* for messages and tests */
    int (*hub_init)(struct hub *h, void **state);
    void (*hub_fini)(struct hub *h, void *state);
    int (*loop_init)(struct hub_loop *l, void **state);
    void (*loop_fini)(struct hub_loop *l, void *state);
    void (*beat)(struct hub_loop *l, uint64_t now_ms);
    void (*published)(struct hub *h, const struct hub_pub_req *r);
};

#endif
