/*
 * hub/rest/rest.c - the Pusher HTTP API. Not a hot path for parsing (jansson),
 * but each thing is done once: the query is parsed once (for the signature
 * and the handlers), an event's data literal is made once while it is
 * validated, and each channel's frame is encoded once
 * (hub_proto_event_frame) and shared by every recipient.
 */
#include "hub/rest/rest.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "hub/app/auth.h"
#include "hub/loop/backplane.h"
#include "hub/channel/chanfeat.h"
#include "hub/base/json.h"
#include "hub/base/log.h"
#include "hub/loop/loop.h"
#include "hub/wire/protocol.h"
#include "hub/loop/publish.h"
#include "hub/base/query.h"

/* Answer with the text of o (taken); a 500 when o is NULL or its text
 * cannot be made. */
static void reply_json(struct hub_rest_response *out, int status, json_t *o)
{
    out->status = status;
    out->body = hub_json_dumps(o, JSON_COMPACT);
    out->len = out->body ? strlen(out->body) : 0;
    json_decref(o);
    if (!out->body) {
        out->status = 500;
        out->body = strdup("{\"error\":\"out of memory\"}");
        out->len = out->body ? strlen(out->body) : 0;
    }
}

static void reply_error(struct hub_rest_response *out, int status,
                        const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void reply_error(struct hub_rest_response *out, int status,
                        const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    reply_json(out, status, json_pack("{s:s}", "error", msg));
}

/* The event's data as a JSON string literal (text), owned; *raw_len is
 * the length of the data text it quotes. NULL when out of memory. */
static char *data_literal(json_t *data, size_t *len, size_t *raw_len)
{
    const char *s;
    char *tmp = NULL, *lit;
    size_t n;

    if (json_is_string(data)) {
        s = json_string_value(data);
        n = json_string_length(data);
    } else {
        tmp = hub_json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!tmp)
            return NULL;
        s = tmp;
        n = strlen(tmp);
    }
    *raw_len = n;
    *len = hub_proto_encode_string(NULL, 0, s, n);
    lit = malloc(*len + 1);
    if (lit)
        hub_proto_encode_string(lit, *len + 1, s, n);
    free(tmp);
    return lit;
}

struct event_req {
    const char *name;
    json_t *channels;     /* borrowed array of strings */
    json_t *single;       /* borrowed string (the "channel" form) */
    char *lit;            /* owned: the data as a JSON string literal */
    size_t lit_len;
    struct hub_excl excl;
    const char *info;
};

static void event_req_fini(struct event_req *r)
{
    free(r->lit);
    r->lit = NULL;
}

/*
 * Validate one event and encode its data literal (once: publish_event()
 * uses it for every channel). 0, or an HTTP status with the error set and
 * nothing left to free.
 */
static int check_event(const struct hub_app *app, json_t *ev,
                       struct event_req *r, struct hub_rest_response *out)
{
    json_t *name = json_object_get(ev, "name");
    json_t *sid = json_object_get(ev, "socket_id");
    json_t *info = json_object_get(ev, "info");
    json_t *data;
    size_t n_ch, raw;

    memset(r, 0, sizeof(*r));
    if (!json_is_object(ev)) {
        reply_error(out, 400, "event must be a JSON object");
        return 400;
    }
    if (!json_is_string(name) || !json_string_length(name)) {
        reply_error(out, 400, "\"name\" must be a non-empty string");
        return 400;
    }
    if (json_string_length(name) > app->max_event_name) {
        reply_error(out, 400, "event name longer than %u", app->max_event_name);
        return 400;
    }
    r->name = json_string_value(name);
    data = json_object_get(ev, "data");
    if (!data) {
        reply_error(out, 400, "\"data\" is missing");
        return 400;
    }
    r->channels = json_object_get(ev, "channels");
    r->single = json_object_get(ev, "channel");
    if (r->channels && !json_is_array(r->channels)) {
        reply_error(out, 400, "\"channels\" must be an array");
        return 400;
    }
    if (!r->channels && !json_is_string(r->single)) {
        reply_error(out, 400, "\"channels\" or \"channel\" is required");
        return 400;
    }
    n_ch = r->channels ? json_array_size(r->channels) : 1;
    if (n_ch == 0 || n_ch > app->max_channels_per_event) {
        reply_error(out, 400, "between 1 and %u channels per event",
                    app->max_channels_per_event);
        return 400;
    }
    for (size_t i = 0; i < n_ch; i++) {
        json_t *c = r->channels ? json_array_get(r->channels, i) : r->single;

        if (!json_is_string(c) ||
            hub_channel_name_check(json_string_value(c), json_string_length(c),
                                   app->max_channel_name)) {
            reply_error(out, 400, "invalid channel name");
            return 400;
        }
        if (hub_channel_classify(json_string_value(c), json_string_length(c)) ==
                HUB_CHANNEL_ENCRYPTED && n_ch > 1) {
            reply_error(out, 400,
                        "an encrypted channel must be the only channel");
            return 400;
        }
    }
    if (sid && (!json_is_string(sid) ||
                hub_excl_parse(&r->excl, json_string_value(sid)))) {
        reply_error(out, 400, "\"socket_id\" must look like 1234.5678");
        return 400;
    }
    if (info && !json_is_string(info)) {
        reply_error(out, 400, "\"info\" must be a string");
        return 400;
    }
    r->info = info ? json_string_value(info) : NULL;
    r->lit = data_literal(data, &r->lit_len, &raw);
    if (!r->lit) {
        reply_error(out, 500, "out of memory");
        return 500;
    }
    if (raw > app->max_event_bytes) {
        event_req_fini(r);
        reply_error(out, 413, "event data is %zu bytes; the limit is %u",
                    raw, app->max_event_bytes);
        return 413;
    }
    return 0;
}

