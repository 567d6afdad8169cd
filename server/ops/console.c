/*
 * server/ops/console.c - the operator console (--admin-token): the page under
 * /console, its JSON API and the live tail's WebSocket.
 *
 * Without --admin-token every /console path is a 404. With it the page and
 * its script are served to anyone (they hold no data); every API call
 * needs "Authorization: Bearer <admin token>" (401 otherwise), and the
 * tail's WebSocket (protocol "lubdub-console" on /console/tail) needs the
 * token in its first message, since a browser cannot set headers on a
 * WebSocket and a token in the URL would land in access logs. What the
 * console shows comes from the directory (hub_dir_list, hub_dir_info,
 * hub_dir_users) and the tail (hub/ops/tail.h); apps are listed by id and key,
 * never with their secret.
 *
 * API (GET):
 *   /console/api/apps                     {"apps":[{"id","key","enabled"}]}
 *   /console/api/channels?app=ID          {"channels":[{"name",
 *                       "subscription_count","user_count"?}],"truncated"}
 *   /console/api/users?app=ID&channel=C   {"users":[{"id","user_info"?}]}
 *                       (this node's members: at most the channel's
 *                       max_presence_members, each user_info at most
 *                       max_presence_user_info bytes, checked at the join)
 *   /console/api/inspect?query=N          the socket inspector's answer
 *                       (server/ops/console_inspect.c)
 * API (POST, a JSON body of at most HUB_REST_MAX_BODY):
 *   /console/api/publish {"app","channel","event","data"}: a test event,
 *                       published as POST events publishes it
 *                       (hub_rest_trusted_publish: same checks, the
 *                       cluster, the history), answered as it answers,
 *                       and logged
 *   /console/api/inspect {"app","socket_id"|"user_id"}: 202 {"query":N}
 * Tail (WebSocket text messages): the browser sends
 *   {"token","app","channel","prefix","kinds":["events","connections"],
 *    "rate"} (again to change the filter); the hub answers {"type":"ready",
 *   "rate","queue"}, then one message per tailed event
 *   ({"type":"event"|"connection",...}, hub/ops/tail.c) and {"type":"drops",
 *   "rate","queue"} when the counts of dropped lines change. A wrong token
 *   closes with 4401, bad input is answered {"type":"error","message"}.
 *
 * Thread: the connection's loop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jansson.h>

#include "hub/loop/backplane.h"
#include "hub/ops/tail.h"
#include "hub/rest/rest.h"
#include "server/lws/srv.h"
#include "server/ops/console_inspect.h"

#define CONSOLE_MAX_CHANNELS 1000
#define CONSOLE_RX_MAX 4096
#define CONSOLE_AUTH_TIMEOUT_US (10 * LWS_US_PER_SEC)
#define CONSOLE_DROPS_EVERY_US LWS_US_PER_SEC

static int reply_json(struct lws *wsi, unsigned status, json_t *o,
                      bool close)
{
    return srv_ops_respond_json(wsi, status, o, close);
}

static int reply_error(struct lws *wsi, unsigned status, const char *msg,
                       bool close)
{
    return reply_json(wsi, status, json_pack("{s:s}", "error", msg), close);
}

static const struct hub_app *app_arg(struct lws *wsi, struct srv_loop *l)
{
    char buf[256];
    const char *v = lws_get_urlarg_by_name(wsi, "app=", buf, sizeof(buf));

    if (!v)
        return NULL;
    /* The current app table (a reload may change it; hub/loop/appswap.h). */
    return hub_apptab_by_id(hub_apps(l->hub->hub), v, strlen(v));
}

static json_t *api_apps(struct srv_loop *l)
{
    const struct hub_apptab *tab = hub_apps(l->hub->hub);
    json_t *arr = json_array();

    for (unsigned i = 0; arr && i < tab->n; i++) {
        const struct hub_app *a = tab->apps[i];

        if (!a)
            continue; /* removed by a reload */
        json_t *keys = json_array();

        /* Id and keys only (key: the first pair's, "keys": every pair's,
         * key rotation): the secrets never leave the hub. */
        for (unsigned k = 0; keys && k < hub_app_n_keys(a); k++)
            json_array_append_new(keys, json_string(hub_app_key_at(a, k)));
        json_array_append_new(arr, json_pack("{s:s?, s:s?, s:o?, s:b}", "id",
                                             a->id, "key", a->key, "keys",
                                             keys, "enabled", a->enabled));
    }
    return json_pack("{s:o?}", "apps", arr);
}

