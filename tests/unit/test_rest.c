/*
 * tests/unit/test_rest.c - the Pusher HTTP API at hub_rest_handle() on the
 * fake hub (fake_hub.h): signed requests, events and batch_events (exact
 * frames, socket_id exclusion across loops, the encrypted-channel rule,
 * batch atomicity), the channel queries and their `info`,
 * terminate_connections, and every status the handler answers besides the
 * out-of-memory 500s (those need a failing allocator).
 *
 * Requests are signed with hub_auth_sign_rest() for the app the path names
 * at NOW_S; the fake hub has two loops and sessions on both.
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
#include "hub/base/query.h"
#include "hub/rest/rest.h"

#define NOW_S 1700000000ull

/* Event data of exactly 200 bytes (the fixture's max_event_bytes). */
#define X10 "xxxxxxxxxx"
#define X200 X10 X10 X10 X10 X10 X10 X10 X10 X10 X10 \
             X10 X10 X10 X10 X10 X10 X10 X10 X10 X10
/* {"name":N,"channel":C,"data":"D"} */
#define EV(n, c, d) \
    "{\"name\":\"" n "\",\"channel\":\"" c "\",\"data\":\"" d "\"}"

/* One answer: status, the body as parsed JSON (owned) and as text. */
struct answer {
    int status;
    json_t *body;
    char text[4096];
};

static void answer_fini(struct answer *a)
{
    json_decref(a->body);
    a->body = NULL;
}

/* The "error" string of a non-200 answer ("" when there is none). */
static const char *answer_error(const struct answer *a)
{
    const char *e = json_string_value(json_object_get(a->body, "error"));

    return e ? e : "";
}

/* The Retry-After of the latest answer (0 unless it was a 429). */
static uint32_t last_retry_after;

/* hub_rest_handle() as it is called, checking the answer's shape: a JSON
 * object, with "error" exactly when the status is not 200. */
static int handle_raw(struct fake_hub *fh, unsigned li,
                      enum hub_http_method m, const char *path,
                      const char *query, const char *body, size_t body_len,
                      struct answer *a)
{
    struct hub_rest_response r;

    hub_rest_handle(fh->loops[li], m, path, query, body, body_len, NOW_S, &r);
    last_retry_after = r.retry_after_s;
    assert_int_equal(r.status == 429, r.retry_after_s > 0);
    assert_non_null(r.body);
    assert_int_equal(strlen(r.body), r.len);
    a->status = r.status;
    snprintf(a->text, sizeof(a->text), "%s", r.body);
    a->body = json_loads(r.body, 0, NULL);
    free(r.body);
    assert_true(json_is_object(a->body));
    if (a->status == 200)
        assert_null(json_object_get(a->body, "error"));
    else
        assert_true(json_is_string(json_object_get(a->body, "error")));
    return a->status;
}

/* Signed for app with extra query parameters (may be NULL), at NOW_S. */
static int handle_app(struct fake_hub *fh, unsigned li,
                      const struct hub_app *app, enum hub_http_method m,
                      const char *path, const char *extra, const char *body,
                      struct answer *a)
{
    char q[HUB_QUERY_MAX_BYTES];
    size_t body_len = body ? strlen(body) : 0;

    assert_int_equal(hub_auth_sign_rest(app, hub_http_method_name(m), path,
                                        extra, body, body_len, NOW_S, q,
                                        sizeof(q)),
                     0);
    return handle_raw(fh, li, m, path, q, body, body_len, a);
}

/* Signed for the first app ("app-id"). */
static int handle(struct fake_hub *fh, unsigned li, enum hub_http_method m,
                  const char *path, const char *extra, const char *body,
                  struct answer *a)
{
    return handle_app(fh, li, &fh->apps[0], m, path, extra, body, a);
}

/* POST /apps/app-id/events with body; the status, answer dropped. */
static int post_events(struct fake_hub *fh, unsigned li, const char *body)
{
    struct answer a;
    int status = handle(fh, li, HUB_HTTP_POST, "/apps/app-id/events", NULL,
                        body, &a);

    answer_fini(&a);
    return status;
}

/*
 * The fixture: two loops; s[0] (loop 0) and s[1] (loop 1) in "news";
 * s[0] and s[3] (loop 1) in presence-room as u1 and u2; s[1] in
 * private-a; s[2] (loop 0) in private-encrypted-x and signed in as u1.
 * Every queue flushed.
 */
#define N_SESSIONS 4

struct fixture {
    struct fake_hub fh;
    struct fake_session s[N_SESSIONS];
};

