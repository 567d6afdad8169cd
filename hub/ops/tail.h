/*
 * hub/ops/tail.h - the operator console's live tail: copies of publications and
 * of connection opens and closes, for the few watchers an operator opened.
 *
 * Nobody watching must cost nothing: the publish path (through the
 * feature's publication hook, hub_tail_feature: hub/loop/feature.h) and
 * the connection open/close paths test hub_tail_watched() (one relaxed
 * atomic load of a process-wide flag) and do nothing else. When someone
 * watches, the caller hands the event to hub_tail_publication() /
 * hub_tail_connection(), which match it against every watcher's filter
 * (app, channel name or prefix, event kind) and rate limit (a cap per
 * second per watcher), copy it as one JSON line into that watcher's
 * bounded queue, and wake the watcher's loop through its inbox; what the
 * cap or a full queue refuses is counted as a drop, never waited for. The
 * watcher's loop takes the lines with hub_tail_next() and writes them to
 * its browser.
 *
 * Thread: hub_tail_watched/publication/connection from any thread; a
 * watcher's other functions on the loop it was created on. The registry is
 * one mutex held only for the matching and the queue push (never across
 * I/O); with no watcher it is never taken.
 */
#ifndef HUB_TAIL_H
#define HUB_TAIL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hub;
struct hub_feature;
struct hub_loop;
struct hub_frame;

/* The feature (hub/hub.c lists it): every publication that enters the
 * hub's loops is offered to the watchers. */
extern const struct hub_feature hub_tail_feature;

#define HUB_TAIL_EVENTS 1u      /* publications (channel events) */
#define HUB_TAIL_CONNECTIONS 2u /* connection opens and closes */

#define HUB_TAIL_CHANNEL_MAX 200  /* Pusher's channel name limit */
#define HUB_TAIL_RATE_DEFAULT 50  /* events a second per watcher */
#define HUB_TAIL_RATE_MAX 1000
#define HUB_TAIL_QUEUE_DEFAULT 256
#define HUB_TAIL_MESSAGE_MAX 2048 /* bytes of each event copied */
#define HUB_TAIL_MAX_WATCHERS 32  /* hub-wide: each costs the matching */

struct hub_tail_filter {
    unsigned app;             /* app index (struct hub_app.index) */
    unsigned kinds;           /* HUB_TAIL_EVENTS | HUB_TAIL_CONNECTIONS */
    bool prefix;              /* channel is a prefix, "" = every channel */
    char channel[HUB_TAIL_CHANNEL_MAX + 1];
};

/* Does an event of kind on (app, name[0..len)) pass f? Connection events
 * have no channel (name NULL) and pass on the app and kind alone. */
bool hub_tail_filter_match(const struct hub_tail_filter *f, unsigned app,
                           unsigned kind, const char *name, size_t len);

/* A fixed window of one second: at most cap admitted per window. */
struct hub_tail_rate {
    uint32_t cap;
    uint32_t used;
    uint64_t window_ms;       /* start of the current window */
};

/* Take one from r at now_ms; false = over the cap (count a drop). */
bool hub_tail_rate_admit(struct hub_tail_rate *r, uint64_t now_ms);

extern atomic_bool hub_tail_on;

/* The one check on the hot paths. */
static inline bool hub_tail_watched(void)
{
    return atomic_load_explicit(&hub_tail_on, memory_order_relaxed);
}

struct hub_tail_watcher;

/*
 * Watch what passes f, at most rate lines a second (0 = the default, at
 * most HUB_TAIL_RATE_MAX) and queue_cap lines queued (0 = the default).
 * notify(ctx) runs on l's thread when lines were queued and none were
 * waiting. Owned; NULL when out of memory or HUB_TAIL_MAX_WATCHERS
 * already watch.
 */
struct hub_tail_watcher *hub_tail_watch(struct hub_loop *l,
                                        const struct hub_tail_filter *f,
                                        uint32_t rate, uint32_t queue_cap,
                                        void (*notify)(void *ctx), void *ctx);
/* Stop watching and release w (on its loop). NULL is fine. */
void hub_tail_unwatch(struct hub_tail_watcher *w);
/* The oldest queued line (owned, NUL-terminated JSON), or NULL. */
char *hub_tail_next(struct hub_tail_watcher *w, size_t *len);
/* Lines refused so far: over the rate cap, and with the queue full. */
void hub_tail_drops(struct hub_tail_watcher *w, uint64_t *rate_drops,
                    uint64_t *queue_drops);
/* Watchers right now (stats, tests). */
unsigned hub_tail_watchers(void);

/* Only when hub_tail_watched(). now_ms from h's clock; wall_ms for the
 * line's timestamp. A publication of frame f to (app, name[0..len)). */
void hub_tail_publication(struct hub *h, unsigned app, const char *name,
                          size_t len, struct hub_frame *f);
/* A connection of app opened (open) or closed, with its socket id. */
void hub_tail_connection(struct hub *h, unsigned app, bool open,
                         const char *socket_id, unsigned close_code);

#endif
