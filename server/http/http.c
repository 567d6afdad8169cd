/*
 * server/http/http.c - plain HTTP on the hub's port: lws's HTTP callback
 * (srv_http_callback(), one function per callback reason), the routes of
 * a request, and the loop's queue of POSTs answered after lws's read
 * pass. The routes: the operator surfaces first (/stats, /metrics,
 * /console: server/ops/ops.c), the Pusher REST API under /apps/
 * (server/http/rest.c), the development auth endpoint
 * (server/http/dev_auth.c), /healthz, /readyz, the test-only /test/stall,
 * and the static web pages (/ and /dashboard: server/http/files.c).
 * Unknown paths get a prompt 404. The checks before lws answers (431,
 * and a WebSocket upgrade's 400/403/426/503) are server/http/headers.c
 * and server/http/upgrade.c.
 *
 * Responses are built whole in memory and written at once
 * (server/http/request.c), and the connection stays open for keep-alive
 * unless the request sent "Connection: close". A POST with a body is
 * answered outside lws's read path, from the loop's answer queue once the
 * read pass is over (srv_http_post_flush()) or from HTTP_WRITEABLE, and a
 * connection that sent anything behind a POST body before its answer is
 * closed after it (srv_http_post_*() in server/base/http_post.c: the lws
 * 4.1.6 trap). A request's body is held up to HUB_REST_MAX_BODY (a POST
 * announcing more is answered 413 before its body is read, and closed).
 *
 * Thread: the connection's loop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/wire/ws.h"
#include "server/base/http_post.h"
#include "server/http/dev_auth.h"
#include "server/http/files.h"
#include "server/http/headers.h"
#include "server/http/request.h"
#include "server/http/rest.h"

size_t srv_http_pss_size(void)
{
    return sizeof(struct http_pss);
}

/*
 * A request's routes, in order (the file's opening comment lists them):
 * 0, -1 to close, or SRV_HTTP_DEFERRED when its answer comes later. May
 * free p: a response written whole completes the transaction.
 */
static int handle_request(struct lws *wsi, struct srv_loop *l,
                          struct http_req *p)
{
    const char *path = p->path;
    int rc;

    /* Operator surfaces first (server/ops/ops.c): /metrics, /stats, /console,
     * and everything on the metrics port. */
    p->answered = true; /* as srv_http_respond(): answering may free p */
    /* A POST there (a 404) closes after its answer: srv_ops_respond()
     * would finish the transaction inside lws's read path. */
    if (srv_ops_route(wsi, l, path, p->post, p->too_big ? NULL : p->body,
                      p->too_big ? 0 : p->body_len, p->close || p->post,
                      &rc))
        return rc;
    p->answered = false;
    if (strncmp(path, "/apps/", 6) == 0)
        return srv_http_rest(wsi, l, p);
    if (strcmp(path, "/auth") == 0 && p->post && l->srv->cfg->dev_auth_endpoint)
        return srv_http_dev_auth(wsi, l, p);
    if (p->post)
        return srv_http_respond_json_error(wsi, p, 404, "not found");
    if (strcmp(path, "/healthz") == 0)
        return srv_http_respond_text(wsi, p, 200, "ok\n");
    if (strcmp(path, "/readyz") == 0) {
        /* Draining, not joined yet, degraded: server/ops/ops.c. */
        char body[SRV_READYZ_BODY_MAX];
        unsigned st = srv_ops_readyz(l->srv, body, sizeof(body));

        return srv_http_respond_text(wsi, p, st, body);
    }
    if (l->srv->test_stall_ms && strcmp(path, "/test/stall") == 0) {
        /* Test only: a 404 like any unknown path unless
         * LUBDUB_TEST_STALL_MS was set at start (server/main.c). */
        char q[64];
        const char *v;

        srv_http_read_query(wsi, q, sizeof(q));
        v = strstr(q, "loop=");
        if (!v || !srv_test_stall_arm(l->srv, (unsigned)atoi(v + 5)))
            return srv_http_respond_json_error(wsi, p, 400,
                                               "loop=N, N a loop id");
        return srv_http_respond_text(wsi, p, 200, "armed\n");
    }
    return srv_http_files_serve(wsi, l, p, path);
}

/* handle_request()'s result as a callback's: 0, or -1 to close (a
 * deferred answer keeps the connection). */
static int cb_rc(int rc)
{
    return rc < 0 ? -1 : 0;
}

/*
 * The loop's queued POSTs, answered after lws's read pass and before it
 * polls again (server/base/http_post.h): outside any lws callback, so lws has
 * already moved bytes read past each body to its buffer list, where
 * srv_http_post_rx_pending() sees them, and it reads nothing more before
 * the answer is out (a client's FIN right behind its request cannot close
 * the connection first).
 */
