/*
 * hub/app/apptab.h - the hub's app table: an immutable snapshot of the apps,
 * found by key (WebSocket /app/KEY, any of an app's key/secret pairs) and
 * by id (REST /apps/ID) through two hash indexes, and by index (what sessions, the channel index and the
 * directory key apps by).
 *
 * Indices are stable for the life of the hub: an app id keeps its index
 * across reloads, a new id takes the next unused index, and a removed id
 * leaves a tombstone (apps[i] == NULL) that is never reused, so a channel
 * or session keyed by an index never comes to mean another app. Each
 * index also has a struct hub_app_live, shared by every generation of the
 * table: what must survive a reload (the session count behind the
 * max_connections quota, the REST rate buckets and their counters).
 *
 * A table is never changed once built. hub/loop/appswap.h publishes a new one
 * and retires the old (see there, and docs/DESIGN.md, for the lifetime
 * rules). Thread: building on one thread (main, or the hub's creation);
 * lookups on any thread that holds the table (a loop in a callback).
 */
#ifndef HUB_APPTAB_H
#define HUB_APPTAB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hub/app/app.h"
#include "hub/base/ratelimit.h"

/* One per index, for the hub's life (freed with the last table). */
struct hub_app_live {
    atomic_uint_fast32_t sessions;         /* live, all loops (the quota) */
    struct hub_bucket events;              /* max_backend_events_per_second */
    struct hub_bucket reads;               /* max_read_requests_per_second */
    atomic_uint_fast64_t events_limited;   /* events refused with 429 */
    atomic_uint_fast64_t reads_limited;    /* read requests refused (429) */
    /* The other nodes' live sessions of the app (a cluster: written each
     * lease tick by server/redis/redis_lease.c; 0 on a single node). */
    atomic_uint_fast32_t remote_sessions;
};

/* Is a quota of max (0 = none) full for one more session, with before
 * sessions on this node (counting none of the new one) and remote on the
 * others? */
static inline bool hub_app_quota_full(uint32_t max, uint64_t before,
                                      uint64_t remote)
{
    return max && before + remote >= max;
}

struct hub_apptab {
    unsigned n;                     /* indices 0..n-1 (tombstones included) */
    unsigned count;                 /* apps present */
    const struct hub_app **apps;    /* [n]; NULL = removed */
    struct hub_app_live **live;     /* [n]; never NULL */
    unsigned live_owned_from;       /* live[i >= this] were made by this
                                       table's build (freed if it fails) */
    unsigned mask;                  /* hash slots - 1 (a power of two) */
    /* by_id slot: index + 1; by_key slot: index * HUB_APP_KEYS_MAX +
     * pair + 1 (a key per pair); 0 = empty. */
    uint32_t *by_key, *by_id;
};

/*
 * The first table: borrows apps[0..n) (each apps[i].index must be i; the
 * apps live for the hub). NULL when out of memory.
 */
struct hub_apptab *hub_apptab_borrow(const struct hub_app *apps, unsigned n);

/*
 * The next table after prev: apps[0..n) (ids and keys, every pair's,
 * unique; checked by the caller), each given its index (the one of the same id in prev, else
 * a new one) and a reference (taken here: the caller keeps its own). Ids
 * of prev not in apps become tombstones. NULL when out of memory (then no
 * app was touched but their index).
 */
struct hub_apptab *hub_apptab_build(const struct hub_apptab *prev,
                                    struct hub_app *const *apps, unsigned n);

/* Drop t's references to its apps and free it; with_live also frees every
 * live struct (the hub's last table, at destroy). NULL is a no-op. */
void hub_apptab_free(struct hub_apptab *t, bool with_live);
/* Free a table whose build was never published: its own new live structs
 * too. */
void hub_apptab_discard(struct hub_apptab *t);

/* Borrowed from t; NULL when none. key/id need not be NUL-terminated.
 * by_key finds the app by any of its pairs' keys (key rotation, hub/app/
 * app.h); find_key also tells which pair (*pair, when pair is not NULL:
 * the index hub_app_key_at() takes). O(1): one hashed probe run. */
const struct hub_app *hub_apptab_find_key(const struct hub_apptab *t,
                                          const char *key, size_t len,
                                          unsigned *pair);
const struct hub_app *hub_apptab_by_key(const struct hub_apptab *t,
                                        const char *key, size_t len);
const struct hub_app *hub_apptab_by_id(const struct hub_apptab *t,
                                       const char *id, size_t len);
static inline const struct hub_app *hub_apptab_get(const struct hub_apptab *t,
                                                   unsigned index)
{
    return index < t->n ? t->apps[index] : NULL;
}

/* What a reload changes, index by index (hub_apptab_diff). */
enum hub_app_change {
    HUB_APP_SAME,      /* the same settings (or a tombstone in both) */
    HUB_APP_ADDED,     /* new in next */
    HUB_APP_REMOVED,   /* gone in next */
    HUB_APP_CHANGED,   /* present in both, settings differ */
};

struct hub_apptab_diff {
    unsigned added, removed, changed, unchanged;
};

/* The change of index i from prev to next (next->n >= prev->n). */
enum hub_app_change hub_apptab_change(const struct hub_apptab *prev,
                                      const struct hub_apptab *next,
                                      unsigned i);
/* Count every index's change. */
void hub_apptab_diff(const struct hub_apptab *prev,
                     const struct hub_apptab *next,
                     struct hub_apptab_diff *out);

#endif