static struct fixture *fixture_start(void)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    struct fake_hub *fh;

    assert_non_null(fx);
    fh = &fx->fh;
    fake_hub_init(fh, 2);
    fh->apps[1].enabled = false;
    fh->apps[0].max_event_bytes = 200;
    fh->apps[0].max_batch_events = 3;
    fh->apps[0].max_channels_per_event = 3;
    fh->apps[0].max_event_name = 40;
    fh->apps[0].max_user_id_len = 16;
    assert_int_equal(fake_hub_start(fh), 0);
    for (unsigned i = 0; i < N_SESSIONS; i++)
        assert_int_equal(fake_session_open(fh, &fx->s[i], i % 2,
                                           &fh->apps[0]),
                         0);
    fake_subscribe(fh, &fx->s[0].s, "news", NULL);
    fake_subscribe(fh, &fx->s[1].s, "news", NULL);
    fake_subscribe(fh, &fx->s[1].s, "private-a", NULL);
    fake_subscribe(fh, &fx->s[0].s, "presence-room",
                   "{\"user_id\":\"u1\",\"user_info\":{\"n\":1}}");
    fake_subscribe(fh, &fx->s[3].s, "presence-room", "{\"user_id\":\"u2\"}");
    fake_subscribe(fh, &fx->s[2].s, "private-encrypted-x", NULL);
    fake_signin(fh, &fx->s[2].s, "{\"id\":\"u1\"}");
    fake_hub_drain(fh);
    for (unsigned i = 0; i < N_SESSIONS; i++) {
        assert_int_equal(fx->s[i].s.state, HUB_SESSION_OPEN);
        fake_flush(&fx->s[i].s);
    }
    return fx;
}

/* Deliver what is in flight, check every queue, leave, stop. */
static void fixture_stop(struct fixture *fx)
{
    struct fake_hub *fh = &fx->fh;

    fake_hub_drain(fh);
    for (unsigned i = 0; i < N_SESSIONS; i++) {
        assert_int_equal(hub_session_check(&fx->s[i].s), 0);
        hub_session_fini(&fx->s[i].s, HUB_CLOSE_PEER);
    }
    fake_hub_drain(fh);
    for (unsigned i = 0; i < fh->n_loops; i++)
        assert_int_equal(hub_chanmap_count(fh->loops[i]->chans), 0);
    fake_hub_stop(fh);
    free(fx);
}

/* How many frames are queued on all sessions of the fixture. */
static unsigned queued_frames(const struct fixture *fx)
{
    unsigned n = 0;

    for (unsigned i = 0; i < N_SESSIONS; i++)
        n += fx->s[i].s.q.count;
    return n;
}

/* Signed events. */

static void test_rest_event_reaches_every_loop_exactly(void **state)
{
    struct fixture *fx = fixture_start();
    struct answer a;

    (void)state;
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_POST, "/apps/app-id/events",
                            NULL,
                            "{\"name\":\"ev\",\"channels\":[\"news\"],"
                            "\"data\":\"{\\\"x\\\":1}\"}",
                            &a),
                     200);
    assert_string_equal(a.text, "{}");
    answer_fini(&a);
    /* The receiving loop delivers at once, the other loop on its drain. */
    assert_int_equal(fx->s[0].s.q.count, 1);
    assert_int_equal(fx->s[1].s.q.count, 0);
    fake_hub_drain(&fx->fh);
    assert_int_equal(fx->s[1].s.q.count, 1);
    /* The string data goes out as it was sent, as a JSON string. */
    assert_string_equal(fake_frame_text(&fx->s[0].s, 0),
                        "{\"event\":\"ev\",\"channel\":\"news\","
                        "\"data\":\"{\\\"x\\\":1}\"}");
    assert_string_equal(fake_frame_text(&fx->s[1].s, 0),
                        "{\"event\":\"ev\",\"channel\":\"news\","
                        "\"data\":\"{\\\"x\\\":1}\"}");
    assert_int_equal(queued_frames(fx), 2);
    fake_flush(&fx->s[0].s);
    fake_flush(&fx->s[1].s);

    /* The "channel" form, and data that is not a string: its compact
     * JSON text, quoted. One literal, the same in every channel's frame. */
    assert_int_equal(post_events(&fx->fh, 1,
                                 "{\"name\":\"ev2\",\"channel\":\"news\","
                                 "\"data\":{\"a\": [1, 2]}}"),
                     200);
    fake_hub_drain(&fx->fh);
    assert_string_equal(fake_frame_text(&fx->s[0].s, 0),
                        "{\"event\":\"ev2\",\"channel\":\"news\","
                        "\"data\":\"{\\\"a\\\":[1,2]}\"}");
    fake_flush(&fx->s[0].s);
    fake_flush(&fx->s[1].s);
    assert_int_equal(post_events(&fx->fh, 0,
                                 "{\"name\":\"ev3\",\"channels\":[\"news\","
                                 "\"presence-room\",\"private-a\"],"
                                 "\"data\":\"d\"}"),
                     200);
    fake_hub_drain(&fx->fh);
    assert_string_equal(fake_frame_text(&fx->s[3].s, 0),
                        "{\"event\":\"ev3\",\"channel\":\"presence-room\","
                        "\"data\":\"d\"}");
    assert_string_equal(fake_frame_text(&fx->s[1].s, 1),
                        "{\"event\":\"ev3\",\"channel\":\"private-a\","
                        "\"data\":\"d\"}");
    /* s[0]: news and presence-room; s[1]: news and private-a; s[3]. */
    assert_int_equal(fx->s[0].s.q.count, 2);
    assert_int_equal(fx->s[1].s.q.count, 2);
    assert_int_equal(fx->s[3].s.q.count, 1);
    assert_int_equal(fx->s[2].s.q.count, 0);
    fixture_stop(fx);
}

