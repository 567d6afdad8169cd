/*
 * hub/ops/inspect.c - the socket inspector (hub/ops/inspect.h): each loop's
 * ring of recent closes, the hub's table of queries, the inbox node that
 * asks each loop, and what a loop answers.
 *
 * Invariants: a loop's ring is touched only by its loop (written when a
 * session goes, read when a query's node runs there). The table and every
 * query in it are under the table's mutex; the JSON a loop adds is built
 * before the mutex is taken. A query is freed by whoever takes it out of
 * the table: the last loop (a query with a done function, after done
 * ran), or the table itself when an answered query is past
 * HUB_INSPECT_KEEP_MS (reused by the next hub_inspect_begin()) or the hub
 * goes. A loop's node that finds its query gone drops what it built.
 *
 * Thread: as hub/ops/inspect.h says.
 */
#include "hub/ops/inspect.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hub/loop/chanmap.h"
#include "hub/loop/feature.h"
#include "hub/loop/inbox.h"
#include "hub/loop/loop.h"
#include "hub/loop/session.h"
#include "timer/list.h"

/* One close a loop remembers. */
struct close_rec {
    uint64_t at_ms;                /* wall clock */
    unsigned app;
    uint16_t code;                 /* 0: the peer closed or vanished */
    char sid[HUB_SOCKET_ID_MAX];
    char uid[HUB_INSPECT_ID_MAX + 1];
    char reason[HUB_INSPECT_REASON_MAX + 1];
    bool uid_cut;                  /* longer than uid: never matches one */
    const char *why;               /* static: hub_close_reason_name() */
};

struct ring {
    struct close_rec rec[HUB_INSPECT_CLOSES];
    unsigned next, n;
};

struct query {
    uint64_t id;
    struct hub_inspect_req rq;
    struct hub_inspect_start how;
    char node[HUB_INSPECT_NODE_MAX + 1];
    unsigned loops_left;
    unsigned remote_n;             /* other nodes that answered */
    unsigned local_socks, local_closes; /* this node's, each capped */
    uint64_t complete_ms;          /* hub clock; 0 while running */
    json_t *sockets, *closes, *nodes;
};

struct table {
    pthread_mutex_t mu;
    struct query *q[HUB_INSPECT_QUERIES];
    uint64_t next_id;
    /* A loop went (hub_loop_destroy): no ask is posted from then on, so
     * none reaches a freed loop (another node's question may arrive on
     * the backplane thread while the loops are being joined). */
    bool closed;
};

/* What one loop is asked. */
struct ask {
    struct hub_inbox_node node;
    struct hub *h;
    uint64_t id;
    struct hub_inspect_req rq;
    hub_inspect_bytes_fn *bytes;
    char self[HUB_INSPECT_NODE_MAX + 1];
};

static uint64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void query_free(struct query *q)
{
    if (!q)
        return;
    json_decref(q->sockets);
    json_decref(q->closes);
    json_decref(q->nodes);
    free(q);
}

/* The feature's hooks. */

static int inspect_hub_init(struct hub *h, void **state)
{
    struct table *t = calloc(1, sizeof(*t));

    (void)h;
    if (!t)
        return -ENOMEM;
    pthread_mutex_init(&t->mu, NULL);
    t->next_id = 1;
    *state = t;
    return 0;
}

static void inspect_hub_fini(struct hub *h, void *state)
{
    struct table *t = state;

    (void)h;
    if (!t)
        return;
    for (unsigned i = 0; i < HUB_INSPECT_QUERIES; i++) {
        /* A query another node asked, never finished (its loops went):
         * its asker learns nothing, its context is released. */
        if (t->q[i] && t->q[i]->how.done)
            t->q[i]->how.done(t->q[i]->how.ctx, NULL);
        query_free(t->q[i]);
    }
    pthread_mutex_destroy(&t->mu);
    free(t);
}

static int inspect_loop_init(struct hub_loop *l, void **state)
{
    (void)l;
    *state = calloc(1, sizeof(struct ring));
    return *state ? 0 : -ENOMEM;
}

void hub_inspect_shutdown(struct hub *h)
{
    struct table *t = hub_feature_state(h, &hub_inspect_feature);

    if (t) {
        pthread_mutex_lock(&t->mu);
        t->closed = true;
        pthread_mutex_unlock(&t->mu);
    }
}

