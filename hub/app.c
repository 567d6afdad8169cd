/*
 * hub/app.c - defaults for an app's switches and limits.
 *
 * The numbers follow Pusher's published limits (docs/PROTOCOL.md section 8), so
 * an app that configures nothing behaves like a Pusher app. Pure: any thread.
 */
#include "hub/app.h"

#include <string.h>

void hub_app_defaults(struct hub_app *app)
{
    app->enabled = true;
    app->client_events = true;
    app->max_connections = 0;
    app->client_event_rate = 10;
    app->max_presence_members = 100;
    app->max_user_info_bytes = 1024;
    app->max_user_id_len = 128;
    app->max_event_bytes = 10240;
    app->max_event_name = 200;
    app->max_channels_per_event = 100;
    app->max_batch_events = 10;
    app->max_channel_name = 200;
    app->webhook_batching = true;
    /* Authorized connections: off, and Pusher's 30 s when on. */
    app->enable_user_authentication = false;
    app->user_auth_timeout_ms = 30000;
    app->watchlist_events = true;
    app->max_watchlist = 100;
    app->max_watchers = 1000;
}

static bool equal(const char *field, const char *s, size_t len)
{
    return field && strlen(field) == len && memcmp(field, s, len) == 0;
}

const struct hub_app *hub_app_find_by_key(const struct hub_app *apps,
                                          unsigned n, const char *key,
                                          size_t len)
{
    for (unsigned i = 0; i < n; i++)
        if (equal(apps[i].key, key, len))
            return &apps[i];
    return NULL;
}

const struct hub_app *hub_app_find_by_id(const struct hub_app *apps,
                                         unsigned n, const char *id,
                                         size_t len)
{
    for (unsigned i = 0; i < n; i++)
        if (equal(apps[i].id, id, len))
            return &apps[i];
    return NULL;
}
