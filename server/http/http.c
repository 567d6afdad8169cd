/*
 * server/http/http.c - plain HTTP on the hub's port: the Pusher REST API under
 * /apps/, /healthz, /readyz, the development auth endpoint, and the
 * static web pages (/ and /dashboard); /stats, /metrics and /console go
 * to server/ops/ops.c first.
 *
 * Responses are built whole in memory and written at once, headers and
 * body together, and the connection stays open for keep-alive unless the
 * request sent "Connection: close" (respond()). A POST with a body is
 * answered outside lws's read path, from the loop's answer queue once the
 * read pass is over (srv_http_post_flush()) or from HTTP_WRITEABLE, and a
 * connection that sent anything behind a POST body before its answer is
 * closed after it (srv_http_post_*() in server/base/http_post.c: the lws 4.1.6
 * trap).
 * Unknown paths get a prompt 404. Before the handshake, RFC 6455 upgrade
 * checks answer 426/400 and an over-long header 431 (refuse()).
 *
 * Deferred answers: with a directory whose reads answer later (a cluster
 * directory), a REST read waits (hub_rest_handle_async()); its answer is
 * kept in the request and written from HTTP_WRITEABLE. A connection that
 * closes first cancels the wait (req_free()), so the answer is dropped and
 * nothing touches the gone request or wsi. lws 4.1.6 reads nothing of a
 * connection whose GET is waiting (LRS_DOING_TRANSACTION), so it would
 * learn of a client that left only when the answer is written, and its
 * POLLIN would spin the loop meanwhile: a waiting GET stops POLLIN and is
 * probed instead (defer_probe(): a peek on its socket every
 * SRV_DEFER_PROBE_MS), and a client seen gone (FIN or reset) is forgotten
 * at once and its connection closed.
 *
 * Thread: the connection's loop.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "hub/app/auth.h"
#include "hub/wire/protocol.h"
#include "hub/base/query.h"
#include "hub/rest/rest.h"
#include "hub/wire/ws.h"
#include "server/base/http_post.h"
#include "server/lws/srv.h"

/* Header budget (server/lws/srv.h): every header token is capped, the
 * request line's are not. Filled once before the contexts are created. */
static struct lws_token_limits token_limits;

static bool request_line_token(int t)
{
    switch (t) {
    case WSI_TOKEN_GET_URI:
    case WSI_TOKEN_POST_URI:
    case WSI_TOKEN_OPTIONS_URI:
    case WSI_TOKEN_HEAD_URI:
    case WSI_TOKEN_PUT_URI:
    case WSI_TOKEN_PATCH_URI:
    case WSI_TOKEN_DELETE_URI:
    case WSI_TOKEN_CONNECT:
    case WSI_TOKEN_HTTP_COLON_PATH:
    case WSI_TOKEN_HTTP_URI_ARGS:
        return true;
    default:
        return false;
    }
}

unsigned srv_header_limit_of(int t)
{
    return t >= 0 && t < WSI_TOKEN_COUNT ? token_limits.token_limit[t] : 0;
}

const struct lws_token_limits *srv_http_token_limits(void)
{
    for (int t = 0; t < WSI_TOKEN_COUNT; t++)
        token_limits.token_limit[t] =
            request_line_token(t) ? 0 : SRV_HEADER_ONE_MAX;
    return &token_limits;
}

/*
 * Per-connection storage is shared with WebSocket sessions (lws allocates
 * one size for the protocol), so the HTTP side keeps only pointers there:
 * idle WebSocket connections must not pay for request buffers.
 */
struct http_req {
    char *body;                  /* request body (REST, auth) */
    size_t body_len, body_cap;
    bool post;
    bool close;                  /* answer with "Connection: close", then close */
    bool too_big;
    bool answered;               /* the response is written */
    uint32_t retry_after;        /* 429: the Retry-After seconds; 0 = none */
    struct srv_http_post post_state; /* body completion (server/base/http_post.h) */
    /* A REST answer the directory makes later: the wait (cancelled when
     * the request goes), then the answer until HTTP_WRITEABLE writes it. */
    struct lws *wsi;
    struct hub_rest_wait *wait;
    struct hub_rest_response later;
    bool later_ready;
    struct srv_loop *loop_q;     /* a POST queued for its answer */
    struct srv_loop *loop;       /* a probed GET: its loop's wheel */
    struct hub_timer probe;      /* armed while a GET waits */
    bool rx_off;                 /* POLLIN stopped while it waits */
    bool nowait;                 /* answer now or refuse: never defer */
    char path[512];
    char query[HUB_QUERY_MAX_BYTES];
};