/*
 * Waiting requests (hub_rest_handle_async()). A request whose directory
 * reads answer later keeps here what its answer is made from: its queries
 * (one per channel asked about) and, for events, the checked body. The
 * answer is made when the last query is answered, exactly as the
 * synchronous path makes it from the same reads.
 */
enum rest_op { OP_LIST, OP_CHANNEL, OP_USERS, OP_EVENTS, OP_BATCH };

struct rest_q {
    struct hub_dir_query q;
    struct hub_rest_wait *w;
};

struct hub_rest_wait {
    struct hub_loop *l;
    const struct hub_app *app;     /* a reference */
    hub_rest_answer_fn *answer;    /* NULL once cancelled */
    void *ctx;
    enum rest_op op;
    unsigned outstanding;          /* queries not answered (+1 at start) */
    int err;                       /* the first failed query's rc */
    bool gone;                     /* a query got -ECANCELED: l is gone */
    bool refused;                  /* hub_rest_wait_refuse(): no publish */
    bool want_users, want_subs, want_cache;   /* OP_CHANNEL */
    json_t *root;                  /* events: the body; reqs borrow it */
    struct event_req *reqs;        /* events: owned, n_reqs of them */
    size_t n_reqs;
    bool any_info;                 /* OP_BATCH */
    char *text;                    /* OP_LIST: prefix; CHANNEL, USERS: name */
    size_t text_len;
    size_t nq;
    struct rest_q q[];
};

/* How a handler answers: now (answer NULL), or later through a wait. */
struct rest_call {
    hub_rest_answer_fn *answer;
    void *ctx;
    struct hub_rest_wait *wait;    /* out: the request waits */
    bool refuse_wait;              /* hub_rest_handle_nowait() */
};

static bool can_wait(struct hub_loop *l, const struct rest_call *c)
{
    return c->answer && l->hub->bp->dir->query_async;
}

static void query_done(struct hub_dir_query *q, int rc);

static void reply_refused(struct hub_rest_response *out)
{
    reply_error(out, 400,
                "this request waits for the cluster directory and cannot be "
                "answered on a connection with a request pipelined behind "
                "its body; nothing was published: send it again and wait "
                "for each answer before the next request");
}

/* A request that would wait for a directory answering later, from a
 * caller that cannot wait (hub_rest_handle_nowait()): refused with 400
 * before anything is published or counted. */
static bool refused_wait(struct hub_loop *l, const struct rest_call *c,
                         struct hub_rest_response *out)
{
    if (!c->refuse_wait || !l->hub->bp->dir->query_async)
        return false;
    reply_refused(out);
    return true;
}

/* A wait with nq INFO queries (the caller sets kinds and names). */
static struct hub_rest_wait *wait_new(struct hub_loop *l,
                                      const struct hub_app *app,
                                      const struct rest_call *c,
                                      enum rest_op op, size_t nq)
{
    struct hub_rest_wait *w = calloc(1, sizeof(*w) + nq * sizeof(w->q[0]));

    if (!w)
        return NULL;
    hub_app_ref(app);
    w->l = l;
    w->app = app;
    w->answer = c->answer;
    w->ctx = c->ctx;
    w->op = op;
    w->nq = nq;
    for (size_t i = 0; i < nq; i++) {
        w->q[i].w = w;
        w->q[i].q.kind = HUB_DIR_Q_INFO;
        w->q[i].q.app = app->index;
        w->q[i].q.loop = l;
        w->q[i].q.done = query_done;
    }
    return w;
}

