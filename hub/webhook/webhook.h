/*
 * hub/webhook/webhook.h - what every part of the webhook subsystem shares:
 * the event types and their Pusher names, the limits the config loader
 * checks, one webhook of an app (struct hub_wh_conf) and its filter, an
 * app's webhook list (freed and copied in one place), one event as the hub
 * generates it (struct hub_wh_event), and the retry schedule.
 *
 * The subsystem, hub side (no I/O; server/webhook/ owns the sender thread,
 * libcurl, the store and Redis):
 * - hub/webhook/queue.h: the bounded queue the loops and the directory's
 *   edge hook push events into, and those producers;
 * - hub/webhook/engine.h: the sender thread's engine over that queue
 *   (edge delay, batching, filters);
 * - hub/webhook/encode.h: a batch's JSON body;
 * - hub/webhook/wh_stream.h: the pure half of durable cluster webhooks.
 *
 * Thread: any (pure functions and allocation).
 */
#ifndef HUB_WEBHOOK_H
#define HUB_WEBHOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hub_app;


enum hub_wh_type {
    HUB_WH_CHANNEL_OCCUPIED,
    HUB_WH_CHANNEL_VACATED,
    HUB_WH_MEMBER_ADDED,
    HUB_WH_MEMBER_REMOVED,
    HUB_WH_CLIENT_EVENT,
    HUB_WH_CACHE_MISS,
    HUB_WH_N_TYPES
};

#define HUB_WH_BIT(t) (1u << (t))
#define HUB_WH_ALL_TYPES ((1u << HUB_WH_N_TYPES) - 1)

/* Limits checked by the config loader. */
#define HUB_WH_MAX_WEBHOOKS 16     /* per app */
#define HUB_WH_MAX_HEADERS 32      /* per webhook */
#define HUB_WH_MAX_URL 2048
#define HUB_WH_MAX_HEADER_BYTES 4096
/* Pusher's batch window: 250 ms or 20 events. */
#define HUB_WH_BATCH_MS 250
#define HUB_WH_BATCH_EVENTS 20

/* The Pusher name of a type ("channel_occupied"); NULL when out of range. */
const char *hub_wh_type_name(unsigned type);
/* The type named name, or -1. */
int hub_wh_type_parse(const char *name);

/* One webhook of an app. Owned by the app (hub_wh_app_free). */
struct hub_wh_conf {
    char *url;
    unsigned types;            /* HUB_WH_BIT mask, never 0 */
    char *starts_with;         /* filter.channel_name_starts_with; NULL = any */
    char *ends_with;           /* filter.channel_name_ends_with; NULL = any */
    char **headers;            /* "Name: value" lines */
    unsigned n_headers;
};

/* Does this webhook take an event of type on channel? Pure. */
bool hub_wh_matches(const struct hub_wh_conf *w, unsigned type,
                    const char *channel);

/* Free an app's webhook list (the one place it is freed) and zero it. */
void hub_wh_app_free(struct hub_app *app);
/* Give dst a deep copy of src's webhook list, types and batching switch
 * (dst's own list must be empty). 0 or -ENOMEM (dst then has none). */
int hub_wh_app_copy(struct hub_app *dst, const struct hub_app *src);

/* One event as generated. One allocation: the strings follow it. */
struct hub_wh_event {
    struct hub_wh_event *next;
    size_t size;                   /* of the allocation */
    unsigned app;              /* app index */
    uint8_t type;
    const char *channel;
    const char *user_id;       /* member_*, client_event (may be NULL) */
    const char *event;         /* client_event */
    const char *data;          /* client_event: the data as a string */
    const char *socket_id;     /* client_event */
};

/* Build one event (copies every string); NULL when out of memory. */
struct hub_wh_event *hub_wh_event_new(unsigned app, unsigned type,
                                      const char *channel, size_t len,
                                      const char *user_id, const char *event,
                                      const char *data,
                                      const char *socket_id);


#endif
