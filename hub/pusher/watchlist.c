/*
 * hub/pusher/watchlist.c - watchlists on sessions (hub/pusher/watchlist.h).
 *
 * The watchlist is read from the signin's user_data ("watchlist": an array
 * of user id strings), checked against the app's limits, sorted and merged
 * (duplicates are harmless and dropped), then handed to the hub's online
 * registry. The registry reports a watched user's online/offline edges
 * under its mutex; each becomes one pusher_internal:watchlist_events frame
 * published to the watcher's #server-to-user-<id> channel, which every
 * signed-in connection of that user joined, on whatever loop. Publishing
 * under the mutex keeps one user's edges in order at every loop: the inbox
 * pushes happen in the order the edges were decided.
 *
 * The initial state (watched users online now) goes to the signing
 * session alone, after the registry call: an edge decided later from
 * another loop reaches this loop's inbox, behind it.
 *
 * In a cluster (--redis, while Redis is up) the registry hands each change
 * to the directory instead (on_shared): Redis decides the edges and
 * publishes them and the initial state (docs/SCALING.md, "Watchlists and
 * online state"); the registry still counts this node's own, the answer
 * while Redis is away.
 */
#include "hub/pusher/watchlist.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/loop/backplane.h"
#include "hub/base/json.h"
#include "hub/base/log.h"
#include "hub/loop/loop.h"
#include "hub/channel/online.h"
#include "hub/wire/protocol.h"
#include "hub/loop/session.h"
#include "hub/pusher/subscribe.h"

#define WATCHLIST_EVENT "pusher_internal:watchlist_events"
#define USER_CHANNEL "#server-to-user-"

/* {"events":[{"name":N,"user_ids":ids}]} as the data of a frame; takes
 * ids (a JSON array). NULL when out of memory. */
static struct hub_frame *events_frame(const char *name, json_t *ids)
{
    json_t *o = json_pack("{s:[{s:s,s:o}]}", "events", "name", name,
                          "user_ids", ids);
    struct hub_frame *f = NULL;
    char *text;

    if (!o)
        return NULL;
    text = hub_json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (text)
        f = hub_pusher_string_frame(WATCHLIST_EVENT, NULL, text);
    free(text);
    return f;
}

struct ctx {
    struct hub_session *s;     /* the session signing in or ending */
    json_t *online;            /* initial: ids online now */
    bool nomem;
};

/* Under the registry's mutex: one frame to the watcher's user channel. */
static void on_edge(void *arg, unsigned app, const char *watcher,
                    const char *user, bool online)
{
    struct ctx *c = arg;
    struct hub_loop *l = c->s->loop;
    struct hub_frame *f = events_frame(online ? "online" : "offline",
                                       json_pack("[s]", user));
    size_t n = sizeof(USER_CHANNEL) - 1 + strlen(watcher);
    char stack[256];
    char *name = n < sizeof(stack) ? stack : malloc(n + 1);
    int rc = -ENOMEM;

    if (f && name) {
        snprintf(name, n + 1, "%s%s", USER_CHANNEL, watcher);
        rc = hub_publish(l->hub, l, app, name, n, f, NULL);
    }
    if (name != stack)
        free(name);
    if (f)
        hub_frame_unref(f);
    if (rc) {
        HUB_STAT_ADD(l->stats.watchlist_events_dropped, 1);
        return;
    }
    HUB_STAT_ADD(l->stats.watchlist_events, 1);
}

/* Under the registry's mutex: a cluster-wide directory takes the change
 * (and then tells the watchers and the user itself, through Redis). */
static bool on_shared(void *arg, unsigned app, const char *user, bool signin,
                      bool first, const struct hub_watchlist *w)
{
    struct ctx *c = arg;
    const struct hub_online_change ch = {
        .app = app, .user = user, .signin = signin, .first = first,
        .replace = w != NULL, .ids = w ? w->ids : NULL, .n = w ? w->n : 0,
        .max_watchers = c->s->app->max_watchers,
    };

    return hub_dir_online(c->s->loop->hub, &ch);
}

