/*
 * hub/webhook/webhook.h - webhook events: what an app's webhooks ask for, the
 * events the hub generates for them, the bounded queue loop threads put
 * them in, and the engine the sender thread runs over that queue (edge
 * delay, batching, filters, encoding). No I/O here: server/webhook/webhook_send.c
 * owns the thread, libcurl and the store.
 *
 * Who calls what:
 * - The directory reports channel and presence edges through its edge
 *   hook (hub/loop/backplane.h), under its own lock, in the order the counts
 *   moved: hub_webhook_dir_edge() is that hook. Loop threads add client
 *   events (hub_webhook_client_event) and cache misses
 *   (hub_webhook_cache_miss). All of them only allocate and push under
 *   the queue's mutex (a leaf lock, never held across anything else): a
 *   loop never waits. A full queue drops the event and counts it.
 * - The sender thread pops the queue (hub_whq_pop_all) and feeds the
 *   engine (hub_wh_engine_*), which calls back with one encoded body per
 *   (webhook, batch).
 *
 * Thread: the queue functions from any thread; the engine on one thread.
 */
#ifndef HUB_WEBHOOK_H
#define HUB_WEBHOOK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "timer/wheel.h"

struct hub;
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
/* How late the sender may take a queued event while it has a batch open
 * (hub_whq_set_room): the engine's wheel tick, so batch windows and edge
 * delays keep the precision they had. */
#define HUB_WH_LAZY_MS 10
/* The queue from the loops to the sender: events and bytes at most. */
#define HUB_WH_QUEUE_EVENTS 100000
#define HUB_WH_QUEUE_BYTES (32u << 20)

/* The Pusher name of a type ("channel_occupied"); NULL when out of range. */
const char *hub_wh_type_name(unsigned type);
/* The type named name, or -1. */
int hub_wh_type_parse(const char *name);

/* One webhook of an app. Owned by the app (hub_app_webhooks_free). */
struct hub_webhook_conf {
    char *url;
    unsigned types;            /* HUB_WH_BIT mask, never 0 */
    char *starts_with;         /* filter.channel_name_starts_with; NULL = any */
    char *ends_with;           /* filter.channel_name_ends_with; NULL = any */
    char **headers;            /* "Name: value" lines */
    unsigned n_headers;
};

/* Does this webhook take an event of type on channel? Pure. */
bool hub_webhook_matches(const struct hub_webhook_conf *w, unsigned type,
                         const char *channel);

/* Free an app's webhook list (the one place it is freed) and zero it. */
void hub_app_webhooks_free(struct hub_app *app);
/* Give dst a deep copy of src's webhook list, types and batching switch
 * (dst's own list must be empty). 0 or -ENOMEM (dst then has none). */
int hub_app_webhooks_copy(struct hub_app *dst, const struct hub_app *src);

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

/*
 * The queue between the loops (and the directory) and the sender thread.
 * Bounded by cap events and max_bytes bytes (HUB_WH_QUEUE_BYTES); a push
 * past either frees the event and counts it in dropped.
 */
struct hub_whq_wants {
    struct hub_whq_wants *older;   /* the ones it replaced */
    unsigned n;
    unsigned types[];              /* HUB_WH_BIT mask per app index */
};

struct hub_whq {
    pthread_mutex_t mu;
    struct hub_wh_event *head, **tail;
    uint32_t len, cap;             /* events queued, and at most */
    size_t bytes, max_bytes;       /* their size, and at most */
    /* The types each app wants, read by any thread without the lock. A
     * reload publishes a new array (hub_whq_set_wants); the old ones stay
     * on the list until hub_whq_fini, so a reader never sees one freed. */
    _Atomic(struct hub_whq_wants *) wants;
    void (*wake)(void *ctx);       /* any thread; must not block */
    void *wake_ctx;
    /* Under mu: 0, a push into an empty queue wakes the sender (the
     * default); n > 0, only the push that makes the queue n long does
     * (hub_whq_set_room). */
    uint32_t room;
    atomic_uint_fast64_t enqueued, dropped;
};

int hub_whq_init(struct hub_whq *q, uint32_t cap, const struct hub_app *apps,
                 unsigned n_apps);
/* The types wanted become those of apps[0..n_apps) (the sender's copy
 * after a reload; index = app index). Any thread; 0 or -ENOMEM (the old
 * ones stay). */
int hub_whq_set_wants(struct hub_whq *q, const struct hub_app *apps,
                      unsigned n_apps);
/* Frees what is still queued. */
void hub_whq_fini(struct hub_whq *q);
/* Does app want events of type at all (any of its webhooks)? */
bool hub_whq_wants(const struct hub_whq *q, unsigned app, unsigned type);
/* Push ev (taken in every case); 0 or -ENOSPC (dropped, counted). */
int hub_whq_push(struct hub_whq *q, struct hub_wh_event *ev);
/* Take everything queued, oldest first; NULL when empty. */
struct hub_wh_event *hub_whq_pop_all(struct hub_whq *q);
/*
 * The sender, before it sleeps: room 0 = wake me on the first event (it
 * must be handled at once); room n > 0 = I look at the queue by myself
 * within HUB_WH_LAZY_MS, wake me earlier only when n events are queued
 * (hub_wh_engine_room: then a batch may be full). Returns how many events
 * are queued now: a push made before the call did not wake the sender
 * when it should have under the new setting, so it must not sleep when
 * that is >= room (or > 0 with room 0).
 */
uint32_t hub_whq_set_room(struct hub_whq *q, uint32_t room);

/* The directory's edge hook (ctx = the struct hub_whq *). */
struct hub_dir_edge;
void hub_webhook_dir_edge(void *ctx, const struct hub_dir_edge *e);

