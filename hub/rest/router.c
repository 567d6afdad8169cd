/*
 * hub/rest/router.c - the entry points of the Pusher HTTP API
 * (hub/rest/rest.h): the checks every request passes, in the order
 * rest.h gives (path and app 404, body 413, query 400, signature 401/400,
 * app disabled 403), then the table of routes, which says for each
 * resource under /apps/{app_id}/ the method it serves, what another
 * method gets, whether the body is a JSON object, what the request counts
 * against the app's REST rate limits (hub/base/ratelimit.h), and its
 * handler (hub/rest/events.c, channels.c, terminate.c).
 *
 * The query is parsed once here, for the signature check and the
 * handlers. Nothing here allocates beyond the JSON body's tree, which
 * lives for the handler's call (a handler that waits takes a reference).
 *
 * Thread: the loop that received the request.
 */
#include "hub/rest/rest.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "hub/app/app.h"
#include "hub/app/apptab.h"
#include "hub/base/log.h"
#include "hub/base/query.h"
#include "hub/base/ratelimit.h"
#include "hub/loop/loop.h"
#include "hub/rest/channels.h"
#include "hub/rest/events.h"
#include "hub/rest/handler.h"
#include "hub/rest/terminate.h"

/* What a request of a route counts against the app's rate limits. */
enum route_limit {
    LIMIT_NONE,
    LIMIT_READS,      /* one read request */
    LIMIT_EVENTS,     /* one backend event */
    LIMIT_BATCH,      /* the events of its "batch" */
};

/* What a request of another method than the route's gets. */
enum route_other {
    OTHER_NOT_FOUND,  /* not this route: the next, or 404 */
    OTHER_405,        /* 405 "use <the route's method>" */
    OTHER_HANDLER,    /* the handler's answer (it checks the method) */
};

struct route {
    /* The resource after /apps/{app_id}/: the whole of it, or its start
     * when it ends in '/' (the rest is the handler's r->param). */
    const char *path;
    enum hub_http_method method;
    enum route_other other;
    bool json_body;          /* the body must be a JSON object, else 400 */
    enum route_limit limit;  /* checked once the body parsed */
    hub_rest_handler_fn *handle;
};

/* In the order they are tried. */
static const struct route routes[] = {
    { "events", HUB_HTTP_POST, OTHER_405, true, LIMIT_EVENTS,
      hub_rest_events_post },
    { "batch_events", HUB_HTTP_POST, OTHER_405, true, LIMIT_BATCH,
      hub_rest_events_post_batch },
    { "channels", HUB_HTTP_GET, OTHER_NOT_FOUND, false, LIMIT_READS,
      hub_rest_channels_get },
    { "channels/", HUB_HTTP_GET, OTHER_NOT_FOUND, false, LIMIT_READS,
      hub_rest_channels_get_one },
    /* Its path's shape (a 404) goes before its method (a 405). */
    { "users/", HUB_HTTP_POST, OTHER_HANDLER, false, LIMIT_NONE,
      hub_rest_terminate_post },
};

/* Events in a batch_events body (1 when it is not an array: the handler
 * then answers 400, and the request still counts as one). */
static uint32_t batch_size(json_t *root)
{
    json_t *b = json_object_get(root, "batch");
    size_t n = json_is_array(b) ? json_array_size(b) : 1;

    return n ? (uint32_t)(n < UINT32_MAX ? n : UINT32_MAX) : 1;
}

/*
 * The app's REST rate limits (hub/base/ratelimit.h): true, with a 429 and
 * its Retry-After in out, when n more backend events (events) or one more
 * read request (!events) do not fit; counted per app.
 */