static void inspect_loop_fini(struct hub_loop *l, void *state)
{
    /* Before the loop drops its inbox: an ask posted until here is
     * dropped with it (ask_drop), none after (the server said so
     * earlier, before its loops' wakeups went). */
    hub_inspect_shutdown(l->hub);
    free(state);
}

const struct hub_feature hub_inspect_feature = {
    .name = "inspect",
    .hub_init = inspect_hub_init,
    .hub_fini = inspect_hub_fini,
    .loop_init = inspect_loop_init,
    .loop_fini = inspect_loop_fini,
};

/* Recent closes. */

/* The user a session is known as: its sign-in, else its first presence
 * member id; NULL when none. */
static const char *user_of(const struct hub_session *s)
{
    const struct hub_list *pos;

    if (s->user_id)
        return s->user_id;
    hub_list_for_each(pos, &s->subs) {
        const struct hub_sub *sub = hub_container_of(pos, struct hub_sub,
                                                     session_link);

        if (sub->user_id)
            return sub->user_id;
    }
    return NULL;
}

/* src into dst (cap bytes with the NUL), cut back to a UTF-8 character's
 * start so the copy stays valid JSON text; true when cut. */
static bool copy_cut(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    bool cut = n >= cap;

    if (cut) {
        n = cap - 1;
        while (n && ((unsigned char)src[n] & 0xC0) == 0x80)
            n--;
    }
    memcpy(dst, src, n);
    dst[n] = '\0';
    return cut;
}

void hub_inspect_closed(struct hub_session *s)
{
    struct ring *r;
    struct close_rec *c;
    const char *uid;
    enum hub_close_reason why;

    if (!s->loop || !s->app)
        return;
    r = hub_loop_feature_state(s->loop, &hub_inspect_feature);
    if (!r)
        return;
    c = &r->rec[r->next];
    r->next = (r->next + 1) % HUB_INSPECT_CLOSES;
    if (r->n < HUB_INSPECT_CLOSES)
        r->n++;
    /* As hub_session_closed() tells it: still open means the peer. */
    why = s->state == HUB_SESSION_OPEN
              ? HUB_CLOSE_PEER
              : (enum hub_close_reason)s->close_reason_id;
    uid = user_of(s);
    c->at_ms = wall_ms();
    c->app = s->app->index;
    c->code = s->state == HUB_SESSION_OPEN ? 0 : s->close_code;
    hub_session_socket_id(s, c->sid);
    c->uid_cut = copy_cut(c->uid, sizeof(c->uid), uid ? uid : "");
    (void)copy_cut(c->reason, sizeof(c->reason),
                   s->state != HUB_SESSION_OPEN && s->close_text
                       ? s->close_text
                       : "");
    c->why = hub_close_reason_name(why);
}

/* What a loop answers. */

static bool sid_parse(const char *id, uint64_t *hi, uint32_t *lo)
{
    char *end;
    unsigned long long a, b;

    a = strtoull(id, &end, 10);
    if (end == id || *end != '.')
        return false;
    id = end + 1;
    b = strtoull(id, &end, 10);
    if (end == id || *end || b > UINT32_MAX)
        return false;
    *hi = a;
    *lo = (uint32_t)b;
    return true;
}

/* Does s hold user uid (signed in, or a presence member)? */
static bool has_user(const struct hub_session *s, const char *uid)
{
    const struct hub_list *pos;

    if (s->user_id && !strcmp(s->user_id, uid))
        return true;
    hub_list_for_each(pos, &s->subs) {
        const struct hub_sub *sub = hub_container_of(pos, struct hub_sub,
                                                     session_link);

        if (sub->user_id && !strcmp(sub->user_id, uid))
            return true;
    }
    return false;
}

static json_t *node_json(const struct ask *a)
{
    return a->self[0] ? json_string(a->self) : json_null();
}

/* At most HUB_INSPECT_SUBS names; pending joins are counted apart. */
static json_t *subs_json(const struct hub_session *s, json_t *o)
{
    json_t *arr = json_array();
    const struct hub_list *pos;
    unsigned n = 0, pending = 0;
    bool cut = false;

    hub_list_for_each(pos, &s->subs) {
        const struct hub_sub *sub = hub_container_of(pos, struct hub_sub,
                                                     session_link);

        if (!sub->ch) {
            pending++;
        } else if (n == HUB_INSPECT_SUBS) {
            cut = true;
        } else {
            json_array_append_new(arr, json_stringn(sub->ch->name,
                                                    sub->ch->name_len));
            n++;
        }
    }
    json_object_set_new(o, "subscriptions_pending", json_integer(pending));
    json_object_set_new(o, "subscriptions_truncated", json_boolean(cut));
    return arr;
}

