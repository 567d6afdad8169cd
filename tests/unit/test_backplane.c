/*
 * tests/unit/test_backplane.c - the hub side of an asynchronous directory
 * (hub/loop/backplane.h join_async, query_async): a fake directory that wraps
 * the in-process one and answers when the test says so (the test thread
 * plays the loop, as done would run there). Pending subscriptions get no
 * events and no confirmation until done; unsubscribe and disconnect while
 * pending leave the counted join once, never touching the freed session
 * (the sessions are heap storage, freed at once, for ASan); a second
 * subscribe while pending is ignored; dir_events stops the hub's own
 * member events; REST reads wait and answer, or are dropped once
 * cancelled.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fake_hub.h"
#include "hub/rest/rest.h"
#include "hub/pusher/subscribe.h"
#include "hub/channel/subcount.h"

#define MAXQ 16

struct fdir {
    struct hub_directory *d;
    bool dir_events;               /* joins answer with dir_events */
    struct hub_dir_join_req *jq[MAXQ];
    unsigned n_jq;
    struct hub_dir_query *qq[MAXQ];
    unsigned n_qq;
    unsigned joins, leaves, member_added, member_removed, publishes;
    unsigned notices;              /* count_changed calls */
};

static int f_join(void *impl, unsigned app, const char *name, size_t len,
                  struct hub_presence_join *j)
{
    struct fdir *f = impl;

    f->joins++;
    return hub_directory_join(f->d, app, name, len, j);
}

static void f_leave(void *impl, unsigned app, const char *name, size_t len,
                    const char *uid, bool *last, uint64_t *seq)
{
    struct fdir *f = impl;

    f->leaves++;
    hub_directory_leave_seq(f->d, app, name, len, uid, last, seq);
    /* A directory that delivers member events itself says no edge. */
    if (f->dir_events && last)
        *last = false;
}

static void f_info(void *impl, unsigned app, const char *name, size_t len,
                   struct hub_channel_info *out)
{
    hub_directory_info(((struct fdir *)impl)->d, app, name, len, out);
}

static json_t *f_list(void *impl, unsigned app, const char *prefix,
                      bool user_count)
{
    return hub_directory_list(((struct fdir *)impl)->d, app, prefix,
                              user_count);
}

static json_t *f_users(void *impl, unsigned app, const char *name, size_t len)
{
    return hub_directory_users(((struct fdir *)impl)->d, app, name, len);
}

static void f_destroy(void *impl)
{
    hub_directory_destroy(((struct fdir *)impl)->d);
}

static int f_join_async(void *impl, struct hub_dir_join_req *req)
{
    struct fdir *f = impl;

    /* '#' joins never come here (they stay on join). */
    assert_true(req->len && req->name[0] != '#');
    assert_true(f->n_jq < MAXQ);
    f->jq[f->n_jq++] = req;
    return HUB_DIR_PENDING;
}

static int f_query_async(void *impl, struct hub_dir_query *q)
{
    struct fdir *f = impl;

    assert_true(f->n_qq < MAXQ);
    f->qq[f->n_qq++] = q;
    return HUB_DIR_PENDING;
}

static const struct hub_directory_ops fdir_ops = {
    .join = f_join,
    .leave = f_leave,
    .info = f_info,
    .list = f_list,
    .users = f_users,
    .destroy = f_destroy,
    .join_async = f_join_async,
    .query_async = f_query_async,
};

static int f_publish(void *impl, struct hub *h, struct hub_loop *from,
                     const struct hub_pub_req *r)
{
    struct fdir *f = impl;
    const char *text = (const char *)r->f->bytes + HUB_FRAME_HEADER_MAX;
    size_t n = r->f->payload_len;

    f->publishes++;
    if (memmem(text, n, "member_added", 12))
        f->member_added++;
    if (memmem(text, n, "member_removed", 14))
        f->member_removed++;
    return hub_bus_local_ops.publish(NULL, h, from, r);
}

static int f_terminate(void *impl, struct hub *h, struct hub_loop *from,
                       unsigned app, const char *uid)
{
    (void)impl;
    return hub_bus_local_ops.terminate_user(NULL, h, from, app, uid);
}

static void f_count_changed(void *impl, struct hub *h, unsigned app,
                            const char *name, size_t len)
{
    (void)h;
    (void)app;
    (void)name;
    (void)len;
    ((struct fdir *)impl)->notices++;
}

