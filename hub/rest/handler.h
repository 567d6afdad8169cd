/*
 * hub/rest/handler.h - what every handler of the HTTP API shares, private
 * to hub/rest/: the request as the router (hub/rest/router.c) hands it to
 * its route's handler, how the handler is to answer it (now, or later
 * through a wait: hub/rest/wait.h), and the writers of an answer
 * (hub/rest/handler.c).
 *
 * Thread: the loop that received the request.
 */
#ifndef HUB_REST_HANDLER_H
#define HUB_REST_HANDLER_H

#include <stdbool.h>

#include <jansson.h>

#include "hub/app/auth.h"
#include "hub/rest/rest.h"

struct hub_app;
struct hub_loop;
struct hub_query;

/* How a handler answers: now (answer NULL), or later through a wait. */
struct hub_rest_call {
    hub_rest_answer_fn *answer;
    void *ctx;
    struct hub_rest_wait *wait;    /* out: the request waits */
    bool refuse_wait;              /* hub_rest_handle_nowait() */
};

/*
 * A request that passed the router's checks (path, app, body size, query,
 * signature, app enabled, the route's method, its JSON body, the rate
 * limit). All borrowed, for the handler's call only: a handler that makes
 * the request wait takes its own reference to what it keeps.
 */
struct hub_rest_req {
    struct hub_loop *l;
    const struct hub_app *app;
    enum hub_http_method method;
    const char *param;              /* the path after the route's own */
    const struct hub_query *query;  /* parsed once, keys as sent */
    json_t *body;                   /* the JSON object, for routes that
                                     * take one; else NULL */
    struct hub_rest_call *call;
};

/* A route's handler: answers in out, or makes the request wait
 * (r->call->wait set, out->status 0). */
typedef void hub_rest_handler_fn(const struct hub_rest_req *r,
                                 struct hub_rest_response *out);

/* Answer with the text of o (taken); a 500 when o is NULL or its text
 * cannot be made. */
void hub_rest_reply_json(struct hub_rest_response *out, int status,
                         json_t *o);

/* Answer {"error": <the formatted text, cut at 511 bytes>}. */
void hub_rest_reply_error(struct hub_rest_response *out, int status,
                          const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Answer 200 with text (taken), made before publishing. */
void hub_rest_reply_text(struct hub_rest_response *out, char *text);

#endif
