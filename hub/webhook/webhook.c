/*
 * hub/webhook/webhook.c - webhook events, their queue and the sender thread's
 * engine (hub/webhook/webhook.h).
 *
 * The edge delay. The directory reports edges under its lock, so the
 * queue holds them in the order the counts moved, whichever loop moved
 * them. The engine keeps, per (app, channel) and per (app, channel, user),
 * what the receiver has been told: "reported" (occupied / present). An
 * occupied edge on a reported key can only follow a vacated edge that is
 * still waiting: both cancel, nothing is sent (a page refresh). A vacated
 * edge on a reported key waits delay_ms on the engine's own timing wheel
 * and is sent when it expires; an edge on a key never reported (its
 * opening edge was dropped by a full queue) is dropped too, so the
 * receiver never sees a vacated without its occupied. The state lives
 * only on the sender thread: no cross-thread cancellation, no generation
 * to compare, because the one ordered stream is the truth.
 */
#include "hub/webhook/webhook.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "hub/app/app.h"
#include "hub/loop/directory.h"
#include "hub/base/hash.h"
#include "hub/base/json.h"
#include "hub/base/json_escape.h"
#include "hub/loop/loop.h"
#include "timer/list.h"

static const char *const type_names[HUB_WH_N_TYPES] = {
    "channel_occupied", "channel_vacated", "member_added",
    "member_removed",   "client_event",    "cache_miss",
};

const char *hub_wh_type_name(unsigned type)
{
    return type < HUB_WH_N_TYPES ? type_names[type] : NULL;
}

int hub_wh_type_parse(const char *name)
{
    for (unsigned i = 0; i < HUB_WH_N_TYPES; i++)
        if (!strcmp(name, type_names[i]))
            return (int)i;
    return -1;
}

static bool has_suffix(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);

    return a >= b && memcmp(s + a - b, suf, b) == 0;
}

bool hub_webhook_matches(const struct hub_webhook_conf *w, unsigned type,
                         const char *channel)
{
    if (type >= HUB_WH_N_TYPES || !(w->types & HUB_WH_BIT(type)))
        return false;
    if (w->starts_with &&
        strncmp(channel, w->starts_with, strlen(w->starts_with)) != 0)
        return false;
    if (w->ends_with && !has_suffix(channel, w->ends_with))
        return false;
    return true;
}

void hub_app_webhooks_free(struct hub_app *app)
{
    for (unsigned i = 0; i < app->n_webhooks; i++) {
        struct hub_webhook_conf *w = &app->webhooks[i];

        free(w->url);
        free(w->starts_with);
        free(w->ends_with);
        for (unsigned j = 0; j < w->n_headers; j++)
            free(w->headers[j]);
        free(w->headers);
    }
    free(app->webhooks);
    app->webhooks = NULL;
    app->n_webhooks = 0;
    app->webhook_types = 0;
}

int hub_app_webhooks_copy(struct hub_app *dst, const struct hub_app *src)
{
    dst->webhook_batching = src->webhook_batching;
    if (!src->n_webhooks)
        return 0;
    dst->webhooks = calloc(src->n_webhooks, sizeof(*dst->webhooks));
    if (!dst->webhooks)
        return -ENOMEM;
    dst->n_webhooks = src->n_webhooks;
    dst->webhook_types = src->webhook_types;
    for (unsigned i = 0; i < src->n_webhooks; i++) {
        const struct hub_webhook_conf *s = &src->webhooks[i];
        struct hub_webhook_conf *d = &dst->webhooks[i];

        d->types = s->types;
        d->url = strdup(s->url);
        d->starts_with = s->starts_with ? strdup(s->starts_with) : NULL;
        d->ends_with = s->ends_with ? strdup(s->ends_with) : NULL;
        d->headers = s->n_headers ? calloc(s->n_headers, sizeof(char *))
                                  : NULL;
        if (!d->url || (s->starts_with && !d->starts_with) ||
            (s->ends_with && !d->ends_with) || (s->n_headers && !d->headers))
            goto oom;
        d->n_headers = s->n_headers;
        for (unsigned j = 0; j < s->n_headers; j++)
            if (!(d->headers[j] = strdup(s->headers[j])))
                goto oom;
    }
    return 0;
oom:
    hub_app_webhooks_free(dst);
    return -ENOMEM;
}

