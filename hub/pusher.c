/*
 * hub/pusher.c - Pusher v7 on a session (docs/PROTOCOL.md sections 1-5).
 *
 * Outbound control messages are small and per session, so they are encoded
 * on the stack and copied into a frame. Channel events are encoded once into
 * a frame that every recipient shares.
 */
#include "hub/pusher.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/auth.h"
#include "hub/channel.h"
#include "hub/loop.h"
#include "hub/protocol.h"
#include "hub/session.h"

/* A sealed frame holding {"event":E,"channel":C,"data":D[,"user_id":U]}. */
static struct hub_frame *event_frame(const char *event, const char *channel,
                                     const char *data_json, size_t data_len,
                                     const char *user_id)
{
    size_t n = hub_proto_encode_event(NULL, 0, event, channel, data_json,
                                      data_len, user_id);
    struct hub_frame *f = hub_frame_create(n + 1);

    if (!f)
        return NULL;
    hub_proto_encode_event(hub_frame_payload(f), n + 1, event, channel,
                           data_json, data_len, user_id);
    hub_frame_seal(f, n);
    return f;
}

/* Send {"event":E,"channel":C,"data":"<json-string of data_text>"}. */
static void send_event_string(struct hub_session *s, const char *event,
                              const char *channel, const char *data_text)
{
    size_t dlen = hub_proto_encode_string(NULL, 0, data_text,
                                          strlen(data_text));
    char *d = malloc(dlen + 1);
    struct hub_frame *f;

    if (!d)
        return;
    hub_proto_encode_string(d, dlen + 1, data_text, strlen(data_text));
    f = event_frame(event, channel, d, dlen, NULL);
    free(d);
    if (f) {
        hub_session_send(s, f);
        hub_frame_unref(f);
    }
}

static void send_sub_error(struct hub_session *s, const char *channel,
                           const char *type, const char *error, int status)
{
    char buf[1024];
    size_t n = hub_proto_encode_subscription_error(buf, sizeof(buf), channel,
                                                   type, error, status);

    if (n < sizeof(buf))
        hub_session_send_text(s, buf, n);
}

void hub_pusher_open(struct hub_session *s, const struct hub_app *app)
{
    atomic_uint_fast32_t *live;
    char buf[256];
    size_t n;

    s->app = app;
    if (!app->enabled) {
        hub_session_send_error(s, 4003, "Application is disabled", true);
        return;
    }
    /*
     * Per-app quota, hub-wide: take a slot first and give it back when
     * over, so two loops racing for the last slot cannot both get it.
     */
    live = &s->loop->hub->app_sessions[app->index];
    if (atomic_fetch_add(live, 1) >= app->max_connections &&
        app->max_connections) {
        atomic_fetch_sub(live, 1);
        hub_session_send_error(s, 4004, "Application is over connection quota",
                               true);
        return;
    }
    s->app_counted = true;
    s->bucket_tokens = app->client_event_rate * 1000;
    s->bucket_ms = s->connected_ms;
    n = hub_proto_encode_established(buf, sizeof(buf), s->socket_id,
                                     s->loop->cfg->activity_timeout_s);
    hub_session_send_text(s, buf, n);
}

static struct hub_sub *find_sub(struct hub_session *s, const char *name,
                                size_t len)
{
    struct hub_list *pos;

    hub_list_for_each(pos, &s->subs) {
        struct hub_sub *sub = hub_container_of(pos, struct hub_sub,
                                               session_link);

        if (sub->ch->name_len == len && memcmp(sub->ch->name, name, len) == 0)
            return sub;
    }
    return NULL;
}

/*
 * Whether s already holds max_subscriptions channels (its sign-in user
 * channel not counted). O(cap): the walk stops at the cap, and find_sub()
 * walked the same list just before.
 */
static bool over_sub_cap(const struct hub_session *s, uint32_t cap)
{
    const struct hub_list *pos;
    uint32_t n = 0;

    if (!cap)
        return false;
    hub_list_for_each(pos, &s->subs) {
        const struct hub_sub *sub = hub_container_of(pos, struct hub_sub,
                                                     session_link);

        if (sub->ch->kind != HUB_CHANNEL_USER && ++n >= cap)
            return true;
    }
    return false;
}

/* Publish f to channel except this session; member_seq as in hub_excl. */
static void publish(struct hub_session *s, const char *channel, size_t len,
                    struct hub_frame *f, uint64_t member_seq)
{
    struct hub_excl ex = { true, s->sid_hi, s->sid_lo, member_seq };

