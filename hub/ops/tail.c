/*
 * hub/ops/tail.c - the console's live tail (hub/ops/tail.h): the watcher registry,
 * the filter, the per-watcher rate cap and bounded queue, the wakeup of
 * the watcher's loop through its inbox, and the feature whose publication
 * hook feeds it (hub/loop/feature.h).
 *
 * Lifetime: a watcher is referenced by the registry (until unwatch) and by
 * its wake node while that node sits in an inbox; the last reference frees
 * it. Producers find watchers only through the registry, under its mutex,
 * so after unwatch no producer can reach a watcher.
 */
#include "hub/ops/tail.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "hub/wire/frame.h"
#include "hub/loop/inbox.h"
#include "timer/list.h"
#include "hub/loop/loop.h"
#include "hub/loop/publish.h"

atomic_bool hub_tail_on;

bool hub_tail_filter_match(const struct hub_tail_filter *f, unsigned app,
                           unsigned kind, const char *name, size_t len)
{
    size_t flen;

    if (f->app != app || !(f->kinds & kind))
        return false;
    if (kind == HUB_TAIL_CONNECTIONS || !name)
        return true;
    flen = strlen(f->channel);
    if (f->prefix)
        return flen <= len && memcmp(f->channel, name, flen) == 0;
    return flen == len && memcmp(f->channel, name, len) == 0;
}

bool hub_tail_rate_admit(struct hub_tail_rate *r, uint64_t now_ms)
{
    if (now_ms < r->window_ms || now_ms - r->window_ms >= 1000) {
        r->window_ms = now_ms;
        r->used = 0;
    }
    if (r->used >= r->cap)
        return false;
    r->used++;
    return true;
}

struct tail_line {
    char *text;
    size_t len;
};

struct hub_tail_watcher {
    struct hub_list link;         /* registry */
    struct hub_inbox_node wake;   /* to the owner's inbox */
    atomic_uint refs;
    struct hub_loop *loop;
    struct hub_tail_filter filter;
    struct hub_tail_rate rate;
    void (*notify)(void *ctx);    /* NULL once unwatched */
    void *ctx;
    bool wake_queued;
    uint32_t cap, head, count;
    uint64_t rate_drops, queue_drops;
    struct tail_line *lines;      /* ring of cap */
};

static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct hub_list reg = HUB_LIST_INIT(reg);
static unsigned reg_n;