static void wait_free(struct hub_rest_wait *w)
{
    for (size_t i = 0; i < w->nq; i++)
        json_decref(w->q[i].q.json);
    for (size_t i = 0; i < w->n_reqs; i++)
        event_req_fini(&w->reqs[i]);
    free(w->reqs);
    json_decref(w->root);
    free(w->text);
    hub_app_unref(w->app);
    free(w);
}

void hub_rest_wait_refuse(struct hub_rest_wait *w,
                          struct hub_rest_response *out)
{
    memset(out, 0, sizeof(*out));
    w->answer = NULL;
    w->ctx = NULL;
    w->refused = true;
    reply_refused(out);
}

void hub_rest_wait_cancel(struct hub_rest_wait *w)
{
    if (w->answer)
        HUB_STAT_ADD(w->l->stats.rest_answers_dropped, 1);
    w->answer = NULL;
    w->ctx = NULL;
}

static void events_answer(struct hub_loop *l, const struct hub_app *app,
                          struct event_req *r, const struct rest_q *rq,
                          struct hub_rest_response *out);
static void batch_answer(struct hub_loop *l, const struct hub_app *app,
                         struct event_req *reqs, size_t n, bool any_info,
                         const struct rest_q *rq,
                         struct hub_rest_response *out);
static void channel_answer(struct hub_loop *l, const struct hub_app *app,
                           const char *name, size_t len,
                           const struct hub_channel_info *ci, bool users,
                           bool subs, bool cache,
                           struct hub_rest_response *out);

/* The answer of w, from its queries' results. */
static void wait_finish(struct hub_rest_wait *w, struct hub_rest_response *out)
{
    json_t *j;

    memset(out, 0, sizeof(*out));
    if (w->err) {
        if (w->err == -ENOMEM)
            reply_error(out, 500, "out of memory");
        else
            reply_error(out, 503, "channel directory unavailable: %s",
                        strerror(-w->err));
        return;
    }
    switch (w->op) {
    case OP_LIST:
    case OP_USERS:
        j = w->q[0].q.json;
        w->q[0].q.json = NULL;
        if (!j)
            reply_error(out, 500, "out of memory");
        else
            reply_json(out, 200,
                       json_pack("{s:o}",
                                 w->op == OP_LIST ? "channels" : "users", j));
        break;
    case OP_CHANNEL:
        channel_answer(w->l, w->app, w->text, w->text_len, &w->q[0].q.info,
                       w->want_users, w->want_subs, w->want_cache, out);
        break;
    case OP_EVENTS:
        events_answer(w->l, w->app, &w->reqs[0], w->q, out);
        break;
    case OP_BATCH:
        batch_answer(w->l, w->app, w->reqs, w->n_reqs, w->any_info, w->q,
                     out);
        break;
    }
}

/* One query of w answered (rc as query_async's); the last one answers. */
static void query_settle(struct hub_rest_wait *w, int rc)
{
    struct hub_rest_response r;

    if (rc < 0 && !w->err)
        w->err = rc;
    /* -ECANCELED comes once the loops are gone (hub/loop/backplane.h): only
     * free what the wait holds, touching neither l nor the caller. */
    if (rc == -ECANCELED)
        w->gone = true;
    if (--w->outstanding)
        return;
    if (w->gone) {
        wait_free(w);
        return;
    }
    HUB_STAT_ADD(w->l->stats.rest_waiting, -1);
    if (w->refused) {
        wait_free(w);
        return;
    }
    wait_finish(w, &r);
    if (w->answer)
        w->answer(w->ctx, &r);
    else
        free(r.body);
    wait_free(w);
}

static void query_done(struct hub_dir_query *q, int rc)
{
    query_settle(hub_container_of(q, struct rest_q, q)->w, rc);
}

/* Ask w's queries; answered now (in out, w freed) or later (c->wait). */
static void wait_start(struct hub_rest_wait *w, struct rest_call *c,
                       struct hub_rest_response *out)
{
    struct hub *h = w->l->hub;

    /* The extra count keeps w until every query was asked. */
    w->outstanding = (unsigned)w->nq + 1;
    for (size_t i = 0; i < w->nq; i++) {
        int rc = hub_dir_query_async(h, &w->q[i].q);

        if (rc != HUB_DIR_PENDING) {
            if (rc < 0 && !w->err)
                w->err = rc;
            w->outstanding--;
        }
    }
    if (--w->outstanding) {
        memset(out, 0, sizeof(*out));
        c->wait = w;
        HUB_STAT_ADD(w->l->stats.rest_waiting, 1);
        return;
    }
    wait_finish(w, out);
    wait_free(w);
}

