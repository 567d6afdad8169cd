/*
 * server/ops/console_inspect.c - the console's socket inspector
 * (server/ops/console_inspect.h; docs/OPERATIONS.md, "Dashboard and
 * console"): a POST starts a query of this node's loops
 * (hub/ops/inspect.h) and, with --redis and Redis up, of the other nodes
 * (server/redis/redis_inspect.h), and answers its number at once; the
 * page then polls GET ?query=N until the answer is complete: every loop
 * answered, and every other node the lease knows of did or
 * SRV_INSPECT_WAIT_MS passed. Nothing waits on a loop: a session never
 * leaves its own, and an HTTP answer here is always written at once.
 *
 * The answer: {"state":"done","node","cluster","sockets":[...],
 * "closes":[...],"nodes_answered":[...],"verdict"}, the verdict "found",
 * "not on this node" (one node), or "not found on any of the N nodes that
 * answered (a, b, ...)" (a cluster: this node and those whose answer came
 * in time).
 *
 * Thread: the connection's loop.
 */
#include "server/ops/console_inspect.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "hub/loop/backplane.h"
#include "hub/ops/inspect.h"
#include "hub/wire/ws.h"
#include "server/lws/sockbytes.h"
#include "server/lws/srv.h"
#include "server/redis/redis.h"
#include "server/redis/redis_inspect.h"

/* How long a cluster query waits for the other nodes. */
#define SRV_INSPECT_WAIT_MS 2000

static int answer(struct lws *wsi, unsigned status, json_t *o, bool close)
{
    return srv_ops_respond_json(wsi, status, o, close);
}

static int error(struct lws *wsi, unsigned status, const char *msg,
                 bool close)
{
    return answer(wsi, status, json_pack("{s:s}", "error", msg), close);
}

/* The other nodes the lease knows of (0 when none, or one node). */
static unsigned other_nodes(const struct srv *srv)
{
    const struct hub_backplane_stats *st =
        srv->hub && srv->hub->bp ? srv->hub->bp->stats : NULL;
    uint64_t n = st ? HUB_STAT_GET(st->nodes) : 0;

    if (n <= 1)
        return 0;
    return n - 1 < HUB_INSPECT_NODES ? (unsigned)(n - 1) : HUB_INSPECT_NODES;
}

/* The request's app and id into rq; NULL, or what is wrong. */
static const char *parse(struct srv_loop *l, json_t *o,
                         struct hub_inspect_req *rq, const char **app_id)
{
    const struct hub_app *app;
    json_t *sid = json_object_get(o, "socket_id");
    json_t *uid = json_object_get(o, "user_id");
    json_t *id = sid ? sid : uid;

    *app_id = json_string_value(json_object_get(o, "app"));
    if (!*app_id)
        return "send {\"app\", \"socket_id\" or \"user_id\"}";
    app = hub_apptab_by_id(hub_apps(l->hub->hub), *app_id, strlen(*app_id));
    if (!app)
        return "unknown app";
    if ((sid && uid) || !json_is_string(id) || !json_string_length(id) ||
        json_string_length(id) > HUB_INSPECT_ID_MAX)
        return "one of \"socket_id\" or \"user_id\": a string of 1 to 200 "
               "bytes";
    memset(rq, 0, sizeof(*rq));
    rq->app = app->index;
    rq->by_user = uid != NULL;
    memcpy(rq->id, json_string_value(id), json_string_length(id));
    return NULL;
}

int srv_console_inspect_start(struct lws *wsi, struct srv_loop *l,
                              const char *body, size_t body_len, bool close)
{
    struct srv *srv = l->srv;
    json_t *o = body ? json_loadb(body, body_len, 0, NULL) : NULL;
    struct hub_inspect_req rq;
    struct hub_inspect_start how = { 0 };
    const char *app_id = NULL, *bad = parse(l, o, &rq, &app_id);
    bool cluster = srv->redis && srv_redis_up(srv->redis);
    int64_t id;

    if (bad) {
        json_decref(o);
        return error(wsi, strcmp(bad, "unknown app") ? 400 : 404, bad, close);
    }
    how.node = srv->redis ? srv->node_id : NULL;
    how.bytes = srv_sock_bytes_written;
    if (cluster) {
        /* Every other node the lease knows of, or as many as answer in
         * time when it knows none yet. */
        how.expect = other_nodes(srv);
        if (!how.expect)
            how.expect = HUB_INSPECT_NODES;
        how.deadline_ms = hub_clock_now_ms(srv->hub->clock) +
                          SRV_INSPECT_WAIT_MS;
    }
    id = hub_inspect_begin(srv->hub, &rq, &how);
    if (id > 0 && cluster)
        srv_redis_inspect_ask(srv->redis, (uint64_t)id, app_id, &rq);
    srv_log_peer_event(HUB_LOG_INFO, l->id,
                       HUB_LOG_F(.event = "console_inspect", .app = app_id),
                       "console: inspect %s %.200s of app "
                 "%.64s%s: query %" PRId64, rq.by_user ? "user" : "socket",
                 rq.id, app_id, cluster ? " (cluster)" : "", id);
    json_decref(o);
    if (id == -EBUSY)
        return error(wsi, 503, "too many inspections at once; retry in a "
                     "minute", close);
    if (id < 0)
        return error(wsi, 500, "cannot start the inspection", close);
    return answer(wsi, 202, json_pack("{s:I}", "query", (json_int_t)id),
                  close);
}

/* "found", or where it was not (a, b: this node and those that answered). */
static json_t *verdict(const struct srv *srv, json_t *r)
{
    json_t *nodes = json_object_get(r, "nodes_answered");
    char text[1024];
    size_t k, i;
    json_t *n;

    if (json_array_size(json_object_get(r, "sockets")) ||
        json_array_size(json_object_get(r, "closes")))
        return json_string("found");
    if (!srv->redis)
        return json_string("not on this node");
    k = (size_t)snprintf(text, sizeof(text),
                         "not found on any of the %zu nodes that answered "
                         "(%s", json_array_size(nodes) + 1, srv->node_id);
    json_array_foreach(nodes, i, n) {
        if (k < sizeof(text))
            k += (size_t)snprintf(text + k, sizeof(text) - k, ", %s",
                                  json_string_value(n));
    }
    if (k < sizeof(text))
        snprintf(text + k, sizeof(text) - k, ")");
    /* Cut at the buffer's end: back to a whole character (node ids come
     * from other nodes' answers, any UTF-8). */
    k = strlen(text);
    while (k && !hub_utf8_valid(text, k))
        k--;
    return json_stringn(text, k);
}

int srv_console_inspect_poll(struct lws *wsi, struct srv_loop *l, bool close)
{
    struct srv *srv = l->srv;
    char buf[32];
    const char *v = lws_get_urlarg_by_name(wsi, "query=", buf, sizeof(buf));
    json_t *r = NULL;
    int rc;

    if (!v || !*v)
        return error(wsi, 400, "query= is required", close);
    rc = hub_inspect_result(srv->hub, strtoull(v, NULL, 10), &r);
    if (rc == -EAGAIN)
        return answer(wsi, 200, json_pack("{s:s}", "state", "pending"), close);
    if (rc)
        return error(wsi, 404, "no such query (answers are kept a minute)",
                     close);
    json_object_set_new(r, "state", json_string("done"));
    json_object_set_new(r, "node", srv->redis ? json_string(srv->node_id)
                                              : json_null());
    json_object_set_new(r, "cluster", json_boolean(srv->redis != NULL));
    json_object_set_new(r, "verdict", verdict(srv, r));
    json_object_del(r, "nodes_asked");
    return answer(wsi, 200, r, close);
}
