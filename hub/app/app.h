/*
 * hub/app/app.h - one Pusher app: credentials, switches and limits.
 *
 * An app is immutable once a hub table holds it (hub/app/apptab.h), so any
 * loop may read it. Two kinds exist:
 * - borrowed: the apps of hub_config (server/config/ fills them, tests
 *   use static ones); refs stays 0, they live for the hub and ref/unref
 *   do nothing;
 * - owned: made by hub_app_dup() (a reload, server/reload.c), refcounted:
 *   the table that lists it and every session that points at it hold a
 *   reference; the last hub_app_unref() frees it with hub_app_free().
 */
#ifndef HUB_APP_H
#define HUB_APP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hub_wh_conf;

/*
 * Key rotation (docs/CONFIG.md "Key rotation"): an app holds 1 to
 * HUB_APP_KEYS_MAX key/secret pairs. The first pair is struct hub_app's
 * key and secret, the others its more_keys. Every pair is accepted alike:
 * a connection opens on any pair's key (/app/KEY), and REST requests,
 * channel auth and sign-in verify with the pair whose key they name. The
 * first pair alone signs what the hub signs: webhooks (X-Pusher-Key,
 * X-Pusher-Signature) and the development /auth. Keys are unique across
 * every pair of every app (server/config/validate.c), so a key names one
 * app and one pair. The bound keeps a connection's pair index in four
 * bits of its session (hub/loop/session.h) and the pair lookups linear.
 */
#define HUB_APP_KEYS_MAX 16

struct hub_app_pair {
    char *key;
    char *secret;
};

struct hub_app {
    char *id;                        /* "app-id" */
    char *key;                       /* "app-key": the first pair's */
    char *secret;                    /* "app-secret": the first pair's */
    /* The pairs after the first (owned; NULL when n_more_keys is 0), in
     * the configuration's order: at most HUB_APP_KEYS_MAX - 1. */
    struct hub_app_pair *more_keys;
    unsigned n_more_keys;
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
    /* Webhooks (hub/webhook/webhook.h): owned by the app, freed in one place,
     * hub_wh_app_free(), so a reloaded app brings its own. */
    struct hub_wh_conf *webhooks;
    unsigned n_webhooks;
    unsigned webhook_types;          /* union of the webhooks' types */
    bool webhook_batching;           /* default true (Pusher batches) */
    /* Authorized connections and watchlists (hub/pusher/watchlist.c). */
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
    /* permessage-deflate for this app's sessions when the hub's
     * --compression is on too (issue 34); default true. */
    bool compression;
    /* History (issue 35, docs/RECOVERY.md): the events a channel keeps so
     * that a client back from a reconnect gets what it missed. Off by
     * default; when on, a channel keeps at most history_size events for
     * history_ttl_ms, the app at most history_max_bytes (0 = no bound of
     * its own: the hub's --history-max-bytes alone). history_channels
     * (owned, NULL when n_history_channels is 0 = every channel) are
     * patterns: one ending in '*' is a prefix, any other an exact name.
     * hub_app_history_on() reads them. */
    bool history;
    uint64_t history_ttl_ms;         /* default 120 s */
    uint32_t history_size;           /* events per channel, default 1000 */
    uint64_t history_max_bytes;      /* 0 = the hub bound only */
    char **history_channels;
    unsigned n_history_channels;
    /* Per-app limits and origins (issue 13, item 6). */
    char *allowed_origins;           /* comma list; NULL = the hub-wide one */
    uint32_t max_backend_events_per_second; /* REST events; 0 = off */
    uint32_t max_read_requests_per_second;  /* REST GETs; 0 = off */
    /* Position in the app table: stable across reloads (the same id keeps
     * it, removed ones are never reused; hub/app/apptab.h). */
    unsigned index;
    atomic_uint refs;                /* 0 = borrowed; see the top */
};

/*
 * App ids (docs/CONFIG.md, "App ids"): 1 to HUB_APP_ID_MAX characters of
 * A-Z a-z 0-9 '-' '_' '.'. Pusher's ids are digits; soketi's and others'
 * letters and digits. No ':' above all: the cluster names its Redis
 * channels "prefix:appid:channel" (hub/cluster/cluster.h), so an id with a ':'
 * could make two apps' channels the same name; no spaces or control
 * characters, which logs, metrics labels and URLs would have to escape.
 */
