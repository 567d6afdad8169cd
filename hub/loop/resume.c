/*
 * hub/loop/resume.c - recovery on a loop (hub/loop/resume.h): the pair
 * frames a resuming session gets, the per-loop table of resuming sessions'
 * state, and the guards and paced replays of resumed subscriptions.
 */
#include "hub/loop/resume.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/base/chantab.h"
#include "hub/loop/chanmap.h"
#include "hub/loop/compress.h"
#include "hub/loop/loop.h"
#include "hub/loop/session.h"

/* The table's key space: no app has this index. */
#define RESUME_KEY_APP 0x7fffffffu

/* A guarded subscription: its replay, then the live frames held behind it. */
struct rsub {
    struct hub_sub *sub;
    struct hub_frame **q;          /* references, oldest at head */
    size_t head, n, cap;
    size_t replay_left;            /* of the n, the replay's (at the head) */
    uint64_t held_bytes;           /* live frames held (bounded) */
    struct hub_frame *done;        /* after the replay; NULL once sent */
    bool waiting;                  /* a read is on its way: hold all */
    unsigned n_floor;
    struct hub_resume_floor floor[HUB_RESUME_ORIGINS];
    char origins[HUB_RESUME_ORIGINS][65];
};

struct hub_resume {
    struct hub_chan_node node;     /* key: the session's address */
    struct hub_session *s;
    uintptr_t key;
    void *proto;
    void (*proto_free)(void *);
    struct rsub **subs;
    unsigned n_subs, cap_subs;
};

/* The marker: {"event":"lubdub:id","data":["<origin>",<seq>]} framed. */
static size_t marker(unsigned char *buf, size_t cap, const struct hub_frame *f)
{
    int n = snprintf((char *)buf + 2, cap - 2,
                     "{\"event\":\"lubdub:id\",\"data\":[\"%s\",%" PRIu64 "]}",
                     f->horigin, f->hseq);

    if (n < 0 || (size_t)n >= cap - 2 || n > 125)
        return 0;
    buf[0] = 0x81;
    buf[1] = (unsigned char)n;
    return (size_t)n + 2;
}

struct hub_frame *hub_loop_rframe(struct hub_loop *l, struct hub_frame *f,
                                  bool z)
{
    struct hub_frame *r = atomic_load_explicit(&f->r, memory_order_acquire);
    struct hub_frame *seen = NULL, *g, *zf;
    _Atomic(struct hub_frame *) *slot;
    unsigned char m[128];
    size_t mlen;

    if (!r) {
        mlen = marker(m, sizeof(m), f);
        r = mlen ? hub_frame_create_pair(m, mlen, hub_frame_data(f), f->len)
                 : NULL;
        if (!r)
            return NULL;
        if (!atomic_compare_exchange_strong_explicit(&f->r, &seen, r,
                                                     memory_order_acq_rel,
                                                     memory_order_acquire)) {
            hub_frame_unref(r);
            r = seen;
        }
    }
    if (!z)
        return r;
    /* The compressed pair: the marker as it is (far under any threshold)
     * and f's own compressed variant; r's z slot holds it. */
    g = atomic_load_explicit(&r->z, memory_order_acquire);
    if (g)
        return g == HUB_FRAME_PLAIN ? r : g;
    zf = hub_loop_zframe(l, f);
    if (zf == f) {
        g = HUB_FRAME_PLAIN;
    } else {
        mlen = marker(m, sizeof(m), f);
        g = mlen ? hub_frame_create_pair(m, mlen, hub_frame_data(zf), zf->len)
                 : NULL;
        if (!g)
            return NULL;
    }
    slot = &r->z;
    seen = NULL;
    if (!atomic_compare_exchange_strong_explicit(slot, &seen, g,
                                                 memory_order_acq_rel,
                                                 memory_order_acquire)) {
        if (g != HUB_FRAME_PLAIN)
            hub_frame_unref(g);
        g = seen;
    }
    return g == HUB_FRAME_PLAIN ? r : g;
}

static struct hub_resume *find(const struct hub_session *s)
{
    struct hub_loop *l = s->loop;
    uintptr_t key = (uintptr_t)s;
    struct hub_chan_node *n;

    if (!l || !s->resume || !l->resumes)
        return NULL;
    n = hub_chantab_find(l->resumes, RESUME_KEY_APP, (const char *)&key,
                         sizeof(key),
                         hub_chan_hash(RESUME_KEY_APP, (const char *)&key,
                                       sizeof(key)));
    return n ? hub_container_of(n, struct hub_resume, node) : NULL;
}