    hub_publish(s->loop->hub, s->loop, s->app->index, channel, len, f, &ex);
}

/* seq: the directory seq of the change (hub_directory_leave_seq). */
static void member_event(struct hub_session *s, const char *event,
                         const char *channel, size_t chlen,
                         const char *user_id, const char *user_info,
                         uint64_t seq)
{
    json_t *o = json_pack("{s:s}", "user_id", user_id);
    char *text;

    if (!o)
        return;
    if (user_info) {
        json_t *info = json_loads(user_info, JSON_DECODE_ANY, NULL);

        json_object_set_new(o, "user_info", info ? info : json_object());
    }
    text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (text) {
        size_t dlen = hub_proto_encode_string(NULL, 0, text, strlen(text));
        char *d = malloc(dlen + 1);

        if (d) {
            struct hub_frame *f;

            hub_proto_encode_string(d, dlen + 1, text, strlen(text));
            f = event_frame(event, channel, d, dlen, NULL);
            if (f) {
                publish(s, channel, chlen, f, seq);
                hub_frame_unref(f);
            }
            free(d);
        }
        free(text);
    }
}

/* Canonical user id (string or number) and user_info text from
 * channel_data; -EINVAL with a reason when unusable. */
static int parse_channel_data(const struct hub_app *app, const char *cd,
                              size_t cd_len, char **user_id, char **user_info,
                              const char **why)
{
    json_t *root = json_loadb(cd, cd_len, 0, NULL), *uid, *info;
    char num[32];
    const char *id;

    *user_id = *user_info = NULL;
    if (!root || !json_is_object(root)) {
        *why = "channel_data must be a JSON object";
        json_decref(root);
        return -EINVAL;
    }
    uid = json_object_get(root, "user_id");
    if (json_is_string(uid)) {
        id = json_string_value(uid);
    } else if (json_is_integer(uid)) {
        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT,
                 json_integer_value(uid));
        id = num;
    } else {
        *why = "channel_data.user_id must be a string or an integer";
        json_decref(root);
        return -EINVAL;
    }
    if (!*id || strlen(id) > app->max_user_id_len) {
        *why = "channel_data.user_id is empty or too long";
        json_decref(root);
        return -EINVAL;
    }
    info = json_object_get(root, "user_info");
    if (info) {
        *user_info = json_dumps(info, JSON_COMPACT | JSON_ENCODE_ANY);
        if (*user_info && strlen(*user_info) > app->max_user_info_bytes) {
            free(*user_info);
            *user_info = NULL;
            *why = "channel_data.user_info is too large";
            json_decref(root);
            return -E2BIG;
        }
    }
    *user_id = strdup(id);
    json_decref(root);
    return *user_id ? 0 : -ENOMEM;
}

