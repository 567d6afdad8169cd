/*
 * hub/loop/backplane.c - the in-process backplane (hub/loop/directory.c for the
 * directory, hub/loop/publish.c for the bus) and hub_create(), which installs
 * it. Kept out of hub/loop/loop.c so that the loop calls neither part: the
 * publication code uses the loop, not the other way round.
 */
#include "hub/loop/backplane.h"

#include <errno.h>

int hub_backplane_local(struct hub_backplane *bp)
{
    struct hub_directory *d = hub_directory_create();

    if (!d)
        return -ENOMEM;
    *bp = (struct hub_backplane){
        .dir = &hub_directory_local_ops,
        .dir_impl = d,
        .bus = &hub_bus_local_ops,
        .bus_impl = NULL,
    };
    return 0;
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
