/*
 * server/webhook/webhook_send.c - the webhook sender thread
 * (server/webhook/webhook.h): start, stop and reload, the thread's
 * round, libcurl's multi handle, and each answer: delivered, retried
 * with backoff, or dead-lettered. The other files of the sender are named
 * in server/webhook/webhook_int.h.
 *
 * One thread, never a loop: it pops the hub's webhook queue, runs the
 * engine (hub/webhook/engine.h: delay, batching, filters, encoding), keeps one
 * FIFO of batches per endpoint (an endpoint is one webhook of one app),
 * and sends the head of each FIFO with libcurl's multi interface: at most
 * one request in flight per endpoint, so per-endpoint order holds, and
 * any number of endpoints in parallel, so a slow one holds up only
 * itself. Each endpoint keeps its easy handle, so its connection is kept
 * alive between requests.
 *
 * A batch is written to the store (when there is one) the moment the
 * engine makes it and deleted when a 2xx answers it; a failure retries
 * after hub_backoff_ms() (hub/base/backoff.h) until the retry window since its creation is
 * over, then the batch moves to the dead letters. Response bodies are
 * read and thrown away up to a cap; past it the transfer is cut (the
 * status already read decides). Memory: the batches held are bounded by
 * --webhook-max-pending bytes; a batch past it is dropped, counted and
 * logged once per episode.
 *
 * Thread: start, stop and the reload calls on the main thread; the rest
 * on the sender thread.
 */
#include "server/webhook/webhook.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hub/base/backoff.h"
#include "hub/app/app.h"
#include "hub/cluster/cluster.h"
#include "hub/base/rng.h"
#include "hub/loop/backplane.h"
#include "hub/loop/loop.h"
#include "server/lws/srv.h"
#include "server/webhook/webhook_int.h"
#include "server/webhook/webhook_stream.h"

static uint64_t rnd(struct srv_wh *wh)
{
    return hub_xorshift64s(&wh->rng);
}

static void latency(struct srv_wh_ep *ep, uint64_t ms)
{
    unsigned i = 0;

    while (i < N_LAT && (double)ms / 1000.0 > srv__wh_lat_bounds_s[i])
        i++;
    atomic_fetch_add(&ep->lat[i], 1);
    atomic_fetch_add(&ep->lat_sum_ms, ms);
    atomic_fetch_add(&ep->lat_count, 1);
}