int hub_resume_enable(struct hub_session *s)
{
    struct hub_loop *l = s->loop;
    struct hub_resume *r;

    if (s->resume)
        return 0;
    if (!l->resumes) {
        l->resumes = calloc(1, sizeof(*l->resumes));
        if (!l->resumes || hub_chantab_init(l->resumes, 64)) {
            free(l->resumes);
            l->resumes = NULL;
            return -ENOMEM;
        }
    }
    r = calloc(1, sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->s = s;
    r->key = (uintptr_t)s;
    r->node.app = RESUME_KEY_APP;
    r->node.name = (const char *)&r->key;
    r->node.name_len = sizeof(r->key);
    r->node.hash = hub_chan_hash(RESUME_KEY_APP, r->node.name,
                                 sizeof(r->key));
    hub_chantab_insert(l->resumes, &r->node);
    s->resume = true;
    HUB_STAT_ADD(l->stats.resume_sessions, 1);
    return 0;
}

bool hub_resume_enabled(const struct hub_session *s)
{
    return s->resume;
}

void *hub_resume_proto(const struct hub_session *s)
{
    struct hub_resume *r = find(s);

    return r ? r->proto : NULL;
}

void hub_resume_set_proto(struct hub_session *s, void *proto,
                          void (*proto_free)(void *))
{
    struct hub_resume *r = find(s);

    if (!r) {
        if (proto && proto_free)
            proto_free(proto);
        return;
    }
    if (r->proto && r->proto != proto && r->proto_free)
        r->proto_free(r->proto);
    r->proto = proto;
    r->proto_free = proto_free;
}

static void rsub_free(struct rsub *g)
{
    for (size_t i = 0; i < g->n; i++)
        hub_frame_unref(g->q[(g->head + i) % g->cap]);
    free(g->q);
    if (g->done)
        hub_frame_unref(g->done);
    free(g);
}

static struct rsub **rsub_slot(struct hub_resume *r, const struct hub_sub *sub)
{
    for (unsigned i = 0; i < r->n_subs; i++)
        if (r->subs[i]->sub == sub)
            return &r->subs[i];
    return NULL;
}

/* Drop the guard in *slot (r's), clearing rguard with the last one. */
static void rsub_remove(struct hub_resume *r, struct rsub **slot)
{
    rsub_free(*slot);
    *slot = r->subs[--r->n_subs];
    if (!r->n_subs)
        r->s->rguard = false;
}

/* g's floors: a copy of floor[0..n) (at most HUB_RESUME_ORIGINS). */
static void set_floors(struct rsub *g, const struct hub_resume_floor *floor,
                       unsigned n)
{
    if (n > HUB_RESUME_ORIGINS)
        n = HUB_RESUME_ORIGINS;
    for (unsigned k = 0; k < n; k++) {
        snprintf(g->origins[k], sizeof(g->origins[k]), "%s", floor[k].origin);
        g->floor[k].origin = g->origins[k];
        g->floor[k].seq = floor[k].seq;
    }
    g->n_floor = n;
}

/* Append a reference to f at g's tail (the caller's reference moves in). */
static int rsub_push(struct rsub *g, struct hub_frame *f)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 16;
        struct hub_frame **q = malloc(cap * sizeof(*q));

        if (!q)
            return -ENOMEM;
        for (size_t i = 0; i < g->n; i++)
            q[i] = g->q[(g->head + i) % g->cap];
        free(g->q);
        g->q = q;
        g->cap = cap;
        g->head = 0;
    }
    g->q[(g->head + g->n) % g->cap] = f;
    g->n++;
    return 0;
}

static void close_nomem(struct hub_session *s)
{
    hub_session_close(s, 1011, "out of memory", HUB_CLOSE_ERROR, true);
}

/*
 * Send what g's queue holds while s's queue is under the low mark: the
 * replay, its done message once the replay is out, then the live frames
 * held behind it. false when s closed.
 */
