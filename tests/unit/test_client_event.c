/*
 * tests/unit/test_client_event.c - the client-event fast path
 * (hub/wire/client_event.h)
 * against jansson, the path it short-cuts.
 *
 * Every message below goes through both: when the scanner accepts one,
 * jansson must parse it to an object of exactly event, channel and data
 * with the same event and channel, and json_dumps(data, JSON_COMPACT |
 * JSON_ENCODE_ANY) must be byte for byte the data text the scanner
 * relays. Messages the scanner must decline are the "unusual" ones
 * (floats, \u escapes, whitespace or duplicate keys inside data, deep
 * nesting, bad UTF-8, other members ...): for those hub_msg_parse() must
 * answer exactly as the jansson path does. Linked with the failing
 * allocator: the fast path allocates nothing.
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

#include "tests/unit/fail_alloc.h"
#include "tests/unit/fake_hub.h"

#include "hub/wire/client_event.h"
#include "hub/wire/protocol.h"
#include "hub/webhook/queue.h"

/* A heap copy of exactly len bytes, so ASan catches a read past it. */
static char *exact(const char *text, size_t len)
{
    char *p = malloc(len ? len : 1);

    assert_non_null(p);
    memcpy(p, text, len);
    return p;
}

/*
 * Scan text (len bytes) and, when accepted, check it against jansson.
 * Returns whether the scanner accepted it.
 */
static bool scan_checked(const char *text, size_t len)
{
    struct hub_client_event ev;
    char *copy = exact(text, len);
    bool ok = hub_client_event_scan(&ev, copy, len);

    if (ok) {
        json_error_t err;
        json_t *root = json_loadb(copy, len, JSON_ALLOW_NUL, &err);
        json_t *data;
        char *dump;

        if (root == NULL)
            fail_msg("accepted, jansson says: %s: %.*s", err.text, (int)len,
                     text);
        assert_true(json_is_object(root));
        assert_int_equal(json_object_size(root), 3);
        assert_true(ev.event >= copy && ev.event + ev.event_len <= copy + len);
        assert_true(ev.data >= copy && ev.data + ev.data_len <= copy + len);
        assert_int_equal(json_string_length(json_object_get(root, "event")),
                         ev.event_len);
        assert_memory_equal(json_string_value(json_object_get(root, "event")),
                            ev.event, ev.event_len);
        assert_int_equal(json_string_length(json_object_get(root, "channel")),
                         ev.channel_len);
        assert_memory_equal(
            json_string_value(json_object_get(root, "channel")), ev.channel,
            ev.channel_len);
        data = json_object_get(root, "data");
        assert_non_null(data);
        dump = json_dumps(data, JSON_COMPACT | JSON_ENCODE_ANY);
        assert_non_null(dump);
        if (strlen(dump) != ev.data_len ||
            memcmp(dump, ev.data, ev.data_len) != 0)
            fail_msg("relayed %.*s, jansson writes %s", (int)ev.data_len,
                     ev.data, dump);
        free(dump);
        json_decref(root);
    }
    free(copy);
    return ok;
}

static bool scan_str(const char *text)
{
    return scan_checked(text, strlen(text));
}

#define ENV(data) "{\"event\":\"client-x\",\"channel\":\"private-a\",\"data\":" data "}"

static void test_client_event_accepts_the_common_forms(void **state)
{
    static const char *const ok[] = {
        /* The bench loader's and pusher-js's shapes. */
        "{\"event\":\"client-bench\",\"channel\":\"private-bench\","
        "\"data\":\"@1:123456:xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}",
        "{\"event\":\"client-typing\",\"data\":{\"user\":\"me\","
        "\"typing\":true},\"channel\":\"private-chat\"}",
        "{\"channel\":\"presence-r\",\"data\":[1,2,3],\"event\":\"client-\"}",
        /* Whitespace between the envelope's tokens is fine. */
        " {\n \"event\" : \"client-a\" ,\t\"channel\":\"private-a\" ,\r\n"
        "  \"data\" : {} } \n",
        ENV("{}"), ENV("[]"), ENV("\"\""), ENV("null"), ENV("true"),
        ENV("false"), ENV("0"), ENV("-1"), ENV("123456789012345678"),
        /* Whitespace around the value belongs to the envelope. */
        ENV(" 1 "), ENV("\n{\"a\":1}\t"),
        ENV("-123456789012345678"), ENV("[0,-7,[true,false,null],{}]"),
        /* Escapes jansson writes back the same way. */
        ENV("\"say \\\"hi\\\" \\\\ \\b\\f\\n\\r\\t\""),
        ENV("{\"k\\\"\\\\ey\":\"v\"}"),
        /* UTF-8 passes through (jansson writes it raw). */
        ENV("\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf\""),
        "{\"event\":\"client-\xc3\xa9\",\"channel\":\"private-caf\xc3\xa9\","
        "\"data\":1}",
        /* DEL is not escaped by either. */
        ENV("\"\x7f\""),
        /* Key order is kept, equal keys in sibling objects are fine. */
        ENV("{\"b\":1,\"a\":2}"),
        ENV("{\"a\":{\"a\":1},\"b\":[{\"a\":1},{\"a\":2}],\"c\":{\"a\":3}}"),
        ENV("{\"ab\":1,\"a\":2,\"b\":3,\"\":4}"),
    };

    (void)state;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        if (!scan_str(ok[i]))
            fail_msg("declined: %s", ok[i]);
}