struct http_pss {
    struct http_req *req;        /* owned; NULL between requests */
};

size_t srv_http_pss_size(void)
{
    return sizeof(struct http_pss);
}

static struct srv_loop *loop_of(struct lws *wsi)
{
    return lws_context_user(lws_get_context(wsi));
}

/* A waiting GET's probe is over (answered, or the request goes). */
static void defer_probe_stop(struct http_req *p)
{
    if (p->loop)
        hub_wheel_stop(p->loop->hub->wheel, &p->probe);
    p->loop = NULL;
    if (p->rx_off) {
        p->rx_off = false;
        lws_rx_flow_control(p->wsi, 1);
    }
}

static void req_free(struct http_pss *ps)
{
    if (!ps->req)
        return;
    if (ps->req->loop_q)
        srv_http_postq_remove(&ps->req->loop_q->postq,
                              &ps->req->post_state);
    if (ps->req->loop)
        hub_wheel_stop(ps->req->loop->hub->wheel, &ps->req->probe);
    if (ps->req->wait)
        hub_rest_wait_cancel(ps->req->wait);
    free(ps->req->later.body);
    free(ps->req->body);
    free(ps->req);
    ps->req = NULL;
}

/*
 * Send the whole response (headers and body in one lws_write) and finish
 * the transaction, so the connection is ready for its next keep-alive
 * request. Writing outside HTTP_WRITEABLE is fine for HTTP/1.1 here: lws
 * keeps what the socket does not take and flushes it before anything else.
 *
 * A POST with a body is not answered here from inside lws's read path
 * (see server/base/http_post.h for why and for the close after pipelined
 * bytes). A request that asked for "Connection: close" (RFC 9112 9.6), or
 * one whose connection must close, gets the option in the answer, then
 * the close.
 * Returns -1 when the connection must close.
 */
static int respond(struct lws *wsi, struct http_req *p, unsigned status,
                   const char *ctype, const char *body, size_t len)
{
    const char *hdrs[5] = { "access-control-allow-origin:", "*", NULL };
    char ra[16];

    p->answered = true;
    if (p->retry_after) {
        snprintf(ra, sizeof(ra), "%u", (unsigned)p->retry_after);
        hdrs[2] = "retry-after:";
        hdrs[3] = ra;
        hdrs[4] = NULL;
    }
    /* The one writer of a whole response (server/ops/ops_http.c), with the
     * CORS header the REST and page routes send and a 429's Retry-After. */
    return srv_http_reply(wsi, status, ctype, body, len, p->close, hdrs);
}

static int respond_text(struct lws *wsi, struct http_req *p, unsigned status,
                        const char *text)
{
    return respond(wsi, p, status, "text/plain; charset=utf-8", text,
                   strlen(text));
}

static int respond_json_error(struct lws *wsi, struct http_req *p,
                              unsigned status, const char *msg)
{
    char buf[512];
    size_t n = hub_proto_encode_string(buf + 9, sizeof(buf) - 12, msg,
                                       strlen(msg));

    if (n >= sizeof(buf) - 12)
        return respond_text(wsi, p, status, msg);
    memcpy(buf, "{\"error\":", 9);
    buf[9 + n] = '}';
    return respond(wsi, p, status, "application/json", buf, 10 + n);
}

static void read_query(struct lws *wsi, char *out, size_t cap)
{
    size_t used = 0;
    char frag[1024];
    int n;

    out[0] = '\0';
    for (int i = 0;
         (n = lws_hdr_copy_fragment(wsi, frag, sizeof(frag),
                                    WSI_TOKEN_HTTP_URI_ARGS, i)) > 0;
         i++) {
        if (used + (size_t)n + 2 > cap)
            break;
        if (used)
            out[used++] = '&';
        memcpy(out + used, frag, (size_t)n);
        used += (size_t)n;
        out[used] = '\0';
    }
}

/* Static files: a fixed charset and no "..", under web_root. */
static int serve_static(struct lws *wsi, struct srv_loop *l,
                        struct http_req *p, const char *path)
{
    char file[1024];
    const char *mime = "application/octet-stream", *ext;
    struct stat st;

