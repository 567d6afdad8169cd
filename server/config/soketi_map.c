/*
 * server/config/soketi_map.c - soketi's names and what each becomes in
 * lubdub (server/config/soketi_map.h). The rows follow soketi's own
 * spellings: each SOKETI_* variable after its prefix (soketi's cli.ts) and
 * the option path its config.json gives (soketi's options.ts, dotted as
 * its dot.set() reads them); an app object's keys as its app.ts reads them.
 * A name that is in no row is not supported: load_soketi.c warns of it.
 *
 * Thread: any (the tables are constant).
 */
#include "server/config/soketi_map.h"

#include <string.h>

static const struct srv_sk_row sk_rows[] = {
    {"DEBUG", "debug", SRV_SK_HUB, SRV_SK_DEBUG, "log_level"},
    {"HOST", "host", SRV_SK_HUB, SRV_SK_TEXT, "bind"},
    {"PORT", "port", SRV_SK_HUB, SRV_SK_UINT, "port"},
    {"SSL_CERT", "ssl.certPath", SRV_SK_HUB, SRV_SK_TEXT, "tls_cert"},
    {"SSL_KEY", "ssl.keyPath", SRV_SK_HUB, SRV_SK_TEXT, "tls_key"},
    {"SHUTDOWN_GRACE_PERIOD", "shutdownGracePeriod", SRV_SK_HUB, SRV_SK_MS,
     "drain_timeout"},
    {"CHANNEL_CACHE_TTL", "channelLimits.cacheTtl", SRV_SK_HUB, SRV_SK_SEC,
     "cache_ttl"},
    {"ADAPTER_REDIS_PREFIX", "adapter.redis.prefix", SRV_SK_HUB, SRV_SK_TEXT,
     "redis_prefix"},
    {"APP_MANAGER_DRIVER", "appManager.driver", SRV_SK_HUB, SRV_SK_ONLY, "array"},
    {"MODE", "mode", SRV_SK_HUB, SRV_SK_ONLY, "full"},
    {"METRICS_DRIVER", "metrics.driver", SRV_SK_HUB, SRV_SK_ONLY, "prometheus"},
    /* The groups. */
    {"ADAPTER_DRIVER", "adapter.driver", SRV_SK_HUB, SRV_SK_GROUP, NULL},
    {"DB_REDIS_HOST", "database.redis.host", SRV_SK_HUB, SRV_SK_GROUP, NULL},
    {"DB_REDIS_PORT", "database.redis.port", SRV_SK_HUB, SRV_SK_GROUP, NULL},
    {"DB_REDIS_DB", "database.redis.db", SRV_SK_HUB, SRV_SK_GROUP, NULL},
    {"DB_REDIS_USERNAME", "database.redis.username", SRV_SK_HUB, SRV_SK_GROUP, NULL},
    {"DB_REDIS_PASSWORD", "database.redis.password", SRV_SK_HUB, SRV_SK_GROUP, NULL},
    {"DB_REDIS_KEY_PREFIX", "database.redis.keyPrefix", SRV_SK_HUB, SRV_SK_GROUP,
     NULL},
    {"DB_REDIS_SENTINELS", "database.redis.sentinels", SRV_SK_HUB, SRV_SK_GROUP,
     NULL},
    {"DB_REDIS_INSTANCE_NAME", "database.redis.name", SRV_SK_HUB, SRV_SK_GROUP, NULL},
    {"METRICS_ENABLED", "metrics.enabled", SRV_SK_HUB, SRV_SK_GROUP, NULL},
    {"METRICS_SERVER_PORT", "metrics.port", SRV_SK_HUB, SRV_SK_GROUP, NULL},
    {"METRICS_HOST", "metrics.host", SRV_SK_HUB, SRV_SK_GROUP, NULL},
    /* Hub-wide in soketi, an app's own key in lubdub. */
    {"CHANNEL_LIMITS_MAX_NAME_LENGTH", "channelLimits.maxNameLength",
     SRV_SK_APPS, SRV_SK_UINT, "max_channel_name"},
    {"EVENT_MAX_BATCH_SIZE", "eventLimits.maxBatchSize", SRV_SK_APPS, SRV_SK_UINT,
     "max_batch_events"},
    {"EVENT_MAX_CHANNELS_AT_ONCE", "eventLimits.maxChannelsAtOnce", SRV_SK_APPS,
     SRV_SK_UINT, "max_channels_per_event"},
    {"EVENT_MAX_NAME_LENGTH", "eventLimits.maxNameLength", SRV_SK_APPS, SRV_SK_UINT,
     "max_event_name"},
    {"EVENT_MAX_SIZE_IN_KB", "eventLimits.maxPayloadInKb", SRV_SK_APPS, SRV_SK_KIB,
     "max_event_bytes"},
    {"PRESENCE_MAX_MEMBERS", "presence.maxMembersPerChannel", SRV_SK_APPS,
     SRV_SK_LIMIT, "max_presence_members"},
    {"PRESENCE_MAX_MEMBER_SIZE", "presence.maxMemberSizeInKb", SRV_SK_APPS,
     SRV_SK_KIB, "max_user_info_bytes"},
    {"USER_AUTHENTICATION_TIMEOUT", "userAuthenticationTimeout", SRV_SK_APPS,
     SRV_SK_MS, "user_authentication_timeout"},
    {"WEBHOOKS_BATCHING", "webhooks.batching.enabled", SRV_SK_APPS, SRV_SK_BOOL,
     "webhook_batching"},
    /* An app object's keys; SOKETI_DEFAULT_APP_* set the first app. */
    {"DEFAULT_APP_ID", "id", SRV_SK_APP, SRV_SK_TEXT, "id"},
    {"DEFAULT_APP_KEY", "key", SRV_SK_APP, SRV_SK_TEXT, "key"},
    {"DEFAULT_APP_SECRET", "secret", SRV_SK_APP, SRV_SK_TEXT, "secret"},
    {"DEFAULT_APP_MAX_CONNS", "maxConnections", SRV_SK_APP, SRV_SK_LIMIT,
     "max_connections"},
    {"DEFAULT_APP_ENABLE_CLIENT_MESSAGES", "enableClientMessages", SRV_SK_APP,
     SRV_SK_BOOL, "client_events"},
    {"DEFAULT_APP_ENABLED", "enabled", SRV_SK_APP, SRV_SK_BOOL, "enabled"},
    {"DEFAULT_APP_MAX_BACKEND_EVENTS_PER_SEC", "maxBackendEventsPerSecond",
     SRV_SK_APP, SRV_SK_LIMIT, "max_backend_events_per_second"},
    {"DEFAULT_APP_MAX_CLIENT_EVENTS_PER_SEC", "maxClientEventsPerSecond",
     SRV_SK_APP, SRV_SK_LIMIT, "client_event_rate"},
    {"DEFAULT_APP_MAX_READ_REQ_PER_SEC", "maxReadRequestsPerSecond", SRV_SK_APP,
     SRV_SK_LIMIT, "max_read_requests_per_second"},
    {"DEFAULT_APP_USER_AUTHENTICATION", "enableUserAuthentication", SRV_SK_APP,
     SRV_SK_BOOL, "enable_user_authentication"},
    {"DEFAULT_APP_WEBHOOKS", "webhooks", SRV_SK_APP, SRV_SK_WEBHOOKS, "webhooks"},
    {NULL, "maxPresenceMembersPerChannel", SRV_SK_APP, SRV_SK_LIMIT,
     "max_presence_members"},
    {NULL, "maxPresenceMemberSizeInKb", SRV_SK_APP, SRV_SK_KIB,
     "max_user_info_bytes"},
    {NULL, "maxChannelNameLength", SRV_SK_APP, SRV_SK_UINT, "max_channel_name"},
    {NULL, "maxEventChannelsAtOnce", SRV_SK_APP, SRV_SK_UINT,
     "max_channels_per_event"},
    {NULL, "maxEventNameLength", SRV_SK_APP, SRV_SK_UINT, "max_event_name"},
    {NULL, "maxEventPayloadInKb", SRV_SK_APP, SRV_SK_KIB, "max_event_bytes"},
    {NULL, "maxEventBatchSize", SRV_SK_APP, SRV_SK_UINT, "max_batch_events"},
};

