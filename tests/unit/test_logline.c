/*
 * tests/unit/test_logline.c - server/base/logline.c: one line written to a
 * memory stream and read back. JSON lines carry each field that is set
 * (and none that is not), parse with jansson, keep peer bytes escaped and
 * each field cut at HUB_LOG_FIELD_MAX; text lines are the message alone,
 * as before fields existed; the "<N>" prefix maps each level to its
 * sd-daemon(3) priority; $JOURNAL_STREAM matches only the stream it names.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "server/base/logline.h"

/* ln written out; the caller frees the text. */
static char *write_line(const struct srv_logline *ln, bool json, bool prio)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    assert_non_null(f);
    srv_logline_write(f, ln, json, prio);
    assert_int_equal(fclose(f), 0);
    return buf;
}

/* The JSON line of ln, parsed (one line, ending in its newline). */
static json_t *json_line(const struct srv_logline *ln)
{
    char *text = write_line(ln, true, false);
    size_t n = strlen(text);
    json_error_t e;
    json_t *o;

    assert_true(n > 0 && text[n - 1] == '\n');
    assert_null(memchr(text, '\n', n - 1));
    o = json_loadb(text, n - 1, 0, &e);
    if (!o)
        fail_msg("not JSON (%s): %s", e.text, text);
    free(text);
    return o;
}

static struct srv_logline line(int level, const struct hub_log_fields *f,
                               const char *msg)
{
    struct srv_logline ln = { .level = level, .loop = 3, .f = f,
                              .msg = msg };

    ln.ts.tv_sec = 1767225600; /* 2026-01-01T00:00:00Z */
    ln.ts.tv_nsec = 42000000;
    return ln;
}

static void test_logline_json_carries_fields(void **state)
{
    struct srv_logline ln = line(
        HUB_LOG_INFO,
        HUB_LOG_F(.event = "session_close", .app = "app-id",
                  .socket_id = "64.1", .channel = "private-a",
                  .user_id = "u1", .code = 4201, .status = 401,
                  .reason = "4201", .url = "http://h:1", .path = "/apps/x",
                  .duration_ms = 1500),
        "socket 64.1: closed");
    json_t *o;

    (void)state;
    ln.node = "node-1";
    ln.peer = "192.0.2.7";
    o = json_line(&ln);
    assert_string_equal(json_string_value(json_object_get(o, "ts")),
                        "2026-01-01T00:00:00.042Z");
    assert_string_equal(json_string_value(json_object_get(o, "level")),
                        "info");
    assert_int_equal(json_integer_value(json_object_get(o, "loop")), 3);
    assert_string_equal(json_string_value(json_object_get(o, "node")),
                        "node-1");
    assert_string_equal(json_string_value(json_object_get(o, "event")),
                        "session_close");
    assert_string_equal(json_string_value(json_object_get(o, "peer")),
                        "192.0.2.7");
    assert_string_equal(json_string_value(json_object_get(o, "app")),
                        "app-id");
    assert_string_equal(json_string_value(json_object_get(o, "socket_id")),
                        "64.1");
    assert_string_equal(json_string_value(json_object_get(o, "channel")),
                        "private-a");
    assert_string_equal(json_string_value(json_object_get(o, "user_id")),
                        "u1");
    assert_int_equal(json_integer_value(json_object_get(o, "code")), 4201);
    assert_int_equal(json_integer_value(json_object_get(o, "status")), 401);
    assert_string_equal(json_string_value(json_object_get(o, "reason")),
                        "4201");
    assert_string_equal(json_string_value(json_object_get(o, "url")),
                        "http://h:1");
    assert_string_equal(json_string_value(json_object_get(o, "path")),
                        "/apps/x");
    assert_int_equal(json_integer_value(json_object_get(o, "duration_ms")),
                     1500);
    assert_string_equal(json_string_value(json_object_get(o, "msg")),
                        "socket 64.1: closed");
    assert_int_equal(json_object_size(o), 17);
    json_decref(o);
}

/* Unset fields are absent, not null or empty; no fields at all is the
 * line of before (ts, level, loop, msg). */
static void test_logline_json_leaves_out_unset_fields(void **state)
{
    struct srv_logline ln = line(HUB_LOG_WARN, HUB_LOG_F(.event = "drain"),
                                 "draining");
    json_t *o;

    (void)state;
    o = json_line(&ln);
    assert_int_equal(json_object_size(o), 5);
    assert_string_equal(json_string_value(json_object_get(o, "event")),
                        "drain");
    json_decref(o);
    ln.f = NULL;
    o = json_line(&ln);
    assert_int_equal(json_object_size(o), 4);
    assert_non_null(json_object_get(o, "msg"));
    json_decref(o);
}

/* The peer of the connection wins over the field; the field stands in
 * when the line is written outside the connection's work. */
static void test_logline_json_peer_field_is_a_fallback(void **state)
{
    struct srv_logline ln = line(HUB_LOG_DEBUG,
                                 HUB_LOG_F(.peer = "198.51.100.1"), "m");
    json_t *o;

    (void)state;
    o = json_line(&ln);
    assert_string_equal(json_string_value(json_object_get(o, "peer")),
                        "198.51.100.1");
    json_decref(o);
    ln.peer = "192.0.2.7";
    o = json_line(&ln);
    assert_string_equal(json_string_value(json_object_get(o, "peer")),
                        "192.0.2.7");
    json_decref(o);
}