static void finished(struct srv_wh *wh, CURL *easy, CURLcode res,
                     uint64_t now)
{
    struct srv_wh_ep *ep = NULL;
    struct srv_wh_batch *b;
    long code = 0;
    uint64_t wall = srv__wh_wall_ms();

    curl_easy_getinfo(easy, CURLINFO_PRIVATE, (char **)&ep);
    curl_multi_remove_handle(wh->multi, easy);
    curl_slist_free_all(ep->hdrs);
    ep->hdrs = NULL;
    ep->in_flight = false;
    b = ep->head;
    curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code);
    if ((res == CURLE_OK || res == CURLE_WRITE_ERROR) && code >= 200 &&
        code < 300) {
        atomic_fetch_add(&ep->sent, 1);
        latency(ep, wall > b->created_ms ? wall - b->created_ms : 0);
        if (ep->failing)
            srv_log_event(HUB_LOG_INFO, 0,
                          HUB_LOG_F(.event = "webhook_up", .app = ep->app->id,
                                    .url = ep->shown),
                          "webhook %s (app %s): up again",
                          ep->shown, ep->app->id);
        ep->failing = false;
        atomic_store(&ep->up, true);
        if (wh->store && b->id) {
            srv__wh_store_tx(wh);
            if (srv_wh_store_done(wh->store, b->id))
                atomic_fetch_add(&wh->store_errors, 1);
        }
        if (b->acks)
            srv_wh_stream_done(wh, ep, b);
        srv__wh_ep_pop(ep);
        return;
    }
    if (res != CURLE_OK && res != CURLE_WRITE_ERROR)
        snprintf(ep->last_err, sizeof(ep->last_err), "%s",
                 curl_easy_strerror(res));
    else
        snprintf(ep->last_err, sizeof(ep->last_err), "HTTP %ld", code);
    atomic_fetch_add(&ep->failed, 1);
    atomic_store(&ep->up, false);
    if (!ep->failing)
        srv_log_event(HUB_LOG_WARN, 0,
                      HUB_LOG_F(.event = "webhook_failed", .app = ep->app->id,
                                .url = ep->shown, .reason = ep->last_err),
                      "webhook %s (app %s): failing (%s); retrying with backoff",
                      ep->shown, ep->app->id, ep->last_err);
    ep->failing = true;
    b->attempts++;
    if (b->acks && !srv_wh_stream_holds(wh, ep)) {
        /* The app's lease went to another node, which sends the batch's
         * entries (still pending in Redis) from now on. */
        srv__wh_ep_pop(ep);
        return;
    }
    if (wall >= b->created_ms + wh->cfg->webhook_retry_window_ms) {
        srv_log_event(HUB_LOG_WARN, 0,
                      HUB_LOG_F(.event = "webhook_dead_letter",
                                .app = ep->app->id, .url = ep->shown,
                                .reason = ep->last_err),
                      "webhook %s (app %s): batch %s dead-lettered after %u "
                      "attempts (%s)",
                      ep->shown, ep->app->id, b->idem, b->attempts,
                      ep->last_err);
        if (wh->store && b->acks && !b->id)
            /* From the cluster's stream: not stored yet. */
            srv__wh_store_add(wh, ep, b);
        if (wh->store && b->id) {
            /* Committed now, not with the round: dead_lettered must never
             * count a letter that --webhook-dead-letters (another process,
             * reading the store) cannot list yet. Rare; the round's other
             * writes go with it. */
            srv__wh_store_tx(wh);
            if (srv_wh_store_dead(wh->store, b->id, wall, b->attempts,
                                  ep->last_err) ||
                srv_wh_store_commit(wh->store))
                atomic_fetch_add(&wh->store_errors, 1);
        }
        if (b->acks)
            srv_wh_stream_done(wh, ep, b);
        srv__wh_ep_pop(ep);
        /* Counted once it has left the queue (ep_pop's depth first): a
         * reader of dead_lettered before queue_depth never sees a batch
         * both dead-lettered and still queued. */
        atomic_fetch_add(&ep->dead, 1);
        return;
    }
    b->next_ms = now + hub_backoff_ms(b->attempts,
                                      wh->cfg->webhook_backoff_max_ms < 1000
                                          ? wh->cfg->webhook_backoff_max_ms
                                          : 1000,
                                      wh->cfg->webhook_backoff_max_ms,
                                      rnd(wh));
}

static uint64_t mono_ms(void)
{
    return srv_now_ms();
}

/* Shutdown: how long the sender keeps sending after the loops are gone. */
#define SRV_WH_STOP_GRACE_MS 2000

/* Is a batch in flight, or due and not failing (worth the grace)? */
static bool any_ready(const struct srv_wh *wh)
{
    for (unsigned i = 0; i < wh->n_eps; i++) {
        const struct srv_wh_ep *ep = wh->eps[i];

        if (ep->in_flight || (ep->head && !ep->failing))
            return true;
    }
    return false;
}


/* A view a reload handed over, applied. After the pop: an event of an
 * app a reload added was queued after the view that knows the app was
 * handed over. */
static void take_view(struct srv_wh *wh)
{
    struct srv_wh_view *nv;

    pthread_mutex_lock(&wh->mu);
    nv = wh->next_view;
    wh->next_view = NULL;
    pthread_mutex_unlock(&wh->mu);
    if (nv)
        srv__wh_view_apply(wh, nv, false);
}

/* The popped events (taken) through the stream and the engine; returns
 * how long they may wait (ms) before the next round is due. */
static uint64_t events_round(struct srv_wh *wh, struct hub_wh_event *list,
                             uint64_t now, uint64_t wall, bool stopping)
{
    uint64_t due, wait = 1000;
    struct hub_wh_engine_stats es;

    /* With --redis, client events and cache misses go to the app's
     * stream (server/webhook/webhook_stream_add.c); the rest to the engine. */
    if (wh->whs && !stopping)
        list = srv_wh_stream_take(wh, list);
    hub_wh_engine_advance(wh->eng, now, wall);
    hub_wh_engine_feed(wh->eng, list, now);
    due = hub_wh_engine_advance(wh->eng, now, wall);
    if (due < wait)
        wait = due;
    if (wh->whs && !stopping) {
        due = srv_wh_stream_round(wh, now);
        if (due < wait)
            wait = due;
    }
    hub_wh_engine_get_stats(wh->eng, &es);
    atomic_store(&wh->edges_cancelled, es.cancelled);
    atomic_store(&wh->edges_delayed, es.delayed);
    atomic_store(&wh->events_batched, es.events);
    atomic_store(&wh->events_oom, es.oom);
    return wait;
}

