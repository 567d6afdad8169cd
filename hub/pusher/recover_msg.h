/*
 * hub/pusher/recover_msg.h - the messages recovery sends a session
 * (docs/PROTOCOL.md 9.3): built once with jansson, each a frame of
 * {"event":E,"data":D} with no channel field. Shared by the one-node
 * path (hub/pusher/recover.c) and the cluster's (recover_cluster.c).
 *
 * Thread: the session's loop.
 */
#ifndef HUB_RECOVER_MSG_H
#define HUB_RECOVER_MSG_H

#include <stddef.h>

#include <jansson.h>

#include "hub/channel/history.h"
#include "hub/wire/frame.h"

struct hub_session;

/* {"event":E,"data":D} framed (D stolen; NULL D: NULL); one reference
 * for the caller, NULL when out of memory. */
struct hub_frame *hub__recover_message(const char *event, json_t *data);
/* The same, sent to s (closed 1011 when out of memory). */
void hub__recover_send(struct hub_session *s, const char *event, json_t *data);
/* {"<origin>": seq, ...} of pos; NULL when out of memory. */
json_t *hub__recover_ids(const struct hub_history_pos *pos);
/* lubdub:resume_failed for one channel, counted and logged (debug). */
void hub__recover_failed(struct hub_session *s, const char *name, size_t len,
                         const char *reason);

#endif
