/*
 * server/http/headers.h - request headers before lws answers, private to
 * server/http/ (server/http/headers.c): whether a header was cut at the
 * budget (server/lws/srv.h), one header's value, and the refusal written
 * before lws answers. Thread: the connection's loop.
 */
#ifndef SRV_HTTP_HEADERS_H
#define SRV_HTTP_HEADERS_H

#include <stdbool.h>
#include <stddef.h>

#include "server/lws/srv.h"

/* Header t's value into buf (cap bytes, NUL-terminated), its length in
 * *len; false (and *len 0) when it is absent or empty. */
bool srv_http_hdr_value(struct lws *wsi, enum lws_token_indexes t, char *buf,
                        size_t cap, size_t *len);

/* Whether some header reached its stored limit, so lws cut it. */
bool srv_http_header_cut(struct lws *wsi);

/*
 * Refuse a request before lws answers it: a whole response (status line,
 * Connection: close, a one-line text body) written in one go, counted in
 * rejected_http. Returns -1: the caller then returns non-zero and lws
 * closes the connection after flushing it. extra_name (with its colon) /
 * extra_value add one header, or NULL.
 */
int srv_http_refuse(struct lws *wsi, struct srv_loop *l, unsigned status,
                    const char *phrase, const char *extra_name,
                    const char *extra_value);

/* The 431 of a header over SRV_HEADER_ONE_MAX - 1 bytes (logged). */
int srv_http_refuse_too_big(struct lws *wsi, struct srv_loop *l);

#endif