/* The channels an event names (its "channels", else its "channel"). */
static size_t event_n_ch(const struct event_req *r)
{
    return r->channels ? json_array_size(r->channels) : 1;
}

static json_t *event_channel(const struct event_req *r, size_t i)
{
    return r->channels ? json_array_get(r->channels, i) : r->single;
}

/* INFO queries of r's channels from w->q[at]; returns the next index. */
static size_t event_queries(struct hub_rest_wait *w, size_t at,
                            const struct event_req *r)
{
    for (size_t i = 0; i < event_n_ch(r); i++, at++) {
        json_t *c = event_channel(r, i);

        w->q[at].q.name = json_string_value(c);
        w->q[at].q.len = json_string_length(c);
    }
    return at;
}

/*
 * The info the event asked for, {channel: {...}} (an empty object when it
 * asked for none), or NULL when out of memory. Made before the event is
 * published (publishing does not change the counts), so that no
 * allocation is left to fail once subscribers have it. rq: the answers of
 * a wait, one per channel; NULL = ask the directory now.
 */
static json_t *event_info(struct hub_loop *l, const struct hub_app *app,
                          const struct event_req *r, const struct rest_q *rq)
{
    size_t n_ch = event_n_ch(r);
    json_t *info = json_object();

    for (size_t i = 0; info && r->info && i < n_ch; i++) {
        json_t *c = event_channel(r, i);
        const char *name = json_string_value(c);
        size_t len = json_string_length(c);
        struct hub_channel_info ci;
        json_t *o = json_object();
        int bad = 0;

        if (rq)
            ci = rq[i].q.info;
        else
            hub_dir_info(l->hub, app->index, name, len, &ci);
        /* Each insert checked: jansson drops what it cannot add. */
        if (strstr(r->info, "user_count") &&
            hub_channel_classify(name, len) == HUB_CHANNEL_PRESENCE)
            bad |= json_object_set_new(o, "user_count",
                                       json_integer(ci.user_count));
        if (strstr(r->info, "subscription_count"))
            bad |= json_object_set_new(o, "subscription_count",
                                       json_integer(ci.subscription_count));
        if (bad) {
            json_decref(o);
            o = NULL;
        }
        if (json_object_set_new(info, name, o)) {
            json_decref(info);
            info = NULL;
        }
    }
    return info;
}

/*
 * Publish one validated event, one frame per channel, each built from the
 * one literal just before it is published (so at most one frame of the
 * request is held at a time). 0 or -ENOMEM: the channels before the
 * failing one got it.
 */
static int publish_event(struct hub_loop *l, const struct hub_app *app,
                         const struct event_req *r)
{
    size_t n_ch = r->channels ? json_array_size(r->channels) : 1;
    int rc;

    assert(r->lit && n_ch >= 1);
    for (size_t i = 0; i < n_ch; i++) {
        json_t *c = r->channels ? json_array_get(r->channels, i) : r->single;
        const char *name = json_string_value(c);
        size_t len = json_string_length(c);
        struct hub_frame *f = hub_proto_event_frame(r->name, name, r->lit,
                                                    r->lit_len, NULL);

        if (!f)
            return -ENOMEM;
        if (hub_channel_is_cache(name, len))
            rc = hub_publish_cache(l->hub, l, app->index, name, len, f,
                                   r->excl.set ? &r->excl : NULL);
        else
            rc = hub_publish(l->hub, l, app->index, name, len, f,
                             r->excl.set ? &r->excl : NULL);
        /* After the fan-out: a subscriber joining in between gets the
         * older event first, then this one. */
        if (!rc && hub_channel_is_cache(name, len))
            hub_chanfeat_published(l, app, name, len, f);
        hub_frame_unref(f);
        if (rc)
            return rc;
    }
    return 0;
}

/* Answer 200 with text (taken), made before publishing. */
static void reply_text(struct hub_rest_response *out, char *text)
{
    out->status = 200;
    out->body = text;
    out->len = strlen(text);
}

/* The answer, then the publication, of one checked event (rq: its info
 * answers, or NULL). */
static void events_answer(struct hub_loop *l, const struct hub_app *app,
                          struct event_req *r, const struct rest_q *rq,
                          struct hub_rest_response *out)
{
    json_t *answer;
    char *text;
    int rc = -ENOMEM;

    /* The answer first: a 500 then means that no channel got the event
     * (one channel), or only the channels before the one that failed. */
    answer = r->info
                 ? json_pack("{s:o}", "channels", event_info(l, app, r, rq))
                 : json_object();
    text = hub_json_dumps(answer, JSON_COMPACT);
    json_decref(answer);
    if (text)
        rc = publish_event(l, app, r);
    if (rc) {
        free(text);
        reply_error(out, 500, "out of memory");
        return;
    }
    reply_text(out, text);
}