static const struct hub_bus_ops fbus_ops = {
    .publish = f_publish,
    .terminate_user = f_terminate,
    .count_changed = f_count_changed,
};

/* The oldest pending join answered: counted in the wrapped directory
 * (rc 0) or refused with rc, then done, as the loop's inbox would run it. */
static void answer_join(struct fdir *f, int rc)
{
    struct hub_dir_join_req *req;

    assert_true(f->n_jq > 0);
    req = f->jq[0];
    memmove(f->jq, f->jq + 1, --f->n_jq * sizeof(f->jq[0]));
    if (!rc) {
        rc = hub_directory_join(f->d, req->app, req->name, req->len, req->j);
        if (!rc && req->j && f->dir_events)
            req->j->dir_events = true;
    }
    req->done(req, rc);
}

static void answer_query(struct fdir *f, int rc)
{
    struct hub_dir_query *q;

    assert_true(f->n_qq > 0);
    q = f->qq[0];
    memmove(f->qq, f->qq + 1, --f->n_qq * sizeof(f->qq[0]));
    if (!rc) {
        if (q->kind == HUB_DIR_Q_INFO)
            hub_directory_info(f->d, q->app, q->name, q->len, &q->info);
        else if (q->kind == HUB_DIR_Q_LIST)
            q->json = hub_directory_list(f->d, q->app, q->prefix,
                                         q->user_count);
        else
            q->json = hub_directory_users(f->d, q->app, q->name, q->len);
    }
    q->done(q, rc);
}

struct env {
    struct fake_hub fh;
    struct fdir f;
};

static void env_start_with(struct env *e, uint32_t max_subs, bool counting)
{
    struct hub_backplane bp = { &fdir_ops, &e->f, &fbus_ops, &e->f, NULL };

    memset(&e->f, 0, sizeof(e->f));
    e->f.d = hub_directory_create();
    assert_non_null(e->f.d);
    fake_hub_init(&e->fh, 1);
    e->fh.cfg.max_subscriptions = max_subs;
    if (counting) {
        e->fh.cfg.subscription_count_interval_ms = 1000;
        e->fh.apps[0].subscription_count = true;
    }
    e->fh.hub = hub_create_with(&e->fh.cfg, &e->fh.clock, &bp);
    assert_non_null(e->fh.hub);
    assert_int_equal(fake_hub_loops_start(&e->fh), 0);
}

static void env_stop(struct env *e)
{
    assert_int_equal(e->f.n_jq, 0);
    assert_int_equal(e->f.n_qq, 0);
    fake_hub_stop(&e->fh);
}

/* The fixture of the tests on a hub (cmocka's setup and teardown): an env
 * started in *state, no join or read left waiting at the end. */
static int env_setup(void **state, uint32_t max_subs, bool counting)
{
    struct env *e = calloc(1, sizeof(*e));

    if (!e)
        return -1;
    env_start_with(e, max_subs, counting);
    *state = e;
    return 0;
}

static int setup(void **state)
{
    return env_setup(state, 0, false);
}

static int setup_counting(void **state)  /* subscription_count on */
{
    return env_setup(state, 0, true);
}

static int setup_two_subs(void **state)  /* max_subscriptions 2 */
{
    return env_setup(state, 2, false);
}

static int teardown(void **state)
{
    struct env *e = *state;

    env_stop(e);
    free(e);
    return 0;
}

/* A session in heap storage, so that a use after free shows under ASan. */
static struct fake_session *open_heap(struct env *e)
{
    struct fake_session *fs = malloc(sizeof(*fs));

    assert_non_null(fs);
    assert_int_equal(fake_session_open(&e->fh, fs, 0, &e->fh.apps[0]), 0);
    fake_flush(&fs->s);
    return fs;
}

static void close_heap(struct fake_session *fs)
{
    hub_session_fini(&fs->s, HUB_CLOSE_PEER);
    memset(fs, 0x5a, sizeof(*fs));
    free(fs);
}

static struct hub_channel_info info_of(struct env *e, const char *name)
{
    struct hub_channel_info ci;

    hub_directory_info(e->f.d, 0, name, strlen(name), &ci);
    return ci;
}

static void publish_to(struct env *e, const char *name)
{
    struct hub_frame *f =
        hub_proto_event_frame("ev", name, "\"x\"", 3, NULL);

    assert_non_null(f);
    hub_publish(e->fh.hub, e->fh.loops[0], 0, name, strlen(name), f, NULL);
    hub_frame_unref(f);
}