struct hub_wh_event *hub_wh_event_new(unsigned app, unsigned type,
                                      const char *channel, size_t len,
                                      const char *user_id, const char *event,
                                      const char *data, const char *socket_id)
{
    size_t lu = user_id ? strlen(user_id) + 1 : 0;
    size_t le = event ? strlen(event) + 1 : 0;
    size_t ld = data ? strlen(data) + 1 : 0;
    size_t ls = socket_id ? strlen(socket_id) + 1 : 0;
    size_t size = sizeof(struct hub_wh_event) + len + 1 + lu + le + ld + ls;
    struct hub_wh_event *ev = malloc(size);
    char *p;

    if (!ev)
        return NULL;
    memset(ev, 0, sizeof(*ev));
    ev->size = size;
    ev->app = app;
    ev->type = (uint8_t)type;
    p = (char *)(ev + 1);
    memcpy(p, channel, len);
    p[len] = '\0';
    ev->channel = p;
    p += len + 1;
#define COPY(field, src, l)                                                    \
    if (src) {                                                                 \
        memcpy(p, src, l);                                                     \
        ev->field = p;                                                         \
        p += l;                                                                \
    }
    COPY(user_id, user_id, lu)
    COPY(event, event, le)
    COPY(data, data, ld)
    COPY(socket_id, socket_id, ls)
#undef COPY
    return ev;
}

/* The queue. */

int hub_whq_init(struct hub_whq *q, uint32_t cap, const struct hub_app *apps,
                 unsigned n_apps)
{
    memset(q, 0, sizeof(*q));
    if (pthread_mutex_init(&q->mu, NULL))
        return -ENOMEM;
    q->tail = &q->head;
    q->cap = cap ? cap : 1;
    q->max_bytes = HUB_WH_QUEUE_BYTES;
    atomic_init(&q->wants, NULL);
    if (hub_whq_set_wants(q, apps, n_apps)) {
        pthread_mutex_destroy(&q->mu);
        return -ENOMEM;
    }
    atomic_init(&q->enqueued, 0);
    atomic_init(&q->dropped, 0);
    return 0;
}

static void free_list(struct hub_wh_event *ev)
{
    while (ev) {
        struct hub_wh_event *next = ev->next;

        free(ev);
        ev = next;
    }
}

int hub_whq_set_wants(struct hub_whq *q, const struct hub_app *apps,
                      unsigned n_apps)
{
    struct hub_whq_wants *w =
        malloc(sizeof(*w) + (n_apps ? n_apps : 1) * sizeof(unsigned));

    if (!w)
        return -ENOMEM;
    w->n = n_apps;
    for (unsigned i = 0; i < n_apps; i++)
        w->types[i] = apps[i].webhook_types;
    /* Only the main thread (start, reload) publishes: no lost update. */
    w->older = atomic_load_explicit(&q->wants, memory_order_relaxed);
    atomic_store_explicit(&q->wants, w, memory_order_release);
    return 0;
}

void hub_whq_fini(struct hub_whq *q)
{
    struct hub_whq_wants *w = atomic_load(&q->wants);

    while (w) {
        struct hub_whq_wants *older = w->older;

        free(w);
        w = older;
    }
    atomic_store(&q->wants, NULL);
    free_list(q->head);
    q->head = NULL;
    pthread_mutex_destroy(&q->mu);
}

bool hub_whq_wants(const struct hub_whq *q, unsigned app, unsigned type)
{
    const struct hub_whq_wants *w =
        q ? atomic_load_explicit(&((struct hub_whq *)q)->wants,
                                 memory_order_acquire)
          : NULL;

    return w && app < w->n && (w->types[app] & HUB_WH_BIT(type));
}

int hub_whq_push(struct hub_whq *q, struct hub_wh_event *ev)
{
    bool wake;

    ev->next = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->len >= q->cap || q->bytes + ev->size > q->max_bytes) {
        pthread_mutex_unlock(&q->mu);
        free(ev);
        atomic_fetch_add_explicit(&q->dropped, 1, memory_order_relaxed);
        return -ENOSPC;
    }
    *q->tail = ev;
    q->tail = &ev->next;
    q->len++;
    q->bytes += ev->size;
    /* One wake per batch's worth while the sender has a batch open (it
     * looks by itself every HUB_WH_LAZY_MS then), else per empty queue. */
    wake = q->room ? q->len == q->room : q->len == 1;
    pthread_mutex_unlock(&q->mu);
    atomic_fetch_add_explicit(&q->enqueued, 1, memory_order_relaxed);
    if (wake && q->wake)
        q->wake(q->wake_ctx);
    return 0;
}