/* Start every idle endpoint's head that is due, collect the finished
 * transfers; returns wait lowered to the next head's backoff. */
static uint64_t sends_round(struct srv_wh *wh, uint64_t now, uint64_t wait)
{
    int running = 0, left;
    CURLMsg *msg;

    for (unsigned i = 0; i < wh->n_eps; i++) {
        struct srv_wh_ep *ep = wh->eps[i];

        if (ep->in_flight || !ep->head)
            continue;
        if (ep->head->next_ms <= now)
            srv__wh_request_start(ep, now);
        else if (ep->head->next_ms - now < wait)
            wait = ep->head->next_ms - now;
    }
    curl_multi_perform(wh->multi, &running);
    while ((msg = curl_multi_info_read(wh->multi, &left)))
        if (msg->msg == CURLMSG_DONE)
            finished(wh, msg->easy_handle, msg->data.result, now);
    /* A send made ready by a finish above starts next round. */
    for (unsigned i = 0; i < wh->n_eps; i++)
        if (!wh->eps[i]->in_flight && wh->eps[i]->head &&
            wh->eps[i]->head->next_ms <= now)
            wait = 0;
    return wait;
}

/* The store's side of a round: replayed dead letters taken (every 2 s),
 * the round's writes committed, the WAL checkpointed (every 1 s when
 * written). */
static void store_replays(struct srv_wh *wh, uint64_t now)
{
    if (!wh->store || now - wh->last_replay_ms < 2000)
        return;
    /* Dead letters an operator replayed (--webhook-replay). */
    wh->last_replay_ms = now;
    srv__wh_store_tx(wh);
    if (srv_wh_store_take_replays(wh->store, srv__wh_wall_ms(),
                                  srv__wh_on_row, wh))
        atomic_fetch_add(&wh->store_errors, 1);
}

static void store_commit(struct srv_wh *wh, uint64_t now)
{
    if (!wh->store)
        return;
    if (srv_wh_store_commit(wh->store))
        atomic_fetch_add(&wh->store_errors, 1);
    if (wh->dirty && now - wh->last_checkpoint_ms >= 1000) {
        srv_wh_store_checkpoint(wh->store);
        wh->last_checkpoint_ms = now;
        wh->dirty = false;
    }
}

/* Sleep until the next deadline (wait ms, at most 1 s) or a wake. While a
 * batch is open, events that arrive can wait a tick: the loops wake this
 * thread once per batch's worth instead of once per event (one wake, and
 * one preemption of a loop sharing the core, per client event
 * otherwise). Stopping: at once. */
static void sleep_round(struct srv_wh *wh, uint64_t wait, bool stopping)
{
    uint32_t room = stopping ? 0 : hub_wh_engine_room(wh->eng);
    uint32_t queued = hub_wh_queue_set_room(&wh->q, room);

    if (queued && queued >= (room ? room : 1))
        wait = 0;
    else if (room && wait > HUB_WH_LAZY_MS)
        wait = HUB_WH_LAZY_MS;
    curl_multi_poll(wh->multi, NULL, 0, (int)(wait > 1000 ? 1000 : wait),
                    NULL);
}

static void *sender_main(void *arg)
{
    struct srv_wh *wh = arg;
    uint64_t stop_deadline = 0;

    for (;;) {
        uint64_t now = mono_ms(), wall = srv__wh_wall_ms(), wait;
        struct hub_wh_event *list = hub_wh_queue_pop_all(&wh->q);
        bool stopping = atomic_load(&wh->stop);

        take_view(wh);
        wait = events_round(wh, list, now, wall, stopping);
        if (stopping && !stop_deadline) {
            /* Everything the engine holds becomes batches (stored when
             * durable), then a short grace to send what can be sent. */
            hub_wh_engine_flush(wh->eng, wall);
            stop_deadline = now + SRV_WH_STOP_GRACE_MS;
        }
        if (stop_deadline && (now >= stop_deadline || !any_ready(wh)))
            break;
        store_replays(wh, now);
        wait = sends_round(wh, now, wait);
        store_commit(wh, now);
        atomic_store(&wh->held_bytes_pub, wh->held_bytes);
        sleep_round(wh, wait, stop_deadline != 0);
    }
    if (wh->store) {
        srv_wh_store_commit(wh->store);
        srv_wh_store_checkpoint(wh->store);
    }
    return NULL;
}