static void subscribe(struct hub_session *s, const struct hub_msg *m)
{
    const struct hub_app *app = s->app;
    struct hub_loop *l = s->loop;
    const char *name = m->channel;
    size_t len = m->channel_len;
    enum hub_channel_kind kind;
    struct hub_presence_join join = { 0 };
    char *user_id = NULL, *user_info = NULL;
    struct hub_lchan *ch;
    struct hub_sub *sub;
    int rc;

    if (hub_channel_name_check(name, len, app->max_channel_name)) {
        send_sub_error(s, name, "InvalidChannel",
                       "Invalid channel name (allowed: A-Z a-z 0-9 _ - = @ , . ; "
                       "and at most the configured length)", 4009);
        return;
    }
    kind = hub_channel_classify(name, len);
    sub = find_sub(s, name, len);
    if (!sub && kind != HUB_CHANNEL_USER &&
        over_sub_cap(s, l->cfg->max_subscriptions)) {
        char why[128];

        HUB_STAT_ADD(l->stats.subscriptions_refused, 1);
        snprintf(why, sizeof(why),
                 "Too many subscriptions on this connection (the limit is "
                 "%u); unsubscribe from one first",
                 l->cfg->max_subscriptions);
        send_sub_error(s, name, "LimitReached", why, 4100);
        return;
    }
    if (kind == HUB_CHANNEL_USER) {
        /* Joined at sign-in; pusher-js then subscribes to confirm. */
        if (sub && s->user_id) {
            send_event_string(s, "pusher_internal:subscription_succeeded",
                              name, "{}");
            return;
        }
        send_sub_error(s, name, "AuthError",
                       "#server-to-user- channels need pusher:signin", 403);
        return;
    }
    if (kind != HUB_CHANNEL_PUBLIC) {
        char expect[512];
        const char *cd = kind == HUB_CHANNEL_PRESENCE ? m->channel_data : NULL;

        if (kind == HUB_CHANNEL_PRESENCE && !cd) {
            send_sub_error(s, name, "AuthError",
                           "Presence channels need channel_data", 401);
            return;
        }
        rc = hub_auth_check_channel(app, s->socket_id, name, cd,
                                    cd ? m->channel_data_len : 0, m->auth,
                                    expect, sizeof(expect));
        if (rc) {
            hub_log(HUB_LOG_INFO, l->id,
                    "socket %s: subscribe %s refused: bad signature "
                    "(expected HMAC of \"%s\")",
                    s->socket_id, name, expect);
            send_sub_error(s, name, "AuthError",
                           rc == -EACCES ? "Invalid signature"
                                         : "Missing or malformed auth",
                           401);
            return;
        }
    }
    if (sub && kind != HUB_CHANNEL_PRESENCE) {
        /* Idempotent: confirm again, change nothing. */
        send_event_string(s, "pusher_internal:subscription_succeeded", name,
                          "{}");
        return;
    }
    if (kind == HUB_CHANNEL_PRESENCE) {
        const char *why = "bad channel_data";

        rc = parse_channel_data(app, m->channel_data, m->channel_data_len,
                                &user_id, &user_info, &why);
        if (rc) {
            send_sub_error(s, name, rc == -E2BIG ? "LimitReached" : "AuthError",
                           why, rc == -E2BIG ? 4301 : 400);
            return;
        }
        if (sub) {
            if (strcmp(sub->user_id, user_id) == 0) {
                /* Same user again: re-send the member list. */
                struct hub_presence_join again = { 0 };

                again.user_id = user_id;
                again.user_info = user_info;
                if (hub_directory_join(l->hub->dir, app->index, name, len,
                                       &again) == 0) {
                    bool last;

                    send_event_string(s,
                                      "pusher_internal:subscription_succeeded",
                                      name, again.members_json
                                                ? again.members_json
                                                : "{}");
                    hub_directory_leave(l->hub->dir, app->index, name, len,
                                        user_id, &last);
                    free(again.members_json);
                }
            } else {
                send_sub_error(s, name, "AuthError",
                               "Already subscribed as another user", 409);
            }
            free(user_id);
            free(user_info);
            return;
        }
        join.user_id = user_id;
        join.user_info = user_info;
        join.max_members = app->max_presence_members;
    }
    ch = hub_chanmap_get(l->chans, app->index, name, len);
    sub = calloc(1, sizeof(*sub));
    if (!ch || !sub) {
        free(sub);
        if (ch)
            hub_chanmap_put(l->chans, ch);
        free(user_id);
        free(user_info);
        send_sub_error(s, name, "ServerError", "Out of memory", 500);
        return;
    }
    rc = hub_directory_join(l->hub->dir, app->index, name, len,
                            kind == HUB_CHANNEL_PRESENCE ? &join : NULL);
    if (rc) {
        free(sub);
        hub_chanmap_put(l->chans, ch);
        send_sub_error(s, name, "LimitReached",
                       rc == -ENOSPC ? "Presence channel is full"
                                     : "Out of memory",
                       4100);
        free(user_id);
        free(user_info);
        return;
    }
    sub->s = s;
    sub->ch = ch;
    sub->user_id = user_id;
    sub->joined_seq = join.seq;
    hub_list_link_tail(&ch->members, &sub->chan_link);
    hub_list_link_tail(&s->subs, &sub->session_link);
    ch->n_members++;
    HUB_STAT_ADD(l->stats.subscriptions, 1);
    if (kind == HUB_CHANNEL_PRESENCE) {
        send_event_string(s, "pusher_internal:subscription_succeeded", name,
                          join.members_json ? join.members_json : "{}");
        free(join.members_json);
        if (join.first)
            member_event(s, "pusher_internal:member_added", name, len,
                         user_id, user_info, join.seq);
    } else {
        send_event_string(s, "pusher_internal:subscription_succeeded", name,
                          "{}");
    }
    free(user_info);
}