struct hub_wh_event *hub_whq_pop_all(struct hub_whq *q)
{
    struct hub_wh_event *list;

    pthread_mutex_lock(&q->mu);
    list = q->head;
    q->head = NULL;
    q->tail = &q->head;
    q->len = 0;
    q->bytes = 0;
    pthread_mutex_unlock(&q->mu);
    return list;
}

uint32_t hub_whq_set_room(struct hub_whq *q, uint32_t room)
{
    uint32_t len;

    pthread_mutex_lock(&q->mu);
    q->room = room;
    len = q->len;
    pthread_mutex_unlock(&q->mu);
    return len;
}

static void push_new(struct hub_whq *q, unsigned app, unsigned type,
                     const char *channel, size_t len, const char *uid,
                     const char *event, const char *data, const char *sid)
{
    struct hub_wh_event *ev =
        hub_wh_event_new(app, type, channel, len, uid, event, data, sid);

    if (!ev) {
        atomic_fetch_add_explicit(&q->dropped, 1, memory_order_relaxed);
        return;
    }
    hub_whq_push(q, ev);
}

void hub_webhook_dir_edge(void *ctx, const struct hub_dir_edge *e)
{
    struct hub_whq *q = ctx;
    unsigned open, close;
    bool member = e->kind == HUB_DIR_MEMBER_FIRST ||
                  e->kind == HUB_DIR_MEMBER_LAST;
    bool first = e->kind == HUB_DIR_CHANNEL_FIRST ||
                 e->kind == HUB_DIR_MEMBER_FIRST;

    open = member ? HUB_WH_MEMBER_ADDED : HUB_WH_CHANNEL_OCCUPIED;
    close = member ? HUB_WH_MEMBER_REMOVED : HUB_WH_CHANNEL_VACATED;
    /* Both halves of a pair pass when either is wanted: the engine needs
     * the opening edge to know a closing one may be sent. */
    if (!hub_whq_wants(q, e->app, open) && !hub_whq_wants(q, e->app, close))
        return;
    push_new(q, e->app, first ? open : close, e->name, e->len,
             member ? e->user_id : NULL, NULL, NULL, NULL);
}

void hub_webhook_client_event(struct hub *h, unsigned app,
                              const char *channel, size_t len,
                              const char *event, const char *data,
                              const char *socket_id, const char *user_id)
{
    struct hub_whq *q = atomic_load_explicit(&h->webhooks,
                                             memory_order_acquire);

    if (!hub_whq_wants(q, app, HUB_WH_CLIENT_EVENT))
        return;
    push_new(q, app, HUB_WH_CLIENT_EVENT, channel, len, user_id,
             event, data ? data : "", socket_id);
}

void hub_webhook_cache_miss(struct hub *h, unsigned app, const char *channel,
                            size_t len)
{
    struct hub_whq *q = atomic_load_explicit(&h->webhooks,
                                             memory_order_acquire);

    if (!hub_whq_wants(q, app, HUB_WH_CACHE_MISS))
        return;
    push_new(q, app, HUB_WH_CACHE_MISS, channel, len, NULL, NULL,
             NULL, NULL);
}

/* The engine. */

struct wh_state {
    struct wh_state *next;         /* hash chain */
    struct hub_wh_engine *e;
    uint64_t hash;
    unsigned app;
    bool member;
    bool pending;                  /* a closing edge waits on t */
    struct hub_timer t;
    struct hub_wh_event *ev;       /* the waiting closing edge */
    size_t klen;
    char key[];                    /* channel '\0' user_id */
};

struct wh_batch {
    struct hub_wh_engine *e;
    unsigned app;
    unsigned n;
    struct hub_timer t;
    struct hub_wh_event *evs[HUB_WH_BATCH_EVENTS];
    uint64_t seqs[HUB_WH_BATCH_EVENTS];
};

