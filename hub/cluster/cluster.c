/*
 * hub/cluster/cluster.c - the scale-out backplane's node-local half (hub/cluster/cluster.h):
 * the wrapped directory with its per-channel refcount, the bus that serves
 * local subscribers at once and queues the rest for the backplane thread,
 * and the receiving side's checks.
 */
#include "hub/cluster/cluster.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "hub/cluster/cluster_cache.h"
#include "hub/cluster/ckey.h"
#include "hub/webhook/wh_stream.h"
#include "hub/base/chantab.h"
#include "hub/loop/directory.h"
#include "hub/cluster/envelope.h"
#include "hub/wire/frame.h"
#include "hub/base/json.h"
#include "hub/base/log.h"
#include "hub/loop/loop.h"
#include "hub/channel/online.h"
#include "hub/wire/protocol.h"
#include "hub/channel/subcount.h"
#include "timer/clock.h"

#define USER_PREFIX "#server-to-user-"

/* A channel with local subscribers: how many, and its UNSUB, made when
 * the record was, so that the last leave can always queue it. */
struct crec {
    struct hub_chan_node node;
    uint32_t refs;
    struct hub_cluster_op *unsub;
    struct hub_cluster_op *munsub; /* presence: the member channel's */
    char name[];
};

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

struct hub_cluster_origin {
    struct hub_cluster_origin *next;
    uint64_t epoch, last;
    size_t len;
    char id[];
};

/* Which apps' edges the scripts queue in Redis (hub_cluster_set_wh). */
struct wh_set {
    struct wh_set *older;
    uint64_t delay_ms;
    unsigned max_entries;
    unsigned n;
    bool in[];
};

struct hub_cluster {
    char *node_id;
    size_t node_len;
    char *prefix;
    /* The cluster key (hub/cluster/ckey.h; NULL: none, nothing is MACed) and the
     * rate limit of its log line (backplane thread). */
    struct hub_ckey *key;
    uint64_t key_log_ms, key_log_forged, key_log_replays;
    /* App ids by index: append-only (a reload adds apps, hub/app/apptab.h;
     * an index keeps its id forever), so a string found here stays valid
     * until destroy. Loops and the backplane thread read it, the main
     * thread adds to it (hub_cluster_app_added). */
    pthread_mutex_t ids_mu;
    char **ids;                    /* owned; NULL = no app at that index */
    unsigned n_ids;
    /* Ids replaced at their index (a reload refused after it told the
     * cluster): kept until destroy, since a reader may hold one. */
    char **retired;
    unsigned n_retired;
    char *cache_chan, *cache_pattern; /* "<prefix>:cache", ...":cache:*" */
    size_t cache_chan_len;
    /* The apps at start (borrowed, never freed): the cluster-wide cache
     * reads their cache settings; an app a reload added publishes its
     * cache channels as plain events across nodes. */
    const struct hub_app *apps;
    unsigned n_apps;
    size_t max_queue;
    void (*wake)(void *ctx);
    void *wake_ctx;
    struct hub *hub;
    struct hub_directory *dir;

    pthread_mutex_t mu;            /* the table and the queue */
    struct hub_chantab chans;
    struct hub_cluster_op *head, **tail;
    size_t queued;                 /* events in the queue */

    /* Delivery from the backplane thread against the loops' teardown:
     * hub_cluster_close() sets closed under it, after which nothing is
     * delivered. */
    pthread_mutex_t deliver_mu;
    bool closed;
    /* Answers nobody can get any more (under deliver_mu, chained through
     * inbox.next): their done runs with -ECANCELED at destroy. */
    struct hub_cluster_dirop *dropped;

    /* The cluster-wide directory. */
    atomic_bool dir_up;
    uint64_t gen;                  /* under mu: REJOIN generation */
    uint64_t ogen;                 /* under mu: online snapshot generation */
    pthread_mutex_t vmu;           /* views */
    struct hub_chantab views;
    pthread_mutex_t edge_mu;       /* the edge hook */
    hub_dir_edge_fn *edge;
    void *edge_ctx;
    /* Durable webhooks: whose edges the scripts queue in Redis (by app
     * index). Published whole by the main thread (start, each reload),
     * read by the backplane threads; older sets are kept until destroy
     * (a reader may still hold one; reloads are rare). */
    _Atomic(struct wh_set *) wh;

    struct hub_backplane_stats stats;
};

static void stat_add(uint64_t *v, uint64_t n)
{
    __atomic_fetch_add(v, n, __ATOMIC_RELAXED);
}

struct hub_cluster *hub_cluster_create(const struct hub_cluster_cfg *cfg)
{
    struct hub_cluster *c = calloc(1, sizeof(*c));

    if (!c)
        return NULL;
    c->node_id = strdup(cfg->node_id ? cfg->node_id : "");
    c->prefix = strdup(cfg->prefix ? cfg->prefix : "lubdub");
    c->dir = hub_directory_create();
    if (c->prefix) {
        size_t plen = strlen(c->prefix);

        c->cache_chan = malloc(plen + sizeof(":cache:*"));
        c->cache_pattern = malloc(plen + sizeof(":cache:*"));
        if (c->cache_chan && c->cache_pattern) {
            memcpy(c->cache_chan, c->prefix, plen);
            memcpy(c->cache_chan + plen, ":cache", sizeof(":cache"));
            memcpy(c->cache_pattern, c->prefix, plen);
            memcpy(c->cache_pattern + plen, ":cache:*", sizeof(":cache:*"));
            c->cache_chan_len = plen + sizeof(":cache") - 1;
        }
    }
    if (!c->node_id || !c->prefix || !c->dir || !c->cache_chan ||
        !c->cache_pattern || hub_chantab_init(&c->chans, 64) ||
        hub_chantab_init(&c->views, 64)) {
        hub_chantab_fini(&c->chans);
        free(c->node_id);
        free(c->prefix);
        free(c->cache_chan);
        free(c->cache_pattern);
        hub_directory_destroy(c->dir);
        free(c);
        return NULL;
    }
    c->node_len = strlen(c->node_id);
    c->apps = cfg->apps;
    c->n_apps = cfg->n_apps;
    pthread_mutex_init(&c->ids_mu, NULL);
    c->max_queue = cfg->max_queue ? cfg->max_queue : 65536;
    c->wake = cfg->wake;
    c->wake_ctx = cfg->wake_ctx;
    c->tail = &c->head;
    pthread_mutex_init(&c->mu, NULL);
    pthread_mutex_init(&c->deliver_mu, NULL);
    pthread_mutex_init(&c->vmu, NULL);
    pthread_mutex_init(&c->edge_mu, NULL);
    atomic_init(&c->dir_up, false);
    /* The apps at start: index i is apps[i] (hub_config's rule). */
    for (unsigned i = 0; i < cfg->n_apps; i++) {
        if (hub_cluster_app_added(c, i, cfg->apps[i].id)) {
            hub_cluster_destroy(c);
            return NULL;
        }
    }
    return c;
}

int hub_cluster_app_added(struct hub_cluster *c, unsigned index,
                          const char *id)
{
    int rc = 0;

    pthread_mutex_lock(&c->ids_mu);
    if (index >= c->n_ids) {
        char **ids = realloc(c->ids, (index + 1) * sizeof(*ids));

        if (!ids) {
            rc = -ENOMEM;
            goto out;
        }
        memset(ids + c->n_ids, 0, (index + 1 - c->n_ids) * sizeof(*ids));
        c->ids = ids;
        c->n_ids = index + 1;
    }
    if (c->ids[index] && strcmp(c->ids[index], id) != 0) {
        /* Only after a reload that told the cluster and then failed:
         * the index goes to the next table's app. */
        char **r = realloc(c->retired, (c->n_retired + 1) * sizeof(*r));
        char *copy = strdup(id);

        if (r)
            c->retired = r;
        if (!r || !copy) {
            free(copy);
            rc = -ENOMEM;
            goto out;
        }
        c->retired[c->n_retired++] = c->ids[index];
        c->ids[index] = copy;
    } else if (!c->ids[index] && !(c->ids[index] = strdup(id))) {
        rc = -ENOMEM;
    }
out:
    pthread_mutex_unlock(&c->ids_mu);
    return rc;
}

/* The id of app index (valid until destroy), or NULL. */
static const char *id_of(struct hub_cluster *c, unsigned index)
{
    const char *id;

    pthread_mutex_lock(&c->ids_mu);
    id = index < c->n_ids ? c->ids[index] : NULL;
    pthread_mutex_unlock(&c->ids_mu);
    return id;
}

/* The index of the app id[0..len), or -1. A scan: the backplane thread
 * calls it once per message received. */
static int index_of(struct hub_cluster *c, const char *id, size_t len)
{
    int found = -1;

    pthread_mutex_lock(&c->ids_mu);
    for (unsigned i = 0; i < c->n_ids && found < 0; i++)
        if (c->ids[i] && strlen(c->ids[i]) == len &&
            !memcmp(c->ids[i], id, len))
            found = (int)i;
    pthread_mutex_unlock(&c->ids_mu);
    return found;
}

void hub_cluster_set_hub(struct hub_cluster *c, struct hub *h)
{
    c->hub = h;
}

void hub_cluster_close(struct hub_cluster *c)
{
    pthread_mutex_lock(&c->deliver_mu);
    c->closed = true;
    pthread_mutex_unlock(&c->deliver_mu);
}

void hub_cluster_set_wake(struct hub_cluster *c, void (*fn)(void *ctx),
                          void *ctx)
{
    pthread_mutex_lock(&c->mu);
    c->wake = fn;
    c->wake_ctx = ctx;
    pthread_mutex_unlock(&c->mu);
}

struct hub_backplane_stats *hub_cluster_stats(struct hub_cluster *c)
{
    return &c->stats;
}

