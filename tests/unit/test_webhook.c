/*
 * tests/unit/test_webhook.c - hub/webhook/webhook.h: filter matching, the body
 * encoding, the backoff schedule, the bounded queue, the directory's edge
 * hook, and the engine's delay, cancellation and batching, on a clock
 * driven by hand. Single-threaded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "fail_alloc.h"
#include "hub/app/app.h"
#include "hub/loop/directory.h"
#include "hub/webhook/encode.h"
#include "hub/webhook/engine.h"
#include "hub/webhook/queue.h"
#include "hub/webhook/webhook.h"
#include "hub/webhook/wh_stream.h"

static struct hub_wh_conf conf(unsigned types, const char *pre,
                               const char *suf)
{
    struct hub_wh_conf w = { 0 };

    w.url = "http://x/";
    w.types = types;
    w.starts_with = (char *)pre;
    w.ends_with = (char *)suf;
    return w;
}

static void test_webhook_type_names(void **state)
{
    (void)state;
    for (unsigned i = 0; i < HUB_WH_N_TYPES; i++)
        assert_int_equal(hub_wh_type_parse(hub_wh_type_name(i)), (int)i);
    assert_string_equal(hub_wh_type_name(HUB_WH_CACHE_MISS), "cache_miss");
    assert_int_equal(hub_wh_type_parse("channel_opened"), -1);
    assert_null(hub_wh_type_name(HUB_WH_N_TYPES));
}

static void test_webhook_filter_matching(void **state)
{
    struct hub_wh_conf any = conf(HUB_WH_ALL_TYPES, NULL, NULL);
    struct hub_wh_conf pre =
        conf(HUB_WH_BIT(HUB_WH_CHANNEL_OCCUPIED), "presence-", NULL);
    struct hub_wh_conf both = conf(HUB_WH_ALL_TYPES, "a", "-z");

    (void)state;
    assert_true(hub_wh_matches(&any, HUB_WH_CLIENT_EVENT, "x"));
    assert_false(hub_wh_matches(&any, HUB_WH_N_TYPES, "x"));
    assert_true(hub_wh_matches(&pre, HUB_WH_CHANNEL_OCCUPIED,
                               "presence-1"));
    assert_false(hub_wh_matches(&pre, HUB_WH_CHANNEL_VACATED,
                                "presence-1"));
    assert_false(hub_wh_matches(&pre, HUB_WH_CHANNEL_OCCUPIED,
                                "private-1"));
    assert_false(hub_wh_matches(&pre, HUB_WH_CHANNEL_OCCUPIED,
                                "presence"));
    assert_true(hub_wh_matches(&both, HUB_WH_CACHE_MISS, "a-z"));
    assert_true(hub_wh_matches(&both, HUB_WH_CACHE_MISS, "abc-z"));
    assert_false(hub_wh_matches(&both, HUB_WH_CACHE_MISS, "abc-y"));
    assert_false(hub_wh_matches(&both, HUB_WH_CACHE_MISS, "-z"));
    assert_false(hub_wh_matches(&both, HUB_WH_CACHE_MISS, "z"));
}

static void test_webhook_encode(void **state)
{
    struct hub_wh_event *e[3];
    uint64_t seqs[3] = { 7, 8, 9 };
    struct hub_wh_conf only_ce = conf(HUB_WH_BIT(HUB_WH_CLIENT_EVENT),
                                      NULL, NULL);
    struct hub_wh_conf none = conf(HUB_WH_BIT(HUB_WH_CACHE_MISS), NULL,
                                   NULL);
    size_t len;
    unsigned n;
    char *body;

    (void)state;
    e[0] = hub_wh_event_new(0, HUB_WH_CHANNEL_OCCUPIED, "ch-1xx", 4, NULL,
                            NULL, NULL, NULL);
    e[1] = hub_wh_event_new(0, HUB_WH_MEMBER_ADDED, "presence-p", 10, "u\"1",
                            NULL, NULL, NULL);
    e[2] = hub_wh_event_new(0, HUB_WH_CLIENT_EVENT, "private-p", 9, NULL,
                            "client-x", "{\"a\":1}", "1.2");
    body = hub_wh_encode((const struct hub_wh_event *const *)e, seqs, 3, NULL,
                         0xabcull, 1234, &len, &n);
    assert_non_null(body);
    assert_int_equal(n, 3);
    assert_int_equal(len, strlen(body));
    assert_string_equal(
        body,
        "{\"time_ms\":1234,\"events\":["
        "{\"name\":\"channel_occupied\",\"channel\":\"ch-1\","
        "\"id\":\"0000000000000abc-7\"},"
        "{\"name\":\"member_added\",\"channel\":\"presence-p\","
        "\"user_id\":\"u\\\"1\",\"id\":\"0000000000000abc-8\"},"
        "{\"name\":\"client_event\",\"channel\":\"private-p\","
        "\"event\":\"client-x\",\"data\":\"{\\\"a\\\":1}\","
        "\"socket_id\":\"1.2\",\"id\":\"0000000000000abc-9\"}]}");
    free(body);
    body = hub_wh_encode((const struct hub_wh_event *const *)e, seqs, 3,
                         &only_ce, 1, 1, &len, &n);
    assert_non_null(body);
    assert_int_equal(n, 1);
    assert_non_null(strstr(body, "client_event"));
    assert_null(strstr(body, "occupied"));
    free(body);
    body = hub_wh_encode((const struct hub_wh_event *const *)e, seqs, 3,
                         &none, 1, 1, &len, &n);
    assert_null(body);
    assert_int_equal(n, 0);
    for (int i = 0; i < 3; i++)
        free(e[i]);
}

/* The direct encoder writes what jansson writes, for every ASCII byte in
 * every string field; a non-ASCII string goes through jansson (and comes
 * out the same). */
