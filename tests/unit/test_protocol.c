/*
 * tests/unit/test_protocol.c - message parsing from the data files in
 * $LUBDUB_TEST_DATA/{valid,invalid}/<case>/, channel-name rules, and the
 * encoders' exact output, escaping and truncation.
 *
 * A valid case has message.json and expect.txt; expect.txt holds lines
 * "field=value" for type, event, channel, auth, channel_data, user_data
 * and data (the JSON type of data), where "(null)" means absent. An
 * invalid case has only message.json, which must fail to parse.
 */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hub/wire/protocol.h"

#define MAX_FILE (256 * 1024)

/* Read a whole file; returns its length or -1. Owned buffer in *out. */
static long read_file(const char *path, char **out)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    size_t n;

    *out = NULL;
    if (f == NULL)
        return -1;
    buf = malloc(MAX_FILE + 1);
    assert_non_null(buf);
    n = fread(buf, 1, MAX_FILE, f);
    fclose(f);
    assert_true(n < MAX_FILE);
    buf[n] = '\0';
    *out = buf;
    return (long)n;
}

static const char *data_dir(void)
{
    const char *d = getenv("LUBDUB_TEST_DATA");

    if (d == NULL)
        fail_msg("LUBDUB_TEST_DATA is not set");
    return d;
}

typedef void case_fn(const char *dir, const char *name);

/* Run fn on each case directory under kind; returns how many ran. */
static unsigned for_each_case(const char *kind, case_fn *fn)
{
    char path[1024];
    struct dirent *e;
    unsigned n = 0;
    DIR *d;

    snprintf(path, sizeof(path), "%s/%s", data_dir(), kind);
    d = opendir(path);
    if (d == NULL)
        fail_msg("cannot open %s", path);
    while ((e = readdir(d)) != NULL) {
        char dir[1536];

        if (e->d_name[0] == '.')
            continue;
        snprintf(dir, sizeof(dir), "%s/%s", path, e->d_name);
        fn(dir, e->d_name);
        n++;
    }
    closedir(d);
    return n;
}

static const char *type_name(enum hub_msg_type t)
{
    switch (t) {
    case HUB_MSG_PING:
        return "PING";
    case HUB_MSG_PONG:
        return "PONG";
    case HUB_MSG_SUBSCRIBE:
        return "SUBSCRIBE";
    case HUB_MSG_UNSUBSCRIBE:
        return "UNSUBSCRIBE";
    case HUB_MSG_SIGNIN:
        return "SIGNIN";
    case HUB_MSG_CLIENT_EVENT:
        return "CLIENT_EVENT";
    case HUB_MSG_OTHER:
        return "OTHER";
    }
    return "?";
}

static const char *json_type_name(const json_t *v)
{
    if (v == NULL)
        return "(null)";
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    case JSON_NULL:
        return "null";
    }
    return "?";
}

/* The JSON type of a fast-path data text, from its first byte. */
static const char *raw_type_name(const char *raw)
{
    switch (raw[0]) {
    case '{':
        return "object";
    case '[':
        return "array";
    case '"':
        return "string";
    case 't':
    case 'f':
        return "boolean";
    case 'n':
        return "null";
    default:
        return "number";
    }
}

static void expect_field(const char *name, const char *field,
                         const char *want, const char *got)
{
    const char *shown = got ? got : "(null)";

    if (strcmp(want, shown) != 0)
        fail_msg("%s: %s is '%s', expected '%s'", name, field, shown, want);
}