static const char *presence_data(const char *uid)
{
    static char buf[128];

    snprintf(buf, sizeof(buf), "{\"user_id\":\"%s\",\"user_info\":{}}", uid);
    return buf;
}

/* fs subscribes to name (data: its presence channel_data, or NULL) and
 * the directory accepts the join. */
static void join_now(struct env *e, struct fake_session *fs, const char *name,
                     const char *data)
{
    fake_subscribe(&e->fh, &fs->s, name, data);
    answer_join(&e->f, 0);
}

/* A heap session already in name, what it was sent so far dropped. */
static struct fake_session *open_joined(struct env *e, const char *name,
                                        const char *data)
{
    struct fake_session *fs = open_heap(e);

    join_now(e, fs, name, data);
    fake_flush(&fs->s);
    return fs;
}

/* a closes while its n joins wait; then each is answered rc. Returns how
 * many leaves the late answers made (a counted join is left at once). */
static unsigned close_while_pending(struct env *e, struct fake_session *a,
                                    unsigned n, int rc)
{
    unsigned before;

    assert_int_equal(e->f.n_jq, n);
    close_heap(a);
    before = e->f.leaves;
    while (n--)
        answer_join(&e->f, rc);
    return e->f.leaves - before;
}

/* The pending INFO read answered: n subscribers cluster-wide. */
static void answer_count(struct fdir *f, uint32_t n)
{
    struct hub_dir_query *q = f->qq[0];

    f->n_qq = 0;
    q->info.subscription_count = n;
    q->done(q, 0);
}

/* Another node's notice that name changed, then a whole interval on. */
static void remote_notice(struct env *e, const char *name)
{
    hub_subcount_remote(e->fh.hub, 0, name, strlen(name));
    fake_hub_drain(&e->fh);
    fake_hub_advance(&e->fh, 2001);
    fake_hub_drain(&e->fh);
}

/*
 * subscription_count with a backplane that reaches other processes: a
 * local change is told to the others (count_changed) when the channel is
 * due and the count sent is the directory's answer to an INFO read (here
 * 7, as if other nodes held 6 more); another node's notice
 * (hub_subcount_remote) reads again but is not told back; a read
 * cancelled at shutdown is only freed.
 */
static void test_backplane_subcount_reads_cluster_count(void **state)
{
    struct env *e = *state;
    struct fake_session *a;

    a = open_joined(e, "room", NULL);
    fake_hub_advance(&e->fh, 1001);
    fake_hub_drain(&e->fh);
    assert_int_equal(e->f.notices, 1);
    assert_int_equal(e->f.n_qq, 1);
    assert_int_equal(e->f.qq[0]->kind, HUB_DIR_Q_INFO);
    assert_int_equal(a->s.q.count, 0);  /* nothing before the answer */
    answer_count(&e->f, 7);
    assert_int_equal(fake_count(&a->s, "{\\\"subscription_count\\\":7}"), 1);
    fake_flush(&a->s);
    /* Another node's change: read again, not told back. */
    remote_notice(e, "room");
    assert_int_equal(e->f.notices, 1);
    assert_int_equal(e->f.n_qq, 1);
    answer_count(&e->f, 9);
    assert_int_equal(fake_count(&a->s, "{\\\"subscription_count\\\":9}"), 1);
    /* A failed read sends nothing and is counted. */
    remote_notice(e, "room");
    assert_int_equal(e->f.n_qq, 1);
    fake_flush(&a->s);
    answer_query(&e->f, -EIO);
    assert_int_equal(a->s.q.count, 0);
    assert_int_equal(
        HUB_STAT_GET(e->fh.loops[0]->stats.subscription_count_dropped), 1);
    /* The last local subscriber gone: the others are told, nothing read. */
    close_heap(a);
    fake_hub_advance(&e->fh, 2001);
    fake_hub_drain(&e->fh);
    assert_int_equal(e->f.notices, 2);
    assert_int_equal(e->f.n_qq, 0);
    /* A notice for a channel nobody here subscribes to reads nothing. */
    remote_notice(e, "other");
    assert_int_equal(e->f.n_qq, 0);
    assert_int_equal(e->f.notices, 2);
}

