/*
 * hub/channel.h - channels: the loop-local subscriber index, the hub-wide
 * directory (counts and presence members) and cross-loop publication.
 *
 * Local index (struct hub_chanmap): per loop, (app, name) -> the loop's
 * subscribed sessions. A membership (struct hub_sub) sits on both the
 * channel's list and the session's list, so leaving every channel on
 * disconnect is O(own subscriptions). Loop thread only.
 *
 * Directory (struct hub_directory): hub-wide, under one mutex. It counts
 * subscriptions per channel across loops and keeps presence membership per
 * user (not per connection), so member_added / member_removed fire on the
 * 0 <-> 1 edges of a user's connection count, whatever loop they are on.
 * Touched on subscribe, unsubscribe and REST queries, never per message.
 *
 * Publication: hub_publish() hands one sealed frame to every loop: the
 * calling loop delivers at once, the others get it through their inbox.
 * Recipients hold references to the same frame; no per-recipient work but
 * a queue push.
 */
#ifndef HUB_CHANNEL_H
#define HUB_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "hub/frame.h"
#include "hub/inbox.h"
#include "hub/protocol.h"
#include "timer/list.h"

struct hub;
struct hub_loop;
struct hub_session;

struct hub_lchan {
    struct hub_lchan *hnext;
    uint64_t hash;
    unsigned app;
    enum hub_channel_kind kind;
    struct hub_list members;       /* struct hub_sub.chan_link */
    uint32_t n_members;
    uint32_t name_len;
    char name[];
};

struct hub_sub {
    struct hub_list chan_link;
    struct hub_list session_link;
    struct hub_session *s;
    struct hub_lchan *ch;
    char *user_id;                 /* presence only; owned */
    uint64_t joined_seq;           /* presence: directory seq at join */
};

struct hub_chanmap;

struct hub_chanmap *hub_chanmap_create(void);
/* Frees every channel; subscriptions must already be gone. */
void hub_chanmap_destroy(struct hub_chanmap *m);
/* Borrowed; NULL when the loop has no subscriber there. */
struct hub_lchan *hub_chanmap_find(struct hub_chanmap *m, unsigned app,
                                   const char *name, size_t len);
/* Borrowed; created empty when absent. NULL on allocation failure. */
struct hub_lchan *hub_chanmap_get(struct hub_chanmap *m, unsigned app,
                                  const char *name, size_t len);
/* Free ch if it has no members left. */
void hub_chanmap_put(struct hub_chanmap *m, struct hub_lchan *ch);
uint32_t hub_chanmap_count(const struct hub_chanmap *m);

/* Directory. */
struct hub_directory;

struct hub_directory *hub_directory_create(void);
void hub_directory_destroy(struct hub_directory *d);

struct hub_presence_join {
    const char *user_id;           /* canonical string id */
    const char *user_info;         /* JSON text or NULL */
    uint32_t max_members;          /* 0 = unlimited */
    /* Out: */
    bool first;                    /* the user's first connection */
    char *members_json;            /* owned by the caller: {"presence":..} */
    uint64_t seq;                  /* directory seq after this join */
};

/*
 * Count one more subscription of (app, name). For presence channels pass
 * join (else NULL). Returns 0, -ENOSPC (member limit), -ENOMEM.
 */
int hub_directory_join(struct hub_directory *d, unsigned app,
                       const char *name, size_t len,
                       struct hub_presence_join *join);
/* The reverse; *last tells whether the user's last connection left. */
void hub_directory_leave(struct hub_directory *d, unsigned app,
                         const char *name, size_t len, const char *user_id,
                         bool *last);
/*
 * The same; when the user's last connection left, *seq (if not NULL) gets
 * the directory seq of that change, else 0.
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

struct hub_channel_info {
    bool occupied;
    uint32_t subscription_count;
    uint32_t user_count;           /* presence: distinct users */
};

void hub_directory_info(struct hub_directory *d, unsigned app,
                        const char *name, size_t len,
                        struct hub_channel_info *out);
/* Owned: {"<name>":{} or {"user_count":n}, ...} for occupied channels
 * whose name starts with prefix (NULL = all). */
json_t *hub_directory_list(struct hub_directory *d, unsigned app,
                           const char *prefix, bool user_count);
/* Owned: [{"id":"1"},...]; NULL when the channel is unknown. */
json_t *hub_directory_users(struct hub_directory *d, unsigned app,
                            const char *name, size_t len);

/* Publication. */
struct hub_excl {
    bool set;
    uint64_t hi;
    uint32_t lo;
    /* Member events: deliver only to subscriptions with joined_seq below
     * this; 0 = no such filter. */
    uint64_t member_seq;
};

/* Parse "<hi>.<lo>" into ex; -EINVAL when not ^\d+\.\d+$ in range. */
int hub_excl_parse(struct hub_excl *ex, const char *socket_id);

/*
 * Deliver f to every subscriber of (app, name) on every loop, except the
 * excluded socket. from is the calling loop (delivers synchronously) or
 * NULL. Takes its own references; the caller keeps its reference.
 * Returns 0 or -ENOMEM (then nothing was sent to other loops).
 */
int hub_publish(struct hub *h, struct hub_loop *from, unsigned app,
                const char *name, size_t len, struct hub_frame *f,
                const struct hub_excl *excl);

/*
 * Close every session of app signed in as user_id (pusher:signin), on
 * every loop, with pusher:error 4009 and close 4009. from as for
 * hub_publish(). Returns 0 or -ENOMEM (then other loops were not told).
 */
int hub_terminate_user(struct hub *h, struct hub_loop *from, unsigned app,
                       const char *user_id);

/* Deliver to this loop's subscribers only. Returns recipients. */
unsigned hub_deliver_local(struct hub_loop *l, unsigned app, const char *name,
                           size_t len, struct hub_frame *f,
                           const struct hub_excl *excl);

#endif