static json_t *api_channels(struct srv_loop *l, const struct hub_app *app)
{
    json_t *all = hub_dir_list(l->srv->hub, app->index, NULL, true);
    json_t *arr = json_array(), *v;
    const char *name;
    size_t n = 0;
    bool cut = false;

    if (!all || !arr) {
        json_decref(all);
        json_decref(arr);
        return NULL;
    }
    json_object_foreach(all, name, v) {
        struct hub_channel_info info = { 0 };
        json_t *o;

        if (n == CONSOLE_MAX_CHANNELS) {
            cut = true;
            break;
        }
        hub_dir_info(l->srv->hub, app->index, name, strlen(name), &info);
        o = json_pack("{s:s, s:I}", "name", name, "subscription_count",
                      (json_int_t)info.subscription_count);
        if (o && strncmp(name, "presence-", 9) == 0)
            json_object_set_new(o, "user_count",
                                json_integer(info.user_count));
        json_array_append_new(arr, o);
        n++;
    }
    json_decref(all);
    return json_pack("{s:o, s:b}", "channels", arr, "truncated", cut);
}

/*
 * POST /console/api/publish: one test event, through POST events' own
 * handler (hub_rest_trusted_publish), so that it reaches the other loops,
 * the other nodes and the history as a REST trigger does, and is refused
 * as one is (a bad name 400, data over the app's max_event_bytes 413).
 * Each attempt is logged with what it was and what it got.
 */
static int api_publish(struct lws *wsi, struct srv_loop *l, const char *body,
                       size_t body_len, bool close)
{
    json_t *o = body ? json_loadb(body, body_len, 0, NULL) : NULL;
    const char *app_id = json_string_value(json_object_get(o, "app"));
    const char *ch = json_string_value(json_object_get(o, "channel"));
    const char *ev = json_string_value(json_object_get(o, "event"));
    json_t *data = json_object_get(o, "data");
    const struct hub_app *app;
    struct hub_rest_response r;
    char *text;
    int rc;

    if (!app_id || !ch || !ev || !data) {
        json_decref(o);
        return reply_error(wsi, 400,
                           "send {\"app\",\"channel\",\"event\",\"data\"}",
                           close);
    }
    app = hub_apptab_by_id(hub_apps(l->hub->hub), app_id, strlen(app_id));
    if (!app) {
        json_decref(o);
        return reply_error(wsi, 404, "unknown app", close);
    }
    /* Data as POST events takes it: a string as it is, else its JSON. */
    text = json_is_string(data) ? strdup(json_string_value(data))
                                : json_dumps(data, JSON_COMPACT |
                                                       JSON_ENCODE_ANY);
    if (!text) {
        json_decref(o);
        return reply_error(wsi, 500, "out of memory", close);
    }
    hub_rest_trusted_publish(l->hub, app, ev, ch, text, &r);
    srv_log_peer_event(r.status == 200 ? HUB_LOG_INFO : HUB_LOG_WARN, l->id,
                 HUB_LOG_F(.event = "console_publish", .app = app_id,
                           .channel = ch, .status = r.status),
                 "console: test event %.64s to %.200s of app %.64s "
                 "(%zu bytes): %d",
                 ev, ch, app_id, strlen(text), r.status);
    free(text);
    json_decref(o);
    rc = srv_ops_respond(wsi, (unsigned)r.status, "application/json",
                         r.body ? r.body : "{}", r.body ? r.len : 2, close,
                         NULL, NULL);
    free(r.body);
    return rc;
}

/* The directory gives each member's user_info as its JSON text: the
 * console shows it as JSON (text it cannot parse stays a string). */
static void users_info_json(json_t *users)
{
    size_t i;
    json_t *u;

    json_array_foreach(users, i, u) {
        const char *text = json_string_value(json_object_get(u, "user_info"));
        json_t *v = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;

        if (v)
            json_object_set_new(u, "user_info", v);
    }
}

static int serve_page(struct lws *wsi, struct srv_loop *l, const char *file,
                      const char *mime)
{
    char path[1024];
    struct stat st;

    snprintf(path, sizeof(path), "%s/console/%s", l->srv->cfg->web_root,
             file);
    if (stat(path, &st) || !S_ISREG(st.st_mode))
        return reply_error(wsi, 404, "not found", false);
    /* Not framed by other sites (the page holds a signed-in token), no
     * referrer to other origins, never cached. */
    static const char extra[] =
        "x-frame-options: DENY\x0d\x0a"
        "referrer-policy: no-referrer\x0d\x0a"
        "x-content-type-options: nosniff\x0d\x0a"
        "cache-control: no-store\x0d\x0a";

    return lws_serve_http_file(wsi, path, mime, extra, sizeof(extra) - 1)
               ? -1
               : 0;
}