static void test_backplane_pending_subscription_waits_for_done(void **state)
{
    struct env *e = *state;
    struct fake_session *a;

    a = open_heap(e);
    fake_subscribe(&e->fh, &a->s, "private-c", NULL);
    assert_int_equal(e->f.n_jq, 1);
    assert_int_equal(a->s.q.count, 0);
    assert_null(hub_pusher_find_sub(&a->s, "private-c", 9));
    assert_int_equal(hub_chanmap_count(e->fh.loops[0]->chans), 0);
    /* Nothing is delivered to it while pending... */
    publish_to(e, "private-c");
    assert_int_equal(a->s.q.count, 0);
    /* ...a second subscribe is ignored (one join asked)... */
    fake_subscribe(&e->fh, &a->s, "private-c", NULL);
    assert_int_equal(e->f.n_jq, 1);
    assert_int_equal(a->s.q.count, 0);
    /* ...and a client event on it is refused. */
    fake_recv(&e->fh, &a->s,
              "{\"event\":\"client-x\",\"channel\":\"private-c\","
              "\"data\":{}}");
    assert_true(fake_find(&a->s, "not subscribed") >= 0);
    fake_flush(&a->s);
    assert_false(a->s.authorized);

    answer_join(&e->f, 0);
    assert_int_equal(fake_count(&a->s, "subscription_succeeded"), 1);
    assert_non_null(hub_pusher_find_sub(&a->s, "private-c", 9));
    assert_true(a->s.authorized);
    assert_int_equal(e->fh.loops[0]->stats.subscriptions, 1);
    assert_int_equal(hub_chanmap_check(e->fh.loops[0]->chans), 0);
    fake_flush(&a->s);
    publish_to(e, "private-c");
    assert_int_equal(fake_count(&a->s, "\"ev\""), 1);
    assert_int_equal(info_of(e, "private-c").subscription_count, 1);

    close_heap(a);
    assert_int_equal(e->f.leaves, 1);
    assert_int_equal(info_of(e, "private-c").subscription_count, 0);
    assert_int_equal(e->fh.loops[0]->stats.subscriptions, 0);
}

static void test_backplane_refused_join_answers_4100(void **state)
{
    struct env *e = *state;
    struct fake_session *a;

    a = open_heap(e);
    fake_subscribe(&e->fh, &a->s, "presence-p", presence_data("u1"));
    answer_join(&e->f, -ENOSPC);
    assert_true(fake_find(&a->s, "Presence channel is full") >= 0);
    assert_null(hub_pusher_find_sub(&a->s, "presence-p", 10));
    assert_true(hub_list_is_empty(&a->s.subs));
    /* It can subscribe again. */
    fake_flush(&a->s);
    join_now(e, a, "presence-p", presence_data("u1"));
    assert_int_equal(fake_count(&a->s, "subscription_succeeded"), 1);
    close_heap(a);
    assert_int_equal(e->f.leaves, 1);
}

static void test_backplane_disconnect_while_pending_leaves_once(void **state)
{
    struct env *e = *state;
    struct fake_session *a, *b;

    a = open_heap(e);
    b = open_joined(e, "presence-p", presence_data("u2"));
    e->f.member_added = 0;

    fake_subscribe(&e->fh, &a->s, "presence-p", presence_data("u1"));
    fake_subscribe(&e->fh, &a->s, "private-q", NULL);
    /* Both answers come after the session is gone: each counted join is
     * left once; the presence one as a join and a leave would be. */
    assert_int_equal(close_while_pending(e, a, 2, 0), 2);
    assert_int_equal(e->f.leaves, 2);
    assert_int_equal(info_of(e, "presence-p").subscription_count, 1);
    assert_int_equal(info_of(e, "presence-p").user_count, 1);
    assert_int_equal(info_of(e, "private-q").subscription_count, 0);
    assert_int_equal(e->f.member_added, 1);
    assert_int_equal(e->f.member_removed, 1);
    assert_int_equal(hub_chanmap_check(e->fh.loops[0]->chans), 0);
    assert_int_equal(e->fh.loops[0]->stats.subscriptions, 1);
    close_heap(b);
}

static void test_backplane_disconnect_then_refused_answer(void **state)
{
    struct env *e = *state;
    struct fake_session *a;

    a = open_heap(e);
    fake_subscribe(&e->fh, &a->s, "private-q", NULL);
    /* Nothing was counted: nothing to leave. */
    assert_int_equal(close_while_pending(e, a, 1, -EIO), 0);
    assert_int_equal(e->f.leaves, 0);
}

