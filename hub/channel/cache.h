/*
 * hub/channel/cache.h - the last event of each cache channel (cache-,
 * private-cache-, private-encrypted-cache-, presence-cache-), hub-wide.
 *
 * An entry holds a reference to the sealed frame the publish built for
 * fan-out, so a new subscriber gets the very bytes the others got: no
 * re-encode per subscriber, and a cached event costs its frame plus a
 * small record. Entries expire ttl_ms after they were stored; expiry is
 * checked on every read (an expired entry is a miss and is freed there)
 * and reclaimed in bulk by hub_cache_reclaim(), which the feature's beat
 * hook calls on loop 0 once a heartbeat run (about once a second; no
 * wheel entry of its own): nothing is done per message.
 *
 * Memory is bounded per app: each app's entries sit on one list in store
 * order (a store moves its entry to the tail), and a store that would
 * take the app past its byte cap evicts from the head (the oldest) first.
 * A frame bigger than the whole cap is not cached, and the channel's
 * older entry is dropped with it, so a subscriber never gets an event
 * older than the last one published (it gets pusher:cache_miss instead).
 * Since an app's TTL is one value, the head is also the next to expire,
 * which is what lets the reclaim stop at the first live entry.
 *
 * Invariants (hub_cache_check): the table's (hub/base/chantab.h); each app's
 * entry and byte counts are the sum over its list; every entry is on its
 * app's list and in the table.
 *
 * The feature (hub/loop/feature.h, hub_cache_feature): one store per hub,
 * created with the hub (hub_cache_of() finds it), and its reclaim.
 *
 * Thread: any; one mutex per store, held only for table and list work and
 * reference counting (never across I/O or a send).
 */
#ifndef HUB_CACHE_H
#define HUB_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hub/wire/frame.h"

/* Bytes an entry is charged beyond its frame's wire bytes: the record
 * and the channel name. */
#define HUB_CACHE_ENTRY_OVERHEAD 64

struct hub;
struct hub_cache;
struct hub_feature;

/* The cache channels' feature: the hub's store and its reclaim. */
extern const struct hub_feature hub_cache_feature;

/* h's store (borrowed for the hub's life); NULL when h has no cache
 * channels feature. Any thread. */
struct hub_cache *hub_cache_of(const struct hub *h);

struct hub_cache_usage {
    uint64_t entries;
    uint64_t bytes;
};

/* What hub_cache_store() did. */
struct hub_cache_put {
    unsigned evicted;              /* entries evicted to make room */
    bool oversize;                 /* not cached: bigger than the cap */
};

/* Owned; n_apps per-app accounts to start with (more are added when an
 * app index past them stores: a reload added apps). NULL when out of
 * memory. */
struct hub_cache *hub_cache_create(unsigned n_apps);
/* Drops every entry's frame reference. */
void hub_cache_destroy(struct hub_cache *c);

/* Bytes an entry for a frame of frame_len wire bytes on a channel name of
 * name_len bytes is charged against its app's cap. */
static inline uint64_t hub_cache_entry_bytes(size_t frame_len,
                                             size_t name_len)
{
    return (uint64_t)frame_len + name_len + HUB_CACHE_ENTRY_OVERHEAD;
}

/*
 * Keep f (takes its own reference) as the last event of (app, name),
 * replacing the older one, until now_ms + ttl_ms. cap: the app's byte cap
 * (0 = no cap). 0, or -ENOMEM (then the older entry is gone too: it is no
 * longer the last event). out (may be NULL) says what was evicted.
 */
int hub_cache_store(struct hub_cache *c, unsigned app, const char *name,
                    size_t len, struct hub_frame *f, uint64_t now_ms,
                    uint64_t ttl_ms, uint64_t cap, struct hub_cache_put *out);

/*
 * The live entry of (app, name): a frame reference for the caller (unref
 * it), and its remaining time in *ttl_left_ms (may be NULL). NULL when
 * there is none or it expired (then it is freed).
 */
struct hub_frame *hub_cache_get(struct hub_cache *c, unsigned app,
                                const char *name, size_t len, uint64_t now_ms,
                                uint64_t *ttl_left_ms);

/* Free the expired entries; returns how many. */
unsigned hub_cache_reclaim(struct hub_cache *c, uint64_t now_ms);

/* The app's entries and bytes (a snapshot); zeros when c is NULL. */
void hub_cache_app_usage(struct hub_cache *c, unsigned app,
                         struct hub_cache_usage *out);

/* Walk the store and check the invariants above: 0 or -EFAULT. */
int hub_cache_check(struct hub_cache *c);

#endif