static void test_rest_socket_id_excluded_across_loops(void **state)
{
    struct fixture *fx = fixture_start();
    char body[256];

    (void)state;
    /* s[1] is on loop 1; the request arrives on loop 0. */
    snprintf(body, sizeof(body),
             "{\"name\":\"ev\",\"channels\":[\"news\"],\"data\":\"1\","
             "\"socket_id\":\"%s\"}",
             HUB_SID(&fx->s[1].s));
    assert_int_equal(post_events(&fx->fh, 0, body), 200);
    fake_hub_drain(&fx->fh);
    assert_int_equal(fx->s[0].s.q.count, 1);
    assert_int_equal(fx->s[1].s.q.count, 0);
    /* And the other way round: the sender's own loop skips it too. */
    snprintf(body, sizeof(body),
             "{\"name\":\"ev\",\"channels\":[\"news\"],\"data\":\"1\","
             "\"socket_id\":\"%s\"}",
             HUB_SID(&fx->s[0].s));
    assert_int_equal(post_events(&fx->fh, 1, body), 200);
    fake_hub_drain(&fx->fh);
    assert_int_equal(fx->s[0].s.q.count, 1);
    assert_int_equal(fx->s[1].s.q.count, 1);
    /* A socket_id that is nobody's excludes nobody. */
    assert_int_equal(post_events(&fx->fh, 0,
                                 "{\"name\":\"ev\",\"channels\":[\"news\"],"
                                 "\"data\":\"1\",\"socket_id\":\"1.2\"}"),
                     200);
    fake_hub_drain(&fx->fh);
    assert_int_equal(fx->s[0].s.q.count, 2);
    assert_int_equal(fx->s[1].s.q.count, 2);
    fixture_stop(fx);
}

static void test_rest_encrypted_channel_only_alone(void **state)
{
    struct fixture *fx = fixture_start();
    struct answer a;

    (void)state;
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_POST, "/apps/app-id/events",
                            NULL,
                            "{\"name\":\"ev\",\"channels\":[\"news\","
                            "\"private-encrypted-x\"],\"data\":\"c\"}",
                            &a),
                     400);
    assert_string_equal(answer_error(&a),
                        "an encrypted channel must be the only channel");
    answer_fini(&a);
    fake_hub_drain(&fx->fh);
    assert_int_equal(queued_frames(fx), 0);
    /* Alone it is published like any other channel. */
    assert_int_equal(post_events(&fx->fh, 0,
                                 "{\"name\":\"ev\",\"channels\":"
                                 "[\"private-encrypted-x\"],\"data\":\"c\"}"),
                     200);
    fake_hub_drain(&fx->fh);
    assert_int_equal(fx->s[2].s.q.count, 1);
    assert_int_equal(queued_frames(fx), 1);
    fixture_stop(fx);
}

static void test_rest_events_info(void **state)
{
    struct fixture *fx = fixture_start();
    struct answer a;

    (void)state;
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_POST, "/apps/app-id/events",
                            NULL,
                            "{\"name\":\"ev\",\"channels\":[\"news\","
                            "\"presence-room\",\"empty\"],\"data\":\"1\","
                            "\"info\":\"user_count,subscription_count\"}",
                            &a),
                     200);
    /* user_count only for presence channels. */
    assert_string_equal(a.text,
                        "{\"channels\":{\"news\":{\"subscription_count\":2},"
                        "\"presence-room\":{\"user_count\":2,"
                        "\"subscription_count\":2},"
                        "\"empty\":{\"subscription_count\":0}}}");
    answer_fini(&a);
    fixture_stop(fx);
}

/* batch_events. */

static void test_rest_batch_publishes_all_or_nothing(void **state)
{
    struct fixture *fx = fixture_start();
    struct answer a;

    (void)state;
    /* The third event is bad: nothing of the first two goes out. */
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_POST,
                            "/apps/app-id/batch_events", NULL,
                            "{\"batch\":[" EV("a", "news", "1") ","
                            EV("b", "news", "2") ","
                            EV("c", "bad name", "3") "]}",
                            &a),
                     400);
    assert_string_equal(answer_error(&a), "invalid channel name");
    answer_fini(&a);
    /* An event over the data limit is a 413 for the whole batch. */
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_POST,
                            "/apps/app-id/batch_events", NULL,
                            "{\"batch\":[" EV("a", "news", "1") ","
                            EV("b", "news", X200 "x") "]}",
                            &a),
                     413);
    answer_fini(&a);
    fake_hub_drain(&fx->fh);
    assert_int_equal(queued_frames(fx), 0);

    /* A good batch: every event, in order, on every loop. */
    assert_int_equal(handle(&fx->fh, 1, HUB_HTTP_POST,
                            "/apps/app-id/batch_events", NULL,
                            "{\"batch\":[" EV("a", "news", "1") ","
                            "{\"name\":\"b\",\"channel\":\"presence-room\","
                            "\"data\":\"2\",\"info\":\"user_count\"},"
                            EV("c", "news", "3") "]}",
                            &a),
                     200);
    /* With info: one object per event, the channel's info directly. */
    assert_string_equal(a.text, "{\"batch\":[{},{\"user_count\":2},{}]}");
    answer_fini(&a);
    fake_hub_drain(&fx->fh);
    assert_int_equal(fx->s[0].s.q.count, 3);
    assert_int_equal(fake_find(&fx->s[0].s, "\"event\":\"a\""), 0);
    assert_int_equal(fake_find(&fx->s[0].s, "\"event\":\"b\""), 1);
    assert_int_equal(fake_find(&fx->s[0].s, "\"event\":\"c\""), 2);
    assert_int_equal(fx->s[1].s.q.count, 2);
    assert_int_equal(fx->s[3].s.q.count, 1);
    fake_flush(&fx->s[0].s);
    fake_flush(&fx->s[1].s);
    fake_flush(&fx->s[3].s);
    /* Without info: {}. An empty batch publishes nothing and is fine. */
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_POST,
                            "/apps/app-id/batch_events", NULL,
                            "{\"batch\":[{\"name\":\"a\",\"channel\":\"news\","
                            "\"data\":\"1\"}]}",
                            &a),
                     200);
    assert_string_equal(a.text, "{}");
    answer_fini(&a);
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_POST,
                            "/apps/app-id/batch_events", NULL,
                            "{\"batch\":[]}", &a),
                     200);
    assert_string_equal(a.text, "{}");
    answer_fini(&a);
    fake_hub_drain(&fx->fh);
    assert_int_equal(queued_frames(fx), 2);
    fixture_stop(fx);
}