static void test_backplane_unsubscribe_while_pending(void **state)
{
    struct env *e = *state;
    struct fake_session *a;

    a = open_heap(e);
    fake_subscribe(&e->fh, &a->s, "private-c", NULL);
    fake_recv(&e->fh, &a->s,
              "{\"event\":\"pusher:unsubscribe\",\"data\":"
              "{\"channel\":\"private-c\"}}");
    assert_true(hub_list_is_empty(&a->s.subs));
    answer_join(&e->f, 0);
    assert_int_equal(e->f.leaves, 1);
    assert_int_equal(fake_count(&a->s, "subscription_succeeded"), 0);
    assert_int_equal(info_of(e, "private-c").subscription_count, 0);
    assert_int_equal(e->fh.loops[0]->stats.subscriptions, 0);
    /* Subscribing again works. */
    join_now(e, a, "private-c", NULL);
    assert_int_equal(fake_count(&a->s, "subscription_succeeded"), 1);
    close_heap(a);
    assert_int_equal(e->f.leaves, 2);
}

static void test_backplane_pending_counts_against_max_subscriptions(
    void **state)
{
    struct env *e = *state;
    struct fake_session *a;

    a = open_heap(e);
    fake_subscribe(&e->fh, &a->s, "c1", NULL);
    fake_subscribe(&e->fh, &a->s, "c2", NULL);
    fake_subscribe(&e->fh, &a->s, "c3", NULL);
    assert_int_equal(e->f.n_jq, 2);
    assert_true(fake_find(&a->s, "4100") >= 0);
    answer_join(&e->f, 0);
    answer_join(&e->f, 0);
    assert_int_equal(fake_count(&a->s, "subscription_succeeded"), 2);
    close_heap(a);
    assert_int_equal(e->f.leaves, 2);
}

static void test_backplane_dir_events_stop_hub_member_events(void **state)
{
    struct env *e = *state;
    struct fake_session *a, *b;

    e->f.dir_events = true;
    a = open_heap(e);
    b = open_heap(e);
    join_now(e, a, "presence-p", presence_data("u1"));
    join_now(e, b, "presence-p", presence_data("u2"));
    assert_int_equal(fake_count(&b->s, "subscription_succeeded"), 1);
    assert_true(fake_find(&b->s, "u1") >= 0);
    /* The directory announces members itself: the hub published none. */
    assert_int_equal(e->f.member_added, 0);
    assert_int_equal(fake_count(&a->s, "member_added"), 0);
    close_heap(b);
    assert_int_equal(e->f.member_removed, 0);
    close_heap(a);
    assert_int_equal(e->f.publishes, 0);
}

static void test_backplane_hub_member_events_without_dir_events(void **state)
{
    struct env *e = *state;
    struct fake_session *a, *b;

    a = open_heap(e);
    b = open_heap(e);
    join_now(e, a, "presence-p", presence_data("u1"));
    fake_flush(&a->s);
    join_now(e, b, "presence-p", presence_data("u2"));
    assert_int_equal(e->f.member_added, 2);
    assert_int_equal(fake_count(&a->s, "member_added"), 1);
    /* b joined at the seq of its own change: not told of itself. */
    assert_int_equal(fake_count(&b->s, "member_added"), 0);
    close_heap(b);
    assert_int_equal(e->f.member_removed, 1);
    assert_int_equal(fake_count(&a->s, "member_removed"), 1);
    close_heap(a);
}

static void test_backplane_presence_again_waits(void **state)
{
    struct env *e = *state;
    struct fake_session *a;

    a = open_joined(e, "presence-p", presence_data("u1"));
    /* The same user again: the member list comes when answered. */
    fake_subscribe(&e->fh, &a->s, "presence-p", presence_data("u1"));
    assert_int_equal(e->f.n_jq, 1);
    assert_int_equal(a->s.q.count, 0);
    answer_join(&e->f, 0);
    assert_int_equal(fake_count(&a->s, "subscription_succeeded"), 1);
    assert_int_equal(e->f.leaves, 1);
    assert_int_equal(info_of(e, "presence-p").subscription_count, 1);
    fake_flush(&a->s);
    /* Another user: 409 at once. */
    fake_subscribe(&e->fh, &a->s, "presence-p", presence_data("u9"));
    assert_int_equal(e->f.n_jq, 0);
    assert_true(fake_find(&a->s, "409") >= 0);
    /* Twice again, then gone before the answers (the close leaves the
     * membership it had; each late answer is left again). */
    fake_subscribe(&e->fh, &a->s, "presence-p", presence_data("u1"));
    fake_subscribe(&e->fh, &a->s, "presence-p", presence_data("u1"));
    assert_int_equal(close_while_pending(e, a, 2, 0), 2);
    assert_int_equal(e->f.leaves, 4);
    assert_int_equal(info_of(e, "presence-p").subscription_count, 0);
    assert_int_equal(info_of(e, "presence-p").user_count, 0);
    assert_int_equal(e->f.member_removed, 1);
}

