/*
 * hub/webhook/engine.c - the webhook sender thread's engine
 * (hub/webhook/engine.h): the edge delay, the per-app batches and their
 * windows, and the call to the encoder for each webhook of a flushed
 * batch.
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
 *
 * Thread: the sender thread only (one engine, one thread).
 */
#include "hub/webhook/engine.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/app/app.h"
#include "hub/base/hash.h"
#include "hub/webhook/encode.h"
#include "timer/list.h"
#include "timer/wheel.h"

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
