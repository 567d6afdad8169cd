/*
 * hub/channel/history.c - recovery's history store of hub/channel/history.h:
 * one (app, name) table (hub/base/chantab.h) of channel records under one
 * mutex; each record a list of its entries oldest first; per app and for
 * the hub one list of every entry in append order with their byte counts,
 * so each bound evicts its oldest entry, which is always the head of that
 * entry's channel.
 *
 * Also the history feature (hub/loop/feature.h): the hub's store, and its
 * reclaim from loop 0's heartbeat beat hook.
 */
#include "hub/channel/history.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "hub/app/app.h"
#include "hub/base/chantab.h"
#include "hub/loop/backplane.h"
#include "hub/loop/loop.h"
#include "hub/loop/publish.h"
#include "timer/clock.h"
#include "timer/list.h"

#define AWAY_MARGIN_MS HUB_HISTORY_AWAY_MARGIN_MS

struct hist_rec;

struct hist_entry {
    struct hub_list chan_link;     /* the record's, oldest first */
    struct hub_list app_link;      /* the app's, append order */
    struct hub_list hub_link;      /* the hub's, append order */
    struct hist_rec *rec;
    struct hub_frame *f;           /* one reference; f->hseq is its seq */
    uint64_t time_ms, expires_ms;
    uint64_t bytes;                /* charged to the app and the hub */
    bool ex;                       /* the socket it skipped */
    uint32_t ex_lo;
    uint64_t ex_hi;
};

struct hist_rec {
    struct hub_chan_node node;     /* key: app, name (points at name[]) */
    struct hub_list entries;
    uint32_t n;
    uint64_t bytes;                /* the record's own charge */
    uint64_t born_seq;             /* this origin's counter at creation */
    uint64_t born_ms;
    uint64_t last_seq;             /* this origin's last append */
    uint64_t evicted_seq;          /* this origin's newest seq evicted */
    uint64_t evicted_ms;           /* the newest evicted entry's time */
    bool evicted_expired;          /* that one expired (else trimmed) */
    bool pinned;                   /* an append is making room in it */
    char name[];
};

struct hist_app {
    struct hub_list entries;
    uint64_t n, bytes;
};

/* Another node's origin id, which frames received from it point at. */
struct remote_origin {
    struct remote_origin *next;
    uint64_t seen_ms;              /* the loop clock, last stamped */
    char id[];
};

/* An origin no frame can hold any more: a day (the longest ttl) and an
 * hour unseen. */
#define REMOTE_FORGET_MS (25ull * 3600 * 1000)

struct hub_history {
    pthread_mutex_t mu;
    struct hub_chantab t;
    unsigned n_apps;
    struct hist_app **apps;
    struct hub_list entries;       /* every entry, append order */
    uint64_t n, bytes, max_bytes;
    uint64_t seq;                  /* this origin's counter */
    uint64_t forced_ms;            /* a record last dropped for bytes */
    uint64_t evicted, expired;
    struct remote_origin *remotes; /* other nodes' origins, interned */
    unsigned n_remotes;
    char origin[HUB_HISTORY_ORIGIN_MAX + 1];
};

/* Under mu: accounts for app indices below n. */
static int grow(struct hub_history *hh, unsigned n)
{
    struct hist_app **apps;

    if (n <= hh->n_apps)
        return 0;
    apps = realloc(hh->apps, n * sizeof(*apps));
    if (!apps)
        return -ENOMEM;
    hh->apps = apps;
    for (; hh->n_apps < n; hh->n_apps++) {
        struct hist_app *a = calloc(1, sizeof(*a));

        if (!a)
            return -ENOMEM;
        hub_list_init(&a->entries);
        hh->apps[hh->n_apps] = a;
    }
    return 0;
}

struct hub_history *hub_history_create(uint64_t max_bytes)
{
    struct hub_history *hh = calloc(1, sizeof(*hh));
    uint32_t boot = 0;

