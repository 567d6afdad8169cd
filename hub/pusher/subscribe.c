/*
 * hub/pusher/subscribe.c - which channels a Pusher session is in (docs/PROTOCOL.md
 * section 3): pusher:subscribe for public, private, encrypted and presence
 * channels, unsubscribe, the #server-to-user- channel of pusher:signin,
 * leaving everything at disconnect, and the presence member_added /
 * member_removed events.
 *
 * A subscription is a struct hub_sub on two lists: the loop-local channel's
 * members (delivery walks it) and the session's subs (this file walks it).
 * Presence identity is counted hub-wide by the directory; its seq travels
 * with each member event so a subscription only sees changes newer than
 * its own join.
 *
 * Pending subscriptions. A directory with join_async (a cluster one) may
 * answer a join later, on this loop. Until then the subscription is a
 * hub_sub on the session's list only (ch NULL, no events reach it; it
 * counts against max_subscriptions, a second subscribe to the channel is
 * ignored, client events on it are refused) with its struct
 * hub_sub_pending; the answer links it to the channel and sends
 * subscription_succeeded. A presence re-subscribe waits the same way,
 * its record chained on the live hub_sub. When the sub goes first
 * (unsubscribe, disconnect) its records are detached: the answer then
 * touches no session and leaves the directory if the join was counted.
 */
#include "hub/pusher/subscribe.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/app/auth.h"
#include "hub/loop/backplane.h"
#include "hub/channel/chanhooks.h"
#include "hub/channel/history.h"
#include "hub/loop/chanmap.h"
#include "hub/base/json.h"
#include "hub/base/log.h"
#include "hub/loop/loop.h"
#include "hub/wire/protocol.h"
#include "hub/loop/publish.h"
#include "hub/loop/session.h"
#include "hub/pusher/recover.h"

#define SUCCEEDED "pusher_internal:subscription_succeeded"

/* A frame of {"event":E,"channel":C,"data":"<text as a JSON string>"}. */
static struct hub_frame *string_event_frame(const char *event,
                                            const char *channel,
                                            const char *text)
{
    size_t len = strlen(text);
    size_t dlen = hub_proto_encode_string(NULL, 0, text, len);
    char *d = malloc(dlen + 1);
    struct hub_frame *f;

    if (!d)
        return NULL;
    hub_proto_encode_string(d, dlen + 1, text, len);
    f = hub_proto_event_frame(event, channel, d, dlen, NULL);
    free(d);
    return f;
}

struct hub_frame *hub_pusher_string_frame(const char *event,
                                          const char *channel,
                                          const char *text)
{
    return string_event_frame(event, channel, text);
}

int hub_pusher_publish(struct hub_session *s, const char *channel,
                       size_t len, struct hub_frame *f, uint64_t member_seq,
                       bool batch)
{
    struct hub_skip ex = { true, s->sid_hi, s->sid_lo, member_seq };
    const struct hub_pub_req r = { s->app->index, channel, len, f, &ex,
                                   batch, NULL };

    /* A client event on a channel with history is kept (member events
     * are not: presence state comes back with subscription_succeeded). */
    if (!member_seq && hub_app_history_on(s->app, channel, len))
        return hub_history_publish(hub_history_of(s->loop->hub), s->loop,
                                   s->app, &r, false);
    return hub_publish_req(s->loop->hub, s->loop, &r);
}

static void send_sub_error(struct hub_session *s, const char *channel,
                           const char *type, const char *error, int status)
{
    char buf[1024];
    size_t n = hub_proto_encode_subscription_error(buf, sizeof(buf), channel,
                                                   type, error, status);

    /* A refusal the client cannot be told of would leave it waiting:
     * out of memory for the frame closes with 1011 instead (the close
     * frame needs no allocation). */
    if (n < sizeof(buf) && hub_session_send_text(s, buf, n) == -ENOMEM &&
        s->state == HUB_SESSION_OPEN)
        hub_session_close(s, 1011, "out of memory", HUB_CLOSE_ERROR, true);
}