static void wake(void *ctx)
{
    curl_multi_wakeup(ctx);
}

static void wh_free(struct srv_wh *wh)
{
    srv_wh_stream_free(wh);
    for (unsigned i = 0; i < wh->n_eps; i++)
        srv__wh_ep_retire(wh, wh->eps[i], NULL);
    hub_wh_engine_destroy(wh->eng);
    if (wh->multi)
        curl_multi_cleanup(wh->multi);
    srv_wh_store_close(wh->store);
    hub_wh_queue_fini(&wh->q);
    free(wh->eps);
    free(wh->ep_base);
    srv__wh_view_free(wh->view);
    srv__wh_view_free(wh->next_view);
    pthread_mutex_destroy(&wh->mu);
    free(wh);
}

static _Atomic(struct srv_wh *) the_wh; /* for /stats; set once: at start,
                                           or by the first reload with webhooks */

struct srv_wh *srv__wh_running(void)
{
    return atomic_load_explicit(&the_wh, memory_order_acquire);
}

/* Does a webhook of app want an edge type (occupied, vacated, added,
 * removed)? */
static bool wants_edges(unsigned types)
{
    for (unsigned t = HUB_WH_CHANNEL_OCCUPIED; t <= HUB_WH_MEMBER_REMOVED; t++)
        if (types & HUB_WH_BIT(t))
            return true;
    return false;
}

/*
 * Main thread: tell the cluster which apps' edges its join / leave / reap
 * scripts queue in Redis (docs/WEBHOOKS.md, "In a cluster"): those of the
 * loops' queue (hub_wh_queue_wants, as published last, for n_index app
 * indices), or (with apps) the union of the current set and apps[0..n)
 * (their indices idx[j]->index), which a reload publishes before the
 * loops can see an added app. 0 or -1 when out of memory.
 */
static int cluster_mark(struct srv_wh *wh, const struct hub_app *apps,
                        struct hub_app *const *idx, unsigned n,
                        unsigned n_index)
{
    struct hub_cluster *c = wh->srv->cluster;
    unsigned na = n_index;
    bool *in;
    int rc;

    if (!wh->whs || !c)
        return 0;
    in = calloc(na ? na : 1, sizeof(*in));
    if (!in)
        return -1;
    for (unsigned i = 0; i < na; i++)
        for (unsigned t = HUB_WH_CHANNEL_OCCUPIED;
             !apps && t <= HUB_WH_MEMBER_REMOVED; t++)
            if (hub_wh_queue_wants(&wh->q, i, t))
                in[i] = true;
    for (unsigned j = 0; apps && j < n; j++) {
        unsigned i = idx[j]->index;

        if (i < na && apps[j].enabled && wants_edges(apps[j].webhook_types))
            in[i] = true;
    }
    for (unsigned i = 0; apps && i < na; i++)
        if (hub_cluster_wh_redis(c, i, NULL))
            in[i] = true;
    rc = hub_cluster_set_wh(c, in, na, wh->cfg->webhook_delay_ms,
                            wh->cfg->webhook_stream_max)
             ? -1
             : 0;
    free(in);
    return rc;
}

/*
 * Main thread: a sender for apps[0..n_apps) (indices as srv__wh_view_new
 * takes them), its view applied, its thread not started. NULL when out
 * of memory (logged).
 */