static json_t *socket_json(const struct ask *a, struct hub_loop *l,
                           const struct hub_session *s, uint64_t now_ms)
{
    const char *uid = user_of(s);
    const char *info = hub_session_user_info(s);
    json_t *o = json_object();

    if (!o)
        return NULL;
    json_object_set_new(o, "node", node_json(a));
    json_object_set_new(o, "loop", json_integer(l->id));
    json_object_set_new(o, "socket_id", json_string(HUB_SID(s)));
    json_object_set_new(o, "app", json_string(s->app->id));
    json_object_set_new(o, "user_id", uid ? json_string(uid) : json_null());
    if (info)
        json_object_set_new(o, "user_info", json_string(info));
    json_object_set_new(o, "state", json_string(s->state == HUB_SESSION_OPEN
                                                    ? "open"
                                                    : "closing"));
    json_object_set_new(o, "connected_s",
                        json_integer((json_int_t)((now_ms - s->connected_ms) /
                                                  1000)));
    json_object_set_new(o, "subscriptions", subs_json(s, o));
    json_object_set_new(o, "queued_bytes", json_integer((json_int_t)s->q.bytes));
    json_object_set_new(o, "queued_frames", json_integer(s->q.count));
    json_object_set_new(o, "bytes_written",
                        a->bytes ? json_integer((json_int_t)a->bytes(s->conn))
                                 : json_null());
    return o;
}

static json_t *close_json(const struct ask *a, struct hub_loop *l,
                          const struct close_rec *c)
{
    return json_pack("{s:o, s:i, s:s, s:s?, s:i, s:s, s:s, s:I}", "node",
                     node_json(a), "loop", (int)l->id, "socket_id", c->sid,
                     "user_id", c->uid[0] ? c->uid : NULL, "code",
                     (int)c->code, "reason", c->reason, "why", c->why,
                     "at_ms", (json_int_t)c->at_ms);
}

/* The live sessions of l that match, at most HUB_INSPECT_SOCKETS. */
static json_t *loop_sockets(const struct ask *a, struct hub_loop *l,
                            uint64_t now_ms)
{
    json_t *arr = json_array();
    uint64_t hi = 0;
    uint32_t lo = 0;

    if (!a->rq.id[0] || (!a->rq.by_user && !sid_parse(a->rq.id, &hi, &lo)))
        return arr;
    for (uint32_t i = 0; arr && i < l->shard.count; i++) {
        const struct hub_session *s = l->shard.slots[i].s;

        if (json_array_size(arr) == HUB_INSPECT_SOCKETS)
            break;
        if (!s->app || s->app->index != a->rq.app)
            continue;
        if (a->rq.by_user ? !has_user(s, a->rq.id)
                          : s->sid_hi != hi || s->sid_lo != lo)
            continue;
        json_array_append_new(arr, socket_json(a, l, s, now_ms));
    }
    return arr;
}

/* The matching closes of l's ring, newest first, at most
 * HUB_INSPECT_SOCKETS. */
static json_t *loop_closes(const struct ask *a, struct hub_loop *l)
{
    const struct ring *r = hub_loop_feature_state(l, &hub_inspect_feature);
    json_t *arr = json_array();

    /* An empty id names nobody (not every anonymous close). */
    for (unsigned k = 1; arr && r && a->rq.id[0] && k <= r->n; k++) {
        const struct close_rec *c =
            &r->rec[(r->next + HUB_INSPECT_CLOSES - k) % HUB_INSPECT_CLOSES];

        if (json_array_size(arr) == HUB_INSPECT_SOCKETS)
            break;
        if (c->app != a->rq.app || (a->rq.by_user && c->uid_cut) ||
            strcmp(a->rq.by_user ? c->uid : c->sid, a->rq.id))
            continue;
        json_array_append_new(arr, close_json(a, l, c));
    }
    return arr;
}

/* The table. */

static struct table *table_of(struct hub *h)
{
    return hub_feature_state(h, &hub_inspect_feature);
}