    if (!hh)
        return NULL;
    if (hub_chantab_init(&hh->t, 64)) {
        free(hh);
        return NULL;
    }
    hub_list_init(&hh->entries);
    hh->max_bytes = max_bytes ? max_bytes : (uint64_t)64 << 20;
    /* A new origin at each start: a client's ids from an earlier run are
     * then unknown here, never mistaken for this run's. */
    if (getrandom(&boot, sizeof(boot), 0) != sizeof(boot))
        boot = (uint32_t)(uintptr_t)hh ^ (uint32_t)time(NULL);
    snprintf(hh->origin, sizeof(hh->origin), "b%08" PRIx32, boot);
    pthread_mutex_init(&hh->mu, NULL);
    return hh;
}

const char *hub_history_origin(const struct hub_history *hh)
{
    return hh->origin;
}

/* Under mu: drop a record that has no entry left. */
static void rec_drop(struct hub_history *hh, struct hist_rec *rec)
{
    hub_chantab_remove(&hh->t, &rec->node);
    hh->bytes -= rec->bytes;
    free(rec);
}

/*
 * Under mu: unlink e everywhere, uncharge and free it. expired: it went
 * for its age (else a bound trimmed it). A record left empty goes too;
 * dropped for bytes, it is remembered hub-wide (forced_ms), since a later
 * record of that channel cannot say what the dropped one held.
 */
static void entry_drop(struct hub_history *hh, struct hist_entry *e,
                       bool expired, uint64_t now_ms)
{
    struct hist_rec *rec = e->rec;
    struct hist_app *a = hh->apps[rec->node.app];

    hub_list_unlink(&e->chan_link);
    hub_list_unlink(&e->app_link);
    hub_list_unlink(&e->hub_link);
    rec->n--;
    a->n--;
    a->bytes -= e->bytes;
    hh->n--;
    hh->bytes -= e->bytes;
    if (e->f->hseq > rec->evicted_seq)
        rec->evicted_seq = e->f->hseq;
    if (e->time_ms >= rec->evicted_ms) {
        rec->evicted_ms = e->time_ms;
        rec->evicted_expired = expired;
    }
    if (expired)
        hh->expired++;
    else
        hh->evicted++;
    hub_frame_unref(e->f);
    free(e);
    if (!rec->n && !rec->pinned) {
        if (!expired)
            hh->forced_ms = now_ms;
        rec_drop(hh, rec);
    }
}

void hub_history_destroy(struct hub_history *hh)
{
    if (!hh)
        return;
    while (hh->remotes) {
        struct remote_origin *o = hh->remotes;

        hh->remotes = o->next;
        free(o);
    }
    while (!hub_list_is_empty(&hh->entries))
        entry_drop(hh, hub_container_of(hh->entries.next, struct hist_entry,
                                        hub_link), true, 0);
    for (unsigned i = 0; i < hh->n_apps; i++)
        free(hh->apps[i]);
    free(hh->apps);
    hub_chantab_fini(&hh->t);
    pthread_mutex_destroy(&hh->mu);
    free(hh);
}

static struct hist_rec *find(struct hub_history *hh, unsigned app,
                             const char *name, size_t len)
{
    struct hub_chan_node *n;

    if (app >= hh->n_apps)
        return NULL;
    n = hub_chantab_find(&hh->t, app, name, len, hub_chan_hash(app, name, len));
    return n ? hub_container_of(n, struct hist_rec, node) : NULL;
}

static uint64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t entry_bytes(const struct hub_frame *f)
{
    /* The frame, and the marker-and-event frame made from it. */
    return 2 * (uint64_t)f->len + HUB_HISTORY_ENTRY_OVERHEAD;
}

/* Under mu: the record of (app, name), made when absent (then charged
 * to the hub); NULL when out of memory. */