/* 32 levels of nesting pass, 33 go to jansson. */
static void test_client_event_depth_limit(void **state)
{
    char buf[512];
    size_t n;

    (void)state;
    for (unsigned depth = HUB_CLIENT_EVENT_MAX_DEPTH;
         depth <= HUB_CLIENT_EVENT_MAX_DEPTH + 1; depth++) {
        n = (size_t)snprintf(buf, sizeof(buf),
                             "{\"event\":\"client-d\",\"channel\":\"private-a\","
                             "\"data\":");
        /* {"k":[{"k":[ ... 1 ... ]}]} */
        for (unsigned i = 0; i < depth; i++) {
            if (i % 2) {
                buf[n++] = '[';
            } else {
                memcpy(buf + n, "{\"k\":", 5);
                n += 5;
            }
        }
        buf[n++] = '1';
        for (unsigned i = depth; i-- > 0;)
            buf[n++] = i % 2 ? ']' : '}';
        buf[n++] = '}';
        assert_int_equal(scan_checked(buf, n),
                         depth <= HUB_CLIENT_EVENT_MAX_DEPTH);
    }
}

/* HUB_CLIENT_EVENT_MAX_KEYS keys open at once pass; one more goes to
 * jansson. */
static void test_client_event_key_limit(void **state)
{
    char buf[2048];

    (void)state;
    for (unsigned keys = HUB_CLIENT_EVENT_MAX_KEYS;
         keys <= HUB_CLIENT_EVENT_MAX_KEYS + 1; keys++) {
        size_t n = (size_t)snprintf(
            buf, sizeof(buf),
            "{\"event\":\"client-k\",\"channel\":\"private-a\",\"data\":{");

        for (unsigned i = 0; i < keys; i++)
            n += (size_t)snprintf(buf + n, sizeof(buf) - n, "%s\"k%u\":1",
                                  i ? "," : "", i);
        n += (size_t)snprintf(buf + n, sizeof(buf) - n, "}}");
        assert_int_equal(scan_checked(buf, n),
                         keys <= HUB_CLIENT_EVENT_MAX_KEYS);
    }
}

/* The unusual: declined by the scanner, and hub_msg_parse() answers as the
 * jansson path did (same verdict, same type, a tree when it parses). */