/* The query of id (the table's mutex held), and its slot. */
static struct query *find(struct table *t, uint64_t id, unsigned *slot)
{
    for (unsigned i = 0; i < HUB_INSPECT_QUERIES; i++)
        if (t->q[i] && t->q[i]->id == id) {
            if (slot)
                *slot = i;
            return t->q[i];
        }
    return NULL;
}

/* Append src's objects to dst while *n (what this source has added so
 * far: this node's loops together, or one other node) is below
 * HUB_INSPECT_SOCKETS; src released. */
static void append_upto(json_t *dst, json_t *src, unsigned *n)
{
    size_t i;
    json_t *v;

    json_array_foreach(src, i, v) {
        if (*n >= HUB_INSPECT_SOCKETS)
            break;
        if (json_is_object(v) && json_array_append(dst, v) == 0)
            (*n)++;
    }
    json_decref(src);
}

/* Complete: every loop answered, and the other nodes did or the deadline
 * passed (the mutex held). Stamped once, when first seen complete: at the
 * deadline when that is what completed it, so an answer nobody polls is
 * reclaimed HUB_INSPECT_KEEP_MS after it was complete (free_slot). */
static bool query_complete(struct query *q, uint64_t now_ms)
{
    bool waiting = q->how.expect && q->remote_n < q->how.expect;

    if (q->complete_ms)
        return true;
    if (q->loops_left || (waiting && now_ms < q->how.deadline_ms))
        return false;
    q->complete_ms = waiting ? q->how.deadline_ms : now_ms;
    if (!q->complete_ms)
        q->complete_ms = 1;
    return true;
}

static void ask_run(struct hub_inbox_node *n, struct hub_loop *l,
                    uint64_t now_ms)
{
    struct ask *a = hub_container_of(n, struct ask, node);
    json_t *socks = loop_sockets(a, l, now_ms);
    json_t *closes = loop_closes(a, l);
    struct table *t = table_of(a->h);
    struct query *q, *mine = NULL;
    unsigned slot = 0;

    pthread_mutex_lock(&t->mu);
    q = find(t, a->id, &slot);
    if (q) {
        /* The per-node caps hold for the node as a whole, apart from
         * what other nodes already added. */
        append_upto(q->sockets, socks, &q->local_socks);
        append_upto(q->closes, closes, &q->local_closes);
        socks = closes = NULL;
        q->loops_left--;
        if (!q->loops_left && q->how.done) {
            t->q[slot] = NULL;
            mine = q;
        } else {
            (void)query_complete(q, hub_clock_now_ms(a->h->clock));
        }
    }
    pthread_mutex_unlock(&t->mu);
    json_decref(socks);
    json_decref(closes);
    if (mine) {
        mine->how.done(mine->how.ctx,
                       json_pack("{s:O, s:O}", "sockets", mine->sockets,
                                 "closes", mine->closes));
        query_free(mine);
    }
    free(a);
}

static void ask_drop(struct hub_inbox_node *n)
{
    free(hub_container_of(n, struct ask, node));
}

static const struct hub_inbox_ops ask_ops = { ask_run, ask_drop };

/* A free slot (reclaiming answers past their keep, polled or not), or
 * -EBUSY; mutex held. A query another node asked (done) is never
 * reclaimed here: its last loop frees it. */
static int free_slot(struct table *t, uint64_t now_ms)
{
    int at = -EBUSY;

    for (unsigned i = 0; i < HUB_INSPECT_QUERIES; i++) {
        struct query *q = t->q[i];

        if (q && !q->how.done && query_complete(q, now_ms) &&
            now_ms - q->complete_ms >= HUB_INSPECT_KEEP_MS) {
            query_free(q);
            t->q[i] = NULL;
        }
        if (!t->q[i] && at < 0)
            at = (int)i;
    }
    return at;
}

static struct query *query_new(struct hub *h,
                               const struct hub_inspect_req *rq,
                               const struct hub_inspect_start *how)
{
    struct query *q = calloc(1, sizeof(*q));

    if (!q)
        return NULL;
    q->rq = *rq;
    q->rq.id[HUB_INSPECT_ID_MAX] = '\0';
    q->how = *how;
    snprintf(q->node, sizeof(q->node), "%s", how->node ? how->node : "");
    q->how.node = NULL;
    q->loops_left = h->n_loops;
    q->sockets = json_array();
    q->closes = json_array();
    q->nodes = json_array();
    if (!q->sockets || !q->closes || !q->nodes) {
        query_free(q);
        return NULL;
    }
    return q;
}