/* REST through hub_rest_handle_async(). */
struct answer_rec {
    unsigned calls;
    int status;
    char body[512];
};

static void on_answer(void *ctx, struct hub_rest_response *r)
{
    struct answer_rec *a = ctx;

    a->calls++;
    a->status = r->status;
    snprintf(a->body, sizeof(a->body), "%.*s", (int)r->len,
             r->body ? r->body : "");
    free(r->body);
}

#define NOW_S 1700000000

/* The query string of a request signed at NOW_S with the app's secret. */
static void sign_now(struct env *e, enum hub_http_method m, const char *path,
                     const char *q, const char *body, char *query,
                     size_t size)
{
    assert_int_equal(hub_auth_sign_rest(&e->fh.apps[0],
                                        m == HUB_HTTP_POST ? "POST" : "GET",
                                        path, q, body, strlen(body), NOW_S,
                                        query, size),
                     0);
}

static struct hub_rest_wait *rest(struct env *e, enum hub_http_method m,
                                  const char *path, const char *q,
                                  const char *body, struct answer_rec *a,
                                  struct hub_rest_response *out)
{
    char query[1024];

    sign_now(e, m, path, q, body, query, sizeof(query));
    return hub_rest_handle_async(e->fh.loops[0], m, path, query, body,
                                 strlen(body), NOW_S, on_answer, a, out);
}

/* A request answered at once: by hub_rest_handle_nowait (a caller that
 * cannot wait) or hub_rest_handle (one that never waits). */
static void rest_at_once(struct env *e, bool nowait, enum hub_http_method m,
                         const char *path, const char *body,
                         struct hub_rest_response *out)
{
    char query[1024];

    sign_now(e, m, path, "", body, query, sizeof(query));
    if (nowait)
        hub_rest_handle_nowait(e->fh.loops[0], m, path, query, body,
                               strlen(body), NOW_S, out);
    else
        hub_rest_handle(e->fh.loops[0], m, path, query, body, strlen(body),
                        NOW_S, out);
}

static void test_backplane_rest_reads_wait_for_the_directory(void **state)
{
    struct env *e = *state;
    struct fake_session *a;
    struct answer_rec ans = { 0 };
    struct hub_rest_response out;
    struct hub_rest_wait *w;

    a = open_joined(e, "presence-p", presence_data("u1"));

    w = rest(e, HUB_HTTP_GET, "/apps/app-id/channels/presence-p",
             "info=user_count,subscription_count", "", &ans, &out);
    assert_non_null(w);
    assert_int_equal(out.status, 0);
    assert_int_equal(ans.calls, 0);
    assert_int_equal(e->fh.loops[0]->stats.rest_waiting, 1);
    answer_query(&e->f, 0);
    assert_int_equal(e->fh.loops[0]->stats.rest_waiting, 0);
    assert_int_equal(ans.calls, 1);
    assert_int_equal(ans.status, 200);
    assert_string_equal(ans.body, "{\"occupied\":true,\"user_count\":1,"
                                  "\"subscription_count\":1}");

    w = rest(e, HUB_HTTP_GET, "/apps/app-id/channels", "", "", &ans, &out);
    assert_non_null(w);
    answer_query(&e->f, 0);
    assert_int_equal(ans.calls, 2);
    assert_string_equal(ans.body, "{\"channels\":{\"presence-p\":{}}}");

    w = rest(e, HUB_HTTP_GET, "/apps/app-id/channels/presence-p/users", "",
             "", &ans, &out);
    assert_non_null(w);
    answer_query(&e->f, 0);
    assert_int_equal(ans.calls, 3);
    assert_string_equal(ans.body, "{\"users\":[{\"id\":\"u1\"}]}");

    /* A directory failure is a 503, out of memory a 500. */
    w = rest(e, HUB_HTTP_GET, "/apps/app-id/channels", "", "", &ans, &out);
    answer_query(&e->f, -EIO);
    assert_int_equal(ans.status, 503);
    w = rest(e, HUB_HTTP_GET, "/apps/app-id/channels", "", "", &ans, &out);
    answer_query(&e->f, -ENOMEM);
    assert_int_equal(ans.status, 500);

    /* Refusals that need no read answer at once. */
    w = rest(e, HUB_HTTP_GET, "/apps/app-id/channels/private-x/users", "",
             "", &ans, &out);
    assert_null(w);
    assert_int_equal(out.status, 400);
    free(out.body);
    assert_int_equal(ans.calls, 5);

    /* hub_rest_handle() never waits: the synchronous reads. */
    rest_at_once(e, false, HUB_HTTP_GET, "/apps/app-id/channels", "", &out);
    assert_int_equal(out.status, 200);
    assert_int_equal(e->f.n_qq, 0);
    free(out.body);
    close_heap(a);
}

