/*
 * hub/rest/chanhistory.h - GET channels/{name}/events, the HTTP API's read
 * of a channel's history (hub/channel/history.h; docs/PROTOCOL.md 6.2,
 * docs/RECOVERY.md), private to hub/rest/ (hub/rest/channels.c routes it).
 *
 * Thread: the loop that received the request; the item helper is pure.
 */
#ifndef HUB_REST_CHANHISTORY_H
#define HUB_REST_CHANHISTORY_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "hub/rest/handler.h"

struct hub_frame;

/* Events one answer holds at most, and when limit= is not given. */
#define HUB_REST_HISTORY_LIMIT_MAX 1000u
#define HUB_REST_HISTORY_LIMIT_DEFAULT 100u

/*
 * Answer GET channels/{name}/events for the channel name[0..len) (decoded,
 * NUL-terminated): 200 {"events":[...],"complete":b}, 400 for bad since=,
 * after= or limit=, 404 when the app keeps no history for the channel.
 */
void hub_rest_chanhistory_get(const struct hub_rest_req *r, const char *name,
                              size_t len, struct hub_rest_response *out);

/*
 * One kept event as the answer lists it:
 * {"id":id,"event":E,"data":D,"time_ms":time_ms}, E and D taken from the
 * frame f (a channel event as hub_proto_event_frame() built it): D is its
 * data as a string, byte for byte what subscribers got (a string data's
 * value; any other value, a client event's object, as the compact JSON
 * text the frame holds). Owned; NULL when the frame is not a channel event
 * or out of memory. Pure.
 */
json_t *hub_rest_chanhistory_item(const struct hub_frame *f, const char *id,
                                  uint64_t time_ms);

/* The same from a frame's payload p[0..len) (a channel event's JSON text,
 * as a history stream in Redis keeps it). Pure. */
json_t *hub_rest_chanhistory_item_text(const char *p, size_t len,
                                       const char *id, uint64_t time_ms);

#endif