static void test_webhook_encode_matches_jansson(void **state)
{
    char all[128], uid[40], sid[8];
    const char *datas[] = { all, "", "{\"a\":\"b\\\\c\"}", "caf\xc3\xa9 \xe2\x82\xac" };

    (void)state;
    for (int i = 1; i < 128; i++)
        all[i - 1] = (char)i;
    all[127] = '\0';
    for (unsigned k = 0; k < sizeof(datas) / sizeof(datas[0]); k++) {
        struct hub_wh_event *e[2];
        uint64_t seqs[2] = { 18446744073709551615ull, 2 };
        json_t *root, *arr;
        char *want, *body;
        size_t len;
        unsigned n;

        snprintf(uid, sizeof(uid), "u\t\"%u\x01\x1f\x7f/", k);
        snprintf(sid, sizeof(sid), "%u.%u", k, k + 1);
        e[0] = hub_wh_event_new(0, HUB_WH_CLIENT_EVENT, "private-\\x", 10,
                                uid, "client-\"e", datas[k], sid);
        e[1] = hub_wh_event_new(0, HUB_WH_MEMBER_REMOVED, "presence-p", 10,
                                datas[k], NULL, NULL, NULL);
        arr = json_array();
        json_array_append_new(
            arr, json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "name",
                           "client_event", "channel", "private-\\x", "event",
                           "client-\"e", "data", datas[k], "socket_id", sid,
                           "user_id", uid, "id",
                           "00000000deadbeef-18446744073709551615"));
        json_array_append_new(
            arr, json_pack("{s:s,s:s,s:s,s:s}", "name", "member_removed",
                           "channel", "presence-p", "user_id", datas[k], "id",
                           "00000000deadbeef-2"));
        root = json_pack("{s:I,s:o}", "time_ms", (json_int_t)1733090000123,
                         "events", arr);
        assert_non_null(root);
        want = json_dumps(root, JSON_COMPACT);
        json_decref(root);
        body = hub_wh_encode((const struct hub_wh_event *const *)e, seqs, 2,
                             NULL, 0xdeadbeefull, 1733090000123ull, &len, &n);
        assert_non_null(body);
        assert_int_equal(n, 2);
        assert_string_equal(body, want);
        assert_int_equal(len, strlen(want));
        free(body);
        free(want);
        free(e[0]);
        free(e[1]);
    }
}

static void test_webhook_queue_bounded(void **state)
{
    struct hub_app app = { 0 };
    struct hub_wh_queue q;
    struct hub_wh_event *l;
    unsigned n = 0;

    (void)state;
    app.webhook_types = HUB_WH_BIT(HUB_WH_CACHE_MISS);
    assert_int_equal(hub_wh_queue_init(&q, 3, &app, 1), 0);
    assert_true(hub_wh_queue_wants(&q, 0, HUB_WH_CACHE_MISS));
    assert_false(hub_wh_queue_wants(&q, 0, HUB_WH_CLIENT_EVENT));
    assert_false(hub_wh_queue_wants(&q, 1, HUB_WH_CACHE_MISS));
    for (int i = 0; i < 5; i++)
        hub_wh_queue_push(&q, hub_wh_event_new(0, HUB_WH_CACHE_MISS, "c", 1,
                                               NULL, NULL, NULL, NULL));
    assert_int_equal(atomic_load(&q.dropped), 2);
    assert_int_equal(atomic_load(&q.enqueued), 3);
    l = hub_wh_queue_pop_all(&q);
    while (l) {
        struct hub_wh_event *next = l->next;

        free(l);
        l = next;
        n++;
    }
    assert_int_equal(n, 3);
    assert_null(hub_wh_queue_pop_all(&q));
    /* The byte bound too. */
    q.max_bytes = 2 * sizeof(struct hub_wh_event) + 100;
    assert_int_equal(
        hub_wh_queue_push(&q, hub_wh_event_new(0, HUB_WH_CACHE_MISS, "c", 1,
                                               NULL, NULL, NULL, NULL)),
        0);
    assert_int_equal(
        hub_wh_queue_push(&q, hub_wh_event_new(0, HUB_WH_CACHE_MISS, "c", 1,
                                               NULL, NULL, NULL, NULL)),
        0);
    assert_int_equal(
        hub_wh_queue_push(&q, hub_wh_event_new(0, HUB_WH_CACHE_MISS,
                                               "cccccccccccccccccccc"
                                               "cccccccccccccccccccc"
                                               "cccccccccccccccccccc",
                                               60, NULL, NULL, NULL, NULL)),
        -ENOSPC);
    hub_wh_queue_fini(&q);         /* frees what is left */
}