int srv_console_http(struct lws *wsi, struct srv_loop *l, const char *path,
                     bool post, const char *body, size_t body_len,
                     bool close)
{
    char token[SRV_SECRET_TOKEN_MAX + 1];
    const struct hub_app *app;
    bool ok;

    /* Unset, the console is off. */
    if (!srv_secret_isset(&l->srv->secrets.admin_token))
        return reply_error(wsi, 404, "not found", close);
    if (!strcmp(path, "/console") || !strcmp(path, "/console/"))
        return serve_page(wsi, l, "index.html", "text/html; charset=utf-8");
    if (!strcmp(path, "/console/console.js"))
        return serve_page(wsi, l, "console.js",
                          "text/javascript; charset=utf-8");
    if (strncmp(path, "/console/api/", 13) != 0)
        return reply_error(wsi, 404, "not found", close);
    /* The token in force: a SIGHUP may have replaced it (server/config/secret.h);
     * one a reload just unset passes no check. */
    ok = srv_secret_copy(&l->srv->secrets.admin_token, token,
                         sizeof(token)) == 1 &&
         srv_ops_bearer_ok(wsi, token);
    explicit_bzero(token, sizeof(token));
    if (!ok) {
        srv_log_peer_event(HUB_LOG_INFO, l->id,
                           HUB_LOG_F(.event = "console_refused",
                                     .reason = "token", .status = 401,
                                     .path = path),
                           "console: %s refused (token)", path);
        return srv_ops_respond(
            wsi, 401, "application/json",
            "{\"error\":\"admin token required\"}", 32, close,
            "www-authenticate:", "Bearer realm=\"lubdub console\"");
    }
    path += 13;
    if (post && !strcmp(path, "publish"))
        return api_publish(wsi, l, body, body_len, close);
    if (post && !strcmp(path, "inspect"))
        return srv_console_inspect_start(wsi, l, body, body_len, close);
    if (post)
        return reply_error(wsi, 404, "not found", close);
    if (!strcmp(path, "inspect"))
        return srv_console_inspect_poll(wsi, l, close);
    if (!strcmp(path, "apps"))
        return reply_json(wsi, 200, api_apps(l), close);
    if (strcmp(path, "channels") && strcmp(path, "users"))
        return reply_error(wsi, 404, "not found", close);
    app = app_arg(wsi, l);
    if (!app)
        return reply_error(wsi, 404, "unknown app", close);
    if (!strcmp(path, "channels"))
        return reply_json(wsi, 200, api_channels(l, app), close);
    {
        char buf[HUB_TAIL_CHANNEL_MAX + 16];
        const char *ch = lws_get_urlarg_by_name(wsi, "channel=", buf,
                                                sizeof(buf));
        json_t *users;

        if (!ch || !*ch)
            return reply_error(wsi, 400, "channel= is required", close);
        users = hub_dir_users(l->srv->hub, app->index, ch, strlen(ch));
        users_info_json(users);
        return reply_json(wsi, 200, json_pack("{s:s, s:o?}", "channel", ch,
                                              "users", users),
                          close);
    }
}

/* The tail's WebSocket. */

struct console_pss {
    struct lws *wsi;
    struct srv_loop *l;
    struct hub_tail_watcher *w;
    bool authed;
    bool send_ready;
    bool send_drops;
    uint64_t sent_rate_drops, sent_queue_drops;
    uint32_t rate;
    char *err;                    /* an error message to send; owned */
    char *in;                     /* the message being reassembled */
    size_t in_used;
    bool in_too_big;
};

size_t srv_console_pss_size(void)
{
    return sizeof(struct console_pss);
}

static void tail_notify(void *ctx)
{
    struct console_pss *ps = ctx;

    lws_callback_on_writable(ps->wsi);
}

static void say_error(struct console_pss *ps, const char *msg)
{
    free(ps->err);
    ps->err = strdup(msg);
    lws_callback_on_writable(ps->wsi);
}

static int kinds_of(json_t *kinds)
{
    size_t i;
    json_t *k;
    int m = 0;

    if (!kinds)
        return HUB_TAIL_EVENTS;
    if (!json_is_array(kinds))
        return -1;
    json_array_foreach(kinds, i, k) {
        const char *s = json_string_value(k);

        if (s && !strcmp(s, "events"))
            m |= HUB_TAIL_EVENTS;
        else if (s && !strcmp(s, "connections"))
            m |= HUB_TAIL_CONNECTIONS;
        else
            return -1;
    }
    return m ? m : -1;
}