void srv_http_post_flush(struct srv_loop *l)
{
    struct srv_http_postq *q = &l->postq;
    struct srv_http_post *pp;

    while ((pp = srv_http_postq_pop(q))) {
        struct http_req *p = hub_container_of(pp, struct http_req,
                                              post_state);
        struct lws *wsi = p->wsi;
        bool gone;
        void *was;
        int rc;

        if (p->answered || p->wait || pp->phase != SRV_HTTP_POST_PENDING) {
            p->loop_q = NULL;
            continue;
        }
        if (srv_http_post_rx_pending(wsi)) {
            /*
             * Input that lws read and has not parsed, maybe behind this
             * body: never answer with keep-alive over it. As before the
             * queue: HTTP_WRITEABLE answers, or the second BODY_COMPLETION
             * of those bytes closes; a client already gone half-closed is
             * answered now and closed (lws would read its FIN first).
             */
            if (!srv_http_post_peer_done(wsi)) {
                p->loop_q = NULL;
                lws_callback_on_writable(wsi);
                continue;
            }
            HUB_STAT_ADD(l->hub->stats.http_post_closes, 1);
            p->close = true;
        }
        (void)srv_http_post_writeable(pp); /* PENDING -> DONE */
        q->cur = pp;
        q->cur_gone = false;
        /* May free p: a completed keep-alive transaction drops it (its
         * srv_http_req_free() then sets cur_gone, p->loop_q still being set).
         * Outside any callback: what it logs is this client's. */
        was = hub_log_conn_swap(wsi);
        rc = handle_request(wsi, l, p);
        hub_log_conn_swap(was);
        gone = q->cur_gone;
        q->cur = NULL;
        if (!gone)
            p->loop_q = NULL;
        if (rc < 0) {
            /* Outside a callback: lws closes it from its own service. */
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
            continue;
        }
        /* Answered whole, transaction completed (the request was dropped
         * with it): back to lws, ready for the next request. */
        if (rc == 0 && gone && !lws_partial_buffered(wsi))
            srv_http_post_resume(wsi, l->evl);
    }
}

/*
 * A POST's headers are in: refuse a body over HUB_REST_MAX_BODY (413) or
 * without Content-Length (411) before reading it, answer one without a
 * body now, else wait for the body (HTTP_BODY, HTTP_BODY_COMPLETION).
 */
static int post_start(struct lws *wsi, struct srv_loop *l, struct http_req *p)
{
    char cl[32];
    int cl_len = lws_hdr_copy(wsi, cl, sizeof(cl),
                              WSI_TOKEN_HTTP_CONTENT_LENGTH);
    unsigned long long want = cl_len > 0 ? strtoull(cl, NULL, 10) : 0;

    /* Answered before its body is read: close after. */
    p->close = p->close || want > HUB_REST_MAX_BODY;
    if (want > HUB_REST_MAX_BODY)
        return srv_http_respond_json_error(wsi, p, 413,
                                           "request body too large")
                   ? -1
                   : 0;
    /*
     * A chunked body (no Content-Length) is not read by this
     * handler: answering early would leave the chunks on a
     * keep-alive connection as the next "request". Every Pusher
     * SDK sends Content-Length, so refuse and close.
     */
    if (lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH) <= 0 &&
        lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING) > 0) {
        p->close = true;
        return srv_http_respond_json_error(wsi, p, 411,
                                           "Content-Length required")
                   ? -1
                   : 0;
    }
    if (want == 0) {
        /* lws would still call BODY_COMPLETION after this
         * answer: close, as before keep-alive for POST. */
        p->close = true;
        return cb_rc(handle_request(wsi, l, p));
    }
    return 0; /* The body follows. */
}

/* LWS_CALLBACK_HTTP: a request's headers are in (in: its path). */
static int on_http(struct lws *wsi, struct http_pss *ps, const char *in)
{
    struct srv_loop *l = srv_loop_of(wsi);
    struct http_req *p;
    char conn[128];
    size_t conn_len;

    /* Each request of a keep-alive connection names its own client
     * (a proxy may carry many over one); lws zeroes the storage
     * between requests. */
    srv_peer_note(wsi);
    srv_http_req_free(ps);
    p = ps->req = calloc(1, sizeof(*p));
    if (!p)
        return -1;
    snprintf(p->path, sizeof(p->path), "%s", in ? in : "/");
    srv_http_read_query(wsi, p->query, sizeof(p->query));
    p->post = lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI) > 0;
    p->close = srv_http_hdr_value(wsi, WSI_TOKEN_CONNECTION, conn,
                                  sizeof(conn), &conn_len) &&
               hub_ws_list_has_token(conn, conn_len, "close");
    if (p->post)
        return post_start(wsi, l, p);
    return cb_rc(handle_request(wsi, l, p));
}