/* The directory reports edges in order, under its lock. */
static struct {
    enum hub_dir_edge_kind kind[32];
    char name[32][16];
    char uid[32][16];
    unsigned n;
} seen;

static void record(void *ctx, const struct hub_dir_edge *e)
{
    (void)ctx;
    seen.kind[seen.n] = e->kind;
    snprintf(seen.name[seen.n], 16, "%.*s", (int)e->len, e->name);
    snprintf(seen.uid[seen.n], 16, "%s", e->user_id ? e->user_id : "");
    seen.n++;
}

static void test_webhook_directory_edges(void **state)
{
    struct hub_directory *d = hub_directory_create();
    struct hub_presence_join j = { .user_id = "u1" };
    bool last;

    (void)state;
    memset(&seen, 0, sizeof(seen));
    hub_directory_set_edge_hook(d, record, NULL);
    assert_int_equal(hub_directory_join(d, 0, "pubX", 3, NULL), 0);
    assert_int_equal(hub_directory_join(d, 0, "pub", 3, NULL), 0);
    assert_int_equal(seen.n, 1);
    assert_int_equal(seen.kind[0], HUB_DIR_CHANNEL_FIRST);
    assert_string_equal(seen.name[0], "pub");
    assert_int_equal(hub_directory_join(d, 0, "presence-a", 10, &j), 0);
    free(j.members_json);
    j = (struct hub_presence_join){ .user_id = "u1" };
    assert_int_equal(hub_directory_join(d, 0, "presence-a", 10, &j), 0);
    free(j.members_json);
    assert_int_equal(seen.n, 3);
    assert_int_equal(seen.kind[1], HUB_DIR_CHANNEL_FIRST);
    assert_int_equal(seen.kind[2], HUB_DIR_MEMBER_FIRST);
    assert_string_equal(seen.uid[2], "u1");
    hub_directory_leave_seq(d, 0, "presence-a", 10, "u1", &last, NULL);
    assert_false(last);
    assert_int_equal(seen.n, 3);
    hub_directory_leave_seq(d, 0, "presence-a", 10, "u1", &last, NULL);
    assert_true(last);
    assert_int_equal(seen.n, 5);
    assert_int_equal(seen.kind[3], HUB_DIR_MEMBER_LAST);
    assert_int_equal(seen.kind[4], HUB_DIR_CHANNEL_LAST);
    assert_string_equal(seen.name[4], "presence-a");
    hub_directory_leave_seq(d, 0, "pub", 3, NULL, NULL, NULL);
    hub_directory_leave_seq(d, 0, "pub", 3, NULL, NULL, NULL);
    assert_int_equal(seen.n, 6);
    assert_int_equal(seen.kind[5], HUB_DIR_CHANNEL_LAST);
    hub_directory_set_edge_hook(d, NULL, NULL);
    assert_int_equal(hub_directory_join(d, 0, "pub", 3, NULL), 0);
    assert_int_equal(seen.n, 6);
    hub_directory_destroy(d);
}

/* The engine: what it emits, per webhook. */
static struct {
    char *body[64];
    unsigned hook[64];
    unsigned app[64];
    unsigned n;
} out;

static void emit(void *ctx, struct hub_wh_out *o)
{
    (void)ctx;
    assert_true(out.n < 64);
    assert_non_null(o->batch_id);
    out.body[out.n] = o->body;
    out.hook[out.n] = o->hook;
    out.app[out.n] = o->app;
    out.n++;
}

static void out_reset(void)
{
    for (unsigned i = 0; i < out.n; i++)
        free(out.body[i]);
    memset(&out, 0, sizeof(out));
}

/* The event names of body i, comma-joined, in buf. */
static const char *names(unsigned i, char *buf, size_t len)
{
    json_t *root = json_loads(out.body[i], 0, NULL), *ev;
    size_t k;

    assert_non_null(root);
    buf[0] = '\0';
    json_array_foreach(json_object_get(root, "events"), k, ev) {
        size_t at = strlen(buf);

        snprintf(buf + at, len - at, "%s%s:%s", k ? "," : "",
                 json_string_value(json_object_get(ev, "name")),
                 json_string_value(json_object_get(ev, "channel")));
    }
    json_decref(root);
    return buf;
}

static struct hub_wh_event *ev(unsigned type, const char *ch,
                               const char *uid)
{
    return hub_wh_event_new(0, type, ch, strlen(ch), uid, NULL, NULL, NULL);
}

