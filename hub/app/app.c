/*
 * hub/app/app.c - defaults for an app's switches and limits.
 *
 * The numbers follow Pusher's published limits (docs/PROTOCOL.md section 8), so
 * an app that configures nothing behaves like a Pusher app. Also the one
 * copy, compare and free path of an app (see hub/app/app.h), its key/secret
 * pairs (key rotation), and the check of an app id's characters. Any
 * thread.
 */
#include "hub/app/app.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int hub_app_id_check(const char *id, size_t *bad)
{
    size_t n = id ? strlen(id) : 0, dummy;

    if (!bad)
        bad = &dummy;
    if (!n || n > HUB_APP_ID_MAX) {
        *bad = n;
        return -EINVAL;
    }
    for (size_t i = 0; i < n; i++) {
        char c = id[i];

        /* Spelled out rather than isalnum(): no locale may widen it. */
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.')) {
            *bad = i;
            return -EILSEQ;
        }
    }
    return 0;
}

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
    app->max_backend_events_per_second = 0;
    app->max_read_requests_per_second = 0;
    /* Compressed like Pusher's apps; the hub's --compression decides. */
    app->compression = true;
    /* History off; the values a bare "history": true takes. */
    app->history = false;
    app->history_ttl_ms = 120000;
    app->history_size = 1000;
    app->history_max_bytes = 0;
}

bool hub_app_history_on(const struct hub_app *a, const char *name,
                        size_t len)
{
    if (!a || !a->history || (len && name[0] == '#'))
        return false;
    if (!a->n_history_channels)
        return true;
    for (unsigned i = 0; i < a->n_history_channels; i++) {
        const char *p = a->history_channels[i];
        size_t n = strlen(p);

        if (n && p[n - 1] == '*') {
            if (len >= n - 1 && memcmp(name, p, n - 1) == 0)
                return true;
        } else if (len == n && memcmp(name, p, n) == 0) {
            return true;
        }
    }
    return false;
}

/* A copy of s in *out (NULL stays NULL); false when out of memory. */
static bool dup_str(char **out, const char *s)
{
    *out = s ? strdup(s) : NULL;
    return !s || *out;
}