/* LWS_CALLBACK_HTTP_BODY: a piece of a POST's body, kept up to
 * HUB_REST_MAX_BODY (then only marked too big: 413 at completion). */
static int on_body(struct http_pss *ps, const char *in, size_t len)
{
    struct http_req *p = ps->req;

    if (!p || p->too_big)
        return 0;
    if (p->body_len + len > HUB_REST_MAX_BODY) {
        p->too_big = true;
        return 0;
    }
    if (p->body_len + len + 1 > p->body_cap) {
        size_t cap = (p->body_len + len + 1) * 2;
        char *b = realloc(p->body, cap);

        if (!b)
            return -1;
        p->body = b;
        p->body_cap = cap;
    }
    memcpy(p->body + p->body_len, in, len);
    p->body_len += len;
    p->body[p->body_len] = '\0';
    return 0;
}

/* LWS_CALLBACK_HTTP_BODY_COMPLETION: the body is in, or bytes came
 * behind it (server/base/http_post.h says which). */
static int on_body_completion(struct lws *wsi, struct http_pss *ps)
{
    struct http_req *p = ps->req;
    struct srv_loop *l;

    if (!p)
        return -1;
    switch (srv_http_post_body_complete(&p->post_state, p->answered)) {
    case SRV_HTTP_POST_WAIT:
        if (p->close) {
            /* The connection ends after this answer anyway (the
             * client asked): answer now, as before keep-alive for
             * POST, and close. Deferred: the answer, written from
             * HTTP_WRITEABLE, closes (a FIN read first closes
             * unanswered). */
            if (handle_request(wsi, srv_loop_of(wsi), p) == SRV_HTTP_DEFERRED)
                return 0;
            return -1;
        }
        /* Answered once this read pass is over: the loop's queue. */
        l = srv_loop_of(wsi);
        p->wsi = wsi;
        p->loop_q = l;
        srv_http_postq_add(&l->postq, &p->post_state);
        return 0;
    case SRV_HTTP_POST_ANSWER_CLOSE:
        /* Bytes behind the body: answer it now and close. */
        l = srv_loop_of(wsi);
        HUB_STAT_ADD(l->hub->stats.http_post_closes, 1);
        p->close = true;
        /* lws must not go on re-feeding those bytes, so this answer
         * cannot wait for the directory: a request that would (info=
         * in a cluster) is refused with 400 and not published
         * (docs/LWS.md). */
        p->nowait = true;
        (void)handle_request(wsi, l, p);
        return -1;
    default:
        /* Bytes behind a POST body whose answer waits for the
         * directory (it began at HTTP_WRITEABLE): the connection must
         * close now, so the POST is refused and not published, as
         * above, or its answer, already in, is written. */
        if (p->wait || p->later_ready)
            srv_http_rest_close_early(wsi, srv_loop_of(wsi), p);
        return -1;
    }
}

/* LWS_CALLBACK_HTTP_WRITEABLE: a complete POST body waits for its answer
 * here, and a REST answer that the directory made later; every other
 * response was written whole by srv_http_respond(). */
static int on_writeable(struct lws *wsi, struct http_pss *ps)
{
    struct http_req *p = ps->req;
    struct srv_loop *l;

    if (p && p->later_ready)
        return srv_http_rest_write_later(wsi, srv_loop_of(wsi), p);
    if (p && !p->answered && !p->wait &&
        srv_http_post_writeable(&p->post_state)) {
        l = srv_loop_of(wsi);
        if (!p->close && srv_http_post_rx_pending(wsi)) {
            /* Maybe bytes behind the body: never parse them. */
            HUB_STAT_ADD(l->hub->stats.http_post_closes, 1);
            p->close = true;
        }
        return cb_rc(handle_request(wsi, l, p));
    }
    return 0;
}

int srv_http_callback(struct lws *wsi, enum lws_callback_reasons reason,
                      void *user, void *in, size_t len)
{
    struct http_pss *ps = user;

    /* lws calls some HTTP reasons before (or without) binding storage. */
    if (!ps)
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    switch (reason) {
    case LWS_CALLBACK_HTTP:
        return on_http(wsi, ps, in);
    case LWS_CALLBACK_HTTP_BODY:
        return on_body(ps, in, len);
    case LWS_CALLBACK_HTTP_BODY_COMPLETION:
        return on_body_completion(wsi, ps);
    case LWS_CALLBACK_HTTP_WRITEABLE:
        return on_writeable(wsi, ps);
    case LWS_CALLBACK_CLOSED_HTTP:
    case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
        /* lws drops (and frees) the storage at the end of a keep-alive
         * transaction too, without CLOSED_HTTP: free the request here. */
        srv_http_req_free(ps);
        return 0;
    default:
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    }
}
