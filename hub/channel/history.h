/*
 * hub/channel/history.h - recovery's history (docs/RECOVERY.md): per
 * (app, channel) the last events published, kept as the very frames their
 * fan-out built, so a client that comes back after a reconnect gets what it
 * missed (the resume protocol, docs/PROTOCOL.md "Recovery") and a backend
 * can read them (GET /apps/{app_id}/channels/{channel_name}/events).
 *
 * Ids. An event's id is (origin, seq): origin names the node that took the
 * publication in (a boot id, "b" + 8 hex digits, new at each start of a
 * single node), seq a counter of that origin shared by all its channels
 * (never restarts while the process lives; not contiguous per channel).
 * hub_history_publish() assigns it and posts the publication to every loop
 * while it holds the store's lock, the entry loop included (no immediate
 * local delivery): so every loop's inbox, hence every session, gets one
 * origin's events on a channel in seq order. That is what lets a client's
 * whole knowledge of a channel be one seq per origin.
 *
 * Records. A channel's record holds its entries oldest first, and per origin
 * the last seq appended and the newest seq evicted; born_seq is the origin's
 * counter when the record was made (everything in it is newer). A record
 * goes when its last entry does (expired or evicted). A record made later
 * for the same channel knows nothing of the older one: a resume whose last
 * id predates the record is complete only when the client's absence is
 * shorter than the ttl (then nothing it missed could have expired) and no
 * record was dropped under memory pressure since.
 *
 * Bounds (docs/RELIABILITY.md): entries per channel (the app's history
 * size), bytes per app (its history max_bytes, 0 = none of its own), bytes
 * per hub (--history-max-bytes); an entry is charged its frame's wire bytes,
 * twice (the marker-and-event frame a resuming session gets is made from
 * it), plus HUB_HISTORY_ENTRY_OVERHEAD; a record its name plus
 * HUB_HISTORY_RECORD_OVERHEAD. Oldest first everywhere: the per-channel
 * ring, the app's list and the hub's list are all in append order, so an
 * eviction is always a channel's head. Entries expire ttl after their
 * append: checked on every read and reclaimed in bulk from loop 0's
 * heartbeat (the feature's beat), nothing per message.
 *
 * Thread: any; one mutex per store, held for table and list work and, in
 * hub_history_publish(), across the post to the loops (posting allocates
 * and links; it never blocks on I/O).
 */
#ifndef HUB_HISTORY_H
#define HUB_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hub/wire/frame.h"

struct hub;
struct hub_app;
struct hub_history;
struct hub_loop;
struct hub_feature;
struct hub_pub_req;

/* The entry (a 112 B malloc chunk), the two frames' headers and malloc
 * rounding, and the marker of the pair: bench-recovery measured 334-340 B
 * beyond twice the frame with a resuming subscriber (docs/BENCHMARKS.md). */
#define HUB_HISTORY_ENTRY_OVERHEAD 352
#define HUB_HISTORY_RECORD_OVERHEAD 192
/* Origins one record tracks (one node: 1; a cluster: its nodes). */
#define HUB_HISTORY_ORIGINS 16
/* An origin's id: up to 64 bytes (a node id). */
#define HUB_HISTORY_ORIGIN_MAX 64
/* "<origin>:<seq>" */
#define HUB_HISTORY_ID_MAX (HUB_HISTORY_ORIGIN_MAX + 24)
/* A client's absence must be this much shorter than the ttl (and begin
 * this much after the newest event trimmed) for a gap history no longer
 * shows to count as one the client did not have: a frame the hub wrote
 * reaches a live client well within it (the write deadline closes one
 * that does not). */
#define HUB_HISTORY_AWAY_MARGIN_MS 10000

extern const struct hub_feature hub_history_feature;

/* h's store (borrowed for the hub's life); NULL when h has no history
 * feature. Any thread. */
struct hub_history *hub_history_of(const struct hub *h);

/* Owned; max_bytes the hub's bound (0 = 64 MiB). NULL when out of memory. */
struct hub_history *hub_history_create(uint64_t max_bytes);
void hub_history_destroy(struct hub_history *hh);
/* This node's origin id (borrowed, for the store's life). */
const char *hub_history_origin(const struct hub_history *hh);

/*
 * Publish r (from loop l, r->skip the excluded socket if any) on a channel
 * whose app keeps history: stamp r->f with its id, keep it (one reference)
 * and post it to every loop of the hub through hub_publish_req() with no
 * calling loop, under the store's lock. cache: an HTTP API event on a cache
 * channel (hub_publish_cache). Returns what the publish returned; a
 * publication that cannot be kept (out of memory, bigger than the app's
 * whole bound) is still published, with no id.
 */
int hub_history_publish(struct hub_history *hh, struct hub_loop *l,
                        const struct hub_app *app, const struct hub_pub_req *r,
                        bool cache);

/* One id: the origin (NUL-terminated) and the seq. */
struct hub_history_id {
    char origin[HUB_HISTORY_ORIGIN_MAX + 1];
    uint64_t seq;
};

