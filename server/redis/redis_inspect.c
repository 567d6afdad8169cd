/*
 * server/redis/redis_inspect.c - the socket inspector across the cluster
 * (server/redis/redis_inspect.h).
 *
 * Two broker channels: "<prefix>:inspect", where a node publishes its
 * question to every node, {"q","from","app","socket_id"|"user_id"}, and
 * "<prefix>:inspect#<node id>", where the others answer that node,
 * {"q","node","sockets","closes"} ('#' is in no app id, so no app's
 * channel "<prefix>:<app id>:<channel>" can be either). Every node
 * subscribes to both on each connect. A question starts a query of this node's loops
 * (hub_inspect_begin with a done function); the loop that answers last
 * hands the answer here, and the backplane thread publishes it. The
 * asking node's query (hub/ops/inspect.h) takes the answers that come
 * before its deadline; one that never comes leaves that node out of
 * "nodes_answered". Nothing is authenticated beyond Redis's own access:
 * the answer holds socket ids, user ids and channel names, which the
 * directory already keeps in Redis (docs/OPERATIONS.md).
 *
 * Bounds: at most HUB_INSPECT_QUERIES questions of other nodes run here at
 * once (the hub's table refuses more: no answer is sent, the asker times
 * out on this node); a reply above SRV_INSPECT_REPLY_MAX goes without its
 * subscription lists; at most SRV_INSPECT_OUT_MAX messages wait for the
 * backplane thread (more are dropped, counted nowhere but the asker's
 * missing node). A message above SRV_INSPECT_REPLY_MAX is not parsed, and
 * an answer adds at most HUB_INSPECT_SOCKETS objects of each kind.
 *
 * Lifetime: the state is referenced by the backplane (until
 * srv_redis_inspect_fini) and by each question of another node still
 * running on the loops; the last reference frees it.
 *
 * Thread: as the header says; the queue is under the state's mutex.
 */
#include "server/redis/redis_inspect.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "hub/cluster/cluster.h"
#include "hub/loop/loop.h"
#include "hub/ops/inspect.h"
#include "server/lws/sockbytes.h"
#include "server/redis/redis_int.h"

struct out_msg {
    struct out_msg *next;
    char *ch;                      /* owned */
    char *text;                    /* owned */
};

struct srv_redis_inspect {
    pthread_mutex_t mu;
    unsigned refs;
    bool closed;
    struct srv_redis *r;           /* NULL once closed */
    struct hub *h;
    char *ask_ch;                  /* "<prefix>:inspect" */
    char *reply_ch;                /* "<prefix>:inspect#<node>" */
    char *node;
    struct out_msg *head, **tail;
    unsigned n_out;
};

/* One question of another node, running on this node's loops. */
struct remote_q {
    struct srv_redis_inspect *in;
    uint64_t q;
    char ch[];                     /* where the answer goes */
};

static void unref(struct srv_redis_inspect *in)
{
    bool last;

    pthread_mutex_lock(&in->mu);
    last = --in->refs == 0;
    pthread_mutex_unlock(&in->mu);
    if (!last)
        return;
    while (in->head) {
        struct out_msg *m = in->head;

        in->head = m->next;
        free(m->ch);
        free(m->text);
        free(m);
    }
    pthread_mutex_destroy(&in->mu);
    free(in->ask_ch);
    free(in->reply_ch);
    free(in->node);
    free(in);
}

/* Queue text (taken) for channel ch and wake the backplane thread. */
static void enqueue(struct srv_redis_inspect *in, const char *ch, char *text)
{
    struct out_msg *m = text ? calloc(1, sizeof(*m)) : NULL;
    if (m)
        m->ch = strdup(ch);
    if (!m || !m->ch) {
        free(m);
        free(text);
        return;
    }
    m->text = text;
    pthread_mutex_lock(&in->mu);
    if (!in->closed && in->n_out < SRV_INSPECT_OUT_MAX) {
        *in->tail = m;
        in->tail = &m->next;
        in->n_out++;
        m = NULL;
        /* Under the mutex: fini clears r before the thread goes. The
         * wake handler (server/redis/redis.c) flushes. */
        ev_async_send(in->r->loop, &in->r->wake_w);
    }
    pthread_mutex_unlock(&in->mu);
    if (m) {
        free(m->ch);
        free(m->text);
        free(m);
    }
}

