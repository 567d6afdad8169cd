/*
 * hub/cluster.c - the scale-out backplane's node-local half (hub/cluster.h):
 * the wrapped directory with its per-channel refcount, the bus that serves
 * local subscribers at once and queues the rest for the backplane thread,
 * and the receiving side's checks.
 */
#include "hub/cluster.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "hub/ccache.h"
#include "hub/chantab.h"
#include "hub/directory.h"
#include "hub/envelope.h"
#include "hub/frame.h"
#include "hub/loop.h"
#include "hub/protocol.h"
#include "timer/clock.h"

#define USER_PREFIX "#server-to-user-"

/* A channel with local subscribers: how many, and its UNSUB, made when
 * the record was, so that the last leave can always queue it. */
struct crec {
    struct hub_chan_node node;
    uint32_t refs;
    struct hub_cluster_op *unsub;
    char name[];
};

struct hub_cluster_origin {
    struct hub_cluster_origin *next;
    uint64_t epoch, last;
    size_t len;
    char id[];
};

struct hub_cluster {
    char *node_id;
    size_t node_len;
    char *prefix;
    /* App ids by index: append-only (a reload adds apps, hub/apptab.h;
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

    struct hub_backplane_stats stats;

    /* The edge hook, also for the reaper's edges (hub_cluster_report_edge,
     * server/redis_lease.c). Set before the loops start. */
    hub_dir_edge_fn *edge_fn;
    void *edge_ctx;
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
        !c->cache_pattern || hub_chantab_init(&c->chans, 64)) {
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

void hub_cluster_op_free(struct hub_cluster_op *op)
{
    if (!op)
        return;
    if (op->f)
        hub_frame_unref(op->f);
    free(op);
}

void hub_cluster_destroy(struct hub_cluster *c)
{
    struct hub_cluster_op *op, *next;
    struct hub_chan_node *n, *nn;

    if (!c)
        return;
    for (op = c->head; op; op = next) {
        next = op->next;
        hub_cluster_op_free(op);
    }
    for (n = hub_chantab_next(&c->chans, NULL); n; n = nn) {
        struct crec *r = hub_container_of(n, struct crec, node);

        nn = hub_chantab_next(&c->chans, n);
        hub_chantab_remove(&c->chans, n);
        hub_cluster_op_free(r->unsub);
        free(r);
    }
    hub_chantab_fini(&c->chans);
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

/* Directory: the local one, plus the node's refcount per channel. */

static int cdir_join(void *d, unsigned app, const char *name, size_t len,
                     struct hub_presence_join *j)
{
    struct hub_cluster *c = d;
    uint64_t hash = hub_chan_hash(app, name, len);
    struct hub_chan_node *n;
    struct crec *r = NULL;
    struct hub_cluster_op *sub = NULL, *unsub = NULL;
    bool edge = false;
    int rc;

    pthread_mutex_lock(&c->mu);
    n = hub_chantab_find(&c->chans, app, name, len, hash);
    if (!n) {
        /* Everything the first subscription needs, before counting it. */
        r = malloc(sizeof(*r) + len + 1);
        sub = op_new(c, HUB_COP_SUB, app, name, len);
        unsub = op_new(c, HUB_COP_UNSUB, app, name, len);
        if (!r || !sub || !unsub) {
            pthread_mutex_unlock(&c->mu);
            free(r);
            hub_cluster_op_free(sub);
            hub_cluster_op_free(unsub);
            return -ENOMEM;
        }
    }
    rc = hub_directory_join(c->dir, app, name, len, j);
    if (rc) {
        pthread_mutex_unlock(&c->mu);
        free(r);
        hub_cluster_op_free(sub);
        hub_cluster_op_free(unsub);
        return rc;
    }
    if (n) {
        hub_container_of(n, struct crec, node)->refs++;
    } else {
        memcpy(r->name, name, len);
        r->name[len] = '\0';
        r->node.app = app;
        r->node.name = r->name;
        r->node.name_len = (uint32_t)len;
        r->node.hash = hash;
        r->refs = 1;
        r->unsub = unsub;
        hub_chantab_insert(&c->chans, &r->node);
        push_locked(c, sub, &edge);
    }
    wake_locked(c, edge);
    pthread_mutex_unlock(&c->mu);
    return 0;
}

static void cdir_leave(void *d, unsigned app, const char *name, size_t len,
                       const char *uid, bool *last, uint64_t *seq)
{
    struct hub_cluster *c = d;
    struct hub_chan_node *n;
    bool edge = false;

    pthread_mutex_lock(&c->mu);
    hub_directory_leave_seq(c->dir, app, name, len, uid, last, seq);
    n = hub_chantab_find(&c->chans, app, name, len,
                         hub_chan_hash(app, name, len));
    if (n) {
        struct crec *r = hub_container_of(n, struct crec, node);

        if (--r->refs == 0) {
            hub_chantab_remove(&c->chans, n);
            push_locked(c, r->unsub, &edge);
            free(r);
        }
    }
    wake_locked(c, edge);
    pthread_mutex_unlock(&c->mu);
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

/* Edges are this node's, as its counts are (the wrapped directory): until
 * the directory is cluster-wide, each node reports its own 0 <-> 1 moves
 * (docs/WEBHOOKS.md, "In a cluster"). */
static void cdir_set_edge_hook(void *d, hub_dir_edge_fn *fn, void *ctx)
{
    struct hub_cluster *c = d;

    c->edge_fn = fn;
    c->edge_ctx = ctx;
    hub_directory_set_edge_hook(c->dir, fn, ctx);
}

/* The reaper's edges (a dead node's channel_vacated / member_removed),
 * reported once, on the node that reaped. */
void hub_cluster_report_edge(struct hub_cluster *c,
                             const struct hub_dir_edge *e)
{
    if (c && c->edge_fn)
        c->edge_fn(c->edge_ctx, e);
}

static const struct hub_directory_ops cluster_dir_ops = {
    .join = cdir_join,
    .leave = cdir_leave,
    .info = cdir_info,
    .list = cdir_list,
    .users = cdir_users,
    .set_edge_hook = cdir_set_edge_hook,
    .destroy = NULL, /* the bus's destroy frees the whole cluster */
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
 * keeping it) and writes the entry to Redis (hub/ccache.h). */
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

static void cbus_destroy(void *b)
{
    hub_cluster_destroy(b);
}

static const struct hub_bus_ops cluster_bus_ops = {
    .publish = cbus_publish,
    .terminate_user = cbus_terminate,
    .destroy = cbus_destroy,
    .publish_cache = cbus_publish_cache,
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
    if (!n || !(out = malloc(n)))
        return NULL;
    *len = hub_envelope_encode(&e, out, n);
    return out;
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
    int app = -1;

    if (hub_envelope_decode(&e, data, len) ||
        !rchan_matches(c, rchan, rchan_len, &e) ||
        (app = index_of(c, e.app, e.app_len)) < 0) {
        stat_add(&c->stats.bad, 1);
        return -EINVAL;
    }
    if (e.origin_len == c->node_len && !memcmp(e.origin, c->node_id,
                                               c->node_len)) {
        stat_add(&c->stats.own_ignored, 1);
        return 1;
    }
    if (rx)
        track(c, rx, &e);
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
        char uid[HUB_ENV_MAX_CHANNEL + 1];

        if (e.channel_len <= plen || memcmp(e.channel, USER_PREFIX, plen)) {
            stat_add(&c->stats.bad, 1);
            return;
        }
        memcpy(uid, e.channel + plen, e.channel_len - plen);
        uid[e.channel_len - plen] = '\0';
        if (strlen(uid) != e.channel_len - plen) {
            stat_add(&c->stats.bad, 1);
            return;
        }
        hub_fanout_terminate(c->hub, NULL, app, uid);
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

/* Cache channels across nodes (hub/ccache.h). */

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
    int rc = 0;

    if (hub_envelope_decode(&e, data, len) || e.kind != HUB_ENV_CACHE ||
        !hub_channel_is_cache(e.channel, e.channel_len) ||
        !key_matches(c, key, key_len, &e) ||
        !(app = hub_app_find_by_id(c->apps, c->n_apps, e.app, e.app_len))) {
        stat_add(&c->stats.bad, 1);
        return -EINVAL;
    }
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
