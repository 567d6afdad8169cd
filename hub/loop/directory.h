/*
 * hub/loop/directory.h - the hub-wide channel directory, in-process: counts
 * subscriptions per channel across every loop and keeps presence
 * membership per user (not per connection), so member_added and
 * member_removed fire on the 0 <-> 1 edges of a user's connection count,
 * whatever loop the connections are on. Touched on subscribe, unsubscribe
 * and REST queries, never per message.
 *
 * This is the default implementation of the directory side of the
 * backplane (hub/loop/backplane.h); the hub reaches it only through that seam,
 * tests may use it directly.
 *
 * Thread: any; one mutex per directory.
 */
#ifndef HUB_DIRECTORY_H
#define HUB_DIRECTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct hub_presence_join {
    const char *user_id;           /* canonical string id */
    const char *user_info;         /* JSON text or NULL */
    uint32_t max_members;          /* 0 = unlimited */
    /* Out: */
    bool first;                    /* the user's first connection */
    char *members_json;            /* owned by the caller: {"presence":..} */
    uint64_t seq;                  /* directory seq after this join */
    /* Out, set by a directory that delivers member_added/member_removed
     * for this channel to every subscriber itself (a cluster directory):
     * the hub then publishes no member_added for this join. The
     * in-process directory leaves it false. */
    bool dir_events;
};

struct hub_channel_info {
    bool occupied;
    uint32_t subscription_count;
    uint32_t user_count;           /* presence: distinct users */
};

struct hub_directory;

/*
 * Edges: the 0 <-> 1 moves of a channel's subscription count and of a
 * presence user's connection count. The directory calls its edge hook for
 * each, under its lock, in the order the counts moved, so whoever listens
 * sees one ordered stream whatever loops moved them. The hook must not
 * block or call back into the directory.
 */
enum hub_dir_edge_kind {
    HUB_DIR_CHANNEL_FIRST,         /* first subscription: occupied */
    HUB_DIR_CHANNEL_LAST,          /* last one left: vacated */
    HUB_DIR_MEMBER_FIRST,          /* user's first connection: added */
    HUB_DIR_MEMBER_LAST,           /* user's last one left: removed */
};

struct hub_dir_edge {
    enum hub_dir_edge_kind kind;
    unsigned app;
    const char *name;              /* borrowed for the call */
    size_t len;
    const char *user_id;           /* member edges; borrowed */
};

typedef void hub_dir_edge_fn(void *ctx, const struct hub_dir_edge *e);

/* Install (fn NULL: remove) the edge hook. Before the loops start. */
void hub_directory_set_edge_hook(struct hub_directory *d, hub_dir_edge_fn *fn,
                                 void *ctx);

struct hub_directory *hub_directory_create(void);
void hub_directory_destroy(struct hub_directory *d);

/*
 * Count one more subscription of (app, name). For presence channels pass
 * join (else NULL). Returns 0, -ENOSPC (member limit), -ENOMEM.
 */
int hub_directory_join(struct hub_directory *d, unsigned app,
                       const char *name, size_t len,
                       struct hub_presence_join *join);
/*
 * The reverse; *last (if not NULL) tells whether the user's last
 * connection left, and then *seq (if not NULL) gets the directory seq of
 * that change, else 0.
 *
 * Sequence: every presence membership change (a user's first join, last
 * leave) takes the next value of one hub-wide counter, under the
 * directory's mutex. A member event carries the seq of its change, and a
 * subscriber joined at seq J gets only events with seq > J: the older ones
 * are already in (or rightly absent from) the member list it was sent, even
 * if they reach its loop's inbox after it joined.
 */
void hub_directory_leave_seq(struct hub_directory *d, unsigned app,
                             const char *name, size_t len,
                             const char *user_id, bool *last, uint64_t *seq);

/*
 * Take the next value of the seq counter above (under the mutex), as a
 * membership change does, and return it. For a directory that wraps this
 * one and delivers member events itself: it numbers its own deliveries in
 * the same node-local space that joined_seq and skip.member_seq use, so a
 * member list (j->seq) and later events keep their order.
 */
uint64_t hub_directory_take_seq(struct hub_directory *d);

/*
 * Visit the members of presence channel (app, name) under the mutex:
 * fn(ctx, user_id, user_info or NULL, connections) for each. Returns the
 * number visited (0 when the channel is unknown). fn must not call back.
 */
unsigned hub_directory_members(struct hub_directory *d, unsigned app,
                               const char *name, size_t len,
                               void (*fn)(void *ctx, const char *uid,
                                          const char *info, uint32_t conns),
                               void *ctx);

/*
 * Visit every channel (chan(ctx, app, name, len, subscriptions)) and,
 * right after each, its members (member(ctx, app, name, len, uid, info,
 * connections)), under the mutex: a consistent snapshot of the whole
 * directory (a cluster directory re-registers it, docs/SCALING.md). The
 * callbacks must not call back into the directory.
 */
void hub_directory_foreach(
    struct hub_directory *d,
    void (*chan)(void *ctx, unsigned app, const char *name, size_t len,
                 uint32_t subs),
    void (*member)(void *ctx, unsigned app, const char *name, size_t len,
                   const char *uid, const char *info, uint32_t conns),
    void *ctx);

void hub_directory_info(struct hub_directory *d, unsigned app,
                        const char *name, size_t len,
                        struct hub_channel_info *out);
/* Owned: {"<name>":{} or {"user_count":n}, ...} for occupied channels
 * whose name starts with prefix (NULL = all). */
json_t *hub_directory_list(struct hub_directory *d, unsigned app,
                           const char *prefix, bool user_count);
/* Owned: [{"id":"1","user_info":"<its JSON text>"?},...] (user_info when
 * the member has one), empty when the channel is unknown; NULL when
 * out of memory. */
json_t *hub_directory_users(struct hub_directory *d, unsigned app,
                            const char *name, size_t len);

/* These functions as the directory ops of the backplane (impl = a struct
 * hub_directory *; destroy = hub_directory_destroy). */
extern const struct hub_directory_ops hub_directory_local_ops;

#endif