struct hub_wh_engine {
    const struct hub_app *apps;
    unsigned n_apps;
    uint64_t delay_ms, boot, seq, batch_seq, wall_ms;
    bool shared;                   /* edges decided by a shared directory */
    struct hub_wheel *wheel;
    hub_wh_emit_fn *emit;
    void *ctx;
    struct wh_state **buckets;
    size_t n_buckets, n_states;
    struct wh_batch *batches;      /* one per app */
    struct hub_wh_engine_stats st;
};

/* Keyed (hub/base/hash.h): the channel and user id are the peer's. */
static uint64_t key_hash(unsigned app, bool member, const char *k, size_t n)
{
    return hub_hash_app(app * 2u + member, k, n);
}

static void batch_fire(struct hub_timer *t, uint64_t now_ms);
static void batch_flush(struct wh_batch *b, uint64_t wall_ms);
static void state_fire(struct hub_timer *t, uint64_t now_ms);

struct hub_wh_engine *hub_wh_engine_create(const struct hub_app *apps,
                                           unsigned n_apps, uint64_t delay_ms,
                                           uint64_t boot, uint64_t now_ms,
                                           hub_wh_emit_fn *emit, void *ctx)
{
    struct hub_wh_engine *e = calloc(1, sizeof(*e));

    if (!e)
        return NULL;
    e->apps = apps;
    e->n_apps = n_apps;
    e->delay_ms = delay_ms;
    e->boot = boot;
    e->emit = emit;
    e->ctx = ctx;
    e->n_buckets = 64;
    e->buckets = calloc(e->n_buckets, sizeof(*e->buckets));
    e->batches = calloc(n_apps ? n_apps : 1, sizeof(*e->batches));
    /* 10 ms ticks: the batch window and the delay are hundreds of ms. */
    e->wheel = hub_wheel_create(10, 10, now_ms);
    if (!e->buckets || !e->batches || !e->wheel) {
        hub_wh_engine_destroy(e);
        return NULL;
    }
    for (unsigned i = 0; i < n_apps; i++) {
        e->batches[i].e = e;
        e->batches[i].app = i;
        hub_timer_init(&e->batches[i].t, batch_fire);
    }
    return e;
}

void hub_wh_engine_set_shared(struct hub_wh_engine *e, bool shared)
{
    e->shared = shared;
}

void hub_wh_engine_destroy(struct hub_wh_engine *e)
{
    if (!e)
        return;
    /* The wheel first: it disarms entries that live in what follows. */
    hub_wheel_destroy(e->wheel);
    for (size_t i = 0; e->buckets && i < e->n_buckets; i++) {
        struct wh_state *s = e->buckets[i], *next;

        for (; s; s = next) {
            next = s->next;
            free(s->ev);
            free(s);
        }
    }
    for (unsigned i = 0; e->batches && i < e->n_apps; i++)
        for (unsigned j = 0; j < e->batches[i].n; j++)
            free(e->batches[i].evs[j]);
    free(e->buckets);
    free(e->batches);
    free(e);
}

int hub_wh_engine_set_apps(struct hub_wh_engine *e, const struct hub_app *apps,
                           unsigned n_apps, uint64_t wall_ms)
{
    struct wh_batch *nb;

    if (n_apps < e->n_apps)
        return -EINVAL;
    nb = calloc(n_apps ? n_apps : 1, sizeof(*nb));
    if (!nb)
        return -ENOMEM;
    /* Flushing stops every batch timer: the old array leaves the wheel. */
    e->wall_ms = wall_ms;
    for (unsigned i = 0; i < e->n_apps; i++)
        batch_flush(&e->batches[i], wall_ms);
    free(e->batches);
    e->batches = nb;
    e->apps = apps;
    e->n_apps = n_apps;
    for (unsigned i = 0; i < n_apps; i++) {
        nb[i].e = e;
        nb[i].app = i;
        hub_timer_init(&nb[i].t, batch_fire);
    }
    return 0;
}

static struct wh_state **state_slot(struct hub_wh_engine *e, unsigned app,
                                    bool member, const char *k, size_t n,
                                    uint64_t h)
{
    struct wh_state **pp = &e->buckets[h & (e->n_buckets - 1)];

    for (; *pp; pp = &(*pp)->next) {
        struct wh_state *s = *pp;

        if (s->hash == h && s->app == app && s->member == member &&
            s->klen == n && !memcmp(s->key, k, n))
            break;
    }
    return pp;
}

