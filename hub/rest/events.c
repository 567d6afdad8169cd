/*
 * hub/rest/events.c - POST events and batch_events (hub/rest/events.h):
 * each event checked (name, channels, socket_id, info, data size) and its
 * data literal made once while it is checked; the answer, with the info=
 * counts when asked (read now, or through a wait: hub/rest/wait.h), made
 * before anything is published; then each channel's frame encoded once
 * (hub_proto_event_frame) and shared by every recipient.
 *
 * A batch publishes nothing when any of its events is bad. Out of memory
 * part-way answers 500 after the events before were published (holding
 * every frame first would cost up to max_batch_events x
 * max_channels_per_event frames at once); at most one frame of a request
 * is held at a time.
 *
 * Thread: the loop that received the request (publishing reaches the
 * other loops through their inboxes).
 */
#include "hub/rest/events.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hub/app/app.h"
#include "hub/base/json.h"
#include "hub/channel/chanhooks.h"
#include "hub/channel/history.h"
#include "hub/loop/loop.h"
#include "hub/loop/publish.h"
#include "hub/rest/wait.h"
#include "hub/wire/protocol.h"

/* One checked event of a request. */
struct hub_rest_event {
    const char *name;
    json_t *channels;     /* borrowed array of strings */
    json_t *single;       /* borrowed string (the "channel" form) */
    char *lit;            /* owned: the data as a JSON string literal */
    size_t lit_len;
    struct hub_skip skip;
    const char *info;
};