static struct srv_wh *wh_new(struct srv *srv, const struct hub_app *apps,
                             struct hub_app *const *idx, unsigned n_apps,
                             unsigned n_index)
{
    const struct srv_config *cfg = srv->cfg;
    struct srv_wh *wh = calloc(1, sizeof(*wh));
    struct srv_wh_view *view;
    uint64_t boot = 0;

    if (!wh || pthread_mutex_init(&wh->mu, NULL)) {
        free(wh);
        srv_log_event(HUB_LOG_ERR, 0, HUB_LOG_F(.event = "out_of_memory"),
                      "webhooks: out of memory");
        return NULL;
    }
    view = srv__wh_view_new(apps, idx, n_apps, n_index);
    if (!view || hub_wh_queue_init(&wh->q, HUB_WH_QUEUE_EVENTS, view->apps,
                                   view->n)) {
        srv__wh_view_free(view);
        pthread_mutex_destroy(&wh->mu);
        free(wh);
        srv_log_event(HUB_LOG_ERR, 0, HUB_LOG_F(.event = "out_of_memory"),
                      "webhooks: out of memory");
        return NULL;
    }
    wh->srv = srv;
    wh->cfg = cfg;
    wh->push = srv__wh_ep_push;
    atomic_init(&wh->stop, false);
    if (getrandom(&boot, sizeof(boot), 0) != sizeof(boot))
        boot = srv__wh_wall_ms() ^ (uint64_t)getpid() << 32;
    wh->rng = boot | 1;
    wh->multi = curl_multi_init();
    wh->eng = hub_wh_engine_create(NULL, 0, cfg->webhook_delay_ms, boot,
                                   mono_ms(), srv__wh_on_emit, wh);
    /* With --redis the cluster directory decides each edge once,
     * cluster-wide, and its edges, client events and cache misses go
     * through Redis Streams while Redis answers (docs/WEBHOOKS.md, "In a
     * cluster"). */
    if (wh->eng)
        hub_wh_engine_set_shared(wh->eng, cfg->redis != NULL);
    if (!wh->multi || !wh->eng || srv_wh_stream_create(wh)) {
        srv__wh_view_free(view);
        wh_free(wh);
        srv_log_event(HUB_LOG_ERR, 0, HUB_LOG_F(.event = "out_of_memory"),
                      "webhooks: out of memory");
        return NULL;
    }
    curl_multi_setopt(wh->multi, CURLMOPT_MAX_HOST_CONNECTIONS, 8L);
    if (srv__wh_view_apply(wh, view, true)) {
        wh_free(wh);
        return NULL;
    }
    return wh;
}

/* Main thread: with --state-dir, open the store and load its pending
 * rows and replays; log where pending webhooks are kept. n: the
 * endpoints. 0 or -1 (logged). */
static int store_start(struct srv_wh *wh, unsigned n)
{
    const struct srv_config *cfg = wh->cfg;
    char err[512];

    if (!cfg->state_dir) {
        srv_log_event(HUB_LOG_WARN, 0,
                      HUB_LOG_F(.event = "webhook_start", .reason = "memory"),
                      "webhooks: %u endpoints; no --state-dir, so pending "
                      "webhooks are kept in memory only and lost on restart",
                      n);
        return 0;
    }
    /* One level, as --check-config allowed (its parent exists). */
    if (mkdir(cfg->state_dir, 0700) && errno != EEXIST) {
        srv_log_event(HUB_LOG_ERR, 0,
                      HUB_LOG_F(.event = "start_failed",
                                .reason = "state_dir"),
                      "--state-dir %s: %s", cfg->state_dir,
                      strerror(errno));
        return -1;
    }
    if (srv_wh_store_open(cfg->state_dir, &wh->store, err, sizeof(err))) {
        srv_log_event(HUB_LOG_ERR, 0,
                      HUB_LOG_F(.event = "start_failed",
                                .reason = "webhook_store"),
                      "%s", err);
        return -1;
    }
    if (srv_wh_store_load(wh->store, 0, srv__wh_on_row, wh) ||
        srv_wh_store_begin(wh->store) ||
        srv_wh_store_take_replays(wh->store, srv__wh_wall_ms(),
                                  srv__wh_on_row, wh) ||
        srv_wh_store_commit(wh->store)) {
        srv_log_event(HUB_LOG_ERR, 0,
                      HUB_LOG_F(.event = "start_failed",
                                .reason = "webhook_store"),
                      "webhooks: cannot read the store in %s",
                      cfg->state_dir);
        return -1;
    }
    srv_log_event(HUB_LOG_INFO, 0,
                  HUB_LOG_F(.event = "webhook_start", .reason = "state_dir"),
                  "webhooks: %u endpoints; pending batches are kept in "
                  "%s/webhooks.db (%" PRIu64 " bytes loaded%s)",
                  n, cfg->state_dir, wh->held_bytes,
                  atomic_load(&wh->orphans)
                  ? "; rows for endpoints no longer configured stay in "
                  "the store"
                  : "");
    return 0;
}

