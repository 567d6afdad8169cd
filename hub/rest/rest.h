/*
 * hub/rest/rest.h - the Pusher HTTP API under /apps/{app_id}/
 * (docs/PROTOCOL.md 6): events, batch_events, channels, channel info,
 * presence users, a channel's history (channels/{name}/events) and
 * users/{user_id}/terminate_connections. This is the folder's one public
 * header (server/http and the tests use it); the rest of hub/rest/ is its
 * inside:
 *   router.c     the entry points below, the checks every request passes
 *                and the table of routes (method, path, handler), with
 *                the app's rate limits;
 *   events.c     POST events and batch_events;
 *   channels.c   GET channels, channels/{name} and channels/{name}/users;
 *   chanhistory.c GET channels/{name}/events (recovery's history);
 *   terminate.c  POST users/{user_id}/terminate_connections;
 *   wait.c       deferred answers (hub_rest_wait_refuse(),
 *                hub_rest_wait_cancel() below);
 *   handler.c    what the handlers share: the routed request, the replies.
 *
 * Every request is authenticated (hub/app/auth.h). Answers are 200 with a JSON
 * object body, or 400/401/403/404/405/413/429 with {"error": "..."} (405:
 * a GET on a POST-only path; 429: over the app's rate limit), or 500 when
 * out of memory.
 *
 * Thread: the loop that received the request (publishing reaches the other
 * loops through their inboxes).
 */
#ifndef HUB_REST_H
#define HUB_REST_H

#include <stddef.h>
#include <stdint.h>

#include "hub/app/auth.h"

struct hub_loop;

struct hub_rest_response {
    int status;
    char *body;              /* owned: free() it */
    size_t len;
    uint32_t retry_after_s;  /* with 429: the Retry-After header's value */
};

/* Largest request body the API accepts (bigger: 413 before parsing). */
#define HUB_REST_MAX_BODY (1024 * 1024)

/*
 * path starts with "/apps/"; query is the raw query string without '?'
 * ("" or NULL when none), parsed once here for the signature check and the
 * handlers; body is body_len bytes, not NUL-terminated. now_s is
 * wall-clock Unix seconds for auth_timestamp. The checks run in this
 * order: 404 (path, app id), 413 (body), 400 (query does not parse), the
 * signature (401/400), 403 (app disabled), then the resource (404, 405,
 * 400, 413, 500), with the app's REST rate limits (429 with
 * retry_after_s) checked once the request is known to be valid enough to
 * count: events once the body parsed (a batch counts its events), reads
 * (GET) before they are answered.
 */
void hub_rest_handle(struct hub_loop *l, enum hub_http_method method,
                     const char *path, const char *query, const char *body,
                     size_t body_len, uint64_t now_s,
                     struct hub_rest_response *out);

/*
 * Asynchronous answers. With a directory whose reads answer later
 * (query_async, hub/loop/backplane.h: a cluster directory) the channel reads
 * (GET channels, channels/{name}, channels/{name}/users) and info= on
 * events and batch_events wait for it. hub_rest_handle() above never
 * waits (it uses the directory's synchronous reads); a caller that can
 * answer later uses hub_rest_handle_async().
 */
struct hub_rest_wait;

/* The answer of a request that waited, on the loop's thread; the callee
 * owns r->body. */
typedef void hub_rest_answer_fn(void *ctx, struct hub_rest_response *r);

/*
 * hub_rest_handle(), except that a read the directory answers later makes
 * the request wait: then it returns the wait (out->status is 0) and
 * answer(ctx, r) is called exactly once, later, on l's thread, unless
 * hub_rest_wait_cancel() came first. NULL: answered in out, as
 * hub_rest_handle(). An events request that waits is published when its
 * info comes, whether or not it was cancelled meanwhile (the request was
 * whole; only its answer is dropped).
 */
struct hub_rest_wait *hub_rest_handle_async(struct hub_loop *l,
                                            enum hub_http_method method,
                                            const char *path,
                                            const char *query,
                                            const char *body, size_t body_len,
                                            uint64_t now_s,
                                            hub_rest_answer_fn *answer,
                                            void *ctx,
                                            struct hub_rest_response *out);

/*
 * hub_rest_handle_async() for a caller that cannot wait (server/http/rest.c: a
 * POST with a request pipelined behind its body, whose connection closes
 * right after this answer): a request that would wait for the directory
 * (info= on events or batch_events, a channel read, with a directory that
 * answers later) is refused with 400, before anything is published; any
 * other is answered as hub_rest_handle() answers it.
 */
void hub_rest_handle_nowait(struct hub_loop *l, enum hub_http_method method,
                            const char *path, const char *query,
                            const char *body, size_t body_len, uint64_t now_s,
                            struct hub_rest_response *out);

/*
 * The waiting request cannot be answered later after all (server/http/rest.c: a
 * request came pipelined behind its POST body meanwhile, and the
 * connection closes now): out gets the 400 of hub_rest_handle_nowait(),
 * answer is not called, and nothing of the request is published when the
 * directory answers (w is freed then). On l's thread.
 */
void hub_rest_wait_refuse(struct hub_rest_wait *w,
                          struct hub_rest_response *out);

/* The requester is gone (its connection closed): answer is not called;
 * w is freed when the directory answers. On l's thread. */
void hub_rest_wait_cancel(struct hub_rest_wait *w);

/*
 * The operator console's test event (server/ops/console.c, behind the admin
 * token): one event {"name","channel","data"} to one channel of app,
 * published exactly as POST events publishes it (the same checks: name,
 * channel name, data size, 400/413; then the cluster and the history),
 * without a REST signature or the app's REST rate limit. out as
 * hub_rest_handle()'s (403 when the app is disabled). hub/rest/trusted.c.
 */
struct hub_app;
void hub_rest_trusted_publish(struct hub_loop *l, const struct hub_app *app,
                              const char *name, const char *channel,
                              const char *data, struct hub_rest_response *out);

#endif