static bool over_limit(struct hub_loop *l, const struct hub_app *app,
                       bool events, uint32_t n, struct hub_rest_response *out)
{
    struct hub_app_live *v = hub_app_live_of(l->hub, app->index);
    uint32_t rate = events ? app->max_backend_events_per_second
                           : app->max_read_requests_per_second;
    uint32_t retry = 1;

    if (!rate || hub_bucket_take(events ? &v->events : &v->reads, rate, n,
                                 hub_clock_now_ms(l->clock), &retry))
        return false;
    atomic_fetch_add_explicit(events ? &v->events_limited : &v->reads_limited,
                              events ? n : 1, memory_order_relaxed);
    hub_rest_reply_error(out, 429, "rate limit exceeded: at most %u %s per "
                         "second for this app; retry after %u s", rate,
                         events ? "events" : "read requests", retry);
    out->retry_after_s = retry;
    return true;
}

/* over_limit() for a request of rt, its JSON body parsed (or NULL). */
static bool route_over_limit(const struct route *rt, struct hub_loop *l,
                             const struct hub_app *app, json_t *body,
                             struct hub_rest_response *out)
{
    switch (rt->limit) {
    case LIMIT_READS:
        return over_limit(l, app, false, 1, out);
    case LIMIT_EVENTS:
        return over_limit(l, app, true, 1, out);
    case LIMIT_BATCH:
        return over_limit(l, app, true, batch_size(body), out);
    case LIMIT_NONE:
        break;
    }
    return false;
}

/* Whether res is rt's resource; *param: what follows rt's path. */
static bool route_matches(const struct route *rt, const char *res,
                          const char **param)
{
    size_t n = strlen(rt->path);

    if (rt->path[n - 1] == '/' ? strncmp(res, rt->path, n) != 0
                               : strcmp(res, rt->path) != 0)
        return false;
    *param = res + n;
    return true;
}

/* A matched route: its body, its rate limit, its handler. */
static void route_run(const struct route *rt, struct hub_rest_req *r,
                      const char *body, size_t body_len,
                      struct hub_rest_response *out)
{
    json_t *root = NULL;

    if (rt->json_body) {
        json_error_t err;

        root = json_loadb(body, body_len, 0, &err);
        if (!json_is_object(root)) {
            json_decref(root);
            hub_rest_reply_error(out, 400, "body must be a JSON object");
            return;
        }
    }
    r->body = root;
    if (!route_over_limit(rt, r->l, r->app, root, out))
        rt->handle(r, out);
    json_decref(root);
}

/* res (the path after /apps/{app_id}/) through the table. */
static void route(struct hub_rest_req *r, const char *res, const char *body,
                  size_t body_len, struct hub_rest_response *out)
{
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
        const struct route *rt = &routes[i];

        if (!route_matches(rt, res, &r->param))
            continue;
        if (r->method != rt->method && rt->other == OTHER_NOT_FOUND)
            continue;
        if (r->method != rt->method && rt->other == OTHER_405) {
            hub_rest_reply_error(out, 405, "use %s",
                                 hub_http_method_name(rt->method));
            return;
        }
        route_run(rt, r, body, body_len, out);
        return;
    }
    hub_rest_reply_error(out, 404, "not found");
}

/*
 * The checks before the route (rest.h's order up to 403): the app, or
 * NULL with the answer in out; *res: the path after /apps/{app_id}/.
 */
static const struct hub_app *admit(struct hub_loop *l,
                                   enum hub_http_method method,
                                   const char *path, struct hub_query *q,
                                   const char *query, const char *body,
                                   size_t body_len, uint64_t now_s,
                                   const char **res,
                                   struct hub_rest_response *out)
{
    const char *id, *rest;
    const struct hub_app *app;
    struct hub_rest_request ar;
    char why[256];
    int rc;