const char *hub_cluster_node_id(const struct hub_cluster *c)
{
    return c->node_id;
}

void hub_cluster_dirop_free(struct hub_cluster_dirop *dop)
{
    if (!dop)
        return;
    free(dop->name);
    free(dop->uid);
    free(dop->info);
    free(dop);
}

void hub_cluster_op_free(struct hub_cluster_op *op)
{
    if (!op)
        return;
    if (op->f)
        hub_frame_unref(op->f);
    hub_cluster_dirop_free(op->dop);
    hub_cluster_onop_free(op->oop);
    free(op);
}

static void view_free(struct view *v);

/* At destroy: no thread is left. */
static void views_free(struct hub_cluster *c)
{
    struct hub_chan_node *n, *nn;

    for (n = hub_chantab_next(&c->views, NULL); n; n = nn) {
        nn = hub_chantab_next(&c->views, n);
        hub_chantab_remove(&c->views, n);
        view_free(hub_container_of(n, struct view, node));
    }
    hub_chantab_fini(&c->views);
}

void hub_cluster_destroy(struct hub_cluster *c)
{
    struct hub_cluster_op *op, *next;
    struct hub_chan_node *n, *nn;

    if (!c)
        return;
    hub_ckey_destroy(c->key);
    c->key = NULL;
    for (op = c->head; op; op = next) {
        next = op->next;
        if (op->dop) {
            hub_cluster_dir_cancel(c, op->dop);
            op->dop = NULL;
        }
        hub_cluster_op_free(op);
    }
    /* Every loop is gone: the callers of answers that never came free
     * what they kept (hub/loop/backplane.h, join_async). */
    while (c->dropped) {
        struct hub_cluster_dirop *dop = c->dropped;

        c->dropped = (struct hub_cluster_dirop *)(void *)dop->inbox.next;
        if (dop->req)
            dop->req->done(dop->req, -ECANCELED);
        else if (dop->q)
            dop->q->done(dop->q, -ECANCELED);
        hub_cluster_dirop_free(dop);
    }
    for (n = hub_chantab_next(&c->chans, NULL); n; n = nn) {
        struct crec *r = hub_container_of(n, struct crec, node);

        nn = hub_chantab_next(&c->chans, n);
        hub_chantab_remove(&c->chans, n);
        hub_cluster_op_free(r->unsub);
        hub_cluster_op_free(r->munsub);
        free(r);
    }
    hub_chantab_fini(&c->chans);
    views_free(c);
    pthread_mutex_destroy(&c->vmu);
    pthread_mutex_destroy(&c->edge_mu);
    for (struct wh_set *w = atomic_load(&c->wh), *older; w; w = older) {
        older = w->older;
        free(w);
    }
    hub_directory_destroy(c->dir);
    for (unsigned i = 0; i < c->n_ids; i++)
        free(c->ids[i]);
    free(c->ids);
    for (unsigned i = 0; i < c->n_retired; i++)
        free(c->retired[i]);
    free(c->retired);
    pthread_mutex_destroy(&c->ids_mu);
    pthread_mutex_destroy(&c->mu);
    pthread_mutex_destroy(&c->deliver_mu);
    free(c->node_id);
    free(c->prefix);
    free(c->cache_chan);
    free(c->cache_pattern);
    free(c);
}

/* An op for (app, name) with its broker channel name,
 * "<prefix>:<mid><app id>:<name>"; NULL out of memory or for an app index
 * out of range. */
static struct hub_cluster_op *op_new_mid(struct hub_cluster *c,
                                         enum hub_cluster_op_kind kind,
                                         unsigned app, const char *name,
                                         size_t len, const char *mid)
{
    const char *id;
    size_t mlen = strlen(mid), plen = strlen(c->prefix) + mlen, ilen, total;
    struct hub_cluster_op *op;

    id = id_of(c, app);
    if (!id)
        return NULL;
    ilen = strlen(id);
    total = plen + 1 + ilen + 1 + len;
    op = malloc(sizeof(*op) + total + 1);
    if (!op)
        return NULL;
    memset(op, 0, sizeof(*op));
    op->kind = kind;
    op->app = app;
    op->rchan = (char *)(op + 1);
    memcpy(op->rchan, c->prefix, plen - mlen);
    op->rchan[plen - mlen] = ':';
    memcpy(op->rchan + plen - mlen + 1, mid, mlen);
    memcpy(op->rchan + plen + 1, id, ilen);
    op->rchan[plen + 1 + ilen] = ':';
    memcpy(op->rchan + plen + 2 + ilen, name, len);
    op->rchan[total] = '\0';
    op->rchan_len = total;
    op->name_off = plen + 2 + ilen;
    return op;
}

static struct hub_cluster_op *op_new(struct hub_cluster *c,
                                     enum hub_cluster_op_kind kind,
                                     unsigned app, const char *name,
                                     size_t len)
{
    return op_new_mid(c, kind, app, name, len, "");
}

/* Under c->mu. */
static void push_locked(struct hub_cluster *c, struct hub_cluster_op *op,
                        bool *wake)
{
    *wake = !c->head;
    op->next = NULL;
    *c->tail = op;
    c->tail = &op->next;
    HUB_STAT_SET(c->stats.queue, HUB_STAT_GET(c->stats.queue) + 1);
}

/* Under c->mu (so that hub_cluster_set_wake() can take the function
 * away); the wake is a non-blocking eventfd write. */
static void wake_locked(struct hub_cluster *c, bool edge)
{
    if (edge && c->wake)
        c->wake(c->wake_ctx);
}

struct hub_cluster_op *hub_cluster_take(struct hub_cluster *c)
{
    struct hub_cluster_op *all;

    pthread_mutex_lock(&c->mu);
    all = c->head;
    c->head = NULL;
    c->tail = &c->head;
    c->queued = 0;
    HUB_STAT_SET(c->stats.queue, 0);
    pthread_mutex_unlock(&c->mu);
    return all;
}

/* Directory: the local one (the truth for this node's sessions, and the
 * answer while Redis is down), the node's refcount per channel (SUB and
 * UNSUB), and the cluster-wide state in Redis reached through JOIN, LEAVE
 * and QUERY ops (docs/SCALING.md). */

static bool is_hash_chan(const char *name, size_t len, const void *j)
{
    return len && name[0] == '#' && !j;
}

void hub_cluster_dir_set_up(struct hub_cluster *c, bool up)
{
    atomic_store(&c->dir_up, up);
}

bool hub_cluster_dir_is_up(struct hub_cluster *c)
{
    return atomic_load(&c->dir_up);
}

const char *hub_cluster_app_id(struct hub_cluster *c, unsigned index)
{
    return id_of(c, index);
}

unsigned hub_cluster_app_span(struct hub_cluster *c)
{
    unsigned n;

    pthread_mutex_lock(&c->ids_mu);
    n = c->n_ids;
    pthread_mutex_unlock(&c->ids_mu);
    return n;
}

int hub_cluster_app_index(struct hub_cluster *c, const char *id, size_t len)
{
    return index_of(c, id, len);
}

const char *hub_cluster_prefix(const struct hub_cluster *c)
{
    return c->prefix;
}

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

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);

    if (d) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* Insert (uid, info) at pos; false out of memory. */
