/*
 * hub/loop/backplane.c - the in-process backplane: a new directory
 * (hub/loop/directory.c) and the local bus (hub/loop/publish.c) in one
 * struct hub_backplane, which hub_create() (hub/hub.c) installs and the
 * delayed test directory (hub/loop/dirdelay_harness.c) wraps.
 *
 * Thread: any; the caller owns the result until a hub takes it.
 */
#include "hub/loop/backplane.h"

#include <errno.h>
#include <stdlib.h>

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

void hub_hist_read_free(struct hub_hist_read *rd)
{
    if (!rd)
        return;
    for (size_t i = 0; i < rd->n; i++)
        free(rd->e[i].data);
    free(rd->e);
    free(rd->name);
    free(rd);
}