    if (strcmp(path, "/") == 0)
        path = "/index.html";
    else if (strcmp(path, "/dashboard") == 0 || strcmp(path, "/dashboard/") == 0)
        path = "/dashboard.html";
    if (strstr(path, "..") || strspn(path + 1,
                                     "abcdefghijklmnopqrstuvwxyz"
                                     "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                     "._-/") != strlen(path + 1))
        return respond_json_error(wsi, p, 404, "not found");
    snprintf(file, sizeof(file), "%s%s", l->srv->cfg->web_root, path);
    if (stat(file, &st) || !S_ISREG(st.st_mode))
        return respond_json_error(wsi, p, 404, "not found");
    ext = strrchr(path, '.');
    if (ext) {
        if (!strcmp(ext, ".html"))
            mime = "text/html; charset=utf-8";
        else if (!strcmp(ext, ".js") || !strcmp(ext, ".mjs"))
            mime = "text/javascript; charset=utf-8";
        else if (!strcmp(ext, ".css"))
            mime = "text/css; charset=utf-8";
        else if (!strcmp(ext, ".svg"))
            mime = "image/svg+xml";
        else if (!strcmp(ext, ".png"))
            mime = "image/png";
        else if (!strcmp(ext, ".json"))
            mime = "application/json";
        else if (!strcmp(ext, ".ico"))
            mime = "image/x-icon";
    }
    if (lws_serve_http_file(wsi, file, mime, NULL, 0))
        return -1;
    return 0;
}

/*
 * Development auth endpoint (make run's config only): signs private and
 * presence subscriptions with the first app's secret, as an app server
 * would. Form fields: socket_id, channel_name, optional user_id, user_name.
 */
static int dev_auth(struct lws *wsi, struct srv_loop *l, struct http_req *p)
{
    const struct hub_apptab *tab = hub_apps(l->srv->hub);
    const struct hub_app *app = NULL;
    struct hub_query *q;

    /* The first app of the current table (a reload may remove apps). */
    for (unsigned i = 0; !app && i < tab->n; i++)
        app = tab->apps[i];
    q = app ? malloc(sizeof(*q)) : NULL;
    const char *sid, *ch, *uid, *uname;
    char sig[HUB_SHA256_HEX_LEN + 1], *tosign = NULL, *cd = NULL;
    json_t *resp;
    char *text;
    int rc;

    if (!q)
        return -1;
    if (hub_query_parse(q, p->body ? p->body : "", p->body_len)) {
        free(q);
        return respond_json_error(wsi, p, 400, "bad form body");
    }
    sid = hub_query_find(q, "socket_id");
    ch = hub_query_find(q, "channel_name");
    if (!sid || !ch || hub_channel_name_check(ch, strlen(ch), 200)) {
        free(q);
        return respond_json_error(wsi, p, 400,
                                  "socket_id and channel_name are required");
    }
    if (hub_channel_classify(ch, strlen(ch)) == HUB_CHANNEL_PRESENCE) {
        char gen[32];
        json_t *o;

        uid = hub_query_find(q, "user_id");
        uname = hub_query_find(q, "user_name");
        if (!uid || !*uid) {
            snprintf(gen, sizeof(gen), "user-%s", sid);
            uid = gen;
        }
        o = json_pack("{s:s,s:{s:s}}", "user_id", uid, "user_info", "name",
                      uname && *uname ? uname : uid);
        cd = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!cd) {
            free(q);
            return -1;
        }
        rc = asprintf(&tosign, "%s:%s:%s", sid, ch, cd);
    } else {
        rc = asprintf(&tosign, "%s:%s", sid, ch);
    }
    if (rc < 0) {
        free(cd);
        free(q);
        return -1;
    }
    hub_auth_hmac_hex(app->secret, strlen(app->secret), tosign, strlen(tosign),
                      sig);
    free(tosign);
    free(q);
    resp = json_object();
    {
        char auth[512];

        snprintf(auth, sizeof(auth), "%s:%s", app->key, sig);
        json_object_set_new(resp, "auth", json_string(auth));
    }
    if (cd)
        json_object_set_new(resp, "channel_data", json_string(cd));
    free(cd);
    text = json_dumps(resp, JSON_COMPACT);
    json_decref(resp);
    if (!text)
        return -1;
    rc = respond(wsi, p, 200, "application/json", text, strlen(text));
    free(text);
    return rc;
}

/* handle_request(): the answer comes later (rest_answer()). */
#define HTTP_DEFERRED 1

/* A waiting REST request's answer (hub/rest/rest.h), on the loop's thread: kept
 * until HTTP_WRITEABLE. p and its wsi are alive: req_free() cancels. */
static void rest_answer(void *ctx, struct hub_rest_response *r)
{
    struct http_req *p = ctx;

    p->wait = NULL;
    defer_probe_stop(p);
    p->later = *r;
    p->later_ready = true;
    lws_callback_on_writable(p->wsi);
}

/* HTTP_WRITEABLE with the answer in: write it (a POST closes after it
 * when lws holds unparsed input, as srv_http_post_rx_pending() says). */
static int write_later(struct lws *wsi, struct srv_loop *l, struct http_req *p)
{
    struct hub_rest_response r = p->later;
    int rc;

    p->later_ready = false;
    memset(&p->later, 0, sizeof(p->later));
    if (p->post && !p->close && srv_http_post_rx_pending(wsi)) {
        HUB_STAT_ADD(l->hub->stats.http_post_closes, 1);
        p->close = true;
    }
    p->retry_after = r.status == 429 ? r.retry_after_s : 0;
    rc = respond(wsi, p, (unsigned)r.status, "application/json",
                 r.body ? r.body : "{}", r.body ? r.len : 2);
    free(r.body);
    return rc;
}

/* How often a waiting GET's socket is peeked at (ms). */
#define SRV_DEFER_PROBE_MS 100

/* A waiting GET: has its client gone? A FIN or an error on the socket
 * (bytes, a pipelined request, leave it waiting). Gone: the answer is
 * forgotten now (counted in rest_answers_dropped) and lws closes the
 * connection from its own service, outside this timer. */
static void defer_probe(struct hub_timer *t, uint64_t now_ms)
{
    struct http_req *p = hub_container_of(t, struct http_req, probe);
    int fd = lws_get_socket_fd(p->wsi);
    char c;
    ssize_t n = fd >= 0 ? recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) : 0;

    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                   errno != EINTR)) {
        if (p->wait)
            hub_rest_wait_cancel(p->wait);
        p->wait = NULL;
        p->loop = NULL;
        lws_set_timeout(p->wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
        return;
    }
    hub_wheel_start(p->loop->hub->wheel, &p->probe, now_ms,
                    SRV_DEFER_PROBE_MS);
}