/* An asynchronous directory join on its way (see the file comment). */
struct hub_sub_pending {
    struct hub_dir_join_req req;   /* done: join_done() */
    struct hub_presence_join j;    /* presence; members_json owned */
    struct hub_sub *sub;           /* new: the pending sub; again: the live
                                    * one; NULL once it went (detached) */
    struct hub_sub_pending *next;  /* the sub's chain of records */
    bool again;                    /* a presence re-subscribe */
    enum hub_channel_kind kind;
    char *user_id;                 /* presence: owned until the sub takes it */
    char *user_info;               /* presence: owned */
    size_t len;
    char name[];                   /* the channel, owned (req.name) */
};

/* s's subscription to the channel, pending or not. */
static struct hub_sub *find_any(struct hub_session *s, const char *name,
                                size_t len)
{
    struct hub_list *pos;

    hub_list_for_each(pos, &s->subs) {
        struct hub_sub *sub = hub_container_of(pos, struct hub_sub,
                                               session_link);
        const char *n = sub->ch ? sub->ch->name : sub->pending->name;
        size_t nl = sub->ch ? sub->ch->name_len : sub->pending->len;

        if (nl == len && memcmp(n, name, len) == 0)
            return sub;
    }
    return NULL;
}

/* Confirmed subscriptions only: a pending one is not yet in the channel. */
struct hub_sub *hub_pusher_find_sub(struct hub_session *s, const char *name,
                                    size_t len)
{
    struct hub_sub *sub = find_any(s, name, len);

    return sub && sub->ch ? sub : NULL;
}

/*
 * Whether s already holds max_subscriptions channels (its sign-in user
 * channel not counted). O(cap): the walk stops at the cap, and
 * hub_pusher_find_sub() walked the same list just before.
 */
static bool over_sub_cap(const struct hub_session *s, uint32_t cap)
{
    const struct hub_list *pos;
    uint32_t n = 0;

    if (!cap)
        return false;
    hub_list_for_each(pos, &s->subs) {
        const struct hub_sub *sub = hub_container_of(pos, struct hub_sub,
                                                     session_link);

        /* Pending (ch NULL) ones count: they are never the user channel. */
        if ((!sub->ch || sub->ch->kind != HUB_CHANNEL_USER) && ++n >= cap)
            return true;
    }
    return false;
}

/* The app's max_subscriptions, else the hub-wide one; 0 = unlimited. */
static uint32_t sub_cap(const struct hub_session *s)
{
    return s->app->max_subscriptions ? s->app->max_subscriptions
                                     : s->loop->cfg->max_subscriptions;
}

/* The member_added/_removed frame, data {"user_id":U[,"user_info":I]};
 * NULL when out of memory (user_info was checked at the join: a parse
 * that fails now is jansson out of memory). */
static struct hub_frame *member_frame(const char *event, const char *channel,
                                      const char *user_id,
                                      const char *user_info)
{
    json_t *o = json_pack("{s:s}", "user_id", user_id);
    struct hub_frame *f = NULL;
    char *text;

    if (o && user_info &&
        json_object_set_new(o, "user_info",
                            json_loads(user_info, JSON_DECODE_ANY, NULL))) {
        json_decref(o);
        o = NULL;
    }
    text = hub_json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (text)
        f = string_event_frame(event, channel, text);
    free(text);
    return f;
}

/* Publish a member event (member_removed, at a leave, which cannot be
 * refused); seq: the directory seq of the change. Dropped when out of
 * memory. */
static void member_event(struct hub_session *s, const char *event,
                         const char *channel, size_t chlen,
                         const char *user_id, const char *user_info,
                         uint64_t seq)
{
    struct hub_frame *f = member_frame(event, channel, user_id, user_info);

    if (f) {
        hub_pusher_publish(s, channel, chlen, f, seq, false);
        hub_frame_unref(f);
    }
}

/* Canonical user id (string or number) and user_info text from
 * channel_data; -EINVAL or -E2BIG with a reason when unusable, -ENOMEM. */
