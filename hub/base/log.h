/*
 * hub/base/log.h - the hub's log hook, a leaf every layer may include.
 *
 * hub/ code never writes to stderr itself: it calls hub_log(), which is a
 * no-op until the server installs its rate-limited, per-peer bridge
 * (server/lws/lwslog.c). Unit tests may install their own to capture lines.
 *
 * hub_log_conn names the connection whose input the calling thread is
 * handling, so that the installed function can charge a peer-caused line
 * to that peer (server/lws/log.c keys its rate limit on the peer's address).
 *
 * Thread: any; the installed function must be thread-safe. hub_log_conn
 * is per thread.
 */
#ifndef HUB_LOG_H
#define HUB_LOG_H

#include <stdbool.h>

#define HUB_LOG_ERR 0
#define HUB_LOG_WARN 1
#define HUB_LOG_INFO 2
#define HUB_LOG_DEBUG 3

/* level, the loop's index, then printf-style text without a newline. */
typedef void hub_log_fn(int level, unsigned loop, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Would a line at level be written? Guards costly arguments (the
 * session-end line); default: nothing is. */
typedef bool hub_log_enabled_fn(int level);

/* Set once at start-up, before any loop thread runs. */
extern hub_log_fn *hub_log;
extern hub_log_enabled_fn *hub_log_enabled;

/*
 * The transport handle (borrowed: a session's conn, lws's wsi) of the
 * connection whose callback or message this thread is running, or NULL
 * (timers, deliveries from other loops). Set it with hub_log_conn_swap()
 * around that work and restore what it returned: handlers nest (the
 * server's callback runs the hub's message handler).
 */
extern _Thread_local void *hub_log_conn;

static inline void *hub_log_conn_swap(void *conn)
{
    void *was = hub_log_conn;

    hub_log_conn = conn;
    return was;
}

#endif