static void check_valid_case(const char *dir, const char *name)
{
    char path[2048], why[128];
    char *msg, *expect, *line, *save = NULL;
    struct hub_msg m;
    long len;

    snprintf(path, sizeof(path), "%s/message.json", dir);
    len = read_file(path, &msg);
    if (len < 0)
        fail_msg("%s: no message.json", name);
    if (hub_msg_parse(&m, msg, (size_t)len, why, sizeof(why)) != 0)
        fail_msg("%s: parse failed: %s", name, why);

    /* What every parsed message promises, whatever the case file says:
     * a tree, or a client event on the fast path (hub/wire/client_event.h). */
    if (m.root == NULL) {
        assert_int_equal(m.type, HUB_MSG_CLIENT_EVENT);
        assert_non_null(m.data_raw);
    }
    assert_non_null(m.event);
    if (m.channel != NULL)
        assert_int_equal(strlen(m.channel), m.channel_len);
    if (m.channel_data != NULL)
        assert_int_equal(strlen(m.channel_data), m.channel_data_len);
    if (m.user_data != NULL)
        assert_int_equal(strlen(m.user_data), m.user_data_len);
    if (m.type == HUB_MSG_SUBSCRIBE || m.type == HUB_MSG_UNSUBSCRIBE ||
        m.type == HUB_MSG_CLIENT_EVENT)
        assert_non_null(m.channel);

    snprintf(path, sizeof(path), "%s/expect.txt", dir);
    if (read_file(path, &expect) < 0)
        fail_msg("%s: no expect.txt", name);
    for (line = strtok_r(expect, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');

        if (eq == NULL)
            fail_msg("%s: bad expect line '%s'", name, line);
        *eq = '\0';
        if (strcmp(line, "type") == 0)
            expect_field(name, line, eq + 1, type_name(m.type));
        else if (strcmp(line, "event") == 0)
            expect_field(name, line, eq + 1, m.event);
        else if (strcmp(line, "channel") == 0)
            expect_field(name, line, eq + 1, m.channel);
        else if (strcmp(line, "auth") == 0)
            expect_field(name, line, eq + 1, m.auth);
        else if (strcmp(line, "channel_data") == 0)
            expect_field(name, line, eq + 1, m.channel_data);
        else if (strcmp(line, "user_data") == 0)
            expect_field(name, line, eq + 1, m.user_data);
        else if (strcmp(line, "data") == 0)
            expect_field(name, line, eq + 1,
                         m.data_raw ? raw_type_name(m.data_raw)
                                    : json_type_name(m.data));
        else
            fail_msg("%s: unknown expect field '%s'", name, line);
    }
    free(expect);
    hub_msg_fini(&m);
    assert_null(m.root);
    free(msg);
}

static void check_invalid_case(const char *dir, const char *name)
{
    char path[2048], why[128];
    struct hub_msg m;
    char *msg;
    long len;

    snprintf(path, sizeof(path), "%s/message.json", dir);
    len = read_file(path, &msg);
    if (len < 0)
        fail_msg("%s: no message.json", name);
    if (hub_msg_parse(&m, msg, (size_t)len, why, sizeof(why)) != -EINVAL)
        fail_msg("%s: parsed, expected -EINVAL", name);
    if (why[0] == '\0' || strcmp(why, "ok") == 0)
        fail_msg("%s: no reason given", name);
    assert_null(m.root);
    /* fini after a failed parse is harmless. */
    hub_msg_fini(&m);
    free(msg);
}

static void test_protocol_parse_valid_cases(void **state)
{
    (void)state;
    assert_true(for_each_case("valid", check_valid_case) >= 15);
}

static void test_protocol_parse_invalid_cases(void **state)
{
    (void)state;
    assert_true(for_each_case("invalid", check_invalid_case) >= 15);
}

static void test_protocol_parse_reads_only_len_bytes(void **state)
{
    const char *text = "{\"event\":\"pusher:ping\"}garbage";
    struct hub_msg m;

    (void)state;
    assert_int_equal(hub_msg_parse(&m, text, 23, NULL, 0), 0);
    assert_int_equal(m.type, HUB_MSG_PING);
    hub_msg_fini(&m);
}

static void test_protocol_parse_why_is_bounded(void **state)
{
    struct hub_msg m;
    char why[4];

    (void)state;
    memset(why, 'x', sizeof(why));
    assert_int_equal(hub_msg_parse(&m, "[]", 2, why, sizeof(why)), -EINVAL);
    assert_int_equal(strlen(why), 3);
}

static void test_protocol_parse_string_data_keeps_pointers(void **state)
{
    const char *text = "{\"event\":\"pusher:subscribe\",\"data\":"
                       "\"{\\\"channel\\\":\\\"presence-a\\\","
                       "\\\"auth\\\":\\\"k:s\\\","
                       "\\\"channel_data\\\":\\\"{}\\\"}\"}";
    struct hub_msg m;

    (void)state;
    assert_int_equal(hub_msg_parse(&m, text, strlen(text), NULL, 0), 0);
    /* The inner object now lives in the root, so these stay valid. */
    assert_ptr_equal(m.data, json_object_get(m.root, "data"));
    assert_string_equal(m.channel, "presence-a");
    assert_int_equal(m.channel_len, 10);
    assert_string_equal(m.auth, "k:s");
    assert_string_equal(m.channel_data, "{}");
    assert_int_equal(m.channel_data_len, 2);
    hub_msg_fini(&m);
}

static void test_protocol_channel_classify_prefixes(void **state)
{
    static const struct {
        const char *name;
        enum hub_channel_kind kind;
    } cases[] = {
        { "news", HUB_CHANNEL_PUBLIC },
        { "cache-news", HUB_CHANNEL_PUBLIC },
        { "private", HUB_CHANNEL_PUBLIC },
        { "privatex", HUB_CHANNEL_PUBLIC },
        { "presence", HUB_CHANNEL_PUBLIC },
        { "Private-x", HUB_CHANNEL_PUBLIC },
        { "private-x", HUB_CHANNEL_PRIVATE },
        { "private-", HUB_CHANNEL_PRIVATE },
        { "private-cache-x", HUB_CHANNEL_PRIVATE },
        { "private-encrypted", HUB_CHANNEL_PRIVATE },
        { "private-encrypted-x", HUB_CHANNEL_ENCRYPTED },
        { "private-encrypted-cache-x", HUB_CHANNEL_ENCRYPTED },
        { "presence-x", HUB_CHANNEL_PRESENCE },
        { "presence-cache-x", HUB_CHANNEL_PRESENCE },
        { "#server-to-user-42", HUB_CHANNEL_USER },
        { "#server-to-user", HUB_CHANNEL_PUBLIC },
        { "", HUB_CHANNEL_PUBLIC },
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        if (hub_channel_classify(cases[i].name, strlen(cases[i].name)) !=
            cases[i].kind)
            fail_msg("classify(%s) is wrong", cases[i].name);
}

static void test_protocol_channel_classify_uses_len(void **state)
{
    (void)state;
    /* Not NUL-terminated where the prefix would end. */
    assert_int_equal(hub_channel_classify("private-x", 7),
                     HUB_CHANNEL_PUBLIC);
    assert_int_equal(hub_channel_classify("private-encrypted-x", 17),
                     HUB_CHANNEL_PRIVATE);
    assert_int_equal(hub_channel_classify("private-encrypted-x", 18),
                     HUB_CHANNEL_ENCRYPTED);
}

static int name_check(const char *name)
{
    return hub_channel_name_check(name, strlen(name), 200);
}

static void test_protocol_channel_name_valid(void **state)
{
    (void)state;
    assert_int_equal(name_check("a"), 0);
    assert_int_equal(name_check("my-channel"), 0);
    assert_int_equal(name_check("private-encrypted-x"), 0);
    assert_int_equal(name_check("AZaz09-_=@,.;"), 0);
    assert_int_equal(name_check("presence-App.Models.User.1"), 0);
    assert_int_equal(name_check("#server-to-user-42"), 0);
    assert_int_equal(name_check("#server-to-user-a.b@c"), 0);
}

static void test_protocol_channel_name_invalid_chars(void **state)
{
    static const char *const bad[] = {
        "a b",   "a/b",     "a:b",     "a\\b",    "a\"b",   "a\tb",
        "a\nb",  "caf\xc3\xa9", "a*",  "a+b",     "a#b",    "a?b",
        "a%20b", "(x)",     "[x]",     "{x}",     "a|b",    "a!b",
        "a'b",   "a$b",     "a&b",     "~",       "a\x7f",
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        if (name_check(bad[i]) != -EINVAL)
            fail_msg("name_check(%s) accepted", bad[i]);
    /* An embedded NUL is not part of the charset. */
    assert_int_equal(hub_channel_name_check("ab\0c", 4, 200), -EINVAL);
}

static void test_protocol_channel_name_length(void **state)
{
    char name[202];

    (void)state;
    memset(name, 'a', sizeof(name));
    assert_int_equal(hub_channel_name_check(name, 200, 200), 0);
    assert_int_equal(hub_channel_name_check(name, 201, 200), -EINVAL);
    assert_int_equal(hub_channel_name_check(name, 164, 164), 0);
    assert_int_equal(hub_channel_name_check(name, 165, 164), -EINVAL);
    assert_int_equal(hub_channel_name_check(name, 0, 200), -EINVAL);
    assert_int_equal(hub_channel_name_check(NULL, 0, 200), -EINVAL);
}

static void test_protocol_channel_name_hash_rules(void **state)
{
    (void)state;
    assert_int_equal(name_check("#server-to-user-"), -EINVAL);
    assert_int_equal(name_check("#server-to-user"), -EINVAL);
    assert_int_equal(name_check("#private-x"), -EINVAL);
    assert_int_equal(name_check("#"), -EINVAL);
    assert_int_equal(name_check("##server-to-user-1"), -EINVAL);
    assert_int_equal(name_check("#server-to-user-1#"), -EINVAL);
    assert_int_equal(name_check("x#server-to-user-1"), -EINVAL);
    assert_int_equal(name_check("#server-to-user-a b"), -EINVAL);
}

/* Encode into a large buffer and compare with the exact text. */
#define ASSERT_ENCODES(want, call_with_buf_cap)                               \
    do {                                                                      \
        char out_[1024];                                                      \
        char *buf = out_;                                                     \
        size_t cap = sizeof(out_);                                            \
        size_t n_ = (call_with_buf_cap);                                      \
        assert_string_equal(out_, (want));                                    \
        assert_int_equal(n_, strlen(want));                                   \
        (void)buf;                                                            \
        (void)cap;                                                            \
    } while (0)

static void test_protocol_encode_established_exact(void **state)
{
    (void)state;
    ASSERT_ENCODES("{\"event\":\"pusher:connection_established\",\"data\":"
                   "\"{\\\"socket_id\\\":\\\"1234.5678\\\","
                   "\\\"activity_timeout\\\":30}\"}",
                   hub_proto_encode_established(buf, cap, "1234.5678", 30));
}

static void test_protocol_encode_established_double_escapes(void **state)
{
    const char *odd = "a\"b\\c\n\x01\xc3\xa9";
    json_t *outer, *inner;
    json_error_t err;
    char out[256];
    size_t n;

    (void)state;
    /* Decoding twice must give back the exact socket id. */
    n = hub_proto_encode_established(out, sizeof(out), odd, 120);
    assert_true(n < sizeof(out));
    outer = json_loadb(out, n, 0, &err);
    assert_non_null(outer);
    inner = json_loads(json_string_value(json_object_get(outer, "data")), 0,
                       &err);
    assert_non_null(inner);
    assert_string_equal(
        json_string_value(json_object_get(inner, "socket_id")), odd);
    assert_int_equal(
        json_integer_value(json_object_get(inner, "activity_timeout")), 120);
    json_decref(inner);
    json_decref(outer);
}

static void test_protocol_encode_error_exact(void **state)
{
    (void)state;
    ASSERT_ENCODES("{\"event\":\"pusher:error\",\"data\":{\"code\":4001,"
                   "\"message\":\"App key x does not exist\"}}",
                   hub_proto_encode_error(buf, cap, 4001,
                                          "App key x does not exist"));
    ASSERT_ENCODES("{\"event\":\"pusher:error\",\"data\":{\"code\":null,"
                   "\"message\":\"Invalid \\\"sig\\\"\"}}",
                   hub_proto_encode_error(buf, cap, -1, "Invalid \"sig\""));
    ASSERT_ENCODES("{\"event\":\"pusher:error\",\"data\":{\"code\":0,"
                   "\"message\":\"\"}}",
                   hub_proto_encode_error(buf, cap, 0, NULL));
}

static void test_protocol_encode_pong_exact(void **state)
{
    (void)state;
    ASSERT_ENCODES("{\"event\":\"pusher:pong\",\"data\":\"{}\"}",
                   hub_proto_encode_pong(buf, cap));
}

static void test_protocol_encode_subscription_error_exact(void **state)
{
    (void)state;
    ASSERT_ENCODES("{\"event\":\"pusher:subscription_error\","
                   "\"channel\":\"private-x\",\"data\":{\"type\":"
                   "\"AuthError\",\"error\":\"Invalid signature\","
                   "\"status\":401}}",
                   hub_proto_encode_subscription_error(
                       buf, cap, "private-x", "AuthError",
                       "Invalid signature", 401));
}

static void test_protocol_encode_event_exact(void **state)
{
    const char *data = "\"{\\\"a\\\":1}\"";
    const char *obj = "{\"typing\":true}";

    (void)state;
    ASSERT_ENCODES("{\"event\":\"my-event\",\"channel\":\"news\","
                   "\"data\":\"{\\\"a\\\":1}\"}",
                   hub_proto_encode_event(buf, cap, "my-event", "news",
                                          data, strlen(data), NULL));
    ASSERT_ENCODES("{\"event\":\"client-typing\",\"channel\":\"presence-a\","
                   "\"data\":{\"typing\":true},\"user_id\":\"42\"}",
                   hub_proto_encode_event(buf, cap, "client-typing",
                                          "presence-a", obj, strlen(obj),
                                          "42"));
    ASSERT_ENCODES("{\"event\":\"pusher_internal:subscription_succeeded\","
                   "\"channel\":\"news\",\"data\":\"{}\"}",
                   hub_proto_encode_event(
                       buf, cap, "pusher_internal:subscription_succeeded",
                       "news", "\"{}\"", 4, NULL));
    ASSERT_ENCODES("{\"event\":\"pusher:signin_success\"}",
                   hub_proto_encode_event(buf, cap, "pusher:signin_success",
                                          NULL, NULL, 0, NULL));
    /* Laravel event names carry backslashes. */
    ASSERT_ENCODES("{\"event\":\"App\\\\Events\\\\OrderShipped\","
                   "\"channel\":\"orders\",\"data\":\"{}\"}",
                   hub_proto_encode_event(buf, cap,
                                          "App\\Events\\OrderShipped",
                                          "orders", "\"{}\"", 4, NULL));
}

static void test_protocol_encode_string_escaping(void **state)
{
    (void)state;
    ASSERT_ENCODES("\"plain\"", hub_proto_encode_string(buf, cap, "plain", 5));
    ASSERT_ENCODES("\"\"", hub_proto_encode_string(buf, cap, "", 0));
    ASSERT_ENCODES("\"q\\\"b\\\\s/\"",
                   hub_proto_encode_string(buf, cap, "q\"b\\s/", 6));
    ASSERT_ENCODES("\"\\u0000\\u0001\\u0008\\u0009\\u000a\\u000d\\u001f\"",
                   hub_proto_encode_string(buf, cap, "\0\1\b\t\n\r\x1f", 7));
    /* UTF-8 and DEL pass through untouched. */
    ASSERT_ENCODES("\"caf\xc3\xa9 \xf0\x9f\x98\x80\x7f\"",
                   hub_proto_encode_string(buf, cap,
                                           "caf\xc3\xa9 \xf0\x9f\x98\x80\x7f",
                                           11));
}

/*
 * For every cap from 0 to one past the full length: the return value never
 * changes, nothing past cap is touched, and the output is the full text
 * cut at cap - 1 and terminated.
 */
static void check_truncation(const char *full, size_t (*enc)(char *, size_t))
{
    size_t need = strlen(full), cap;
    char buf[1024];

    assert_true(need + 8 < sizeof(buf));
    for (cap = 0; cap <= need + 1; cap++) {
        memset(buf, '#', sizeof(buf));
        assert_int_equal(enc(cap ? buf : NULL, cap), need);
        assert_int_equal(buf[cap], '#');
        if (cap == 0)
            continue;
        assert_int_equal(strlen(buf), cap - 1 < need ? cap - 1 : need);
        assert_memory_equal(buf, full, strlen(buf));
    }
}

static size_t enc_established(char *out, size_t cap)
{
    return hub_proto_encode_established(out, cap, "1.2\"", 30);
}

static size_t enc_error(char *out, size_t cap)
{
    return hub_proto_encode_error(out, cap, 4201, "Pong \x01 \"late\"");
}

static size_t enc_sub_error(char *out, size_t cap)
{
    return hub_proto_encode_subscription_error(out, cap, "private-x",
                                               "LimitReached", "too long",
                                               4009);
}

static size_t enc_event(char *out, size_t cap)
{
    return hub_proto_encode_event(out, cap, "client-x", "presence-a",
                                  "{\"k\":[1,2]}", 11, "u\\1");
}

static size_t enc_string(char *out, size_t cap)
{
    return hub_proto_encode_string(out, cap, "a\nb\"c", 5);
}

static size_t enc_pong(char *out, size_t cap)
{
    return hub_proto_encode_pong(out, cap);
}

static void test_protocol_encode_truncation(void **state)
{
    size_t (*const encs[])(char *, size_t) = {
        enc_established, enc_error, enc_sub_error,
        enc_event,       enc_string, enc_pong,
    };
    char full[1024];
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(encs) / sizeof(encs[0]); i++) {
        size_t n = encs[i](full, sizeof(full));
        json_error_t err;
        json_t *v;

        assert_true(n < sizeof(full));
        /* Every encoder's full output is valid JSON. */
        v = json_loadb(full, n, JSON_DECODE_ANY, &err);
        if (v == NULL)
            fail_msg("encoder %zu gave invalid JSON: %s", i, full);
        json_decref(v);
        check_truncation(full, encs[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_protocol_parse_valid_cases),
        cmocka_unit_test(test_protocol_parse_invalid_cases),
        cmocka_unit_test(test_protocol_parse_reads_only_len_bytes),
        cmocka_unit_test(test_protocol_parse_why_is_bounded),
        cmocka_unit_test(test_protocol_parse_string_data_keeps_pointers),
        cmocka_unit_test(test_protocol_channel_classify_prefixes),
        cmocka_unit_test(test_protocol_channel_classify_uses_len),
        cmocka_unit_test(test_protocol_channel_name_valid),
        cmocka_unit_test(test_protocol_channel_name_invalid_chars),
        cmocka_unit_test(test_protocol_channel_name_length),
        cmocka_unit_test(test_protocol_channel_name_hash_rules),
        cmocka_unit_test(test_protocol_encode_established_exact),
        cmocka_unit_test(test_protocol_encode_established_double_escapes),
        cmocka_unit_test(test_protocol_encode_error_exact),
        cmocka_unit_test(test_protocol_encode_pong_exact),
        cmocka_unit_test(test_protocol_encode_subscription_error_exact),
        cmocka_unit_test(test_protocol_encode_event_exact),
        cmocka_unit_test(test_protocol_encode_string_escaping),
        cmocka_unit_test(test_protocol_encode_truncation),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
