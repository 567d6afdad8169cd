/*
 * hub/base/log.h - the hub's log hook, a leaf every layer may include.
 *
 * hub/ code never writes to stderr itself: it calls hub_log() or
 * HUB_LOG_EVENT(), which are no-ops until the server installs its
 * rate-limited, per-peer bridge (server/lws/lwslog.c). Unit tests may
 * install their own to capture lines.
 *
 * A line an operator acts on carries fields besides its message (struct
 * hub_log_fields: the event's stable name, the app, the socket, the
 * channel, a close code ...). The text format writes the message only, as
 * it always did; the JSON format writes each field that is set as a key of
 * its own (docs/LOGS.md is the schema). The fields are borrowed pointers
 * and integers the caller already has: nothing is formatted for them
 * unless the line is written, and HUB_LOG_EVENT() evaluates neither the
 * fields nor the message's arguments when the level is off.
 *
 * hub_log_conn names the connection whose input the calling thread is
 * handling, so that the installed function can charge a peer-caused line
 * to that peer (server/lws/log.c keys its rate limit on the peer's address).
 *
 * Thread: any; the installed functions must be thread-safe. hub_log_conn
 * is per thread.
 */
#ifndef HUB_LOG_H
#define HUB_LOG_H

#include <stdbool.h>

#define HUB_LOG_ERR 0
#define HUB_LOG_WARN 1
#define HUB_LOG_INFO 2
#define HUB_LOG_DEBUG 3

/*
 * What a line is about, for the JSON format. Every member is optional:
 * a NULL string or a zero number is left out of the line. Strings are
 * borrowed for the call and may hold peer-supplied bytes (a channel name,
 * a user id): the writer escapes them and cuts each at
 * HUB_LOG_FIELD_MAX bytes, so a line stays one bounded line of valid JSON.
 */
struct hub_log_fields {
    const char *event;     /* stable short name (docs/LOGS.md), e.g.
                              "session_close"; never peer-supplied */
    const char *app;       /* app id */
    const char *socket_id; /* Pusher socket id */
    const char *channel;
    const char *user_id;
    const char *reason;    /* short machine-readable cause */
    const char *url;       /* without credentials */
    const char *path;      /* an HTTP request's path, without its query */
    const char *peer;      /* the client's address when the line is not
                              written inside its connection's work */
    unsigned code;         /* WebSocket close or Pusher error code */
    unsigned status;       /* HTTP status */
    unsigned long long duration_ms; /* how long it lasted (a session) */
};

#define HUB_LOG_FIELD_MAX 256

/* A compound literal of fields for HUB_LOG_EVENT(): HUB_LOG_F(.event =
 * "bad_message", .socket_id = sid). */
#define HUB_LOG_F(...) (&(const struct hub_log_fields){__VA_ARGS__})

/* level, the loop's index, then printf-style text without a newline. */
typedef void hub_log_fn(int level, unsigned loop, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The same with fields (f may be NULL). */
typedef void hub_log_event_fn(int level, unsigned loop,
                              const struct hub_log_fields *f,
                              const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Would a line at level be written? Guards costly arguments (the
 * session-end line); default: nothing is. */
typedef bool hub_log_enabled_fn(int level);

/* Set once at start-up, before any loop thread runs. */
extern hub_log_fn *hub_log;
extern hub_log_event_fn *hub_log_event;
extern hub_log_enabled_fn *hub_log_enabled;

/* A line with fields; nothing after level is evaluated when the level is
 * off. */
#define HUB_LOG_EVENT(level, loop, fields, ...)                              \
    do {                                                                     \
        if (hub_log_enabled(level))                                          \
            hub_log_event((level), (loop), (fields), __VA_ARGS__);           \
    } while (0)

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
