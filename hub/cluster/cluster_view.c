/*
 * hub/cluster/cluster_view.c - the views of presence channels with local
 * subscribers (docs/SCALING.md, "Views"): the members those subscribers
 * were told, sorted by uid, and the cluster seq they reflect. A view takes
 * the member lists of JOIN replies and REJOIN reads (delivering the
 * difference), the member events of its member-event channel (delivering
 * each, in the node-local seq space), and while Redis is down follows what
 * the hub tells local subscribers itself.
 *
 * Before its first list (based false), or after a reconnect (stale: Redis
 * may have restarted, its sequence with it), member events wait in pend,
 * at most VIEW_MAX_PENDING of them (beyond that they are counted in
 * member_gaps and the next list mends).
 *
 * Thread: the backplane thread, and loops for the Redis-down paths; every
 * view under c->vmu.
 */
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "hub/base/json.h"
#include "hub/cluster/cluster_int.h"
#include "hub/loop/loop.h"
#include "hub/loop/publish.h"
#include "hub/wire/frame.h"
#include "hub/wire/protocol.h"

/* A presence channel's view (docs/SCALING.md, Views): the members local
 * subscribers were told, sorted by uid, and the cluster seq they reflect.
 * Before its first list (based false) member events wait in pend. */
struct vmem {
    char *uid, *info;              /* info "" = none */
};

struct vpend {
    struct vpend *next;
    uint64_t cseq;
    bool add;
    char *uid, *info;
};

#define VIEW_MAX_PENDING 1024

struct view {
    struct hub_chan_node node;
    uint64_t applied;
    bool based;
    /* After a reconnect: Redis may have restarted (its sequence with it),
     * so the next list is taken whatever its cseq, and events wait for
     * it as before the first list. */
    bool stale;
    struct vmem *m;
    size_t n, cap;
    struct vpend *pend, **pend_tail;
    size_t n_pend;
    char name[];
};

static struct view *view_find(struct hub_cluster *c, unsigned app,
                              const char *name, size_t len)
{
    struct hub_chan_node *n = hub_chantab_find(&c->views, app, name, len,
                                               hub_chan_hash(app, name, len));

    return n ? hub_container_of(n, struct view, node) : NULL;
}

static void vpend_free(struct vpend *p)
{
    free(p->uid);
    free(p->info);
    free(p);
}

static void view_free(struct view *v)
{
    struct vpend *p, *pn;

    for (size_t i = 0; i < v->n; i++) {
        free(v->m[i].uid);
        free(v->m[i].info);
    }
    free(v->m);
    for (p = v->pend; p; p = pn) {
        pn = p->next;
        vpend_free(p);
    }
    free(v);
}

/* Under vmu. */
static struct view *view_get(struct hub_cluster *c, unsigned app,
                             const char *name, size_t len)
{
    struct view *v = view_find(c, app, name, len);

    if (v)
        return v;
    v = calloc(1, sizeof(*v) + len + 1);
    if (!v)
        return NULL;
    memcpy(v->name, name, len);
    v->node.app = app;
    v->node.name = v->name;
    v->node.name_len = (uint32_t)len;
    v->node.hash = hub_chan_hash(app, name, len);
    v->pend_tail = &v->pend;
    hub_chantab_insert(&c->views, &v->node);
    return v;
}

