/*
 * hub/channel.c - local channel index, hub-wide directory, publication.
 *
 * Both tables hash (app, name) with FNV-1a into power-of-two bucket arrays
 * that double at load 1; channels are few compared with messages, so the
 * allocation on first subscribe is not on the hot path.
 */
#include "hub/channel.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/loop.h"
#include "hub/session.h"

static uint64_t chan_hash(unsigned app, const char *name, size_t len)
{
    uint64_t h = 1469598103934665603ull ^ app;

    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)name[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Local index. */

struct hub_chanmap {
    struct hub_lchan **b;
    uint32_t mask;
    uint32_t count;
};

struct hub_chanmap *hub_chanmap_create(void)
{
    struct hub_chanmap *m = calloc(1, sizeof(*m));

    if (!m)
        return NULL;
    m->b = calloc(64, sizeof(*m->b));
    if (!m->b) {
        free(m);
        return NULL;
    }
    m->mask = 63;
    return m;
}

void hub_chanmap_destroy(struct hub_chanmap *m)
{
    if (!m)
        return;
    for (uint32_t i = 0; i <= m->mask; i++) {
        struct hub_lchan *c = m->b[i], *n;

        for (; c; c = n) {
            n = c->hnext;
            free(c);
        }
    }
    free(m->b);
    free(m);
}

uint32_t hub_chanmap_count(const struct hub_chanmap *m)
{
    return m->count;
}

struct hub_lchan *hub_chanmap_find(struct hub_chanmap *m, unsigned app,
                                   const char *name, size_t len)
{
    uint64_t h = chan_hash(app, name, len);
    struct hub_lchan *c = m->b[h & m->mask];

    for (; c; c = c->hnext)
        if (c->hash == h && c->app == app && c->name_len == len &&
            memcmp(c->name, name, len) == 0)
            return c;
    return NULL;
}

static void chanmap_grow(struct hub_chanmap *m)
{
    uint32_t nmask = m->mask * 2 + 1;
    struct hub_lchan **nb = calloc((size_t)nmask + 1, sizeof(*nb));

    if (!nb)
        return; /* Longer chains, still correct. */
    for (uint32_t i = 0; i <= m->mask; i++) {
        struct hub_lchan *c = m->b[i], *n;

        for (; c; c = n) {
            n = c->hnext;
            c->hnext = nb[c->hash & nmask];
            nb[c->hash & nmask] = c;
        }
    }
    free(m->b);
    m->b = nb;
    m->mask = nmask;
}

struct hub_lchan *hub_chanmap_get(struct hub_chanmap *m, unsigned app,
                                  const char *name, size_t len)
{
    struct hub_lchan *c = hub_chanmap_find(m, app, name, len);

    if (c)
        return c;
    c = malloc(sizeof(*c) + len + 1);
    if (!c)
        return NULL;
    c->hash = chan_hash(app, name, len);
    c->app = app;
    c->kind = hub_channel_classify(name, len);
    hub_list_init(&c->members);
    c->n_members = 0;
    c->name_len = (uint32_t)len;
    memcpy(c->name, name, len);
    c->name[len] = '\0';
    if (m->count >= m->mask)
        chanmap_grow(m);
    c->hnext = m->b[c->hash & m->mask];
    m->b[c->hash & m->mask] = c;
    m->count++;
    return c;
}

void hub_chanmap_put(struct hub_chanmap *m, struct hub_lchan *ch)
{
    struct hub_lchan **pp;

    if (ch->n_members)
        return;
    for (pp = &m->b[ch->hash & m->mask]; *pp; pp = &(*pp)->hnext) {
        if (*pp == ch) {
            *pp = ch->hnext;
            m->count--;
            free(ch);
            return;
        }
    }
}

/* Directory. */

struct hub_member {
    char *user_id;
    char *user_info;               /* JSON text or NULL */
    uint32_t conns;
};

struct hub_gchan {
    struct hub_gchan *hnext;
    uint64_t hash;
    unsigned app;
    uint32_t subs;
    struct hub_member *members;
    uint32_t n_members, cap_members;
    uint32_t name_len;
    char name[];
};

struct hub_directory {
    pthread_mutex_t mu;
    struct hub_gchan **b;
    uint32_t mask, count;
    uint64_t seq;                  /* presence changes, hub-wide */
};

struct hub_directory *hub_directory_create(void)
{
    struct hub_directory *d = calloc(1, sizeof(*d));

    if (!d)
        return NULL;
    d->b = calloc(256, sizeof(*d->b));
    if (!d->b) {
        free(d);
        return NULL;
    }
    d->mask = 255;
    pthread_mutex_init(&d->mu, NULL);
    return d;
}

static void gchan_free(struct hub_gchan *g)
{
    for (uint32_t i = 0; i < g->n_members; i++) {
        free(g->members[i].user_id);
        free(g->members[i].user_info);
    }
    free(g->members);
    free(g);
}

void hub_directory_destroy(struct hub_directory *d)
{
    if (!d)
        return;
    for (uint32_t i = 0; i <= d->mask; i++) {
        struct hub_gchan *g = d->b[i], *n;

        for (; g; g = n) {
            n = g->hnext;
            gchan_free(g);
        }
    }
    pthread_mutex_destroy(&d->mu);
    free(d->b);
    free(d);
}

static struct hub_gchan *dir_find(struct hub_directory *d, unsigned app,
                                  const char *name, size_t len,
                                  struct hub_gchan ***pprev)
{
    uint64_t h = chan_hash(app, name, len);
    struct hub_gchan **pp = &d->b[h & d->mask];

    for (; *pp; pp = &(*pp)->hnext) {
        struct hub_gchan *g = *pp;

        if (g->hash == h && g->app == app && g->name_len == len &&
            memcmp(g->name, name, len) == 0) {
            if (pprev)
                *pprev = pp;
            return g;
        }
    }
    return NULL;
}

static void dir_grow(struct hub_directory *d)
{
    uint32_t nmask = d->mask * 2 + 1;
    struct hub_gchan **nb = calloc((size_t)nmask + 1, sizeof(*nb));

    if (!nb)
        return;
    for (uint32_t i = 0; i <= d->mask; i++) {
        struct hub_gchan *g = d->b[i], *n;

        for (; g; g = n) {
            n = g->hnext;
            g->hnext = nb[g->hash & nmask];
            nb[g->hash & nmask] = g;
        }
    }
    free(d->b);
    d->b = nb;
    d->mask = nmask;
}

static struct hub_member *find_member(struct hub_gchan *g, const char *uid)
{
    for (uint32_t i = 0; i < g->n_members; i++)
        if (strcmp(g->members[i].user_id, uid) == 0)
            return &g->members[i];
    return NULL;
}

/* {"presence":{"ids":[..],"hash":{id:info},"count":n}} as text. */
static char *members_json(const struct hub_gchan *g)
{
    json_t *ids = json_array(), *hash = json_object(), *root;
    char *out;

    for (uint32_t i = 0; i < g->n_members; i++) {
        const struct hub_member *m = &g->members[i];
        json_t *info = NULL;

        if (m->user_info)
            info = json_loads(m->user_info, JSON_DECODE_ANY, NULL);
        json_array_append_new(ids, json_string(m->user_id));
        json_object_set_new(hash, m->user_id, info ? info : json_object());
    }
    root = json_pack("{s:{s:o,s:o,s:I}}", "presence", "ids", ids, "hash",
                     hash, "count", (json_int_t)g->n_members);
    if (!root)
        return NULL;
    out = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return out;
}

int hub_directory_join(struct hub_directory *d, unsigned app,
                       const char *name, size_t len,
                       struct hub_presence_join *join)
{
    struct hub_gchan *g;
    int rc = 0;

    pthread_mutex_lock(&d->mu);
    g = dir_find(d, app, name, len, NULL);
    if (!g) {
        g = calloc(1, sizeof(*g) + len + 1);
        if (!g) {
            rc = -ENOMEM;
            goto out;
        }
        g->hash = chan_hash(app, name, len);
        g->app = app;
        g->name_len = (uint32_t)len;
        memcpy(g->name, name, len);
        if (d->count >= d->mask)
            dir_grow(d);
        g->hnext = d->b[g->hash & d->mask];
        d->b[g->hash & d->mask] = g;
        d->count++;
    }
    if (join) {
        struct hub_member *m = find_member(g, join->user_id);

        join->first = false;
        if (!m) {
            if (join->max_members && g->n_members >= join->max_members) {
                rc = -ENOSPC;
                goto out_maybe_free;
            }
            if (g->n_members == g->cap_members) {
                uint32_t cap = g->cap_members ? g->cap_members * 2 : 4;
                struct hub_member *nm =
                    realloc(g->members, cap * sizeof(*nm));

                if (!nm) {
                    rc = -ENOMEM;
                    goto out_maybe_free;
                }
                g->members = nm;
                g->cap_members = cap;
            }
            m = &g->members[g->n_members];
            m->user_id = strdup(join->user_id);
            m->user_info = join->user_info ? strdup(join->user_info) : NULL;
            if (!m->user_id || (join->user_info && !m->user_info)) {
                free(m->user_id);
                free(m->user_info);
                rc = -ENOMEM;
                goto out_maybe_free;
            }
            m->conns = 0;
            g->n_members++;
            join->first = true;
            d->seq++;
        }
        m->conns++;
        join->seq = d->seq;
        join->members_json = members_json(g);
    }
    g->subs++;
    goto out;
out_maybe_free:
    if (g->subs == 0 && g->n_members == 0) {
        struct hub_gchan **pp;

        if (dir_find(d, app, name, len, &pp)) {
            *pp = g->hnext;
            d->count--;
            gchan_free(g);
        }
    }
out:
    pthread_mutex_unlock(&d->mu);
    return rc;
}

void hub_directory_leave(struct hub_directory *d, unsigned app,
                         const char *name, size_t len, const char *user_id,
                         bool *last)
{
    hub_directory_leave_seq(d, app, name, len, user_id, last, NULL);
}

void hub_directory_leave_seq(struct hub_directory *d, unsigned app,
                             const char *name, size_t len,
                             const char *user_id, bool *last, uint64_t *seq)
{
    struct hub_gchan *g, **pp;

    if (last)
        *last = false;
    if (seq)
        *seq = 0;
    pthread_mutex_lock(&d->mu);
    g = dir_find(d, app, name, len, &pp);
    if (!g)
        goto out;
    if (user_id) {
        struct hub_member *m = find_member(g, user_id);

        if (m && --m->conns == 0) {
            free(m->user_id);
            free(m->user_info);
            *m = g->members[--g->n_members];
            d->seq++;
            if (seq)
                *seq = d->seq;
            if (last)
                *last = true;
        }
    }
    if (g->subs)
        g->subs--;
    if (g->subs == 0) {
        *pp = g->hnext;
        d->count--;
        gchan_free(g);
    }
out:
    pthread_mutex_unlock(&d->mu);
}

void hub_directory_info(struct hub_directory *d, unsigned app,
                        const char *name, size_t len,
                        struct hub_channel_info *out)
{
    struct hub_gchan *g;

    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&d->mu);
    g = dir_find(d, app, name, len, NULL);
    if (g) {
        out->occupied = g->subs > 0;
        out->subscription_count = g->subs;
        out->user_count = g->n_members;
    }
    pthread_mutex_unlock(&d->mu);
}