/* Channel queries. */

static void test_rest_channels_list(void **state)
{
    struct fixture *fx = fixture_start();
    struct answer a;
    json_t *ch;

    (void)state;
    assert_int_equal(handle(&fx->fh, 1, HUB_HTTP_GET, "/apps/app-id/channels",
                            NULL, NULL, &a),
                     200);
    /* Every occupied channel but the user channel, which is local only. */
    ch = json_object_get(a.body, "channels");
    assert_int_equal(json_object_size(ch), 4);
    assert_non_null(json_object_get(ch, "news"));
    assert_non_null(json_object_get(ch, "private-a"));
    assert_non_null(json_object_get(ch, "presence-room"));
    assert_non_null(json_object_get(ch, "private-encrypted-x"));
    answer_fini(&a);
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_GET, "/apps/app-id/channels",
                            "filter_by_prefix=private-", NULL, &a),
                     200);
    ch = json_object_get(a.body, "channels");
    assert_int_equal(json_object_size(ch), 2);
    assert_non_null(json_object_get(ch, "private-a"));
    answer_fini(&a);
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_GET, "/apps/app-id/channels",
                            "filter_by_prefix=presence-&info=user_count", NULL,
                            &a),
                     200);
    assert_string_equal(a.text,
                        "{\"channels\":{\"presence-room\":"
                        "{\"user_count\":2}}}");
    answer_fini(&a);
    /* user_count needs the presence- prefix. */
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_GET, "/apps/app-id/channels",
                            "info=user_count", NULL, &a),
                     400);
    assert_string_equal(answer_error(&a),
                        "info=user_count needs filter_by_prefix=presence-");
    answer_fini(&a);
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_GET, "/apps/app-id/channels",
                            "filter_by_prefix=private-&info=user_count", NULL,
                            &a),
                     400);
    answer_fini(&a);
    /* The other app's channels are its own (none). */
    fx->fh.apps[1].enabled = true;
    assert_int_equal(handle_app(&fx->fh, 0, &fx->fh.apps[1], HUB_HTTP_GET,
                                "/apps/other-id/channels", NULL, NULL, &a),
                     200);
    assert_string_equal(a.text, "{\"channels\":{}}");
    answer_fini(&a);
    fixture_stop(fx);
}

static void test_rest_channel_info(void **state)
{
    struct fixture *fx = fixture_start();
    struct answer a;

    (void)state;
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_GET,
                            "/apps/app-id/channels/presence-room",
                            "info=user_count,subscription_count", NULL, &a),
                     200);
    assert_string_equal(a.text, "{\"occupied\":true,\"user_count\":2,"
                                "\"subscription_count\":2}");
    answer_fini(&a);
    assert_int_equal(handle(&fx->fh, 1, HUB_HTTP_GET,
                            "/apps/app-id/channels/news", NULL, NULL, &a),
                     200);
    assert_string_equal(a.text, "{\"occupied\":true}");
    answer_fini(&a);
    assert_int_equal(handle(&fx->fh, 1, HUB_HTTP_GET,
                            "/apps/app-id/channels/news",
                            "info=subscription_count", NULL, &a),
                     200);
    assert_string_equal(a.text,
                        "{\"occupied\":true,\"subscription_count\":2}");
    answer_fini(&a);
    /* The name in the path is percent-decoded. */
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_GET,
                            "/apps/app-id/channels/private%2Da", NULL, NULL,
                            &a),
                     200);
    assert_string_equal(a.text, "{\"occupied\":true}");
    answer_fini(&a);
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_GET,
                            "/apps/app-id/channels/nobody-here",
                            "info=subscription_count", NULL, &a),
                     200);
    assert_string_equal(a.text,
                        "{\"occupied\":false,\"subscription_count\":0}");
    answer_fini(&a);
    /* user_count is for presence channels only. */
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_GET,
                            "/apps/app-id/channels/news", "info=user_count",
                            NULL, &a),
                     400);
    assert_string_equal(answer_error(&a),
                        "user_count is only for presence channels");
    answer_fini(&a);
    fixture_stop(fx);
}

/*
 * Parameter lookups are exact: auth lower-cases the keys only for the
 * signature (in its own copy), so INFO= is signed and accepted but is not
 * info= (today's behaviour, kept on purpose).
 */