static void post_events(struct hub_loop *l, const struct hub_app *app,
                        json_t *body, struct rest_call *c,
                        struct hub_rest_response *out)
{
    struct hub_rest_wait *w;
    struct event_req r;

    if (check_event(app, body, &r, out))
        return;
    if (r.info && refused_wait(l, c, out)) {
        event_req_fini(&r);
        return;
    }
    if (!r.info || !can_wait(l, c)) {
        events_answer(l, app, &r, NULL, out);
        event_req_fini(&r);
        return;
    }
    w = wait_new(l, app, c, OP_EVENTS, event_n_ch(&r));
    if (w)
        w->reqs = malloc(sizeof(r));
    if (!w || !w->reqs) {
        if (w)
            wait_free(w);
        event_req_fini(&r);
        reply_error(out, 500, "out of memory");
        return;
    }
    w->root = json_incref(body);
    w->reqs[0] = r;
    w->n_reqs = 1;
    event_queries(w, 0, &r);
    wait_start(w, c, out);
}

/* The answer, then the publication, of a checked batch (rq: the info
 * answers of its events that asked, in order, or NULL). */
static void batch_answer(struct hub_loop *l, const struct hub_app *app,
                         struct event_req *reqs, size_t n, bool any_info,
                         const struct rest_q *rq,
                         struct hub_rest_response *out)
{
    json_t *answer;
    char *text = NULL;
    bool failed = false;

    /* The answer before anything is published (see post_events). */
    if (any_info) {
        json_t *infos = json_array();

        for (size_t i = 0; infos && i < n; i++) {
            json_t *info = event_info(l, app, &reqs[i], rq);
            /* The batch form reports the single channel's info directly. */
            json_t *only = json_object_iter_value(json_object_iter(info));

            if (rq && reqs[i].info)
                rq += event_n_ch(&reqs[i]);
            if (!info || json_array_append_new(infos, only ? json_incref(only)
                                                           : json_object())) {
                json_decref(infos);
                infos = NULL;
            }
            json_decref(info);
        }
        answer = json_pack("{s:o}", "batch", infos);
    } else {
        answer = json_object();
    }
    text = hub_json_dumps(answer, JSON_COMPACT);
    json_decref(answer);
    failed = !text;
    /*
     * Out of memory part-way stops here with a 500; the events before
     * were published (holding every frame of a batch first would cost up
     * to max_batch_events x max_channels_per_event frames at once).
     */
    for (size_t i = 0; i < n && !failed; i++)
        failed = publish_event(l, app, &reqs[i]) != 0;
    if (failed) {
        free(text);
        reply_error(out, 500, "out of memory");
    } else {
        reply_text(out, text);
    }
}

static void post_batch(struct hub_loop *l, const struct hub_app *app,
                       json_t *body, struct rest_call *c,
                       struct hub_rest_response *out)
{
    json_t *batch = json_object_get(body, "batch");
    struct hub_rest_wait *w;
    struct event_req *reqs;
    size_t n, checked, nq = 0;
    bool any_info = false;

    if (!json_is_array(batch)) {
        reply_error(out, 400, "\"batch\" must be an array");
        return;
    }
    n = json_array_size(batch);
    if (n > app->max_batch_events) {
        reply_error(out, 400, "at most %u events per batch",
                    app->max_batch_events);
        return;
    }
    reqs = calloc(n ? n : 1, sizeof(*reqs));
    if (!reqs) {
        reply_error(out, 500, "out of memory");
        return;
    }
    /* Validate (and encode the data of) all first: a bad batch publishes
     * nothing. */
    for (checked = 0; checked < n; checked++) {
        if (check_event(app, json_array_get(batch, checked), &reqs[checked],
                        out))
            goto out;
        if (reqs[checked].info) {
            any_info = true;
            nq += event_n_ch(&reqs[checked]);
        }
    }
    if (any_info && refused_wait(l, c, out))
        goto out;
    if (!any_info || !can_wait(l, c)) {
        batch_answer(l, app, reqs, n, any_info, NULL, out);
        goto out;
    }
    w = wait_new(l, app, c, OP_BATCH, nq);
    if (!w) {
        reply_error(out, 500, "out of memory");
        goto out;
    }
    /* The wait takes the checked events. */
    w->root = json_incref(body);
    w->reqs = reqs;
    w->n_reqs = n;
    w->any_info = true;
    for (size_t i = 0, at = 0; i < n; i++)
        if (reqs[i].info)
            at = event_queries(w, at, &reqs[i]);
    wait_start(w, c, out);
    return;
out:
    for (size_t i = 0; i < checked; i++)
        event_req_fini(&reqs[i]);
    free(reqs);
}

