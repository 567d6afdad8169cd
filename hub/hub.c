/*
 * hub/hub.c - the composition root of hub/hub.h: the table of the hub's
 * features, in the order they are created (and ended in reverse), and the
 * two constructors that hand it to the core.
 */
#include "hub/hub.h"

#include "hub/channel/cache.h"
#include "hub/channel/history.h"
#include "hub/channel/online.h"
#include "hub/channel/subcount.h"
#include "hub/loop/directory.h"
#include "hub/ops/inspect.h"
#include "hub/ops/tail.h"

/*
 * The online registry first, as the hub always made it; the subscription
 * counts after the cache, as before. The tail only watches publications.
 */
static const struct hub_feature *const features[] = {
    &hub_online_feature,
    &hub_cache_feature,
    &hub_subcount_feature,
    &hub_tail_feature,
    &hub_history_feature,
    /* The console's socket inspector: each loop's ring of recent closes. */
    &hub_inspect_feature,
};

#define N_FEATURES (sizeof(features) / sizeof(features[0]))
_Static_assert(N_FEATURES <= HUB_MAX_FEATURES, "raise HUB_MAX_FEATURES");

struct hub *hub_create_with(const struct hub_config *cfg,
                            const struct hub_clock *clock,
                            const struct hub_backplane *bp)
{
    return hub_create_core(cfg, clock, bp, features, N_FEATURES);
}

struct hub *hub_create(const struct hub_config *cfg,
                       const struct hub_clock *clock)
{
    struct hub_backplane bp;
    struct hub *h;

    if (hub_backplane_local(&bp))
        return NULL;
    h = hub_create_with(cfg, clock, &bp);
    if (!h)
        hub_directory_destroy(bp.dir_impl);
    return h;
}