/* A GET starts waiting: no POLLIN until its answer, a probe instead. */
static void defer_probe_start(struct srv_loop *l, struct http_req *p)
{
    hub_timer_init(&p->probe, defer_probe);
    if (hub_wheel_start(l->hub->wheel, &p->probe,
                        hub_clock_now_ms(l->hub->clock), SRV_DEFER_PROBE_MS))
        return;
    p->loop = l;
    if (!lws_rx_flow_control(p->wsi, 0))
        p->rx_off = true;
}

static int handle_rest(struct lws *wsi, struct srv_loop *l, struct http_req *p)
{
    struct hub_rest_response r;
    int rc;

    if (p->too_big)
        return respond_json_error(wsi, p, 413, "request body too large");
    p->wsi = wsi;
    if (p->nowait) {
        /* The connection closes after this answer (a request pipelined
         * behind the body): one that would wait for the directory is
         * refused, unpublished, rather than published unanswered. */
        hub_rest_handle_nowait(l->hub, p->post ? HUB_HTTP_POST : HUB_HTTP_GET,
                               p->path, p->query,
                               p->body ? p->body : "", p->body_len,
                               (uint64_t)time(NULL), &r);
        p->retry_after = r.status == 429 ? r.retry_after_s : 0;
        rc = respond(wsi, p, (unsigned)r.status, "application/json",
                     r.body ? r.body : "{}", r.body ? r.len : 2);
        free(r.body);
        return rc;
    }
    p->wait = hub_rest_handle_async(
        l->hub, p->post ? HUB_HTTP_POST : HUB_HTTP_GET, p->path, p->query,
        p->body ? p->body : "", p->body_len, (uint64_t)time(NULL),
        rest_answer, p, &r);
    if (p->wait) {
        if (!p->post)
            defer_probe_start(l, p);
        return HTTP_DEFERRED;
    }
    p->retry_after = r.status == 429 ? r.retry_after_s : 0;
    rc = respond(wsi, p, (unsigned)r.status, "application/json",
                 r.body ? r.body : "{}", r.body ? r.len : 2);
    free(r.body);
    return rc;
}

static int handle_request(struct lws *wsi, struct srv_loop *l,
                          struct http_req *p)
{
    const char *path = p->path;
    int rc;

