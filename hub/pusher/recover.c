/*
 * hub/pusher/recover.c - recovery's protocol on a Pusher session
 * (hub/pusher/recover.h): the state a lubdub:resume leaves (the client's
 * last id per origin for each channel, its earlier sockets, how long it was
 * away), and what a new subscription to a channel with history gets.
 */
#include "hub/pusher/recover.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "hub/app/app.h"
#include "hub/base/log.h"
#include "hub/channel/history.h"
#include "hub/loop/backplane.h"
#include "hub/loop/loop.h"
#include "hub/loop/publish.h"
#include "hub/loop/resume.h"
#include "hub/loop/session.h"
#include "hub/pusher/recover_cluster.h"
#include "hub/pusher/recover_msg.h"
#include "hub/wire/protocol.h"
#include "timer/clock.h"

/* What a session's lubdub:resume messages said, until its subscriptions
 * take it (the bounds: hub/pusher/recover.h). */
struct recover_state {
    json_t *channels;              /* name -> {origin: seq} or null (bad) */
    /* A resume named more channels than the bound: any channel it did not
     * keep may have been one, so a history channel's fresh start is told
     * resume_failed (too_large) rather than started silently. */
    bool overflow;
    struct hub_history_sockets socks;
    uint64_t away_ms;              /* UINT64_MAX: not said */
};

#define MAX_SOCKETS 4

static void state_free(void *p)
{
    struct recover_state *st = p;

    json_decref(st->channels);
    free(st);
}

/* Once no channel of the resume waits (and none overflowed), the state
 * goes: an idle resuming session holds only its table entry. */
static void forget_if_done(struct hub_session *s, struct recover_state *st)
{
    if (st && !json_object_size(st->channels) && !st->overflow)
        hub_resume_set_proto(s, NULL, NULL);
}

static uint32_t channels_cap(const struct hub_session *s)
{
    uint32_t cap = s->app->max_subscriptions ? s->app->max_subscriptions
                                             : s->loop->cfg->max_subscriptions;

    return cap ? cap : 100;
}

/* A channel's ids as the client sent them: {origin: seq}; NULL when bad. */
static bool ids_ok(const json_t *ids)
{
    const char *origin;
    json_t *v;

    if (!json_is_object(ids) || json_object_size(ids) > HUB_HISTORY_ORIGINS)
        return false;
    json_object_foreach((json_t *)ids, origin, v) {
        size_t olen = strlen(origin);

        if (!olen || olen > HUB_HISTORY_ORIGIN_MAX || !json_is_integer(v) ||
            json_integer_value(v) < 0)
            return false;
    }
    return true;
}

static void take_channels(struct hub_session *s, struct recover_state *st,
                          json_t *channels)
{
    uint32_t cap = channels_cap(s);
    const char *name;
    json_t *ids;

    json_object_foreach(channels, name, ids) {
        size_t len = strlen(name);

        if (!len || len > s->app->max_channel_name)
            continue;
        if (!json_object_get(st->channels, name) &&
            json_object_size(st->channels) >= cap) {
            st->overflow = true; /* past the bound: told, see above */
            continue;
        }
        /* A bad vector stays as null: that subscription is then told
         * resume_failed rather than silently started afresh. */
        json_object_set_new(st->channels, name,
                            ids_ok(ids) ? json_deep_copy(ids) : json_null());
    }
}

static void take_sockets(struct recover_state *st, const json_t *arr)
{
    size_t i;
    json_t *v;

    st->socks.n = 0;
    json_array_foreach(arr, i, v) {
        struct hub_skip sk;

        if (st->socks.n == MAX_SOCKETS)
            break;
        if (!json_is_string(v) || hub_skip_parse(&sk, json_string_value(v)))
            continue;
        st->socks.hi[st->socks.n] = sk.hi;
        st->socks.lo[st->socks.n] = sk.lo;
        st->socks.n++;
    }
}

void hub_recover_on_resume(struct hub_session *s, const struct hub_msg *m)
{
    struct hub_loop *l = s->loop;
    struct recover_state *st;
    json_t *data = m->data, *parsed = NULL, *v;

    if (json_is_string(data)) {
        parsed = json_loadb(json_string_value(data), json_string_length(data),
                            0, NULL);
        data = parsed;
    }
    if (!json_is_object(data) ||
        json_integer_value(json_object_get(data, "v")) != 1) {
        HUB_STAT_ADD(l->stats.bad_messages, 1);
        hub_session_send_error(s, -1,
                               "Invalid message: lubdub:resume needs data "
                               "{\"v\":1,...}",
                               false);
        json_decref(parsed);
        return;
    }
    if (hub_resume_enable(s)) {
        hub_session_close(s, 1011, "out of memory", HUB_CLOSE_ERROR, true);
        json_decref(parsed);
        return;
    }
    st = hub_resume_proto(s);
    v = json_object_get(data, "channels");
    if (!st && !json_object_size(v)) {
        /* Nothing to resume (a first connect): the session keeps only its
         * table entry, no state of this layer (docs/BENCHMARKS.md). */
        json_decref(parsed);
        return;
    }
    if (!st) {
        st = calloc(1, sizeof(*st));
        if (st && !(st->channels = json_object())) {
            free(st);
            st = NULL;
        }
        if (!st) {
            hub_session_close(s, 1011, "out of memory", HUB_CLOSE_ERROR, true);
            json_decref(parsed);
            return;
        }
        st->away_ms = UINT64_MAX;
        hub_resume_set_proto(s, st, state_free);
    }
    if (json_is_object(v = json_object_get(data, "channels")))
        take_channels(s, st, v);
    if (json_is_array(v = json_object_get(data, "sockets")))
        take_sockets(st, v);
    v = json_object_get(data, "away_ms");
    if (json_is_integer(v) && json_integer_value(v) >= 0)
        st->away_ms = (uint64_t)json_integer_value(v);
    json_decref(parsed);
    forget_if_done(s, st);
}