static void get_channels(struct hub_loop *l, const struct hub_app *app,
                         const struct hub_query *q, struct rest_call *c,
                         struct hub_rest_response *out)
{
    const char *prefix = hub_query_find(q, "filter_by_prefix");
    const char *info = hub_query_find(q, "info");
    bool user_count = info && strstr(info, "user_count");
    struct hub_rest_wait *w;
    json_t *list;

    if (user_count && (!prefix || strncmp(prefix, "presence-", 9) != 0)) {
        reply_error(out, 400,
                    "info=user_count needs filter_by_prefix=presence-");
        return;
    }
    if (refused_wait(l, c, out))
        return;
    if (can_wait(l, c)) {
        w = wait_new(l, app, c, OP_LIST, 1);
        if (w && prefix && !(w->text = strdup(prefix))) {
            wait_free(w);
            w = NULL;
        }
        if (!w) {
            reply_error(out, 500, "out of memory");
            return;
        }
        w->q[0].q.kind = HUB_DIR_Q_LIST;
        w->q[0].q.prefix = w->text;
        w->q[0].q.user_count = user_count;
        wait_start(w, c, out);
        return;
    }
    list = hub_dir_list(l->hub, app->index, prefix, user_count);
    if (!list) {
        reply_error(out, 500, "out of memory");
        return;
    }
    reply_json(out, 200, json_pack("{s:o}", "channels", list));
}

/* A copy of name (len bytes) as w's text; false when out of memory. */
static bool wait_name(struct hub_rest_wait *w, const char *name, size_t len)
{
    w->text = malloc(len + 1);
    if (!w->text)
        return false;
    memcpy(w->text, name, len);
    w->text[len] = '\0';
    w->text_len = len;
    w->q[0].q.name = w->text;
    w->q[0].q.len = len;
    return true;
}

static void channel_answer(struct hub_loop *l, const struct hub_app *app,
                           const char *name, size_t len,
                           const struct hub_channel_info *ci, bool users,
                           bool subs, bool cache,
                           struct hub_rest_response *out)
{
    json_t *o = json_pack("{s:b}", "occupied", ci->occupied);
    int bad = 0;

    /* Each insert checked: jansson drops what it cannot add. */
    if (users)
        bad |= json_object_set_new(o, "user_count",
                                   json_integer(ci->user_count));
    if (subs)
        bad |= json_object_set_new(o, "subscription_count",
                                   json_integer(ci->subscription_count));
    if (cache)
        bad |= json_object_set_new(o, "cache",
                                   hub_chanfeat_cache_info(l, app, name, len));
    if (bad) {
        json_decref(o);
        o = NULL;
    }
    reply_json(out, 200, o);
}

static void get_channel(struct hub_loop *l, const struct hub_app *app,
                        const char *name, size_t len, const struct hub_query *q,
                        struct rest_call *c, struct hub_rest_response *out)
{
    const char *info = hub_query_find(q, "info");
    bool presence = hub_channel_classify(name, len) == HUB_CHANNEL_PRESENCE;
    bool users = info && strstr(info, "user_count");
    bool subs = info && strstr(info, "subscription_count");
    bool cache = info && strstr(info, "cache");
    struct hub_channel_info ci;
    struct hub_rest_wait *w;

    if (users && !presence) {
        reply_error(out, 400, "user_count is only for presence channels");
        return;
    }
    if (cache && !hub_channel_is_cache(name, len)) {
        reply_error(out, 400, "cache is only for cache channels");
        return;
    }
    if (refused_wait(l, c, out))
        return;
    if (can_wait(l, c)) {
        w = wait_new(l, app, c, OP_CHANNEL, 1);
        if (!w || !wait_name(w, name, len)) {
            if (w)
                wait_free(w);
            reply_error(out, 500, "out of memory");
            return;
        }
        w->want_users = users;
        w->want_subs = subs;
        w->want_cache = cache;
        wait_start(w, c, out);
        return;
    }
    hub_dir_info(l->hub, app->index, name, len, &ci);
    channel_answer(l, app, name, len, &ci, users, subs, cache, out);
}

static void get_users(struct hub_loop *l, const struct hub_app *app,
                      const char *name, size_t len, struct rest_call *c,
                      struct hub_rest_response *out)
{
    struct hub_rest_wait *w;
    json_t *users;

