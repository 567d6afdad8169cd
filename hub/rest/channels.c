/*
 * hub/rest/channels.c - the channel reads of the HTTP API
 * (hub/rest/channels.h): GET channels, channels/{name} and
 * channels/{name}/users, and channels/{name}/events passed on to
 * hub/rest/chanhistory.c (it reads the history store, always now). The
 * others read the channel directory (hub/loop/backplane.h) now, or, with
 * a directory whose reads answer later, through a wait (hub/rest/wait.h)
 * whose answer is made by the same function as the synchronous one. A
 * wait keeps a copy of the prefix or the channel name it asks about
 * (bounded by the request's path).
 *
 * Thread: the loop that received the request.
 */
#include "hub/rest/channels.h"

#include <stdlib.h>
#include <string.h>

#include "hub/app/app.h"
#include "hub/base/query.h"
#include "hub/channel/chanhooks.h"
#include "hub/loop/loop.h"
#include "hub/rest/chanhistory.h"
#include "hub/rest/wait.h"
#include "hub/wire/protocol.h"

/* Pusher's users answer holds ids only: the local directory's list also
 * carries each member's user_info (for the console), taken out here. */
static json_t *ids_only(json_t *users)
{
    size_t i;
    json_t *u;

    json_array_foreach(users, i, u)
        json_object_del(u, "user_info");
    return users;
}

/* A wait's answer for GET channels and channels/{name}/users: the list
 * the directory made, as the synchronous path answers it. */
static void list_answer(struct hub_rest_wait *w, const char *key,
                        struct hub_rest_response *out)
{
    json_t *j = w->q[0].q.json;

    w->q[0].q.json = NULL;
    if (j && !strcmp(key, "users"))
        ids_only(j);
    if (!j)
        hub_rest_reply_error(out, 500, "out of memory");
    else
        hub_rest_reply_json(out, 200, json_pack("{s:o}", key, j));
}

static void channels_finish(struct hub_rest_wait *w,
                            struct hub_rest_response *out)
{
    list_answer(w, "channels", out);
}

static void users_finish(struct hub_rest_wait *w,
                         struct hub_rest_response *out)
{
    list_answer(w, "users", out);
}

static void channel_answer(struct hub_loop *l, const struct hub_app *app,
                           const char *name, size_t len,
                           const struct hub_channel_info *ci, bool users,
                           bool subs, bool cache,
                           struct hub_rest_response *out)
{
    json_t *o = json_pack("{s:b}", "occupied", ci->occupied);
    int bad = 0;

    /* Each insert checked: jansson drops what it cannot add. */
    if (users)
        bad |= json_object_set_new(o, "user_count",
                                   json_integer(ci->user_count));
    if (subs)
        bad |= json_object_set_new(o, "subscription_count",
                                   json_integer(ci->subscription_count));
    if (cache)
        bad |= json_object_set_new(o, "cache",
                                   hub_chanhooks_cache_info(l, app, name, len));
    if (bad) {
        json_decref(o);
        o = NULL;
    }
    hub_rest_reply_json(out, 200, o);
}

static void channel_finish(struct hub_rest_wait *w,
                           struct hub_rest_response *out)
{
    channel_answer(w->l, w->app, w->text, w->text_len, &w->q[0].q.info,
                   w->want_users, w->want_subs, w->want_cache, out);
}

static const struct hub_rest_wait_ops channels_wait = { channels_finish,
                                                        NULL };
static const struct hub_rest_wait_ops channel_wait = { channel_finish, NULL };
static const struct hub_rest_wait_ops users_wait = { users_finish, NULL };

void hub_rest_channels_get(const struct hub_rest_req *r,
                           struct hub_rest_response *out)
{
    struct hub_loop *l = r->l;
    const struct hub_app *app = r->app;
    const char *prefix = hub_query_find(r->query, "filter_by_prefix");
    const char *info = hub_query_find(r->query, "info");
    bool user_count = info && strstr(info, "user_count");
    struct hub_rest_wait *w;
    json_t *list;

    if (user_count && (!prefix || strncmp(prefix, "presence-", 9) != 0)) {
        hub_rest_reply_error(out, 400,
                             "info=user_count needs filter_by_prefix="
                             "presence-");
        return;
    }
    if (hub_rest_cannot_wait(l, r->call, out))
        return;
    if (hub_rest_can_wait(l, r->call)) {
        w = hub_rest_wait_new(l, app, r->call, &channels_wait, 1);
        if (w && prefix && !(w->text = strdup(prefix))) {
            hub_rest_wait_free(w);
            w = NULL;
        }
        if (!w) {
            hub_rest_reply_error(out, 500, "out of memory");
            return;
        }
        w->q[0].q.kind = HUB_DIR_Q_LIST;
        w->q[0].q.prefix = w->text;
        w->q[0].q.user_count = user_count;
        hub_rest_wait_start(w, r->call, out);
        return;
    }
    list = hub_dir_list(l->hub, app->index, prefix, user_count);
    if (!list) {
        hub_rest_reply_error(out, 500, "out of memory");
        return;
    }
    hub_rest_reply_json(out, 200, json_pack("{s:o}", "channels", list));
}

