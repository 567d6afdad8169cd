/*
 * hub/log.h - the hub's log hook, a leaf every layer may include.
 *
 * hub/ code never writes to stderr itself: it calls hub_log(), which is a
 * no-op until the server installs its rate-limited, per-peer bridge
 * (server/lwslog.c). Unit tests may install their own to capture lines.
 *
 * Thread: any; the installed function must be thread-safe.
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

#endif