static void test_rest_info_key_is_case_sensitive(void **state)
{
    struct fixture *fx = fixture_start();
    struct answer a;

    (void)state;
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_GET,
                            "/apps/app-id/channels/presence-room",
                            "INFO=user_count", NULL, &a),
                     200);
    assert_string_equal(a.text, "{\"occupied\":true}");
    answer_fini(&a);
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_GET, "/apps/app-id/channels",
                            "Filter_By_Prefix=private-", NULL, &a),
                     200);
    assert_int_equal(json_object_size(json_object_get(a.body, "channels")),
                     4);
    answer_fini(&a);
    fixture_stop(fx);
}

static void test_rest_presence_users(void **state)
{
    struct fixture *fx = fixture_start();
    struct answer a;

    (void)state;
    assert_int_equal(handle(&fx->fh, 1, HUB_HTTP_GET,
                            "/apps/app-id/channels/presence-room/users", NULL,
                            NULL, &a),
                     200);
    assert_string_equal(a.text,
                        "{\"users\":[{\"id\":\"u1\"},{\"id\":\"u2\"}]}");
    answer_fini(&a);
    assert_int_equal(handle(&fx->fh, 1, HUB_HTTP_GET,
                            "/apps/app-id/channels/news/users", NULL, NULL,
                            &a),
                     400);
    assert_string_equal(answer_error(&a),
                        "users are only listed for presence channels");
    answer_fini(&a);
    fixture_stop(fx);
}

/* terminate_connections. */

static void test_rest_terminate_user_every_loop(void **state)
{
    struct fixture *fx = fixture_start();
    struct fake_session other;
    struct answer a;

    (void)state;
    /* A second socket of u1, on the other loop. */
    assert_int_equal(fake_session_open(&fx->fh, &other, 1, &fx->fh.apps[0]),
                     0);
    fake_signin(&fx->fh, &other.s, "{\"id\":\"u1\"}");
    fake_flush(&other.s);
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_POST,
                            "/apps/app-id/users/u1/terminate_connections",
                            NULL, NULL, &a),
                     200);
    assert_string_equal(a.text, "{}");
    answer_fini(&a);
    /* s[2] is on the receiving loop: closed at once; other on its drain. */
    assert_int_equal(fx->s[2].s.state, HUB_SESSION_CLOSING);
    assert_int_equal(fx->s[2].s.close_code, 4009);
    assert_int_equal(other.s.state, HUB_SESSION_OPEN);
    fake_hub_drain(&fx->fh);
    assert_int_equal(other.s.state, HUB_SESSION_CLOSING);
    assert_int_equal(other.s.close_code, 4009);
    /* Presence as u1 is not sign-in as u1. */
    assert_int_equal(fx->s[0].s.state, HUB_SESSION_OPEN);
    assert_int_equal(fx->s[1].s.state, HUB_SESSION_OPEN);
    assert_int_equal(fx->s[3].s.state, HUB_SESSION_OPEN);
    /* A user nobody is is fine; the id is percent-decoded. */
    assert_int_equal(handle(&fx->fh, 1, HUB_HTTP_POST,
                            "/apps/app-id/users/n%6Fbody/terminate_connections",
                            NULL, NULL, &a),
                     200);
    answer_fini(&a);
    /* Bad ids: empty, longer than max_user_id_len, a bad escape. */
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_POST,
                            "/apps/app-id/users//terminate_connections", NULL,
                            NULL, &a),
                     400);
    assert_string_equal(answer_error(&a), "bad user id");
    answer_fini(&a);
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_POST,
                            "/apps/app-id/users/12345678901234567/"
                            "terminate_connections",
                            NULL, NULL, &a),
                     400);
    answer_fini(&a);
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_POST,
                            "/apps/app-id/users/%zz/terminate_connections",
                            NULL, NULL, &a),
                     400);
    answer_fini(&a);
    fake_hub_drain(&fx->fh);
    hub_session_fini(&other.s, HUB_CLOSE_APP);
    fixture_stop(fx);
}

/* Every error status. */

static void test_rest_404(void **state)
{
    struct fixture *fx = fixture_start();
    static const char *const paths[] = {
        "/ap",                       /* shorter than the prefix */
        "/apps/",                    /* no id */
        "/apps/app-id",              /* nothing after the id */
        "/apps/app-id/",
        "/apps/app-id/nope",
        "/apps/app-id/channels/news/nope",
        "/apps/app-id/channels/news/users/x",
        "/apps/app-id/users/u1",
        "/apps/app-id/users/u1/other",
        "/apps/app-id/users/u1/terminate_connections/x",
    };
    struct answer a;

    (void)state;
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_GET, paths[i], NULL,
                                NULL, &a),
                         404);
        answer_fini(&a);
        assert_int_equal(handle(&fx->fh, 1, HUB_HTTP_POST, paths[i], NULL,
                                NULL, &a),
                         404);
        answer_fini(&a);
    }
    /* An unknown app, signed or not (the lookup comes first). */
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_GET, "/apps/nope/channels",
                            NULL, NULL, &a),
                     404);
    assert_string_equal(answer_error(&a), "unknown app");
    answer_fini(&a);
    assert_int_equal(handle_raw(&fx->fh, 0, HUB_HTTP_GET,
                                "/apps/app-i/channels", "", "", 0, &a),
                     404);
    answer_fini(&a);
    fixture_stop(fx);
}

