/*
 * server/ops/console_inspect.h - the console's socket inspector over HTTP
 * (server/ops/console_inspect.c), behind the admin token that
 * srv_console_http() (server/ops/console.c) checked.
 *
 * Thread: the connection's loop.
 */
#ifndef SRV_CONSOLE_INSPECT_H
#define SRV_CONSOLE_INSPECT_H

#include <stdbool.h>
#include <stddef.h>

struct lws;
struct srv_loop;

/* POST /console/api/inspect {"app","socket_id"|"user_id"}: 202
 * {"query":N}, or 400/404/503 {"error"}. */
int srv_console_inspect_start(struct lws *wsi, struct srv_loop *l,
                              const char *body, size_t body_len, bool close);
/* GET /console/api/inspect?query=N: {"state":"pending"} while it runs,
 * the answer once complete, 404 when unknown or expired. */
int srv_console_inspect_poll(struct lws *wsi, struct srv_loop *l, bool close);

#endif