/*
 * Loop threads: a client event on a private or presence channel, and the
 * cache channel's cache_miss (for the cache-channel work: call it when a
 * subscription to a cache- channel finds nothing cached). Nothing happens
 * unless the hub has a webhook queue and the app wants the type.
 */
void hub_webhook_client_event(struct hub *h, unsigned app,
                              const char *channel, size_t len,
                              const char *event, const char *data,
                              const char *socket_id, const char *user_id);
void hub_webhook_cache_miss(struct hub *h, unsigned app, const char *channel,
                            size_t len);

/*
 * The engine (sender thread). Edge events pass through the delay: a
 * channel_vacated / member_removed waits delay_ms and is cancelled,
 * together with the occupied / added that would follow it, when the
 * channel is occupied / the user rejoins before then. What passes goes
 * into the app's batch; a batch is flushed after HUB_WH_BATCH_MS or at
 * HUB_WH_BATCH_EVENTS events (at once when the app's batching is off),
 * and each webhook of the app gets one body with the events that match it.
 */
struct hub_wh_out {
    unsigned app, hook;        /* app index, webhook index in the app */
    char *body;                /* owned by the callee from here on */
    size_t len;
    unsigned n_events;
    const char *batch_id;      /* idempotency key; borrowed for the call */
};

typedef void hub_wh_emit_fn(void *ctx, struct hub_wh_out *out);

struct hub_wh_engine;

/*
 * apps borrowed for the engine's life. boot is a random prefix of every
 * event and batch id (unique across restarts). NULL when out of memory.
 */
struct hub_wh_engine *hub_wh_engine_create(const struct hub_app *apps,
                                           unsigned n_apps, uint64_t delay_ms,
                                           uint64_t boot, uint64_t now_ms,
                                           hub_wh_emit_fn *emit, void *ctx);
/*
 * The edges come from a directory shared by several nodes (--redis): each
 * edge is decided once, on one node, so a closing edge whose opening one
 * another node sent passes (at once: the delay and its cancelling work on
 * the pairs one node saw both halves of). Before the first feed.
 */
void hub_wh_engine_set_shared(struct hub_wh_engine *e, bool shared);
void hub_wh_engine_destroy(struct hub_wh_engine *e);
/*
 * A reload: every open batch is flushed under the old apps first (their
 * webhooks and filters made them), then apps[0..n_apps) (borrowed from
 * here on; n_apps never below the old count: indices are kept) decide
 * new events. Delayed edges keep waiting and go into the new batches.
 * 0, or -ENOMEM with nothing changed.
 */
int hub_wh_engine_set_apps(struct hub_wh_engine *e, const struct hub_app *apps,
                           unsigned n_apps, uint64_t wall_ms);
/* Feed a list of events (taken). wall_ms is the time_ms of a batch. */
void hub_wh_engine_feed(struct hub_wh_engine *e, struct hub_wh_event *list,
                        uint64_t now_ms);
/* Run due delays and batch flushes. Returns ms until the next is due
 * (UINT64_MAX when none). */
uint64_t hub_wh_engine_advance(struct hub_wh_engine *e, uint64_t now_ms,
                               uint64_t wall_ms);
/* Shutdown: closing edges still in their delay are released, then every
 * open batch is flushed. */
void hub_wh_engine_flush(struct hub_wh_engine *e, uint64_t wall_ms);

struct hub_wh_engine_stats {
    uint64_t cancelled;        /* delayed edges reversed in the window */
    uint64_t delayed;          /* delayed edges waiting now */
    uint64_t events;           /* events put into batches */
    uint64_t oom;              /* events lost to out of memory */
};
void hub_wh_engine_get_stats(const struct hub_wh_engine *e,
                             struct hub_wh_engine_stats *out);
/*
 * How many more events may wait in the queue before the sender must feed
 * them: the room left in the fullest open batch (they could all be its),
 * or 0 when the next event must be fed at once: no batch is open (the
 * event would open one and start its window) or an app with webhooks
 * sends without batching.
 */
unsigned hub_wh_engine_room(const struct hub_wh_engine *e);

/*
 * Encode one body: {"time_ms":wall_ms,"events":[...]} with every event of
 * evs[0..n) that w matches (all when w is NULL), each with its "id"
 * ("<boot hex>-<seqs[i]>"). *n_out gets how many went in; NULL when none
 * matched or out of memory (*n_out is 0 for none).
 */
char *hub_wh_encode(const struct hub_wh_event *const *evs,
                    const uint64_t *seqs, unsigned n,
                    const struct hub_webhook_conf *w, uint64_t boot,
                    uint64_t wall_ms, size_t *len, unsigned *n_out);

/* As hub_wh_encode, with each event's id given as a string (ids[i], at
 * most HUB_WH_MAX_ID - 1 bytes are used): the cluster's stream entries
 * (server/webhook/webhook_stream.c) carry ids made from their Redis entry id. */
#define HUB_WH_MAX_ID 160
char *hub_wh_encode_ids(const struct hub_wh_event *const *evs,
                        const char *const *ids, unsigned n,
                        const struct hub_webhook_conf *w, uint64_t wall_ms,
                        size_t *len, unsigned *n_out);

/*
 * The retry schedule: the delay before attempt number attempt + 1 after
 * attempt failures (attempt >= 1): base_ms * 2^(attempt-1), capped at
 * max_ms, then jittered into [d/2, d] by rnd (any 64-bit value).
 */
uint64_t hub_wh_backoff_ms(unsigned attempt, uint64_t base_ms, uint64_t max_ms,
                           uint64_t rnd);

#endif