static void test_client_event_declines_the_unusual(void **state)
{
    static const char *const no[] = {
        /* Numbers jansson re-prints or rejects. */
        ENV("1.5"), ENV("1e3"), ENV("1E3"), ENV("-0"), ENV("0.0"),
        ENV("1234567890123456789"), ENV("-1234567890123456789"),
        ENV("99999999999999999999999999"), ENV("01"), ENV("-"), ENV("+1"),
        ENV("1.7976931348623157e308"), ENV("1e400"),
        /* Escapes jansson writes differently, or not JSON. */
        ENV("\"\\u00e9\""), ENV("\"\\/\""), ENV("\"a\\u0000b\""),
        ENV("\"\\ud83d\\ude00\""), ENV("\"\\ud800\""), ENV("\"\\x41\""),
        ENV("\"\\\""),
        /* Whitespace inside data. */
        ENV("{\"a\": 1}"), ENV("[1, 2]"), ENV("{ }"), ENV("[1 ]"),
        /* Duplicate keys: jansson keeps the last. */
        ENV("{\"a\":1,\"a\":2}"), ENV("{\"a\":{\"b\":1,\"b\":1}}"),
        ENV("{\"k\\\"\":1,\"k\\\"\":2}"),
        "{\"event\":\"client-x\",\"channel\":\"private-a\",\"data\":1,"
        "\"data\":2}",
        "{\"event\":\"client-x\",\"event\":\"pusher:ping\","
        "\"channel\":\"private-a\",\"data\":1}",
        /* Other members, or ours missing or of another type. */
        "{\"event\":\"client-x\",\"channel\":\"private-a\",\"data\":1,"
        "\"user_id\":\"u\"}",
        "{\"event\":\"client-x\",\"channel\":\"private-a\"}",
        "{\"event\":\"client-x\",\"data\":1}",
        "{\"event\":\"client-x\",\"channel\":7,\"data\":1}",
        "{\"event\":\"client-x\",\"channel\":null,\"data\":1}",
        "{\"event\":1,\"channel\":\"private-a\",\"data\":1}",
        "{\"event\":\"pusher:ping\",\"channel\":\"private-a\",\"data\":{}}",
        "{\"event\":\"client\",\"channel\":\"private-a\",\"data\":{}}",
        "{\"event\":\"client-\\u0078\",\"channel\":\"private-a\",\"data\":1}",
        "{\"event\":\"client-\\\"\",\"channel\":\"private-a\",\"data\":1}",
        "{\"event\":\"client-x\",\"channel\":\"private-\\u0061\",\"data\":1}",
        "{\"ev\\u0065nt\":\"client-x\",\"channel\":\"private-a\",\"data\":1}",
        /* Bad UTF-8: stray continuation, overlong, surrogate, past
         * U+10FFFF, cut short by the quote, F5 and up. */
        ENV("\"\x80\""), ENV("\"\xc0\xaf\""), ENV("\"\xe0\x80\xaf\""),
        ENV("\"\xed\xa0\x80\""), ENV("\"\xf4\x90\x80\x80\""),
        ENV("\"\xe2\x82\""), ENV("\"\xf5\x80\x80\x80\""), ENV("\"\xff\""),
        "{\"event\":\"client-\xc3\",\"channel\":\"private-a\",\"data\":1}",
        "{\"event\":\"client-x\",\"channel\":\"private-\xed\xbf\xbf\","
        "\"data\":1}",
        /* Raw control bytes in strings. */
        ENV("\"a\tb\""), ENV("\"a\nb\""), ENV("\"\x1f\""),
        /* Broken JSON. */
        ENV("{\"a\":1,}"), ENV("[1,]"), ENV("{\"a\"}"), ENV("{\"a\":}"),
        ENV("{1:2}"), ENV("tru"), ENV("nul"), ENV("'a'"), ENV("[1"),
        ENV("{\"a\":1"), ENV("\"open"), ENV(""),
        "{\"event\":\"client-x\",\"channel\":\"private-a\",\"data\":1}x",
        "{\"event\":\"client-x\",\"channel\":\"private-a\",\"data\":1}{}",
        "{\"event\":\"client-x\",\"channel\":\"private-a\",\"data\":1,}",
        "{\"event\":\"client-x\" \"channel\":\"private-a\",\"data\":1}",
        "[{\"event\":\"client-x\",\"channel\":\"private-a\",\"data\":1}]",
        "", " ", "{", "{}", "null",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++) {
        size_t len = strlen(no[i]);
        char *copy = exact(no[i], len);
        json_error_t err;
        json_t *root;
        struct hub_msg m;
        int rc;

        if (scan_checked(no[i], len))
            fail_msg("accepted: %s", no[i]);
        /* Declined means parsed by jansson: a tree, or an error. */
        rc = hub_msg_parse(&m, copy, len, NULL, 0);
        assert_null(m.data_raw);
        root = json_loadb(copy, len, JSON_ALLOW_NUL, &err);
        if (rc == 0)
            assert_non_null(m.root);
        if (root == NULL)
            assert_int_equal(rc, -EINVAL);
        json_decref(root);
        hub_msg_fini(&m);
        free(copy);
    }
}