    /* id only once the prefix is known to be there: path may be short. */
    if (strncmp(path, "/apps/", 6) != 0 ||
        !(rest = strchr(id = path + 6, '/'))) {
        hub_rest_reply_error(out, 404, "not found");
        return NULL;
    }
    app = hub_apptab_by_id(hub_apps(l->hub), id, (size_t)(rest - id));
    if (!app) {
        hub_rest_reply_error(out, 404, "unknown app");
        return NULL;
    }
    if (body_len > HUB_REST_MAX_BODY) {
        hub_rest_reply_error(out, 413, "request body too large");
        return NULL;
    }
    /* The one parse: auth checks it (in a lower-cased copy of its own),
     * the handlers look their parameters up in it as sent. */
    rc = hub_query_parse(q, query, strlen(query));
    if (rc) {
        snprintf(why, sizeof(why), "%s",
                 rc == -E2BIG ? "query too long" : "bad query encoding");
        HUB_LOG_EVENT(HUB_LOG_INFO, l->id,
                      HUB_LOG_F(.event = "rest_refused", .app = app->id,
                                .path = path, .status = 400, .reason = why),
                      "REST %s %s refused: %s",
                      hub_http_method_name(method), path, why);
        hub_rest_reply_error(out, 400, "%s", why);
        return NULL;
    }
    ar.method = method;
    ar.path = path;
    ar.query = q;
    ar.body = body;
    ar.body_len = body_len;
    ar.now_s = now_s;
    ar.window_s = l->cfg->auth_window_s;
    rc = hub_auth_check_rest(app, &ar, why, sizeof(why));
    if (rc) {
        HUB_LOG_EVENT(HUB_LOG_INFO, l->id,
                      HUB_LOG_F(.event = "rest_refused", .app = app->id,
                                .path = path,
                                .status = rc == -EACCES ? 401 : 400,
                                .reason = why),
                      "REST %s %s refused: %s",
                      hub_http_method_name(method), path, why);
        hub_rest_reply_error(out, rc == -EACCES ? 401 : 400, "%s", why);
        return NULL;
    }
    if (!app->enabled) {
        hub_rest_reply_error(out, 403, "app is disabled");
        return NULL;
    }
    *res = rest + 1;
    return app;
}

static struct hub_rest_wait *dispatch(struct hub_loop *l,
                                      enum hub_http_method method,
                                      const char *path, const char *query,
                                      const char *body, size_t body_len,
                                      uint64_t now_s,
                                      struct hub_rest_call call,
                                      struct hub_rest_response *out)
{
    struct hub_query q;
    struct hub_rest_req r = { .l = l, .method = method, .query = &q,
                              .call = &call };
    const char *res;

    memset(out, 0, sizeof(*out));
    r.app = admit(l, method, path, &q, query ? query : "", body, body_len,
                  now_s, &res, out);
    if (!r.app)
        return NULL;
    route(&r, res, body, body_len, out);
    return call.wait;
}

void hub_rest_handle(struct hub_loop *l, enum hub_http_method method,
                     const char *path, const char *query, const char *body,
                     size_t body_len, uint64_t now_s,
                     struct hub_rest_response *out)
{
    struct hub_rest_wait *w = hub_rest_handle_async(
        l, method, path, query, body, body_len, now_s, NULL, NULL, out);

    assert(!w);
    (void)w;
}

struct hub_rest_wait *hub_rest_handle_async(struct hub_loop *l,
                                            enum hub_http_method method,
                                            const char *path,
                                            const char *query,
                                            const char *body, size_t body_len,
                                            uint64_t now_s,
                                            hub_rest_answer_fn *answer,
                                            void *ctx,
                                            struct hub_rest_response *out)
{
    struct hub_rest_call call = { answer, ctx, NULL, false };

    return dispatch(l, method, path, query, body, body_len, now_s, call, out);
}

void hub_rest_handle_nowait(struct hub_loop *l, enum hub_http_method method,
                            const char *path, const char *query,
                            const char *body, size_t body_len, uint64_t now_s,
                            struct hub_rest_response *out)
{
    struct hub_rest_call call = { NULL, NULL, NULL, true };
    struct hub_rest_wait *w = dispatch(l, method, path, query, body,
                                       body_len, now_s, call, out);

    assert(!w);
    (void)w;
}