/* A wait about the channel name (len bytes), a copy of which it keeps;
 * NULL, with a 500 in out, when out of memory. */
static struct hub_rest_wait *name_wait(const struct hub_rest_req *r,
                                       const struct hub_rest_wait_ops *ops,
                                       const char *name, size_t len,
                                       struct hub_rest_response *out)
{
    struct hub_rest_wait *w = hub_rest_wait_new(r->l, r->app, r->call, ops,
                                                1);

    if (w)
        w->text = malloc(len + 1);
    if (!w || !w->text) {
        if (w)
            hub_rest_wait_free(w);
        hub_rest_reply_error(out, 500, "out of memory");
        return NULL;
    }
    memcpy(w->text, name, len);
    w->text[len] = '\0';
    w->text_len = len;
    w->q[0].q.name = w->text;
    w->q[0].q.len = len;
    return w;
}

static void get_channel(const struct hub_rest_req *r, const char *name,
                        size_t len, struct hub_rest_response *out)
{
    const char *info = hub_query_find(r->query, "info");
    bool presence = hub_channel_classify(name, len) == HUB_CHANNEL_PRESENCE;
    bool users = info && strstr(info, "user_count");
    bool subs = info && strstr(info, "subscription_count");
    bool cache = info && strstr(info, "cache");
    struct hub_channel_info ci;
    struct hub_rest_wait *w;

    if (users && !presence) {
        hub_rest_reply_error(out, 400,
                             "user_count is only for presence channels");
        return;
    }
    if (cache && !hub_channel_is_cache(name, len)) {
        hub_rest_reply_error(out, 400, "cache is only for cache channels");
        return;
    }
    if (hub_rest_cannot_wait(r->l, r->call, out))
        return;
    if (hub_rest_can_wait(r->l, r->call)) {
        w = name_wait(r, &channel_wait, name, len, out);
        if (!w)
            return;
        w->want_users = users;
        w->want_subs = subs;
        w->want_cache = cache;
        hub_rest_wait_start(w, r->call, out);
        return;
    }
    hub_dir_info(r->l->hub, r->app->index, name, len, &ci);
    channel_answer(r->l, r->app, name, len, &ci, users, subs, cache, out);
}

static void get_users(const struct hub_rest_req *r, const char *name,
                      size_t len, struct hub_rest_response *out)
{
    struct hub_rest_wait *w;
    json_t *users;

    if (hub_channel_classify(name, len) != HUB_CHANNEL_PRESENCE) {
        hub_rest_reply_error(out, 400,
                             "users are only listed for presence channels");
        return;
    }
    if (hub_rest_cannot_wait(r->l, r->call, out))
        return;
    if (hub_rest_can_wait(r->l, r->call)) {
        w = name_wait(r, &users_wait, name, len, out);
        if (!w)
            return;
        w->q[0].q.kind = HUB_DIR_Q_USERS;
        hub_rest_wait_start(w, r->call, out);
        return;
    }
    users = hub_dir_users(r->l->hub, r->app->index, name, len);
    if (!users) {
        hub_rest_reply_error(out, 500, "out of memory");
        return;
    }
    hub_rest_reply_json(out, 200, json_pack("{s:o}", "users", ids_only(users)));
}

void hub_rest_channels_get_one(const struct hub_rest_req *r,
                               struct hub_rest_response *out)
{
    const char *name = r->param, *slash = strchr(name, '/');
    size_t len = slash ? (size_t)(slash - name) : strlen(name);
    char chan[512];

    if (len == 0 || len >= sizeof(chan) ||
        hub_query_decode(chan, sizeof(chan), name, len)) {
        hub_rest_reply_error(out, 400, "bad channel name");
        return;
    }
    len = strlen(chan);
    if (!slash)
        get_channel(r, chan, len, out);
    else if (strcmp(slash, "/users") == 0)
        get_users(r, chan, len, out);
    else if (strcmp(slash, "/events") == 0)
        hub_rest_chanhistory_get(r, chan, len, out);
    else
        hub_rest_reply_error(out, 404, "not found");
}