static void test_webhook_engine_delay_and_cancel(void **state)
{
    struct hub_wh_conf w = conf(HUB_WH_ALL_TYPES, NULL, NULL);
    struct hub_app app = { 0 };
    struct hub_wh_engine *e;
    struct hub_wh_engine_stats st;
    uint64_t now = 1000;
    char buf[512];

    (void)state;
    out_reset();
    app.webhooks = &w;
    app.n_webhooks = 1;
    app.webhook_types = HUB_WH_ALL_TYPES;
    app.webhook_batching = false;
    e = hub_wh_engine_create(&app, 1, 3000, 1, now, emit, NULL);
    assert_non_null(e);
    hub_wh_engine_advance(e, now, 5);
    hub_wh_engine_feed(e, ev(HUB_WH_CHANNEL_OCCUPIED, "c", NULL), now);
    hub_wh_engine_feed(e, ev(HUB_WH_MEMBER_ADDED, "c", "u"), now);
    assert_int_equal(out.n, 2);
    /* A refresh: both closes wait, both opens cancel them. */
    hub_wh_engine_feed(e, ev(HUB_WH_MEMBER_REMOVED, "c", "u"), now);
    hub_wh_engine_feed(e, ev(HUB_WH_CHANNEL_VACATED, "c", NULL), now);
    hub_wh_engine_get_stats(e, &st);
    assert_int_equal(st.delayed, 2);
    now += 2900;
    hub_wh_engine_advance(e, now, 5);
    assert_int_equal(out.n, 2);
    hub_wh_engine_feed(e, ev(HUB_WH_CHANNEL_OCCUPIED, "c", NULL), now);
    hub_wh_engine_feed(e, ev(HUB_WH_MEMBER_ADDED, "c", "u"), now);
    hub_wh_engine_get_stats(e, &st);
    assert_int_equal(st.delayed, 0);
    assert_int_equal(st.cancelled, 2);
    now += 10000;
    hub_wh_engine_advance(e, now, 5);
    assert_int_equal(out.n, 2);
    /* A real leave: sent once the delay is over, not before. */
    hub_wh_engine_feed(e, ev(HUB_WH_MEMBER_REMOVED, "c", "u"), now);
    hub_wh_engine_feed(e, ev(HUB_WH_CHANNEL_VACATED, "c", NULL), now);
    hub_wh_engine_advance(e, now + 2990, 5);
    assert_int_equal(out.n, 2);
    hub_wh_engine_advance(e, now + 3020, 5);
    assert_int_equal(out.n, 4);
    assert_string_equal(names(2, buf, sizeof(buf)), "member_removed:c");
    assert_string_equal(names(3, buf, sizeof(buf)), "channel_vacated:c");
    /* Destroyed with a delay armed and a batch open: nothing leaks or
     * fires (ASan checks). */
    {
        struct hub_wh_engine *e2 =
            hub_wh_engine_create(&app, 1, 3000, 1, now, emit, NULL);

        app.webhook_batching = true;
        hub_wh_engine_feed(e2, ev(HUB_WH_CHANNEL_OCCUPIED, "d", NULL), now);
        hub_wh_engine_feed(e2, ev(HUB_WH_CHANNEL_VACATED, "d", NULL), now);
        hub_wh_engine_feed(e2, ev(HUB_WH_CHANNEL_OCCUPIED, "e", NULL), now);
        hub_wh_engine_destroy(e2);
        app.webhook_batching = false;
        assert_int_equal(out.n, 4);
    }
    /* At shutdown a waiting close is released, not lost. */
    {
        struct hub_wh_engine *e3 =
            hub_wh_engine_create(&app, 1, 3000, 1, now, emit, NULL);

        hub_wh_engine_feed(e3, ev(HUB_WH_CHANNEL_OCCUPIED, "f", NULL), now);
        hub_wh_engine_feed(e3, ev(HUB_WH_CHANNEL_VACATED, "f", NULL), now);
        assert_int_equal(out.n, 5);
        hub_wh_engine_flush(e3, 5);
        assert_int_equal(out.n, 6);
        assert_string_equal(names(5, buf, sizeof(buf)), "channel_vacated:f");
        hub_wh_engine_get_stats(e3, &st);
        assert_int_equal(st.delayed, 0);
        hub_wh_engine_destroy(e3);
    }
    /* A close whose open was never seen (lost to a full queue): nothing. */
    hub_wh_engine_feed(e, ev(HUB_WH_CHANNEL_VACATED, "never", NULL), now);
    hub_wh_engine_advance(e, now + 10000, 5);
    assert_int_equal(out.n, 6);
    /* A cluster node: the open was another node's to send; the close goes
     * at once. A pair this node saw keeps its delay. */
    hub_wh_engine_set_shared(e, true);
    now += 10000;
    hub_wh_engine_feed(e, ev(HUB_WH_MEMBER_REMOVED, "g", "u"), now);
    hub_wh_engine_advance(e, now + 10, 5);
    assert_int_equal(out.n, 7);
    assert_string_equal(names(6, buf, sizeof(buf)), "member_removed:g");
    hub_wh_engine_feed(e, ev(HUB_WH_CHANNEL_OCCUPIED, "h", NULL), now);
    hub_wh_engine_feed(e, ev(HUB_WH_CHANNEL_VACATED, "h", NULL), now);
    hub_wh_engine_advance(e, now + 10, 5);
    assert_int_equal(out.n, 8);
    hub_wh_engine_advance(e, now + 3100, 5);
    assert_int_equal(out.n, 9);
    hub_wh_engine_destroy(e);
    out_reset();
}