static struct hist_rec *rec_get(struct hub_history *hh, unsigned app,
                                const char *name, size_t len, uint64_t now_ms)
{
    struct hist_rec *rec = find(hh, app, name, len);

    if (rec)
        return rec;
    rec = calloc(1, sizeof(*rec) + len + 1);
    if (!rec)
        return NULL;
    memcpy(rec->name, name, len);
    rec->node.hash = hub_chan_hash(app, name, len);
    rec->node.app = app;
    rec->node.name = rec->name;
    rec->node.name_len = (uint32_t)len;
    hub_list_init(&rec->entries);
    rec->bytes = len + HUB_HISTORY_RECORD_OVERHEAD;
    rec->born_seq = hh->seq;
    rec->born_ms = now_ms;
    hh->bytes += rec->bytes;
    hub_chantab_insert(&hh->t, &rec->node);
    return rec;
}

/* Under mu: make room for need more bytes of app (cap: its own bound, 0 =
 * none) and one more entry of rec (size: its channel bound), oldest first.
 * rec itself may not be dropped: it stays pinned by the caller. */
static void make_room(struct hub_history *hh, struct hist_rec *rec,
                      struct hist_app *a, uint64_t need, uint64_t cap,
                      uint32_t size, uint64_t now_ms)
{
    while (rec->n && rec->n >= size)
        entry_drop(hh, hub_container_of(rec->entries.next, struct hist_entry,
                                        chan_link), false, now_ms);
    while (cap && a->n && a->bytes + need > cap)
        entry_drop(hh, hub_container_of(a->entries.next, struct hist_entry,
                                        app_link), false, now_ms);
    while (hh->n && hh->bytes + need > hh->max_bytes)
        entry_drop(hh, hub_container_of(hh->entries.next, struct hist_entry,
                                        hub_link), false, now_ms);
}

/*
 * Under mu: keep f as rec's newest entry (e preallocated, consumed), or,
 * when it cannot fit the app's or the hub's whole bound, count it evicted
 * at once, so a resume past it says so rather than miss it.
 */
static void keep(struct hub_history *hh, struct hist_rec *rec,
                 struct hist_entry *e, const struct hub_app *app,
                 const struct hub_pub_req *r, uint64_t now_ms)
{
    struct hist_app *a = hh->apps[rec->node.app];
    uint64_t need = entry_bytes(r->f);
    uint64_t cap = app->history_max_bytes;

    if ((cap && need > cap) || need + rec->bytes > hh->max_bytes) {
        rec->evicted_seq = r->f->hseq;
        rec->evicted_ms = now_ms;
        rec->evicted_expired = false;
        hh->evicted++;
        free(e);
        return;
    }
    make_room(hh, rec, a, need, cap, app->history_size, now_ms);
    e->rec = rec;
    e->f = hub_frame_ref(r->f);
    e->time_ms = now_ms;
    e->expires_ms = now_ms + app->history_ttl_ms;
    e->bytes = need;
    e->ex = r->skip && r->skip->set;
    e->ex_hi = e->ex ? r->skip->hi : 0;
    e->ex_lo = e->ex ? r->skip->lo : 0;
    hub_list_link_tail(&rec->entries, &e->chan_link);
    hub_list_link_tail(&a->entries, &e->app_link);
    hub_list_link_tail(&hh->entries, &e->hub_link);
    rec->n++;
    a->n++;
    a->bytes += need;
    hh->n++;
    hh->bytes += need;
}

