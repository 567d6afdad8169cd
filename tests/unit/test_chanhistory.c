/*
 * tests/unit/test_chanhistory.c - GET channels/{name}/events
 * (hub/rest/chanhistory.h): a kept frame made into its answer item (data
 * byte for byte, for a string and for a client event's object), and the
 * endpoint at hub_rest_handle() on the fake hub (fake_hub.h) with an app
 * that keeps 5 events per channel: the window, after= paging, since=,
 * complete, the 400s and the 404s.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "fake_hub.h"
#include "hub/base/query.h"
#include "hub/rest/chanhistory.h"
#include "hub/rest/rest.h"
#include "hub/wire/frame.h"
#include "hub/wire/protocol.h"

#define NOW_S 1700000000ull

static uint64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The item of a frame built as the hub builds channel events. */
static json_t *item_of(const char *event, const char *data_json,
                       size_t data_len, const char *user_id)
{
    struct hub_frame *f = hub_proto_event_frame(event, "news", data_json,
                                                data_len, user_id);
    json_t *item;

    assert_non_null(f);
    item = hub_rest_chanhistory_item(f, "b0000abcd:7", 1234);
    hub_frame_unref(f);
    return item;
}

static void test_chanhistory_item_string_data_byte_exact(void **state)
{
    /* "h\u00e9 \"q\" \\ NUL x", as the hub writes a REST event's data. */
    static const char lit[] = "\"h\xc3\xa9 \\\"q\\\" \\\\ \\u0000x\"";
    static const char want[] = "h\xc3\xa9 \"q\" \\ \0x";
    json_t *item = item_of("ev", lit, sizeof(lit) - 1, NULL);
    json_t *data;

    (void)state;
    assert_non_null(item);
    assert_string_equal(json_string_value(json_object_get(item, "id")),
                        "b0000abcd:7");
    assert_string_equal(json_string_value(json_object_get(item, "event")),
                        "ev");
    assert_int_equal(json_integer_value(json_object_get(item, "time_ms")),
                     1234);
    data = json_object_get(item, "data");
    assert_true(json_is_string(data));
    assert_int_equal(json_string_length(data), sizeof(want) - 1);
    assert_memory_equal(json_string_value(data), want, sizeof(want) - 1);
    assert_int_equal(json_object_size(item), 4);
    json_decref(item);
}

static void test_chanhistory_item_object_data_as_its_text(void **state)
{
    /* A client event's data, as the hub relays it (compact jansson text),
     * with the user_id a presence channel adds: user_id is not listed. */
    static const char obj[] =
        "{\"a\":[1,2.5,\"x\\\"y\"],\"b\":{\"c\":null},\"u\":\"\xe2\x82\xac\"}";
    json_t *item = item_of("client-msg", obj, sizeof(obj) - 1, "u1");

    (void)state;
    assert_non_null(item);
    assert_string_equal(json_string_value(json_object_get(item, "data")),
                        obj);
    assert_null(json_object_get(item, "user_id"));
    json_decref(item);
}

static void test_chanhistory_item_not_a_channel_event(void **state)
{
    static const char *bad[] = { "{\"event\":\"x\"}", "not json",
                                 "{\"event\":1,\"data\":\"d\"}", "[]" };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct hub_frame *f = hub_frame_create_text(bad[i], strlen(bad[i]));

        assert_non_null(f);
        assert_null(hub_rest_chanhistory_item(f, "b1:1", 1));
        hub_frame_unref(f);
    }
}

/* The endpoint. */

/* apps[0] keeps 5 events for 120 s on "news*" and "private-*"; apps[1]
 * keeps none. */
static char *patterns[] = { "news*", "private-*" };

static void hub_start(struct fake_hub *fh)
{
    fake_hub_init(fh, 2);
    fh->apps[0].history = true;
    fh->apps[0].history_ttl_ms = 120000;
    fh->apps[0].history_size = 5;
    fh->apps[0].history_channels = patterns;
    fh->apps[0].n_history_channels = 2;
    assert_int_equal(fake_hub_start(fh), 0);
}

