/*
 * server/http/request.c - a plain HTTP request's end and its response
 * (server/http/request.h): freeing the request, the one writer of a whole
 * response (with the CORS header and a 429's Retry-After), its text and
 * JSON-error forms, and the query string read from lws.
 *
 * Responses are built whole in memory and written at once, headers and
 * body together, and the connection stays open for keep-alive unless the
 * request sent "Connection: close".
 *
 * Thread: the connection's loop.
 */
#include "server/http/request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/wire/protocol.h"

void srv_http_req_free(struct http_pss *ps)
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
 * Writing outside HTTP_WRITEABLE is fine for HTTP/1.1 here: lws keeps
 * what the socket does not take and flushes it before anything else.
 *
 * A POST with a body is not answered here from inside lws's read path
 * (see server/base/http_post.h for why and for the close after pipelined
 * bytes). A request that asked for "Connection: close" (RFC 9112 9.6), or
 * one whose connection must close, gets the option in the answer, then
 * the close.
 */
int srv_http_respond(struct lws *wsi, struct http_req *p, unsigned status,
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

int srv_http_respond_text(struct lws *wsi, struct http_req *p,
                          unsigned status, const char *text)
{
    return srv_http_respond(wsi, p, status, "text/plain; charset=utf-8", text,
                            strlen(text));
}

int srv_http_respond_json_error(struct lws *wsi, struct http_req *p,
                                unsigned status, const char *msg)
{
    char buf[512];
    size_t n = hub_proto_encode_string(buf + 9, sizeof(buf) - 12, msg,
                                       strlen(msg));

    if (n >= sizeof(buf) - 12)
        return srv_http_respond_text(wsi, p, status, msg);
    memcpy(buf, "{\"error\":", 9);
    buf[9 + n] = '}';
    return srv_http_respond(wsi, p, status, "application/json", buf, 10 + n);
}

void srv_http_read_query(struct lws *wsi, char *out, size_t cap)
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