static void watcher_unref(struct hub_tail_watcher *w)
{
    if (atomic_fetch_sub_explicit(&w->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (uint32_t i = 0; i < w->count; i++)
        free(w->lines[(w->head + i) % w->cap].text);
    free(w->lines);
    free(w);
}

static void wake_run(struct hub_inbox_node *n, struct hub_loop *l,
                     uint64_t now_ms)
{
    struct hub_tail_watcher *w =
        hub_container_of(n, struct hub_tail_watcher, wake);
    void (*notify)(void *ctx);
    void *ctx;

    (void)l;
    (void)now_ms;
    pthread_mutex_lock(&reg_mu);
    w->wake_queued = false;
    notify = w->notify;
    ctx = w->ctx;
    pthread_mutex_unlock(&reg_mu);
    if (notify)
        notify(ctx);
    watcher_unref(w);
}

static void wake_drop(struct hub_inbox_node *n)
{
    watcher_unref(hub_container_of(n, struct hub_tail_watcher, wake));
}

static const struct hub_inbox_ops wake_ops = {
    .run = wake_run,
    .drop = wake_drop,
};

struct hub_tail_watcher *hub_tail_watch(struct hub_loop *l,
                                        const struct hub_tail_filter *f,
                                        uint32_t rate, uint32_t queue_cap,
                                        void (*notify)(void *ctx), void *ctx)
{
    struct hub_tail_watcher *w = calloc(1, sizeof(*w));

    if (!w)
        return NULL;
    w->cap = queue_cap ? queue_cap : HUB_TAIL_QUEUE_DEFAULT;
    w->lines = calloc(w->cap, sizeof(w->lines[0]));
    if (!w->lines) {
        free(w);
        return NULL;
    }
    atomic_init(&w->refs, 1);
    w->loop = l;
    w->filter = *f;
    w->filter.channel[HUB_TAIL_CHANNEL_MAX] = '\0';
    w->rate.cap = rate ? (rate < HUB_TAIL_RATE_MAX ? rate : HUB_TAIL_RATE_MAX)
                       : HUB_TAIL_RATE_DEFAULT;
    w->notify = notify;
    w->ctx = ctx;
    w->wake.ops = &wake_ops;
    pthread_mutex_lock(&reg_mu);
    if (reg_n >= HUB_TAIL_MAX_WATCHERS) {
        pthread_mutex_unlock(&reg_mu);
        free(w->lines);
        free(w);
        return NULL;
    }
    hub_list_link_tail(&reg, &w->link);
    reg_n++;
    atomic_store_explicit(&hub_tail_on, true, memory_order_relaxed);
    pthread_mutex_unlock(&reg_mu);
    return w;
}

void hub_tail_unwatch(struct hub_tail_watcher *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&reg_mu);
    hub_list_unlink(&w->link);
    reg_n--;
    w->notify = NULL;
    if (!reg_n)
        atomic_store_explicit(&hub_tail_on, false, memory_order_relaxed);
    pthread_mutex_unlock(&reg_mu);
    watcher_unref(w);
}

char *hub_tail_next(struct hub_tail_watcher *w, size_t *len)
{
    struct tail_line line = { NULL, 0 };

    pthread_mutex_lock(&reg_mu);
    if (w->count) {
        line = w->lines[w->head];
        w->lines[w->head].text = NULL;
        w->head = (w->head + 1) % w->cap;
        w->count--;
    }
    pthread_mutex_unlock(&reg_mu);
    if (len)
        *len = line.len;
    return line.text;
}

void hub_tail_drops(struct hub_tail_watcher *w, uint64_t *rate_drops,
                    uint64_t *queue_drops)
{
    pthread_mutex_lock(&reg_mu);
    *rate_drops = w->rate_drops;
    *queue_drops = w->queue_drops;
    pthread_mutex_unlock(&reg_mu);
}

unsigned hub_tail_watchers(void)
{
    unsigned n;

    pthread_mutex_lock(&reg_mu);
    n = reg_n;
    pthread_mutex_unlock(&reg_mu);
    return n;
}

static uint64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * Offer one line to every watcher whose filter passes. The line is built
 * once (build(arg)), only when a watcher passes and its cap admits, and
 * copied for each further watcher. Called with nothing held.
 */
static void offer(struct hub *h, unsigned app, unsigned kind,
                  const char *name, size_t len,
                  char *(*build)(const void *arg, size_t *n), const void *arg)
{
    uint64_t now = hub_clock_now_ms(h->clock);
    struct hub_list *pos;
    char *text = NULL;
    size_t n = 0;
    bool built = false;

    pthread_mutex_lock(&reg_mu);
    hub_list_for_each(pos, &reg) {
        struct hub_tail_watcher *w =
            hub_container_of(pos, struct hub_tail_watcher, link);
        struct tail_line *slot;
        char *copy;

        if (!hub_tail_filter_match(&w->filter, app, kind, name, len))
            continue;
        if (!hub_tail_rate_admit(&w->rate, now)) {
            w->rate_drops++;
            continue;
        }
        if (w->count == w->cap) {
            w->queue_drops++;
            continue;
        }
        if (!built) {
            /* Building allocates; it does no I/O, so the short hold is
             * fine and only ever happens while someone watches. */
            text = build(arg, &n);
            built = true;
        }
        if (!text) {
            w->queue_drops++;
            continue;
        }
        copy = malloc(n + 1);
        if (!copy) {
            w->queue_drops++;
            continue;
        }
        memcpy(copy, text, n + 1);
        slot = &w->lines[(w->head + w->count) % w->cap];
        slot->text = copy;
        slot->len = n;
        w->count++;
        if (!w->wake_queued && w->notify) {
            w->wake_queued = true;
            atomic_fetch_add_explicit(&w->refs, 1, memory_order_relaxed);
            hub_loop_post(w->loop, &w->wake);
        }
    }
    pthread_mutex_unlock(&reg_mu);
    free(text);
}

struct pub_arg {
    const char *name;
    size_t len;
    const struct hub_frame *f;
};

static char *dump(json_t *o, size_t *n)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;

    json_decref(o);
    *n = s ? strlen(s) : 0;
    return s;
}

static char *build_pub(const void *arg, size_t *n)
{
    const struct pub_arg *a = arg;
    const char *payload = (const char *)a->f->bytes + HUB_FRAME_HEADER_MAX;
    size_t plen = a->f->payload_len;
    bool cut = plen > HUB_TAIL_MESSAGE_MAX;

    if (cut) {
        plen = HUB_TAIL_MESSAGE_MAX;
        /* Do not cut a UTF-8 sequence in two (jansson refuses it). */
        while (plen && ((unsigned char)payload[plen] & 0xC0) == 0x80)
            plen--;
    }
    return dump(json_pack("{s:s, s:I, s:s%, s:s%, s:b, s:I}", "type", "event",
                          "t", (json_int_t)wall_ms(), "channel", a->name,
                          a->len, "message", payload, plen, "truncated", cut,
                          "bytes", (json_int_t)a->f->payload_len),
                n);
}

void hub_tail_publication(struct hub *h, unsigned app, const char *name,
                          size_t len, struct hub_frame *f)
{
    const struct pub_arg a = { name, len, f };

    offer(h, app, HUB_TAIL_EVENTS, name, len, build_pub, &a);
}

/* The feature's publication hook: one relaxed load when nobody watches. */
static void feature_published(struct hub *h, const struct hub_pub_req *r)
{
    if (hub_tail_watched())
        hub_tail_publication(h, r->app, r->name, r->len, r->f);
}

const struct hub_feature hub_tail_feature = {
    .name = "tail",
    .published = feature_published,
};

struct conn_arg {
    bool open;
    const char *socket_id;
    unsigned code;
};

static char *build_conn(const void *arg, size_t *n)
{
    const struct conn_arg *a = arg;
    json_t *o = json_pack("{s:s, s:I, s:s, s:s}", "type", "connection", "t",
                          (json_int_t)wall_ms(), "state",
                          a->open ? "open" : "close", "socket_id",
                          a->socket_id);

    if (o && !a->open && a->code)
        json_object_set_new(o, "code", json_integer(a->code));
    return dump(o, n);
}

void hub_tail_connection(struct hub *h, unsigned app, bool open,
                         const char *socket_id, unsigned close_code)
{
    const struct conn_arg a = { open, socket_id, close_code };

    offer(h, app, HUB_TAIL_CONNECTIONS, NULL, 0, build_conn, &a);
}