/* What a client knows of a channel: the last seq per origin. */
struct hub_history_pos {
    unsigned n;
    struct hub_history_id id[HUB_HISTORY_ORIGINS];
};

/*
 * A fresh subscription's starting point on a loop that has delivered this
 * node's history publications up to seen (struct hub_loop's hist_seen):
 * every loop gets them all, in seq order (one lock posts them), so nothing
 * at or under seen is still on its way to the loop, and everything above
 * it reaches the new subscription.
 */
void hub_history_start(struct hub_history *hh, uint64_t seen,
                       struct hub_history_pos *out);

/* Why a resume cannot be served. */
enum hub_history_gap {
    HUB_HISTORY_OK = 0,
    HUB_HISTORY_EXPIRED,           /* what it missed is past the ttl */
    HUB_HISTORY_EVICTED,           /* trimmed by size or bytes */
    HUB_HISTORY_UNKNOWN_ORIGIN,    /* an origin this node has no history of
                                      (a restarted node) */
    HUB_HISTORY_TOO_LARGE,         /* more to replay than a session may hold */
};
const char *hub_history_gap_name(enum hub_history_gap g);

/* The frames a resumed subscription gets, oldest first: references the
 * caller owns (hub_history_replay_free), and after them the last seq per
 * origin the client then knows. */
struct hub_history_replay {
    struct hub_frame **f;
    size_t n;
    struct hub_history_pos upto;
};
void hub_history_replay_free(struct hub_history_replay *rp);

/* The client's own earlier sockets, whose events it never got (a client
 * event is not echoed to its sender; a REST socket_id excludes one). */
struct hub_history_sockets {
    unsigned n;
    uint64_t hi[4];
    uint32_t lo[4];
};

/*
 * What a client that knows `known` of (app, name), away for away_ms, missed:
 * every kept event of each origin with seq above what it knows (origins it
 * does not name: all of theirs newer than the record's start... none, as it
 * had them at its fresh start), but those its sockets sent. HUB_HISTORY_OK
 * and *out filled (possibly empty), or the gap that makes it incomplete
 * (then *out is empty). max_frames bounds the replay (TOO_LARGE past it).
 */
enum hub_history_gap hub_history_resume(struct hub_history *hh, unsigned app,
                                        const char *name, size_t len,
                                        const struct hub_history_pos *known,
                                        const struct hub_history_sockets *socks,
                                        uint64_t away_ms, uint64_t now_ms,
                                        uint64_t ttl_ms, size_t max_frames,
                                        struct hub_history_replay *out);

/* One kept event, for the HTTP API. */
struct hub_history_event {
    struct hub_history_id id;
    uint64_t time_ms;
    struct hub_frame *f;           /* a reference the caller owns */
};

/*
 * The HTTP API's read of (app, name): events after `after` (when given, an
 * id) or at or after since_ms, oldest first, at most limit (out->n; the
 * frames are references the caller owns: hub_history_events_free).
 * *complete: false when the history no longer reaches back to what was
 * asked (expired, trimmed or evicted after it). 0, -ENOENT when the store
 * holds nothing for the channel (complete then says whether nothing could
 * have been missed), or -ENOMEM.
 */
struct hub_history_events {
    struct hub_history_event *ev;
    size_t n;
    bool more;                     /* limit cut the answer short */
};
int hub_history_read(struct hub_history *hh, unsigned app, const char *name,
                     size_t len, const struct hub_history_id *after,
                     uint64_t since_ms, size_t limit, uint64_t now_ms,
                     uint64_t ttl_ms, struct hub_history_events *out,
                     bool *complete);
void hub_history_events_free(struct hub_history_events *ev);

/*
 * Give f (not yet shared) the id another node gave its publication (an
 * envelope's, hub/cluster/cluster_envelope.h), so this node's resuming
 * sessions get its marker. The origin's text is kept once per origin in
 * the store (f points at it) and forgotten after a day and an hour
 * unseen, when no frame can hold it any more (the longest ttl is a day).
 * Nothing when seq is 0, hh NULL or the origin malformed.
 */
void hub_history_stamp(struct hub_history *hh, struct hub_frame *f,
                       const char *origin, size_t len, uint64_t seq);

/* Parse "<origin>:<seq>": 0 or -EINVAL. */
int hub_history_id_parse(const char *s, size_t len, struct hub_history_id *out);

/* Free what expired (each entry expires its app's ttl after its append,
 * the ttl of the app at that time); returns how many. */
unsigned hub_history_reclaim(struct hub_history *hh, uint64_t now_ms);

struct hub_history_usage {
    uint64_t channels, events, bytes;
    uint64_t evicted, expired;     /* since start */
};
/* Hub-wide, or one app's when app != UINT32_MAX. */
void hub_history_usage(struct hub_history *hh, unsigned app,
                       struct hub_history_usage *out);

/* Walk the store and check its invariants: 0 or -EFAULT. */
int hub_history_check(struct hub_history *hh);

#endif