#define SK_N (sizeof(sk_rows) / sizeof(sk_rows[0]))

_Static_assert(SK_N <= SRV_SK_MAX_ROWS, "SRV_SK_MAX_ROWS is too small");

/*
 * soketi's defaults where lubdub's differ, given to an app soketi's names
 * describe: client events off, 100 KB events, 2 KB of user_info, one
 * webhook request per event.
 */
static const char *const sk_app_defaults[][2] = {
    {"client_events", "false"},
    {"max_event_bytes", "100KiB"},
    {"max_user_info_bytes", "2KiB"},
    {"webhook_batching", "false"},
};

/* The first key of soketi's options; a file with one of these (and no
 * "apps") is soketi's. "port" is lubdub's too, so it tells nothing. */
static const char *const sk_roots[] = {
    "adapter", "appManager", "cache", "channelLimits", "cluster", "cors",
    "database", "databasePooling", "debug", "eventLimits", "host",
    "httpApi", "instance", "metrics", "mode", "pathPrefix", "presence",
    "queue", "rateLimiter", "shutdownGracePeriod", "ssl",
    "userAuthenticationTimeout", "webhooks", NULL,
};


size_t srv_soketi_map_rows(const struct srv_sk_row **out)
{
    *out = sk_rows;
    return SK_N;
}

const struct srv_sk_row *srv_soketi_map_env(const char *name, size_t len)
{
    for (size_t i = 0; i < SK_N; i++)
        if (sk_rows[i].env && strlen(sk_rows[i].env) == len &&
            !memcmp(sk_rows[i].env, name, len))
            return &sk_rows[i];
    return NULL;
}

const struct srv_sk_row *srv_soketi_map_app_key(const char *key)
{
    for (size_t i = 0; i < SK_N; i++)
        if (sk_rows[i].scope == SRV_SK_APP && !strcmp(sk_rows[i].path, key))
            return &sk_rows[i];
    return NULL;
}

bool srv_soketi_map_is_root(const char *key)
{
    for (size_t i = 0; sk_roots[i]; i++)
        if (!strcmp(key, sk_roots[i]))
            return true;
    return false;
}

size_t srv_soketi_map_app_defaults(const char *const (**out)[2])
{
    *out = sk_app_defaults;
    return sizeof(sk_app_defaults) / sizeof(sk_app_defaults[0]);
}
