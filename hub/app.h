/*
 * hub/app.h - one Pusher app: credentials, switches and limits.
 *
 * Apps are loaded by server/ at start and are read-only afterwards, so any
 * thread may read them. Strings are owned by whoever filled the struct
 * (server/config.c) and live for the process.
 */
#ifndef HUB_APP_H
#define HUB_APP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hub_webhook_conf;

struct hub_app {
    char *id;                        /* "app-id" */
    char *key;                       /* "app-key" */
    char *secret;                    /* "app-secret" */
    bool enabled;                    /* default true */
    bool client_events;              /* default true */
    uint32_t max_connections;        /* 0 = unlimited */
    uint32_t client_event_rate;      /* per connection per second, default 10 */
    uint32_t max_presence_members;   /* default 100 */
    uint32_t max_user_info_bytes;    /* default 1024 */
    uint32_t max_user_id_len;        /* default 128 */
    uint32_t max_event_bytes;        /* event data, default 10240 */
    uint32_t max_event_name;         /* default 200 */
    uint32_t max_channels_per_event; /* default 100 */
    uint32_t max_batch_events;       /* default 10 */
    uint32_t max_channel_name;       /* default 200 */
    /* Webhooks (hub/webhook.h): owned by the app, freed in one place,
     * hub_app_webhooks_free(), so a reloaded app brings its own. */
    struct hub_webhook_conf *webhooks;
    unsigned n_webhooks;
    unsigned webhook_types;          /* union of the webhooks' types */
    bool webhook_batching;           /* default true (Pusher batches) */
    /* Authorized connections and watchlists (hub/watchlist.c). */
    bool enable_user_authentication; /* close unsigned sessions; false */
    uint64_t user_auth_timeout_ms;   /* signin deadline, default 30 s */
    bool watchlist_events;           /* watchlists honoured; default true */
    uint32_t max_watchlist;          /* ids in one watchlist, default 100 */
    uint32_t max_watchers;           /* watchers of one user, default 1000,
                                        0 = unlimited */
    /* Cache channels, subscription counts, the subscription cap: 0 takes
     * the hub-wide value (struct hub_config). */
    uint64_t cache_ttl_ms;
    uint64_t cache_max_bytes;
    uint32_t max_subscriptions;      /* channels per connection */
    bool subscription_count;         /* pusher_internal:subscription_count */
    unsigned index;                  /* position in the app table */
};

/* Fill the limits and switches with their defaults; strings untouched. */
void hub_app_defaults(struct hub_app *app);

/* The app among apps[0..n) with that key / id (not NUL-terminated);
 * borrowed, NULL when none. Apps with a NULL key / id never match. */
const struct hub_app *hub_app_find_by_key(const struct hub_app *apps,
                                          unsigned n, const char *key,
                                          size_t len);
const struct hub_app *hub_app_find_by_id(const struct hub_app *apps,
                                         unsigned n, const char *id,
                                         size_t len);

#endif