/* One whole message from the browser: check the token, (re)start the
 * tail. Returns -1 to close. */
static int on_request(struct console_pss *ps, const char *text, size_t len)
{
    char want[SRV_SECRET_TOKEN_MAX + 1];
    json_t *o = json_loadb(text, len, 0, NULL);
    const char *tok, *app_id, *ch;
    bool ok;
    const struct hub_app *app;
    struct hub_tail_filter f = { 0 };
    json_int_t rate;
    int kinds;

    if (!json_is_object(o)) {
        json_decref(o);
        say_error(ps, "send a JSON object");
        return 0;
    }
    tok = json_string_value(json_object_get(o, "token"));
    /* The token in force now: one a SIGHUP replaced no longer opens a
     * tail (a tail open already stays). */
    ok = tok && srv_secret_copy(&ps->l->srv->secrets.admin_token, want,
                                sizeof(want)) == 1 &&
         srv_ops_token_equal(tok, strlen(tok), want);
    explicit_bzero(want, sizeof(want));
    if (!ok) {
        json_decref(o);
        srv_log_peer_event(HUB_LOG_INFO, ps->l->id,
                           HUB_LOG_F(.event = "console_refused",
                                     .reason = "token", .code = 4401),
                           "console: tail refused (token)");
        lws_close_reason(ps->wsi, (enum lws_close_status)4401,
                         (unsigned char *)"admin token required", 20);
        return -1;
    }
    ps->authed = true;
    lws_set_timer_usecs(ps->wsi, CONSOLE_DROPS_EVERY_US);
    app_id = json_string_value(json_object_get(o, "app"));
    app = app_id ? hub_apptab_by_id(hub_apps(ps->l->hub->hub), app_id,
                                    strlen(app_id))
                 : NULL;
    ch = json_string_value(json_object_get(o, "channel"));
    kinds = kinds_of(json_object_get(o, "kinds"));
    rate = json_integer_value(json_object_get(o, "rate"));
    if (rate > HUB_TAIL_RATE_MAX)
        rate = HUB_TAIL_RATE_MAX;
    if (!app || kinds < 0 || (ch && strlen(ch) > HUB_TAIL_CHANNEL_MAX) ||
        rate < 0) {
        json_decref(o);
        say_error(ps, !app ? "unknown app"
                           : kinds < 0 ? "kinds: \"events\", \"connections\""
                                       : "bad channel or rate");
        return 0;
    }
    f.app = app->index;
    f.kinds = (unsigned)kinds;
    f.prefix = json_is_true(json_object_get(o, "prefix")) || !ch || !*ch;
    snprintf(f.channel, sizeof(f.channel), "%s", ch ? ch : "");
    json_decref(o);
    hub_tail_unwatch(ps->w);
    ps->w = hub_tail_watch(ps->l->hub, &f, (uint32_t)rate, 0, tail_notify,
                           ps);
    if (!ps->w) {
        say_error(ps, "too many tails open (or out of memory); close one");
        return 0;
    }
    ps->rate = rate ? (uint32_t)rate : HUB_TAIL_RATE_DEFAULT;
    ps->sent_rate_drops = ps->sent_queue_drops = 0;
    ps->send_ready = true;
    lws_callback_on_writable(ps->wsi);
    return 0;
}

static int send_text(struct lws *wsi, const char *text, size_t len)
{
    unsigned char *buf = malloc(LWS_PRE + len);
    int n;

    if (!buf)
        return -1;
    memcpy(buf + LWS_PRE, text, len);
    n = lws_write(wsi, buf + LWS_PRE, len, LWS_WRITE_TEXT);
    free(buf);
    return n < (int)len ? -1 : 0;
}

static int send_json(struct lws *wsi, json_t *o)
{
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    int rc;

    json_decref(o);
    if (!text)
        return -1;
    rc = send_text(wsi, text, strlen(text));
    free(text);
    return rc;
}

