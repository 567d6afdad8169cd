/*
 * hub/pusher/pusher.c - Pusher v7 on a session (docs/PROTOCOL.md sections 1-5):
 * connection_established, message dispatch, pings, client events and
 * pusher:signin. Channel membership (subscribe, unsubscribe, leaving,
 * member events) is hub/pusher/subscribe.c.
 *
 * Outbound control messages are small and per session, so they are encoded
 * on the stack and copied into a frame. Channel events are encoded once into
 * a frame that every recipient shares.
 */
#include "hub/pusher/pusher.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/app/auth.h"
#include "hub/loop/budget.h"
#include "hub/loop/chanmap.h"
#include "hub/loop/compress.h"
#include "hub/base/json.h"
#include "hub/base/log.h"
#include "hub/loop/loop.h"
#include "hub/wire/protocol.h"
#include "hub/loop/session.h"
#include "hub/pusher/subscribe.h"
#include "hub/pusher/recover.h"
#include "hub/webhook/queue.h"
#include "hub/ops/inspect.h"
#include "hub/ops/tail.h"
#include "hub/pusher/watchlist.h"

void hub_pusher_open(struct hub_session *s, const struct hub_app *app)
{
    atomic_uint_fast32_t *live;
    char buf[256];
    size_t n;

    s->app = app;
    /* The session's reference: the app outlives a reload while s can
     * read it (dropped in hub_session_fini()). */
    hub_app_ref(app);
    hub_session_compress_update(s);
    if (!app->enabled) {
        hub_session_send_error(s, 4003, "Application is disabled", true);
        return;
    }
    /*
     * Per-app quota, hub-wide: take a slot first and give it back when
     * over, so two loops racing for the last slot cannot both get it.
     */
    live = &hub_app_live_of(s->loop->hub, app->index)->sessions;
    /* In a cluster, plus the other nodes' sessions (one lease tick old). */
    if (hub_app_quota_full(app->max_connections, atomic_fetch_add(live, 1),
                           atomic_load_explicit(
                               &hub_app_live_of(s->loop->hub, app->index)
                                    ->remote_sessions,
                               memory_order_relaxed))) {
        atomic_fetch_sub(live, 1);
        hub_session_send_error(s, 4004, "Application is over connection quota",
                               true);
        return;
    }
    s->app_counted = true;
    s->bucket_tokens = app->client_event_rate * 1000;
    s->bucket_ms = s->connected_ms;
    s->sub_tat = (uint32_t)s->connected_ms;
    n = hub_proto_encode_established(buf, sizeof(buf), HUB_SID(s),
                                     s->loop->cfg->activity_timeout_s);
    hub_session_send_text(s, buf, n);
    /* Authorized connections: sign in by the app's deadline, or 4009. */
    hub_session_arm_signin_deadline(s);
    if (hub_tail_watched())
        hub_tail_connection(s->loop->hub, app->index, true, HUB_SID(s), 0);
}

/* "<id>\0<user_info JSON or empty>\0" for s->user_id; NULL when out of
 * memory. user_info is the user_data's "user_info", the identity a presence
 * subscription without channel_data takes. */
static char *user_record(const char *id, json_t *ud)
{
    json_t *info = json_object_get(ud, "user_info");
    char *text = info ? hub_json_dumps(info, JSON_COMPACT | JSON_ENCODE_ANY)
                      : NULL;
    size_t il = strlen(id), tl = text ? strlen(text) : 0;
    char *rec;

    if (info && !text)
        return NULL;
    rec = malloc(il + tl + 2);
    if (rec) {
        memcpy(rec, id, il + 1);
        if (text)
            memcpy(rec + il + 1, text, tl);
        rec[il + 1 + tl] = '\0';
    }
    free(text);
    return rec;
}

/*
 * pusher:signin (docs/PROTOCOL.md 4.2): check the signature over
 * "<socket_id>::user::<user_data>", require a non-empty string id, join
 * the user's channel so REST events to #server-to-user-<id> and
 * terminate_connections reach this socket, and confirm. Failures close
 * with 4009, as soketi does. Then the watchlist (hub/pusher/watchlist.c).
 */