static void test_webhook_engine_batching_and_filters(void **state)
{
    struct hub_wh_conf w[2] = {
        conf(HUB_WH_BIT(HUB_WH_CHANNEL_OCCUPIED), NULL, NULL),
        conf(HUB_WH_BIT(HUB_WH_CHANNEL_OCCUPIED) |
                 HUB_WH_BIT(HUB_WH_CACHE_MISS),
             "b", NULL),
    };
    struct hub_app app = { 0 };
    struct hub_wh_engine *e;
    uint64_t now = 0;
    char buf[2048], name[8];

    (void)state;
    out_reset();
    app.webhooks = w;
    app.n_webhooks = 2;
    app.webhook_types = w[0].types | w[1].types;
    app.webhook_batching = true;
    e = hub_wh_engine_create(&app, 1, 0, 1, now, emit, NULL);
    hub_wh_engine_advance(e, now, 5);
    hub_wh_engine_feed(e, ev(HUB_WH_CHANNEL_OCCUPIED, "a1", NULL), now);
    hub_wh_engine_feed(e, ev(HUB_WH_CHANNEL_OCCUPIED, "b1", NULL), now);
    hub_wh_engine_feed(e, ev(HUB_WH_CACHE_MISS, "b2", NULL), now);
    /* Not wanted by anyone: the other half of a pair, dropped. */
    hub_wh_engine_feed(e, ev(HUB_WH_CHANNEL_VACATED, "a1", NULL), now);
    assert_true(hub_wh_engine_advance(e, now + 100, 5) <= 160);
    assert_int_equal(out.n, 0);
    hub_wh_engine_advance(e, now + 260, 5);
    assert_int_equal(out.n, 2);
    assert_int_equal(out.hook[0], 0);
    assert_string_equal(names(0, buf, sizeof(buf)),
                        "channel_occupied:a1,channel_occupied:b1");
    assert_int_equal(out.hook[1], 1);
    assert_string_equal(names(1, buf, sizeof(buf)),
                        "channel_occupied:b1,cache_miss:b2");
    out_reset();
    /* 20 events flush at once, the 21st waits for the window. */
    for (int i = 0; i < 21; i++) {
        snprintf(name, sizeof(name), "c%d", i);
        hub_wh_engine_feed(e, ev(HUB_WH_CHANNEL_OCCUPIED, name, NULL),
                           now + 300);
    }
    assert_int_equal(out.n, 1);
    hub_wh_engine_flush(e, 5);
    assert_int_equal(out.n, 2);
    assert_string_equal(names(1, buf, sizeof(buf)), "channel_occupied:c20");
    hub_wh_engine_destroy(e);
    out_reset();
}

static unsigned wakes;

static void count_wake(void *ctx)
{
    (void)ctx;
    wakes++;
}

static void push_cm(struct hub_wh_queue *q)
{
    assert_int_equal(
        hub_wh_queue_push(q, hub_wh_event_new(0, HUB_WH_CACHE_MISS, "c", 1,
                                              NULL, NULL, NULL, NULL)),
        0);
}

static void free_events(struct hub_wh_event *l)
{
    while (l) {
        struct hub_wh_event *next = l->next;

        free(l);
        l = next;
    }
}

/* The sender is woken per empty queue by default, per batch's worth while
 * it has a batch open (hub_wh_queue_set_room), and learns what was queued. */
static void test_webhook_queue_wakes(void **state)
{
    struct hub_app app = { 0 };
    struct hub_wh_queue q;

    (void)state;
    app.webhook_types = HUB_WH_BIT(HUB_WH_CACHE_MISS);
    assert_int_equal(hub_wh_queue_init(&q, 100, &app, 1), 0);
    q.wake = count_wake;
    wakes = 0;
    push_cm(&q);
    push_cm(&q);
    assert_int_equal(wakes, 1);
    free_events(hub_wh_queue_pop_all(&q));
    push_cm(&q);
    assert_int_equal(wakes, 2);
    /* Room 3 with one queued: the third event wakes, not the second. */
    assert_int_equal(hub_wh_queue_set_room(&q, 3), 1);
    push_cm(&q);
    assert_int_equal(wakes, 2);
    push_cm(&q);
    assert_int_equal(wakes, 3);
    push_cm(&q);
    assert_int_equal(wakes, 3);
    free_events(hub_wh_queue_pop_all(&q));
    /* Back to 0: the first push into the empty queue wakes again. */
    assert_int_equal(hub_wh_queue_set_room(&q, 0), 0);
    push_cm(&q);
    assert_int_equal(wakes, 4);
    hub_wh_queue_fini(&q);
}