/* A signed request for app; the status, the body parsed into *body. */
static int request(struct fake_hub *fh, const struct hub_app *app,
                   enum hub_http_method m, const char *path,
                   const char *extra, const char *body, json_t **out)
{
    char q[HUB_QUERY_MAX_BYTES];
    size_t body_len = body ? strlen(body) : 0;
    struct hub_rest_response r;

    assert_int_equal(hub_auth_sign_rest(app, hub_http_method_name(m), path,
                                        extra, body, body_len, NOW_S, q,
                                        sizeof(q)),
                     0);
    hub_rest_handle(fh->loops[0], m, path, q, body, body_len, NOW_S, &r);
    assert_non_null(r.body);
    *out = json_loads(r.body, 0, NULL);
    free(r.body);
    assert_true(json_is_object(*out));
    return r.status;
}

/* POST events: n events "e<i>" on channel, data "d<i>", i from first. */
static void publish(struct fake_hub *fh, const char *channel, int first,
                    int n)
{
    for (int i = first; i < first + n; i++) {
        char body[256];
        json_t *a;

        snprintf(body, sizeof(body),
                 "{\"name\":\"e%d\",\"channel\":\"%s\",\"data\":\"d%d\"}", i,
                 channel, i);
        assert_int_equal(request(fh, &fh->apps[0], HUB_HTTP_POST,
                                 "/apps/app-id/events", NULL, body, &a),
                         200);
        json_decref(a);
    }
    fake_hub_drain(fh);
}

/* GET events of channel with extra (may be NULL): the status. */
static int get(struct fake_hub *fh, unsigned app, const char *channel,
               const char *extra, json_t **out)
{
    char path[256];

    snprintf(path, sizeof(path), "/apps/%s/channels/%s/events",
             fh->apps[app].id, channel);
    return request(fh, &fh->apps[app], HUB_HTTP_GET, path, extra, NULL,
                   out);
}

/* The numbers i of the answer's events' data "d<i>", in order, as
 * "4,5,6". */
static const char *datas(json_t *a)
{
    static char buf[256];
    size_t n = 0, i;
    json_t *e;

    buf[0] = '\0';
    json_array_foreach(json_object_get(a, "events"), i, e)
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s%s", i ? "," : "",
                              json_string_value(json_object_get(e, "data")) +
                                  1);
    return buf;
}

static bool complete(json_t *a)
{
    json_t *c = json_object_get(a, "complete");

    assert_true(json_is_boolean(c));
    return json_is_true(c);
}

/* The id of the answer's i-th event (static). */
static const char *id_at(json_t *a, size_t i)
{
    static char buf[128];

    snprintf(buf, sizeof(buf), "%s",
             json_string_value(json_object_get(
                 json_array_get(json_object_get(a, "events"), i), "id")));
    return buf;
}