/*
 * Main thread: make the sender for apps[0..n) (indices as view_new takes
 * them) and start its thread. At start (before the loops run) or from the
 * first reload that brings webhooks (the loops run: the queue and the_wh
 * are published last, atomically). n_eps: the apps' webhooks. 0 or -1
 * (logged; nothing is left behind but libcurl's global init).
 */
static int wh_start(struct srv *srv, const struct hub_app *apps,
                    struct hub_app *const *idx, unsigned n_apps,
                    unsigned n_index, unsigned n)
{
    const struct srv_config *cfg = srv->cfg;
    struct srv_wh *wh;

    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        srv_log_event(HUB_LOG_ERR, 0,
                      HUB_LOG_F(.event = "start_failed", .reason = "libcurl"),
                      "webhooks: libcurl did not initialise");
        return -1;
    }
    if (!(wh = wh_new(srv, apps, idx, n_apps, n_index)))
        return -1;
    if (store_start(wh, n)) {
        wh_free(wh);
        return -1;
    }
    wh->q.wake = wake;
    wh->q.wake_ctx = wh->multi;
    if (!hub_dir_set_edge_hook(srv->hub, hub_wh_dir_edge, &wh->q))
        srv_log_event(HUB_LOG_WARN, 0,
                      HUB_LOG_F(.event = "webhook_start",
                                .reason = "no_edges"),
                      "webhooks: this backplane reports no "
                      "channel edges; occupied, vacated and "
                      "member events are not sent");
    if (wh->whs && srv->cluster) {
        if (cluster_mark(wh, NULL, NULL, 0, wh->view->n)) {
            hub_dir_set_edge_hook(srv->hub, NULL, NULL);
            wh_free(wh);
            srv_log_event(HUB_LOG_ERR, 0, HUB_LOG_F(.event = "out_of_memory"),
                          "webhooks: out of memory");
            return -1;
        }
        srv_log_event(HUB_LOG_INFO, 0,
                      HUB_LOG_F(.event = "webhook_start",
                                .reason = "redis_streams"),
                      "webhooks: durable through redis streams (%s:wh:<app>); "
                      "one node per app sends, holding %s:whl:<app>",
                      cfg->redis_prefix, cfg->redis_prefix);
    }
    if (pthread_create(&wh->thread, NULL, sender_main, wh)) {
        hub_dir_set_edge_hook(srv->hub, NULL, NULL);
        wh_free(wh);
        srv_log_event(HUB_LOG_ERR, 0,
                      HUB_LOG_F(.event = "start_failed",
                                .reason = "webhook_thread"),
                      "webhooks: cannot start the sender thread");
        return -1;
    }
    /* Named apart from the loops (lubdub-N) for top -H and the benchmarks'
     * per-thread CPU. */
    pthread_setname_np(wh->thread, "wh-sender");
    atomic_store_explicit(&srv->hub->webhooks, &wh->q, memory_order_release);
    atomic_store_explicit(&the_wh, wh, memory_order_release);
    return 0;
}

int srv_wh_start(struct srv *srv)
{
    const struct srv_config *cfg = srv->cfg;
    unsigned n = 0;

    for (unsigned i = 0; i < cfg->n_apps; i++)
        n += cfg->apps[i].n_webhooks;
    if (!n) {
        if (cfg->state_dir)
            srv_log_event(HUB_LOG_INFO, 0,
                          HUB_LOG_F(.event = "webhook_start",
                                    .reason = "none"),
                          "webhooks: none configured; "
                          "--state-dir is used once a reload "
                          "brings some");
        return 0;
    }
    return wh_start(srv, cfg->apps, NULL, cfg->n_apps, cfg->n_apps, n);
}