static void event_fini(struct hub_rest_event *r)
{
    free(r->lit);
    r->lit = NULL;
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

/* The channels an event names (its "channels", else its "channel"). */
static size_t event_n_ch(const struct hub_rest_event *r)
{
    return r->channels ? json_array_size(r->channels) : 1;
}

static json_t *event_channel(const struct hub_rest_event *r, size_t i)
{
    return r->channels ? json_array_get(r->channels, i) : r->single;
}

/* Its channels, r->channels and r->single set: 0, or 400 with the error
 * set. */
static int check_channels(const struct hub_app *app, struct hub_rest_event *r,
                          struct hub_rest_response *out)
{
    size_t n_ch;

    if (r->channels && !json_is_array(r->channels)) {
        hub_rest_reply_error(out, 400, "\"channels\" must be an array");
        return 400;
    }
    if (!r->channels && !json_is_string(r->single)) {
        hub_rest_reply_error(out, 400,
                             "\"channels\" or \"channel\" is required");
        return 400;
    }
    n_ch = event_n_ch(r);
    if (n_ch == 0 || n_ch > app->max_channels_per_event) {
        hub_rest_reply_error(out, 400, "between 1 and %u channels per event",
                             app->max_channels_per_event);
        return 400;
    }
    for (size_t i = 0; i < n_ch; i++) {
        json_t *c = event_channel(r, i);

        if (!json_is_string(c) ||
            hub_channel_name_check(json_string_value(c), json_string_length(c),
                                   app->max_channel_name)) {
            hub_rest_reply_error(out, 400, "invalid channel name");
            return 400;
        }
        if (hub_channel_classify(json_string_value(c), json_string_length(c)) ==
                HUB_CHANNEL_ENCRYPTED && n_ch > 1) {
            hub_rest_reply_error(out, 400,
                                 "an encrypted channel must be the only "
                                 "channel");
            return 400;
        }
    }
    return 0;
}

/*
 * Validate one event and encode its data literal (once: publish_event()
 * uses it for every channel). 0, or an HTTP status with the error set and
 * nothing left to free.
 */
static int check_event(const struct hub_app *app, json_t *ev,
                       struct hub_rest_event *r, struct hub_rest_response *out)
{
    json_t *name = json_object_get(ev, "name");
    json_t *sid = json_object_get(ev, "socket_id");
    json_t *info = json_object_get(ev, "info");
    json_t *data;
    size_t raw;
    int rc;

    memset(r, 0, sizeof(*r));
    if (!json_is_object(ev)) {
        hub_rest_reply_error(out, 400, "event must be a JSON object");
        return 400;
    }
    if (!json_is_string(name) || !json_string_length(name)) {
        hub_rest_reply_error(out, 400, "\"name\" must be a non-empty string");
        return 400;
    }
    if (json_string_length(name) > app->max_event_name) {
        hub_rest_reply_error(out, 400, "event name longer than %u",
                             app->max_event_name);
        return 400;
    }
    r->name = json_string_value(name);
    data = json_object_get(ev, "data");
    if (!data) {
        hub_rest_reply_error(out, 400, "\"data\" is missing");
        return 400;
    }
    r->channels = json_object_get(ev, "channels");
    r->single = json_object_get(ev, "channel");
    rc = check_channels(app, r, out);
    if (rc)
        return rc;
    if (sid && (!json_is_string(sid) ||
                hub_skip_parse(&r->skip, json_string_value(sid)))) {
        hub_rest_reply_error(out, 400,
                             "\"socket_id\" must look like 1234.5678");
        return 400;
    }
    if (info && !json_is_string(info)) {
        hub_rest_reply_error(out, 400, "\"info\" must be a string");
        return 400;
    }
    r->info = info ? json_string_value(info) : NULL;
    r->lit = data_literal(data, &r->lit_len, &raw);
    if (!r->lit) {
        hub_rest_reply_error(out, 500, "out of memory");
        return 500;
    }
    if (raw > app->max_event_bytes) {
        event_fini(r);
        hub_rest_reply_error(out, 413,
                             "event data is %zu bytes; the limit is %u", raw,
                             app->max_event_bytes);
        return 413;
    }
    return 0;
}

/* INFO queries of r's channels from w->q[at]; returns the next index. */
static size_t event_queries(struct hub_rest_wait *w, size_t at,
                            const struct hub_rest_event *r)
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
                          const struct hub_rest_event *r,
                          const struct hub_rest_query *rq)
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
                         const struct hub_rest_event *r)
{
    size_t n_ch = event_n_ch(r);
    int rc;

    assert(r->lit && n_ch >= 1);
    for (size_t i = 0; i < n_ch; i++) {
        json_t *c = event_channel(r, i);
        const char *name = json_string_value(c);
        size_t len = json_string_length(c);
        struct hub_frame *f = hub_proto_event_frame(r->name, name, r->lit,
                                                    r->lit_len, NULL);

        if (!f)
            return -ENOMEM;
        if (hub_app_history_on(app, name, len)) {
            /* Kept for recovery (hub/channel/history.h), and published
             * in the order of its id. */
            const struct hub_pub_req q = {
                app->index, name, len, f, r->skip.set ? &r->skip : NULL,
                false, NULL };

            rc = hub_history_publish(hub_history_of(l->hub), l, app, &q,
                                     hub_channel_is_cache(name, len));
        } else if (hub_channel_is_cache(name, len)) {
            rc = hub_publish_cache(l->hub, l, app->index, name, len, f,
                                   r->skip.set ? &r->skip : NULL);
        } else {
            rc = hub_publish(l->hub, l, app->index, name, len, f,
                             r->skip.set ? &r->skip : NULL);
        }
        /* After the fan-out: a subscriber joining in between gets the
         * older event first, then this one. */
        if (!rc && hub_channel_is_cache(name, len))
            hub_chanhooks_published(l, app, name, len, f);
        hub_frame_unref(f);
        if (rc)
            return rc;
    }
    return 0;
}

/* The answer, then the publication, of one checked event (rq: its info
 * answers, or NULL). */
static void events_answer(struct hub_loop *l, const struct hub_app *app,
                          struct hub_rest_event *r,
                          const struct hub_rest_query *rq,
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
        hub_rest_reply_error(out, 500, "out of memory");
        return;
    }
    hub_rest_reply_text(out, text);
}

/* The answer, then the publication, of a checked batch (rq: the info
 * answers of its events that asked, in order, or NULL). */
static void batch_answer(struct hub_loop *l, const struct hub_app *app,
                         struct hub_rest_event *reqs, size_t n, bool any_info,
                         const struct hub_rest_query *rq,
                         struct hub_rest_response *out)
{
    json_t *answer;
    char *text = NULL;
    bool failed = false;

    /* The answer before anything is published (see events_answer). */
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
        hub_rest_reply_error(out, 500, "out of memory");
    } else {
        hub_rest_reply_text(out, text);
    }
}