static void test_chanhistory_window_and_trim(void **state)
{
    struct fake_hub fh;
    uint64_t before, after;
    json_t *a, *e;
    size_t i;

    (void)state;
    hub_start(&fh);
    /* A channel with history but nothing kept: empty, and complete (the
     * hub has not dropped anything of the ttl). */
    assert_int_equal(get(&fh, 0, "news", NULL, &a), 200);
    assert_string_equal(datas(a), "");
    assert_true(complete(a));
    json_decref(a);
    publish(&fh, "news", 1, 2);
    assert_int_equal(get(&fh, 0, "news", NULL, &a), 200);
    assert_string_equal(datas(a), "1,2");
    assert_true(complete(a));
    json_decref(a);
    fake_hub_advance(&fh, 10);
    publish(&fh, "news", 3, 6);
    before = wall_ms();
    assert_int_equal(get(&fh, 0, "news", NULL, &a), 200);
    after = wall_ms();
    /* 8 kept in 5: the last five, and 3 lost within the ttl. */
    assert_string_equal(datas(a), "4,5,6,7,8");
    assert_false(complete(a));
    json_array_foreach(json_object_get(a, "events"), i, e) {
        uint64_t t = (uint64_t)json_integer_value(
            json_object_get(e, "time_ms"));
        char want[16];

        snprintf(want, sizeof(want), "e%zu", i + 4);
        assert_string_equal(json_string_value(json_object_get(e, "event")),
                            want);
        assert_non_null(strchr(json_string_value(json_object_get(e, "id")),
                               ':'));
        /* Wall-clock ms (the loop clock did not move since). */
        assert_true(t + 5 >= before && t <= after + 5);
    }
    json_decref(a);
    /* since=0: all of it, never complete (the hub cannot vouch for what
     * came before its history). */
    assert_int_equal(get(&fh, 0, "news", "since=0", &a), 200);
    assert_string_equal(datas(a), "4,5,6,7,8");
    assert_false(complete(a));
    json_decref(a);
    fake_hub_stop(&fh);
}

static void test_chanhistory_after_pages(void **state)
{
    struct fake_hub fh;
    char q[160], first[128];
    json_t *a;

    (void)state;
    hub_start(&fh);
    publish(&fh, "news", 1, 3);
    assert_int_equal(get(&fh, 0, "news", NULL, &a), 200);
    snprintf(first, sizeof(first), "%s", id_at(a, 0));
    json_decref(a);
    publish(&fh, "news", 4, 5);
    /* From an id trimmed since: what is kept after it, incomplete. */
    snprintf(q, sizeof(q), "after=%s&limit=2", first);
    assert_int_equal(get(&fh, 0, "news", q, &a), 200);
    assert_string_equal(datas(a), "4,5");
    assert_false(complete(a));
    /* From a kept one, page by page: complete, the last page short. */
    snprintf(q, sizeof(q), "after=%s&limit=2", id_at(a, 1));
    json_decref(a);
    assert_int_equal(get(&fh, 0, "news", q, &a), 200);
    assert_string_equal(datas(a), "6,7");
    assert_true(complete(a));
    snprintf(q, sizeof(q), "after=%s&limit=2", id_at(a, 1));
    json_decref(a);
    assert_int_equal(get(&fh, 0, "news", q, &a), 200);
    assert_string_equal(datas(a), "8");
    assert_true(complete(a));
    snprintf(q, sizeof(q), "after=%s", id_at(a, 0));
    json_decref(a);
    assert_int_equal(get(&fh, 0, "news", q, &a), 200);
    assert_string_equal(datas(a), "");
    assert_true(complete(a));
    json_decref(a);
    /* Another origin's id (an earlier run): everything, incomplete. */
    assert_int_equal(get(&fh, 0, "news", "after=b00000000:1", &a), 200);
    assert_string_equal(datas(a), "4,5,6,7,8");
    assert_false(complete(a));
    json_decref(a);
    fake_hub_stop(&fh);
}

static void test_chanhistory_since(void **state)
{
    struct fake_hub fh;
    char q[64];
    json_t *a;
    json_int_t t;

    (void)state;
    hub_start(&fh);
    publish(&fh, "news-1", 1, 2);
    fake_hub_advance(&fh, 50);
    publish(&fh, "news-1", 3, 2);
    assert_int_equal(get(&fh, 0, "news-1", NULL, &a), 200);
    t = json_integer_value(json_object_get(
        json_array_get(json_object_get(a, "events"), 2), "time_ms"));
    json_decref(a);
    snprintf(q, sizeof(q), "since=%" JSON_INTEGER_FORMAT, t);
    assert_int_equal(get(&fh, 0, "news-1", q, &a), 200);
    assert_string_equal(datas(a), "3,4");
    assert_true(complete(a));
    json_decref(a);
    snprintf(q, sizeof(q), "since=%" JSON_INTEGER_FORMAT "&limit=1", t - 50);
    assert_int_equal(get(&fh, 0, "news-1", q, &a), 200);
    assert_string_equal(datas(a), "1");
    assert_true(complete(a));
    json_decref(a);
    /* In the future: nothing, and nothing can be missing. */
    snprintf(q, sizeof(q), "since=%" JSON_INTEGER_FORMAT, t + 60000);
    assert_int_equal(get(&fh, 0, "news-1", q, &a), 200);
    assert_string_equal(datas(a), "");
    assert_true(complete(a));
    json_decref(a);
    fake_hub_stop(&fh);
}