    /* Operator surfaces first (server/ops/ops.c): /metrics, /stats, /console,
     * and everything on the metrics port. */
    p->answered = true; /* as respond(): answering may free p */
    /* A POST there (a 404) closes after its answer: srv_ops_respond()
     * would finish the transaction inside lws's read path. */
    if (srv_ops_route(wsi, l, path, p->post, p->close || p->post, &rc))
        return rc;
    p->answered = false;
    if (strncmp(path, "/apps/", 6) == 0)
        return handle_rest(wsi, l, p);
    if (strcmp(path, "/auth") == 0 && p->post && l->srv->cfg->dev_auth_endpoint)
        return dev_auth(wsi, l, p);
    if (p->post)
        return respond_json_error(wsi, p, 404, "not found");
    if (strcmp(path, "/healthz") == 0)
        return respond_text(wsi, p, 200, "ok\n");
    if (strcmp(path, "/readyz") == 0) {
        const char *bp = srv_cluster_state(l->srv);

        if (atomic_load(&l->srv->hub->draining))
            return respond_text(wsi, p, 503, "draining\n");
        /* Redis down: still ready, the node serves its own clients
         * (docs/SCALING.md: one Redis outage must not empty the pool). */
        if (bp && strcmp(bp, "down") == 0)
            return respond_text(wsi, p, 200, "ready; backplane down\n");
        return respond_text(wsi, p, 200, "ready\n");
    }
    if (l->srv->test_stall_ms && strcmp(path, "/test/stall") == 0) {
        /* Test only: a 404 like any unknown path unless
         * LUBDUB_TEST_STALL_MS was set at start (server/main.c). */
        char q[64];
        const char *v;

        read_query(wsi, q, sizeof(q));
        v = strstr(q, "loop=");
        if (!v || !srv_test_stall_arm(l->srv, (unsigned)atoi(v + 5)))
            return respond_json_error(wsi, p, 400, "loop=N, N a loop id");
        return respond_text(wsi, p, 200, "armed\n");
    }
    return serve_static(wsi, l, p, path);
}

/* handle_request()'s result as a callback's: 0, or -1 to close (a
 * deferred answer keeps the connection). */
static int cb_rc(int rc)
{
    return rc < 0 ? -1 : 0;
}

/*
 * Refuse a request before lws answers it: a whole response (status line,
 * Connection: close, a one-line text body) written in one go. The caller
 * then returns non-zero and lws closes the connection after flushing it.
 * extra_name (with its colon) / extra_value add one header, or NULL.
 */
static int refuse(struct lws *wsi, struct srv_loop *l, unsigned status,
                  const char *phrase, const char *extra_name,
                  const char *extra_value)
{
    unsigned char buf[LWS_PRE + 1024], *start = buf + LWS_PRE, *p = start,
                  *end = buf + sizeof(buf) - 128;
    char line[64], body[96], clen[16];
    int n = snprintf(line, sizeof(line), "HTTP/1.1 %u %s", status, phrase);
    int blen = snprintf(body, sizeof(body), "%u %s\n", status, phrase);

    HUB_STAT_ADD(l->hub->stats.rejected_http, 1);
    snprintf(clen, sizeof(clen), "%d", blen);
    if (lws_add_http_header_by_name(wsi, NULL, (unsigned char *)line, n, &p,
                                    end) ||
        (extra_name &&
         lws_add_http_header_by_name(wsi, (unsigned char *)extra_name,
                                     (unsigned char *)extra_value,
                                     (int)strlen(extra_value), &p, end)) ||
        lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE,
                                     (unsigned char *)"text/plain; charset=utf-8",
                                     25, &p, end) ||
        lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH,
                                     (unsigned char *)clen, (int)strlen(clen),
                                     &p, end) ||
        lws_add_http_header_by_token(wsi, WSI_TOKEN_CONNECTION,
                                     (unsigned char *)"close", 5, &p, end) ||
        lws_finalize_http_header(wsi, &p, end))
        return -1;
    memcpy(p, body, (size_t)blen);
    p += blen;
    lws_write(wsi, start, (size_t)(p - start), LWS_WRITE_HTTP);
    return -1;
}

/*
 * lws stores each header in at most SRV_HEADER_ONE_MAX bytes (the token
 * limits set in srv_http_token_limits()) and drops the rest; a header at the limit
 * was therefore cut. Method tokens (the URI) have no such limit.
 */
static bool header_cut(struct lws *wsi)
{
    for (int t = 0; t < WSI_TOKEN_COUNT; t++)
        if (srv_header_limit_of(t) &&
            lws_hdr_total_length(wsi, (enum lws_token_indexes)t) >=
                (int)srv_header_limit_of(t))
            return true;
    return false;
}

static int refuse_too_big(struct lws *wsi, struct srv_loop *l)
{
    srv_log_peer(HUB_LOG_INFO, l->id,
                 "request refused: 431 a header over %u bytes",
                 SRV_HEADER_ONE_MAX - 1);
    return refuse(wsi, l, 431, "Request Header Fields Too Large", NULL, NULL);
}

int srv_http_filter_request(struct srv_loop *l, struct lws *wsi)
{
    return header_cut(wsi) ? refuse_too_big(wsi, l) : 0;
}

