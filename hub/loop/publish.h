/*
 * hub/loop/publish.h - publication inside one process: local delivery and the
 * cross-loop fan-out, and the terminate order.
 *
 * A publish hands one sealed frame to every loop: the calling loop
 * delivers at once, the others get it through their inbox as one
 * refcounted block with a node per loop (its ops deliver on run and only
 * release on drop). Recipients hold references to the same frame; no
 * per-recipient work but a queue push. A terminate order travels the same
 * way as its own node type: it carries the user's channel name, no frame.
 *
 * This is the default bus of the backplane (hub/loop/backplane.h): callers
 * publish through the hub_publish() front, and a bus that reaches other
 * processes calls hub_fanout_loops() for its own loops and for what it
 * receives (from = NULL).
 *
 * Thread: hub_fanout_*() from any thread (from, when not NULL, is the
 * calling loop); hub_deliver_local() on l's thread.
 */
#ifndef HUB_PUBLISH_H
#define HUB_PUBLISH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hub/wire/frame.h"

struct hub;
struct hub_loop;

/*
 * The subscriptions a publication skips: the socket "<hi>.<lo>" when set
 * (a client event's sender, a REST socket_id), and, for a presence member
 * event, every subscription that joined at or after member_seq (its list
 * already says it: hub/loop/backplane.h, "Sequence numbers").
 */
struct hub_skip {
    bool set;
    uint64_t hi;
    uint32_t lo;
    /* Member events: deliver only to subscriptions with joined_seq below
     * this; 0 = no such filter. */
    uint64_t member_seq;
};

/* Set sk to skip the socket "<hi>.<lo>" (member_seq untouched); -EINVAL
 * when not ^\d+\.\d+$ in range. */
int hub_skip_parse(struct hub_skip *sk, const char *socket_id);

/* One publication: f to the subscribers of (app, name[0..len)) but those
 * skip names (NULL = none). Every pointer is borrowed for the call. batch:
 * a client event of the read in progress, which the calling loop may hold
 * for the read's one walk (hub_defer_begin); a bus hands it on as it came. */
/* A publication kept for recovery (hub/channel/history.h): what a bus
 * that reaches other processes needs to keep it there too. */
struct hub_pub_hist {
    uint64_t time_ms;              /* wall clock, ms since the epoch */
    uint64_t ttl_ms;               /* the app's history ttl */
    uint32_t size;                 /* the app's history size */
};

struct hub_pub_req {
    unsigned app;
    const char *name;
    size_t len;
    struct hub_frame *f;
    const struct hub_skip *skip;
    bool batch;
    /* Set when f has a history id (f->hseq); NULL otherwise. */
    const struct hub_pub_hist *hist;
};

/*
 * Post r to every loop of h but from, then deliver it on from (when not
 * NULL) before returning. Takes its own frame references; the caller keeps
 * its own. Returns 0 or -ENOMEM (then no other loop was sent it). Nothing
 * is posted once the hub is stopping.
 */
int hub_fanout_loops(struct hub *h, struct hub_loop *from,
                     const struct hub_pub_req *r);

/*
 * Close every session of app signed in as user_id (on its
 * #server-to-user-<id> channel) with pusher:error 4009 and close 4009, on
 * every loop of h; from as above. 0 or -ENOMEM (then no loop was told).
 */
int hub_fanout_terminate(struct hub *h, struct hub_loop *from, unsigned app,
                         const char *user_id);

/* Deliver to this loop's subscribers only. Returns recipients. */
unsigned hub_deliver_local(struct hub_loop *l, unsigned app, const char *name,
                           size_t len, struct hub_frame *f,
                           const struct hub_skip *skip);

/*
 * Batching the client events of one read (the read bypass,
 * server/lws/direct.c: begin before it frames a socket's bytes, end after).
 * While the batch is open, a client event published from l with the
 * request's batch flag set (hub/pusher/pusher.c sets it) is held, with a
 * reference, instead of being delivered on l at once; consecutive ones to
 * the same channel with the same exclusion then reach the channel's
 * members in one walk (deliver_batch): at 10,000 members the walk per
 * message was two thirds of the hub's user-space time (docs/BENCHMARKS.md,
 * "One walk per read"). Other loops and the cluster get each at once, as
 * before. Order is kept: the batch is flushed before any other publication
 * or terminate leaves l, before the session's next message that is not a
 * client event is handled (hub_pusher_on_message), and at the end of the
 * read. Only l's thread; flush and end are no-ops when nothing is held.
 */
#define HUB_DEFER_MAX 64

/* A loop's batch (struct hub_loop's defer): consecutive client events to
 * one channel with one exclusion, which share one walk of its members. */
struct hub_defer {
    bool open;             /* a read pass is batching */
    unsigned k;            /* frames held, each with its own reference */
    unsigned app;
    struct hub_skip skip;
    size_t len, cap;       /* the channel's name in name[0..len) */
    char *name;            /* owned */
    struct hub_frame *f[HUB_DEFER_MAX];
};

void hub_defer_begin(struct hub_loop *l);
void hub_defer_flush(struct hub_loop *l);
void hub_defer_end(struct hub_loop *l);

/* The in-process bus: publish = hub_fanout_loops, terminate_user =
 * hub_fanout_terminate (struct hub_bus_ops, hub/loop/backplane.h). */
extern const struct hub_bus_ops hub_bus_local_ops;

#endif
