/*
 * server/http/headers.c - request headers before lws answers
 * (server/http/headers.h): the header budget lws applies (the token
 * limits, srv_http_token_limits() and srv_header_limit_of() in
 * server/lws/srv.h), the 431 of a header cut at it
 * (srv_http_filter_request()), reading one header's value, and the whole
 * refusal response written before lws answers (server/http/upgrade.c's
 * 400/426 use it too).
 *
 * Thread: the connection's loop; srv_http_token_limits() on the main
 * thread before the contexts are created.
 */
#include "server/http/headers.h"

#include <stdio.h>
#include <string.h>

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

bool srv_http_hdr_value(struct lws *wsi, enum lws_token_indexes t, char *buf,
                        size_t cap, size_t *len)
{
    int n = lws_hdr_copy(wsi, buf, (int)cap, t);

    *len = n > 0 ? (size_t)n : 0;
    return n > 0;
}

int srv_http_refuse(struct lws *wsi, struct srv_loop *l, unsigned status,
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
 * limits set in srv_http_token_limits()) and drops the rest; a header at
 * the limit was therefore cut. Method tokens (the URI) have no such limit.
 */
bool srv_http_header_cut(struct lws *wsi)
{
    for (int t = 0; t < WSI_TOKEN_COUNT; t++)
        if (srv_header_limit_of(t) &&
            lws_hdr_total_length(wsi, (enum lws_token_indexes)t) >=
                (int)srv_header_limit_of(t))
            return true;
    return false;
}

int srv_http_refuse_too_big(struct lws *wsi, struct srv_loop *l)
{
    srv_log_peer_event(HUB_LOG_INFO, l->id,
                       HUB_LOG_F(.event = "request_refused", .status = 431,
                                 .reason = "header_too_big"),
                       "request refused: 431 a header over %u bytes",
                       SRV_HEADER_ONE_MAX - 1);
    return srv_http_refuse(wsi, l, 431, "Request Header Fields Too Large",
                           NULL, NULL);
}

int srv_http_filter_request(struct srv_loop *l, struct lws *wsi)
{
    return srv_http_header_cut(wsi) ? srv_http_refuse_too_big(wsi, l) : 0;
}
