/*
 * hub/loop/directory.c - the in-process directory of hub/loop/directory.h: one
 * (app, name) table (hub/base/chantab.h) of channels under one mutex, each
 * with its subscription count and its presence members.
 *
 * Invariants: a channel is in the table while its subscription count is
 * above zero (a failed first join unlinks it again); a member's connection
 * count is at least one; seq only grows.
 */
#include "hub/loop/directory.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "hub/loop/backplane.h"
#include "hub/base/chantab.h"
#include "hub/base/json.h"
#include "timer/list.h"

struct hub_member {
    char *user_id;
    char *user_info;               /* JSON text or NULL */
    uint32_t conns;
};

struct hub_gchan {
    struct hub_chan_node node;     /* key: app, name (points at name[]) */
    uint32_t subs;
    struct hub_member *members;
    uint32_t n_members, cap_members;
    char name[];
};

struct hub_directory {
    pthread_mutex_t mu;
    struct hub_chantab t;
    uint64_t seq;                  /* presence changes, hub-wide */
    hub_dir_edge_fn *edge;         /* NULL = edges not reported */
    void *edge_ctx;
};

void hub_directory_set_edge_hook(struct hub_directory *d, hub_dir_edge_fn *fn,
                                 void *ctx)
{
    pthread_mutex_lock(&d->mu);
    d->edge = fn;
    d->edge_ctx = ctx;
    pthread_mutex_unlock(&d->mu);
}

/* Under d->mu. */
static void report(struct hub_directory *d, enum hub_dir_edge_kind kind,
                   unsigned app, const char *name, size_t len,
                   const char *uid)
{
    const struct hub_dir_edge e = { kind, app, name, len, uid };

    if (d->edge)
        d->edge(d->edge_ctx, &e);
}

static struct hub_gchan *gchan_of(struct hub_chan_node *n)
{
    return n ? hub_container_of(n, struct hub_gchan, node) : NULL;
}

struct hub_directory *hub_directory_create(void)
{
    struct hub_directory *d = calloc(1, sizeof(*d));

    if (!d)
        return NULL;
    if (hub_chantab_init(&d->t, 256)) {
        free(d);
        return NULL;
    }
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
    struct hub_chan_node *n, *next;

    if (!d)
        return;
    for (n = hub_chantab_next(&d->t, NULL); n; n = next) {
        next = hub_chantab_next(&d->t, n);
        gchan_free(gchan_of(n));
    }
    pthread_mutex_destroy(&d->mu);
    hub_chantab_fini(&d->t);
    free(d);
}

static struct hub_gchan *dir_find(struct hub_directory *d, unsigned app,
                                  const char *name, size_t len)
{
    return gchan_of(hub_chantab_find(&d->t, app, name, len,
                                     hub_chan_hash(app, name, len)));
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
    bool ok = ids && hash;

    /* Every insert is checked: jansson drops a value it could not add
     * (and a NULL one), and a member list short of a member is wrong. */
    for (uint32_t i = 0; ok && i < g->n_members; i++) {
        const struct hub_member *m = &g->members[i];
        json_t *info;

        /* user_info was checked when the member joined: NULL here is out
         * of memory (jansson says so as a parse error). */
        info = m->user_info ? json_loads(m->user_info, JSON_DECODE_ANY, NULL)
                            : json_object();
        ok = json_array_append_new(ids, json_string(m->user_id)) == 0;
        ok = json_object_set_new(hash, m->user_id, info) == 0 && ok;
    }
    if (!ok) {
        json_decref(ids);
        json_decref(hash);
        return NULL;
    }
    root = json_pack("{s:{s:o,s:o,s:I}}", "presence", "ids", ids, "hash",
                     hash, "count", (json_int_t)g->n_members);
    if (!root)
        return NULL;
    out = hub_json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return out;
}

int hub_directory_join(struct hub_directory *d, unsigned app,
                       const char *name, size_t len,
                       struct hub_presence_join *join)
{
    struct hub_gchan *g;
    uint64_t hash;
    int rc = 0;