    if (hub_channel_classify(name, len) != HUB_CHANNEL_PRESENCE) {
        reply_error(out, 400, "users are only listed for presence channels");
        return;
    }
    if (refused_wait(l, c, out))
        return;
    if (can_wait(l, c)) {
        w = wait_new(l, app, c, OP_USERS, 1);
        if (!w || !wait_name(w, name, len)) {
            if (w)
                wait_free(w);
            reply_error(out, 500, "out of memory");
            return;
        }
        w->q[0].q.kind = HUB_DIR_Q_USERS;
        wait_start(w, c, out);
        return;
    }
    users = hub_dir_users(l->hub, app->index, name, len);
    if (!users) {
        reply_error(out, 500, "out of memory");
        return;
    }
    reply_json(out, 200, json_pack("{s:o}", "users", users));
}

/* Events in a batch_events body (1 when it is not an array: the handler
 * then answers 400, and the request still counts as one). */
static uint32_t batch_size(json_t *root)
{
    json_t *b = json_object_get(root, "batch");
    size_t n = json_is_array(b) ? json_array_size(b) : 1;

    return n ? (uint32_t)(n < UINT32_MAX ? n : UINT32_MAX) : 1;
}

/*
 * The app's REST rate limits (hub/base/ratelimit.h): true, with a 429 and its
 * Retry-After in out, when n more backend events (events) or one more
 * read request (!events) do not fit; counted per app.
 */
static bool over_limit(struct hub_loop *l, const struct hub_app *app,
                       bool events, uint32_t n, struct hub_rest_response *out)
{
    struct hub_app_live *v = hub_app_live_of(l->hub, app->index);
    uint32_t rate = events ? app->max_backend_events_per_second
                           : app->max_read_requests_per_second;
    uint32_t retry = 1;

    if (!rate || hub_bucket_take(events ? &v->events : &v->reads, rate, n,
                                 hub_clock_now_ms(l->clock), &retry))
        return false;
    atomic_fetch_add_explicit(events ? &v->events_limited : &v->reads_limited,
                              events ? n : 1, memory_order_relaxed);
    reply_error(out, 429, "rate limit exceeded: at most %u %s per second "
                "for this app; retry after %u s", rate,
                events ? "events" : "read requests", retry);
    out->retry_after_s = retry;
    return true;
}

void hub_rest_handle(struct hub_loop *l, enum hub_http_method method,
                     const char *path, const char *query, const char *body,
                     size_t body_len, uint64_t now_s,
                     struct hub_rest_response *out)
{
    struct hub_rest_wait *w = hub_rest_handle_async(
        l, method, path, query, body, body_len, now_s, NULL, NULL, out);

    assert(!w);
    (void)w;
}

static struct hub_rest_wait *dispatch(struct hub_loop *l,
                                      enum hub_http_method method,
                                      const char *path, const char *query,
                                      const char *body, size_t body_len,
                                      uint64_t now_s, struct rest_call call,
                                      struct hub_rest_response *out);

struct hub_rest_wait *hub_rest_handle_async(struct hub_loop *l,
                                            enum hub_http_method method,
                                            const char *path,
                                            const char *query,
                                            const char *body, size_t body_len,
                                            uint64_t now_s,
                                            hub_rest_answer_fn *answer,
                                            void *ctx,
                                            struct hub_rest_response *out)
{
    struct rest_call call = { answer, ctx, NULL, false };

    return dispatch(l, method, path, query, body, body_len, now_s, call, out);
}

void hub_rest_handle_nowait(struct hub_loop *l, enum hub_http_method method,
                            const char *path, const char *query,
                            const char *body, size_t body_len, uint64_t now_s,
                            struct hub_rest_response *out)
{
    struct rest_call call = { NULL, NULL, NULL, true };
    struct hub_rest_wait *w = dispatch(l, method, path, query, body,
                                       body_len, now_s, call, out);

    assert(!w);
    (void)w;
}

static struct hub_rest_wait *dispatch(struct hub_loop *l,
                                      enum hub_http_method method,
                                      const char *path, const char *query,
                                      const char *body, size_t body_len,
                                      uint64_t now_s, struct rest_call call,
                                      struct hub_rest_response *out)
{
    const char *id, *rest, *res;
    const struct hub_app *app;
    struct hub_rest_request ar;
    struct hub_query q;
    char why[256];
    char chan[512];
    bool is_post = method == HUB_HTTP_POST;
    bool is_get = method == HUB_HTTP_GET;
    int rc;