static bool hdr_value(struct lws *wsi, enum lws_token_indexes t, char *buf,
                      size_t cap, size_t *len)
{
    int n = lws_hdr_copy(wsi, buf, (int)cap, t);

    *len = n > 0 ? (size_t)n : 0;
    return n > 0;
}

/*
 * Sec-WebSocket-Protocol, before lws reads it. lws 4.1.6 binds the upgrade
 * to the first listed name that is any protocol of the vhost
 * (lws_process_ws_upgrade in lib/roles/ws/server-ws.c), the internal raw
 * ones ("acceptor", "metrics-acceptor") included, which would make a
 * WebSocket no hub code counts, pings or drains, on any path; and it
 * closes without a status when no name is one. The same walk here, with
 * lws's tokenizer, flags and buffer sizes, answers 400 instead when lws
 * would pick no protocol or an internal one (docs/LWS.md, "Subprotocol
 * names bind to any protocol of the vhost"). No header: lws binds the
 * vhost's default, "lubdub". The internal protocols' own
 * FILTER_PROTOCOL_CONNECTION refuses too, should the two walks differ.
 */
static int confirm_subprotocol(struct srv_loop *l, struct lws *wsi)
{
    const struct lws_protocols *pcol = NULL;
    char buf[128], name[64];
    struct lws_tokenize ts;
    lws_tokenize_elem e;
    int n = lws_hdr_copy(wsi, buf, sizeof(buf) - 1, WSI_TOKEN_PROTOCOL);

    if (n == 0)
        return 0;
    if (n > 0) {
        lws_tokenize_init(&ts, buf, LWS_TOKENIZE_F_COMMA_SEP_LIST |
                                        LWS_TOKENIZE_F_MINUS_NONTERM |
                                        LWS_TOKENIZE_F_DOT_NONTERM |
                                        LWS_TOKENIZE_F_RFC7230_DELIMS);
        ts.len = (size_t)n;
        do {
            e = lws_tokenize(&ts);
            if (e == LWS_TOKZE_TOKEN) {
                if (lws_tokenize_cstr(&ts, name, sizeof(name)))
                    break;
                pcol = lws_vhost_name_to_protocol(lws_get_vhost(wsi), name);
                if (pcol)
                    break;
            } else if (e != LWS_TOKZE_DELIMITER && e != LWS_TOKZE_ENDED) {
                break;
            }
        } while (e > 0);
    }
    if (pcol && !srv_protocol_internal(pcol))
        return 0;
    srv_log_peer(HUB_LOG_INFO, l->id,
                 "upgrade refused: 400 Sec-WebSocket-Protocol \"%s\" "
                 "names no protocol the hub offers",
                 n > 0 ? buf : "(over 127 bytes)");
    return refuse(wsi, l, 400, "Bad Request", NULL, NULL);
}

/*
 * RFC 6455 section 4.2.1 on a WebSocket upgrade, before lws answers it:
 * lws 4.1.6 accepts any Sec-WebSocket-Version as 13, any key, and closes
 * without a status when the key, Host or "Connection: upgrade" is
 * missing. 0 lets the upgrade go on.
 */
int srv_http_confirm_upgrade(struct srv_loop *l, struct lws *wsi,
                             const char *upgrade)
{
    char v[160];
    size_t n;

    if (!upgrade || strcasecmp(upgrade, "websocket") != 0)
        return 0;
    if (header_cut(wsi))
        return refuse_too_big(wsi, l);
    if (lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) <= 0) {
        srv_log_peer(HUB_LOG_INFO, l->id, "upgrade refused: 400 not a GET");
        return refuse(wsi, l, 400, "Bad Request", NULL, NULL);
    }
    if (!hdr_value(wsi, WSI_TOKEN_VERSION, v, sizeof(v), &n) ||
        !hub_ws_version_ok(v, n)) {
        srv_log_peer(HUB_LOG_INFO, l->id,
                     "upgrade refused: 426 Sec-WebSocket-Version \"%s\"",
                     n ? v : "");
        return refuse(wsi, l, 426, "Upgrade Required",
                      "sec-websocket-version:", "13");
    }
    if (lws_hdr_total_length(wsi, WSI_TOKEN_HOST) <= 0) {
        srv_log_peer(HUB_LOG_INFO, l->id, "upgrade refused: 400 no Host");
        return refuse(wsi, l, 400, "Bad Request", NULL, NULL);
    }
    if (!hdr_value(wsi, WSI_TOKEN_CONNECTION, v, sizeof(v), &n) ||
        !hub_ws_list_has_token(v, n, "upgrade")) {
        srv_log_peer(HUB_LOG_INFO, l->id,
                     "upgrade refused: 400 no \"Connection: upgrade\"");
        return refuse(wsi, l, 400, "Bad Request", NULL, NULL);
    }
    if (!hdr_value(wsi, WSI_TOKEN_KEY, v, sizeof(v), &n) ||
        !hub_ws_key_ok(v, n)) {
        srv_log_peer(HUB_LOG_INFO, l->id,
                     "upgrade refused: 400 Sec-WebSocket-Key \"%s\"",
                     n ? v : "");
        return refuse(wsi, l, 400, "Bad Request", NULL, NULL);
    }
    return confirm_subprotocol(l, wsi);
}

