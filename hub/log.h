/*
 * hub/log.h - the hub's log hook, a leaf every layer may include.
 *
 * hub/ code never writes to stderr itself: it calls hub_log(), which is a
 * no-op until the server installs its rate-limited, per-peer bridge
 * (server/loop.c). Unit tests may install their own to capture lines.
 *
 * Thread: any; the installed function must be thread-safe.
 */
#ifndef HUB_LOG_H
#define HUB_LOG_H

#define HUB_LOG_ERR 0
#define HUB_LOG_WARN 1
#define HUB_LOG_INFO 2
#define HUB_LOG_DEBUG 3

/* level, the loop's index, then printf-style text without a newline. */
typedef void hub_log_fn(int level, unsigned loop, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Set once at start-up, before any loop thread runs. */
extern hub_log_fn *hub_log;

#endif