static void on_initial(void *arg, const char *user)
{
    struct ctx *c = arg;

    if (!c->online)
        c->online = json_array();
    if (!c->online || json_array_append_new(c->online, json_string(user)))
        c->nomem = true;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void refuse(struct hub_session *s, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Non-fatal: the signin stands, the watchlist is ignored. One log line
 * (info) per refusal: it is the app server's auth endpoint at fault. */
static void refuse(struct hub_session *s, const char *fmt, ...)
{
    char msg[192];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    HUB_LOG_EVENT(HUB_LOG_INFO, s->loop->id,
                  HUB_LOG_F(.event = "watchlist_refused",
                            .socket_id = HUB_SID(s), .app = s->app->id),
                  "socket %s: %s", HUB_SID(s), msg);
    hub_session_send_error(s, -1, msg, false);
}

/*
 * The watchlist of ud into w (ids: an owned array of borrowed strings,
 * sorted and merged). 0 (w->replace false without one), -EINVAL when it
 * is malformed or over the limit (the session was told), -ENOMEM.
 */
static int parse(struct hub_session *s, json_t *ud, struct hub_watchlist *w,
                 const char ***ids)
{
    const struct hub_app *app = s->app;
    json_t *wl = json_object_get(ud, "watchlist"), *v;
    const char **vec;
    size_t i, k, n;

    *ids = NULL;
    memset(w, 0, sizeof(*w));
    w->max_watchers = app->max_watchers;
    if (!wl || json_is_null(wl))
        return 0;
    if (!json_is_array(wl)) {
        refuse(s, "Watchlist ignored: it must be an array of user id "
                  "strings");
        return -EINVAL;
    }
    n = json_array_size(wl);
    vec = malloc((n ? n : 1) * sizeof(*vec));
    if (!vec)
        return -ENOMEM;
    json_array_foreach(wl, i, v) {
        const char *id = json_string_value(v);
        size_t len = json_string_length(v);

        if (!id || !len || strlen(id) != len ||
            len > app->max_user_id_len) {
            free(vec);
            refuse(s, "Watchlist ignored: entry %zu is not a user id (a "
                      "non-empty string of at most %u bytes)",
                   i, app->max_user_id_len);
            return -EINVAL;
        }
        vec[i] = id;
    }
    qsort(vec, n, sizeof(*vec), cmp_str);
    for (i = k = 0; i < n; i++)
        if (k == 0 || strcmp(vec[k - 1], vec[i]) != 0)
            vec[k++] = vec[i];
    /* Distinct ids count: a repeated id costs nothing. */
    if (k > app->max_watchlist) {
        free(vec);
        refuse(s, "Watchlist ignored: %zu user ids, the limit is %u", k,
               app->max_watchlist);
        return -EINVAL;
    }
    w->ids = vec;
    w->n = k;
    w->replace = true;
    *ids = vec;
    return 0;
}

int hub_watchlist_signin(struct hub_session *s, json_t *ud)
{
    struct hub_loop *l = s->loop;
    struct hub_online *o = hub_online_of(l->hub);
    struct ctx c = { s, NULL, false };
    const struct hub_online_cb cb = { on_edge, on_initial, &c, on_shared };
    struct hub_watchlist w;
    const char **ids;
    size_t over = 0;
    int rc;

    /* An app without watchlists keeps nobody in the registry. */
    if (!o || !s->user_id || !s->app->watchlist_events)
        return 0;
    rc = parse(s, ud, &w, &ids);
    if (rc == -ENOMEM) {
        refuse(s, "Watchlist ignored: out of memory");
        memset(&w, 0, sizeof(w));
    } else if (rc) {
        memset(&w, 0, sizeof(w));
    }
    rc = hub_online_signin(o, s->app->index, s->user_id, !s->online_counted,
                           &w, &cb, &over);
    if (rc == -ENOSPC || (rc == -ENOMEM && w.replace)) {
        if (rc == -ENOSPC)
            refuse(s, "Watchlist ignored: user %.64s already has the most "
                      "watchers allowed (%u)",
                   w.ids[over], s->app->max_watchers);
        else
            refuse(s, "Watchlist ignored: out of memory");
        json_decref(c.online);
        c.online = NULL;
        c.nomem = false;
        memset(&w, 0, sizeof(w));
        rc = hub_online_signin(o, s->app->index, s->user_id,
                               !s->online_counted, &w, &cb, &over);
    }
    free(ids);
    if (rc) {
        json_decref(c.online);
        return rc;
    }
    s->online_counted = true;
    if (c.online || c.nomem) {
        struct hub_frame *f = NULL;

        if (!c.nomem) {
            f = events_frame("online", c.online);
            c.online = NULL; /* taken by events_frame() */
        }
        if (f) {
            hub_session_send(s, f);
            hub_frame_unref(f);
            HUB_STAT_ADD(l->stats.watchlist_events, 1);
        } else {
            HUB_STAT_ADD(l->stats.watchlist_events_dropped, 1);
        }
    }
    json_decref(c.online);
    return 0;
}

void hub_watchlist_signout(struct hub_session *s)
{
    struct hub_loop *l = s->loop;
    struct hub_online *o = l ? hub_online_of(l->hub) : NULL;
    struct ctx c = { s, NULL, false };
    const struct hub_online_cb cb = { on_edge, NULL, &c, on_shared };

    if (!s->online_counted || !o || !s->user_id)
        return;
    s->online_counted = false;
    hub_online_signout(o, s->app->index, s->user_id, &cb);
}