int srv_http_filter_upgrade(struct srv_loop *l, struct lws *wsi)
{
    const struct srv_config *cfg = l->srv->cfg;
    char uri[256], origin[256];
    int n = lws_hdr_copy(wsi, uri, sizeof(uri), WSI_TOKEN_GET_URI);
    uint32_t live = (uint32_t)atomic_load(&l->srv->hub->sessions);
    const struct hub_app *app;
    const char *list;
    bool own;

    if (n <= 5 || strncmp(uri, "/app/", 5) != 0) {
        lws_return_http_status(wsi, HTTP_STATUS_NOT_FOUND, NULL);
        return 1;
    }
    if (atomic_load(&l->srv->hub->draining) ||
        (cfg->max_connections && live >= cfg->max_connections)) {
        HUB_STAT_ADD(l->hub->stats.rejected_http, 1);
        srv_log_peer(HUB_LOG_WARN, l->id,
                     "upgrade refused: 503 (%u sessions, limit %u%s)", live,
                     cfg->max_connections,
                     atomic_load(&l->srv->hub->draining) ? ", draining" : "");
        lws_return_http_status(wsi, HTTP_STATUS_SERVICE_UNAVAILABLE, NULL);
        return 1;
    }
    /* The app's own allowed_origins, when it has one, instead of the
     * hub-wide list (issue 13 item 6); an unknown key gets the hub-wide
     * one here and 4001 once connected. */
    app = hub_apptab_by_key(hub_apps(l->srv->hub), uri + 5, (size_t)n - 5);
    own = app && app->allowed_origins;
    list = own ? app->allowed_origins : cfg->allowed_origins;
    if (list && *list) {
        const char *e;
        bool ok = false;
        size_t olen;

        n = lws_hdr_copy(wsi, origin, sizeof(origin), WSI_TOKEN_ORIGIN);
        olen = n > 0 ? (size_t)n : 0;
        while (olen && *list) {
            e = strchr(list, ',');
            size_t ilen = e ? (size_t)(e - list) : strlen(list);

            while (ilen && *list == ' ') {
                list++;
                ilen--;
            }
            if ((ilen == 1 && *list == '*') ||
                (ilen == olen && strncasecmp(list, origin, olen) == 0))
                ok = true;
            list = e ? e + 1 : list + ilen;
        }
        if (!ok) {
            HUB_STAT_ADD(l->hub->stats.rejected_http, 1);
            srv_log_peer(HUB_LOG_INFO, l->id,
                         "upgrade refused: 403 origin \"%s\" not allowed "
                         "by %s list%s%s",
                         olen ? origin : "",
                         own ? "the app's" : "the hub-wide",
                         own ? " of app " : "", own ? app->id : "");
            lws_return_http_status(wsi, HTTP_STATUS_FORBIDDEN, NULL);
            return 1;
        }
    }
    return 0;
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
         * req_free() then sets cur_gone, p->loop_q still being set).
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