json_t *hub_directory_list(struct hub_directory *d, unsigned app,
                           const char *prefix, bool user_count)
{
    json_t *out = json_object();
    size_t plen = prefix ? strlen(prefix) : 0;

    if (!out)
        return NULL;
    pthread_mutex_lock(&d->mu);
    for (uint32_t i = 0; i <= d->mask; i++) {
        for (struct hub_gchan *g = d->b[i]; g; g = g->hnext) {
            json_t *o;

            if (g->app != app || !g->subs)
                continue;
            if (plen && (g->name_len < plen ||
                         memcmp(g->name, prefix, plen) != 0))
                continue;
            o = json_object();
            if (user_count)
                json_object_set_new(o, "user_count",
                                    json_integer(g->n_members));
            json_object_set_new(out, g->name, o);
        }
    }
    pthread_mutex_unlock(&d->mu);
    return out;
}

json_t *hub_directory_users(struct hub_directory *d, unsigned app,
                            const char *name, size_t len)
{
    struct hub_gchan *g;
    json_t *arr = json_array();

    if (!arr)
        return NULL;
    pthread_mutex_lock(&d->mu);
    g = dir_find(d, app, name, len, NULL);
    if (g)
        for (uint32_t i = 0; i < g->n_members; i++)
            json_array_append_new(
                arr, json_pack("{s:s}", "id", g->members[i].user_id));
    pthread_mutex_unlock(&d->mu);
    return arr;
}