    /* '#' channels (#server-to-user-) are the hub's own: joined so that a
     * backplane sees them, never counted or listed. */
    if (len && name[0] == '#' && !join)
        return 0;
    /* Hashed once, before the hub-wide lock: the find and a new record's
     * insert share it. */
    hash = hub_chan_hash(app, name, len);
    pthread_mutex_lock(&d->mu);
    g = gchan_of(hub_chantab_find(&d->t, app, name, len, hash));
    if (!g) {
        g = calloc(1, sizeof(*g) + len + 1);
        if (!g) {
            rc = -ENOMEM;
            goto out;
        }
        memcpy(g->name, name, len);
        g->node.hash = hash;
        g->node.app = app;
        g->node.name_len = (uint32_t)len;
        g->node.name = g->name;
        hub_chantab_insert(&d->t, &g->node);
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
    if (g->subs++ == 0)
        report(d, HUB_DIR_CHANNEL_FIRST, app, name, len, NULL);
    if (join && join->first)
        report(d, HUB_DIR_MEMBER_FIRST, app, name, len, join->user_id);
    goto out;
out_maybe_free:
    /* A channel this failed join created has no subscription: unlink. */
    if (g->subs == 0 && g->n_members == 0) {
        hub_chantab_remove(&d->t, &g->node);
        gchan_free(g);
    }
out:
    pthread_mutex_unlock(&d->mu);
    return rc;
}

void hub_directory_leave_seq(struct hub_directory *d, unsigned app,
                             const char *name, size_t len,
                             const char *user_id, bool *last, uint64_t *seq)
{
    struct hub_gchan *g;

    if (last)
        *last = false;
    if (seq)
        *seq = 0;
    pthread_mutex_lock(&d->mu);
    g = dir_find(d, app, name, len);
    if (!g)
        goto out;
    /* Linked channels have a subscription to lose. */
    assert(g->subs > 0);
    if (user_id) {
        struct hub_member *m = find_member(g, user_id);

        assert(!m || m->conns > 0);
        if (m && --m->conns == 0) {
            report(d, HUB_DIR_MEMBER_LAST, app, name, len, user_id);
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
        report(d, HUB_DIR_CHANNEL_LAST, app, g->name, len, NULL);
        hub_chantab_remove(&d->t, &g->node);
        gchan_free(g);
    }
out:
    pthread_mutex_unlock(&d->mu);
}

uint64_t hub_directory_take_seq(struct hub_directory *d)
{
    uint64_t v;

    pthread_mutex_lock(&d->mu);
    v = ++d->seq;
    pthread_mutex_unlock(&d->mu);
    return v;
}

unsigned hub_directory_members(struct hub_directory *d, unsigned app,
                               const char *name, size_t len,
                               void (*fn)(void *ctx, const char *uid,
                                          const char *info, uint32_t conns),
                               void *ctx)
{
    struct hub_gchan *g;
    unsigned n = 0;

    pthread_mutex_lock(&d->mu);
    g = dir_find(d, app, name, len);
    for (uint32_t i = 0; g && i < g->n_members; i++, n++)
        fn(ctx, g->members[i].user_id, g->members[i].user_info,
           g->members[i].conns);
    pthread_mutex_unlock(&d->mu);
    return n;
}

void hub_directory_foreach(
    struct hub_directory *d,
    void (*chan)(void *ctx, unsigned app, const char *name, size_t len,
                 uint32_t subs),
    void (*member)(void *ctx, unsigned app, const char *name, size_t len,
                   const char *uid, const char *info, uint32_t conns),
    void *ctx)
{
    struct hub_chan_node *n;

    pthread_mutex_lock(&d->mu);
    for (n = hub_chantab_next(&d->t, NULL); n;
         n = hub_chantab_next(&d->t, n)) {
        struct hub_gchan *g = gchan_of(n);

        if (!g->subs)
            continue;
        if (chan)
            chan(ctx, n->app, g->name, n->name_len, g->subs);
        for (uint32_t i = 0; member && i < g->n_members; i++)
            member(ctx, n->app, g->name, n->name_len, g->members[i].user_id,
                   g->members[i].user_info, g->members[i].conns);
    }
    pthread_mutex_unlock(&d->mu);
}

void hub_directory_info(struct hub_directory *d, unsigned app,
                        const char *name, size_t len,
                        struct hub_channel_info *out)
{
    struct hub_gchan *g;

    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&d->mu);
    g = dir_find(d, app, name, len);
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
    struct hub_chan_node *n;

    if (!out)
        return NULL;
    pthread_mutex_lock(&d->mu);
    for (n = hub_chantab_next(&d->t, NULL); n;
         n = hub_chantab_next(&d->t, n)) {
        struct hub_gchan *g = gchan_of(n);
        json_t *o;

        if (n->app != app || !g->subs)
            continue;
        if (plen && (n->name_len < plen ||
                     memcmp(g->name, prefix, plen) != 0))
            continue;
        o = json_object();
        if (user_count &&
            json_object_set_new(o, "user_count", json_integer(g->n_members)))
            json_decref(o), o = NULL;
        if (json_object_set_new(out, g->name, o)) {
            /* A list without the channel would pass for a true one. */
            json_decref(out);
            out = NULL;
            break;
        }
    }
    pthread_mutex_unlock(&d->mu);
    return out;
}

/* {"id","user_info"?}, user_info as its JSON text (the console parses
 * it; REST drops it); NULL when out of memory. */
static json_t *member_json(const struct hub_member *m)
{
    return json_pack("{s:s, s:s?}", "id", m->user_id, "user_info",
                     m->user_info);
}

json_t *hub_directory_users(struct hub_directory *d, unsigned app,
                            const char *name, size_t len)
{
    struct hub_gchan *g;
    json_t *arr = json_array();

    if (!arr)
        return NULL;
    pthread_mutex_lock(&d->mu);
    g = dir_find(d, app, name, len);
    /* With each member's user_info (checked JSON when it joined, so
     * bounded by the presence limits), for the console; the REST API
     * answers ids only (hub/rest/channels.c takes it out). */
    if (g)
        for (uint32_t i = 0; i < g->n_members; i++)
            if (json_array_append_new(arr, member_json(&g->members[i]))) {
                json_decref(arr);    /* short of a member: not an answer */
                arr = NULL;
                break;
            }
    pthread_mutex_unlock(&d->mu);
    return arr;
}

/* The backplane's view: the same functions over an opaque impl. */

static int local_join(void *d, unsigned app, const char *name, size_t len,
                      struct hub_presence_join *j)
{
    return hub_directory_join(d, app, name, len, j);
}

static void local_leave(void *d, unsigned app, const char *name, size_t len,
                        const char *uid, bool *last, uint64_t *seq)
{
    hub_directory_leave_seq(d, app, name, len, uid, last, seq);
}

static void local_info(void *d, unsigned app, const char *name, size_t len,
                       struct hub_channel_info *out)
{
    hub_directory_info(d, app, name, len, out);
}

static json_t *local_list(void *d, unsigned app, const char *prefix,
                          bool user_count)
{
    return hub_directory_list(d, app, prefix, user_count);
}

static json_t *local_users(void *d, unsigned app, const char *name,
                           size_t len)
{
    return hub_directory_users(d, app, name, len);
}

static void local_set_edge_hook(void *d, hub_dir_edge_fn *fn, void *ctx)
{
    hub_directory_set_edge_hook(d, fn, ctx);
}

static void local_destroy(void *d)
{
    hub_directory_destroy(d);
}

const struct hub_directory_ops hub_directory_local_ops = {
    .join = local_join,
    .leave = local_leave,
    .info = local_info,
    .list = local_list,
    .users = local_users,
    .set_edge_hook = local_set_edge_hook,
    .destroy = local_destroy,
};