static bool rsub_pump(struct hub_session *s, struct rsub *g)
{
    struct hub_loop *l = s->loop;
    uint64_t low = HUB_RX_LOW(l->cfg->max_queue);

    for (;;) {
        struct hub_frame *f, *p;

        if (!g->replay_left && g->done) {
            if (hub_session_send(s, g->done))
                return false;
            hub_frame_unref(g->done);
            g->done = NULL;
        }
        if (!g->n)
            return true;
        f = g->q[g->head];
        p = hub_loop_rframe(l, f, s->zout);
        if (!p) {
            close_nomem(s);
            return false;
        }
        if (s->q.bytes && s->q.bytes + p->len > low)
            return true;
        if (hub_session_send(s, p))
            return false;
        if (g->replay_left) {
            g->replay_left--;
            HUB_STAT_ADD(l->stats.replayed_events, 1);
        } else {
            g->held_bytes -= f->len;
        }
        hub_frame_unref(f);
        g->head = (g->head + 1) % g->cap;
        g->n--;
    }
}

/* Add g to r's guards; -ENOMEM. */
static int rsub_add(struct hub_resume *r, struct rsub *g)
{
    if (r->n_subs == r->cap_subs) {
        unsigned cap = r->cap_subs ? 2 * r->cap_subs : 4;
        struct rsub **subs = realloc(r->subs, cap * sizeof(*subs));

        if (!subs)
            return -ENOMEM;
        r->subs = subs;
        r->cap_subs = cap;
    }
    r->subs[r->n_subs++] = g;
    r->s->rguard = true;
    return 0;
}

int hub_resume_guard(struct hub_session *s, struct hub_sub *sub,
                     const struct hub_resume_floor *floor, unsigned n_floor,
                     struct hub_frame *const *replay, size_t n,
                     struct hub_frame *done)
{
    struct hub_resume *r = find(s);
    struct rsub *g = r ? calloc(1, sizeof(*g)) : NULL;
    size_t i = 0;

    if (!g)
        goto nomem;
    g->sub = sub;
    g->done = done;
    done = NULL;
    set_floors(g, floor, n_floor);
    for (; i < n; i++)
        if (rsub_push(g, replay[i]))
            goto nomem;
    g->replay_left = n;
    if (rsub_add(r, g))
        goto nomem;
    rsub_pump(s, g);
    return 0;
nomem:
    /* The references not yet moved into g, then g's own. */
    for (; i < n; i++)
        hub_frame_unref(replay[i]);
    if (done)
        hub_frame_unref(done);
    if (g)
        rsub_free(g);
    close_nomem(s);
    return -ENOMEM;
}

/* g's floor for f's origin, or NULL when g has none. */
static struct hub_resume_floor *floor_of(struct rsub *g,
                                         const struct hub_frame *f)
{
    for (unsigned k = 0; k < g->n_floor; k++)
        if (g->floor[k].origin == f->horigin ||
            !strcmp(g->floor[k].origin, f->horigin))
            return &g->floor[k];
    return NULL;
}

bool hub_resume_take(struct hub_loop *l, struct hub_sub *sub,
                     struct hub_frame *f)
{
    struct hub_session *s = sub->s;
    struct hub_resume *r = find(s);
    struct rsub **slot = r ? rsub_slot(r, sub) : NULL;
    struct rsub *g;
    struct hub_resume_floor *fl;

    (void)l;
    if (!slot)
        return false;
    g = *slot;
    fl = floor_of(g, f);
    if (!g->waiting && fl && f->hseq <= fl->seq)
        return true; /* the replay had it, or the client did */
    if (g->n || g->waiting) {
        /* Behind the replay, in order. */
        if (g->held_bytes + f->len > s->loop->cfg->max_queue) {
            hub_session_send_error(s, 4100,
                                   "Slow consumer: replay backlog full", true);
            return true;
        }
        if (rsub_push(g, hub_frame_ref(f))) {
            hub_frame_unref(f);
            close_nomem(s);
            return true;
        }
        g->held_bytes += f->len;
        return true;
    }
    /* Past the floor: one origin's frames come in seq order, so no frame
     * at or under it can follow. */
    if (fl)
        *fl = g->floor[--g->n_floor];
    if (!g->n_floor && !g->done)
        rsub_remove(r, slot);
    return false;
}

void hub_resume_pump(struct hub_session *s)
{
    struct hub_resume *r = find(s);

    if (!r)
        return;
    for (unsigned i = 0; i < r->n_subs; i++)
        if (!r->subs[i]->waiting && (r->subs[i]->n || r->subs[i]->done) &&
            !rsub_pump(s, r->subs[i]))
            return;
}

int hub_resume_guard_wait(struct hub_session *s, struct hub_sub *sub)
{
    struct hub_resume *r = find(s);
    struct rsub *g = r ? calloc(1, sizeof(*g)) : NULL;

    if (g) {
        g->sub = sub;
        g->waiting = true;
        if (!rsub_add(r, g))
            return 0;
        free(g);
    }
    close_nomem(s);
    return -ENOMEM;
}