/* Publication. */

int hub_excl_parse(struct hub_excl *ex, const char *sid)
{
    char *end;
    unsigned long long hi, lo;

    ex->set = false;
    if (!sid || !(*sid >= '0' && *sid <= '9'))
        return -EINVAL;
    errno = 0;
    hi = strtoull(sid, &end, 10);
    if (errno || *end != '.' || !(end[1] >= '0' && end[1] <= '9'))
        return -EINVAL;
    lo = strtoull(end + 1, &end, 10);
    if (errno || *end || lo > UINT32_MAX)
        return -EINVAL;
    ex->set = true;
    ex->hi = hi;
    ex->lo = (uint32_t)lo;
    return 0;
}

/*
 * A publication for the other loops: one block with one inbox node per
 * loop, all pointing at it; the frame reference and the block go with the
 * last node run or dropped.
 */
struct hub_pub;

struct pub_node {
    struct hub_inbox_node node;
    struct hub_pub *pub;
};

struct hub_pub {
    atomic_uint refs;
    struct hub_frame *frame;
    unsigned app;
    struct hub_excl excl;
    size_t name_len;
    char *name;
    struct pub_node nodes[];
};

static void pub_unref(struct hub_pub *p)
{
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1) {
        hub_frame_unref(p->frame);
        free(p);
    }
}