static int parse_channel_data(const struct hub_app *app, const char *cd,
                              size_t cd_len, char **user_id, char **user_info,
                              const char **why)
{
    json_t *root = json_loadb(cd, cd_len, 0, NULL), *uid, *info;
    char num[32];
    const char *id;
    int rc = -EINVAL;

    *user_id = *user_info = NULL;
    if (!root && (root = json_loadb(cd, cd_len, JSON_ALLOW_NUL, NULL))) {
        /* Valid JSON but for a \u0000: said plainly. Ids and user_info
         * are C strings here and keys and fields in Redis; a NUL in them
         * is refused, not carried (docs/PROTOCOL.md). */
        *why = "channel_data must not contain \\u0000 (NUL)";
        goto out;
    }
    if (!root || !json_is_object(root)) {
        *why = "channel_data must be a JSON object";
        goto out;
    }
    uid = json_object_get(root, "user_id");
    if (json_is_string(uid)) {
        id = json_string_value(uid);
    } else if (json_is_integer(uid)) {
        snprintf(num, sizeof(num), "%" JSON_INTEGER_FORMAT,
                 json_integer_value(uid));
        id = num;
    } else {
        *why = "channel_data.user_id must be a string or an integer";
        goto out;
    }
    if (!*id || strlen(id) > app->max_user_id_len) {
        *why = "channel_data.user_id is empty or too long";
        goto out;
    }
    info = json_object_get(root, "user_info");
    if (info) {
        *user_info = hub_json_dumps(info, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!*user_info) {
            rc = -ENOMEM;
            goto out;
        }
        if (strlen(*user_info) > app->max_user_info_bytes) {
            free(*user_info);
            *user_info = NULL;
            *why = "channel_data.user_info is too large";
            rc = -E2BIG;
            goto out;
        }
    }
    *user_id = strdup(id);
    rc = *user_id ? 0 : -ENOMEM;
out:
    json_decref(root);
    return rc;
}

/* The signed-in user as a presence identity (no channel_data): its id and
 * the user_info of its signin, held to the same limits. */
static int signed_in_identity(struct hub_session *s, char **user_id,
                              char **user_info, const char **why)
{
    const char *info = hub_session_user_info(s);

    *user_id = *user_info = NULL;
    if (info && strlen(info) > s->app->max_user_info_bytes) {
        *why = "the signed-in user's user_info is too large";
        return -E2BIG;
    }
    *user_id = strdup(s->user_id);
    *user_info = info ? strdup(info) : NULL;
    if (!*user_id || (info && !*user_info)) {
        free(*user_id);
        free(*user_info);
        *user_id = *user_info = NULL;
        return -ENOMEM;
    }
    return 0;
}

/* One pusher:subscribe on its way through the steps below. */
struct sub_req {
    const char *name;
    size_t len;
    enum hub_channel_kind kind;
    struct hub_sub *sub;       /* s's existing subscription, or NULL */
    char *user_id;             /* presence: owned until sub_link() takes it */
    char *user_info;           /* presence: owned */
};

/*
 * The refusals that need no signature: a bad name (4009) and one channel
 * over max_subscriptions (4100; resubscribing and the user channel are
 * never refused). Fills r->kind and r->sub. true = answered.
 */
static bool sub_refuse_name(struct hub_session *s, struct sub_req *r)
{
    struct hub_loop *l = s->loop;
    char why[128];

    if (hub_channel_name_check(r->name, r->len, s->app->max_channel_name)) {
        send_sub_error(s, r->name, "InvalidChannel",
                       "Invalid channel name (allowed: A-Z a-z 0-9 _ - = @ , . ; "
                       "and at most the configured length)", 4009);
        return true;
    }
    r->kind = hub_channel_classify(r->name, r->len);
    r->sub = find_any(s, r->name, r->len);
    if (r->sub || r->kind == HUB_CHANNEL_USER ||
        !over_sub_cap(s, sub_cap(s)))
        return false;
    HUB_STAT_ADD(l->stats.subscriptions_refused, 1);
    snprintf(why, sizeof(why),
             "Too many subscriptions on this connection (the limit is "
             "%u); unsubscribe from one first",
             sub_cap(s));
    send_sub_error(s, r->name, "LimitReached", why, 4100);
    return true;
}