/* hub_wh_engine_room: 0 with no batch open or an app without batching,
 * else what the fullest open batch has left. */
static void test_webhook_engine_room(void **state)
{
    struct hub_wh_conf w = conf(HUB_WH_ALL_TYPES, NULL, NULL);
    struct hub_app apps[2] = { { 0 }, { 0 } };
    struct hub_wh_engine *e;
    char name[8];

    (void)state;
    out_reset();
    for (int i = 0; i < 2; i++) {
        apps[i].webhooks = &w;
        apps[i].n_webhooks = 1;
        apps[i].webhook_types = HUB_WH_ALL_TYPES;
        apps[i].webhook_batching = true;
    }
    e = hub_wh_engine_create(apps, 2, 0, 1, 0, emit, NULL);
    assert_non_null(e);
    assert_int_equal(hub_wh_engine_room(e), 0);
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof(name), "a%d", i);
        hub_wh_engine_feed(e, ev(HUB_WH_CHANNEL_OCCUPIED, name, NULL), 0);
    }
    assert_int_equal(hub_wh_engine_room(e), HUB_WH_BATCH_EVENTS - 5);
    {
        struct hub_wh_event *x =
            hub_wh_event_new(1, HUB_WH_CACHE_MISS, "b", 1, NULL, NULL, NULL,
                             NULL);

        hub_wh_engine_feed(e, x, 0);
    }
    assert_int_equal(hub_wh_engine_room(e), HUB_WH_BATCH_EVENTS - 5);
    for (int i = 5; i < HUB_WH_BATCH_EVENTS - 1; i++) {
        snprintf(name, sizeof(name), "a%d", i);
        hub_wh_engine_feed(e, ev(HUB_WH_CHANNEL_OCCUPIED, name, NULL), 0);
    }
    assert_int_equal(hub_wh_engine_room(e), 1);
    hub_wh_engine_feed(e, ev(HUB_WH_CHANNEL_OCCUPIED, "last", NULL), 0);
    assert_int_equal(out.n, 1);    /* app 0's batch of 20 went */
    assert_int_equal(hub_wh_engine_room(e), HUB_WH_BATCH_EVENTS - 1);
    /* An app that sends at once: every event must be taken at once. */
    apps[1].webhook_batching = false;
    assert_int_equal(hub_wh_engine_room(e), 0);
    apps[1].webhook_batching = true;
    hub_wh_engine_flush(e, 5);
    assert_int_equal(hub_wh_engine_room(e), 0);
    hub_wh_engine_destroy(e);
    out_reset();
}

/* One engine run: edges, a delay, a batch, a flush, teardown. */
static void engine_run(const struct hub_app *app)
{
    struct hub_wh_engine *e =
        hub_wh_engine_create(app, 1, 100, 1, 0, emit, NULL);
    struct hub_wh_event *l = NULL, **tail = &l;
    static const struct {
        unsigned type;
        const char *ch, *uid;
    } evs[] = {
        { HUB_WH_CHANNEL_OCCUPIED, "presence-a", NULL },
        { HUB_WH_MEMBER_ADDED, "presence-a", "u1" },
        { HUB_WH_CLIENT_EVENT, "presence-a", "u1" },
        { HUB_WH_MEMBER_REMOVED, "presence-a", "u1" },
        { HUB_WH_CHANNEL_OCCUPIED, "b", NULL },
        { HUB_WH_CHANNEL_VACATED, "b", NULL },
        { HUB_WH_CACHE_MISS, "cache-c", NULL },
    };

    if (!e)
        return;
    for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++) {
        struct hub_wh_event *x = hub_wh_event_new(
            0, evs[i].type, evs[i].ch, strlen(evs[i].ch), evs[i].uid,
            evs[i].type == HUB_WH_CLIENT_EVENT ? "client-x" : NULL,
            evs[i].type == HUB_WH_CLIENT_EVENT ? "{}" : NULL,
            evs[i].type == HUB_WH_CLIENT_EVENT ? "1.1" : NULL);

        if (x) {
            *tail = x;
            tail = &x->next;
        }
    }
    hub_wh_engine_advance(e, 0, 1);
    hub_wh_engine_feed(e, l, 0);
    hub_wh_engine_advance(e, 300, 1);
    /* The member_removed and vacated delays are armed: destroy frees them. */
    hub_wh_engine_feed(e, hub_wh_event_new(0, HUB_WH_CHANNEL_VACATED,
                                           "presence-a", 10, NULL, NULL,
                                           NULL, NULL),
                       300);
    hub_wh_engine_flush(e, 1);
    hub_wh_engine_destroy(e);
}