/*
 * Whether n more bytes fit the loop's budget; the first time one does not,
 * evict (forced) and look again.
 */
static bool budget_fits(struct hub_loop *l, uint64_t budget, uint64_t n,
                        bool *forced)
{
    if (hub_loop_queued(l) + n <= budget)
        return true;
    if (!*forced) {
        *forced = true;
        hub_loop_evict(l, budget - n, true);
    }
    return hub_loop_queued(l) + n <= budget;
}

/*
 * Fan-out under the queue budget (hub_loop_budget). The loop's queued
 * bytes are its own, so one comparison per publish decides: when every
 * member's copy fits, deliver and account once for all; past the high
 * mark, evict the furthest behind first. When it does not fit, evict, then
 * go recipient by recipient: one behind by more than an even share, or one
 * the budget still cannot take, does not get the frame (counted in
 * queue_budget_drops) and is closed 4100 (queue_budget), since a Pusher
 * stream with a hole in it is worse than a reconnect. So a publish never
 * takes the loop past its budget.
 */
unsigned hub_deliver_local(struct hub_loop *l, unsigned app, const char *name,
                           size_t len, struct hub_frame *f,
                           const struct hub_excl *excl)
{
    struct hub_lchan *ch = hub_chanmap_find(l->chans, app, name, len);
    uint64_t budget, share = 0, accounted = 0;
    struct hub_list *pos;
    unsigned n = 0;
    bool tight = false, forced = false;

    if (!ch)
        return 0;
    l->now_ms = hub_clock_now_ms(l->clock);
    budget = hub_loop_budget(l);
    if (budget) {
        uint64_t need = (uint64_t)ch->n_members * f->len;
        uint64_t low = hub_budget_low(budget);

        if (hub_loop_queued(l) + need > budget) {
            tight = true;
            hub_loop_evict(l, need < low ? low - need : 0, false);
            share = budget / (l->shard.count ? l->shard.count : 1);
        } else if (hub_loop_queued(l) + need > hub_budget_high(budget)) {
            hub_loop_evict(l, low, false);
        }
    }
    hub_list_for_each(pos, &ch->members) {
        struct hub_sub *sub = hub_container_of(pos, struct hub_sub,
                                               chan_link);
        struct hub_session *s = sub->s;

        if (excl && excl->set && s->sid_hi == excl->hi &&
            s->sid_lo == excl->lo)
            continue;
        if (excl && excl->member_seq && sub->joined_seq >= excl->member_seq)
            continue;
        if (tight) {
            if (s->state != HUB_SESSION_OPEN)
                continue;
            if (s->q.bytes > share ||
                !budget_fits(l, budget, f->len, &forced)) {
                HUB_STAT_ADD(l->stats.queue_budget_drops, 1);
                hub_session_close_behind(s, "Over the hub's send queue "
                                            "budget",
                                         HUB_CLOSE_QUEUE_BUDGET);
                continue;
            }
        }
        if (hub_session_push(s, f) == 0) {
            n++;
            if (tight) {
                /* Counted at once: the next recipient's check sees it. */
                hub_loop_queued_add(l, f->len);
                accounted += f->len;
            }
        }
    }
    if (n) {
        hub_frame_ref_n(f, n);
        hub_loop_queued_add(l, (uint64_t)n * f->len - accounted);
    }
    HUB_STAT_ADD(l->stats.publishes, 1);
    return n;
}

/* Close this loop's sessions on the user's #server-to-user- channel. */
static void terminate_local(struct hub_loop *l, unsigned app, const char *name,
                            size_t len)
{
    struct hub_lchan *ch = hub_chanmap_find(l->chans, app, name, len);
    struct hub_list *pos;

    if (!ch)
        return;
    /* Closing only marks the session; it leaves its channels at fini. */
    hub_list_for_each(pos, &ch->members) {
        struct hub_sub *sub = hub_container_of(pos, struct hub_sub,
                                               chan_link);

        hub_session_send_error(sub->s, 4009,
                               "You got disconnected by the app.", true);
    }
}

