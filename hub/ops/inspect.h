/*
 * hub/ops/inspect.h - the console's socket inspector (docs/OPERATIONS.md,
 * "Dashboard and console"): given an app and a socket id or a user id,
 * what this node's loops know of it now (its loop, state, subscriptions,
 * bytes queued, bytes written) and of its last closes, and, in a cluster,
 * what the other nodes answered.
 *
 * A session never leaves its loop, so nothing here reads another loop's
 * sessions: a query posts one inbox node to every loop; each loop looks at
 * its own shard and its own ring of recent closes, adds what it found to
 * the query under the table's mutex and counts itself done. Whoever asked
 * polls hub_inspect_result() (the console's GET), or is called back once
 * every loop answered (done: a query another node asked for,
 * server/redis/redis_inspect.c). A query that also waits for other nodes
 * (remote) is complete when the expected number of them answered or its
 * deadline passed, whichever is first; whoever looks at it next (a poll,
 * a start needing a slot, another node's answer) applies the deadline, so
 * no timer is needed.
 *
 * Bounds (every byte a query or a close holds): each loop keeps the last
 * HUB_INSPECT_CLOSES closes (socket id, user id cut at HUB_INSPECT_ID_MAX
 * bytes, code, reason cut at HUB_INSPECT_REASON_MAX, time): about 25 KiB a
 * loop. At most HUB_INSPECT_QUERIES queries exist at once, running or
 * answered (an answered one is kept HUB_INSPECT_KEEP_MS from when it was
 * complete, polled or not, then its slot is reused); a start beyond is
 * refused with -EBUSY. An
 * answer lists at most HUB_INSPECT_SOCKETS live sockets and
 * HUB_INSPECT_SOCKETS closes per node, each socket at most
 * HUB_INSPECT_SUBS subscriptions (then "subscriptions_truncated"), and at
 * most HUB_INSPECT_NODES other nodes' answers.
 *
 * Thread: hub_inspect_closed() on the session's loop; the rest from any
 * thread (the loops' part runs on each loop through its inbox).
 */
#ifndef HUB_INSPECT_H
#define HUB_INSPECT_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

struct hub;
struct hub_feature;
struct hub_session;

#define HUB_INSPECT_CLOSES 64      /* recent closes kept per loop */
#define HUB_INSPECT_QUERIES 16     /* queries at once, hub-wide */
#define HUB_INSPECT_KEEP_MS 60000  /* an answer waits this long for its poll */
#define HUB_INSPECT_SOCKETS 8      /* sockets, and closes, listed per node */
#define HUB_INSPECT_SUBS 100       /* subscriptions listed per socket */
#define HUB_INSPECT_NODES 64       /* other nodes' answers per query */
#define HUB_INSPECT_ID_MAX 200     /* socket or user id bytes */
#define HUB_INSPECT_REASON_MAX 123 /* a close reason's bytes (RFC 6455) */
#define HUB_INSPECT_NODE_MAX 255   /* a node id's bytes */

/* The feature (hub/hub.c lists it): each loop's ring of recent closes, the
 * hub's table of queries. */
extern const struct hub_feature hub_inspect_feature;

/* What to look for: a socket id ("123.456") or a user id, of one app. */
struct hub_inspect_req {
    unsigned app;
    bool by_user;
    char id[HUB_INSPECT_ID_MAX + 1];
};

/* The bytes written to a session's connection so far (conn: the
 * transport's handle); run on the session's loop. NULL: not reported. */
typedef uint64_t hub_inspect_bytes_fn(void *conn);

/* Every loop answered a query started with a done function: answer is
 * {"sockets":[...],"closes":[...]} (taken). On the last loop's thread;
 * or with answer NULL when the hub goes first (hub_destroy's thread). */
typedef void hub_inspect_done_fn(void *ctx, json_t *answer);

struct hub_inspect_start {
    const char *node;              /* this node's id, or NULL (one node) */
    hub_inspect_bytes_fn *bytes;
    /* Wait also for other nodes: at most expect answers, until
     * deadline_ms on the hub's clock (0: no other node is asked). */
    unsigned expect;
    uint64_t deadline_ms;
    hub_inspect_done_fn *done;     /* NULL: the answer is polled */
    void *ctx;
};

/* Start a query. Its id (> 0), or -EBUSY (HUB_INSPECT_QUERIES at once),
 * -ENOMEM, -ENOENT (the hub has no inspector, or its loops are going). With a done function the
 * query frees itself once done ran; else the poller's. */
int64_t hub_inspect_begin(struct hub *h, const struct hub_inspect_req *rq,
                          const struct hub_inspect_start *how);
/* Another node's answer to query id: its records ({"sockets","closes"},
 * taken; NULL: nothing). Ignored when id is gone or complete. */
void hub_inspect_remote(struct hub *h, uint64_t id, const char *node,
                        json_t *records);
/*
 * A polled query: 0 with *out = {"sockets","closes","nodes_answered",
 * "nodes_asked","complete"} (a new reference) once complete, -EAGAIN while
 * it runs, -ENOENT when unknown or expired.
 */
int hub_inspect_result(struct hub *h, uint64_t id, json_t **out);

/* Any thread: no query starts from now on (-ENOENT), so no ask is posted
 * to a loop that is going; a start under way has posted when this
 * returns. The server calls it once its loops stopped serving, before
 * their wakeups go (a loop's fini does too). */
void hub_inspect_shutdown(struct hub *h);

/* s is going (its loop): kept in the loop's ring of recent closes. */
void hub_inspect_closed(struct hub_session *s);

#endif