static void test_backplane_rest_events_info_wait_then_publish(void **state)
{
    struct env *e = *state;
    struct fake_session *a;
    struct answer_rec ans = { 0 };
    struct hub_rest_response out;
    struct hub_rest_wait *w;
    const char *ev = "{\"name\":\"ev\",\"channels\":[\"c1\",\"c2\"],"
                     "\"data\":\"x\",\"info\":\"subscription_count\"}";
    const char *batch = "{\"batch\":[{\"name\":\"e1\",\"channel\":\"c1\","
                        "\"data\":\"x\"},{\"name\":\"e2\",\"channel\":\"c2\","
                        "\"data\":\"x\",\"info\":\"subscription_count\"}]}";

    a = open_joined(e, "c1", NULL);

    w = rest(e, HUB_HTTP_POST, "/apps/app-id/events", "", ev, &ans, &out);
    assert_non_null(w);
    assert_int_equal(e->f.n_qq, 2);
    answer_query(&e->f, 0);
    /* Published only once every read is in. */
    assert_int_equal(a->s.q.count, 0);
    answer_query(&e->f, 0);
    assert_int_equal(ans.calls, 1);
    assert_int_equal(ans.status, 200);
    assert_string_equal(ans.body,
                        "{\"channels\":{\"c1\":{\"subscription_count\":1},"
                        "\"c2\":{\"subscription_count\":0}}}");
    assert_int_equal(fake_count(&a->s, "\"ev\""), 1);
    fake_flush(&a->s);

    w = rest(e, HUB_HTTP_POST, "/apps/app-id/batch_events", "", batch, &ans,
             &out);
    assert_non_null(w);
    assert_int_equal(e->f.n_qq, 1);
    answer_query(&e->f, 0);
    assert_int_equal(ans.calls, 2);
    assert_string_equal(ans.body,
                        "{\"batch\":[{},{\"subscription_count\":0}]}");
    assert_int_equal(fake_count(&a->s, "\"e1\""), 1);
    fake_flush(&a->s);

    /* Without info= no read: answered at once. */
    w = rest(e, HUB_HTTP_POST, "/apps/app-id/events", "",
             "{\"name\":\"ev\",\"channel\":\"c1\",\"data\":\"x\"}", &ans,
             &out);
    assert_null(w);
    assert_int_equal(out.status, 200);
    free(out.body);
    fake_flush(&a->s);

    /* The requester goes first: no answer, the event still goes out. */
    w = rest(e, HUB_HTTP_POST, "/apps/app-id/events", "", ev, &ans, &out);
    assert_non_null(w);
    hub_rest_wait_cancel(w);
    answer_query(&e->f, 0);
    answer_query(&e->f, 0);
    assert_int_equal(ans.calls, 2);
    assert_int_equal(fake_count(&a->s, "\"ev\""), 1);

    /* A cancelled read: dropped, freed (ASan: no leak). */
    w = rest(e, HUB_HTTP_GET, "/apps/app-id/channels/c1/users", "", "",
             &ans, &out);
    assert_null(w);
    free(out.body);
    w = rest(e, HUB_HTTP_GET, "/apps/app-id/channels", "", "", &ans, &out);
    hub_rest_wait_cancel(w);
    answer_query(&e->f, 0);
    assert_int_equal(ans.calls, 2);
    assert_int_equal(e->fh.loops[0]->stats.rest_answers_dropped, 2);
    assert_int_equal(e->fh.loops[0]->stats.rest_waiting, 0);
    close_heap(a);
}