bool hub_resume_waiting(struct hub_session *s, const struct hub_sub *sub)
{
    struct hub_resume *r = find(s);
    struct rsub **slot = r ? rsub_slot(r, sub) : NULL;

    return slot && (*slot)->waiting;
}

static void unref_all(struct hub_frame *const *fs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (fs[i])
            hub_frame_unref(fs[i]);
}

int hub_resume_guard_fill(struct hub_session *s, struct hub_sub *sub,
                          struct hub_frame *const *first, size_t n_first,
                          const struct hub_resume_floor *floor,
                          unsigned n_floor, struct hub_frame *const *replay,
                          size_t n, struct hub_frame *done)
{
    struct hub_resume *r = find(s);
    struct rsub **slot = r ? rsub_slot(r, sub) : NULL;
    struct rsub *g = slot ? *slot : NULL;
    struct hub_frame **held;
    size_t n_held, i;

    if (!g || !g->waiting) {
        unref_all(first, n_first);
        unref_all(replay, n);
        if (done)
            hub_frame_unref(done);
        return 0;
    }
    /* What was held, out of the queue; the queue refills in order. */
    n_held = g->n;
    held = malloc((n_held ? n_held : 1) * sizeof(*held));
    if (!held) {
        unref_all(first, n_first);
        unref_all(replay, n);
        if (done)
            hub_frame_unref(done);
        close_nomem(s);
        return -ENOMEM;
    }
    for (i = 0; i < n_held; i++)
        held[i] = g->q[(g->head + i) % g->cap];
    g->n = g->head = 0;
    g->held_bytes = 0;
    g->waiting = false;
    set_floors(g, floor, n_floor);
    for (i = 0; i < n_first; i++)
        if (first[i])
            (void)hub_session_send(s, first[i]);
    unref_all(first, n_first);
    g->done = done;
    for (i = 0; i < n; i++)
        if (rsub_push(g, replay[i]))
            break;
    g->replay_left = g->n;
    unref_all(replay + i, n - i);
    for (size_t k = 0; k < n_held; k++) {
        struct hub_resume_floor *fl = floor_of(g, held[k]);

        if ((fl && held[k]->hseq <= fl->seq) || i < n ||
            rsub_push(g, held[k])) {
            hub_frame_unref(held[k]);
            continue;
        }
        g->held_bytes += held[k]->len;
    }
    free(held);
    if (i < n) {
        close_nomem(s);
        return -ENOMEM;
    }
    rsub_pump(s, g);
    return 0;
}

struct hub_session *hub_resume_session(struct hub_loop *l, const void *key,
                                       uint64_t sid_hi, uint32_t sid_lo)
{
    uintptr_t k = (uintptr_t)key;
    struct hub_chan_node *n;
    struct hub_resume *r;

    if (!l->resumes)
        return NULL;
    n = hub_chantab_find(l->resumes, RESUME_KEY_APP, (const char *)&k,
                         sizeof(k),
                         hub_chan_hash(RESUME_KEY_APP, (const char *)&k,
                                       sizeof(k)));
    if (!n)
        return NULL;
    r = hub_container_of(n, struct hub_resume, node);
    if (r->s->sid_hi != sid_hi || r->s->sid_lo != sid_lo)
        return NULL;
    return r->s;
}

void hub_resume_sub_gone(struct hub_session *s, struct hub_sub *sub)
{
    struct hub_resume *r = find(s);
    struct rsub **slot = r ? rsub_slot(r, sub) : NULL;

    if (slot)
        rsub_remove(r, slot);
}

void hub_resume_session_gone(struct hub_session *s)
{
    struct hub_resume *r = find(s);

    if (!r)
        return;
    while (r->n_subs)
        rsub_remove(r, &r->subs[0]);
    free(r->subs);
    if (r->proto && r->proto_free)
        r->proto_free(r->proto);
    hub_chantab_remove(s->loop->resumes, &r->node);
    free(r);
    s->resume = false;
    s->rguard = false;
    HUB_STAT_ADD(s->loop->stats.resume_sessions, -1);
}

void hub_loop_resume_fini(struct hub_loop *l)
{
    if (!l->resumes)
        return;
    hub_chantab_fini(l->resumes);
    free(l->resumes);
    l->resumes = NULL;
}