int srv_redis_inspect_attach(struct srv_redis *r, struct hub *h,
                             const char *prefix, const char *node_id)
{
    struct srv_redis_inspect *in = calloc(1, sizeof(*in));
    size_t n;

    if (!in)
        return -ENOMEM;
    pthread_mutex_init(&in->mu, NULL);
    in->refs = 1;
    in->r = r;
    in->h = h;
    in->tail = &in->head;
    n = strlen(prefix) + strlen(node_id) + 16;
    in->ask_ch = malloc(n);
    in->reply_ch = malloc(n);
    in->node = strdup(node_id);
    if (!in->ask_ch || !in->reply_ch || !in->node) {
        unref(in);
        return -ENOMEM;
    }
    snprintf(in->ask_ch, n, "%s:inspect", prefix);
    snprintf(in->reply_ch, n, "%s:inspect#%s", prefix, node_id);
    r->insp = in;
    return 0;
}

void srv_redis_inspect_fini(struct srv_redis *r)
{
    struct srv_redis_inspect *in = r->insp;

    if (!in)
        return;
    r->insp = NULL;
    pthread_mutex_lock(&in->mu);
    in->closed = true;
    in->r = NULL;
    pthread_mutex_unlock(&in->mu);
    unref(in);
}

void srv_redis_inspect_ask(struct srv_redis *r, uint64_t id,
                           const char *app_id,
                           const struct hub_inspect_req *rq)
{
    struct srv_redis_inspect *in = r ? r->insp : NULL;
    json_t *o;

    if (!in)
        return;
    o = json_pack("{s:I, s:s, s:s, s:s}", "q", (json_int_t)id, "from",
                  in->node, "app", app_id,
                  rq->by_user ? "user_id" : "socket_id", rq->id);
    enqueue(in, in->ask_ch, o ? json_dumps(o, JSON_COMPACT) : NULL);
    json_decref(o);
}

/* The answer's text, without the subscription lists when it is too big. */
static char *reply_text(json_t *o)
{
    char *text = json_dumps(o, JSON_COMPACT);
    size_t i;
    json_t *s;

    if (!text || strlen(text) <= SRV_INSPECT_REPLY_MAX)
        return text;
    free(text);
    json_array_foreach(json_object_get(o, "sockets"), i, s) {
        json_object_set_new(s, "subscriptions", json_array());
        json_object_set_new(s, "subscriptions_truncated", json_true());
    }
    text = json_dumps(o, JSON_COMPACT);
    if (text && strlen(text) > SRV_INSPECT_REPLY_MAX) {
        free(text);
        text = NULL;
    }
    return text;
}

/* Every loop answered another node's question (a loop's thread). */
static void remote_done(void *ctx, json_t *answer)
{
    struct remote_q *rq = ctx;
    struct srv_redis_inspect *in = rq->in;

    if (answer) {
        json_object_set_new(answer, "q", json_integer((json_int_t)rq->q));
        json_object_set_new(answer, "node", json_string(in->node));
        enqueue(in, rq->ch, reply_text(answer));
        json_decref(answer);
    }
    free(rq);
    unref(in);
}

