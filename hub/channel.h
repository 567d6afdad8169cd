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

#include "hub/chanmap.h"
#include "hub/directory.h"
#include "hub/frame.h"
#include "hub/inbox.h"
#include "hub/protocol.h"
#include "timer/list.h"

struct hub;
struct hub_loop;
struct hub_session;

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