    memset(out, 0, sizeof(*out));
    /* id only once the prefix is known to be there: path may be short. */
    if (strncmp(path, "/apps/", 6) != 0 ||
        !(rest = strchr(id = path + 6, '/'))) {
        reply_error(out, 404, "not found");
        return NULL;
    }
    app = hub_apptab_by_id(hub_apps(l->hub), id, (size_t)(rest - id));
    if (!app) {
        reply_error(out, 404, "unknown app");
        return NULL;
    }
    if (body_len > HUB_REST_MAX_BODY) {
        reply_error(out, 413, "request body too large");
        return NULL;
    }
    /* The one parse: auth checks it (in a lower-cased copy of its own),
     * the handlers below look their parameters up in it as sent. */
    if (!query)
        query = "";
    rc = hub_query_parse(&q, query, strlen(query));
    if (rc) {
        snprintf(why, sizeof(why), "%s",
                 rc == -E2BIG ? "query too long" : "bad query encoding");
        hub_log(HUB_LOG_INFO, l->id, "REST %s %s refused: %s",
                hub_http_method_name(method), path, why);
        reply_error(out, 400, "%s", why);
        return NULL;
    }
    ar.method = method;
    ar.path = path;
    ar.query = &q;
    ar.body = body;
    ar.body_len = body_len;
    ar.now_s = now_s;
    ar.window_s = l->cfg->auth_window_s;
    rc = hub_auth_check_rest(app, &ar, why, sizeof(why));
    if (rc) {
        hub_log(HUB_LOG_INFO, l->id, "REST %s %s refused: %s",
                hub_http_method_name(method), path, why);
        reply_error(out, rc == -EACCES ? 401 : 400, "%s", why);
        return NULL;
    }
    if (!app->enabled) {
        reply_error(out, 403, "app is disabled");
        return NULL;
    }
    res = rest + 1;
    if (strcmp(res, "events") == 0 || strcmp(res, "batch_events") == 0) {
        json_error_t err;
        json_t *root;

        if (!is_post) {
            reply_error(out, 405, "use POST");
            return NULL;
        }
        root = json_loadb(body, body_len, 0, &err);
        if (!json_is_object(root)) {
            json_decref(root);
            reply_error(out, 400, "body must be a JSON object");
            return NULL;
        }
        if (!over_limit(l, app, true,
                        res[0] == 'e' ? 1 : batch_size(root), out)) {
            if (res[0] == 'e')
                post_events(l, app, root, &call, out);
            else
                post_batch(l, app, root, &call, out);
        }
        json_decref(root);
        return call.wait;
    }
    if (is_get && (strcmp(res, "channels") == 0 ||
                   strncmp(res, "channels/", 9) == 0) &&
        over_limit(l, app, false, 1, out))
        return NULL;
    if (strcmp(res, "channels") == 0 && is_get) {
        get_channels(l, app, &q, &call, out);
        return call.wait;
    }
    if (strncmp(res, "channels/", 9) == 0 && is_get) {
        const char *name = res + 9, *slash = strchr(name, '/');
        size_t len = slash ? (size_t)(slash - name) : strlen(name);

        if (len == 0 || len >= sizeof(chan) ||
            hub_query_decode(chan, sizeof(chan), name, len)) {
            reply_error(out, 400, "bad channel name");
            return NULL;
        }
        len = strlen(chan);
        if (!slash)
            get_channel(l, app, chan, len, &q, &call, out);
        else if (strcmp(slash, "/users") == 0)
            get_users(l, app, chan, len, &call, out);
        else
            reply_error(out, 404, "not found");
        return call.wait;
    }
    if (strncmp(res, "users/", 6) == 0) {
        const char *uid = res + 6, *slash = strchr(uid, '/');
        /* As long as the app's max_user_id_len allows: decoding never
         * lengthens, so the encoded length bounds it (the request's
         * path, bounded by the HTTP layer). */
        char *user = slash ? malloc((size_t)(slash - uid) + 1) : NULL;
        int trc;

        if (!slash || strcmp(slash, "/terminate_connections") != 0) {
            free(user);
            reply_error(out, 404, "not found");
            return NULL;
        }
        if (!is_post) {
            free(user);
            reply_error(out, 405, "use POST");
            return NULL;
        }
        if (!user) {
            reply_error(out, 500, "out of memory");
            return NULL;
        }
        /* A %00 is refused by the decoder: a NUL would cut the id short
         * and terminate another user. */
        if (slash == uid ||
            hub_query_decode(user, (size_t)(slash - uid) + 1, uid,
                             (size_t)(slash - uid)) ||
            !*user || strlen(user) > app->max_user_id_len) {
            free(user);
            reply_error(out, 400, "bad user id");
            return NULL;
        }
        trc = hub_terminate_user(l->hub, l, app->index, user);
        free(user);
        if (trc) {
            reply_error(out, 500, "out of memory");
            return NULL;
        }
        reply_json(out, 200, json_object());
        return NULL;
    }
    reply_error(out, 404, "not found");
    return NULL;
}