static void leave(struct hub_session *s, struct hub_sub *sub)
{
    struct hub_loop *l = s->loop;
    struct hub_lchan *ch = sub->ch;
    bool last = false;
    uint64_t seq;

    hub_list_unlink(&sub->chan_link);
    hub_list_unlink(&sub->session_link);
    ch->n_members--;
    HUB_STAT_ADD(l->stats.subscriptions, -1);
    hub_directory_leave_seq(l->hub->dir, ch->app, ch->name, ch->name_len,
                            sub->user_id, &last, &seq);
    /* ch outlives the event: put() frees it only afterwards. */
    if (last && sub->user_id)
        member_event(s, "pusher_internal:member_removed", ch->name,
                     ch->name_len, sub->user_id, NULL, seq);
    hub_chanmap_put(l->chans, ch);
    free(sub->user_id);
    free(sub);
}

void hub_pusher_leave_all(struct hub_session *s)
{
    while (!hub_list_is_empty(&s->subs))
        leave(s, hub_container_of(s->subs.next, struct hub_sub,
                                  session_link));
}

/* Join s to its user's #server-to-user-<id> channel (local index only:
 * REST queries do not list these). 0 or -ENOMEM. */
static int join_user_channel(struct hub_session *s, const char *id)
{
    struct hub_loop *l = s->loop;
    struct hub_lchan *ch;
    struct hub_sub *sub;
    char *name;
    int n = asprintf(&name, "#server-to-user-%s", id);

    if (n < 0)
        return -ENOMEM;
    ch = hub_chanmap_get(l->chans, s->app->index, name, (size_t)n);
    free(name);
    sub = calloc(1, sizeof(*sub));
    if (!ch || !sub) {
        free(sub);
        if (ch)
            hub_chanmap_put(l->chans, ch);
        return -ENOMEM;
    }
    sub->s = s;
    sub->ch = ch;
    hub_list_link_tail(&ch->members, &sub->chan_link);
    hub_list_link_tail(&s->subs, &sub->session_link);
    ch->n_members++;
    HUB_STAT_ADD(l->stats.subscriptions, 1);
    return 0;
}

/*
 * pusher:signin (docs/PROTOCOL.md 4.2): check the signature over
 * "<socket_id>::user::<user_data>", require a non-empty string id, join
 * the user's channel so REST events to #server-to-user-<id> and
 * terminate_connections reach this socket, and confirm. Failures close
 * with 4009, as soketi does. Watchlists are not implemented.
 */
static void signin(struct hub_session *s, const struct hub_msg *m)
{
    const struct hub_app *app = s->app;
    json_t *ud, *reply;
    const char *id;
    char *text;
    int rc;

    rc = hub_auth_check_user(app, s->socket_id, m->user_data,
                             m->user_data_len, m->auth);
    if (rc) {
        hub_log(HUB_LOG_INFO, s->loop->id, "socket %s: signin refused: %s",
                s->socket_id, rc == -EACCES ? "bad signature" : "bad auth");
        hub_session_send_error(s, 4009, "Invalid signature for pusher:signin",
                               true);
        return;
    }
    ud = json_loadb(m->user_data, m->user_data_len, 0, NULL);
    id = json_string_value(json_object_get(ud, "id"));
    if (!json_is_object(ud) || !id || !*id ||
        strlen(id) != json_string_length(json_object_get(ud, "id")) ||
        strlen(id) > app->max_user_id_len) {
        json_decref(ud);
        hub_session_send_error(s, 4009,
                               "user_data must hold a non-empty string id",
                               true);
        return;
    }
    if (s->user_id && strcmp(s->user_id, id) != 0) {
        json_decref(ud);
        hub_session_send_error(s, 4009, "Already signed in as another user",
                               true);
        return;
    }
    if (!s->user_id) {
        s->user_id = strdup(id);
        if (!s->user_id || join_user_channel(s, id)) {
            free(s->user_id);
            s->user_id = NULL;
            json_decref(ud);
            hub_session_send_error(s, 4009, "Out of memory", true);
            return;
        }
    }
    json_decref(ud);
    reply = json_pack("{s:s}", "user_data", m->user_data);
    text = reply ? json_dumps(reply, JSON_COMPACT) : NULL;
    json_decref(reply);
    if (text)
        send_event_string(s, "pusher:signin_success", NULL, text);
    free(text);
}