int hub_history_publish(struct hub_history *hh, struct hub_loop *l,
                        const struct hub_app *app, const struct hub_pub_req *r,
                        bool cache)
{
    struct hub *h = l->hub;
    uint64_t now_ms = hub_clock_now_ms(l->clock);
    /* Allocated before the lock. */
    struct hist_entry *e = malloc(sizeof(*e));
    struct hub_pub_req q = *r;
    struct hub_pub_hist meta = { wall_ms(), app->history_ttl_ms,
                                 app->history_size };
    struct hist_rec *rec = NULL;
    int rc;

    q.batch = false;
    pthread_mutex_lock(&hh->mu);
    if (e && !grow(hh, app->index + 1))
        rec = rec_get(hh, app->index, r->name, r->len, now_ms);
    if (rec) {
        /* The frame is not shared yet: stamping it is safe. */
        r->f->hseq = ++hh->seq;
        r->f->horigin = hh->origin;
        rec->last_seq = r->f->hseq;
        q.hist = &meta;
        rec->pinned = true;
        keep(hh, rec, e, app, r, now_ms);
        rec->pinned = false;
        e = NULL;
        if (!rec->n) {
            /* Not kept, and nothing else either: what a resume past it
             * missed is unknowable once the record goes. */
            hh->forced_ms = now_ms;
            rec_drop(hh, rec);
        }
    }
    /* Every loop through its inbox, the calling one too, in the order of
     * the seqs assigned under this lock (see the header). */
    rc = cache ? hub_publish_cache(h, NULL, q.app, q.name, q.len, q.f, q.skip)
               : hub_publish_req(h, NULL, &q);
    pthread_mutex_unlock(&hh->mu);
    free(e);
    return rc;
}

void hub_history_start(struct hub_history *hh, uint64_t seen,
                       struct hub_history_pos *out)
{
    out->n = 1;
    snprintf(out->id[0].origin, sizeof(out->id[0].origin), "%s", hh->origin);
    out->id[0].seq = seen;
}

const char *hub_history_gap_name(enum hub_history_gap g)
{
    switch (g) {
    case HUB_HISTORY_OK: return "ok";
    case HUB_HISTORY_EXPIRED: return "expired";
    case HUB_HISTORY_EVICTED: return "evicted";
    case HUB_HISTORY_UNKNOWN_ORIGIN: return "unknown_origin";
    case HUB_HISTORY_TOO_LARGE: return "too_large";
    }
    return "?";
}

void hub_history_replay_free(struct hub_history_replay *rp)
{
    for (size_t i = 0; i < rp->n; i++)
        hub_frame_unref(rp->f[i]);
    free(rp->f);
    rp->f = NULL;
    rp->n = 0;
}

static bool sent_by(const struct hist_entry *e,
                    const struct hub_history_sockets *socks)
{
    if (!e->ex || !socks)
        return false;
    for (unsigned i = 0; i < socks->n; i++)
        if (socks->hi[i] == e->ex_hi && socks->lo[i] == e->ex_lo)
            return true;
    return false;
}

/* Under mu: drop rec's entries past their expiry, oldest first (they are
 * in expiry order but for a reload's new ttl, which the reclaim meets
 * later). */
static struct hist_rec *expire_rec(struct hub_history *hh,
                                   struct hist_rec *rec, uint64_t now_ms)
{
    while (rec && rec->n) {
        struct hist_entry *e = hub_container_of(rec->entries.next,
                                                struct hist_entry, chan_link);

        if (now_ms < e->expires_ms)
            break;
        if (rec->n == 1) {
            entry_drop(hh, e, true, now_ms);
            return NULL;
        }
        entry_drop(hh, e, true, now_ms);
    }
    return rec;
}

/*
 * Under mu: whether what a client knew of this origin (seq) reaches the
 * record: HUB_HISTORY_OK or the gap. away_ms UINT64_MAX: unknown.
 */
static enum hub_history_gap reach(const struct hub_history *hh,
                                  const struct hist_rec *rec, uint64_t seq,
                                  uint64_t away_ms, uint64_t now_ms,
                                  uint64_t ttl_ms)
{
    if (rec && seq >= rec->born_seq) {
        if (rec->evicted_seq > seq)
            return rec->evicted_expired ? HUB_HISTORY_EXPIRED
                                        : HUB_HISTORY_EVICTED;
        return HUB_HISTORY_OK;
    }
    /* It predates the record: an earlier record of this channel may have
     * held what it missed. Only an absence shorter than the ttl (less a
     * margin) proves it had all of that, and only if no record was dropped
     * for bytes since it left. */
    if (away_ms == UINT64_MAX || away_ms + AWAY_MARGIN_MS >= ttl_ms)
        return HUB_HISTORY_EXPIRED;
    if (hh->forced_ms && hh->forced_ms + away_ms + AWAY_MARGIN_MS >= now_ms)
        return HUB_HISTORY_EVICTED;
    return HUB_HISTORY_OK;
}

