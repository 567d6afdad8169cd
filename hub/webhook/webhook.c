/*
 * hub/webhook/webhook.c - what the webhook subsystem's other files share
 * (hub/webhook/webhook.h): the event types' Pusher names, a webhook's
 * filter (hub_wh_matches), an app's webhook list (freed and deep-copied
 * in one place each), one event as the hub generates it, and the retry
 * schedule (hub_backoff_ms, hub/base/backoff.h).
 *
 * Thread: any (pure functions and allocation, no shared state).
 */
#include "hub/webhook/webhook.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hub/app/app.h"

static const char *const type_names[HUB_WH_N_TYPES] = {
    "channel_occupied", "channel_vacated", "member_added",
    "member_removed",   "client_event",    "cache_miss",
};

const char *hub_wh_type_name(unsigned type)
{
    return type < HUB_WH_N_TYPES ? type_names[type] : NULL;
}

int hub_wh_type_parse(const char *name)
{
    for (unsigned i = 0; i < HUB_WH_N_TYPES; i++)
        if (!strcmp(name, type_names[i]))
            return (int)i;
    return -1;
}

static bool has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);

    return a >= b && memcmp(s + a - b, suf, b) == 0;
}

bool hub_wh_matches(const struct hub_wh_conf *w, unsigned type,
                    const char *channel)
{
    if (type >= HUB_WH_N_TYPES || !(w->types & HUB_WH_BIT(type)))
        return false;
    if (w->starts_with &&
        strncmp(channel, w->starts_with, strlen(w->starts_with)) != 0)
        return false;
    if (w->ends_with && !has_suffix(channel, w->ends_with))
        return false;
    return true;
}

void hub_wh_app_free(struct hub_app *app)
{
    for (unsigned i = 0; i < app->n_webhooks; i++) {
        struct hub_wh_conf *w = &app->webhooks[i];

        free(w->url);
        free(w->starts_with);
        free(w->ends_with);
        for (unsigned j = 0; j < w->n_headers; j++)
            free(w->headers[j]);
        free(w->headers);
    }
    free(app->webhooks);
    app->webhooks = NULL;
    app->n_webhooks = 0;
    app->webhook_types = 0;
}

int hub_wh_app_copy(struct hub_app *dst, const struct hub_app *src)
{
    dst->webhook_batching = src->webhook_batching;
    if (!src->n_webhooks)
        return 0;
    dst->webhooks = calloc(src->n_webhooks, sizeof(*dst->webhooks));
    if (!dst->webhooks)
        return -ENOMEM;
    dst->n_webhooks = src->n_webhooks;
    dst->webhook_types = src->webhook_types;
    for (unsigned i = 0; i < src->n_webhooks; i++) {
        const struct hub_wh_conf *s = &src->webhooks[i];
        struct hub_wh_conf *d = &dst->webhooks[i];

        d->types = s->types;
        d->url = strdup(s->url);
        d->starts_with = s->starts_with ? strdup(s->starts_with) : NULL;
        d->ends_with = s->ends_with ? strdup(s->ends_with) : NULL;
        d->headers = s->n_headers ? calloc(s->n_headers, sizeof(char *))
                                  : NULL;
        if (!d->url || (s->starts_with && !d->starts_with) ||
            (s->ends_with && !d->ends_with) || (s->n_headers && !d->headers))
            goto oom;
        d->n_headers = s->n_headers;
        for (unsigned j = 0; j < s->n_headers; j++)
            if (!(d->headers[j] = strdup(s->headers[j])))
                goto oom;
    }
    return 0;
oom:
    hub_wh_app_free(dst);
    return -ENOMEM;
}

struct hub_wh_event *hub_wh_event_new(unsigned app, unsigned type,
                                      const char *channel, size_t len,
                                      const char *user_id, const char *event,
                                      const char *data, const char *socket_id)
{
    size_t lu = user_id ? strlen(user_id) + 1 : 0;
    size_t le = event ? strlen(event) + 1 : 0;
    size_t ld = data ? strlen(data) + 1 : 0;
    size_t ls = socket_id ? strlen(socket_id) + 1 : 0;
    size_t size = sizeof(struct hub_wh_event) + len + 1 + lu + le + ld + ls;
    struct hub_wh_event *ev = malloc(size);
    char *p;

    if (!ev)
        return NULL;
    memset(ev, 0, sizeof(*ev));
    ev->size = size;
    ev->app = app;
    ev->type = (uint8_t)type;
    p = (char *)(ev + 1);
    memcpy(p, channel, len);
    p[len] = '\0';
    ev->channel = p;
    p += len + 1;
#define COPY(field, src, l)                                                    \
    if (src) {                                                                 \
        memcpy(p, src, l);                                                     \
        ev->field = p;                                                         \
        p += l;                                                                \
    }
    COPY(user_id, user_id, lu)
    COPY(event, event, le)
    COPY(data, data, ld)
    COPY(socket_id, socket_id, ls)
#undef COPY
    return ev;
}
