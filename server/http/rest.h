/*
 * server/http/rest.h - the Pusher HTTP API's HTTP side, private to
 * server/http/ (server/http/rest.c): a request under /apps/ handed to
 * hub/rest, and its answer written now or, when it waits for the
 * directory, later. Thread: the connection's loop.
 */
#ifndef SRV_HTTP_REST_H
#define SRV_HTTP_REST_H

#include "server/http/request.h"

/* Answer p (a request under /apps/) through hub/rest: 0, -1 to close, or
 * SRV_HTTP_DEFERRED when the answer comes later (written from
 * HTTP_WRITEABLE by srv_http_rest_write_later()). */
int srv_http_rest(struct lws *wsi, struct srv_loop *l, struct http_req *p);

/* HTTP_WRITEABLE with a deferred answer in (p->later_ready): write it.
 * 0, or -1 to close. */
int srv_http_rest_write_later(struct lws *wsi, struct srv_loop *l,
                              struct http_req *p);

/* Bytes came behind the body of a POST whose answer waits (p->wait) or is
 * in (p->later_ready), and the connection must close now: the answer in
 * is written, or the waiting POST is refused with 400 and not published
 * (hub_rest_wait_refuse()). The caller then closes. */
void srv_http_rest_close_early(struct lws *wsi, struct srv_loop *l,
                               struct http_req *p);

#endif
