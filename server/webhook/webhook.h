/*
 * server/webhook/webhook.h - webhook delivery, as the rest of server/ sees
 * it: the sender thread started, stopped and reloaded (webhook_send.c and
 * the files server/webhook/webhook_int.h names), its durable store
 * (webhook_store.c: SQLite in WAL mode under --state-dir), and the
 * operator's commands (webhook_admin.c). /stats and /metrics:
 * server/webhook/webhook_metrics.h. docs/WEBHOOKS.md describes the whole.
 *
 * Thread: srv_wh_start/stop on the main thread; everything else on the
 * sender thread, unless it says otherwise.
 */
#ifndef SRV_WEBHOOK_H
#define SRV_WEBHOOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

struct srv;
struct srv_config;

/* The store. */

struct srv_wh_store;

struct srv_wh_row {
    int64_t id;
    const char *app, *url, *idem, *why;  /* why: dead letters only */
    uint64_t created_ms, died_ms;        /* wall clock */
    unsigned attempts, n_events;
    const char *body;
    size_t len;
};

typedef void srv_wh_row_fn(void *ctx, const struct srv_wh_row *r);

/* Open (create) DIR/webhooks.db. 0, or -1 with one line in err. */
int srv_wh_store_open(const char *dir, struct srv_wh_store **out, char *err,
                      size_t errlen);
void srv_wh_store_close(struct srv_wh_store *s);
/* One transaction around many writes: the commit is the durability
 * point (WAL, synchronous=NORMAL). 0 or -1. */
int srv_wh_store_begin(struct srv_wh_store *s);
int srv_wh_store_commit(struct srv_wh_store *s);
/* A new pending batch; its id (> 0) or -1. */
int64_t srv_wh_store_add(struct srv_wh_store *s, const struct srv_wh_row *r);
/* Delivered: forget it. */
int srv_wh_store_done(struct srv_wh_store *s, int64_t id);
/* Give up: move pending id to the dead letters with why. */
int srv_wh_store_dead(struct srv_wh_store *s, int64_t id, uint64_t died_ms,
                      unsigned attempts, const char *why);
/* Every pending row with id > after, oldest first. 0 or -1. */
int srv_wh_store_load(struct srv_wh_store *s, int64_t after,
                      srv_wh_row_fn *fn, void *ctx);
int srv_wh_store_list_dead(struct srv_wh_store *s, srv_wh_row_fn *fn,
                           void *ctx);
/* Move dead letters back to pending ("all" or one id); *n gets how many. */
int srv_wh_store_replay(struct srv_wh_store *s, const char *which,
                        unsigned *n);
/* Move every replayed row (--webhook-replay) to pending with a new retry
 * window from now_wall, calling fn for each with its new id. Inside the
 * caller's transaction. 0 or -1. */
int srv_wh_store_take_replays(struct srv_wh_store *s, uint64_t now_wall,
                              srv_wh_row_fn *fn, void *ctx);
/* Dead letters kept at most (the oldest go first). */
#define SRV_WH_MAX_DEAD_TEXT "10000"
/* Pending rows and the dead letters' count. */
int srv_wh_store_counts(struct srv_wh_store *s, uint64_t *pending,
                        uint64_t *dead);
/* Checkpoint the WAL into the database (fsyncs). */
void srv_wh_store_checkpoint(struct srv_wh_store *s);

/* The sender. */

/* Start the sender when an app has webhooks (logs once whether pending
 * webhooks are durable). Sets srv->hub->webhooks. 0 or -1 (logged). */
int srv_wh_start(struct srv *srv);
/* After the loops are gone: release delayed edges, flush open batches
 * (into the store when durable), send for up to 2 s, stop the thread,
 * free everything. */
void srv_wh_stop(struct srv *srv);

/* Main thread, after a reload (server/reload.c): the sender takes a copy
 * of apps[0..n) (apps[j] has app index idx[j]->index, of n_index) and
 * switches to it on its own thread: webhooks, filters, batching, key and
 * secret. Without a running sender (none since the start, or it failed
 * to start) nothing. */
struct hub_app;
void srv_wh_reload(struct srv *srv, const struct hub_app *apps,
                   struct hub_app *const *idx, unsigned n,
                   unsigned n_index);

/* Main thread, before a reload publishes its apps (same arguments as
 * srv_wh_reload): starts the sender when these are the first
 * webhooks since the start (as srv_wh_start would have: store,
 * streams, srv->hub->webhooks); with --redis the join / leave / reap
 * scripts start queueing in Redis the edges of the apps it adds (or whose
 * webhooks now want edges), before any loop can see them. */
void srv_wh_reload_prepare(struct srv *srv, const struct hub_app *apps,
                           struct hub_app *const *idx, unsigned n,
                           unsigned n_index);

/* The operator's commands (--webhook-dead-letters, --webhook-replay):
 * run against --state-dir and exit. Returns the exit code. */
int srv_wh_admin(const struct srv_config *cfg, FILE *out);

#endif