static void test_rest_405_get_on_post_paths(void **state)
{
    struct fixture *fx = fixture_start();
    static const char *const paths[] = {
        "/apps/app-id/events",
        "/apps/app-id/batch_events",
        "/apps/app-id/users/u1/terminate_connections",
    };
    struct answer a;

    (void)state;
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_GET, paths[i], NULL,
                                NULL, &a),
                         405);
        assert_string_equal(answer_error(&a), "use POST");
        answer_fini(&a);
    }
    /* A POST on a GET path is not found. */
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_POST, "/apps/app-id/channels",
                            NULL, NULL, &a),
                     404);
    answer_fini(&a);
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_POST,
                            "/apps/app-id/channels/news", NULL, NULL, &a),
                     404);
    answer_fini(&a);
    fake_hub_drain(&fx->fh);
    assert_int_equal(queued_frames(fx), 0);
    assert_int_equal(fx->s[2].s.state, HUB_SESSION_OPEN);
    fixture_stop(fx);
}

static void test_rest_413(void **state)
{
    struct fixture *fx = fixture_start();
    size_t big = HUB_REST_MAX_BODY + 1;
    char *body = malloc(big);
    struct answer a;

    (void)state;
    assert_non_null(body);
    memset(body, ' ', big);
    /* Before the signature is looked at. */
    assert_int_equal(handle_raw(&fx->fh, 0, HUB_HTTP_POST,
                                "/apps/app-id/events", "", body, big, &a),
                     413);
    assert_string_equal(answer_error(&a), "request body too large");
    answer_fini(&a);
    free(body);
    /* Event data over max_event_bytes (200): raw bytes are counted. */
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_POST, "/apps/app-id/events",
                            NULL,
                            EV("ev", "news", X200 "x"),
                            &a),
                     413);
    assert_string_equal(answer_error(&a),
                        "event data is 201 bytes; the limit is 200");
    answer_fini(&a);
    /* Exactly at the limit is fine. */
    assert_int_equal(post_events(&fx->fh, 0,
                                 EV("ev", "news", X200)),
                     200);
    fake_hub_drain(&fx->fh);
    assert_int_equal(queued_frames(fx), 2);
    fixture_stop(fx);
}

static void test_rest_401_and_400_from_the_signature(void **state)
{
    struct fixture *fx = fixture_start();
    const char *body = "{\"name\":\"ev\",\"channel\":\"news\",\"data\":\"1\"}";
    char q[HUB_QUERY_MAX_BYTES];
    struct answer a;

    (void)state;
    /* No credentials. */
    assert_int_equal(handle_raw(&fx->fh, 0, HUB_HTTP_GET,
                                "/apps/app-id/channels", "", "", 0, &a),
                     401);
    assert_string_equal(answer_error(&a), "missing auth_key");
    answer_fini(&a);
    assert_int_equal(handle_raw(&fx->fh, 0, HUB_HTTP_GET,
                                "/apps/app-id/channels", NULL, "", 0, &a),
                     401);
    answer_fini(&a);
    /* Signed for the other app's key. */
    assert_int_equal(hub_auth_sign_rest(&fx->fh.apps[1], "GET",
                                        "/apps/app-id/channels", NULL, NULL, 0,
                                        NOW_S, q, sizeof(q)),
                     0);
    assert_int_equal(handle_raw(&fx->fh, 0, HUB_HTTP_GET,
                                "/apps/app-id/channels", q, "", 0, &a),
                     401);
    assert_string_equal(answer_error(&a), "unknown auth_key");
    answer_fini(&a);
    /* Signed as GET, sent as POST: the method is signed. */
    assert_int_equal(hub_auth_sign_rest(&fx->fh.apps[0], "GET",
                                        "/apps/app-id/events", NULL, body,
                                        strlen(body), NOW_S, q, sizeof(q)),
                     0);
    assert_int_equal(handle_raw(&fx->fh, 0, HUB_HTTP_POST,
                                "/apps/app-id/events", q, body, strlen(body),
                                &a),
                     401);
    assert_string_equal(answer_error(&a), "invalid signature");
    answer_fini(&a);
    /* The body is signed: another body, same query. */
    assert_int_equal(hub_auth_sign_rest(&fx->fh.apps[0], "POST",
                                        "/apps/app-id/events", NULL, body,
                                        strlen(body), NOW_S, q, sizeof(q)),
                     0);
    assert_int_equal(handle_raw(&fx->fh, 0, HUB_HTTP_POST,
                                "/apps/app-id/events", q,
                                "{\"name\":\"ev\",\"channel\":\"news\","
                                "\"data\":\"2\"}",
                                strlen(body), &a),
                     401);
    answer_fini(&a);
    /* Stale: signed 601 s before the handler's clock. */
    assert_int_equal(hub_auth_sign_rest(&fx->fh.apps[0], "GET",
                                        "/apps/app-id/channels", NULL, NULL, 0,
                                        NOW_S - 601, q, sizeof(q)),
                     0);
    assert_int_equal(handle_raw(&fx->fh, 0, HUB_HTTP_GET,
                                "/apps/app-id/channels", q, "", 0, &a),
                     401);
    assert_non_null(strstr(answer_error(&a), "stale timestamp"));
    answer_fini(&a);
    /* 400s: a key twice, a bad escape, too many parameters. */
    assert_int_equal(handle_raw(&fx->fh, 0, HUB_HTTP_GET,
                                "/apps/app-id/channels",
                                "info=a&INFO=b&auth_key=app-key", "", 0, &a),
                     400);
    assert_non_null(strstr(answer_error(&a), "duplicate"));
    answer_fini(&a);
    assert_int_equal(handle_raw(&fx->fh, 0, HUB_HTTP_GET,
                                "/apps/app-id/channels", "a=%zz", "", 0, &a),
                     400);
    assert_string_equal(answer_error(&a), "bad query encoding");
    answer_fini(&a);
    {
        char many[512] = "";

        for (int i = 0; i < HUB_QUERY_MAX_PARAMS + 1; i++)
            snprintf(many + strlen(many), sizeof(many) - strlen(many),
                     "%sk%d=1", i ? "&" : "", i);
        assert_int_equal(handle_raw(&fx->fh, 0, HUB_HTTP_GET,
                                    "/apps/app-id/channels", many, "", 0, &a),
                         400);
        assert_string_equal(answer_error(&a), "query too long");
        answer_fini(&a);
    }
    fake_hub_drain(&fx->fh);
    assert_int_equal(queued_frames(fx), 0);
    fixture_stop(fx);
}