/* No prefix of an accepted message is accepted, and none is read past. */
static void test_client_event_prefixes(void **state)
{
    const char *text =
        "{\"event\":\"client-x\",\"channel\":\"private-a\",\"data\":"
        "{\"s\":\"caf\xc3\xa9\\n\",\"a\":[1,-20,true,false,null],\"o\":{}}}";
    size_t len = strlen(text);

    (void)state;
    assert_true(scan_checked(text, len));
    for (size_t n = 0; n < len; n++)
        assert_false(scan_checked(text, n));
}

/*
 * hub_msg_parse() on the fast path: the fields the pusher layer reads,
 * NUL-terminated names, the data text inside the message, no tree and no
 * allocation (every allocation would fail).
 */
static void test_client_event_msg_parse_fast(void **state)
{
    const char *text = "{\"event\":\"client-move\",\"data\":{\"x\":3,"
                       "\"y\":-4},\"channel\":\"presence-room\"}";
    struct hub_msg m;
    char why[64];

    (void)state;
    fail_alloc_after(0);
    assert_int_equal(hub_msg_parse(&m, text, strlen(text), why, sizeof(why)),
                     0);
    assert_int_equal(fail_alloc_hits(), 0);
    fail_alloc_off();
    assert_string_equal(why, "ok");
    assert_int_equal(m.type, HUB_MSG_CLIENT_EVENT);
    assert_null(m.root);
    assert_null(m.data);
    assert_string_equal(m.event, "client-move");
    assert_string_equal(m.channel, "presence-room");
    assert_int_equal(m.channel_len, strlen("presence-room"));
    assert_int_equal(m.data_raw_len, strlen("{\"x\":3,\"y\":-4}"));
    assert_memory_equal(m.data_raw, "{\"x\":3,\"y\":-4}", m.data_raw_len);
    assert_ptr_equal(m.data_raw, strstr(text, "{\"x\""));
    hub_msg_fini(&m);
    assert_null(m.data_raw);
    assert_null(m.event);
}

/* Names too long for the inline buffer take the jansson path, whole. */
static void test_client_event_long_names_fall_back(void **state)
{
    char buf[2 * HUB_MSG_NAMES_INLINE];
    char name[HUB_MSG_NAMES_INLINE];
    struct hub_msg m;
    int n;

    (void)state;
    memset(name, 'c', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    n = snprintf(buf, sizeof(buf),
                 "{\"event\":\"client-x\",\"channel\":\"private-%s\","
                 "\"data\":1}",
                 name);
    assert_true(scan_checked(buf, (size_t)n));
    assert_int_equal(hub_msg_parse(&m, buf, (size_t)n, NULL, 0), 0);
    assert_non_null(m.root);
    assert_null(m.data_raw);
    assert_int_equal(m.type, HUB_MSG_CLIENT_EVENT);
    assert_int_equal(m.channel_len, strlen("private-") + strlen(name));
    hub_msg_fini(&m);
}

/* The data-file cases: where the scanner takes a client event, it relays
 * what jansson would have written (scan_checked) and hub_msg_parse() reports
 * the same event and channel as the tree path. */
static void test_client_event_data_file_cases(void **state)
{
    static const char *const cases[] = {
        "client_event_large_numbers", "client_event_nested_data",
        "client_event_nul_in_payload", "client_event_object_data",
        "client_event_string_data", "client_event_unicode",
        "client_event_without_data", "duplicate_key_last_wins",
    };
    const char *dir = getenv("LUBDUB_TEST_DATA");
    unsigned fast = 0;

    (void)state;
    if (dir == NULL)
        fail_msg("LUBDUB_TEST_DATA is not set");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char path[1024], buf[8192];
        struct hub_msg m;
        FILE *f;
        size_t n;

        snprintf(path, sizeof(path), "%s/valid/%s/message.json", dir,
                 cases[i]);
        f = fopen(path, "rb");
        assert_non_null(f);
        n = fread(buf, 1, sizeof(buf), f);
        fclose(f);
        if (scan_checked(buf, n))
            fast++;
        assert_int_equal(hub_msg_parse(&m, buf, n, NULL, 0), 0);
        hub_msg_fini(&m);
    }
    /* Object data and string data are the common forms. */
    assert_true(fast >= 2);
}

/* Pop the queued webhook events; returns how many, the last one's data
 * copied into data (empty when none). */
static unsigned pop_webhooks(struct hub_wh_queue *q, char *data, size_t cap)
{
    struct hub_wh_event *l = hub_wh_queue_pop_all(q), *next;
    unsigned n = 0;

    data[0] = '\0';
    for (; l; l = next) {
        next = l->next;
        assert_int_equal(l->type, HUB_WH_CLIENT_EVENT);
        snprintf(data, cap, "%s", l->data);
        free(l);
        n++;
    }
    return n;
}