#define HUB_APP_ID_MAX 64
#define HUB_APP_ID_CHARS "A-Z a-z 0-9 - _ ."

/*
 * Is id (NUL-terminated) an allowed app id? 0 when it is; -EINVAL when it
 * is empty or longer than HUB_APP_ID_MAX (*bad = its length); -EILSEQ
 * when the byte at id[*bad] is not allowed (the first such). bad may be
 * NULL. Any thread (pure).
 */
int hub_app_id_check(const char *id, size_t *bad);

/* Fill the limits and switches with their defaults; strings untouched. */
void hub_app_defaults(struct hub_app *app);

/* Bounds of the "history" app key (server/config/config_history.c checks
 * them; docs/CONFIG.md "History"). */
#define HUB_APP_HISTORY_TTL_MIN_MS UINT64_C(1000)
#define HUB_APP_HISTORY_TTL_MAX_MS UINT64_C(86400000)
#define HUB_APP_HISTORY_SIZE_MAX 100000u
#define HUB_APP_HISTORY_CHANNELS_MAX 64u
#define HUB_APP_HISTORY_PATTERN_MAX 200u

/*
 * Does app a keep history for the channel name[0..len) (not
 * NUL-terminated)? True when a's history is on and it lists no channels
 * or name matches one of its patterns (a trailing '*' matches any rest,
 * the empty one included; otherwise the whole name). Public, private,
 * presence and cache channels all may; a "#" name (#server-to-user-...,
 * the hub's own) never. Any thread (pure; the app is immutable).
 */
bool hub_app_history_on(const struct hub_app *a, const char *name,
                        size_t len);

/*
 * THE ONE COPY / COMPARE / FREE PATH. A field added to struct hub_app that
 * owns memory (a string, a list) or that a reload must notice goes into
 * all three of these functions, and nowhere else: a reload (server/
 * reload.c) copies every app with hub_app_dup(), tells changed apps from
 * unchanged ones with hub_app_equal(), and the last reference frees the
 * copy with hub_app_free(), whose hub_app_clear() also frees the
 * configuration's own apps (server/config/load_file.c). A new field set
 * from the file needs a row in server/config/options.c's srv_app_fields[]
 * as well. Exception: the webhook list is freed by hub_wh_app_free() (hub/webhook/webhook.c) for
 * the configuration's apps, and a reloaded copy has none (the webhook
 * sender keeps its own copy of each app, server/webhook/webhook_send.c).
 */
/* A deep, owned copy of a (refs = 1, index copied); NULL when out of
 * memory. */
struct hub_app *hub_app_dup(const struct hub_app *a);
/* Every configured field equal (index and refs are not compared). */
bool hub_app_equal(const struct hub_app *a, const struct hub_app *b);
/* Free what the fields of a own (strings, lists) and NULL them; the
 * struct itself stays (server/config/load_file.c's inline apps use this
 * too). */
void hub_app_clear(struct hub_app *a);
/* hub_app_clear() and free the struct; NULL is a no-op. */
void hub_app_free(struct hub_app *a);

/* Any thread. No-ops on borrowed apps (refs 0) and NULL. */
void hub_app_ref(const struct hub_app *a);
void hub_app_unref(const struct hub_app *a);

/* The app's key/secret pairs: how many (0 only for an app without a key,
 * as tests make), the i-th pair's key and secret (i = 0: key and secret;
 * NULL past the last), and the index of the pair whose key is
 * key[0..len) (not NUL-terminated), -1 when none. Keys are public (they
 * travel in URLs), so the search compares them plainly. Any thread. */
unsigned hub_app_n_keys(const struct hub_app *a);
const char *hub_app_key_at(const struct hub_app *a, unsigned i);
const char *hub_app_secret_at(const struct hub_app *a, unsigned i);
int hub_app_key_find(const struct hub_app *a, const char *key, size_t len);

/* Linear scans for the configuration's own checks and tests; the hub
 * finds apps through its hash table (hub/app/apptab.h). The app among
 * apps[0..n) with that key (any of its pairs') / id (not NUL-terminated);
 * borrowed, NULL when none. Apps with a NULL key / id never match. */
const struct hub_app *hub_app_find_by_key(const struct hub_app *apps,
                                          unsigned n, const char *key,
                                          size_t len);
const struct hub_app *hub_app_find_by_id(const struct hub_app *apps,
                                         unsigned n, const char *id,
                                         size_t len);

#endif