/* #server-to-user-<id> is joined at sign-in; pusher-js then subscribes to
 * it to confirm, which succeeds only for the signed-in session. */
static void sub_user_channel(struct hub_session *s, const struct sub_req *r)
{
    struct hub_frame *f;

    if (r->sub && s->user_id) {
        f = string_event_frame(SUCCEEDED, r->name, "{}");
        if (!f) {
            send_sub_error(s, r->name, "ServerError", "Out of memory", 500);
            return;
        }
        hub_session_send(s, f);
        hub_frame_unref(f);
    } else {
        send_sub_error(s, r->name, "AuthError",
                       "#server-to-user- channels need pusher:signin", 403);
    }
}

/* Private, encrypted and presence channels: check the signature (presence:
 * over channel_data too). true = refused and answered. */
static bool sub_authorize(struct hub_session *s, const struct hub_msg *m,
                          const struct sub_req *r)
{
    const char *cd = r->kind == HUB_CHANNEL_PRESENCE ? m->channel_data : NULL;
    char expect[512];
    int rc;

    /* Without channel_data a signed-in session subscribes as its user
     * (sub_presence_identity); the signature is then over
     * "<socket_id>:<channel>", as for a private channel. */
    if (r->kind == HUB_CHANNEL_PRESENCE && !cd && !s->user_id) {
        send_sub_error(s, r->name, "AuthError",
                       "Presence channels need channel_data (or "
                       "pusher:signin first)", 401);
        return true;
    }
    rc = hub_auth_check_channel(s->app, HUB_SID(s), r->name, cd,
                                cd ? m->channel_data_len : 0, m->auth, expect,
                                sizeof(expect));
    if (!rc)
        return false;
    HUB_LOG_EVENT(HUB_LOG_INFO, s->loop->id,
                  HUB_LOG_F(.event = "subscribe_refused",
                            .socket_id = HUB_SID(s), .app = s->app->id,
                            .channel = r->name, .status = 401,
                            .reason = rc == -EACCES ? "bad_signature"
                                                    : "bad_auth"),
                  "socket %s: subscribe %s refused: bad signature "
                  "(expected HMAC of \"%s\")",
                  HUB_SID(s), r->name, expect);
    send_sub_error(s, r->name, "AuthError",
                   rc == -EACCES ? "Invalid signature"
                                 : "Missing or malformed auth",
                   401);
    return true;
}

/* Presence: the user id and info out of channel_data into r. true =
 * refused (400, or 4301 for user_info over the limit) and answered. */
static bool sub_presence_identity(struct hub_session *s,
                                  const struct hub_msg *m, struct sub_req *r)
{
    const char *why = "bad channel_data";
    int rc;

    if (!m->channel_data && s->user_id)
        rc = signed_in_identity(s, &r->user_id, &r->user_info, &why);
    else
        rc = parse_channel_data(s->app, m->channel_data, m->channel_data_len,
                                &r->user_id, &r->user_info, &why);
    if (!rc)
        return false;
    if (rc == -ENOMEM)
        send_sub_error(s, r->name, "ServerError", "Out of memory", 500);
    else
        send_sub_error(s, r->name,
                       rc == -E2BIG ? "LimitReached" : "AuthError", why,
                       rc == -E2BIG ? 4301 : 400);
    return true;
}

static void join_done(struct hub_dir_join_req *req, int rc);

/* A pending record for r (owned name copy; presence: takes r's user_id
 * and user_info). NULL when out of memory. */
static struct hub_sub_pending *pending_new(struct hub_session *s,
                                           struct sub_req *r, bool again)
{
    struct hub_sub_pending *p = calloc(1, sizeof(*p) + r->len + 1);