static bool take_token(struct hub_session *s, uint64_t now_ms)
{
    uint32_t rate = s->app->client_event_rate;
    uint64_t cap = (uint64_t)rate * 1000, tokens;

    if (!rate)
        return true;
    tokens = s->bucket_tokens + (now_ms - s->bucket_ms) * rate;
    s->bucket_ms = now_ms;
    if (tokens > cap)
        tokens = cap;
    if (tokens < 1000) {
        s->bucket_tokens = (uint32_t)tokens;
        return false;
    }
    s->bucket_tokens = (uint32_t)(tokens - 1000);
    return true;
}

static void client_event(struct hub_session *s, const struct hub_msg *m,
                         uint64_t now_ms)
{
    const struct hub_app *app = s->app;
    struct hub_loop *l = s->loop;
    enum hub_channel_kind kind;
    struct hub_sub *sub;
    char *data;
    struct hub_frame *f;

    if (!app->client_events) {
        hub_session_send_error(s, 4301,
                               "Client events are disabled for this app",
                               false);
        goto dropped;
    }
    kind = hub_channel_classify(m->channel, m->channel_len);
    if (kind != HUB_CHANNEL_PRIVATE && kind != HUB_CHANNEL_PRESENCE) {
        hub_session_send_error(s, -1,
                               "Client events are only allowed on private "
                               "and presence channels",
                               false);
        goto dropped;
    }
    if (strlen(m->event) > app->max_event_name) {
        hub_session_send_error(s, -1, "Event name too long", false);
        goto dropped;
    }
    sub = find_sub(s, m->channel, m->channel_len);
    if (!sub) {
        hub_session_send_error(s, -1,
                               "Client event rejected: not subscribed to "
                               "the channel",
                               false);
        goto dropped;
    }
    if (!take_token(s, now_ms)) {
        hub_session_send_error(s, 4301,
                               "Client event rejected due to rate limit",
                               false);
        goto dropped;
    }
    data = m->data ? json_dumps(m->data, JSON_COMPACT | JSON_ENCODE_ANY)
                   : strdup("null");
    if (!data)
        goto dropped;
    if (strlen(data) > app->max_event_bytes) {
        free(data);
        hub_session_send_error(s, -1, "Client event data too large", false);
        goto dropped;
    }
    f = event_frame(m->event, sub->ch->name, data, strlen(data),
                    kind == HUB_CHANNEL_PRESENCE ? sub->user_id : NULL);
    free(data);
    if (!f)
        goto dropped;
    publish(s, sub->ch->name, sub->ch->name_len, f, 0);
    hub_frame_unref(f);
    HUB_STAT_ADD(l->stats.client_events, 1);
    return;
dropped:
    HUB_STAT_ADD(l->stats.client_events_dropped, 1);
}

int hub_pusher_on_message(struct hub_session *s, const char *text, size_t len,
                          uint64_t now_ms)
{
    struct hub_loop *l = s->loop;
    struct hub_msg m;
    char why[128];
    char buf[64];
    size_t n;

    if (s->state != HUB_SESSION_OPEN || !s->app)
        return 0;
    s->last_data_ms = now_ms;
    if (now_ms > l->now_ms)
        l->now_ms = now_ms;
    if (hub_msg_parse(&m, text, len, why, sizeof(why))) {
        char msg[192];

        HUB_STAT_ADD(l->stats.bad_messages, 1);
        hub_log(HUB_LOG_INFO, l->id, "socket %s: bad message: %s",
                s->socket_id, why);
        snprintf(msg, sizeof(msg), "Invalid message: %s", why);
        hub_session_send_error(s, -1, msg, false);
        return -EINVAL;
    }
    switch (m.type) {
    case HUB_MSG_PING:
        HUB_STAT_ADD(l->stats.pusher_pings, 1);
        n = hub_proto_encode_pong(buf, sizeof(buf));
        hub_session_send_text(s, buf, n);
        break;
    case HUB_MSG_PONG:
        break;
    case HUB_MSG_SUBSCRIBE:
        subscribe(s, &m);
        break;
    case HUB_MSG_UNSUBSCRIBE: {
        struct hub_sub *sub = find_sub(s, m.channel, m.channel_len);

        if (sub)
            leave(s, sub);
        break;
    }
    case HUB_MSG_CLIENT_EVENT:
        client_event(s, &m, now_ms);
        break;
    case HUB_MSG_SIGNIN:
        signin(s, &m);
        break;
    case HUB_MSG_OTHER:
        HUB_STAT_ADD(l->stats.bad_messages, 1);
        break;
    }
    hub_msg_fini(&m);
    return 0;
}