int srv_http_callback(struct lws *wsi, enum lws_callback_reasons reason,
                      void *user, void *in, size_t len)
{
    struct http_pss *ps = user;
    struct http_req *p;
    struct srv_loop *l;

    /* lws calls some HTTP reasons before (or without) binding storage. */
    if (!ps)
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    switch (reason) {
    case LWS_CALLBACK_HTTP:
        l = loop_of(wsi);
        /* Each request of a keep-alive connection names its own client
         * (a proxy may carry many over one); lws zeroes the storage
         * between requests. */
        srv_peer_note(wsi);
        req_free(ps);
        p = ps->req = calloc(1, sizeof(*p));
        if (!p)
            return -1;
        snprintf(p->path, sizeof(p->path), "%s", in ? (const char *)in : "/");
        read_query(wsi, p->query, sizeof(p->query));
        p->post = lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI) > 0;
        {
            char conn[128];
            size_t conn_len;

            p->close = hdr_value(wsi, WSI_TOKEN_CONNECTION, conn,
                                 sizeof(conn), &conn_len) &&
                       hub_ws_list_has_token(conn, conn_len, "close");
        }
        if (p->post) {
            char cl[32];
            int cl_len = lws_hdr_copy(wsi, cl, sizeof(cl),
                                      WSI_TOKEN_HTTP_CONTENT_LENGTH);
            unsigned long long want = cl_len > 0 ? strtoull(cl, NULL, 10) : 0;

            /* Answered before its body is read: close after. */
            p->close = p->close || want > HUB_REST_MAX_BODY;
            if (want > HUB_REST_MAX_BODY)
                return respond_json_error(wsi, p, 413,
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
                lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING) >
                    0) {
                p->close = true;
                return respond_json_error(wsi, p, 411,
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
        return cb_rc(handle_request(wsi, l, p));
    case LWS_CALLBACK_HTTP_BODY:
        p = ps->req;
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
    case LWS_CALLBACK_HTTP_BODY_COMPLETION:
        if (!ps->req)
            return -1;
        switch (srv_http_post_body_complete(&ps->req->post_state,
                                            ps->req->answered)) {
        case SRV_HTTP_POST_WAIT:
            if (ps->req->close) {
                /* The connection ends after this answer anyway (the
                 * client asked): answer now, as before keep-alive for
                 * POST, and close. Deferred: the answer, written from
                 * HTTP_WRITEABLE, closes (a FIN read first closes
                 * unanswered). */
                if (handle_request(wsi, loop_of(wsi), ps->req) ==
                    HTTP_DEFERRED)
                    return 0;
                return -1;
            }
            /* Answered once this read pass is over: the loop's queue. */
            l = loop_of(wsi);
            ps->req->wsi = wsi;
            ps->req->loop_q = l;
            srv_http_postq_add(&l->postq, &ps->req->post_state);
            return 0;
        case SRV_HTTP_POST_ANSWER_CLOSE:
            /* Bytes behind the body: answer it now and close. */
            l = loop_of(wsi);
            HUB_STAT_ADD(l->hub->stats.http_post_closes, 1);
            ps->req->close = true;
            /* lws must not go on re-feeding those bytes, so this answer
             * cannot wait for the directory: a request that would (info=
             * in a cluster) is refused with 400 and not published
             * (docs/LWS.md). */
            ps->req->nowait = true;
            (void)handle_request(wsi, l, ps->req);
            return -1;
        default:
            /* Bytes behind a POST body whose answer waits for the
             * directory (it began at HTTP_WRITEABLE): the connection must
             * close now, so the POST is refused and not published, as
             * above, or its answer, already in, is written. */
            p = ps->req;
            if (p->wait || p->later_ready) {
                l = loop_of(wsi);
                HUB_STAT_ADD(l->hub->stats.http_post_closes, 1);
                p->close = true;
                if (p->later_ready) {
                    (void)write_later(wsi, l, p);
                } else {
                    struct hub_rest_response r;

                    defer_probe_stop(p);
                    hub_rest_wait_refuse(p->wait, &r);
                    p->wait = NULL;
                    p->retry_after = 0;
                    (void)respond(wsi, p, (unsigned)r.status,
                                  "application/json", r.body ? r.body : "{}",
                                  r.body ? r.len : 2);
                    free(r.body);
                }
            }
            return -1;
        }
    case LWS_CALLBACK_HTTP_WRITEABLE:
        /* A complete POST body waits for its answer here, and a REST
         * answer that the directory made later; every other response was
         * written whole by respond(). */
        if (ps->req && ps->req->later_ready)
            return write_later(wsi, loop_of(wsi), ps->req);
        if (ps->req && !ps->req->answered && !ps->req->wait &&
            srv_http_post_writeable(&ps->req->post_state)) {
            l = loop_of(wsi);
            if (!ps->req->close && srv_http_post_rx_pending(wsi)) {
                /* Maybe bytes behind the body: never parse them. */
                HUB_STAT_ADD(l->hub->stats.http_post_closes, 1);
                ps->req->close = true;
            }
            return cb_rc(handle_request(wsi, l, ps->req));
        }
        return 0;
    case LWS_CALLBACK_CLOSED_HTTP:
    case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
        /* lws drops (and frees) the storage at the end of a keep-alive
         * transaction too, without CLOSED_HTTP: free the request here. */
        req_free(ps);
        return 0;
    default:
        return lws_callback_http_dummy(wsi, reason, user, in, len);
    }
}