enum hub_history_gap hub_history_resume(struct hub_history *hh, unsigned app,
                                        const char *name, size_t len,
                                        const struct hub_history_pos *known,
                                        const struct hub_history_sockets *socks,
                                        uint64_t away_ms, uint64_t now_ms,
                                        uint64_t ttl_ms, size_t max_frames,
                                        struct hub_history_replay *out)
{
    enum hub_history_gap g = HUB_HISTORY_UNKNOWN_ORIGIN;
    struct hist_rec *rec;
    uint64_t seq = 0;
    struct hub_list *pos;
    size_t n = 0;

    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&hh->mu);
    for (unsigned i = 0; i < known->n; i++) {
        if (strcmp(known->id[i].origin, hh->origin)) {
            /* Another run's (or node's) events: what it missed of them is
             * gone with it. */
            g = HUB_HISTORY_UNKNOWN_ORIGIN;
            goto out;
        }
        seq = known->id[i].seq;
        g = HUB_HISTORY_OK;
    }
    if (g)
        goto out;
    rec = expire_rec(hh, find(hh, app, name, len), now_ms);
    g = reach(hh, rec, seq, away_ms, now_ms, ttl_ms);
    if (g)
        goto out;
    out->upto.n = 1;
    snprintf(out->upto.id[0].origin, sizeof(out->upto.id[0].origin), "%s",
             hh->origin);
    out->upto.id[0].seq = rec && rec->last_seq > seq ? rec->last_seq : seq;
    if (!rec)
        goto out;
    hub_list_for_each(pos, &rec->entries) {
        const struct hist_entry *e =
            hub_container_of(pos, struct hist_entry, chan_link);

        if (e->f->hseq > seq && !sent_by(e, socks))
            n++;
    }
    if (n > max_frames) {
        g = HUB_HISTORY_TOO_LARGE;
        goto out;
    }
    out->f = n ? malloc(n * sizeof(*out->f)) : NULL;
    if (n && !out->f) {
        g = HUB_HISTORY_TOO_LARGE;
        goto out;
    }
    hub_list_for_each(pos, &rec->entries) {
        struct hist_entry *e = hub_container_of(pos, struct hist_entry,
                                                chan_link);

        if (e->f->hseq > seq && !sent_by(e, socks))
            out->f[out->n++] = hub_frame_ref(e->f);
    }
out:
    pthread_mutex_unlock(&hh->mu);
    if (g)
        memset(&out->upto, 0, sizeof(out->upto));
    return g;
}

static uint64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void hub_history_stamp(struct hub_history *hh, struct hub_frame *f,
                       const char *origin, size_t len, uint64_t seq)
{
    struct remote_origin *o;

    if (!hh || !seq || !len || len > HUB_HISTORY_ORIGIN_MAX ||
        memchr(origin, '\0', len))
        return;
    for (size_t i = 0; i < len; i++)
        if (origin[i] == '"' || origin[i] == '\\' ||
            (unsigned char)origin[i] < 0x20)
            return; /* it goes into the marker's JSON as it is */
    pthread_mutex_lock(&hh->mu);
    for (o = hh->remotes; o; o = o->next)
        if (!strncmp(o->id, origin, len) && !o->id[len])
            break;
    if (!o && (o = malloc(sizeof(*o) + len + 1))) {
        memcpy(o->id, origin, len);
        o->id[len] = '\0';
        o->next = hh->remotes;
        hh->remotes = o;
        hh->n_remotes++;
    }
    if (o) {
        o->seen_ms = mono_ms();
        f->hseq = seq;
        f->horigin = o->id;
    }
    pthread_mutex_unlock(&hh->mu);
}