static bool view_insert(struct view *v, size_t pos, const char *uid,
                        size_t ulen, const char *info, size_t ilen)
{
    struct vmem m = { dup_n(uid, ulen), dup_n(info ? info : "", ilen) };

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
        struct hub_excl ex = { .set = false,
                               .member_seq =
                                   hub_directory_take_seq(c->dir) };
        const struct hub_pub_req r = { v->node.app, v->name,
                                       v->node.name_len, f, &ex };

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
        stat_add(&c->stats.member_gaps, cseq - v->applied - 1);
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

static uint64_t be64(const unsigned char *p);
static void key_drop(struct hub_cluster *c, int why, const char *origin,
                     size_t origin_len, const char *what);

/* 2n lowercase hex digits at s into out[0..n). */
static bool hex_in(const char *s, size_t n, unsigned char *out)
{
    for (size_t i = 0; i < 2 * n; i++) {
        char h = s[i];
        int v = h >= '0' && h <= '9' ? h - '0'
                : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                       : -1;

        if (v < 0)
            return false;
        if (i % 2)
            out[i / 2] = (unsigned char)(out[i / 2] | v);
        else
            out[i / 2] = (unsigned char)(v << 4);
    }
    return true;
}

int hub_cluster_member_stamp(struct hub_cluster *c, const char *app_id,
                             const char *ch, size_t ch_len, const char *uid,
                             size_t ulen, const char *info, size_t ilen,
                             char **out)
{
    const struct hub_ckey_part parts[5] = {
        { app_id, strlen(app_id) }, { ch, ch_len }, { "+", 1 },
        { uid, ulen }, { info, ilen } };
    unsigned char mac[HUB_CKEY_MAC_LEN];
    uint64_t ctr, ms;
    char *s;
    int n;

    *out = NULL;
    if (!c->key)
        return 0;
    if (hub_ckey_sign(c->key, "mem", parts, 5, &ctr, &ms, mac))
        return -ENOMEM;
    s = malloc(1 + 64 + c->node_len + 2);
    if (!s)
        return -ENOMEM;
    n = sprintf(s, "~%016" PRIx64 "%016" PRIx64, ctr, ms);
    for (size_t i = 0; i < HUB_CKEY_MAC_LEN; i++)
        n += sprintf(s + n, "%02x", mac[i]);
    memcpy(s + n, c->node_id, c->node_len);
    n += (int)c->node_len;
    s[n++] = '\n';
    s[n] = '\0';
    *out = s;
    return n;
}

/* A decimal number at *pp (at least one digit, no overflow) into *v; *pp
 * past it. false when there is none or it overflows. */
static bool digits(const char **pp, const char *end, uint64_t *v)
{
    const char *p = *pp;

    *v = 0;
    for (; p < end && *p >= '0' && *p <= '9'; p++) {
        if (*v > (UINT64_MAX - 9) / 10)
            return false;
        *v = *v * 10 + (uint64_t)(*p - '0');
    }
    if (p == *pp)
        return false;
    *pp = p;
    return true;
}

int hub_cluster_member_msg(struct hub_cluster *c, const char *rchan,
                           size_t rlen, const char *data, size_t len)
{
    size_t plen = strlen(c->prefix);
    const char *p, *end = data + len, *nl, *uid, *info;
    const char *app_s, *ch;
    size_t app_len, ch_len, ulen, ilen, snode_len = 0;
    uint64_t cseq = 0, n = 0;
    const char *snode = NULL;
    unsigned char sbuf[16], smac[HUB_CKEY_MAC_LEN];
    bool add, stamped = false;
    int app;
    struct view *v;

    /* "<prefix>:m:<app>:<channel>": the app id has no ':' (ids are
     * restricted at load), so the channel is everything after the first
     * ':' past it, whatever bytes the channel name holds. */
    if (!rchan || rlen < plen + 3 || memcmp(rchan, c->prefix, plen) ||
        memcmp(rchan + plen, ":m:", 3))
        goto bad;
    app_s = rchan + plen + 3;
    ch = memchr(app_s, ':', rlen - plen - 3);
    if (!ch || ch == app_s)
        goto bad;
    app_len = (size_t)(ch - app_s);
    ch++;
    ch_len = (size_t)(rchan + rlen - ch);
    if (!ch_len || (app = index_of(c, app_s, app_len)) < 0)
        goto bad;
    /* With a cluster key, the joining node's stamp first (hub_cluster_
     * member_stamp): "~<ctr><time><mac><node>\n", hex. */
    if (len && data[0] == '~') {
        if (!c->key || len < 1 + 64 + 2 ||
            !hex_in(data + 1, 8, sbuf) || !hex_in(data + 17, 8, sbuf + 8) ||
            !hex_in(data + 33, HUB_CKEY_MAC_LEN, smac))
            goto bad;
        snode = data + 65;
        nl = memchr(snode, '\n', (size_t)(end - snode));
        if (!nl || nl == snode)
            goto bad;
        snode_len = (size_t)(nl - snode);
        data = nl + 1;
        stamped = true;
    }
    /* "<cseq>\n<+|-><n>\n<uid><info>": the uid is n bytes, counted and
     * never delimited, so that a '\n' (or any byte) in it cannot move
     * where the uid ends (docs/SCALING.md). */
    p = data;
    if (!digits(&p, end, &cseq) || !cseq || end - p < 3 || p[0] != '\n' ||
        (p[1] != '+' && p[1] != '-'))
        goto bad;
    add = p[1] == '+';
    p += 2;
    if (!digits(&p, end, &n) || !n || p == end || *p != '\n' ||
        n > (uint64_t)(end - p - 1))
        goto bad;
    uid = p + 1;
    ulen = (size_t)n;
    nl = uid + ulen;
    if (memchr(uid, '\0', ulen))
        goto bad;
    info = nl;
    ilen = (size_t)(end - info);
    if (!add && ilen)
        goto bad;
    if (ilen) {
        json_t *jv = memchr(info, '\0', ilen)
                         ? NULL
                         : json_loadb(info, ilen, JSON_DECODE_ANY, NULL);

        if (!jv)
            goto bad;
        json_decref(jv);
    }
    if (c->key && (stamped || add)) {
        /* A member_added must carry a stamp that verifies; a removal
         * without one is a reaper's or a rejoin sweep's (docs/SCALING.md
         * lists what the key does not cover). */
        const struct hub_ckey_part parts[5] = {
            { app_s, app_len }, { ch, ch_len }, { add ? "+" : "-", 1 },
            { uid, ulen }, { info, ilen } };
        int why = -EACCES;

        if (stamped) {
            enum hub_ckey_verdict vd = hub_ckey_verify(
                c->key, snode, snode_len, be64(sbuf), be64(sbuf + 8), "mem",
                parts, 5, smac, true);

            why = vd == HUB_CKEY_OK ? 0 : vd == HUB_CKEY_REPLAY ? -ESTALE
                                                                : -EACCES;
        }
        if (why) {
            key_drop(c, why, snode, snode_len,
                     stamped ? "a member event" : "an unsigned member_added");
            return why;
        }
    }
    stat_add(&c->stats.member_events, 1);
    pthread_mutex_lock(&c->vmu);
    v = view_get(c, (unsigned)app, ch, ch_len);
    if (!v) {
        pthread_mutex_unlock(&c->vmu);
        return 1;
    }
    if (!v->based || v->stale) {
        struct vpend *q;

        if (v->n_pend >= VIEW_MAX_PENDING ||
            !(q = calloc(1, sizeof(*q)))) {
            stat_add(&c->stats.member_gaps, 1);
            pthread_mutex_unlock(&c->vmu);
            return 1;
        }
        q->cseq = cseq;
        q->add = add;
        q->uid = dup_n(uid, ulen);
        q->info = dup_n(info, ilen);
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
bad:
    stat_add(&c->stats.bad, 1);
    return -EINVAL;
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

/* Edges: from the script replies while Redis is up, from the wrapped
 * directory while it is down. */
static void edge(struct hub_cluster *c, enum hub_dir_edge_kind kind,
                 unsigned app, const char *name, size_t len, const char *uid)
{
    const struct hub_dir_edge e = { kind, app, name, len, uid };

    pthread_mutex_lock(&c->edge_mu);
    if (c->edge)
        c->edge(c->edge_ctx, &e);
    pthread_mutex_unlock(&c->edge_mu);
}

int hub_cluster_set_wh(struct hub_cluster *c, const bool *in_redis,
                       unsigned n, uint64_t delay_ms, unsigned max_entries)
{
    struct wh_set *w = calloc(1, sizeof(*w) + (n ? n : 1) * sizeof(bool));

    if (!w)
        return -ENOMEM;
    w->n = n;
    w->delay_ms = delay_ms;
    w->max_entries = max_entries ? max_entries : HUB_WHS_MAX_ENTRIES;
    memcpy(w->in, in_redis, n * sizeof(bool));
    /* One writer (the main thread): no lost update. */
    w->older = atomic_load_explicit(&c->wh, memory_order_relaxed);
    atomic_store_explicit(&c->wh, w, memory_order_release);
    return 0;
}

unsigned hub_cluster_wh_max(const struct hub_cluster *c)
{
    const struct wh_set *w =
        c ? atomic_load_explicit(&((struct hub_cluster *)c)->wh,
                                 memory_order_acquire)
          : NULL;

    return w ? w->max_entries : HUB_WHS_MAX_ENTRIES;
}

bool hub_cluster_wh_redis(const struct hub_cluster *c, unsigned app,
                          uint64_t *delay_ms)
{
    const struct wh_set *w =
        c ? atomic_load_explicit(&((struct hub_cluster *)c)->wh,
                                 memory_order_acquire)
          : NULL;

    if (!w || app >= w->n || !w->in[app])
        return false;
    if (delay_ms)
        *delay_ms = w->delay_ms;
    return true;
}

/* An edge a script decided: queued in Redis by the script itself when
 * the app's webhooks go there, else handed to the hook. */
static void script_edge(struct hub_cluster *c, enum hub_dir_edge_kind kind,
                        unsigned app, const char *name, size_t len,
                        const char *uid)
{
    if (!hub_cluster_wh_redis(c, app, NULL))
        edge(c, kind, app, name, len, uid);
}

static void local_edge(void *ctx, const struct hub_dir_edge *e)
{
    struct hub_cluster *c = ctx;

    if (!hub_cluster_dir_is_up(c))
        edge(c, e->kind, e->app, e->name, e->len, e->user_id);
}

static void cdir_set_edge_hook(void *d, hub_dir_edge_fn *fn, void *ctx)
{
    struct hub_cluster *c = d;

    pthread_mutex_lock(&c->edge_mu);
    c->edge = fn;
    c->edge_ctx = ctx;
    pthread_mutex_unlock(&c->edge_mu);
    hub_directory_set_edge_hook(c->dir, fn ? local_edge : NULL, c);
}

/* Answering the caller. */

static void done_run(struct hub_inbox_node *n, struct hub_loop *l,
                     uint64_t now_ms)
{
    struct hub_cluster_dirop *dop =
        hub_container_of(n, struct hub_cluster_dirop, inbox);

    (void)l;
    (void)now_ms;
    if (dop->req)
        dop->req->done(dop->req, dop->rc);
    else if (dop->q)
        dop->q->done(dop->q, dop->rc);
    hub_cluster_dirop_free(dop);
}

/* An answer its loop never ran (the loop went first, or the cluster was
 * closed): kept for destroy, which calls done with -ECANCELED. */
static void dir_drop(struct hub_cluster *c, struct hub_cluster_dirop *dop)
{
    if (!dop->req && !dop->q) {
        hub_cluster_dirop_free(dop);
        return;
    }
    if (dop->q && dop->rc == 0) {
        json_decref(dop->q->json);
        dop->q->json = NULL;
    }
    pthread_mutex_lock(&c->deliver_mu);
    dop->inbox.next = (struct hub_inbox_node *)(void *)c->dropped;
    c->dropped = dop;
    pthread_mutex_unlock(&c->deliver_mu);
}

static void done_drop(struct hub_inbox_node *n)
{
    struct hub_cluster_dirop *dop =
        hub_container_of(n, struct hub_cluster_dirop, inbox);

    dir_drop(dop->c, dop);
}

void hub_cluster_dir_cancel(struct hub_cluster *c,
                            struct hub_cluster_dirop *dop)
{
    if (!dop)
        return;
    if (dop->req || dop->q)
        __atomic_fetch_sub(&c->stats.dir_pending, 1, __ATOMIC_RELAXED);
    dir_drop(c, dop);
}

static const struct hub_inbox_ops done_ops = { done_run, done_drop };

/* Post dop's answer to its caller's loop (or free it when nobody waits or
 * the loops are gone). After the view changes it follows: the same
 * thread posts both, in order. */
static void answer(struct hub_cluster *c, struct hub_cluster_dirop *dop,
                   int rc)
{
    struct hub_loop *l = dop->req ? dop->req->loop
                         : dop->q ? dop->q->loop
                                  : NULL;

    dop->rc = rc;
    if (dop->req || dop->q)
        __atomic_fetch_sub(&c->stats.dir_pending, 1, __ATOMIC_RELAXED);
    if (!l) {
        hub_cluster_dirop_free(dop);
        return;
    }
    pthread_mutex_lock(&c->deliver_mu);
    if (c->closed) {
        pthread_mutex_unlock(&c->deliver_mu);
        dir_drop(c, dop);
        return;
    }
    dop->inbox.ops = &done_ops;
    hub_loop_post(l, &dop->inbox);
    pthread_mutex_unlock(&c->deliver_mu);
}

/* Undo a counted local join (a refused JOIN): the local directory and
 * the refcount, without a LEAVE op (Redis never counted it). */
static void undo_local(struct hub_cluster *c, struct hub_cluster_dirop *dop);

void hub_cluster_dir_joined(struct hub_cluster *c,
                            struct hub_cluster_dirop *dop, int rc,
                            bool chan_first, bool member_first,
                            uint64_t cseq,
                            const struct hub_cluster_member *m, size_t n)
{
    struct hub_presence_join *j = dop->req ? dop->req->j : NULL;
    struct view *v;

    if (rc) {
        undo_local(c, dop);
        answer(c, dop, rc);
        return;
    }
    if (chan_first)
        script_edge(c, HUB_DIR_CHANNEL_FIRST, dop->app, dop->name, dop->len,
                    NULL);
    if (member_first)
        script_edge(c, HUB_DIR_MEMBER_FIRST, dop->app, dop->name, dop->len,
                    dop->uid);
    if (!dop->presence) {
        answer(c, dop, 0);
        return;
    }
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
    if (j && !j->members_json) {
        /* Out of memory for the list: the join is refused, as a local
         * one would be. */
        undo_local(c, dop);
        answer(c, dop, -ENOMEM);
        return;
    }
    answer(c, dop, 0);
}

void hub_cluster_dir_left(struct hub_cluster *c,
                          struct hub_cluster_dirop *dop, bool chan_last,
                          bool member_last)
{
    if (member_last)
        script_edge(c, HUB_DIR_MEMBER_LAST, dop->app, dop->name, dop->len,
                    dop->uid);
    if (chan_last)
        script_edge(c, HUB_DIR_CHANNEL_LAST, dop->app, dop->name, dop->len,
                    NULL);
    hub_cluster_dirop_free(dop);
}

static void members_collect(void *ctx, const char *uid, const char *info,
                            uint32_t conns)
{
    (void)conns;
    seed_one(ctx, uid, info, conns);
}

void hub_cluster_dir_local(struct hub_cluster *c,
                           struct hub_cluster_dirop *dop)
{
    stat_add(&c->stats.dir_local, 1);
    if (dop->kind == HUB_COP_QUERY) {
        struct hub_dir_query *q = dop->q;

        switch (q->kind) {
        case HUB_DIR_Q_INFO:
            hub_directory_info(c->dir, q->app, q->name, q->len, &q->info);
            break;
        case HUB_DIR_Q_LIST:
            q->json = hub_directory_list(c->dir, q->app, q->prefix,
                                         q->user_count);
            break;
        default:
            q->json = hub_directory_users(c->dir, q->app, q->name, q->len);
            break;
        }
        answer(c, dop, 0);
        return;
    }
    if (dop->kind == HUB_COP_LEAVE) {
        /* The hub was told "not last" (the directory delivers): with
         * Redis gone, the view delivers the local edge itself. */
        if (dop->presence && dop->local_last) {
            struct view *v;

            pthread_mutex_lock(&c->vmu);
            v = view_find(c, dop->app, dop->name, dop->len);
            if (v) {
                bool found;
                size_t pos = view_pos(v, dop->uid, strlen(dop->uid), &found);

                if (found) {
                    view_remove_at(v, pos);
                    view_deliver(c, v, false, dop->uid, NULL);
                }
            }
            pthread_mutex_unlock(&c->vmu);
        }
        hub_cluster_dirop_free(dop);
        return;
    }
    /* JOIN: the local answer (the view's list when there is one, so that
     * every local subscriber sees the same members); the hub publishes
     * member_added itself when this user is new to the view. */
    if (dop->req && dop->presence) {
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
            struct view tmp = { 0 };

            hub_directory_members(c->dir, dop->app, dop->name, dop->len,
                                  members_collect, &tmp);
            j->members_json = view_members_json(&tmp);
            for (size_t i = 0; i < tmp.n; i++) {
                free(tmp.m[i].uid);
                free(tmp.m[i].info);
            }
            free(tmp.m);
        }
        j->seq = hub_directory_take_seq(c->dir);
        j->first = !found;
        j->dir_events = false;
        pthread_mutex_unlock(&c->vmu);
        if (!j->members_json) {
            undo_local(c, dop);
            answer(c, dop, -ENOMEM);
            return;
        }
    }
    answer(c, dop, 0);
}

void hub_cluster_dir_queried(struct hub_cluster *c,
                             struct hub_cluster_dirop *dop,
                             const struct hub_channel_info *info,
                             json_t *json)
{
    if (info)
        dop->q->info = *info;
    dop->q->json = json;
    answer(c, dop, 0);
}

uint64_t hub_cluster_dir_snapshot(
    struct hub_cluster *c,
    void (*chan)(void *ctx, unsigned app, const char *name, size_t len,
                 uint32_t subs),
    void (*member)(void *ctx, unsigned app, const char *name, size_t len,
                   const char *uid, const char *info, uint32_t conns),
    void *ctx)
{
    uint64_t gen;

    pthread_mutex_lock(&c->mu);
    /* Up in the same step as the generation moves. A join or leave (which
     * reads the flag and changes the local directory under mu) then comes
     * either before: its edges went to the local engine, and the snapshot
     * counts it; or after: it is sent with the new generation and its
     * script decides its edges. With the flag up first, one in between
     * was neither: its op stale (the REJOIN counted it, queuing no edge)
     * and its local edge withheld (up), so its webhooks were lost
     * (docs/RELIABILITY.md, "Loaded runs": webhooks lost at start-up). */
    atomic_store(&c->dir_up, true);
    gen = ++c->gen;
    hub_directory_foreach(c->dir, chan, member, ctx);
    pthread_mutex_unlock(&c->mu);
    return gen;
}

/* The counting channels of the node's own directory, collected under
 * c->mu and refreshed after it (a chain of copies). */
struct count_ch {
    struct count_ch *next;
    unsigned app;
    size_t len;
    char name[];
};

struct count_walk {
    struct hub_cluster *c;
    struct count_ch *head;
};

static void count_one(void *ctx, unsigned app, const char *name, size_t len,
                      uint32_t subs)
{
    struct count_walk *w = ctx;
    enum hub_channel_kind k = hub_channel_classify(name, len);
    struct count_ch *ch;

    if (!subs || app >= w->c->n_apps || !w->c->apps[app].subscription_count ||
        k == HUB_CHANNEL_PRESENCE || k == HUB_CHANNEL_USER)
        return;
    ch = malloc(sizeof(*ch) + len + 1);
    if (!ch)
        return;                    /* that channel waits for its next change */
    ch->app = app;
    ch->len = len;
    memcpy(ch->name, name, len);
    ch->name[len] = '\0';
    ch->next = w->head;
    w->head = ch;
}

void hub_cluster_counts_refresh(struct hub_cluster *c)
{
    struct count_walk w = { c, NULL };
    struct count_ch *ch, *next;

    pthread_mutex_lock(&c->mu);
    hub_directory_foreach(c->dir, count_one, NULL, &w);
    pthread_mutex_unlock(&c->mu);
    pthread_mutex_lock(&c->deliver_mu);
    for (ch = w.head; ch; ch = next) {
        next = ch->next;
        if (c->hub && !c->closed)
            hub_subcount_refresh(c->hub, ch->app, ch->name, ch->len);
        free(ch);
    }
    pthread_mutex_unlock(&c->deliver_mu);
}

/* Whether gen is no longer *cur (a generation kept under c->mu). */
static bool gen_stale(struct hub_cluster *c, uint64_t gen,
                      const uint64_t *cur)
{
    bool stale;

    pthread_mutex_lock(&c->mu);
    stale = gen != *cur;
    pthread_mutex_unlock(&c->mu);
    return stale;
}

bool hub_cluster_dir_stale(struct hub_cluster *c,
                           const struct hub_cluster_dirop *dop)
{
    return gen_stale(c, dop->gen, &c->gen);
}

/* The ops. */

static struct hub_cluster_dirop *dirop_new(struct hub_cluster *c, int kind,
                                           unsigned app, const char *name,
                                           size_t len)
{
    struct hub_cluster_dirop *dop = calloc(1, sizeof(*dop));

    if (!dop)
        return NULL;
    dop->kind = kind;
    dop->c = c;
    dop->app = app;
    dop->app_id = id_of(c, app);
    dop->len = len;
    dop->name = dup_n(name, len);
    if (!dop->app_id || !dop->name) {
        hub_cluster_dirop_free(dop);
        return NULL;
    }
    return dop;
}

/* The op carrying dop: its rchan is the broker channel a JOIN waits on
 * (the member channel for presence: SUBSCRIBEd after the channel's own,
 * so its confirmation means both are). */
static struct hub_cluster_op *dir_op(struct hub_cluster *c,
                                     struct hub_cluster_dirop *dop)
{
    struct hub_cluster_op *op =
        op_new_mid(c, (enum hub_cluster_op_kind)dop->kind, dop->app,
                   dop->name, dop->len, dop->presence ? "m:" : "");

    if (op)
        op->dop = dop;
    return op;
}

/* Under c->mu: the refcount of a counted join, queuing SUB ops on the
 * first; -ENOMEM (nothing changed) when the record cannot be made. */
static int refs_prepare(struct hub_cluster *c, unsigned app, const char *name,
                        size_t len, bool presence, struct crec **out_new,
                        struct hub_cluster_op **ops /* [4] */)
{
    uint64_t hash = hub_chan_hash(app, name, len);
    struct hub_chan_node *n = hub_chantab_find(&c->chans, app, name, len,
                                               hash);
    struct crec *r;

    *out_new = NULL;
    memset(ops, 0, 4 * sizeof(*ops));
    if (n)
        return 0;
    r = malloc(sizeof(*r) + len + 1);
    ops[0] = op_new(c, HUB_COP_SUB, app, name, len);
    ops[1] = op_new(c, HUB_COP_UNSUB, app, name, len);
    if (presence) {
        ops[2] = op_new_mid(c, HUB_COP_SUB, app, name, len, "m:");
        ops[3] = op_new_mid(c, HUB_COP_UNSUB, app, name, len, "m:");
    }
    if (!r || !ops[0] || !ops[1] || (presence && (!ops[2] || !ops[3]))) {
        free(r);
        for (int i = 0; i < 4; i++)
            hub_cluster_op_free(ops[i]);
        return -ENOMEM;
    }
    if (presence)
        ops[2]->member = ops[3]->member = true;
    memcpy(r->name, name, len);
    r->name[len] = '\0';
    r->node.app = app;
    r->node.name = r->name;
    r->node.name_len = (uint32_t)len;
    r->node.hash = hash;
    r->refs = 0;
    r->unsub = ops[1];
    r->munsub = ops[3];
    *out_new = r;
    return 0;
}

static void refs_abort(struct crec *r, struct hub_cluster_op **ops)
{
    if (!r)
        return;
    free(r);
    for (int i = 0; i < 4; i++)
        hub_cluster_op_free(ops[i]);
}

/* Under c->mu, after the local join counted. */
static void refs_commit(struct hub_cluster *c, unsigned app, const char *name,
                        size_t len, struct crec *r,
                        struct hub_cluster_op **ops, bool *edge_out)
{
    bool e = false;

    if (!r) {
        struct hub_chan_node *n = hub_chantab_find(
            &c->chans, app, name, len, hub_chan_hash(app, name, len));

        hub_container_of(n, struct crec, node)->refs++;
        return;
    }
    r->refs = 1;
    hub_chantab_insert(&c->chans, &r->node);
    push_locked(c, ops[0], &e);
    *edge_out = *edge_out || e;
    if (ops[2]) {
        push_locked(c, ops[2], &e);
        *edge_out = *edge_out || e;
    }
}

/* Under c->mu: one reference less, queuing the UNSUBs on the last. */
static void refs_drop(struct hub_cluster *c, unsigned app, const char *name,
                      size_t len, bool *edge_out)
{
    struct hub_chan_node *n = hub_chantab_find(&c->chans, app, name, len,
                                               hub_chan_hash(app, name, len));
    bool e = false;

    if (!n)
        return;
    struct crec *r = hub_container_of(n, struct crec, node);

    if (--r->refs)
        return;
    hub_chantab_remove(&c->chans, n);
    if (r->munsub) {
        push_locked(c, r->munsub, &e);
        *edge_out = *edge_out || e;
    }
    push_locked(c, r->unsub, &e);
    *edge_out = *edge_out || e;
    free(r);
}

static void undo_local(struct hub_cluster *c, struct hub_cluster_dirop *dop)
{
    bool e = false, last;

    pthread_mutex_lock(&c->mu);
    hub_directory_leave_seq(c->dir, dop->app, dop->name, dop->len,
                            dop->presence ? dop->uid : NULL, &last, NULL);
    refs_drop(c, dop->app, dop->name, dop->len, &e);
    wake_locked(c, e);
    pthread_mutex_unlock(&c->mu);
}

/* Redis down: the view (if any) follows what the hub tells local
 * subscribers. Under nothing. */
static void down_join_view(struct hub_cluster *c, unsigned app,
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

static void down_leave_view(struct hub_cluster *c, unsigned app,
                            const char *name, size_t len, const char *uid)
{
    struct view *v;

    pthread_mutex_lock(&c->vmu);
    v = view_find(c, app, name, len);
    if (v) {
        bool found;
        size_t pos = view_pos(v, uid, strlen(uid), &found);

        if (found)
            view_remove_at(v, pos);
    }
    pthread_mutex_unlock(&c->vmu);
}

/* The join of both entry points. req NULL: synchronous (answer from the
 * local directory; Redis told in the background). Returns < 0, 0 or
 * HUB_DIR_PENDING. */
/* The JOIN op of a join (NULL out of memory). */
static struct hub_cluster_op *join_op(struct hub_cluster *c, unsigned app,
                                      const char *name, size_t len,
                                      const struct hub_presence_join *j)
{
    struct hub_cluster_dirop *dop = dirop_new(c, HUB_COP_JOIN, app, name,
                                              len);
    struct hub_cluster_op *op;

    if (dop && j) {
        dop->presence = true;
        dop->uid = strdup(j->user_id);
        dop->info = strdup(j->user_info ? j->user_info : "");
        dop->max_members = j->max_members;
        if (!dop->uid || !dop->info) {
            hub_cluster_dirop_free(dop);
            dop = NULL;
        }
    }
    op = dop ? dir_op(c, dop) : NULL;
    if (!op)
        hub_cluster_dirop_free(dop);
    return op;
}

static int cdir_join_req(struct hub_cluster *c, unsigned app,
                         const char *name, size_t len,
                         struct hub_presence_join *j,
                         struct hub_dir_join_req *req)
{
    struct crec *r;
    struct hub_cluster_op *ops[4], *op = NULL;
    struct hub_cluster_dirop *dop = NULL;
    bool presence = j != NULL, e = false;
    int rc;

    if (j)
        j->dir_events = false;
    /* Up or down is read under mu: a REJOIN snapshot (under mu, after the
     * flag went up) then either holds this join or this join is sent. */
    pthread_mutex_lock(&c->mu);
    if (hub_cluster_dir_is_up(c) && !is_hash_chan(name, len, j)) {
        op = join_op(c, app, name, len, j);
        if (!op) {
            pthread_mutex_unlock(&c->mu);
            return -ENOMEM;
        }
        dop = op->dop;
    }
    rc = refs_prepare(c, app, name, len, presence, &r, ops);
    if (!rc)
        rc = hub_directory_join(c->dir, app, name, len, j);
    if (rc) {
        pthread_mutex_unlock(&c->mu);
        refs_abort(r, ops);
        hub_cluster_op_free(op);
        return rc;
    }
    refs_commit(c, app, name, len, r, ops, &e);
    if (op) {
        bool e2 = false;

        dop->gen = c->gen;
        dop->local_first = j && j->first;
        dop->req = req;
        if (req) {
            /* The answer comes from Redis; from the push on, j is the
             * backplane thread's to fill. */
            if (j) {
                free(j->members_json);
                j->members_json = NULL;
            }
            stat_add(&c->stats.dir_pending, 1);
        }
        push_locked(c, op, &e2);
        e = e || e2;
    }
    wake_locked(c, e);
    pthread_mutex_unlock(&c->mu);
    stat_add(&c->stats.dir_ops, op ? 1 : 0);
    if (!op) {
        if (presence)
            down_join_view(c, app, name, len, j);
        return 0;
    }
    if (req)
        return HUB_DIR_PENDING;
    if (j) {
        /* A synchronous presence join while Redis is up (a subscribe
         * again, for the list): the view delivers member events. */
        j->first = false;
        j->dir_events = true;
    }
    return 0;
}

static int cdir_join(void *d, unsigned app, const char *name, size_t len,
                     struct hub_presence_join *j)
{
    return cdir_join_req(d, app, name, len, j, NULL);
}

static int cdir_join_async(void *d, struct hub_dir_join_req *req)
{
    return cdir_join_req(d, req->app, req->name, req->len, req->j, req);
}

static void cdir_leave(void *d, unsigned app, const char *name, size_t len,
                       const char *uid, bool *last, uint64_t *seq)
{
    struct hub_cluster *c = d;
    struct hub_cluster_dirop *dop = NULL;
    struct hub_cluster_op *op = NULL;
    bool e = false, llast = false;
    uint64_t lseq = 0;

    pthread_mutex_lock(&c->mu);
    if (hub_cluster_dir_is_up(c) && !is_hash_chan(name, len, uid)) {
        dop = dirop_new(c, HUB_COP_LEAVE, app, name, len);
        if (dop && uid) {
            dop->presence = true;
            if (!(dop->uid = strdup(uid))) {
                hub_cluster_dirop_free(dop);
                dop = NULL;
            }
        }
        op = dop ? dir_op(c, dop) : NULL;
        if (!op) {
            /* Redis is not told: the next REJOIN corrects the share. */
            hub_cluster_dirop_free(dop);
            dop = NULL;
            stat_add(&c->stats.lost, 1);
        }
    }
    hub_directory_leave_seq(c->dir, app, name, len, uid, &llast, &lseq);
    if (op) {
        dop->gen = c->gen;
        dop->local_last = llast;
        push_locked(c, op, &e);
    }
    refs_drop(c, app, name, len, &e);
    wake_locked(c, e);
    pthread_mutex_unlock(&c->mu);
    if (op) {
        stat_add(&c->stats.dir_ops, 1);
        /* The member event comes back from Redis through the view. */
        if (last)
            *last = false;
        if (seq)
            *seq = 0;
        return;
    }
    if (uid && llast)
        down_leave_view(c, app, name, len, uid);
    if (last)
        *last = llast;
    if (seq)
        *seq = lseq;
}

static int cdir_query_async(void *d, struct hub_dir_query *q)
{
    struct hub_cluster *c = d;
    struct hub_cluster_dirop *dop;
    struct hub_cluster_op *op;
    bool e = false;

    if (!hub_cluster_dir_is_up(c)) {
        switch (q->kind) {
        case HUB_DIR_Q_INFO:
            hub_directory_info(c->dir, q->app, q->name, q->len, &q->info);
            return 0;
        case HUB_DIR_Q_LIST:
            q->json = hub_directory_list(c->dir, q->app, q->prefix,
                                         q->user_count);
            return 0;
        case HUB_DIR_Q_USERS:
            q->json = hub_directory_users(c->dir, q->app, q->name, q->len);
            return 0;
        default:
            return -EINVAL;
        }
    }
    if (q->kind != HUB_DIR_Q_INFO && q->kind != HUB_DIR_Q_LIST &&
        q->kind != HUB_DIR_Q_USERS)
        return -EINVAL;
    dop = dirop_new(c, HUB_COP_QUERY, q->app,
                    q->kind == HUB_DIR_Q_LIST ? "" : q->name,
                    q->kind == HUB_DIR_Q_LIST ? 0 : q->len);
    if (!dop)
        return -ENOMEM;
    dop->q = q;
    op = op_new(c, HUB_COP_QUERY, q->app, dop->name, dop->len);
    if (!op) {
        hub_cluster_dirop_free(dop);
        return -ENOMEM;
    }
    op->dop = dop;
    pthread_mutex_lock(&c->mu);
    dop->gen = c->gen;
    stat_add(&c->stats.dir_pending, 1);
    push_locked(c, op, &e);
    wake_locked(c, e);
    pthread_mutex_unlock(&c->mu);
    stat_add(&c->stats.dir_ops, 1);
    return HUB_DIR_PENDING;
}

static void cdir_info(void *d, unsigned app, const char *name, size_t len,
                      struct hub_channel_info *out)
{
    hub_directory_info(((struct hub_cluster *)d)->dir, app, name, len, out);
}

static json_t *cdir_list(void *d, unsigned app, const char *prefix,
                         bool user_count)
{
    return hub_directory_list(((struct hub_cluster *)d)->dir, app, prefix,
                              user_count);
}

static json_t *cdir_users(void *d, unsigned app, const char *name, size_t len)
{
    return hub_directory_users(((struct hub_cluster *)d)->dir, app, name, len);
}

/* The reaper's edges (a dead node's channel_vacated / member_removed),
 * reported once, on the node that reaped. */
void hub_cluster_report_edge(struct hub_cluster *c,
                             const struct hub_dir_edge *e)
{
    if (c)
        script_edge(c, e->kind, e->app, e->name, e->len, e->user_id);
}

/* Online state and watchlists across nodes (docs/SCALING.md, "Watchlists
 * and online state"): while Redis is up each change of the hub's online
 * registry becomes an ONLINE op, pushed under the registry's mutex (the
 * caller holds it) so that ops leave in the order the registry decided. */

void hub_cluster_onop_free(struct hub_cluster_onop *oop)
{
    if (!oop)
        return;
    for (size_t i = 0; i < oop->n; i++)
        free(oop->ids[i]);
    free(oop->ids);
    free(oop->uid);
    free(oop);
}

static struct hub_cluster_op *online_op(struct hub_cluster *c,
                                        const struct hub_online_change *ch)
{
    static const char pre[] = USER_PREFIX;
    size_t ulen = strlen(ch->user), nlen = sizeof(pre) - 1 + ulen;
    struct hub_cluster_onop *oop = calloc(1, sizeof(*oop));
    struct hub_cluster_op *op = NULL;
    char *name = malloc(nlen + 1);
    bool ok = oop && name;

    if (ok) {
        memcpy(name, pre, sizeof(pre) - 1);
        memcpy(name + sizeof(pre) - 1, ch->user, ulen + 1);
        oop->signin = ch->signin;
        oop->first = ch->first;
        oop->replace = ch->replace;
        oop->max_watchers = ch->max_watchers;
        oop->app_id = id_of(c, ch->app);
        oop->uid = strdup(ch->user);
        ok = oop->app_id && oop->uid;
    }
    if (ok && ch->replace && ch->n) {
        oop->ids = calloc(ch->n, sizeof(*oop->ids));
        ok = oop->ids != NULL;
        for (size_t i = 0; ok && i < ch->n; i++) {
            oop->ids[i] = strdup(ch->ids[i]);
            ok = oop->ids[i] != NULL;
            oop->n = i + 1;
        }
    }
    if (ok)
        op = op_new(c, HUB_COP_ONLINE, ch->app, name, nlen);
    free(name);
    if (!op) {
        hub_cluster_onop_free(oop);
        return NULL;
    }
    op->oop = oop;
    return op;
}

static bool cdir_online(void *d, const struct hub_online_change *ch)
{
    struct hub_cluster *c = d;
    struct hub_cluster_op *op;
    bool e = false;

    if (!hub_cluster_dir_is_up(c))
        return false;
    op = online_op(c, ch);
    if (!op) {
        /* Out of memory: Redis is not told (the next REJOIN corrects the
         * share); the caller tells this node's watchers meanwhile. */
        stat_add(&c->stats.lost, 1);
        return false;
    }
    pthread_mutex_lock(&c->mu);
    op->oop->gen = c->ogen;
    push_locked(c, op, &e);
    wake_locked(c, e);
    pthread_mutex_unlock(&c->mu);
    stat_add(&c->stats.dir_ops, 1);
    return true;
}

struct hub_cluster_op *hub_cluster_online_state_op(struct hub_cluster *c,
                                                   unsigned app,
                                                   const char *uid)
{
    const struct hub_online_change ch = { .app = app, .user = uid,
                                          .signin = true };
    struct hub_cluster_op *op = online_op(c, &ch);

    if (op) {
        op->oop->full = true;
        pthread_mutex_lock(&c->mu);
        op->oop->gen = c->ogen;
        pthread_mutex_unlock(&c->mu);
    }
    return op;
}

struct online_snap {
    struct hub_cluster *c;
};

static void online_begin(void *ctx)
{
    struct online_snap *sn = ctx;

    pthread_mutex_lock(&sn->c->mu);
    sn->c->ogen++;
    pthread_mutex_unlock(&sn->c->mu);
}

void hub_cluster_online_snapshot(
    struct hub_cluster *c,
    void (*user)(void *ctx, unsigned app, const char *id,
                 const char *const *ids, size_t n),
    void *ctx)
{
    struct online_snap sn = { c };

    if (!c->hub || !c->hub->online)
        return;
    /* begin runs under the registry's mutex: every op pushed before it
     * (under that mutex) has the old generation and is in the visit. */
    hub_online_visit(c->hub->online, online_begin, &sn, user, ctx);
}

bool hub_cluster_online_stale(struct hub_cluster *c,
                              const struct hub_cluster_onop *oop)
{
    return gen_stale(c, oop->gen, &c->ogen);
}

static const struct hub_directory_ops cluster_dir_ops = {
    .join = cdir_join,
    .leave = cdir_leave,
    .info = cdir_info,
    .list = cdir_list,
    .users = cdir_users,
    .set_edge_hook = cdir_set_edge_hook,
    .destroy = NULL, /* the bus's destroy frees the whole cluster */
    .join_async = cdir_join_async,
    .query_async = cdir_query_async,
    .online = cdir_online,
};


/* Bus. */

/* Queue an event or terminate op, or count it lost when the queue is
 * full. */
static void enqueue(struct hub_cluster *c, struct hub_cluster_op *op)
{
    bool edge = false;

    pthread_mutex_lock(&c->mu);
    if (c->queued >= c->max_queue) {
        pthread_mutex_unlock(&c->mu);
        stat_add(&c->stats.lost, 1);
        hub_cluster_op_free(op);
        return;
    }
    c->queued++;
    push_locked(c, op, &edge);
    wake_locked(c, edge);
    pthread_mutex_unlock(&c->mu);
}

static int cbus_publish(void *b, struct hub *h, struct hub_loop *from,
                        const struct hub_pub_req *r)
{
    struct hub_cluster *c = b;
    struct hub_cluster_op *op;
    int rc;

    /* This node's subscribers first, never through the broker. */
    rc = hub_fanout_loops(h, from, r);
    if (r->excl && r->excl->member_seq)
        return rc;
    if (atomic_load_explicit(&h->stopping, memory_order_relaxed))
        return rc;
    op = op_new(c, HUB_COP_EVENT, r->app, r->name, r->len);
    if (!op) {
        stat_add(&c->stats.lost, 1);
        return rc;
    }
    if (r->excl)
        op->excl = *r->excl;
    op->f = hub_frame_ref(r->f);
    enqueue(c, op);
    return rc;
}

static int cbus_terminate(void *b, struct hub *h, struct hub_loop *from,
                          unsigned app, const char *uid)
{
    struct hub_cluster *c = b;
    size_t plen = sizeof(USER_PREFIX) - 1, ulen = strlen(uid);
    struct hub_cluster_op *op;
    char *name;
    int rc;

    rc = hub_fanout_terminate(h, from, app, uid);
    if (rc)
        return rc;
    name = malloc(plen + ulen + 1);
    op = name ? op_new(c, HUB_COP_TERMINATE, app,
                       (memcpy(name, USER_PREFIX, plen),
                        memcpy(name + plen, uid, ulen), name),
                       plen + ulen)
              : NULL;
    free(name);
    if (!op) {
        stat_add(&c->stats.lost, 1);
        return 0;
    }
    enqueue(c, op);
    return 0;
}

/* An HTTP API event on a cache channel: this node's subscribers at once,
 * then one CACHE op, which tells every other node (delivering it and
 * keeping it) and writes the entry to Redis (hub/cluster/cluster_cache.h). */
static int cbus_publish_cache(void *b, struct hub *h, struct hub_loop *from,
                              const struct hub_pub_req *r)
{
    struct hub_cluster *c = b;
    const struct hub_app *app;
    struct hub_cluster_op *op;
    uint64_t ttl;
    int rc;

    if (r->app >= c->n_apps || !hub_channel_is_cache(r->name, r->len) ||
        (r->excl && r->excl->member_seq))
        return cbus_publish(b, h, from, r);
    rc = hub_fanout_loops(h, from, r);
    if (atomic_load_explicit(&h->stopping, memory_order_relaxed))
        return rc;
    app = &c->apps[r->app];
    ttl = app->cache_ttl_ms ? app->cache_ttl_ms : h->cfg->cache_ttl_ms;
    op = ttl ? op_new_mid(c, HUB_COP_CACHE, r->app, r->name, r->len,
                          "cache:")
             : NULL;
    if (!op) {
        stat_add(&c->stats.lost, 1);
        return rc;
    }
    op->bus_len = c->cache_chan_len;
    op->expire_ms = hub_clock_now_ms(h->clock) + ttl;
    if (r->excl)
        op->excl = *r->excl;
    op->f = hub_frame_ref(r->f);
    enqueue(c, op);
    return rc;
}

/* Tell the nodes with subscribers of the channel that its count moved
 * here (envelope kind 4): they read it anew from Redis. Not while the
 * directory is down: Redis has no count to read then. */
static void cbus_count_changed(void *b, struct hub *h, unsigned app,
                               const char *name, size_t len)
{
    struct hub_cluster *c = b;
    struct hub_cluster_op *op;

    if (!hub_cluster_dir_is_up(c) ||
        atomic_load_explicit(&h->stopping, memory_order_relaxed))
        return;
    op = op_new(c, HUB_COP_COUNT, app, name, len);
    if (!op) {
        stat_add(&c->stats.lost, 1);
        return;
    }
    enqueue(c, op);
}

static void cbus_destroy(void *b)
{
    hub_cluster_destroy(b);
}

static const struct hub_bus_ops cluster_bus_ops = {
    .publish = cbus_publish,
    .terminate_user = cbus_terminate,
    .destroy = cbus_destroy,
    .publish_cache = cbus_publish_cache,
    .count_changed = cbus_count_changed,
};

int hub_cluster_backplane(struct hub_cluster *c, struct hub_backplane *bp)
{
    *bp = (struct hub_backplane){
        .dir = &cluster_dir_ops,
        .dir_impl = c,
        .bus = &cluster_bus_ops,
        .bus_impl = c,
        .stats = &c->stats,
    };
    return 0;
}

/* Backplane thread. */

unsigned char *hub_cluster_encode(struct hub_cluster *c,
                                  const struct hub_cluster_op *op,
                                  uint64_t epoch, uint64_t seq, size_t *len)
{
    const char *app = id_of(c, op->app);
    struct hub_envelope e = {
        .kind = op->kind == HUB_COP_EVENT   ? HUB_ENV_EVENT
                : op->kind == HUB_COP_CACHE ? HUB_ENV_CACHE
                : op->kind == HUB_COP_COUNT ? HUB_ENV_COUNT
                                            : HUB_ENV_TERMINATE,
        .origin = c->node_id,
        .origin_len = c->node_len,
        .epoch = epoch,
        .seq = seq,
        .app = app,
        .app_len = strlen(app),
        .channel = op->rchan + op->name_off,
        .channel_len = op->rchan_len - op->name_off,
        .excl_set = op->excl.set,
        .excl_hi = op->excl.hi,
        .excl_lo = op->excl.lo,
        .member_seq = 0,
    };
    unsigned char *out;
    size_t n;

    if (op->kind == HUB_COP_CACHE) {
        uint64_t left = hub_cluster_op_ttl(c, op);

        if (!left)
            left = 1; /* still news for the subscribers */
        e.ttl_ms = (uint32_t)(left > HUB_ENV_MAX_TTL ? HUB_ENV_MAX_TTL : left);
    }
    if ((op->kind == HUB_COP_EVENT || op->kind == HUB_COP_CACHE) && op->f) {
        e.data = hub_frame_data(op->f) + (op->f->len - op->f->payload_len);
        e.data_len = op->f->payload_len;
    }
    n = hub_envelope_size(&e);
    if (!n || !(out = malloc(n + (c->key ? HUB_CKEY_TRAILER : 0))))
        return NULL;
    *len = hub_envelope_encode(&e, out, n);
    if (c->key) {
        /* The trailer: counter, time, MAC over the whole envelope
         * (docs/SCALING.md, "The cluster key"). */
        const struct hub_ckey_part part = { out, n };
        uint64_t ctr, ms;

        if (hub_ckey_sign(c->key, "env", &part, 1, &ctr, &ms,
                          out + n + 16)) {
            free(out);
            return NULL;
        }
        for (int i = 0; i < 8; i++) {
            out[n + i] = (unsigned char)(ctr >> (56 - 8 * i));
            out[n + 8 + i] = (unsigned char)(ms >> (56 - 8 * i));
        }
        *len = n + HUB_CKEY_TRAILER;
    }
    return out;
}

void hub_cluster_set_key(struct hub_cluster *c, struct hub_ckey *key)
{
    hub_ckey_destroy(c->key);
    c->key = key;
}

bool hub_cluster_has_key(const struct hub_cluster *c)
{
    return c->key != NULL;
}

static uint64_t be64(const unsigned char *p)
{
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/* A dropped message counted, and said at most once per 10 s (with what
 * was dropped meanwhile): a flood of forgeries costs one line. */
static void key_drop(struct hub_cluster *c, int why, const char *origin,
                     size_t origin_len, const char *what)
{
    struct timespec ts;
    uint64_t now;

    if (why == -ESTALE) {
        stat_add(&c->stats.replays, 1);
        c->key_log_replays++;
    } else {
        stat_add(&c->stats.auth_dropped, 1);
        c->key_log_forged++;
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
    if (c->key_log_ms && now - c->key_log_ms < 10000)
        return;
    c->key_log_ms = now;
    hub_log(HUB_LOG_WARN, 0,
            "backplane: dropped %" PRIu64 " messages that do not verify "
            "with the cluster key and %" PRIu64 " replays (last: %s, "
            "claiming node %.*s)",
            c->key_log_forged, c->key_log_replays, what,
            (int)(origin_len > 64 ? 64 : origin_len), origin ? origin : "");
    c->key_log_forged = c->key_log_replays = 0;
}

/* A script's event (kind 5) is not MACed (Redis builds it from its own
 * state): with a key it is taken only as what the scripts send, a
 * watchlist_events frame on a user channel, so that a forged one can at
 * most fake online or offline, never carry another event. */
static bool script_frame_ok(const struct hub_envelope *e)
{
    static const char pre[] = USER_PREFIX;
    json_t *root = NULL, *inner = NULL, *evs;
    const char *data;
    bool ok = false;
    size_t i;
    json_t *ev;

    if (e->excl_set || e->channel_len <= sizeof(pre) - 1 ||
        memcmp(e->channel, pre, sizeof(pre) - 1))
        return false;
    root = json_loadb((const char *)e->data, e->data_len, 0, NULL);
    if (!json_is_object(root) || json_object_size(root) != 2 ||
        !json_is_string(json_object_get(root, "event")) ||
        strcmp(json_string_value(json_object_get(root, "event")),
               "pusher_internal:watchlist_events") ||
        !(data = json_string_value(json_object_get(root, "data"))))
        goto out;
    inner = json_loads(data, 0, NULL);
    evs = json_object_get(inner, "events");
    if (!json_is_object(inner) || json_object_size(inner) != 1 ||
        !json_is_array(evs))
        goto out;
    json_array_foreach(evs, i, ev) {
        const char *name = json_string_value(json_object_get(ev, "name"));
        json_t *ids = json_object_get(ev, "user_ids"), *id;
        size_t j;

        if (!json_is_object(ev) || json_object_size(ev) != 2 || !name ||
            (strcmp(name, "online") && strcmp(name, "offline")) ||
            !json_is_array(ids))
            goto out;
        json_array_foreach(ids, j, id) {
            if (!json_is_string(id))
                goto out;
        }
    }
    ok = true;
out:
    json_decref(inner);
    json_decref(root);
    return ok;
}

/*
 * data[0..len) into e, checked against the key when there is one: 0,
 * -EINVAL (malformed), -EACCES (does not verify, or unsigned), -ESTALE
 * (a replay; fresh only). Without a key, exactly the envelope.
 */
static int open_env(struct hub_cluster *c, struct hub_envelope *e,
                    const unsigned char *data, size_t len, bool fresh)
{
    const struct hub_ckey_part part = { data, len - HUB_CKEY_TRAILER };
    const unsigned char *t;

    if (!c->key)
        return hub_envelope_decode(e, data, len);
    if (!hub_envelope_decode(e, data, len))
        return e->kind == HUB_ENV_SCRIPT && script_frame_ok(e) ? 0 : -EACCES;
    if (len <= HUB_CKEY_TRAILER ||
        hub_envelope_decode(e, data, len - HUB_CKEY_TRAILER))
        return -EINVAL;
    t = data + len - HUB_CKEY_TRAILER;
    switch (hub_ckey_verify(c->key, e->origin, e->origin_len, be64(t),
                            be64(t + 8), "env", &part, 1, t + 16, fresh)) {
    case HUB_CKEY_OK:
        return 0;
    case HUB_CKEY_REPLAY:
        return -ESTALE;
    default:
        return -EACCES;
    }
}

void hub_cluster_rx_fini(struct hub_cluster_rx *rx)
{
    struct hub_cluster_origin *o, *next;

    for (o = rx->origins; o; o = next) {
        next = o->next;
        free(o);
    }
    rx->origins = NULL;
    rx->n = 0;
}

static void deliver(struct hub_cluster *c, unsigned app,
                    const struct hub_envelope *e);

/* Count what is missing between the origin's last seq and e's. */
static void track(struct hub_cluster *c, struct hub_cluster_rx *rx,
                  const struct hub_envelope *e)
{
    struct hub_cluster_origin *o;

    for (o = rx->origins; o; o = o->next)
        if (o->len == e->origin_len && !memcmp(o->id, e->origin, o->len))
            break;
    if (!o) {
        if (rx->n >= HUB_CLUSTER_MAX_ORIGINS)
            return;
        o = malloc(sizeof(*o) + e->origin_len);
        if (!o)
            return;
        o->len = e->origin_len;
        memcpy(o->id, e->origin, o->len);
        o->epoch = e->epoch;
        o->last = e->seq;
        o->next = rx->origins;
        rx->origins = o;
        rx->n++;
        return;
    }
    if (o->epoch != e->epoch) {
        /* The origin restarted or reset its numbering. */
        o->epoch = e->epoch;
        o->last = e->seq;
        return;
    }
    if (e->seq > o->last + 1)
        stat_add(&c->stats.gaps, e->seq - o->last - 1);
    if (e->seq > o->last)
        o->last = e->seq;
}

/* rchan (NULL = not checked) is "<prefix>:<app>:<channel>" of e, or the
 * cache channel for a cache envelope (and only for one). */
static bool rchan_matches(const struct hub_cluster *c, const char *rchan,
                          size_t rlen, const struct hub_envelope *e)
{
    size_t plen = strlen(c->prefix);
    bool cache_chan = rchan && rlen == c->cache_chan_len &&
                      !memcmp(rchan, c->cache_chan, rlen);

    if (e->kind == HUB_ENV_CACHE)
        return (!rchan || cache_chan) &&
               hub_channel_is_cache(e->channel, e->channel_len);
    if (!rchan)
        return true;
    return rlen == plen + 1 + e->app_len + 1 + e->channel_len &&
           !memcmp(rchan, c->prefix, plen) && rchan[plen] == ':' &&
           !memcmp(rchan + plen + 1, e->app, e->app_len) &&
           rchan[plen + 1 + e->app_len] == ':' &&
           !memcmp(rchan + plen + 2 + e->app_len, e->channel, e->channel_len);
}

int hub_cluster_receive(struct hub_cluster *c, struct hub_cluster_rx *rx,
                        const char *rchan, size_t rchan_len,
                        const void *data, size_t len)
{
    struct hub_envelope e;
    int app = -1, rc = open_env(c, &e, data, len, true);

    if (rc == -EACCES || rc == -ESTALE) {
        key_drop(c, rc, e.origin, e.origin_len,
                 rc == -ESTALE ? "a replayed envelope" : "an envelope");
        return rc;
    }
    if (rc || !rchan_matches(c, rchan, rchan_len, &e) ||
        (app = index_of(c, e.app, e.app_len)) < 0) {
        stat_add(&c->stats.bad, 1);
        return -EINVAL;
    }
    /* A script's event (kind 5) came from Redis, not from a node's local
     * delivery: every node delivers it, the one whose script sent it too.
     * Its sequence is Redis's, per watcher, whichever node's script sent
     * it: tracked under an origin no node has (the empty id); 0 is an
     * older node's script, not numbered. */
    if (e.kind != HUB_ENV_SCRIPT && e.origin_len == c->node_len &&
        !memcmp(e.origin, c->node_id, c->node_len)) {
        stat_add(&c->stats.own_ignored, 1);
        return 1;
    }
    if (rx && e.kind != HUB_ENV_SCRIPT) {
        track(c, rx, &e);
    } else if (rx && e.seq) {
        struct hub_envelope redis_seq = e;

        redis_seq.origin = "";
        redis_seq.origin_len = 0;
        track(c, rx, &redis_seq);
    }
    stat_add(&c->stats.received, 1);
    if (e.kind == HUB_ENV_CACHE)
        stat_add(&c->stats.cache_received, 1);
    if (!c->hub)
        return 0;
    pthread_mutex_lock(&c->deliver_mu);
    if (!c->closed && e.kind == HUB_ENV_CACHE && (unsigned)app < c->n_apps)
        hub_ccache_apply(c->hub, &c->apps[app], &e, e.ttl_ms, true);
    else if (!c->closed)
        deliver(c, (unsigned)app, &e);
    pthread_mutex_unlock(&c->deliver_mu);
    return 0;
}

static void deliver(struct hub_cluster *c, unsigned app,
                    const struct hub_envelope *ep)
{
    const struct hub_envelope e = *ep;
    struct hub_frame *f;

    if (e.kind == HUB_ENV_TERMINATE) {
        size_t plen = sizeof(USER_PREFIX) - 1;
        char *uid;

        if (e.channel_len <= plen || memcmp(e.channel, USER_PREFIX, plen) ||
            memchr(e.channel + plen, '\0', e.channel_len - plen)) {
            stat_add(&c->stats.bad, 1);
            return;
        }
        /* On the heap: a user id may be as long as the envelope's
         * channel (64 KiB), too much for this thread's stack. */
        uid = dup_n(e.channel + plen, e.channel_len - plen);
        if (uid)
            hub_fanout_terminate(c->hub, NULL, app, uid);
        free(uid);
        return;
    }
    if (e.kind == HUB_ENV_COUNT) {
        /* Only for an app this node counts too (the same apps everywhere,
         * but a node may be configured apart). */
        if (app < c->n_apps && c->apps[app].subscription_count)
            hub_subcount_remote(c->hub, app, e.channel, e.channel_len);
        return;
    }
    f = hub_frame_create_text(e.data, e.data_len);
    if (!f)
        return;
    {
        struct hub_excl ex = { .set = e.excl_set, .hi = e.excl_hi,
                               .lo = e.excl_lo, .member_seq = 0 };
        const struct hub_pub_req r = { app, e.channel, e.channel_len, f,
                                       &ex };

        hub_fanout_loops(c->hub, NULL, &r);
    }
    hub_frame_unref(f);
}

/* Cache channels across nodes (hub/cluster/cluster_cache.h). */

const char *hub_cluster_cache_channel(const struct hub_cluster *c,
                                      size_t *len)
{
    *len = c->cache_chan_len;
    return c->cache_chan;
}

const char *hub_cluster_cache_pattern(const struct hub_cluster *c)
{
    return c->cache_pattern;
}

uint64_t hub_cluster_op_ttl(const struct hub_cluster *c,
                            const struct hub_cluster_op *op)
{
    uint64_t now;

    if (!c->hub)
        return op->expire_ms ? op->expire_ms : 0;
    now = hub_clock_now_ms(c->hub->clock);
    return op->expire_ms > now ? op->expire_ms - now : 0;
}

/* key is "<prefix>:cache:<app>:<channel>" of e. */
static bool key_matches(const struct hub_cluster *c, const char *key,
                        size_t klen, const struct hub_envelope *e)
{
    size_t n = c->cache_chan_len;

    return key && klen == n + 1 + e->app_len + 1 + e->channel_len &&
           !memcmp(key, c->cache_chan, n) && key[n] == ':' &&
           !memcmp(key + n + 1, e->app, e->app_len) &&
           key[n + 1 + e->app_len] == ':' &&
           !memcmp(key + n + 2 + e->app_len, e->channel, e->channel_len);
}

int hub_cluster_load(struct hub_cluster *c, const char *key, size_t key_len,
                     const void *data, size_t len, uint64_t pttl_ms)
{
    struct hub_envelope e;
    const struct hub_app *app;
    int rc = open_env(c, &e, data, len, false);

    /* Stored state: the MAC is checked, not its age (a cache entry may
     * be older than the window; its PTTL bounds it). */
    if (rc == -EACCES) {
        key_drop(c, rc, e.origin, e.origin_len, "a cache entry");
        return -EINVAL;
    }
    if (rc || e.kind != HUB_ENV_CACHE ||
        !hub_channel_is_cache(e.channel, e.channel_len) ||
        !key_matches(c, key, key_len, &e) ||
        !(app = hub_app_find_by_id(c->apps, c->n_apps, e.app, e.app_len))) {
        stat_add(&c->stats.bad, 1);
        return -EINVAL;
    }
    rc = 0;
    if (!pttl_ms || !c->hub)
        return 0;
    /* This node's own entries too: with a fixed --node-id, a restarted
     * node finds what it wrote before. */
    pthread_mutex_lock(&c->deliver_mu);
    if (!c->closed && hub_ccache_load(c->hub, app, &e, pttl_ms) == 1) {
        stat_add(&c->stats.cache_loaded, 1);
        rc = 1;
    }
    pthread_mutex_unlock(&c->deliver_mu);
    return rc;
}
