/*
 * hub/webhook/wh_stream.h - the pure half of durable cluster webhooks
 * (docs/WEBHOOKS.md, "In a cluster"): what a Redis stream entry holds and
 * how it becomes a webhook event, the consumer group name of an endpoint,
 * the ids receivers deduplicate by, and the bounds. No I/O here:
 * server/webhook/webhook_stream*.c talk to Redis on the sender thread.
 *
 * Thread: any (pure functions).
 */
#ifndef HUB_WH_STREAM_H
#define HUB_WH_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "hub/webhook/webhook.h"

struct hub_wh_event;

/* Entries an app's stream holds at most by default
 * (--webhook-stream-max); past it an XADD is refused and counted (the
 * "dropped" field of <prefix>:whn:<app>). */
#define HUB_WHS_MAX_ENTRIES 100000
/* Entries read per XREADGROUP (and so per batch at most). */
#define HUB_WHS_READ_COUNT 20
/* The consumer group name: "wh-" and 16 hex digits. */
#define HUB_WHS_GROUP_LEN 20

/* The consumer group of the endpoint url (FNV-1a 64 of the URL, so every
 * node names it alike and a changed URL is a new group). */
void hub_wh_stream_group(const char *url, char out[HUB_WHS_GROUP_LEN]);

/*
 * The event an entry's fields describe: fields[0..n) alternate name and
 * value (lens their lengths), as XREADGROUP returns them: "name" (the
 * Pusher event name, required), "channel" (required), "user_id", "event",
 * "data", "socket_id". NULL when a required field is missing, the name is
 * unknown, or out of memory.
 */
struct hub_wh_event *hub_wh_stream_event(unsigned app,
                                         const char *const *fields,
                                         const size_t *lens, size_t n);

/* The event id of an entry: "<app id>-<entry id>", the same on every node
 * and every resend (0 or -1 when it does not fit). */
int hub_wh_stream_event_id(const char *app_id, const char *entry_id, char *out,
                           size_t len);

/* ev's socket id (client events; NULL otherwise): for server/, whose
 * files may not name a field called socket_id (unit_no_session_fields). */
static inline const char *hub_wh_event_socket_id(const struct hub_wh_event *ev)
{
    return ev->socket_id;
}

#endif