    if (!p)
        return NULL;
    memcpy(p->name, r->name, r->len);
    p->len = r->len;
    p->kind = r->kind;
    p->again = again;
    p->req.app = s->app->index;
    p->req.name = p->name;
    p->req.len = r->len;
    p->req.loop = s->loop;
    p->req.done = join_done;
    if (r->kind == HUB_CHANNEL_PRESENCE) {
        p->user_id = r->user_id;
        p->user_info = r->user_info;
        r->user_id = r->user_info = NULL;
        p->j.user_id = p->user_id;
        p->j.user_info = p->user_info;
        /* A re-subscribe is no new member: no limit, as in the sync path. */
        p->j.max_members = again ? 0 : s->app->max_presence_members;
        p->req.j = &p->j;
    }
    return p;
}

static void pending_free(struct hub_sub_pending *p)
{
    free(p->j.members_json);
    free(p->user_id);
    free(p->user_info);
    free(p);
}

/*
 * The directory's answer to a presence re-subscribe (rc as join's): the
 * member list goes to s (NULL: the session went meanwhile), then the join
 * is undone so that the counts end where they were.
 */
static void again_answer(struct hub_loop *l, struct hub_session *s,
                         unsigned app, const char *name, size_t len,
                         const char *user_id, struct hub_presence_join *j,
                         int rc)
{
    struct hub_frame *f = NULL;
    bool last;

    if (rc) {
        if (s)
            send_sub_error(s, name, "ServerError", "Out of memory", 500);
        return;
    }
    if (s && j->members_json)
        f = string_event_frame(SUCCEEDED, name, j->members_json);
    hub_dir_leave(l->hub, app, name, len, user_id, &last, NULL);
    free(j->members_json);
    j->members_json = NULL;
    if (!s)
        return;
    if (!f) {
        send_sub_error(s, name, "ServerError", "Out of memory", 500);
        return;
    }
    hub_session_send(s, f);
    hub_frame_unref(f);
}

/*
 * Presence, already subscribed: the same user gets the member list again
 * (a join and leave of its own, so the counts end where they were);
 * another user is refused with 409. With an asynchronous directory the
 * list comes when the join is answered (the record waits on r->sub).
 */
static void sub_presence_again(struct hub_session *s, struct sub_req *r)
{
    struct hub_loop *l = s->loop;
    struct hub_sub_pending *p;
    int rc;

    if (strcmp(r->sub->user_id, r->user_id) != 0) {
        send_sub_error(s, r->name, "AuthError",
                       "Already subscribed as another user", 409);
        return;
    }
    if (!l->hub->bp->dir->join_async) {
        struct hub_presence_join again = { 0 };

        again.user_id = r->user_id;
        again.user_info = r->user_info;
        rc = hub_dir_join(l->hub, s->app->index, r->name, r->len, &again);
        again_answer(l, s, s->app->index, r->name, r->len, r->user_id,
                     &again, rc);
        return;
    }
    p = pending_new(s, r, true);
    if (!p) {
        send_sub_error(s, r->name, "ServerError", "Out of memory", 500);
        return;
    }
    rc = hub_dir_join_async(l->hub, &p->req);
    if (rc == HUB_DIR_PENDING) {
        p->sub = r->sub;
        p->next = r->sub->pending;
        r->sub->pending = p;
        return;
    }
    again_answer(l, s, p->req.app, p->name, p->len, p->user_id, &p->j, rc);
    pending_free(p);
}

/*
 * A new subscription once the directory answered (rc as join's): both
 * list links, then the confirmation and, for a presence user's first
 * session, member_added (unless the directory delivers member events
 * itself: join->dir_events). sub is on no list; ch is the local channel,
 * or NULL to get it now (after the join: out of memory undoes it). Takes
 * sub, and *user_id on success. Out of memory: 500; directory refusal
 * (full presence channel or no memory): 4100. Both frames are made, and
 * member_added published, before the subscription is linked: out of
 * memory there undoes the join and answers 500, so a subscription is
 * never left without its confirmation or its announcement.
 */