static void state_grow(struct hub_wh_engine *e)
{
    size_t n = e->n_buckets * 2;
    struct wh_state **b = calloc(n, sizeof(*b));

    if (!b)
        return;                   /* longer chains, still correct */
    for (size_t i = 0; i < e->n_buckets; i++) {
        struct wh_state *s = e->buckets[i], *next;

        for (; s; s = next) {
            next = s->next;
            s->next = b[s->hash & (n - 1)];
            b[s->hash & (n - 1)] = s;
        }
    }
    free(e->buckets);
    e->buckets = b;
    e->n_buckets = n;
}

static void state_remove(struct hub_wh_engine *e, struct wh_state *s)
{
    struct wh_state **pp =
        state_slot(e, s->app, s->member, s->key, s->klen, s->hash);

    *pp = s->next;
    e->n_states--;
    hub_wheel_stop(e->wheel, &s->t);
    free(s->ev);
    free(s);
}

static void batch_flush(struct wh_batch *b, uint64_t wall_ms)
{
    struct hub_wh_engine *e = b->e;
    const struct hub_app *app = &e->apps[b->app];

    hub_wheel_stop(e->wheel, &b->t);
    if (!b->n)
        return;
    for (unsigned i = 0; i < app->n_webhooks; i++) {
        struct hub_wh_out out = { .app = b->app, .hook = i };
        char id[48];

        out.body = hub_wh_encode((const struct hub_wh_event *const *)b->evs,
                                 b->seqs, b->n, &app->webhooks[i], e->boot,
                                 wall_ms, &out.len, &out.n_events);
        if (!out.body) {
            if (out.n_events == 0)
                continue;         /* nothing for this webhook */
            e->st.oom += out.n_events;
            continue;
        }
        snprintf(id, sizeof(id), "%016" PRIx64 "-b%" PRIu64, e->boot,
                 ++e->batch_seq);
        out.batch_id = id;
        e->emit(e->ctx, &out);
    }
    for (unsigned j = 0; j < b->n; j++)
        free(b->evs[j]);
    b->n = 0;
}

static void batch_fire(struct hub_timer *t, uint64_t now_ms)
{
    struct wh_batch *b = hub_container_of(t, struct wh_batch, t);

    (void)now_ms;
    batch_flush(b, b->e->wall_ms);
}

/* Put ev (taken) into its app's batch. */
static void batch_add(struct hub_wh_engine *e, struct hub_wh_event *ev,
                      uint64_t now_ms)
{
    struct wh_batch *b;
    const struct hub_app *app;

    if (ev->app >= e->n_apps) {
        free(ev);
        return;
    }
    b = &e->batches[ev->app];
    app = &e->apps[ev->app];
    if (!(app->webhook_types & HUB_WH_BIT(ev->type))) {
        free(ev);                 /* the other half of a wanted pair */
        return;
    }
    if (ev->type == HUB_WH_CACHE_MISS)
        for (unsigned i = 0; i < b->n; i++)
            if (b->evs[i]->type == HUB_WH_CACHE_MISS &&
                !strcmp(b->evs[i]->channel, ev->channel)) {
                free(ev);         /* clients that missed together: one */
                return;
            }
    b->evs[b->n] = ev;
    b->seqs[b->n] = ++e->seq;
    b->n++;
    e->st.events++;
    if (!app->webhook_batching || b->n == HUB_WH_BATCH_EVENTS)
        batch_flush(b, e->wall_ms);
    else if (!hub_timer_is_armed(&b->t))
        hub_wheel_start(e->wheel, &b->t, now_ms, HUB_WH_BATCH_MS);
}

static void state_fire(struct hub_timer *t, uint64_t now_ms)
{
    struct wh_state *s = hub_container_of(t, struct wh_state, t);
    struct hub_wh_engine *e = s->e;
    struct hub_wh_event *ev = s->ev;

    s->ev = NULL;
    e->st.delayed--;
    state_remove(e, s);
    batch_add(e, ev, now_ms);
}