/* A wait's answers: the event or the batch it kept. */
static void events_finish(struct hub_rest_wait *w,
                          struct hub_rest_response *out)
{
    events_answer(w->l, w->app, &w->reqs[0], w->q, out);
}

static void batch_finish(struct hub_rest_wait *w, struct hub_rest_response *out)
{
    batch_answer(w->l, w->app, w->reqs, w->n_reqs, w->any_info, w->q, out);
}

static void events_release(struct hub_rest_wait *w)
{
    for (size_t i = 0; i < w->n_reqs; i++)
        event_fini(&w->reqs[i]);
    free(w->reqs);
}

static const struct hub_rest_wait_ops events_wait = {
    events_finish, events_release,
};
static const struct hub_rest_wait_ops batch_wait = {
    batch_finish, events_release,
};

void hub_rest_events_post(const struct hub_rest_req *req,
                          struct hub_rest_response *out)
{
    struct hub_loop *l = req->l;
    const struct hub_app *app = req->app;
    struct hub_rest_call *c = req->call;
    struct hub_rest_wait *w;
    struct hub_rest_event r;

    if (check_event(app, req->body, &r, out))
        return;
    if (r.info && hub_rest_cannot_wait(l, c, out)) {
        event_fini(&r);
        return;
    }
    if (!r.info || !hub_rest_can_wait(l, c)) {
        events_answer(l, app, &r, NULL, out);
        event_fini(&r);
        return;
    }
    w = hub_rest_wait_new(l, app, c, &events_wait, event_n_ch(&r));
    if (w)
        w->reqs = malloc(sizeof(r));
    if (!w || !w->reqs) {
        if (w)
            hub_rest_wait_free(w);
        event_fini(&r);
        hub_rest_reply_error(out, 500, "out of memory");
        return;
    }
    w->root = json_incref(req->body);
    w->reqs[0] = r;
    w->n_reqs = 1;
    event_queries(w, 0, &r);
    hub_rest_wait_start(w, c, out);
}

/* Hand a checked batch to a wait for its info= (taking the events), or
 * answer 500. */
static void batch_wait_start(const struct hub_rest_req *req,
                             struct hub_rest_event *reqs, size_t n, size_t nq,
                             struct hub_rest_response *out)
{
    struct hub_rest_wait *w = hub_rest_wait_new(req->l, req->app, req->call,
                                                &batch_wait, nq);

    if (!w) {
        for (size_t i = 0; i < n; i++)
            event_fini(&reqs[i]);
        free(reqs);
        hub_rest_reply_error(out, 500, "out of memory");
        return;
    }
    w->root = json_incref(req->body);
    w->reqs = reqs;
    w->n_reqs = n;
    w->any_info = true;
    for (size_t i = 0, at = 0; i < n; i++)
        if (reqs[i].info)
            at = event_queries(w, at, &reqs[i]);
    hub_rest_wait_start(w, req->call, out);
}

void hub_rest_events_post_batch(const struct hub_rest_req *req,
                                struct hub_rest_response *out)
{
    const struct hub_app *app = req->app;
    json_t *batch = json_object_get(req->body, "batch");
    struct hub_rest_event *reqs;
    size_t n, checked, nq = 0;
    bool any_info = false;

    if (!json_is_array(batch)) {
        hub_rest_reply_error(out, 400, "\"batch\" must be an array");
        return;
    }
    n = json_array_size(batch);
    if (n > app->max_batch_events) {
        hub_rest_reply_error(out, 400, "at most %u events per batch",
                             app->max_batch_events);
        return;
    }
    reqs = calloc(n ? n : 1, sizeof(*reqs));
    if (!reqs) {
        hub_rest_reply_error(out, 500, "out of memory");
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
    if (any_info && hub_rest_cannot_wait(req->l, req->call, out))
        goto out;
    if (!any_info || !hub_rest_can_wait(req->l, req->call)) {
        batch_answer(req->l, app, reqs, n, any_info, NULL, out);
        goto out;
    }
    batch_wait_start(req, reqs, n, nq, out);
    return;
out:
    for (size_t i = 0; i < checked; i++)
        event_fini(&reqs[i]);
    free(reqs);
}