static void signin(struct hub_session *s, const struct hub_msg *m)
{
    const struct hub_app *app = s->app;
    json_t *ud, *reply;
    struct hub_frame *f;
    const char *id;
    char *text;
    int rc;

    rc = hub_auth_check_user(app, HUB_SID(s), m->user_data,
                             m->user_data_len, m->auth);
    if (rc) {
        HUB_LOG_EVENT(HUB_LOG_INFO, s->loop->id,
                      HUB_LOG_F(.event = "signin_refused",
                                .socket_id = HUB_SID(s), .app = app->id,
                                .code = 4009,
                                .reason = rc == -EACCES ? "bad_signature"
                                                        : "bad_auth"),
                      "socket %s: signin refused: %s", HUB_SID(s),
                      rc == -EACCES ? "bad signature" : "bad auth");
        hub_session_send_error(s, 4009, "Invalid signature for pusher:signin",
                               true);
        return;
    }
    ud = json_loadb(m->user_data, m->user_data_len, 0, NULL);
    if (!ud && (ud = json_loadb(m->user_data, m->user_data_len,
                                JSON_ALLOW_NUL, NULL))) {
        /* Valid JSON but for a \u0000: said plainly. A user id is a C
         * string here and a key in Redis; a NUL is refused, not carried. */
        json_decref(ud);
        hub_session_send_error(s, 4009,
                               "user_data must not contain \\u0000 (NUL)",
                               true);
        return;
    }
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
    /* The confirmation first: once signed in, the socket gets it. */
    reply = json_pack("{s:s}", "user_data", m->user_data);
    text = hub_json_dumps(reply, JSON_COMPACT);
    json_decref(reply);
    f = text ? hub_pusher_string_frame("pusher:signin_success", NULL, text)
             : NULL;
    free(text);
    if (f && !s->user_id) {
        s->user_id = user_record(id, ud);
        if (!s->user_id || hub_pusher_join_user_channel(s, id)) {
            free(s->user_id);
            s->user_id = NULL;
            hub_frame_unref(f);
            f = NULL;
        }
    }
    if (!f) {
        json_decref(ud);
        hub_session_send_error(s, 4009, "Out of memory", true);
        return;
    }
    hub_session_send(s, f);
    hub_frame_unref(f);
    hub_session_authorized(s);
    if (hub_watchlist_signin(s, ud))
        hub_session_send_error(s, 4009, "Out of memory", true);
    json_decref(ud);
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

/*
 * The subscribe rate limit (subscribe_rate): subscribe, unsubscribe and
 * signin are cheap for a client and dear for the hub (the directory, Lua
 * in Redis, SUBSCRIBE/UNSUBSCRIBE, webhook edges, the watchlist), so each
 * connection gets a GCRA
 * bucket (one 32-bit time in the session) of subscribe_rate a second after
 * a burst of three times its max_subscriptions, at least 100: joining every
 * channel (pusher-js after a reconnect), then leaving and joining them all
 * again at once, never meets it. A request over the rate is refused with
 * pusher:error 4301 and dropped; HUB_SUB_REFUSALS_MAX refusals in a row
 * close the connection with 4100 (pusher-js backs off and reconnects; a
 * 43xx close would make it give up for good).
 */
#define HUB_SUB_REFUSALS_MAX 16
#define HUB_SUB_BURST_MIN 100u
#define HUB_SUB_BURST_MAX 100000u

static bool take_subscribe(struct hub_session *s, uint64_t now_ms)
{
    const struct hub_config *cfg = s->loop->cfg;
    uint32_t rate = cfg->subscribe_rate, t, burst, max, now = (uint32_t)now_ms;
    int32_t ahead;

    if (!rate)
        return true;
    t = 1000 / rate ? 1000 / rate : 1;
    max = s->app->max_subscriptions ? s->app->max_subscriptions
                                    : cfg->max_subscriptions;
    burst = max && max < HUB_SUB_BURST_MAX / 3 ? 3 * max : HUB_SUB_BURST_MAX;
    if (burst < HUB_SUB_BURST_MIN)
        burst = HUB_SUB_BURST_MIN;
    ahead = (int32_t)(s->sub_tat - now);
    if (ahead < 0)
        ahead = 0;
    if ((uint32_t)ahead > (burst - 1) * t) {
        HUB_STAT_ADD(s->loop->stats.subscribe_rate_refused, 1);
        if (++s->sub_refused >= HUB_SUB_REFUSALS_MAX) {
            HUB_LOG_EVENT(HUB_LOG_INFO, s->loop->id,
                          HUB_LOG_F(.event = "subscribe_refused",
                                    .socket_id = HUB_SID(s),
                                    .app = s->app->id, .code = 4100,
                                    .reason = "rate_limit"),
                          "socket %s: %u subscribe requests refused in a "
                          "row by the rate limit: closing 4100",
                          HUB_SID(s), (unsigned)s->sub_refused);
            hub_session_close_behind(s, "Subscribe rate limit exceeded",
                                     HUB_CLOSE_SLOW);
        } else {
            hub_session_send_error(s, 4301,
                                   "Subscribe rejected due to rate limit",
                                   false);
        }
        return false;
    }
    s->sub_refused = 0;
    s->sub_tat = now + (uint32_t)ahead + t;
    return true;
}

/*
 * The webhook's data for a fast-path client event, as the tree path gives
 * it: a string's value, any other value's JSON text. Owned; NULL when out
 * of memory (the webhook then says "null", as on the tree path).
 */
static char *webhook_data(const char *raw, size_t len)
{
    json_error_t err;
    json_t *v;
    char *text;

    if (raw[0] != '"')
        return strndup(raw, len);
    v = json_loadb(raw, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);
    text = json_is_string(v) ? strdup(json_string_value(v)) : NULL;
    json_decref(v);
    return text;
}

/*
 * Whether a client event may go out (docs/PROTOCOL.md 4): the app allows
 * them, the channel is private or presence, the name fits, the session is
 * subscribed (*sub), the rate allows it. When not, the session is told why
 * and false comes back.
 */
static bool client_event_allowed(struct hub_session *s,
                                 const struct hub_msg *m,
                                 enum hub_channel_kind kind,
                                 struct hub_sub **sub, uint64_t now_ms)
{
    const struct hub_app *app = s->app;

    if (!app->client_events) {
        hub_session_send_error(s, 4301,
                               "Client events are disabled for this app",
                               false);
        return false;
    }
    if (kind != HUB_CHANNEL_PRIVATE && kind != HUB_CHANNEL_PRESENCE) {
        hub_session_send_error(s, -1,
                               "Client events are only allowed on private "
                               "and presence channels",
                               false);
        return false;
    }
    if (strlen(m->event) > app->max_event_name) {
        hub_session_send_error(s, -1, "Event name too long", false);
        return false;
    }
    *sub = hub_pusher_find_sub(s, m->channel, m->channel_len);
    if (!*sub) {
        hub_session_send_error(s, -1,
                               "Client event rejected: not subscribed to "
                               "the channel",
                               false);
        return false;
    }
    if (!take_token(s, now_ms)) {
        hub_session_send_error(s, 4301,
                               "Client event rejected due to rate limit",
                               false);
        return false;
    }
    return true;
}

/* The client_event webhook of a relayed event, for an app that wants it
 * (the data text is built only then). */
static void client_event_webhook(struct hub_session *s,
                                 const struct hub_msg *m,
                                 enum hub_channel_kind kind,
                                 const struct hub_sub *sub)
{
    const struct hub_app *app = s->app;
    struct hub_loop *l = s->loop;
    /* user_id: the presence member, else the signed-in user. */
    const char *uid = kind == HUB_CHANNEL_PRESENCE ? sub->user_id
                                                   : s->user_id;
    char *text = NULL;
    const char *d;

    if (!hub_wh_queue_wants(atomic_load_explicit(&l->hub->webhooks,
                                                 memory_order_acquire),
                            app->index, HUB_WH_CLIENT_EVENT))
        return;
    if (m->data_raw)
        d = text = webhook_data(m->data_raw, m->data_raw_len);
    else
        d = json_is_string(m->data)
                ? json_string_value(m->data)
                : (text = m->data ? hub_json_dumps(m->data,
                                                   JSON_COMPACT |
                                                       JSON_ENCODE_ANY)
                                  : NULL);
    hub_wh_client_event(l->hub, app->index, sub->ch->name,
                        sub->ch->name_len, m->event,
                        d ? d : "null", HUB_SID(s), uid);
    free(text);
}

static void client_event(struct hub_session *s, const struct hub_msg *m,
                         uint64_t now_ms)
{
    const struct hub_app *app = s->app;
    struct hub_loop *l = s->loop;
    enum hub_channel_kind kind;
    struct hub_sub *sub = NULL;
    char *data;
    size_t dlen;
    struct hub_frame *f;
    int rc;

    kind = hub_channel_classify(m->channel, m->channel_len);
    if (!client_event_allowed(s, m, kind, &sub, now_ms))
        goto dropped;
    /* The fast path's data text is what the dump would give: no copy. */
    if (m->data_raw) {
        data = NULL;
        dlen = m->data_raw_len;
    } else {
        data = m->data ? hub_json_dumps(m->data,
                                        JSON_COMPACT | JSON_ENCODE_ANY)
                       : strdup("null");
        if (!data)
            goto nomem;
        dlen = strlen(data);
    }
    if (dlen > app->max_event_bytes) {
        free(data);
        hub_session_send_error(s, -1, "Client event data too large", false);
        goto dropped;
    }
    f = hub_proto_event_frame(m->event, sub->ch->name,
                              data ? data : m->data_raw, dlen,
                              kind == HUB_CHANNEL_PRESENCE ? sub->user_id
                                                           : NULL);
    free(data);
    /* hub_publish reaches every loop or none. This loop's share may wait
     * for the end of the read (batch: hub_defer_begin). */
    rc = f ? hub_pusher_publish(s, sub->ch->name, sub->ch->name_len, f, 0,
                                true)
           : -ENOMEM;
    if (f)
        hub_frame_unref(f);
    if (rc)
        goto nomem;
    HUB_STAT_ADD(l->stats.client_events, 1);
    client_event_webhook(s, m, kind, sub);
    return;
nomem:
    /* Told, not dropped in silence: the sender may send it again. */
    hub_session_send_error(s, -1, "Client event dropped: out of memory",
                           false);
dropped:
    HUB_STAT_ADD(l->stats.client_events_dropped, 1);
}

/*
 * A message's replies count in the loop's queued bytes like a fan-out's:
 * hold the loop to its share of max_queued_total as hub/loop/publish.c does,
 * so that replies alone cannot take a loop that never publishes past it.
 * Eviction may close the session that asked (its queue is the longest);
 * unforced, it scans at most once a tick.
 */
static void hold_budget(struct hub_loop *l)
{
    uint64_t budget = hub_loop_budget(l);

    if (budget && hub_loop_queued(l) > hub_budget_high(budget))
        hub_loop_evict(l, hub_budget_low(budget), false);
}

static int on_message(struct hub_session *s, const char *text, size_t len,
                      uint64_t now_ms)
{
    struct hub_loop *l = s->loop;
    struct hub_msg m;
    char why[128];
    char buf[64];
    size_t n;

    if (s->state != HUB_SESSION_OPEN || !s->app)
        return 0;
    s->last_data_ms = (uint32_t)now_ms;
    if (now_ms > l->now_ms)
        l->now_ms = now_ms;
    if (hub_msg_parse(&m, text, len, why, sizeof(why))) {
        char msg[192];

        hub_defer_flush(l);

        HUB_STAT_ADD(l->stats.bad_messages, 1);
        HUB_LOG_EVENT(HUB_LOG_INFO, l->id,
                      HUB_LOG_F(.event = "bad_message",
                                .socket_id = HUB_SID(s), .app = s->app->id,
                                .reason = why),
                      "socket %s: bad message: %s", HUB_SID(s), why);
        snprintf(msg, sizeof(msg), "Invalid message: %s", why);
        hub_session_send_error(s, -1, msg, false);
        hold_budget(l);
        return -EINVAL;
    }
    /* Client events held for one walk are delivered before anything
     * else this session asked for takes effect (hub/loop/publish.h). */
    if (m.type != HUB_MSG_CLIENT_EVENT)
        hub_defer_flush(l);
    switch (m.type) {
    case HUB_MSG_PING:
        HUB_STAT_ADD(l->stats.pusher_pings, 1);
        n = hub_proto_encode_pong(buf, sizeof(buf));
        hub_session_send_text(s, buf, n);
        break;
    case HUB_MSG_PONG:
        break;
    case HUB_MSG_SUBSCRIBE:
        if (take_subscribe(s, now_ms))
            hub_pusher_subscribe(s, &m);
        break;
    case HUB_MSG_UNSUBSCRIBE:
        if (take_subscribe(s, now_ms))
            hub_pusher_unsubscribe(s, m.channel, m.channel_len);
        break;
    case HUB_MSG_CLIENT_EVENT:
        client_event(s, &m, now_ms);
        break;
    case HUB_MSG_SIGNIN:
        /* The watchlist, and in a cluster a Redis script, each time. */
        if (take_subscribe(s, now_ms))
            signin(s, &m);
        break;
    case HUB_MSG_OTHER:
        /* Recovery (docs/PROTOCOL.md): rate-limited like a subscribe,
         * since each may grow the session's resume state. */
        if (!strcmp(m.event, "lubdub:resume")) {
            if (take_subscribe(s, now_ms))
                hub_recover_on_resume(s, &m);
            break;
        }
        HUB_STAT_ADD(l->stats.bad_messages, 1);
        break;
    }
    hub_msg_fini(&m);
    hold_budget(l);
    return 0;
}

/*
 * What a message makes the hub log (a bad signature, bad input) is
 * charged to this session's peer (hub/base/log.h): the server's read bypass
 * calls this without any lws callback around it.
 */
int hub_pusher_on_message(struct hub_session *s, const char *text, size_t len,
                          uint64_t now_ms)
{
    void *was = hub_log_conn_swap(s->conn);
    int rc = on_message(s, text, len, now_ms);

    hub_log_conn_swap(was);
    return rc;
}

void hub_pusher_connect(struct hub_session *s, const char *uri,
                        size_t uri_len, int protocol)
{
    const struct hub_app *app = NULL;
    unsigned pair = 0;

    /* Any of an app's key/secret pairs opens a connection (key
     * rotation); the session remembers which, for a reload. */
    if (uri && uri_len > 5 && strncmp(uri, "/app/", 5) == 0)
        app = hub_apptab_find_key(hub_apps(s->loop->hub), uri + 5,
                                  uri_len - 5, &pair);
    if (!app) {
        HUB_LOG_EVENT(HUB_LOG_INFO, s->loop->id,
                      HUB_LOG_F(.event = "connect_refused",
                                .socket_id = HUB_SID(s), .code = 4001,
                                .reason = "unknown_app_key"),
                      "socket %s: unknown app key in %s", HUB_SID(s),
                      uri && uri_len ? uri : "?");
        hub_session_send_error(s, 4001, "App key not in this cluster", true);
        return;
    }
    if (protocol != -1 && (protocol < 5 || protocol > 7)) {
        hub_session_send_error(s, 4007, "Unsupported protocol version", true);
        return;
    }
    s->key_pair = pair & 15;
    /* hub_pusher_open() enforces the app's max_connections (4004). */
    hub_pusher_open(s, app);
}

/* At fini: offline edges first (the user channel is still joined), then
 * every channel; the console's tail sees the close of a connection it saw
 * open. */
static void pusher_fini(struct hub_session *s)
{
    /* The inspector's ring of recent closes, while the session still
     * holds its presence memberships (its user id). */
    hub_inspect_closed(s);
    hub_watchlist_signout(s);
    hub_pusher_leave_all(s);
    if (hub_tail_watched() && s->app_counted)
        hub_tail_connection(s->loop->hub, s->app->index, false, HUB_SID(s),
                            s->close_code);
}

const struct hub_session_hooks hub_pusher_hooks = {
    .on_fini = pusher_fini,
};