/* An edge event (taken). */
static void edge(struct hub_wh_engine *e, struct hub_wh_event *ev,
                 uint64_t now_ms)
{
    bool member = ev->type == HUB_WH_MEMBER_ADDED ||
                  ev->type == HUB_WH_MEMBER_REMOVED;
    bool open = ev->type == HUB_WH_CHANNEL_OCCUPIED ||
                ev->type == HUB_WH_MEMBER_ADDED;
    size_t lc = strlen(ev->channel);
    size_t lu = member && ev->user_id ? strlen(ev->user_id) : 0;
    size_t n = lc + 1 + lu;
    char stackkey[512], *k = n <= sizeof(stackkey) ? stackkey : malloc(n);
    uint64_t h;
    struct wh_state **pp, *s;

    if (!k) {
        e->st.oom++;
        free(ev);
        return;
    }
    memcpy(k, ev->channel, lc + 1);
    if (lu)
        memcpy(k + lc + 1, ev->user_id, lu);
    h = key_hash(ev->app, member, k, n);
    pp = state_slot(e, ev->app, member, k, n, h);
    s = *pp;
    if (open) {
        if (s) {
            /* Reported already: a closing edge must be waiting (the
             * refresh case). Both go. */
            if (s->pending) {
                hub_wheel_stop(e->wheel, &s->t);
                free(s->ev);
                s->ev = NULL;
                s->pending = false;
                e->st.delayed--;
                e->st.cancelled++;
            }
            free(ev);
            goto out;
        }
        s = malloc(sizeof(*s) + n);
        if (!s) {
            e->st.oom++;
            free(ev);
            goto out;
        }
        memset(s, 0, sizeof(*s));
        s->e = e;
        s->hash = h;
        s->app = ev->app;
        s->member = member;
        s->klen = n;
        memcpy(s->key, k, n);
        hub_timer_init(&s->t, state_fire);
        s->next = *pp;
        *pp = s;
        if (++e->n_states > e->n_buckets)
            state_grow(e);
        batch_add(e, ev, now_ms);
        goto out;
    }
    if (!s && e->shared) {
        /* A shared directory (a cluster) decides each edge once, on the
         * node whose change moved the count: the opening edge may have
         * been another node's to send. The close goes at once. */
        batch_add(e, ev, now_ms);
        goto out;
    }
    if (!s || s->pending) {
        /* Never reported (its opening edge was lost), or already
         * closing: nothing to tell. */
        free(ev);
        goto out;
    }
    if (!e->delay_ms) {
        state_remove(e, s);
        batch_add(e, ev, now_ms);
        goto out;
    }
    s->ev = ev;
    s->pending = true;
    e->st.delayed++;
    hub_wheel_start(e->wheel, &s->t, now_ms, (int64_t)e->delay_ms);
out:
    if (k != stackkey)
        free(k);
}

void hub_wh_engine_feed(struct hub_wh_engine *e, struct hub_wh_event *list,
                        uint64_t now_ms)
{
    while (list) {
        struct hub_wh_event *ev = list;

        list = ev->next;
        ev->next = NULL;
        if (ev->app >= e->n_apps) {
            free(ev);
            continue;
        }
        if (ev->type <= HUB_WH_MEMBER_REMOVED)
            edge(e, ev, now_ms);
        else
            batch_add(e, ev, now_ms);
    }
}

uint64_t hub_wh_engine_advance(struct hub_wh_engine *e, uint64_t now_ms,
                               uint64_t wall_ms)
{
    e->wall_ms = wall_ms;
    hub_wheel_advance(e->wheel, now_ms);
    return hub_wheel_next_due_ms(e->wheel, now_ms);
}

void hub_wh_engine_flush(struct hub_wh_engine *e, uint64_t wall_ms)
{
    e->wall_ms = wall_ms;
    /* Closing edges still in their delay go now: the hub is going away,
     * nobody can rejoin it, and a receiver must not be left believing a
     * channel occupied. Each goes into its app's batch (which may flush). */
    for (size_t i = 0; i < e->n_buckets; i++) {
        struct wh_state *s = e->buckets[i], *next;

        for (; s; s = next) {
            struct hub_wh_event *ev = s->ev;

            next = s->next;
            if (!s->pending)
                continue;
            s->ev = NULL;
            e->st.delayed--;
            state_remove(e, s);
            batch_add(e, ev, 0);
        }
    }
    for (unsigned i = 0; i < e->n_apps; i++)
        batch_flush(&e->batches[i], wall_ms);
}

void hub_wh_engine_get_stats(const struct hub_wh_engine *e,
                             struct hub_wh_engine_stats *out)
{
    *out = e->st;
}