/* lubdub:pos for a fresh start on (app, name). */
static void send_pos(struct hub_session *s, const char *name, size_t len)
{
    struct hub_history_pos pos;

    (void)len;
    hub_history_start(hub_history_of(s->loop->hub), s->loop->hist_seen, &pos);
    hub__recover_send(s, "lubdub:pos",
                 json_pack("{s:s%, s:o}", "channel", name, len, "ids",
                           hub__recover_ids(&pos)));
}

/* The client's ids for a channel into pos: false when they are bad. */
static bool known_pos(const json_t *ids, struct hub_history_pos *pos)
{
    const char *origin;
    json_t *v;

    pos->n = 0;
    if (!json_is_object(ids))
        return false;
    json_object_foreach((json_t *)ids, origin, v) {
        if (pos->n == HUB_HISTORY_ORIGINS)
            return false;
        snprintf(pos->id[pos->n].origin, sizeof(pos->id[pos->n].origin),
                 "%s", origin);
        pos->id[pos->n].seq = (uint64_t)json_integer_value(v);
        pos->n++;
    }
    return true;
}

/*
 * Replay what the client missed of (app, name) behind ok: true when
 * served (the guard and its replay are set), false when the history does
 * not reach back (*reason says why; nothing was sent).
 */
static bool replay(struct hub_session *s, struct hub_sub *sub,
                   const char *name, size_t len, const json_t *ids,
                   const struct recover_state *st, struct hub_frame *ok,
                   const char **reason)
{
    const struct hub_app *app = s->app;
    struct hub_history_replay rp;
    struct hub_resume_floor floor[HUB_HISTORY_ORIGINS];
    struct hub_history_pos known;
    enum hub_history_gap g;
    struct hub_frame *done;

    if (!known_pos(ids, &known)) {
        *reason = "invalid";
        return false;
    }
    g = hub_history_resume(hub_history_of(s->loop->hub), app->index, name,
                           len, &known, &st->socks, st->away_ms,
                           hub_clock_now_ms(s->loop->clock),
                           app->history_ttl_ms, app->history_size, &rp);
    if (g) {
        *reason = hub_history_gap_name(g);
        return false;
    }
    for (unsigned i = 0; i < rp.upto.n; i++) {
        floor[i].origin = rp.upto.id[i].origin;
        floor[i].seq = rp.upto.id[i].seq;
    }
    done = hub__recover_message("lubdub:resumed",
                   json_pack("{s:s%, s:I}", "channel", name, len, "replayed",
                             (json_int_t)rp.n));
    hub_session_send(s, ok);
    HUB_STAT_ADD(s->loop->stats.resumes, 1);
    if (!done) {
        hub_history_replay_free(&rp);
        hub_session_close(s, 1011, "out of memory", HUB_CLOSE_ERROR, true);
        return true;
    }
    /* The references move to the guard; the array stays ours. */
    hub_resume_guard(s, sub, floor, rp.upto.n, rp.f, rp.n, done);
    free(rp.f);
    return true;
}

/* In a cluster: only the channel's stream knows what others took in
 * (hub/pusher/recover_cluster.h). Takes ids. */
static bool cluster_joined(struct hub_session *s, struct hub_sub *sub,
                           const char *name, size_t len, struct hub_frame *ok,
                           json_t *ids, const struct recover_state *st)
{
    struct hub_history_pos known;
    bool resumed = ids && known_pos(ids, &known);

    if (ids && !resumed)
        hub__recover_failed(s, name, len, "invalid");
    json_decref(ids);
    hub__recover_cluster_join(s, sub, name, len, ok, resumed ? &known : NULL,
                              st ? &st->socks : NULL,
                              st ? st->away_ms : UINT64_MAX);
    return resumed;
}

bool hub_recover_joined(struct hub_session *s, struct hub_sub *sub,
                        const char *name, size_t len, struct hub_frame *ok)
{
    struct recover_state *st;
    const char *reason = NULL;
    char key[256];
    json_t *ids;
    bool on, resumed = false;

    if (!s->resume) {
        hub_session_send(s, ok);
        return false;
    }
    on = hub_app_history_on(s->app, name, len);
    st = hub_resume_proto(s);
    ids = NULL;
    if (st && len < sizeof(key)) {
        memcpy(key, name, len);
        key[len] = '\0';
        ids = json_incref(json_object_get(st->channels, key));
        if (ids)
            json_object_del(st->channels, key);
    }
    if (json_is_null(ids) && !on) {
        /* "No position" (the helper's null) of a channel without history:
         * nothing was to be had. */
        json_decref(ids);
        ids = NULL;
    }
    if (ids && !on)
        reason = "no_history";
    else if (!ids && on && st && st->overflow)
        reason = "too_large";
    else if (on && hub_bus_remote(s->loop->hub)) {
        bool r = cluster_joined(s, sub, name, len, ok, ids, st);

        forget_if_done(s, st);
        return r;
    }
    else if (ids && replay(s, sub, name, len, ids, st, ok, &reason))
        resumed = true;
    json_decref(ids);
    forget_if_done(s, st);
    if (resumed)
        return true;
    if (reason)
        hub__recover_failed(s, name, len, reason);
    if (on)
        send_pos(s, name, len);
    hub_session_send(s, ok);
    return false;
}

void hub_recover_left(struct hub_session *s, struct hub_sub *sub)
{
    if (s->rguard)
        hub_resume_sub_gone(s, sub);
}