void srv_wh_stop(struct srv *srv)
{
    struct srv_wh *wh = the_wh;
    uint64_t lost = 0;

    if (!wh)
        return;
    hub_dir_set_edge_hook(srv->hub, NULL, NULL);
    srv->hub->webhooks = NULL;
    atomic_store(&wh->stop, true);
    curl_multi_wakeup(wh->multi);
    pthread_join(wh->thread, NULL);
    if (!wh->store)
        for (unsigned i = 0; i < wh->n_eps; i++)
            lost += atomic_load(&wh->eps[i]->depth);
    if (lost)
        srv_log_event(HUB_LOG_WARN, 0,
                      HUB_LOG_F(.event = "webhook_lost", .reason = "exit"),
                      "webhooks: %" PRIu64 " undelivered batches "
                      "lost at exit (no --state-dir)", lost);
    the_wh = NULL;
    wh_free(wh);
    curl_global_cleanup();
}

void srv_wh_reload(struct srv *srv, const struct hub_app *apps,
                   struct hub_app *const *idx, unsigned n,
                   unsigned n_index)
{
    struct srv_wh *wh = the_wh;
    struct srv_wh_view *v, *stale;

    (void)srv;
    if (!wh)
        return;      /* none, or the sender did not start (logged) */
    v = srv__wh_view_new(apps, idx, n, n_index);
    if (!v) {
        srv_log_event(HUB_LOG_ERR, 0,
                      HUB_LOG_F(.event = "reload_failed",
                                .reason = "webhooks"),
                      "webhooks: reload not applied, the "
                      "endpoints stay as they were (out of memory)");
        return;
    }
    pthread_mutex_lock(&wh->mu);
    stale = wh->next_view;          /* never taken: a newer one wins */
    wh->next_view = v;
    pthread_mutex_unlock(&wh->mu);
    srv__wh_view_free(stale);
    /* The sender frees v only for a newer view, which only this thread
     * makes: v can be read here. Published after the hand-over, so an
     * event of a new app reaches the sender after its view. */
    if (hub_wh_queue_set_wants(&wh->q, v->apps, v->n))
        srv_log_event(HUB_LOG_ERR, 0,
                      HUB_LOG_F(.event = "reload_failed",
                                .reason = "webhooks"),
                      "webhooks: out of memory: the loops keep "
                      "the event types of before the reload");
    /* With --redis, from now on exactly the reloaded apps' edges go to
     * Redis: a removed or disabled app's no longer do. */
    else if (cluster_mark(wh, NULL, NULL, 0, v->n))
        srv_log_event(HUB_LOG_ERR, 0,
                      HUB_LOG_F(.event = "reload_failed",
                                .reason = "webhooks"),
                      "webhooks: out of memory: the cluster's "
                      "scripts keep queueing the edges of the "
                      "apps of before the reload");
    curl_multi_wakeup(wh->multi);
}

void srv_wh_reload_prepare(struct srv *srv, const struct hub_app *apps,
                           struct hub_app *const *idx, unsigned n,
                           unsigned n_index)
{
    struct srv_wh *wh = the_wh;
    unsigned eps = 0;

    /* The first webhooks since the start: the sender starts now, before
     * the reloaded apps reach the loops, with the store (--state-dir) and
     * the streams (--redis) as at start; srv_wh_reload then hands
     * it the same apps. A sender that fails to start is tried again by
     * the next reload. */
    for (unsigned j = 0; !wh && j < n; j++)
        if (apps[j].enabled)
            eps += apps[j].n_webhooks;
    if (!wh && eps) {
        srv_log_event(HUB_LOG_INFO, 0,
                      HUB_LOG_F(.event = "webhook_start", .reason = "reload"),
                      "webhooks: the reloaded apps have the "
                      "first webhooks since the start; starting "
                      "the sender");
        if (wh_start(srv, apps, idx, n, n_index, eps)) {
            srv_log_event(HUB_LOG_ERR, 0,
                          HUB_LOG_F(.event = "reload_failed",
                                    .reason = "webhooks"),
                          "webhooks: the sender did not start; "
                          "nothing is sent until a reload starts "
                          "it");
            return;
        }
        wh = the_wh;
    }
    if (wh && cluster_mark(wh, apps, idx, n, n_index))
        srv_log_event(HUB_LOG_ERR, 0,
                      HUB_LOG_F(.event = "reload_failed",
                                .reason = "webhooks"),
                      "webhooks: out of memory: edges of apps "
                      "this reload adds go to this node's own "
                      "engine");
}
