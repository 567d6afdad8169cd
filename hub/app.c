/*
 * hub/app.c - TEMPORARY copy on the config branch so server/config.c links.
 * The hub engineer owns the real hub/app.c; at merge keep theirs and drop
 * this one. Values follow the defaults documented in hub/app.h.
 *
 * Thread: any; touches only the caller's struct.
 */
#include "hub/app.h"

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
}