/* The index of uid in v (sorted), or where it would go (*found false). */
static size_t view_pos(const struct view *v, const char *uid, size_t ulen,
                       bool *found)
{
    size_t lo = 0, hi = v->n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        size_t ml = strlen(v->m[mid].uid);
        int cmp = memcmp(v->m[mid].uid, uid, ml < ulen ? ml : ulen);

        if (!cmp)
            cmp = ml < ulen ? -1 : ml > ulen ? 1 : 0;
        if (!cmp) {
            *found = true;
            return mid;
        }
        if (cmp < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

/* Insert (uid, info) at pos; false out of memory. */
static bool view_insert(struct view *v, size_t pos, const char *uid,
                        size_t ulen, const char *info, size_t ilen)
{
    struct vmem m = { strndup(uid, ulen), strndup(info ? info : "", ilen) };

    if (m.uid && m.info && v->n == v->cap) {
        size_t cap = v->cap ? v->cap * 2 : 8;
        struct vmem *nm = realloc(v->m, cap * sizeof(*nm));

        if (nm) {
            v->m = nm;
            v->cap = cap;
        }
    }
    if (!m.uid || !m.info || v->n == v->cap) {
        free(m.uid);
        free(m.info);
        return false;
    }
    memmove(v->m + pos + 1, v->m + pos, (v->n - pos) * sizeof(*v->m));
    v->m[pos] = m;
    v->n++;
    return true;
}

static void view_remove_at(struct view *v, size_t pos)
{
    free(v->m[pos].uid);
    free(v->m[pos].info);
    memmove(v->m + pos, v->m + pos + 1, (v->n - pos - 1) * sizeof(*v->m));
    v->n--;
}

/* {"presence":{"ids":[..],"hash":{..},"count":n}} of the view. */
static char *view_members_json(const struct view *v)
{
    json_t *ids = json_array(), *hash = json_object(), *root;
    char *out;
    bool ok = ids && hash;

    for (size_t i = 0; ok && i < v->n; i++) {
        json_t *info = v->m[i].info[0]
                           ? json_loads(v->m[i].info, JSON_DECODE_ANY, NULL)
                           : NULL;

        if (!info)
            info = json_object(); /* none, or not JSON: as no user_info */
        ok = json_array_append_new(ids, json_string(v->m[i].uid)) == 0;
        ok = json_object_set_new(hash, v->m[i].uid, info) == 0 && ok;
    }
    if (!ok) {
        json_decref(ids);
        json_decref(hash);
        return NULL;
    }
    root = json_pack("{s:{s:o,s:o,s:I}}", "presence", "ids", ids, "hash",
                     hash, "count", (json_int_t)v->n);
    if (!root)
        return NULL;
    out = hub_json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return out;
}

/* member_added / member_removed for the view's local subscribers, with a
 * fresh node-local seq (after every list already sent). Under vmu. */
static void view_deliver(struct hub_cluster *c, const struct view *v,
                         bool add, const char *uid, const char *info)
{
    json_t *o = json_pack("{s:s}", "user_id", uid);
    json_t *ij = add && info && info[0]
                     ? json_loads(info, JSON_DECODE_ANY, NULL)
                     : NULL;
    struct hub_frame *f = NULL;
    char *text, *data = NULL;
    size_t tlen, dlen;

    if (!c->hub) {
        json_decref(o);
        json_decref(ij);
        return;
    }
    if (o && ij && json_object_set_new(o, "user_info", ij)) {
        json_decref(o);
        o = NULL;
    } else if (!o) {
        json_decref(ij);
    }
    text = o ? hub_json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (text) {
        tlen = strlen(text);
        dlen = hub_proto_encode_string(NULL, 0, text, tlen);
        data = malloc(dlen + 1);
        if (data) {
            hub_proto_encode_string(data, dlen + 1, text, tlen);
            f = hub_proto_event_frame(add ? "pusher_internal:member_added"
                                          : "pusher_internal:member_removed",
                                      v->name, data, dlen, NULL);
        }
    }
    free(text);
    free(data);
    if (!f)
        return; /* out of memory: this event is lost for local subscribers */
    pthread_mutex_lock(&c->deliver_mu);
    if (!c->closed) {
        struct hub_skip ex = { .set = false,
                               .member_seq =
                                   hub_directory_take_seq(c->dir) };
        const struct hub_pub_req r = { v->node.app, v->name,
                                       v->node.name_len, f, &ex, false, NULL };

        hub_fanout_loops(c->hub, NULL, &r);
    }
    pthread_mutex_unlock(&c->deliver_mu);
    hub_frame_unref(f);
}

/* One member event at cseq on a based view. Under vmu. */
static void view_event(struct hub_cluster *c, struct view *v, uint64_t cseq,
                       bool add, const char *uid, size_t ulen,
                       const char *info, size_t ilen)
{
    bool found;
    size_t pos;

    if (cseq <= v->applied)
        return;
    if (cseq > v->applied + 1 && v->applied)
        HUB_STAT_ADD_SHARED(c->stats.member_gaps, cseq - v->applied - 1);
    v->applied = cseq;
    pos = view_pos(v, uid, ulen, &found);
    if (add && !found) {
        if (view_insert(v, pos, uid, ulen, info, ilen))
            view_deliver(c, v, true, v->m[pos].uid, v->m[pos].info);
    } else if (!add && found) {
        char *u = v->m[pos].uid;

        v->m[pos].uid = NULL;
        view_remove_at(v, pos);
        view_deliver(c, v, false, u, NULL);
        free(u);
    }
}

static int cmp_member(const void *a, const void *b)
{
    const struct hub_cluster_member *x = a, *y = b;
    size_t n = x->uid_len < y->uid_len ? x->uid_len : y->uid_len;
    int cmp = memcmp(x->uid, y->uid, n);

    return cmp ? cmp : x->uid_len < y->uid_len ? -1 : x->uid_len > y->uid_len;
}

/* The view becomes the list m[0..n) at cseq when that is newer (or the
 * view has no list yet): the difference is delivered locally, then the
 * events that waited for the list. Under vmu. */
static void view_set(struct hub_cluster *c, struct view *v, uint64_t cseq,
                     const struct hub_cluster_member *m, size_t n)
{
    struct hub_cluster_member *s;
    size_t i = 0, k = 0;
    struct vmem *old;
    size_t n_old;
    struct vpend *p, *pn;

    if (v->based && !v->stale && cseq <= v->applied)
        return;
    s = n ? malloc(n * sizeof(*s)) : NULL;
    if (n && !s)
        return;
    if (n)
        memcpy(s, m, n * sizeof(*s));
    qsort(s, n, sizeof(*s), cmp_member);
    old = v->m;
    n_old = v->n;
    v->m = NULL;
    v->n = v->cap = 0;
    /* Merge: removed (old only), added (new only), kept (both). */
    while (i < n_old || k < n) {
        int cmp;

        if (k < n && k + 1 < n && cmp_member(&s[k], &s[k + 1]) == 0) {
            k++; /* a duplicate in a hostile reply */
            continue;
        }
        if (i >= n_old) {
            cmp = 1;
        } else if (k >= n) {
            cmp = -1;
        } else {
            struct hub_cluster_member om = { old[i].uid, NULL,
                                             strlen(old[i].uid), 0 };

            cmp = cmp_member(&om, &s[k]);
        }
        if (cmp < 0) {
            if (v->based)
                view_deliver(c, v, false, old[i].uid, NULL);
            free(old[i].uid);
            free(old[i].info);
            i++;
        } else {
            bool ok = view_insert(v, v->n, s[k].uid, s[k].uid_len,
                                  s[k].info, s[k].info_len);

            if (cmp > 0 && ok && v->based)
                view_deliver(c, v, true, v->m[v->n - 1].uid,
                             v->m[v->n - 1].info);
            if (cmp == 0) {
                free(old[i].uid);
                free(old[i].info);
                i++;
            }
            k++;
        }
    }
    free(old);
    free(s);
    v->based = true;
    v->stale = false;
    v->applied = cseq;
    for (p = v->pend; p; p = pn) {
        pn = p->next;
        view_event(c, v, p->cseq, p->add, p->uid, strlen(p->uid), p->info,
                   strlen(p->info));
        vpend_free(p);
    }
    v->pend = NULL;
    v->pend_tail = &v->pend;
    v->n_pend = 0;
}

/* An unbased view with no list from Redis yet takes the local directory's
 * (Redis down: what local subscribers are told). Under vmu. */
static void seed_one(void *ctx, const char *uid, const char *info,
                     uint32_t conns)
{
    struct view *v = ctx;
    bool found;
    size_t pos = view_pos(v, uid, strlen(uid), &found);

    (void)conns;
    if (!found)
        view_insert(v, pos, uid, strlen(uid), info, info ? strlen(info) : 0);
}

static void view_seed_local(struct hub_cluster *c, struct view *v)
{
    if (v->based)
        return;
    hub_directory_members(c->dir, v->node.app, v->name, v->node.name_len,
                          seed_one, v);
    v->based = true;
}

void hub__cluster_views_free(struct hub_cluster *c)
{
    struct hub_chan_node *n, *nn;

    for (n = hub_chantab_next(&c->views, NULL); n; n = nn) {
        nn = hub_chantab_next(&c->views, n);
        hub_chantab_remove(&c->views, n);
        view_free(hub_container_of(n, struct view, node));
    }
    hub_chantab_fini(&c->views);
}

void hub_cluster_view_refresh(struct hub_cluster *c, unsigned app,
                              const char *name, size_t len, uint64_t cseq,
                              const struct hub_cluster_member *m, size_t n)
{
    struct view *v;

    pthread_mutex_lock(&c->vmu);
    v = view_get(c, app, name, len);
    if (v)
        view_set(c, v, cseq, m, n);
    pthread_mutex_unlock(&c->vmu);
}

void hub_cluster_view_drop(struct hub_cluster *c, unsigned app,
                           const char *name, size_t len)
{
    struct view *v;
    bool rejoined;

    /* The UNSUB of a channel's previous life, run after a local
     * subscriber joined it again: the view is the new life's (made by a
     * REJOIN or by that join), so it stays; the next last leave queues
     * another UNSUB, which drops it. */
    pthread_mutex_lock(&c->mu);
    rejoined = hub_chantab_find(&c->chans, app, name, len,
                                hub_chan_hash(app, name, len)) != NULL;
    pthread_mutex_unlock(&c->mu);
    if (rejoined)
        return;
    pthread_mutex_lock(&c->vmu);
    v = view_find(c, app, name, len);
    if (v) {
        hub_chantab_remove(&c->views, &v->node);
        view_free(v);
    }
    pthread_mutex_unlock(&c->vmu);
}

/* A presence channel with local subscribers (the crec keeps its member
 * channel's UNSUB), copied out of the table. */
struct seed_chan {
    struct seed_chan *next;
    unsigned app;
    size_t len;
    char name[];
};

void hub_cluster_views_seed(struct hub_cluster *c)
{
    struct seed_chan *list = NULL, *sc;

    pthread_mutex_lock(&c->mu);
    for (struct hub_chan_node *n = hub_chantab_next(&c->chans, NULL); n;
         n = hub_chantab_next(&c->chans, n)) {
        if (!hub_container_of(n, struct crec, node)->munsub)
            continue;
        sc = malloc(sizeof(*sc) + n->name_len + 1);
        if (!sc)
            continue; /* its view comes with the channel's next join */
        sc->app = n->app;
        sc->len = n->name_len;
        memcpy(sc->name, n->name, n->name_len);
        sc->name[n->name_len] = '\0';
        sc->next = list;
        list = sc;
    }
    pthread_mutex_unlock(&c->mu);
    for (; list; list = sc) {
        struct view *v;

        sc = list->next;
        pthread_mutex_lock(&c->vmu);
        v = view_find(c, list->app, list->name, list->len);
        if (!v && (v = view_get(c, list->app, list->name, list->len)))
            view_seed_local(c, v);
        pthread_mutex_unlock(&c->vmu);
        free(list);
    }
}

void hub_cluster_views_stale(struct hub_cluster *c)
{
    pthread_mutex_lock(&c->vmu);
    for (struct hub_chan_node *n = hub_chantab_next(&c->views, NULL); n;
         n = hub_chantab_next(&c->views, n))
        hub_container_of(n, struct view, node)->stale = true;
    pthread_mutex_unlock(&c->vmu);
}

void hub_cluster_views(struct hub_cluster *c,
                       void (*fn)(void *ctx, unsigned app, const char *name,
                       size_t len),
                       void *ctx)
{
    pthread_mutex_lock(&c->vmu);
    for (struct hub_chan_node *n = hub_chantab_next(&c->views, NULL); n;
         n = hub_chantab_next(&c->views, n))
        fn(ctx, n->app, n->name, n->name_len);
    pthread_mutex_unlock(&c->vmu);
}

char *hub_cluster_view_json(struct hub_cluster *c, unsigned app,
                            const char *name, size_t len, uint64_t *applied)
{
    struct view *v;
    char *out = NULL;

    pthread_mutex_lock(&c->vmu);
    v = view_find(c, app, name, len);
    if (v) {
        out = view_members_json(v);
        if (applied)
            *applied = v->applied;
    }
    pthread_mutex_unlock(&c->vmu);
    return out;
}

void hub__cluster_view_join_down(struct hub_cluster *c, unsigned app,
                                 const char *name, size_t len,
                                 struct hub_presence_join *j)
{
    struct view *v;

    pthread_mutex_lock(&c->vmu);
    v = view_find(c, app, name, len);
    if (v) {
        bool found;
        size_t pos;

        view_seed_local(c, v);
        pos = view_pos(v, j->user_id, strlen(j->user_id), &found);
        if (found) {
            j->first = false; /* already announced to local subscribers */
        } else {
            view_insert(v, pos, j->user_id, strlen(j->user_id),
                        j->user_info,
                        j->user_info ? strlen(j->user_info) : 0);
        }
        /* The list the other local subscribers have, not only this
         * node's members. */
        char *list = view_members_json(v);

        if (list) {
            free(j->members_json);
            j->members_json = list;
        }
    }
    pthread_mutex_unlock(&c->vmu);
}

int hub__cluster_view_member_event(struct hub_cluster *c, unsigned app,
                                   const char *ch, size_t ch_len,
                                   uint64_t cseq, bool add, const char *uid,
                                   size_t ulen, const char *info,
                                   size_t ilen)
{
    struct view *v;

    pthread_mutex_lock(&c->vmu);
    v = view_get(c, app, ch, ch_len);
    if (!v) {
        pthread_mutex_unlock(&c->vmu);
        return 1;
    }
    if (!v->based || v->stale) {
        struct vpend *q;

        if (v->n_pend >= VIEW_MAX_PENDING ||
            !(q = calloc(1, sizeof(*q)))) {
            HUB_STAT_ADD_SHARED(c->stats.member_gaps, 1);
            pthread_mutex_unlock(&c->vmu);
            return 1;
        }
        q->cseq = cseq;
        q->add = add;
        q->uid = strndup(uid, ulen);
        q->info = strndup(info, ilen);
        if (!q->uid || !q->info) {
            vpend_free(q);
            pthread_mutex_unlock(&c->vmu);
            return 1;
        }
        *v->pend_tail = q;
        v->pend_tail = &q->next;
        v->n_pend++;
    } else {
        view_event(c, v, cseq, add, uid, ulen, info, ilen);
    }
    pthread_mutex_unlock(&c->vmu);
    return 0;
}

bool hub__cluster_view_joined(struct hub_cluster *c,
                              struct hub_cluster_dirop *dop, bool member_first,
                              uint64_t cseq,
                              const struct hub_cluster_member *m, size_t n)
{
    struct hub_presence_join *j = dop->req ? dop->req->j : NULL;
    struct view *v;

    pthread_mutex_lock(&c->vmu);
    v = view_get(c, dop->app, dop->name, dop->len);
    if (v)
        view_set(c, v, cseq, m, n);
    if (j) {
        j->members_json = v ? view_members_json(v) : NULL;
        j->seq = hub_directory_take_seq(c->dir);
        j->first = member_first;
        j->dir_events = true;
    }
    pthread_mutex_unlock(&c->vmu);
    return !j || j->members_json;
}

void hub__cluster_view_leave(struct hub_cluster *c, unsigned app,
                             const char *name, size_t len, const char *uid,
                             bool tell)
{
    struct view *v;

    pthread_mutex_lock(&c->vmu);
    v = view_find(c, app, name, len);
    if (v) {
        bool found;
        size_t pos = view_pos(v, uid, strlen(uid), &found);

        if (found) {
            view_remove_at(v, pos);
            if (tell)
                view_deliver(c, v, false, uid, NULL);
        }
    }
    pthread_mutex_unlock(&c->vmu);
}

/* The members of the local directory alone (no view), as JSON. */
static char *local_members_json(struct hub_cluster *c, unsigned app,
                                const char *name, size_t len)
{
    struct view tmp = { 0 };
    char *out;

    hub_directory_members(c->dir, app, name, len, seed_one, &tmp);
    out = view_members_json(&tmp);
    for (size_t i = 0; i < tmp.n; i++) {
        free(tmp.m[i].uid);
        free(tmp.m[i].info);
    }
    free(tmp.m);
    return out;
}

/* The view's list when there is one, so that every local subscriber sees
 * the same members; the hub publishes member_added itself when this user
 * is new to the view. */
bool hub__cluster_view_join_local(struct hub_cluster *c,
                                  struct hub_cluster_dirop *dop)
{
    struct hub_presence_join *j = dop->req->j;
    struct view *v;
    bool found = false;

    pthread_mutex_lock(&c->vmu);
    v = view_get(c, dop->app, dop->name, dop->len);
    if (v) {
        size_t pos;

        view_seed_local(c, v);
        pos = view_pos(v, dop->uid, strlen(dop->uid), &found);
        if (!found)
            view_insert(v, pos, dop->uid, strlen(dop->uid), dop->info,
                        strlen(dop->info));
        j->members_json = view_members_json(v);
    } else {
        j->members_json = local_members_json(c, dop->app, dop->name,
                                             dop->len);
    }
    j->seq = hub_directory_take_seq(c->dir);
    j->first = !found;
    j->dir_events = false;
    pthread_mutex_unlock(&c->vmu);
    return j->members_json != NULL;
}