static void sub_finish(struct hub_session *s, struct hub_sub *sub,
                       struct hub_lchan *ch, enum hub_channel_kind kind,
                       const char *name, size_t len, char **user_id,
                       const char *user_info, struct hub_presence_join *join,
                       int rc)
{
    const struct hub_app *app = s->app;
    struct hub_loop *l = s->loop;
    bool presence = kind == HUB_CHANNEL_PRESENCE;
    struct hub_frame *ok = NULL, *added;
    bool resumed;

    if (rc) {
        free(sub);
        if (ch)
            hub_chanmap_put(l->chans, ch);
        send_sub_error(s, name, "LimitReached",
                       rc == -ENOSPC ? "Presence channel is full"
                                     : "Out of memory",
                       4100);
        return;
    }
    if (!ch)
        ch = hub_chanmap_get(l->chans, app->index, name, len);
    if (ch && (!presence || join->members_json))
        ok = string_event_frame(SUCCEEDED, name,
                                presence ? join->members_json : "{}");
    free(join->members_json);
    join->members_json = NULL;
    if (ok && presence && join->first && !join->dir_events) {
        added = member_frame("pusher_internal:member_added", name, *user_id,
                             user_info);
        /* hub_publish is all loops or none. */
        if (!added ||
            hub_pusher_publish(s, name, len, added, join->seq, false)) {
            hub_frame_unref(ok);
            ok = NULL;
        }
        if (added)
            hub_frame_unref(added);
    }
    if (!ok) {
        bool last;

        hub_dir_leave(l->hub, app->index, name, len,
                      presence ? *user_id : NULL, &last, NULL);
        free(sub);
        if (ch)
            hub_chanmap_put(l->chans, ch);
        send_sub_error(s, name, "ServerError", "Out of memory", 500);
        return;
    }
    sub->s = s;
    sub->ch = ch;
    sub->user_id = *user_id;
    *user_id = NULL;
    sub->joined_seq = join->seq;
    sub->pending = NULL;
    hub_list_link_tail(&ch->members, &sub->chan_link);
    hub_list_link_tail(&s->subs, &sub->session_link);
    ch->n_members++;
    HUB_STAT_ADD(l->stats.subscriptions, 1);
    resumed = hub_recover_joined(s, sub, ch->name, ch->name_len, ok);
    hub_frame_unref(ok);
    hub_chanhooks_joined(s, ch->name, ch->name_len, kind, resumed);
    /* Authorized connections: a private or presence channel counts. */
    if (kind != HUB_CHANNEL_PUBLIC)
        hub_session_authorized(s);
}

/* A member event with no session to exclude (an abandoned join). */
static void publish_member(struct hub_loop *l, unsigned app, const char *name,
                           size_t len, const char *event, const char *uid,
                           const char *info, uint64_t seq)
{
    struct hub_frame *f = member_frame(event, name, uid, info);
    struct hub_skip ex = { false, 0, 0, seq };

    if (f) {
        hub_publish(l->hub, l, app, name, len, f, &ex);
        hub_frame_unref(f);
    }
}

/*
 * The answer to a subscription that went while it was pending, with rc 0:
 * the directory counted it, so it is left, with the member events a
 * subscribe and an unsubscribe would have made (only those the hub
 * publishes: none when the directory delivers them itself), so that
 * another connection of the user that joined meanwhile is announced.
 */
static void abandon(struct hub_sub_pending *p)
{
    struct hub_loop *l = p->req.loop;
    bool presence = p->kind == HUB_CHANNEL_PRESENCE, last = false;
    uint64_t seq = 0;

    if (presence && p->j.first && !p->j.dir_events)
        publish_member(l, p->req.app, p->name, p->len,
                       "pusher_internal:member_added", p->user_id,
                       p->user_info, p->j.seq);
    hub_dir_leave(l->hub, p->req.app, p->name, p->len,
                  presence ? p->user_id : NULL, &last, &seq);
    if (last && presence)
        publish_member(l, p->req.app, p->name, p->len,
                       "pusher_internal:member_removed", p->user_id, NULL,
                       seq);
}