static void test_rest_403_disabled_app(void **state)
{
    struct fixture *fx = fixture_start();
    struct answer a;

    (void)state;
    /* After the signature: a valid request of a disabled app. */
    assert_int_equal(handle_app(&fx->fh, 0, &fx->fh.apps[1], HUB_HTTP_GET,
                                "/apps/other-id/channels", NULL, NULL, &a),
                     403);
    assert_string_equal(answer_error(&a), "app is disabled");
    answer_fini(&a);
    /* Unsigned, it is the 401 first. */
    assert_int_equal(handle_raw(&fx->fh, 0, HUB_HTTP_GET,
                                "/apps/other-id/channels", "", "", 0, &a),
                     401);
    answer_fini(&a);
    fixture_stop(fx);
}

/*
 * The app's REST rate limits (hub/base/ratelimit.h): events counted one per
 * event and one per event of a batch, reads one per GET, across loops;
 * over the limit a 429 with Retry-After that publishes nothing; refusals
 * before the signature use up nothing; counted per app.
 */
static void test_rest_429_rate_limits(void **state)
{
    struct fixture *fx = fixture_start();
    struct hub_app_live *v;
    unsigned before;
    struct answer a;

    (void)state;
    fx->fh.apps[0].max_backend_events_per_second = 2;
    fx->fh.apps[0].max_read_requests_per_second = 1;
    v = hub_app_live_of(fx->fh.hub, 0);
    /* Two events pass, on either loop; the third gets 429. */
    assert_int_equal(post_events(&fx->fh, 0, EV("e", "news", "1")), 200);
    assert_int_equal(post_events(&fx->fh, 1, EV("e", "news", "2")), 200);
    fake_hub_drain(&fx->fh);
    before = queued_frames(fx);
    assert_int_equal(handle(&fx->fh, 1, HUB_HTTP_POST, "/apps/app-id/events",
                            NULL, EV("e", "news", "3"), &a),
                     429);
    assert_non_null(strstr(answer_error(&a), "rate limit exceeded"));
    assert_int_equal(last_retry_after, 1);
    answer_fini(&a);
    fake_hub_drain(&fx->fh);
    assert_int_equal(queued_frames(fx), before);
    assert_int_equal(atomic_load(&v->events_limited), 1);
    /* A batch of 3 with a full bucket of 2 passes and leaves a debt of
     * one: the next single event needs 2 tokens, one second. */
    fake_hub_advance(&fx->fh, 1000);
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_POST,
                            "/apps/app-id/batch_events", NULL,
                            "{\"batch\":[" EV("b", "news", "1") ","
                            EV("b", "news", "2") "," EV("b", "news", "3")
                            "]}", &a),
                     200);
    answer_fini(&a);
    assert_int_equal(post_events(&fx->fh, 0, EV("e", "news", "4")), 429);
    assert_int_equal(last_retry_after, 1);
    fake_hub_advance(&fx->fh, 999);
    assert_int_equal(post_events(&fx->fh, 0, EV("e", "news", "5")), 429);
    fake_hub_advance(&fx->fh, 1);
    assert_int_equal(post_events(&fx->fh, 0, EV("e", "news", "6")), 200);
    /* A refused batch counts its events. */
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_POST,
                            "/apps/app-id/batch_events", NULL,
                            "{\"batch\":[" EV("b", "news", "1") ","
                            EV("b", "news", "2") "]}", &a),
                     429);
    answer_fini(&a);
    assert_int_equal(atomic_load(&v->events_limited), 5);
    /* Reads: one a second; an unsigned request is refused before the
     * limit and takes nothing from it. */
    assert_int_equal(handle_raw(&fx->fh, 0, HUB_HTTP_GET,
                                "/apps/app-id/channels", "", "", 0, &a),
                     401);
    answer_fini(&a);
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_GET, "/apps/app-id/channels",
                            NULL, NULL, &a),
                     200);
    answer_fini(&a);
    assert_int_equal(handle(&fx->fh, 1, HUB_HTTP_GET,
                            "/apps/app-id/channels/news", NULL, NULL, &a),
                     429);
    assert_non_null(strstr(answer_error(&a), "read requests"));
    answer_fini(&a);
    assert_int_equal(atomic_load(&v->reads_limited), 1);
    /* The other app has no limits. */
    assert_int_equal(atomic_load(&hub_app_live_of(fx->fh.hub, 1)->
                                 events_limited), 0);
    fixture_stop(fx);
}

