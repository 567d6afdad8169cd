/*
 * hub/pusher/recover_cluster.h - recovery's subscriptions in a cluster
 * (docs/RECOVERY.md "In a cluster"): what a node knows of a channel is only
 * what it took in, so the starting point of a fresh subscription and the
 * replay of a resumed one come from the channel's stream in Redis, read on
 * the backplane thread (hub_bus_history_read). Until the answer is back the
 * subscription's guard holds every live frame for it (hub/loop/resume.h);
 * the answer then sends lubdub:pos, or the replay and lubdub:resumed, or
 * lubdub:resume_failed and lubdub:pos, and releases what was held above
 * the positions read.
 *
 * The read happens after the node's SUBSCRIBE of the channel was confirmed
 * (a subscription's join waits for it) and after this node's own earlier
 * stream writes (one connection), and every node writes a publication to
 * the stream before it PUBLISHes it: so whatever the read misses, the
 * subscription receives live, and whatever it receives live at or under
 * the positions read, the read had.
 *
 * Thread: the session's loop.
 */
#ifndef HUB_RECOVER_CLUSTER_H
#define HUB_RECOVER_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hub/channel/history.h"

struct hub_frame;
struct hub_session;
struct hub_sub;

/*
 * sub of s to name was just confirmed, in a cluster, on a channel with
 * history: send ok now, guard sub and read the stream. known: the client's
 * position for a resumed subscription, NULL for a fresh one (socks and
 * away_ms then unused).
 */
void hub__recover_cluster_join(struct hub_session *s, struct hub_sub *sub,
                               const char *name, size_t len,
                               struct hub_frame *ok,
                               const struct hub_history_pos *known,
                               const struct hub_history_sockets *socks,
                               uint64_t away_ms);

#endif