/* Under mu: forget the origins unseen for REMOTE_FORGET_MS. */
static void forget_remotes(struct hub_history *hh)
{
    uint64_t now = mono_ms();

    for (struct remote_origin **p = &hh->remotes; *p;) {
        struct remote_origin *o = *p;

        if (now - o->seen_ms > REMOTE_FORGET_MS) {
            *p = o->next;
            hh->n_remotes--;
            free(o);
        } else {
            p = &o->next;
        }
    }
}

int hub_history_id_parse(const char *s, size_t len, struct hub_history_id *out)
{
    const char *colon = memchr(s, ':', len);
    size_t olen;
    uint64_t v = 0;

    if (!colon)
        return -EINVAL;
    olen = (size_t)(colon - s);
    if (!olen || olen > HUB_HISTORY_ORIGIN_MAX || colon + 1 == s + len)
        return -EINVAL;
    for (const char *p = colon + 1; p < s + len; p++) {
        uint64_t d = (uint64_t)(*p - '0');

        if (*p < '0' || *p > '9' || v > (UINT64_MAX - d) / 10)
            return -EINVAL;
        v = v * 10 + d;
    }
    memcpy(out->origin, s, olen);
    out->origin[olen] = '\0';
    out->seq = v;
    return 0;
}

/* Under mu: does the read starting at `after` or since_ms reach back? */
static bool read_complete(const struct hub_history *hh,
                          const struct hist_rec *rec,
                          const struct hub_history_id *after,
                          uint64_t since_ms, uint64_t now_ms, uint64_t ttl_ms)
{
    if (after)
        return !strcmp(after->origin, hh->origin) &&
               reach(hh, rec, after->seq, UINT64_MAX, now_ms, ttl_ms) ==
                   HUB_HISTORY_OK;
    /* Since a time: nothing at or after it evicted, and either the record
     * is older than it or anything an earlier record held had expired
     * before it (an earlier record outlives its newest entry by nothing,
     * and that entry lived ttl). */
    if (hh->forced_ms && hh->forced_ms >= since_ms)
        return false;
    if (rec && rec->evicted_ms >= since_ms && rec->evicted_seq)
        return false;
    return (rec && rec->born_ms <= since_ms) || since_ms + ttl_ms > now_ms;
}

int hub_history_read(struct hub_history *hh, unsigned app, const char *name,
                     size_t len, const struct hub_history_id *after,
                     uint64_t since_ms, size_t limit, uint64_t now_ms,
                     uint64_t ttl_ms, struct hub_history_events *out,
                     bool *complete)
{
    struct hist_rec *rec;
    struct hub_list *pos;
    bool same = after && !strcmp(after->origin, hh->origin);
    int rc = 0;

    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&hh->mu);
    rec = expire_rec(hh, find(hh, app, name, len), now_ms);
    *complete = read_complete(hh, rec, after, since_ms, now_ms, ttl_ms);
    if (!rec) {
        rc = -ENOENT;
        goto out;
    }
    out->ev = calloc(limit < rec->n ? limit : rec->n, sizeof(*out->ev));
    if (!out->ev && limit && rec->n) {
        rc = -ENOMEM;
        goto out;
    }
    hub_list_for_each(pos, &rec->entries) {
        struct hist_entry *e = hub_container_of(pos, struct hist_entry,
                                                chan_link);
        struct hub_history_event *v;

        if (after ? (same && e->f->hseq <= after->seq)
                  : e->time_ms < since_ms)
            continue;
        if (out->n == limit) {
            out->more = true;
            break;
        }
        v = &out->ev[out->n++];
        snprintf(v->id.origin, sizeof(v->id.origin), "%s", hh->origin);
        v->id.seq = e->f->hseq;
        v->time_ms = e->time_ms;
        v->f = hub_frame_ref(e->f);
    }
