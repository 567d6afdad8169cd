/*
 * hub/channel/online.h - the hub-wide registry of signed-in users and their
 * watchlists (docs/PROTOCOL.md 4.3).
 *
 * Per (app, user id): how many connections are signed in as that user on
 * any loop, the users it watches, and the reverse index (who watches it).
 * A user is online while that count is above zero; the 0 -> 1 and 1 -> 0
 * edges are decided here, once, under the registry's mutex, and reported
 * to the user's watchers through a callback that runs under the same mutex,
 * so two edges of one user are reported in the order they happened, from
 * whatever loop.
 *
 * A watchlist belongs to the user, not to one connection: a signin that
 * carries one replaces the user's list, a signin without one keeps it, and
 * the list goes when the user's last connection does. Only online users
 * watch, so every watcher reported is online.
 *
 * With several nodes (hub/loop/backplane.h dir->online, while Redis is up) the
 * registry still counts this process's connections and links, but hands
 * each change to the directory (cb->shared), which decides the edges
 * cluster-wide and tells the watchers itself (docs/SCALING.md,
 * "Watchlists and online state"); the local edges are the answer while
 * the broker is away.
 *
 * Touched on signin and on a signed-in session's end, never per message.
 * Pure: no session, loop or frame; the caller turns the callbacks into
 * messages. A hub gets its registry from the feature hub_online_feature
 * (hub/loop/feature.h), found with hub_online_of(). Thread: any; one
 * mutex.
 */
#ifndef HUB_ONLINE_H
#define HUB_ONLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hub;
struct hub_feature;
struct hub_online;

struct hub_watchlist;

/* The feature that gives each hub its registry (hub/hub.c lists it). */
extern const struct hub_feature hub_online_feature;

/* h's registry (borrowed for the hub's life); NULL when h has none. */
struct hub_online *hub_online_of(const struct hub *h);

/* What the registry reports. Both run under the registry's mutex: they
 * must not call back into it (and should only queue). */
struct hub_online_cb {
    /* user went online (true) or offline (false); watcher watches it. */
    void (*edge)(void *ctx, unsigned app, const char *watcher,
                 const char *user, bool online);
    /* At signin: one of the signing user's watched users that is online. */
    void (*initial)(void *ctx, const char *user);
    void *ctx;
    /*
     * Optional: a registry shared by several processes (the cluster's,
     * hub/loop/backplane.h dir->online). Called under the mutex, in the order
     * of the changes: at every signin (first: the user's first connection
     * here; w: the signin's watchlist, NULL when it carried none) and at
     * the user's last signout here (signin false). True when it tells the
     * watchers and the signing user itself: edge and initial are then not
     * called for this change.
     */
    bool (*shared)(void *ctx, unsigned app, const char *user, bool signin,
                   bool first, const struct hub_watchlist *w);
};

/* A signin's watchlist. ids: distinct, non-empty strings (the caller
 * validates); the user's own id is skipped. */
struct hub_watchlist {
    const char *const *ids;
    size_t n;
    bool replace;          /* false: the signin carried no watchlist */
    uint32_t max_watchers; /* watchers of one user; 0 = unlimited */
};

struct hub_online *hub_online_create(void);
void hub_online_destroy(struct hub_online *o);

/*
 * One signin of (app, user): new_conn counts a connection (false for a
 * connection signing in again as the same user). On the user's first
 * connection its watchers get edge(online). With w->replace the user's
 * watchlist becomes w's ids. Then initial() for every watched user online.
 * Returns 0; -ENOMEM (nothing changed, nothing reported); -ENOSPC when one
 * of the ids already has max_watchers watchers (*over = its index; nothing
 * changed, nothing reported).
 */
int hub_online_signin(struct hub_online *o, unsigned app, const char *user,
                      bool new_conn, const struct hub_watchlist *w,
                      const struct hub_online_cb *cb, size_t *over);
/*
 * One connection of (app, user) ended. On its last, the user's watchers
 * get edge(offline) and its watchlist goes. Never fails.
 */
void hub_online_signout(struct hub_online *o, unsigned app, const char *user,
                        const struct hub_online_cb *cb);

/*
 * Every online user (conns > 0) with the ids it watches (borrowed for the
 * call; NULL, 0 when out of memory), under the mutex; begin(ctx) first,
 * under the mutex too (a snapshot's generation: changes reported through
 * cb->shared before it are in the visit, those after are not), with
 * bctx.
 */
void hub_online_visit(struct hub_online *o, void (*begin)(void *bctx),
                      void *bctx,
                      void (*user)(void *ctx, unsigned app, const char *id,
                                   const char *const *ids, size_t n),
                      void *ctx);

/* For tests and /stats: the user's connection count (0 = offline). */
uint32_t hub_online_conns(struct hub_online *o, unsigned app,
                          const char *user);
/* Records held (online or watched users); 0 when nothing is left. */
size_t hub_online_records(struct hub_online *o);
/* Check the invariants (every watch link has its reverse, no empty record
 * kept, counts match): 0 or -EFAULT. For tests. */
int hub_online_check(struct hub_online *o);

#endif