static bool str_eq(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

/* A copy of the n strings of v in *out (n 0: NULL); false when out of
 * memory, with nothing left allocated. */
static bool dup_list(char ***out, char *const *v, unsigned n)
{
    char **c;

    *out = NULL;
    if (!n)
        return true;
    c = calloc(n, sizeof(*c));
    if (!c)
        return false;
    for (unsigned i = 0; i < n; i++) {
        if (!dup_str(&c[i], v[i])) {
            while (i--)
                free(c[i]);
            free(c);
            return false;
        }
    }
    *out = c;
    return true;
}

static bool list_eq(char *const *a, unsigned na, char *const *b,
                    unsigned nb)
{
    if (na != nb)
        return false;
    for (unsigned i = 0; i < na; i++)
        if (!str_eq(a[i], b[i]))
            return false;
    return true;
}

/* a's pairs after the first, copied into c (which holds none yet).
 * Counted before they are filled, so that hub_app_free(c) frees a partial
 * copy: false when out of memory. */
static bool dup_pairs(struct hub_app *c, const struct hub_app *a)
{
    if (!a->n_more_keys)
        return true;
    c->more_keys = calloc(a->n_more_keys, sizeof(*c->more_keys));
    if (!c->more_keys)
        return false;
    c->n_more_keys = a->n_more_keys;
    for (unsigned i = 0; i < a->n_more_keys; i++)
        if (!dup_str(&c->more_keys[i].key, a->more_keys[i].key) ||
            !dup_str(&c->more_keys[i].secret, a->more_keys[i].secret))
            return false;
    return true;
}

/* The same pairs in the same order: the order matters, the first pair
 * signs (a reload that reorders them changes the app). */
static bool pairs_eq(const struct hub_app *a, const struct hub_app *b)
{
    if (a->n_more_keys != b->n_more_keys)
        return false;
    for (unsigned i = 0; i < a->n_more_keys; i++)
        if (!str_eq(a->more_keys[i].key, b->more_keys[i].key) ||
            !str_eq(a->more_keys[i].secret, b->more_keys[i].secret))
            return false;
    return true;
}

static bool history_eq(const struct hub_app *a, const struct hub_app *b)
{
    return a->history == b->history &&
           a->history_ttl_ms == b->history_ttl_ms &&
           a->history_size == b->history_size &&
           a->history_max_bytes == b->history_max_bytes &&
           list_eq(a->history_channels, a->n_history_channels,
                   b->history_channels, b->n_history_channels);
}

struct hub_app *hub_app_dup(const struct hub_app *a)
{
    struct hub_app *c = malloc(sizeof(*c));

    if (!c)
        return NULL;
    /* Scalars by value; then every owned pointer is replaced by a copy
     * of its own (new owned fields: here, in equal() and in free()). */
    memcpy(c, a, sizeof(*c));
    c->id = c->key = c->secret = c->allowed_origins = NULL;
    c->history_channels = NULL;
    c->n_history_channels = 0;
    c->more_keys = NULL;
    c->n_more_keys = 0;
    /* Not the webhooks: the sender thread never reads the app table; a
     * reload hands it its own copy (srv_wh_reload), so the table's
     * copy carries none (nothing to share, nothing to free twice). */
    c->webhooks = NULL;
    c->n_webhooks = 0;
    atomic_init(&c->refs, 1);
    if (!dup_str(&c->id, a->id) || !dup_str(&c->key, a->key) ||
        !dup_str(&c->secret, a->secret) ||
        !dup_str(&c->allowed_origins, a->allowed_origins) ||
        !dup_list(&c->history_channels, a->history_channels,
                  a->n_history_channels)) {
        hub_app_free(c);
        return NULL;
    }
    c->n_history_channels = a->n_history_channels;
    if (!dup_pairs(c, a)) {
        hub_app_free(c);
        return NULL;
    }
    return c;
}

bool hub_app_equal(const struct hub_app *a, const struct hub_app *b)
{
    return str_eq(a->id, b->id) && str_eq(a->key, b->key) &&
           str_eq(a->secret, b->secret) && pairs_eq(a, b) &&
           a->enabled == b->enabled &&
           a->client_events == b->client_events &&
           a->max_connections == b->max_connections &&
           a->client_event_rate == b->client_event_rate &&
           a->max_presence_members == b->max_presence_members &&
           a->max_user_info_bytes == b->max_user_info_bytes &&
           a->max_user_id_len == b->max_user_id_len &&
           a->max_event_bytes == b->max_event_bytes &&
           a->max_event_name == b->max_event_name &&
           a->max_channels_per_event == b->max_channels_per_event &&
           a->max_batch_events == b->max_batch_events &&
           a->max_channel_name == b->max_channel_name &&
           a->cache_ttl_ms == b->cache_ttl_ms &&
           a->cache_max_bytes == b->cache_max_bytes &&
           a->max_subscriptions == b->max_subscriptions &&
           a->subscription_count == b->subscription_count &&
           a->compression == b->compression &&
           /* Not the webhook list: a reloaded copy has none (see dup);
            * the sender compares its own (server/webhook/webhook_view.c). */
           a->enable_user_authentication == b->enable_user_authentication &&
           a->user_auth_timeout_ms == b->user_auth_timeout_ms &&
           a->watchlist_events == b->watchlist_events &&
           a->max_watchlist == b->max_watchlist &&
           a->max_watchers == b->max_watchers &&
           str_eq(a->allowed_origins, b->allowed_origins) &&
           a->max_backend_events_per_second ==
               b->max_backend_events_per_second &&
           a->max_read_requests_per_second ==
               b->max_read_requests_per_second &&
           history_eq(a, b);
}

/* A secret's bytes are wiped before its memory goes back to the heap, so
 * a retired table (a reload) leaves no secret in freed memory, as the
 * configuration's own secrets (server/config/value.c). */
static void free_secret(char *secret)
{
    if (secret) {
        explicit_bzero(secret, strlen(secret));
        free(secret);
    }
}

void hub_app_clear(struct hub_app *a)
{
    free(a->id);
    free(a->key);
    free_secret(a->secret);
    free(a->allowed_origins);
    a->id = a->key = a->secret = a->allowed_origins = NULL;
    for (unsigned i = 0; i < a->n_history_channels; i++)
        free(a->history_channels[i]);
    free(a->history_channels);
    a->history_channels = NULL;
    a->n_history_channels = 0;
    for (unsigned i = 0; i < a->n_more_keys; i++) {
        free(a->more_keys[i].key);
        free_secret(a->more_keys[i].secret);
    }
    free(a->more_keys);
    a->more_keys = NULL;
    a->n_more_keys = 0;
}

void hub_app_free(struct hub_app *a)
{
    if (!a)
        return;
    hub_app_clear(a);
    free(a);
}

void hub_app_ref(const struct hub_app *a)
{
    struct hub_app *m = (struct hub_app *)a;

    /* The count is the one mutable part of an app. An owned app's count
     * cannot be 0 while a caller holds it, so 0 means borrowed. */
    if (m && atomic_load_explicit(&m->refs, memory_order_relaxed))
        atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
}

void hub_app_unref(const struct hub_app *a)
{
    struct hub_app *m = (struct hub_app *)a;

    if (!m || !atomic_load_explicit(&m->refs, memory_order_relaxed))
        return;
    if (atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) == 1)
        hub_app_free(m);
}

static bool equal(const char *field, const char *s, size_t len)
{
    return field && strlen(field) == len && memcmp(field, s, len) == 0;
}

unsigned hub_app_n_keys(const struct hub_app *a)
{
    return a->key ? 1 + a->n_more_keys : 0;
}

const char *hub_app_key_at(const struct hub_app *a, unsigned i)
{
    if (i >= hub_app_n_keys(a))
        return NULL;
    return i ? a->more_keys[i - 1].key : a->key;
}

const char *hub_app_secret_at(const struct hub_app *a, unsigned i)
{
    if (i >= hub_app_n_keys(a))
        return NULL;
    return i ? a->more_keys[i - 1].secret : a->secret;
}

int hub_app_key_find(const struct hub_app *a, const char *key, size_t len)
{
    unsigned n = hub_app_n_keys(a);

    for (unsigned i = 0; key && i < n; i++)
        if (equal(hub_app_key_at(a, i), key, len))
            return (int)i;
    return -1;
}

const struct hub_app *hub_app_find_by_key(const struct hub_app *apps,
                                          unsigned n, const char *key,
                                          size_t len)
{
    for (unsigned i = 0; i < n; i++)
        if (hub_app_key_find(&apps[i], key, len) >= 0)
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
