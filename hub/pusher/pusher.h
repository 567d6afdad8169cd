/*
 * hub/pusher/pusher.h - the Pusher Channels v7 session protocol on top of a
 * session: handshake, pings, subscriptions (public, private, encrypted,
 * presence), client events, user sign-in (pusher:signin, which joins the
 * session to #server-to-user-<id>), and leaving everything on disconnect.
 *
 * Thread: the session's loop only.
 */
#ifndef HUB_PUSHER_H
#define HUB_PUSHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hub/app/app.h"
#include "hub/base/log.h" /* transitional: callers that only log include hub/base/log.h */

struct hub_session;
struct hub_session_hooks;

/* After hub_session_init(): bind the app and send connection_established
 * (or pusher:error + close: 4003 if the app is disabled, 4004 if it is at
 * its max_connections, counted hub-wide in the index's hub_app_live). */
void hub_pusher_open(struct hub_session *s, const struct hub_app *app);

/*
 * One complete inbound text message (reassembled). Never trusts the peer:
 * bad input is answered with pusher:error, counted and logged, never a
 * crash. Returns 0, or -EINVAL when the message was rejected.
 */
int hub_pusher_on_message(struct hub_session *s, const char *text, size_t len,
                          uint64_t now_ms);

/*
 * A WebSocket upgrade was accepted: uri is the request path (uri_len
 * bytes, NUL-terminated; NULL when the transport had none), protocol the
 * ?protocol= the client asked for (-1 = none). The pusher-js path is
 * /app/{key}?protocol=7&client=js&version=8.x. Finds the app and opens
 * (hub_pusher_open), or errors and closes: 4001 for an unknown key (one
 * rate-limited line), 4007 for a protocol outside 5-7.
 */
void hub_pusher_connect(struct hub_session *s, const char *uri,
                        size_t uri_len, int protocol);

/* hub_config.session_hooks for a Pusher hub: at fini, leave every
 * channel (hub_pusher_leave_all, hub/pusher/subscribe.h). */
extern const struct hub_session_hooks hub_pusher_hooks;

#endif