/* One message a writable callback; ask again while there is more. */
static int on_writable(struct console_pss *ps)
{
    uint64_t rd = 0, qd = 0;
    size_t len;
    char *line;
    int rc;

    if (ps->err) {
        rc = send_json(ps->wsi, json_pack("{s:s, s:s}", "type", "error",
                                          "message", ps->err));
        free(ps->err);
        ps->err = NULL;
        lws_callback_on_writable(ps->wsi);
        return rc;
    }
    if (!ps->w)
        return 0;
    if (ps->send_ready) {
        ps->send_ready = false;
        lws_callback_on_writable(ps->wsi);
        return send_json(ps->wsi,
                         json_pack("{s:s, s:I, s:I}", "type", "ready", "rate",
                                   (json_int_t)ps->rate, "queue",
                                   (json_int_t)HUB_TAIL_QUEUE_DEFAULT));
    }
    if (ps->send_drops) {
        ps->send_drops = false;
        hub_tail_drops(ps->w, &rd, &qd);
        ps->sent_rate_drops = rd;
        ps->sent_queue_drops = qd;
        lws_callback_on_writable(ps->wsi);
        return send_json(ps->wsi, json_pack("{s:s, s:I, s:I}", "type",
                                            "drops", "rate", (json_int_t)rd,
                                            "queue", (json_int_t)qd));
    }
    line = hub_tail_next(ps->w, &len);
    if (!line)
        return 0;
    rc = send_text(ps->wsi, line, len);
    free(line);
    lws_callback_on_writable(ps->wsi);
    return rc;
}

static bool is_tail_path(struct lws *wsi)
{
    char uri[64];
    int n = lws_hdr_copy(wsi, uri, sizeof(uri), WSI_TOKEN_GET_URI);

    return n > 0 && strcmp(uri, "/console/tail") == 0;
}

static int console_callback(struct lws *wsi, enum lws_callback_reasons reason,
                            void *user, void *in, size_t len)
{
    struct console_pss *ps = user;
    struct srv_loop *l;

    /* Protocol-wide reasons come without storage (docs/LWS.md, "No
     * per-connection storage on some reasons"). */
    if (!ps && reason != LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION)
        return 0;
    switch (reason) {
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
        srv_peer_note(wsi);
        l = srv_loop_of(wsi);
        if (!srv_secret_isset(&l->srv->secrets.admin_token) ||
            srv_ops_is_metrics(wsi) ||
            !is_tail_path(wsi)) {
            lws_return_http_status(wsi, HTTP_STATUS_NOT_FOUND, NULL);
            return 1;
        }
        return 0;
    case LWS_CALLBACK_ESTABLISHED:
        memset(ps, 0, sizeof(*ps));
        ps->wsi = wsi;
        ps->l = srv_loop_of(wsi);
        /* The token must come soon; the timer then paces drop reports. */
        lws_set_timer_usecs(wsi, CONSOLE_AUTH_TIMEOUT_US);
        return 0;
    case LWS_CALLBACK_RECEIVE: {
        size_t need = ps->in_used + len;

        if (ps->in_too_big || need > CONSOLE_RX_MAX) {
            ps->in_too_big = true;
        } else {
            char *b = realloc(ps->in, need + 1);

            if (!b)
                return -1;
            ps->in = b;
            memcpy(ps->in + ps->in_used, in, len);
            ps->in_used = need;
        }
        if (!lws_is_final_fragment(wsi) || lws_remaining_packet_payload(wsi))
            return 0;
        if (ps->in_too_big) {
            lws_close_reason(wsi, LWS_CLOSE_STATUS_MESSAGE_TOO_LARGE,
                             (unsigned char *)"too big", 7);
            return -1;
        }
        {
            int rc = on_request(ps, ps->in ? ps->in : "", ps->in_used);

            free(ps->in);
            ps->in = NULL;
            ps->in_used = 0;
            return rc;
        }
    }
    case LWS_CALLBACK_TIMER:
        if (!ps->authed) {
            lws_close_reason(wsi, (enum lws_close_status)4401,
                             (unsigned char *)"admin token required", 20);
            return -1;
        }
        if (ps->w) {
            uint64_t rd, qd;

            hub_tail_drops(ps->w, &rd, &qd);
            if (rd != ps->sent_rate_drops || qd != ps->sent_queue_drops) {
                ps->send_drops = true;
                lws_callback_on_writable(wsi);
            }
        }
        lws_set_timer_usecs(wsi, CONSOLE_DROPS_EVERY_US);
        return 0;
    case LWS_CALLBACK_SERVER_WRITEABLE:
        return on_writable(ps);
    case LWS_CALLBACK_CLOSED:
        hub_tail_unwatch(ps->w);
        ps->w = NULL;
        free(ps->in);
        ps->in = NULL;
        free(ps->err);
        ps->err = NULL;
        return 0;
    default:
        return 0;
    }
}

/* A refused token is logged against the connection's client. */
int srv_console_callback(struct lws *wsi, enum lws_callback_reasons reason,
                         void *user, void *in, size_t len)
{
    void *was = hub_log_conn_swap(wsi);
    int rc = console_callback(wsi, reason, user, in, len);

    hub_log_conn_swap(was);
    return rc;
}
