/*
 * hub/channel/chanhooks.h - the channel features' hooks on the Pusher
 * paths: what cache channels and subscription counts add to subscribe,
 * leave and the HTTP API's publish (and its info=cache). The call sites in
 * hub/pusher/subscribe.c, hub/rest/events.c and hub/rest/channels.c are
 * one line each; the logic is here, over the stores of hub/channel/cache.h and
 * hub/channel/subcount.h.
 *
 * Cache channels (docs/PROTOCOL.md 3.6): a REST or batch event on a cache
 * channel is kept as the channel's last event (client events are not, as
 * on Pusher); a new subscriber gets it right after its
 * pusher_internal:subscription_succeeded, or pusher:cache_miss when there
 * is none. Subscription counts: for an app with subscription_count on,
 * every subscribe and leave of a public, private or encrypted channel is
 * marked for the coalescer (hub/channel/subcount.h).
 *
 * Thread: the loop's.
 */
#ifndef HUB_CHANHOOKS_H
#define HUB_CHANHOOKS_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "hub/wire/frame.h"
#include "hub/wire/protocol.h"

struct hub_app;
struct hub_loop;
struct hub_session;

/* s's new subscription to name (of kind) was just confirmed; resumed: its
 * missed events are being replayed (recovery), so a cache channel's last
 * event is not sent again. */
void hub_chanhooks_joined(struct hub_session *s, const char *name, size_t len,
                          enum hub_channel_kind kind, bool resumed);
/* A subscription of app to name (of kind) on l just left. */
void hub_chanhooks_left(struct hub_loop *l, const struct hub_app *app,
                        const char *name, size_t len,
                        enum hub_channel_kind kind);
/* f was just published by the HTTP API on (app, name): keep it when name
 * is a cache channel. */
void hub_chanhooks_published(struct hub_loop *l, const struct hub_app *app,
                             const char *name, size_t len,
                             struct hub_frame *f);
/*
 * The HTTP API's "cache" attribute of a channel: {"data":D,"ttl":S} (the
 * cached event's data and its remaining life in whole seconds, rounded
 * up), or JSON null when nothing is cached. Owned; NULL when out of
 * memory.
 */
json_t *hub_chanhooks_cache_info(struct hub_loop *l, const struct hub_app *app,
                                 const char *name, size_t len);

#endif