/* Control characters, quotes and backslashes escaped, bytes that are not
 * UTF-8 as U+FFFD, a field cut at HUB_LOG_FIELD_MAX (inside a multi-byte
 * sequence: that sequence becomes U+FFFD too). */
static void test_logline_json_escapes_peer_bytes(void **state)
{
    char longname[HUB_LOG_FIELD_MAX + 64];
    const char *want;
    struct srv_logline ln;
    json_t *o;

    (void)state;
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    /* "é" (2 bytes) straddling the cut. */
    longname[HUB_LOG_FIELD_MAX - 1] = (char)0xc3;
    longname[HUB_LOG_FIELD_MAX] = (char)0xa9;
    ln = line(HUB_LOG_INFO,
              HUB_LOG_F(.channel = "a\n\"b\\\x01\x7f\xff\xfe" "c",
                        .user_id = longname),
              "m\r\n");
    o = json_line(&ln);
    assert_string_equal(json_string_value(json_object_get(o, "channel")),
                        "a\n\"b\\\x01\x7f\xef\xbf\xbd\xef\xbf\xbd" "c");
    want = json_string_value(json_object_get(o, "user_id"));
    assert_int_equal(strlen(want), HUB_LOG_FIELD_MAX - 1 + 3);
    assert_memory_equal(want + HUB_LOG_FIELD_MAX - 1, "\xef\xbf\xbd", 3);
    assert_string_equal(json_string_value(json_object_get(o, "msg")),
                        "m\r\n");
    json_decref(o);
}

/* Text: the message as it always was, fields not written; peer bytes as
 * \xNN so a line cannot be split. */
static void test_logline_text_keeps_its_look(void **state)
{
    struct srv_logline ln = line(
        HUB_LOG_WARN, HUB_LOG_F(.event = "bad_message", .app = "app-id"),
        "socket 64.1: bad message: \x01\n");
    char *text;

    (void)state;
    ln.peer = "192.0.2.7";
    text = write_line(&ln, false, false);
    assert_string_equal(text, "2026-01-01T00:00:00.042Z warn  loop=3 "
                              "peer=192.0.2.7 socket 64.1: bad message: "
                              "\\x01\\x0a\n");
    free(text);
    ln.suppressed = 5;
    ln.suppressed_s = 2;
    text = write_line(&ln, false, false);
    assert_non_null(strstr(text, " (5 lines from 192.0.2.7 suppressed in "
                                 "the last 2s)\n"));
    free(text);
}

static void test_logline_priority_prefix(void **state)
{
    static const int want[] = { 3, 4, 6, 7 };
    char *text, prefix[8];

    (void)state;
    for (int level = HUB_LOG_ERR; level <= HUB_LOG_DEBUG; level++) {
        struct srv_logline ln = line(level, NULL, "m");

        assert_int_equal(srv_logline_priority(level), want[level]);
        snprintf(prefix, sizeof(prefix), "<%d>", want[level]);
        text = write_line(&ln, false, true);
        assert_memory_equal(text, prefix, 3);
        assert_memory_equal(text + 3, "2026-", 5);
        free(text);
        text = write_line(&ln, true, true);
        assert_memory_equal(text, prefix, 3);
        assert_memory_equal(text + 3, "{\"ts\":", 6);
        free(text);
        text = write_line(&ln, true, false);
        assert_int_equal(text[0], '{');
        free(text);
    }
}

static void test_logline_journal_stream_matches_its_fd(void **state)
{
    char path[] = "/tmp/test_logline_XXXXXX", js[64];
    struct stat st;
    int fd = mkstemp(path), other;

    (void)state;
    assert_true(fd >= 0);
    unlink(path);
    other = dup(fd);
    assert_int_equal(fstat(fd, &st), 0);
    snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    assert_true(srv_logline_is_journal(js, fd));
    /* A dup is the same open file. */
    assert_true(srv_logline_is_journal(js, other));
    snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino + 1);
    assert_false(srv_logline_is_journal(js, fd));
    assert_false(srv_logline_is_journal(NULL, fd));
    assert_false(srv_logline_is_journal("", fd));
    assert_false(srv_logline_is_journal("12", fd));
    assert_false(srv_logline_is_journal("12:", fd));
    assert_false(srv_logline_is_journal(":12", fd));
    assert_false(srv_logline_is_journal("1:2:3", fd));
    snprintf(js, sizeof(js), "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    /* A closed descriptor is no journal. */
    close(other);
    assert_false(srv_logline_is_journal(js, other));
    close(fd);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_logline_json_carries_fields),
        cmocka_unit_test(test_logline_json_leaves_out_unset_fields),
        cmocka_unit_test(test_logline_json_peer_field_is_a_fallback),
        cmocka_unit_test(test_logline_json_escapes_peer_bytes),
        cmocka_unit_test(test_logline_text_keeps_its_look),
        cmocka_unit_test(test_logline_priority_prefix),
        cmocka_unit_test(test_logline_journal_stream_matches_its_fd),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