static void test_webhook_engine_nomem(void **state)
{
    struct hub_wh_conf w[2] = {
        conf(HUB_WH_ALL_TYPES, NULL, NULL),
        conf(HUB_WH_ALL_TYPES, "presence-", NULL),
    };
    struct hub_app app = { 0 };

    (void)state;
    out_reset();
    app.webhooks = w;
    app.n_webhooks = 2;
    app.webhook_types = HUB_WH_ALL_TYPES;
    app.webhook_batching = true;
    FAIL_ALLOC_COUNTDOWN(
        {
            engine_run(&app);
            out_reset();
        },
        { assert_int_equal(fail_alloc_live(), fa_live_before); });
}

/* A reload (hub_wh_engine_set_apps): the open batch goes out under the
 * old webhooks, a delayed edge waits on and goes out under the new ones,
 * an added app's events come through, and the loops' wanted types
 * follow (hub_wh_queue_set_wants). Fake clock. */
static void test_webhook_engine_reload(void **state)
{
    struct hub_wh_conf w_old = conf(HUB_WH_ALL_TYPES, "a-", NULL);
    struct hub_wh_conf w_new = conf(HUB_WH_ALL_TYPES, "b-", NULL);
    struct hub_wh_conf w_add = conf(HUB_WH_BIT(HUB_WH_CACHE_MISS), NULL,
                                    NULL);
    struct hub_app old = { 0 }, next[2] = { { 0 }, { 0 } };
    struct hub_wh_engine *e;
    struct hub_wh_queue q;
    uint64_t now = 1000;
    char buf[512];

    (void)state;
    out_reset();
    old.webhooks = &w_old;
    old.n_webhooks = 1;
    old.webhook_types = HUB_WH_ALL_TYPES;
    old.webhook_batching = true;
    next[0] = old;
    next[0].webhooks = &w_new;
    next[1].webhooks = &w_add;
    next[1].n_webhooks = 1;
    next[1].webhook_types = HUB_WH_BIT(HUB_WH_CACHE_MISS);
    next[1].webhook_batching = false;
    e = hub_wh_engine_create(&old, 1, 3000, 1, now, emit, NULL);
    assert_non_null(e);
    hub_wh_engine_advance(e, now, 5);
    hub_wh_engine_feed(e, ev(HUB_WH_CHANNEL_OCCUPIED, "a-1", NULL), now);
    hub_wh_engine_feed(e, ev(HUB_WH_CHANNEL_OCCUPIED, "b-1", NULL), now);
    assert_int_equal(out.n, 0);   /* in the open batch */
    /* Indices are kept: fewer apps is refused, nothing changes. */
    assert_int_equal(hub_wh_engine_set_apps(e, next, 0, 5), -EINVAL);
    assert_int_equal(out.n, 0);
    assert_int_equal(hub_wh_engine_set_apps(e, next, 2, 5), 0);
    assert_int_equal(out.n, 1);   /* flushed under the old filter */
    assert_string_equal(names(0, buf, sizeof(buf)), "channel_occupied:a-1");
    /* The vacate of b-1 waits its delay, then batches under the new one. */
    hub_wh_engine_feed(e, ev(HUB_WH_CHANNEL_VACATED, "b-1", NULL), now);
    hub_wh_engine_feed(e, ev(HUB_WH_CHANNEL_VACATED, "a-1", NULL), now);
    now += 3100;
    hub_wh_engine_advance(e, now, 5);
    now += HUB_WH_BATCH_MS + 20;
    hub_wh_engine_advance(e, now, 5);
    assert_int_equal(out.n, 2);
    assert_int_equal(out.app[1], 0);
    assert_string_equal(names(1, buf, sizeof(buf)), "channel_vacated:b-1");
    /* The added app (index 1), batching off: at once. */
    hub_wh_engine_feed(e, hub_wh_event_new(1, HUB_WH_CACHE_MISS, "c", 1, NULL,
                                           NULL, NULL, NULL), now);
    assert_int_equal(out.n, 3);
    assert_int_equal(out.app[2], 1);
    assert_string_equal(names(2, buf, sizeof(buf)), "cache_miss:c");
    /* Out of range (a queue older than the view): dropped, no crash. */
    hub_wh_engine_feed(e, hub_wh_event_new(7, HUB_WH_CACHE_MISS, "c", 1, NULL,
                                           NULL, NULL, NULL), now);
    assert_int_equal(out.n, 3);
    hub_wh_engine_destroy(e);
    out_reset();

    assert_int_equal(hub_wh_queue_init(&q, 8, &old, 1), 0);
    assert_false(hub_wh_queue_wants(&q, 1, HUB_WH_CACHE_MISS));
    assert_int_equal(hub_wh_queue_set_wants(&q, next, 2), 0);
    assert_true(hub_wh_queue_wants(&q, 1, HUB_WH_CACHE_MISS));
    assert_false(hub_wh_queue_wants(&q, 1, HUB_WH_CLIENT_EVENT));
    assert_true(hub_wh_queue_wants(&q, 0, HUB_WH_CHANNEL_OCCUPIED));
    hub_wh_queue_fini(&q);
}