unsigned hub_wh_engine_room(const struct hub_wh_engine *e)
{
    unsigned room = 0;

    for (unsigned i = 0; i < e->n_apps; i++) {
        const struct hub_app *app = &e->apps[i];
        unsigned n = e->batches[i].n;

        if (app->n_webhooks && !app->webhook_batching)
            return 0;
        if (n && (!room || HUB_WH_BATCH_EVENTS - n < room))
            room = HUB_WH_BATCH_EVENTS - n;
    }
    return room;
}

static json_t *event_json_id(const struct hub_wh_event *ev, const char *id)
{
    json_t *o = json_object();
    bool ok;

    if (!o)
        return NULL;
    ok = !json_object_set_new(o, "name",
                              json_string(type_names[ev->type])) &&
         !json_object_set_new(o, "channel", json_string(ev->channel));
    if (ok && ev->type == HUB_WH_CLIENT_EVENT)
        ok = !json_object_set_new(o, "event", json_string(ev->event)) &&
             !json_object_set_new(o, "data", json_string(ev->data)) &&
             !json_object_set_new(o, "socket_id",
                                  json_string(ev->socket_id));
    if (ok && ev->user_id)
        ok = !json_object_set_new(o, "user_id", json_string(ev->user_id));
    if (ok)
        ok = !json_object_set_new(o, "id", json_string(id));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *event_json(const struct hub_wh_event *ev, uint64_t boot,
                          uint64_t seq)
{
    char id[48];

    snprintf(id, sizeof(id), "%016" PRIx64 "-%" PRIu64, boot, seq);
    return event_json_id(ev, id);
}

/* The batch around m events in arr (taken): {"time_ms", "events"}; NULL
 * when none matched or an append failed (ok false). */
static char *wrap_events(json_t *arr, bool ok, unsigned m, uint64_t wall_ms,
                         unsigned *n_out, size_t *len)
{
    json_t *root;
    char *body = NULL;

    *n_out = m;
    *len = 0;
    if (!m || !ok) {
        json_decref(arr);
        return NULL;
    }
    root = json_object();
    if (root &&
        !json_object_set_new(root, "time_ms", json_integer((json_int_t)wall_ms)) &&
        !json_object_set(root, "events", arr))
        body = hub_json_dumps(root, JSON_COMPACT);
    json_decref(arr);
    json_decref(root);
    if (body)
        *len = strlen(body);
    return body;
}

/* The general encoder: any UTF-8, and the reference for the one below. */
static char *encode_jansson(const struct hub_wh_event *const *evs,
                            const uint64_t *seqs, unsigned n,
                            const struct hub_webhook_conf *w, uint64_t boot,
                            uint64_t wall_ms, size_t *len, unsigned *n_out)
{
    json_t *arr = json_array();
    unsigned m = 0;
    bool ok = arr != NULL;

    for (unsigned i = 0; ok && i < n; i++) {
        if (w && !hub_webhook_matches(w, evs[i]->type, evs[i]->channel))
            continue;
        m++;
        ok = !json_array_append_new(arr, event_json(evs[i], boot, seqs[i]));
    }
    return wrap_events(arr, ok, m, wall_ms, n_out, len);
}

/*
 * The encoder the sender runs for nearly every batch: the same bytes as
 * encode_jansson (the same key order, jansson's compact separators and
 * escapes) written straight into one buffer, without a json_t per string
 * (half of the sender thread's CPU in a profile with a client_event per
 * message). Strings with a byte >= 0x80 (which jansson checks as UTF-8)
 * or a missing client_event field go to encode_jansson instead: *general
 * is set and NULL returned.
 */
static size_t esc_len(const char *s, bool *plain)
{
    size_t n = 2;

    if (!s) {
        *plain = false;
        return 0;
    }
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c >= 0x80)
            *plain = false;
        n += c == '"' || c == '\\' ? 2 : c < 0x20 ? 6 : 1;
    }
    return n;
}

/* s as a JSON string, spelled as jansson spells it (hub/base/json_escape.h). */
static char *put_str(char *o, const char *s)
{
    *o++ = '"';
    o = hub_json_escape(o, s, strlen(s), HUB_JSON_ESC_JANSSON);
    *o++ = '"';
    return o;
}

static char *put_lit(char *o, const char *lit)
{
    size_t n = strlen(lit);

    memcpy(o, lit, n);
    return o + n;
}