out:
    pthread_mutex_unlock(&hh->mu);
    return rc;
}

void hub_history_events_free(struct hub_history_events *ev)
{
    for (size_t i = 0; i < ev->n; i++)
        hub_frame_unref(ev->ev[i].f);
    free(ev->ev);
    memset(ev, 0, sizeof(*ev));
}

unsigned hub_history_reclaim(struct hub_history *hh, uint64_t now_ms)
{
    unsigned n = 0;

    pthread_mutex_lock(&hh->mu);
    for (unsigned i = 0; i < hh->n_apps; i++) {
        struct hub_list *head = &hh->apps[i]->entries;

        while (!hub_list_is_empty(head)) {
            struct hist_entry *e = hub_container_of(head->next,
                                                    struct hist_entry,
                                                    app_link);

            if (now_ms < e->expires_ms)
                break;
            entry_drop(hh, e, true, now_ms);
            n++;
        }
    }
    forget_remotes(hh);
    pthread_mutex_unlock(&hh->mu);
    return n;
}

void hub_history_usage(struct hub_history *hh, unsigned app,
                       struct hub_history_usage *out)
{
    memset(out, 0, sizeof(*out));
    if (!hh)
        return;
    pthread_mutex_lock(&hh->mu);
    if (app == UINT32_MAX) {
        out->channels = hh->t.count;
        out->events = hh->n;
        out->bytes = hh->bytes;
        out->evicted = hh->evicted;
        out->expired = hh->expired;
    } else if (app < hh->n_apps) {
        out->events = hh->apps[app]->n;
        out->bytes = hh->apps[app]->bytes;
    }
    pthread_mutex_unlock(&hh->mu);
}

int hub_history_check(struct hub_history *hh)
{
    uint64_t n = 0, bytes = 0, recs_bytes = 0;
    struct hub_list *pos;
    int rc = 0;

    pthread_mutex_lock(&hh->mu);
    if (hub_chantab_check(&hh->t))
        rc = -EFAULT;
    hub_list_for_each(pos, &hh->entries) {
        const struct hist_entry *e =
            hub_container_of(pos, struct hist_entry, hub_link);

        n++;
        bytes += e->bytes;
        if (find(hh, e->rec->node.app, e->rec->name, e->rec->node.name_len) !=
            e->rec)
            rc = -EFAULT;
    }
    for (uint32_t b = 0; b <= hh->t.mask; b++)
        for (struct hub_chan_node *c = hh->t.b[b]; c; c = c->hnext) {
            const struct hist_rec *rec =
                hub_container_of(c, struct hist_rec, node);

            recs_bytes += rec->bytes;
            if (!rec->n)
                rc = -EFAULT;
        }
    if (n != hh->n || bytes + recs_bytes != hh->bytes)
        rc = -EFAULT;
    pthread_mutex_unlock(&hh->mu);
    return rc;
}

/* The feature: the hub's store, reclaimed on loop 0. */

static void feature_beat(struct hub_loop *l, uint64_t now_ms)
{
    if (l->id == 0)
        hub_history_reclaim(hub_history_of(l->hub), now_ms);
}

static int feature_hub_init(struct hub *h, void **state)
{
    *state = hub_history_create(h->cfg->history_max_bytes);
    return *state ? 0 : -ENOMEM;
}

static void feature_hub_fini(struct hub *h, void *state)
{
    (void)h;
    hub_history_destroy(state);
}

const struct hub_feature hub_history_feature = {
    .name = "history",
    .hub_init = feature_hub_init,
    .hub_fini = feature_hub_fini,
    .beat = feature_beat,
};

struct hub_history *hub_history_of(const struct hub *h)
{
    return hub_feature_state(h, &hub_history_feature);
}
