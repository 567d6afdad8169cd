/*
 * hub/channel/subcount.h - pusher_internal:subscription_count, coalesced.
 *
 * For an app with subscription_count on, every subscribe and unsubscribe
 * of a non-presence channel marks the channel changed. The first mark
 * puts the channel in a hub-wide set, owned by the marking loop, due one
 * sub_count_interval later on that loop's list (one wheel timer per loop,
 * armed for the list's head). Later marks, from any loop, only flag it.
 * When it is due and flagged, the owner reads the hub-wide count from the
 * directory, publishes one event to the channel's subscribers on every
 * loop, and keeps the channel one more interval; due and not flagged, it
 * leaves the set. So a channel's events are at least an interval apart
 * hub-wide however many subscriptions come and go, and each carries the
 * count as of its send.
 *
 * Several processes (a backplane with count_changed, docs/SCALING.md):
 * when a channel is due after a change of this process's own, the
 * process first tells the others with subscribers of it
 * (hub_bus_count_changed); a process told so marks the channel as if it
 * had changed here (hub_subcount_remote). Either way the count sent is
 * the cluster-wide one, read without waiting (hub_dir_query_async), and
 * only to this process's subscribers; a process without subscribers of
 * the channel reads nothing.
 *
 * A mark that cannot allocate is dropped (counted in
 * subscription_count_dropped); the next change of that channel sends the
 * count again.
 *
 * A hub without the feature (hub/hub.c lists it) marks nothing.
 *
 * Thread: the feature's hooks as hub/loop/feature.h says; the rest on the
 * loop's thread but where said; the pending set has its own mutex.
 */
#ifndef HUB_SUBCOUNT_H
#define HUB_SUBCOUNT_H

#include <stddef.h>

struct hub;
struct hub_feature;
struct hub_loop;

/* The feature (hub/loop/feature.h): the hub-wide pending set, and each
 * loop's timer and list of the channels it will send. */
extern const struct hub_feature hub_subcount_feature;

/* The subscription count of (app, name) changed on loop l. */
void hub_subcount_changed(struct hub_loop *l, unsigned app, const char *name,
                          size_t len);

/* Any thread (the backplane's): another process changed the count of
 * (app, name) (docs/SCALING.md). Marks it on one of the loops, as a
 * change of this process would, except that it is not told back to the
 * others. Dropped when out of memory. */
void hub_subcount_remote(struct hub *h, unsigned app, const char *name,
                         size_t len);

/* Any thread: as if this process's own subscribers had changed the
 * count of (app, name): read anew and tell the others (after the
 * cluster directory's rejoin, whose totals may have moved). */
void hub_subcount_refresh(struct hub *h, unsigned app, const char *name,
                          size_t len);

/* Build the event for count (tests). Owned frame, NULL when out of
 * memory. */
struct hub_frame *hub_subcount_frame(const char *channel, unsigned count);

#endif