static char *encode_fast(const struct hub_wh_event *const *evs,
                         const uint64_t *seqs, unsigned n,
                         const struct hub_webhook_conf *w, uint64_t boot,
                         uint64_t wall_ms, size_t *len, unsigned *n_out,
                         bool *general)
{
    size_t need = 64;
    unsigned m = 0;
    bool plain = true;
    char *body, *o;

    for (unsigned i = 0; i < n; i++) {
        const struct hub_wh_event *ev = evs[i];

        if (w && !hub_webhook_matches(w, ev->type, ev->channel))
            continue;
        m++;
        /* Keys, separators and the id (boot hex - seq) at most. */
        need += 160 + strlen(type_names[ev->type]) +
                esc_len(ev->channel, &plain);
        if (ev->type == HUB_WH_CLIENT_EVENT)
            need += esc_len(ev->event, &plain) + esc_len(ev->data, &plain) +
                    esc_len(ev->socket_id, &plain);
        if (ev->user_id)
            need += esc_len(ev->user_id, &plain);
    }
    *n_out = m;
    *len = 0;
    if (!m)
        return NULL;
    if (!plain) {
        *general = true;
        return NULL;
    }
    body = malloc(need);
    if (!body)
        return NULL;
    o = body + snprintf(body, 64, "{\"time_ms\":%" JSON_INTEGER_FORMAT
                                  ",\"events\":[",
                        (json_int_t)wall_ms);
    m = 0;
    for (unsigned i = 0; i < n; i++) {
        const struct hub_wh_event *ev = evs[i];

        if (w && !hub_webhook_matches(w, ev->type, ev->channel))
            continue;
        o = put_lit(o, m++ ? ",{\"name\":\"" : "{\"name\":\"");
        o = put_lit(o, type_names[ev->type]);
        o = put_lit(o, "\",\"channel\":");
        o = put_str(o, ev->channel);
        if (ev->type == HUB_WH_CLIENT_EVENT) {
            o = put_lit(o, ",\"event\":");
            o = put_str(o, ev->event);
            o = put_lit(o, ",\"data\":");
            o = put_str(o, ev->data);
            o = put_lit(o, ",\"socket_id\":");
            o = put_str(o, ev->socket_id);
        }
        if (ev->user_id) {
            o = put_lit(o, ",\"user_id\":");
            o = put_str(o, ev->user_id);
        }
        o += snprintf(o, 64, ",\"id\":\"%016" PRIx64 "-%" PRIu64 "\"}", boot,
                      seqs[i]);
    }
    o = put_lit(o, "]}");
    *o = '\0';
    *len = (size_t)(o - body);
    return body;
}

char *hub_wh_encode(const struct hub_wh_event *const *evs,
                    const uint64_t *seqs, unsigned n,
                    const struct hub_webhook_conf *w, uint64_t boot,
                    uint64_t wall_ms, size_t *len, unsigned *n_out)
{
    bool general = false;
    char *body = encode_fast(evs, seqs, n, w, boot, wall_ms, len, n_out,
                             &general);

    return general ? encode_jansson(evs, seqs, n, w, boot, wall_ms, len,
                                    n_out)
                   : body;
}

char *hub_wh_encode_ids(const struct hub_wh_event *const *evs,
                        const char *const *ids, unsigned n,
                        const struct hub_webhook_conf *w, uint64_t wall_ms,
                        size_t *len, unsigned *n_out)
{
    json_t *arr = json_array();
    unsigned m = 0;
    bool ok = arr != NULL;

    for (unsigned i = 0; ok && i < n; i++) {
        char id[HUB_WH_MAX_ID];

        if (w && !hub_webhook_matches(w, evs[i]->type, evs[i]->channel))
            continue;
        m++;
        snprintf(id, sizeof(id), "%s", ids[i]);
        ok = !json_array_append_new(arr, event_json_id(evs[i], id));
    }
    return wrap_events(arr, ok, m, wall_ms, n_out, len);
}

uint64_t hub_wh_backoff_ms(unsigned attempt, uint64_t base_ms, uint64_t max_ms,
                           uint64_t rnd)
{
    uint64_t d = base_ms ? base_ms : 1;

    for (unsigned i = 1; i < attempt && d < max_ms; i++)
        d *= 2;
    if (d > max_ms)
        d = max_ms;
    return d / 2 + (d - d / 2 ? rnd % (d - d / 2 + 1) : 0);
}
