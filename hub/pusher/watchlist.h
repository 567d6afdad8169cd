/*
 * hub/pusher/watchlist.h - watchlists on sessions (docs/PROTOCOL.md 4.3): the
 * signed-in user's online state and watchlist in the hub's registry
 * (hub/channel/online.h), and pusher_internal:watchlist_events to watchers.
 *
 * Thread: the session's loop.
 */
#ifndef HUB_WATCHLIST_H
#define HUB_WATCHLIST_H

#include <stdbool.h>

#include <jansson.h>

struct hub_session;

/*
 * s signed in (user_id set, signin_success queued) with user_data ud (a
 * JSON object). Counts s in the registry (once per session), takes the
 * watchlist when ud has one, tells the user's watchers on its first
 * connection, and sends s the watched users that are online. A watchlist
 * that is malformed or over a limit is ignored with a pusher:error (the
 * signin stands). 0, or -ENOMEM when s could not be counted at all.
 */
int hub_watchlist_signin(struct hub_session *s, json_t *ud);
/* s ends (or stops being signed in): on the user's last connection its
 * watchers are told. Idempotent. */
void hub_watchlist_signout(struct hub_session *s);

#endif