/* A question from another node (backplane thread). */
static void on_question(struct srv_redis *r, struct srv_redis_inspect *in,
                        json_t *o)
{
    const char *from = json_string_value(json_object_get(o, "from"));
    const char *app = json_string_value(json_object_get(o, "app"));
    json_t *sid = json_object_get(o, "socket_id");
    json_t *uid = json_object_get(o, "user_id");
    json_t *id = sid ? sid : uid;
    struct hub_inspect_req req = { 0 };
    struct hub_inspect_start how = { 0 };
    struct remote_q *q;
    int idx;

    if (!from || !app || !json_is_string(id) || !strcmp(from, in->node) ||
        strlen(from) > HUB_INSPECT_NODE_MAX || !json_string_length(id) ||
        json_string_length(id) > HUB_INSPECT_ID_MAX)
        return;
    idx = hub_cluster_app_index(r->c, app, strlen(app));
    q = malloc(sizeof(*q) + strlen(in->ask_ch) + strlen(from) + 2);
    if (!q)
        return;
    q->in = in;
    q->q = (uint64_t)json_integer_value(json_object_get(o, "q"));
    sprintf(q->ch, "%s#%s", in->ask_ch, from);
    if (idx < 0) {
        /* Not an app of this node: it answers that it has nothing. */
        json_t *none = json_pack("{s:[], s:[], s:I, s:s}", "sockets",
                                 "closes", "q", (json_int_t)q->q, "node",
                                 in->node);

        enqueue(in, q->ch, none ? json_dumps(none, JSON_COMPACT) : NULL);
        json_decref(none);
        free(q);
        return;
    }
    req.app = (unsigned)idx;
    req.by_user = !sid;
    memcpy(req.id, json_string_value(id), json_string_length(id));
    how.node = in->node;
    how.bytes = srv_sock_bytes_written;
    how.done = remote_done;
    how.ctx = q;
    pthread_mutex_lock(&in->mu);
    in->refs++;
    pthread_mutex_unlock(&in->mu);
    if (hub_inspect_begin(in->h, &req, &how) < 0) {
        free(q);
        unref(in);
    }
}

bool srv_redis_inspect_msg(struct srv_redis *r, const char *ch, size_t chlen,
                           const char *data, size_t len)
{
    struct srv_redis_inspect *in = r->insp;
    bool ask, reply;
    json_t *o;

    if (!in)
        return false;
    ask = chlen == strlen(in->ask_ch) && !memcmp(ch, in->ask_ch, chlen);
    reply = chlen == strlen(in->reply_ch) && !memcmp(ch, in->reply_ch, chlen);
    if (!ask && !reply)
        return false;
    /* No node sends more (reply_text): a bigger message is not parsed. */
    if (len > SRV_INSPECT_REPLY_MAX)
        return true;
    o = json_loadb(data, len, 0, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        return true;
    }
    if (ask) {
        on_question(r, in, o);
    } else {
        const char *node = json_string_value(json_object_get(o, "node"));

        if (node && strlen(node) <= HUB_INSPECT_NODE_MAX)
            hub_inspect_remote(
                in->h, (uint64_t)json_integer_value(json_object_get(o, "q")),
                node, json_incref(o));
    }
    json_decref(o);
    return true;
}

unsigned srv_redis_inspect_channels(const struct srv_redis *r,
                                    const char *ch[2])
{
    if (!r->insp)
        return 0;
    ch[0] = r->insp->ask_ch;
    ch[1] = r->insp->reply_ch;
    return 2;
}

void srv_redis_inspect_flush(struct srv_redis *r)
{
    struct srv_redis_inspect *in = r->insp;
    struct out_msg *m, *next;

    if (!in)
        return;
    pthread_mutex_lock(&in->mu);
    m = in->head;
    in->head = NULL;
    in->tail = &in->head;
    in->n_out = 0;
    pthread_mutex_unlock(&in->mu);
    for (; m; m = next) {
        next = m->next;
        /* Redis down: the question or answer is lost; the asker's
         * deadline covers it. */
        if (r->up && r->cmd)
            (void)srv_redis_async_cmd(r->cmd, NULL, NULL, "PUBLISH %s %s",
                                      m->ch, m->text);
        free(m->ch);
        free(m->text);
        free(m);
    }
}