/* done of join_async, on the loop's thread. */
static void join_done(struct hub_dir_join_req *req, int rc)
{
    struct hub_sub_pending *p =
        hub_container_of(req, struct hub_sub_pending, req);
    struct hub_sub *sub = p->sub;

    if (p->again) {
        struct hub_sub_pending **pp;

        if (sub) {
            for (pp = &sub->pending; *pp != p; pp = &(*pp)->next)
                assert(*pp);
            *pp = p->next;
        }
        again_answer(req->loop, sub ? sub->s : NULL, req->app, p->name,
                     p->len, p->user_id, &p->j, rc);
    } else if (sub) {
        struct hub_session *s = sub->s;

        assert(!sub->ch && sub->pending == p && !p->next);
        hub_list_unlink(&sub->session_link);
        sub->pending = NULL;
        sub_finish(s, sub, NULL, p->kind, p->name, p->len, &p->user_id,
                   p->user_info, &p->j, rc);
    } else if (!rc) {
        abandon(p);
    }
    pending_free(p);
}

/* sub_link() with a directory that has join_async. */
static void sub_link_async(struct hub_session *s, struct sub_req *r)
{
    struct hub_loop *l = s->loop;
    struct hub_sub *sub = calloc(1, sizeof(*sub));
    struct hub_sub_pending *p = sub ? pending_new(s, r, false) : NULL;
    int rc;

    if (!p) {
        free(sub);
        send_sub_error(s, r->name, "ServerError", "Out of memory", 500);
        return;
    }
    rc = hub_dir_join_async(l->hub, &p->req);
    if (rc == HUB_DIR_PENDING) {
        /* On the session's list only: found, counted against the cap,
         * never delivered to (see the file comment). */
        sub->s = s;
        sub->pending = p;
        p->sub = sub;
        hub_list_link_tail(&s->subs, &sub->session_link);
        return;
    }
    sub_finish(s, sub, NULL, p->kind, p->name, p->len, &p->user_id,
               p->user_info, &p->j, rc);
    pending_free(p);
}

/*
 * A new subscription: the local channel, the directory join (presence:
 * with the identity and the member limit), then sub_finish(). Takes
 * r->user_id on success.
 */
static void sub_link(struct hub_session *s, struct sub_req *r)
{
    const struct hub_app *app = s->app;
    struct hub_loop *l = s->loop;
    bool presence = r->kind == HUB_CHANNEL_PRESENCE;
    struct hub_presence_join join = { 0 };
    struct hub_lchan *ch;
    struct hub_sub *sub;
    int rc;

    assert(!r->sub && r->kind != HUB_CHANNEL_USER);
    assert(!presence || r->user_id);
    if (l->hub->bp->dir->join_async) {
        sub_link_async(s, r);
        return;
    }
    ch = hub_chanmap_get(l->chans, app->index, r->name, r->len);
    sub = calloc(1, sizeof(*sub));
    if (!ch || !sub) {
        free(sub);
        if (ch)
            hub_chanmap_put(l->chans, ch);
        send_sub_error(s, r->name, "ServerError", "Out of memory", 500);
        return;
    }
    if (presence) {
        join.user_id = r->user_id;
        join.user_info = r->user_info;
        join.max_members = app->max_presence_members;
    }
    rc = hub_dir_join(l->hub, app->index, r->name, r->len,
                      presence ? &join : NULL);
    sub_finish(s, sub, ch, r->kind, r->name, r->len, &r->user_id,
               r->user_info, &join, rc);
}

