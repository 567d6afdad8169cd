/*
 * hub/pusher/subscribe.h - channel membership of a Pusher session, private to the
 * Pusher layer (hub/pusher/pusher.c and hub/pusher/subscribe.c): subscribe and
 * unsubscribe, the sign-in user channel, leaving everything, and the
 * presence member events. hub/pusher/pusher.h is the public face; this
 * module is below it and below hub/pusher/watchlist.c (it includes
 * neither), so the three make no cycle.
 *
 * Thread: the session's loop only.
 */
#ifndef HUB_SUBSCRIBE_H
#define HUB_SUBSCRIBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hub_frame;
struct hub_msg;
struct hub_session;
struct hub_sub;

/* pusher:subscribe; answers with subscription_succeeded or _error. */
void hub_pusher_subscribe(struct hub_session *s, const struct hub_msg *m);
/* pusher:unsubscribe; a channel s is not in is ignored. */
void hub_pusher_unsubscribe(struct hub_session *s, const char *name,
                            size_t len);
/* s's subscription to name, or NULL. O(subscriptions of s). */
struct hub_sub *hub_pusher_find_sub(struct hub_session *s, const char *name,
                                    size_t len);
/* Join s to #server-to-user-<id> (local index only: REST queries do not
 * list these channels). 0 or -ENOMEM. */
int hub_pusher_join_user_channel(struct hub_session *s, const char *id);

/* Publish f to channel on every loop, except s itself; member_seq as in
 * struct hub_skip (0 for anything but presence member events); batch for a
 * client event of the read in progress (struct hub_pub_req). 0, or
 * -ENOMEM when it reached no loop (hub_publish). */
int hub_pusher_publish(struct hub_session *s, const char *channel,
                       size_t len, struct hub_frame *f, uint64_t member_seq,
                       bool batch);

/* Leave every channel (disconnect); emits member_removed where due. */
void hub_pusher_leave_all(struct hub_session *s);

/* The frame of {"event":E,"channel":C (NULL: none),"data":"<text as a
 * JSON string>"}, one reference for the caller; NULL when out of memory. */
struct hub_frame *hub_pusher_string_frame(const char *event,
                                          const char *channel,
                                          const char *text);

#endif
