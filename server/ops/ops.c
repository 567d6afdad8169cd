/*
 * server/ops/ops.c - the operator surfaces' routing: /metrics and /stats
 * (optionally behind --metrics-token, optionally moved to --metrics-port),
 * the metrics port's whole answer set, and /console (server/ops/console.c).
 *
 * Every HTTP request asks srv_ops_route() first. On the metrics vhost
 * (server/ops/ops_http.c) it serves /metrics, /stats, /healthz and /readyz,
 * the dashboard's four files (/dashboard, /dashboard.js, /charts.js,
 * /style.css: the page reads /stats from its own origin, so with
 * --metrics-port it is opened on the metrics port; docs/OPERATIONS.md,
 * "Dashboard and console") and a 404 for anything else, so no REST call,
 * WebSocket or other page is reachable there. On the main port /metrics and /stats are a 404 once they moved;
 * /healthz and /readyz stay on both ports (load balancers probe the
 * traffic port, orchestrators often the metrics one), both answered by
 * srv_ops_readyz().
 *
 * Thread: the connection's loop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/lws/srv.h"

static int unauthorized(struct lws *wsi, bool close)
{
    static const char body[] = "{\"error\":\"a bearer token is required\"}";

    return srv_ops_respond(wsi, 401, "application/json", body,
                           sizeof(body) - 1, close, "www-authenticate:",
                           "Bearer realm=\"lubdub\"");
}

static int not_found(struct lws *wsi, bool close)
{
    static const char body[] = "{\"error\":\"not found\"}";

    return srv_ops_respond(wsi, 404, "application/json", body,
                           sizeof(body) - 1, close, NULL, NULL);
}

static int serve_metrics(struct lws *wsi, struct srv_loop *l, bool stats,
                         bool close)
{
    char *text, tok[SRV_SECRET_TOKEN_MAX + 1];
    size_t len;
    bool ok;
    int rc, has;

    /* The token in force (a SIGHUP may have replaced it); one longer
     * than any token passes no check (has < 0). */
    has = srv_secret_copy(&l->srv->secrets.metrics_token, tok, sizeof(tok));
    ok = has >= 0 && srv_ops_bearer_ok(wsi, has ? tok : NULL);
    explicit_bzero(tok, sizeof(tok));
    if (!ok)
        return unauthorized(wsi, close);
    text = stats ? srv_stats_json(l->srv, &len)
                 : srv_metrics_text(l->srv, &len);
    if (!text)
        return -1;
    /* Open to any origin as before, unless a token guards them. */
    rc = srv_ops_respond(wsi, 200,
                         stats ? "application/json"
                               : "text/plain; version=0.0.4; charset=utf-8",
                         text, len, close,
                         has ? NULL : "access-control-allow-origin:", "*");
    free(text);
    return rc;
}

/*
 * The dashboard's files on the metrics port (srv_ops_route): the page and
 * what it loads, from the web root, nothing else. They hold no data (the
 * page asks for the metrics token itself), so they need none.
 */
static bool dashboard_file(struct lws *wsi, struct srv_loop *l,
                           const char *path, int *rc)
{
    static const struct {
        const char *path, *file, *mime;
    } files[] = {
        { "/dashboard", "dashboard.html", "text/html; charset=utf-8" },
        { "/dashboard/", "dashboard.html", "text/html; charset=utf-8" },
        { "/dashboard.js", "dashboard.js", "text/javascript; charset=utf-8" },
        { "/charts.js", "charts.js", "text/javascript; charset=utf-8" },
        { "/style.css", "style.css", "text/css; charset=utf-8" },
    };
    /* As the console's page: the token is typed here. */
    static const char extra[] = "x-frame-options: DENY\x0d\x0a"
                                "referrer-policy: no-referrer\x0d\x0a"
                                "x-content-type-options: nosniff\x0d\x0a"
                                "cache-control: no-store\x0d\x0a";
    char file[1024];

    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        if (strcmp(path, files[i].path))
            continue;
        snprintf(file, sizeof(file), "%s/%s", l->srv->cfg->web_root,
                 files[i].file);
        *rc = lws_serve_http_file(wsi, file, files[i].mime, extra,
                                  sizeof(extra) - 1)
                  ? -1
                  : 0;
        return true;
    }
    return false;
}

unsigned srv_ops_readyz(struct srv *srv, char *body, size_t cap)
{
    if (atomic_load(&srv->hub->draining)) {
        snprintf(body, cap, "draining\n");
        return 503;
    }
    return srv_redis_cluster_ready(srv, body, cap);
}

bool srv_ops_route(struct lws *wsi, struct srv_loop *l, const char *path,
                   bool post, const char *body, size_t body_len, bool close,
                   int *rc)
{
    bool stats = strcmp(path, "/stats") == 0;
    bool metrics = strcmp(path, "/metrics") == 0;

    if (srv_ops_is_metrics(wsi)) {
        if (post)
            *rc = not_found(wsi, close);
        else if (stats || metrics)
            *rc = serve_metrics(wsi, l, stats, close);
        else if (strcmp(path, "/healthz") == 0)
            *rc = srv_ops_respond(wsi, 200, "text/plain; charset=utf-8",
                                  "ok\n", 3, close, NULL, NULL);
        else if (strcmp(path, "/readyz") == 0) {
            char text[SRV_READYZ_BODY_MAX];
            unsigned st = srv_ops_readyz(l->srv, text, sizeof(text));

            *rc = srv_ops_respond(wsi, st, "text/plain; charset=utf-8", text,
                                  strlen(text), close, NULL, NULL);
        } else if (!dashboard_file(wsi, l, path, rc))
            *rc = not_found(wsi, close);
        return true;
    }
    /* The console's POSTs (publish, inspect); every other POST is the
     * REST API's or a 404. */
    if (post && strncmp(path, "/console/api/", 13) == 0) {
        *rc = srv_console_http(wsi, l, path, true, body, body_len, close);
        return true;
    }
    if (post)
        return false;
    if (stats || metrics) {
        /* Moved to --metrics-port: not here any more. */
        *rc = l->srv->cfg->metrics_port ? not_found(wsi, close)
                                        : serve_metrics(wsi, l, stats, close);
        return true;
    }
    if (strncmp(path, "/console", 8) == 0 &&
        (path[8] == '\0' || path[8] == '/')) {
        *rc = srv_console_http(wsi, l, path, false, NULL, 0, close);
        return true;
    }
    return false;
}