/*
 * A relayed fast-path client event on a hub with a client_event webhook,
 * every allocation failing once in turn: the subscriber gets the frame or
 * the sender an error, the webhook's data is what the tree path gives (a
 * string's value, any other value's JSON text) or "null" when its copy
 * failed, and nothing leaks.
 */
static void relay_under_oom(const char *data_json, const char *want_frame,
                            const char *want_hook)
{
    struct fake_hub fh;
    struct fake_session a, b;
    struct hub_wh_queue q;
    char msg[256], hook[256];

    fake_hub_init(&fh, 1);
    fh.apps[0].client_event_rate = 0;
    fh.apps[0].webhook_types = HUB_WH_BIT(HUB_WH_CLIENT_EVENT);
    assert_int_equal(fake_hub_start(&fh), 0);
    assert_int_equal(hub_wh_queue_init(&q, 64, fh.apps, 1), 0);
    fh.hub->webhooks = &q;
    assert_int_equal(fake_session_open(&fh, &a, 0, &fh.apps[0]), 0);
    assert_int_equal(fake_session_open(&fh, &b, 0, &fh.apps[0]), 0);
    assert_int_equal(fake_subscribe(&fh, &a.s, "private-w", NULL), 0);
    assert_int_equal(fake_subscribe(&fh, &b.s, "private-w", NULL), 0);
    fake_flush(&a.s);
    fake_flush(&b.s);
    snprintf(msg, sizeof(msg),
             "{\"event\":\"client-w\",\"channel\":\"private-w\","
             "\"data\":%s}",
             data_json);
    {
        struct hub_client_event ev;

        assert_true(hub_client_event_scan(&ev, msg, strlen(msg)));
    }
    FAIL_ALLOC_COUNTDOWN(
        {
            fake_recv(&fh, &a.s, msg);
            fake_hub_drain(&fh);
        },
        {
            unsigned hooks = pop_webhooks(&q, hook, sizeof(hook));

            if (b.s.q.count == 1) {
                assert_string_equal(fake_frame_text(&b.s, 0), want_frame);
                if (!fa_failed)
                    assert_int_equal(hooks, 1);
                if (hooks == 1 && strcmp(hook, "null") != 0)
                    assert_string_equal(hook, want_hook);
            } else {
                assert_true(fa_failed);
                assert_int_equal(b.s.q.count, 0);
                assert_true(fake_find(&a.s, "pusher:error") >= 0);
                assert_int_equal(hooks, 0);
            }
            fake_flush(&a.s);
            fake_flush(&b.s);
            assert_int_equal(fail_alloc_live(), fa_live_before);
        });
    fh.hub->webhooks = NULL;
    hub_wh_queue_fini(&q);
    hub_session_fini(&a.s, HUB_CLOSE_PEER);
    hub_session_fini(&b.s, HUB_CLOSE_PEER);
    fake_hub_stop(&fh);
}

static void test_client_event_relay_and_webhook_under_oom(void **state)
{
    (void)state;
    relay_under_oom("{\"x\":[1,-2],\"s\":\"q\\\"\"}",
                    "{\"event\":\"client-w\",\"channel\":\"private-w\","
                    "\"data\":{\"x\":[1,-2],\"s\":\"q\\\"\"}}",
                    "{\"x\":[1,-2],\"s\":\"q\\\"\"}");
    relay_under_oom("\"say \\\"hi\\\"\\n\"",
                    "{\"event\":\"client-w\",\"channel\":\"private-w\","
                    "\"data\":\"say \\\"hi\\\"\\n\"}",
                    "say \"hi\"\n");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_client_event_accepts_the_common_forms),
        cmocka_unit_test(test_client_event_depth_limit),
        cmocka_unit_test(test_client_event_key_limit),
        cmocka_unit_test(test_client_event_declines_the_unusual),
        cmocka_unit_test(test_client_event_prefixes),
        cmocka_unit_test(test_client_event_msg_parse_fast),
        cmocka_unit_test(test_client_event_long_names_fall_back),
        cmocka_unit_test(test_client_event_data_file_cases),
        cmocka_unit_test(test_client_event_relay_and_webhook_under_oom),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
