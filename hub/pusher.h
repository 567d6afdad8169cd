/*
 * hub/pusher.h - the Pusher Channels v7 session protocol on top of a
 * session: handshake, pings, subscriptions (public, private, encrypted,
 * presence), client events, user sign-in (pusher:signin, which joins the
 * session to #server-to-user-<id>), and leaving everything on disconnect.
 *
 * Thread: the session's loop only.
 */
#ifndef HUB_PUSHER_H
#define HUB_PUSHER_H

#include <stddef.h>
#include <stdint.h>

#include "hub/app.h"
#include "hub/log.h" /* transitional: callers that only log include hub/log.h */

struct hub_session;

/* After hub_session_init(): bind the app and send connection_established
 * (or pusher:error + close: 4003 if the app is disabled, 4004 if it is at
 * its max_connections, counted hub-wide in hub->app_sessions). */
void hub_pusher_open(struct hub_session *s, const struct hub_app *app);

/*
 * One complete inbound text message (reassembled). Never trusts the peer:
 * bad input is answered with pusher:error, counted and logged, never a
 * crash. Returns 0, or -EINVAL when the message was rejected.
 */
int hub_pusher_on_message(struct hub_session *s, const char *text, size_t len,
                          uint64_t now_ms);

/* Leave every channel (disconnect); emits member_removed where due. */
void hub_pusher_leave_all(struct hub_session *s);

#endif