static void test_chanhistory_client_event_kept(void **state)
{
    struct fake_hub fh;
    struct fake_session fs[2];
    json_t *a, *e;

    (void)state;
    hub_start(&fh);
    for (unsigned i = 0; i < 2; i++) {
        assert_int_equal(fake_session_open(&fh, &fs[i], i, &fh.apps[0]), 0);
        assert_int_equal(fake_subscribe(&fh, &fs[i].s, "private-a", NULL),
                         0);
    }
    fake_hub_drain(&fh);
    assert_int_equal(fake_recv(&fh, &fs[0].s,
                               "{\"event\":\"client-x\",\"channel\":"
                               "\"private-a\",\"data\":{\"k\":[1,\"v\"]}}"),
                     0);
    fake_hub_drain(&fh);
    assert_int_equal(get(&fh, 0, "private-a", NULL, &a), 200);
    e = json_array_get(json_object_get(a, "events"), 0);
    assert_string_equal(json_string_value(json_object_get(e, "event")),
                        "client-x");
    assert_string_equal(json_string_value(json_object_get(e, "data")),
                        "{\"k\":[1,\"v\"]}");
    json_decref(a);
    for (unsigned i = 0; i < 2; i++)
        hub_session_fini(&fs[i].s, HUB_CLOSE_PEER);
    fake_hub_drain(&fh);
    fake_hub_stop(&fh);
}

static void test_chanhistory_400_and_404(void **state)
{
    static const char *bad[] = {
        "since=1&after=b1:1", "since=-1", "since=x", "since=",
        "since=1234567890123456789", "after=nocolon", "after=b1:",
        "after=:5", "limit=0", "limit=1001", "limit=ten", "limit=",
    };
    struct fake_hub fh;
    json_t *a;

    (void)state;
    hub_start(&fh);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(get(&fh, 0, "news", bad[i], &a), 400);
        json_decref(a);
    }
    assert_int_equal(get(&fh, 0, "news", "limit=1000", &a), 200);
    json_decref(a);
    assert_int_equal(get(&fh, 0, "other", NULL, &a), 404);
    assert_string_equal(json_string_value(json_object_get(a, "error")),
                        "history is not enabled for this channel");
    json_decref(a);
    assert_int_equal(get(&fh, 1, "news", NULL, &a), 404);
    assert_string_equal(json_string_value(json_object_get(a, "error")),
                        "history is not enabled for this app");
    json_decref(a);
    /* Only GET, and only /events after the name. */
    assert_int_equal(request(&fh, &fh.apps[0], HUB_HTTP_POST,
                             "/apps/app-id/channels/news/events", NULL, NULL,
                             &a),
                     404);
    json_decref(a);
    assert_int_equal(get(&fh, 0, "news/x", NULL, &a), 404);
    json_decref(a);
    fake_hub_stop(&fh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chanhistory_item_string_data_byte_exact),
        cmocka_unit_test(test_chanhistory_item_object_data_as_its_text),
        cmocka_unit_test(test_chanhistory_item_not_a_channel_event),
        cmocka_unit_test(test_chanhistory_window_and_trim),
        cmocka_unit_test(test_chanhistory_after_pages),
        cmocka_unit_test(test_chanhistory_since),
        cmocka_unit_test(test_chanhistory_client_event_kept),
        cmocka_unit_test(test_chanhistory_400_and_404),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