static void pub_run(struct hub_inbox_node *n, struct hub_loop *l,
                    uint64_t now_ms)
{
    struct hub_pub *p = hub_container_of(n, struct pub_node, node)->pub;

    (void)now_ms;
    hub_deliver_local(l, p->app, p->name, p->name_len, p->frame, &p->excl);
    pub_unref(p);
}

static void pub_drop(struct hub_inbox_node *n)
{
    pub_unref(hub_container_of(n, struct pub_node, node)->pub);
}

static const struct hub_inbox_ops pub_ops = {
    .run = pub_run,
    .drop = pub_drop,
};

/* Post f to every loop but from, then deliver on from. */
static int fanout_loops(struct hub *h, struct hub_loop *from, unsigned app,
                        const char *name, size_t len, struct hub_frame *f,
                        const struct hub_excl *excl)
{
    unsigned others = h->n_loops - (from ? 1 : 0);
    struct hub_pub *p;
    unsigned k = 0;

    assert(f);
    if (atomic_load_explicit(&h->stopping, memory_order_relaxed))
        return 0;
    if (others) {
        p = malloc(sizeof(*p) + others * sizeof(p->nodes[0]) + len + 1);
        if (!p)
            return -ENOMEM;
        atomic_init(&p->refs, others);
        p->frame = hub_frame_ref(f);
        p->app = app;
        p->excl = excl ? *excl : (struct hub_excl){ 0 };
        p->name_len = len;
        p->name = (char *)&p->nodes[others];
        memcpy(p->name, name, len);
        p->name[len] = '\0';
        for (unsigned i = 0; i < h->n_loops; i++) {
            if (h->loops[i] == from)
                continue;
            p->nodes[k].node.ops = &pub_ops;
            p->nodes[k].pub = p;
            hub_loop_post(h->loops[i], &p->nodes[k].node);
            k++;
        }
    }
    if (from)
        hub_deliver_local(from, app, name, len, f, excl);
    return 0;
}

int hub_publish(struct hub *h, struct hub_loop *from, unsigned app,
                const char *name, size_t len, struct hub_frame *f,
                const struct hub_excl *excl)
{
    return fanout_loops(h, from, app, name, len, f, excl);
}

/*
 * A terminate order: the user's channel name and one node per loop, in one
 * block. It carries no frame: each loop closes its own sessions.
 */
struct hub_term;

struct term_node {
    struct hub_inbox_node node;
    struct hub_term *term;
};

struct hub_term {
    atomic_uint refs;
    unsigned app;
    size_t name_len;
    char *name;
    struct term_node nodes[];
};

static void term_unref(struct hub_term *t)
{
    if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1)
        free(t);
}

static void term_run(struct hub_inbox_node *n, struct hub_loop *l,
                     uint64_t now_ms)
{
    struct hub_term *t = hub_container_of(n, struct term_node, node)->term;

    (void)now_ms;
    terminate_local(l, t->app, t->name, t->name_len);
    term_unref(t);
}

static void term_drop(struct hub_inbox_node *n)
{
    term_unref(hub_container_of(n, struct term_node, node)->term);
}

static const struct hub_inbox_ops term_ops = {
    .run = term_run,
    .drop = term_drop,
};

#define USER_CHANNEL_PREFIX "#server-to-user-"

int hub_terminate_user(struct hub *h, struct hub_loop *from, unsigned app,
                       const char *user_id)
{
    unsigned others = h->n_loops - (from ? 1 : 0);
    size_t len = sizeof(USER_CHANNEL_PREFIX) - 1 + strlen(user_id);
    struct hub_term *t;
    unsigned k = 0;

    if (atomic_load_explicit(&h->stopping, memory_order_relaxed))
        return 0;
    t = malloc(sizeof(*t) + others * sizeof(t->nodes[0]) + len + 1);
    if (!t)
        return -ENOMEM;
    /* One reference per node, and the caller's while it acts on from. */
    atomic_init(&t->refs, others + 1);
    t->app = app;
    t->name_len = len;
    t->name = (char *)&t->nodes[others];
    snprintf(t->name, len + 1, "%s%s", USER_CHANNEL_PREFIX, user_id);
    for (unsigned i = 0; i < h->n_loops; i++) {
        if (h->loops[i] == from)
            continue;
        t->nodes[k].node.ops = &term_ops;
        t->nodes[k].term = t;
        hub_loop_post(h->loops[i], &t->nodes[k].node);
        k++;
    }
    if (from)
        terminate_local(from, app, t->name, len);
    term_unref(t);
    return 0;
}