/* A caller that cannot wait (server/http/rest.c: a request pipelined behind
 * the POST body): what would wait is refused with 400 and not published,
 * before its wait starts (hub_rest_handle_nowait) or during it
 * (hub_rest_wait_refuse); what needs no read is answered as usual. */
static void test_backplane_rest_pipelined_post_refused_not_published(
    void **state)
{
    struct env *e = *state;
    struct fake_session *a;
    struct answer_rec ans = { 0 };
    struct hub_rest_response out;
    struct hub_rest_wait *w;
    const char *ev = "{\"name\":\"ev\",\"channel\":\"c1\","
                     "\"data\":\"x\",\"info\":\"subscription_count\"}";
    const char *plain = "{\"name\":\"ev\",\"channel\":\"c1\",\"data\":\"x\"}";

    a = open_joined(e, "c1", NULL);

    rest_at_once(e, true, HUB_HTTP_POST, "/apps/app-id/events", ev, &out);
    assert_int_equal(out.status, 400);
    assert_non_null(strstr(out.body, "nothing was published"));
    free(out.body);
    assert_int_equal(e->f.n_qq, 0);
    assert_int_equal(fake_count(&a->s, "\"ev\""), 0);

    rest_at_once(e, true, HUB_HTTP_POST, "/apps/app-id/events", plain, &out);
    assert_int_equal(out.status, 200);
    free(out.body);
    assert_int_equal(fake_count(&a->s, "\"ev\""), 1);
    fake_flush(&a->s);

    /* Refused while it waits: the read still comes, nothing goes out. */
    w = rest(e, HUB_HTTP_POST, "/apps/app-id/events", "", ev, &ans, &out);
    assert_non_null(w);
    hub_rest_wait_refuse(w, &out);
    assert_int_equal(out.status, 400);
    free(out.body);
    answer_query(&e->f, 0);
    assert_int_equal(ans.calls, 0);
    assert_int_equal(fake_count(&a->s, "\"ev\""), 0);
    assert_int_equal(e->fh.loops[0]->stats.rest_waiting, 0);
    assert_int_equal(e->fh.loops[0]->stats.rest_answers_dropped, 0);
    close_heap(a);
}

static void test_backplane_take_seq_shares_the_space(void **state)
{
    struct hub_directory *d = hub_directory_create();
    struct hub_presence_join j = { .user_id = "u1" };
    uint64_t s1, s2;

    (void)state;
    assert_non_null(d);
    s1 = hub_directory_take_seq(d);
    assert_int_equal(hub_directory_join(d, 0, "presence-p", 10, &j), 0);
    assert_true(j.seq > s1);
    assert_false(j.dir_events);
    s2 = hub_directory_take_seq(d);
    assert_true(s2 > j.seq);
    free(j.members_json);
    hub_directory_destroy(d);
}

/* The in-process backplane has no asynchronous ops: nothing changes. */
static void test_backplane_local_directory_stays_synchronous(void **state)
{
    struct hub_backplane bp;

    (void)state;
    assert_int_equal(hub_backplane_local(&bp), 0);
    assert_null(bp.dir->join_async);
    assert_null(bp.dir->query_async);
    bp.dir->destroy(bp.dir_impl);
}

/* A case on the fixture's default env. */
#define ENV_TEST(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        ENV_TEST(test_backplane_pending_subscription_waits_for_done),
        ENV_TEST(test_backplane_refused_join_answers_4100),
        ENV_TEST(test_backplane_disconnect_while_pending_leaves_once),
        ENV_TEST(test_backplane_disconnect_then_refused_answer),
        ENV_TEST(test_backplane_unsubscribe_while_pending),
        cmocka_unit_test_setup_teardown(
            test_backplane_pending_counts_against_max_subscriptions,
            setup_two_subs,
            teardown),
        ENV_TEST(test_backplane_dir_events_stop_hub_member_events),
        ENV_TEST(test_backplane_hub_member_events_without_dir_events),
        ENV_TEST(test_backplane_presence_again_waits),
        ENV_TEST(test_backplane_rest_reads_wait_for_the_directory),
        ENV_TEST(test_backplane_rest_events_info_wait_then_publish),
        ENV_TEST(test_backplane_rest_pipelined_post_refused_not_published),
        cmocka_unit_test(test_backplane_take_seq_shares_the_space),
        cmocka_unit_test(test_backplane_local_directory_stays_synchronous),
        cmocka_unit_test_setup_teardown(
            test_backplane_subcount_reads_cluster_count,
                                        setup_counting, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