int64_t hub_inspect_begin(struct hub *h, const struct hub_inspect_req *rq,
                          const struct hub_inspect_start *how)
{
    struct table *t = table_of(h);
    struct ask *asks[HUB_MAX_LOOPS] = { 0 };
    struct query *q;
    unsigned n = h->n_loops;
    int slot;
    uint64_t id;

    if (!t)
        return -ENOENT;
    q = query_new(h, rq, how);
    for (unsigned i = 0; q && i < n; i++) {
        asks[i] = calloc(1, sizeof(*asks[i]));
        if (!asks[i])
            goto oom;
    }
    if (!q)
        return -ENOMEM;
    pthread_mutex_lock(&t->mu);
    slot = t->closed ? -ENOENT : free_slot(t, hub_clock_now_ms(h->clock));
    if (slot < 0) {
        pthread_mutex_unlock(&t->mu);
        for (unsigned i = 0; i < n; i++)
            free(asks[i]);
        query_free(q);
        return slot;
    }
    id = q->id = t->next_id++;
    t->q[slot] = q;
    /* Posted with the mutex held, so no loop is gone (closed) meanwhile;
     * q may be freed by the last loop once it is released: only asks[]
     * is ours. */
    for (unsigned i = 0; i < n; i++) {
        asks[i]->node.ops = &ask_ops;
        asks[i]->h = h;
        asks[i]->id = id;
        asks[i]->rq = *rq;
        asks[i]->rq.id[HUB_INSPECT_ID_MAX] = '\0';
        asks[i]->bytes = how->bytes;
        snprintf(asks[i]->self, sizeof(asks[i]->self), "%s",
                 how->node ? how->node : "");
        hub_loop_post(h->loops[i], &asks[i]->node);
    }
    pthread_mutex_unlock(&t->mu);
    return (int64_t)id;
oom:
    for (unsigned i = 0; i < n; i++)
        free(asks[i]);
    query_free(q);
    return -ENOMEM;
}

void hub_inspect_remote(struct hub *h, uint64_t id, const char *node,
                        json_t *records)
{
    struct table *t = table_of(h);
    struct query *q;

    if (!t) {
        json_decref(records);
        return;
    }
    pthread_mutex_lock(&t->mu);
    q = find(t, id, NULL);
    /* An answer after the deadline is too late, polled yet or not. */
    if (q && !query_complete(q, hub_clock_now_ms(h->clock)) &&
        q->remote_n < HUB_INSPECT_NODES) {
        json_t *s = json_object_get(records, "sockets");
        json_t *c = json_object_get(records, "closes");
        unsigned ns = 0, nc = 0;

        q->remote_n++;
        json_array_append_new(q->nodes, json_string(node));
        /* Each node's records (objects only), each node's caps. */
        if (json_is_array(s))
            append_upto(q->sockets, json_incref(s), &ns);
        if (json_is_array(c))
            append_upto(q->closes, json_incref(c), &nc);
        (void)query_complete(q, hub_clock_now_ms(h->clock));
    }
    pthread_mutex_unlock(&t->mu);
    json_decref(records);
}

int hub_inspect_result(struct hub *h, uint64_t id, json_t **out)
{
    struct table *t = table_of(h);
    struct query *q;
    unsigned slot = 0;
    uint64_t now_ms;
    int rc = -ENOENT;

    if (!t)
        return rc;
    pthread_mutex_lock(&t->mu);
    now_ms = hub_clock_now_ms(h->clock);
    q = find(t, id, &slot);
    if (q && !query_complete(q, now_ms)) {
        rc = -EAGAIN;
    } else if (q && now_ms - q->complete_ms >= HUB_INSPECT_KEEP_MS) {
        t->q[slot] = NULL;         /* expired: as free_slot would */
        query_free(q);
    } else if (q) {
        *out = json_pack("{s:O, s:O, s:O, s:b}", "sockets", q->sockets,
                         "closes", q->closes, "nodes_answered", q->nodes,
                         "nodes_asked", q->how.expect > 0);
        rc = *out ? 0 : -ENOMEM;
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}
