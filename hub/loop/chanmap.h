/*
 * hub/loop/chanmap.h - a loop's local channel index: (app, name) -> the loop's
 * subscribed sessions.
 *
 * A membership (struct hub_sub) sits on both the channel's list and the
 * session's list, so leaving every channel on disconnect is O(own
 * subscriptions). A channel exists while it has members: the subscribe
 * path gets it (creating it empty), links its membership, and puts it back
 * when it leaves or failed (put frees it only once it has no member).
 *
 * Invariants (hub_chanmap_check): the table's (hub/base/chantab.h); each
 * channel's n_members is the length of its members list, and each member
 * points back at it.
 *
 * Thread: the owning loop only.
 */
#ifndef HUB_CHANMAP_H
#define HUB_CHANMAP_H

#include <stddef.h>
#include <stdint.h>

#include "hub/base/chantab.h"
#include "hub/wire/protocol.h"
#include "timer/list.h"

struct hub_session;
struct hub_sub_pending;

struct hub_lchan {
    struct hub_chan_node node;     /* key: app, name (points at name[]) */
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
    /* hub/pusher/subscribe.c: the directory answers this subscription waits for
     * (an asynchronous join: the subscription itself, then ch is NULL
     * and the sub is on the session's list only, or a presence
     * re-subscribe); NULL when none. Costs no heap: the allocation stays
     * in the same malloc size class. */
    struct hub_sub_pending *pending;
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

/* Walk the index and check the invariants above: 0 or -EFAULT. */
int hub_chanmap_check(const struct hub_chanmap *m);

#endif