void hub_pusher_subscribe(struct hub_session *s, const struct hub_msg *m)
{
    struct sub_req r = { .name = m->channel, .len = m->channel_len };

    if (sub_refuse_name(s, &r))
        goto out;
    /* Pending: the directory's first answer will confirm or refuse it. */
    if (r.sub && !r.sub->ch)
        goto out;
    if (r.kind == HUB_CHANNEL_USER) {
        sub_user_channel(s, &r);
        goto out;
    }
    if (r.kind != HUB_CHANNEL_PUBLIC && sub_authorize(s, m, &r))
        goto out;
    if (r.kind == HUB_CHANNEL_PRESENCE) {
        if (sub_presence_identity(s, m, &r))
            goto out;
        if (r.sub) {
            sub_presence_again(s, &r);
            goto out;
        }
    } else if (r.sub) {
        /* Idempotent: confirm again, change nothing. */
        struct hub_frame *f = string_event_frame(SUCCEEDED, r.name, "{}");

        if (f) {
            hub_session_send(s, f);
            hub_frame_unref(f);
        } else {
            send_sub_error(s, r.name, "ServerError", "Out of memory", 500);
        }
        goto out;
    }
    sub_link(s, &r);
out:
    free(r.user_id);
    free(r.user_info);
}

/*
 * Leave one subscription. Its pending directory answers are detached
 * first (join_done then touches neither it nor s); a pending one is only
 * unlinked: its answer leaves the directory. A directory that delivers
 * member events itself (j->dir_events at the join) returns last = false,
 * so nothing is published here for it.
 */
static void leave(struct hub_session *s, struct hub_sub *sub)
{
    struct hub_loop *l = s->loop;
    struct hub_lchan *ch = sub->ch;
    struct hub_sub_pending *p, *next;
    bool last = false;
    uint64_t seq;

    for (p = sub->pending; p; p = next) {
        next = p->next;
        p->sub = NULL;
        p->next = NULL;
    }
    sub->pending = NULL;
    if (!ch) {
        hub_list_unlink(&sub->session_link);
        free(sub);
        return;
    }
    assert(sub->s == s && ch->n_members > 0);
    hub_recover_left(s, sub);
    hub_list_unlink(&sub->chan_link);
    hub_list_unlink(&sub->session_link);
    ch->n_members--;
    HUB_STAT_ADD(l->stats.subscriptions, -1);
    hub_dir_leave(l->hub, ch->app, ch->name, ch->name_len, sub->user_id,
                  &last, &seq);
    /* ch outlives the event: put() frees it only afterwards. */
    if (last && sub->user_id)
        member_event(s, "pusher_internal:member_removed", ch->name,
                     ch->name_len, sub->user_id, NULL, seq);
    hub_chanhooks_left(l, s->app, ch->name, ch->name_len, ch->kind);
    hub_chanmap_put(l->chans, ch);
    free(sub->user_id);
    free(sub);
}

void hub_pusher_unsubscribe(struct hub_session *s, const char *name,
                            size_t len)
{
    struct hub_sub *sub = find_any(s, name, len);   /* pending too */

    if (sub)
        leave(s, sub);
}

void hub_pusher_leave_all(struct hub_session *s)
{
    while (!hub_list_is_empty(&s->subs))
        leave(s, hub_container_of(s->subs.next, struct hub_sub,
                                  session_link));
}

int hub_pusher_join_user_channel(struct hub_session *s, const char *id)
{
    struct hub_loop *l = s->loop;
    struct hub_lchan *ch;
    struct hub_sub *sub;
    size_t n = sizeof("#server-to-user-") - 1 + strlen(id);
    char *name = malloc(n + 1);

    if (!name)
        return -ENOMEM;
    snprintf(name, n + 1, "#server-to-user-%s", id);
    ch = hub_chanmap_get(l->chans, s->app->index, name, n);
    sub = calloc(1, sizeof(*sub));
    /* The directory does not count '#' channels; a backplane hears of
     * it (a cluster subscribes the node to the user's channel). */
    if (!ch || !sub ||
        hub_dir_join(l->hub, s->app->index, name, n, NULL)) {
        free(name);
        free(sub);
        if (ch)
            hub_chanmap_put(l->chans, ch);
        return -ENOMEM;
    }
    free(name);
    sub->s = s;
    sub->ch = ch;
    hub_list_link_tail(&ch->members, &sub->chan_link);
    hub_list_link_tail(&s->subs, &sub->session_link);
    ch->n_members++;
    HUB_STAT_ADD(l->stats.subscriptions, 1);
    return 0;
}
