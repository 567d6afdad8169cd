/*
 * server/http/request.h - a plain HTTP request on the hub's port, private
 * to server/http/: its state (struct http_req, held from the pointer in
 * lws's per-connection storage) and the one writer of a whole response
 * (server/http/request.c). The files of server/http/ that answer a
 * request (routes, REST, static files, the dev auth endpoint) all answer
 * through srv_http_respond().
 *
 * Thread: the connection's loop.
 */
#ifndef SRV_HTTP_REQUEST_H
#define SRV_HTTP_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hub/base/query.h"
#include "hub/rest/rest.h"
#include "server/lws/srv.h"

/* A request handler's result besides 0 and -1 (close): the answer comes
 * later (server/http/rest.c: a REST request waiting for the directory). */
#define SRV_HTTP_DEFERRED 1

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

/* Free ps's request, if any: out of the loop's POST queue, its probe
 * stopped, its wait cancelled (the answer is then dropped). */
void srv_http_req_free(struct http_pss *ps);

/*
 * Send the whole response (headers and body in one lws_write) and finish
 * the transaction, so the connection is ready for its next keep-alive
 * request. Returns -1 when the connection must close.
 */
int srv_http_respond(struct lws *wsi, struct http_req *p, unsigned status,
                     const char *ctype, const char *body, size_t len);
/* A text/plain response. */
int srv_http_respond_text(struct lws *wsi, struct http_req *p,
                          unsigned status, const char *text);
/* {"error": msg} as application/json (text/plain when msg is too long). */
int srv_http_respond_json_error(struct lws *wsi, struct http_req *p,
                                unsigned status, const char *msg);

/* The request's query string (its fragments joined with '&', as far as
 * cap allows) into out. */
void srv_http_read_query(struct lws *wsi, char *out, size_t cap);

#endif
