/*
 * hub/hub.h - the composition root: a hub with the features it is built
 * with. The core (hub/loop) names no feature; this module, above every
 * feature, lists them (the online registry, cache channels, subscription
 * counts, the console's tail) and hands the list to hub_create_core()
 * (hub/loop/loop.h), which creates them through their hooks
 * (hub/loop/feature.h).
 *
 * Thread: the thread that creates and destroys the hub (the main thread).
 */
#ifndef HUB_HUB_H
#define HUB_HUB_H

#include "hub/loop/backplane.h"
#include "hub/loop/loop.h"

/*
 * Owned; NULL on failure. clock and cfg are borrowed for the hub's life.
 * With the in-process backplane (hub_backplane_local()); hub_destroy()
 * (hub/loop/loop.h) ends it.
 */
struct hub *hub_create(const struct hub_config *cfg,
                       const struct hub_clock *clock);

/* hub_create() with bp instead of the in-process backplane (copied; on
 * success the hub owns its impls, on failure the caller still does). */
struct hub *hub_create_with(const struct hub_config *cfg,
                            const struct hub_clock *clock,
                            const struct hub_backplane *bp);

#endif