/* Durable cluster webhooks (hub/webhook/wh_stream.h): stream entries to events,
 * group names, ids, and the body made with the entries' ids. */
static void test_webhook_stream_entries(void **state)
{
    const char *occ[] = { "name", "channel_occupied", "channel", "room" };
    const size_t occl[] = { 4, 16, 7, 4 };
    const char *mem[] = { "name", "member_removed", "channel", "presence-a",
                          "user_id", "u1" };
    const size_t meml[] = { 4, 14, 7, 10, 7, 2 };
    const char *nouid[] = { "name", "member_added", "channel", "presence-a" };
    const size_t nouidl[] = { 4, 12, 7, 10 };
    const char *bad[] = { "name", "nonsense", "channel", "room" };
    const size_t badl[] = { 4, 8, 7, 4 };
    const char *ce[] = { "name", "client_event", "channel", "private-x",
                         "event", "client-hi", "data", "{\"a\":1}",
                         "socket_id", "1.2" };
    const size_t cel[] = { 4, 12, 7, 9, 5, 9, 4, 7, 9, 3 };
    const char *nul[] = { "name", "channel_occupied", "channel", "ro\0m" };
    const size_t null_[] = { 4, 16, 7, 4 };
    struct hub_wh_event *e;
    char g1[HUB_WHS_GROUP_LEN], g2[HUB_WHS_GROUP_LEN], id[64];

    (void)state;
    e = hub_wh_stream_event(3, occ, occl, 4);
    assert_non_null(e);
    assert_int_equal(e->type, HUB_WH_CHANNEL_OCCUPIED);
    assert_int_equal(e->app, 3);
    assert_string_equal(e->channel, "room");
    assert_null(e->user_id);
    free(e);
    e = hub_wh_stream_event(0, mem, meml, 6);
    assert_non_null(e);
    assert_int_equal(e->type, HUB_WH_MEMBER_REMOVED);
    assert_string_equal(e->user_id, "u1");
    free(e);
    /* A member event without its user, an unknown name, a NUL inside a
     * value, an odd field count, nothing at all: none. */
    assert_null(hub_wh_stream_event(0, nouid, nouidl, 4));
    assert_null(hub_wh_stream_event(0, bad, badl, 4));
    assert_null(hub_wh_stream_event(0, nul, null_, 4));
    assert_null(hub_wh_stream_event(0, occ, occl, 3));
    assert_null(hub_wh_stream_event(0, NULL, NULL, 0));
    e = hub_wh_stream_event(1, ce, cel, 10);
    assert_non_null(e);
    assert_int_equal(e->type, HUB_WH_CLIENT_EVENT);
    assert_string_equal(e->event, "client-hi");
    assert_string_equal(e->data, "{\"a\":1}");
    assert_string_equal(hub_wh_event_socket_id(e), "1.2");
    {
        const struct hub_wh_event *evs[1] = { e };
        const char *ids[1] = { "app-1764604800123-0" };
        size_t len = 0;
        unsigned n = 0;
        char *body = hub_wh_encode_ids(evs, ids, 1, NULL, 42, &len, &n);

        assert_non_null(body);
        assert_int_equal(n, 1);
        assert_non_null(strstr(body, "\"time_ms\":42"));
        assert_non_null(strstr(body, "\"id\":\"app-1764604800123-0\""));
        assert_non_null(strstr(body, "\"socket_id\":\"1.2\""));
        free(body);
    }
    free(e);
    /* The group: stable, per URL, and short. */
    hub_wh_stream_group("http://a/hook", g1);
    hub_wh_stream_group("http://a/hook", g2);
    assert_string_equal(g1, g2);
    assert_int_equal(strlen(g1), HUB_WHS_GROUP_LEN - 1);
    assert_memory_equal(g1, "wh-", 3);
    hub_wh_stream_group("http://a/hook2", g2);
    assert_string_not_equal(g1, g2);
    /* Ids: app and entry id; too long is refused. */
    assert_int_equal(hub_wh_stream_event_id("app", "1-2", id, sizeof(id)), 0);
    assert_string_equal(id, "app-1-2");
    assert_int_equal(hub_wh_stream_event_id("app", "1-2", id, 7), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_webhook_type_names),
        cmocka_unit_test(test_webhook_filter_matching),
        cmocka_unit_test(test_webhook_encode),
        cmocka_unit_test(test_webhook_encode_matches_jansson),
        cmocka_unit_test(test_webhook_queue_bounded),
        cmocka_unit_test(test_webhook_queue_wakes),
        cmocka_unit_test(test_webhook_engine_room),
        cmocka_unit_test(test_webhook_directory_edges),
        cmocka_unit_test(test_webhook_engine_delay_and_cancel),
        cmocka_unit_test(test_webhook_engine_batching_and_filters),
        cmocka_unit_test(test_webhook_engine_nomem),
        cmocka_unit_test(test_webhook_engine_reload),
        cmocka_unit_test(test_webhook_stream_entries),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