/* Every 400 of the events body, one request each; nothing is published. */
static void test_rest_events_400(void **state)
{
    struct fixture *fx = fixture_start();
    static const struct {
        const char *body, *error;
    } cases[] = {
        { "[1]", "body must be a JSON object" },
        { "{\"name\":", "body must be a JSON object" },
        { "{\"channel\":\"news\",\"data\":\"1\"}",
          "\"name\" must be a non-empty string" },
        { "{\"name\":\"\",\"channel\":\"news\",\"data\":\"1\"}",
          "\"name\" must be a non-empty string" },
        { "{\"name\":\"12345678901234567890123456789012345678901\","
          "\"channel\":\"news\",\"data\":\"1\"}",
          "event name longer than 40" },
        { "{\"name\":\"e\",\"channel\":\"news\"}", "\"data\" is missing" },
        { "{\"name\":\"e\",\"channels\":\"news\",\"data\":\"1\"}",
          "\"channels\" must be an array" },
        { "{\"name\":\"e\",\"data\":\"1\"}",
          "\"channels\" or \"channel\" is required" },
        { "{\"name\":\"e\",\"channel\":7,\"data\":\"1\"}",
          "\"channels\" or \"channel\" is required" },
        { "{\"name\":\"e\",\"channels\":[],\"data\":\"1\"}",
          "between 1 and 3 channels per event" },
        { "{\"name\":\"e\",\"channels\":[\"a\",\"b\",\"c\",\"d\"],"
          "\"data\":\"1\"}",
          "between 1 and 3 channels per event" },
        { "{\"name\":\"e\",\"channels\":[\"news\",7],\"data\":\"1\"}",
          "invalid channel name" },
        { "{\"name\":\"e\",\"channel\":\"a b\",\"data\":\"1\"}",
          "invalid channel name" },
        { "{\"name\":\"e\",\"channel\":\"news\",\"data\":\"1\","
          "\"socket_id\":\"nope\"}",
          "\"socket_id\" must look like 1234.5678" },
        { "{\"name\":\"e\",\"channel\":\"news\",\"data\":\"1\","
          "\"socket_id\":12}",
          "\"socket_id\" must look like 1234.5678" },
        { "{\"name\":\"e\",\"channel\":\"news\",\"data\":\"1\","
          "\"info\":1}",
          "\"info\" must be a string" },
    };
    struct answer a;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_int_equal(handle(&fx->fh, i % 2, HUB_HTTP_POST,
                                "/apps/app-id/events", NULL, cases[i].body,
                                &a),
                         400);
        assert_string_equal(answer_error(&a), cases[i].error);
        answer_fini(&a);
    }
    /* batch_events: the shape of the batch itself. */
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_POST,
                            "/apps/app-id/batch_events", NULL,
                            "{\"batch\":{}}", &a),
                     400);
    assert_string_equal(answer_error(&a), "\"batch\" must be an array");
    answer_fini(&a);
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_POST,
                            "/apps/app-id/batch_events", NULL,
                            "{\"batch\":[{},{},{},{}]}", &a),
                     400);
    assert_string_equal(answer_error(&a), "at most 3 events per batch");
    answer_fini(&a);
    assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_POST,
                            "/apps/app-id/batch_events", NULL,
                            "{\"batch\":[7]}", &a),
                     400);
    assert_string_equal(answer_error(&a), "event must be a JSON object");
    answer_fini(&a);
    fake_hub_drain(&fx->fh);
    assert_int_equal(queued_frames(fx), 0);
    fixture_stop(fx);
}

/* The 400s of the GET paths' names. */
static void test_rest_bad_channel_name_400(void **state)
{
    struct fixture *fx = fixture_start();
    static const char *const paths[] = {
        "/apps/app-id/channels/",
        "/apps/app-id/channels//users",
        "/apps/app-id/channels/%zz",
    };
    struct answer a;

    (void)state;
    for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
        assert_int_equal(handle(&fx->fh, 0, HUB_HTTP_GET, paths[i], NULL,
                                NULL, &a),
                         400);
        assert_string_equal(answer_error(&a), "bad channel name");
        answer_fini(&a);
    }
    fixture_stop(fx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rest_event_reaches_every_loop_exactly),
        cmocka_unit_test(test_rest_socket_id_excluded_across_loops),
        cmocka_unit_test(test_rest_encrypted_channel_only_alone),
        cmocka_unit_test(test_rest_events_info),
        cmocka_unit_test(test_rest_batch_publishes_all_or_nothing),
        cmocka_unit_test(test_rest_channels_list),
        cmocka_unit_test(test_rest_channel_info),
        cmocka_unit_test(test_rest_info_key_is_case_sensitive),
        cmocka_unit_test(test_rest_presence_users),
        cmocka_unit_test(test_rest_terminate_user_every_loop),
        cmocka_unit_test(test_rest_404),
        cmocka_unit_test(test_rest_405_get_on_post_paths),
        cmocka_unit_test(test_rest_413),
        cmocka_unit_test(test_rest_401_and_400_from_the_signature),
        cmocka_unit_test(test_rest_403_disabled_app),
        cmocka_unit_test(test_rest_events_400),
        cmocka_unit_test(test_rest_bad_channel_name_400),
        cmocka_unit_test(test_rest_429_rate_limits),
    };

    json_object_seed(1);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
