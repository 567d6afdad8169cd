/*
 * tests/unit/test_tail.c - the console's live tail (hub/ops/tail.h): the
 * filter (app, exact channel, prefix, kinds), the one-second rate window,
 * and, on a fake hub with two loops, the flag that keeps the hot paths at
 * one load, publications from another loop reaching a watcher through its
 * loop's inbox, the bounded queue and its drops, connection open/close
 * lines, and unwatching with a wakeup still queued.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hub/loop/backplane.h"
#include "hub/wire/frame.h"
#include "hub/loop/loop.h"
#include "hub/pusher/pusher.h"
#include "hub/loop/session.h"
#include "hub/ops/tail.h"
#include "fake_hub.h"

static struct hub_tail_filter filter(unsigned app, unsigned kinds,
                                     const char *ch, bool prefix)
{
    struct hub_tail_filter f = { .app = app, .kinds = kinds,
                                 .prefix = prefix };

    snprintf(f.channel, sizeof(f.channel), "%s", ch);
    return f;
}

static bool match(const struct hub_tail_filter *f, unsigned app,
                  unsigned kind, const char *name)
{
    return hub_tail_filter_match(f, app, kind, name, name ? strlen(name) : 0);
}

static void test_tail_filter_exact_prefix_kinds(void **state)
{
    struct hub_tail_filter exact = filter(0, HUB_TAIL_EVENTS, "news", false);
    struct hub_tail_filter pre = filter(0, HUB_TAIL_EVENTS, "news-", true);
    struct hub_tail_filter all = filter(1, HUB_TAIL_EVENTS |
                                               HUB_TAIL_CONNECTIONS, "", true);
    struct hub_tail_filter conns = filter(0, HUB_TAIL_CONNECTIONS, "x", false);

    (void)state;
    assert_true(match(&exact, 0, HUB_TAIL_EVENTS, "news"));
    assert_false(match(&exact, 0, HUB_TAIL_EVENTS, "news-1"));
    assert_false(match(&exact, 0, HUB_TAIL_EVENTS, "new"));
    assert_false(match(&exact, 1, HUB_TAIL_EVENTS, "news"));
    assert_false(match(&exact, 0, HUB_TAIL_CONNECTIONS, NULL));
    assert_true(match(&pre, 0, HUB_TAIL_EVENTS, "news-"));
    assert_true(match(&pre, 0, HUB_TAIL_EVENTS, "news-sport"));
    assert_false(match(&pre, 0, HUB_TAIL_EVENTS, "news"));
    assert_false(match(&pre, 0, HUB_TAIL_EVENTS, "private-news-1"));
    assert_true(match(&all, 1, HUB_TAIL_EVENTS, "anything"));
    assert_true(match(&all, 1, HUB_TAIL_CONNECTIONS, NULL));
    assert_false(match(&all, 0, HUB_TAIL_EVENTS, "anything"));
    /* Connection lines have no channel: the channel filter does not apply. */
    assert_true(match(&conns, 0, HUB_TAIL_CONNECTIONS, NULL));
    assert_false(match(&conns, 0, HUB_TAIL_EVENTS, "x"));
    /* Not NUL-terminated names compare by length. */
    assert_true(hub_tail_filter_match(&exact, 0, HUB_TAIL_EVENTS, "newsXX", 4));
}

static void test_tail_rate_window(void **state)
{
    struct hub_tail_rate r = { .cap = 3 };
    unsigned ok = 0;

    (void)state;
    for (int i = 0; i < 10; i++)
        ok += hub_tail_rate_admit(&r, 5000);
    assert_int_equal(ok, 3);
    /* Still the same window 999 ms later. */
    assert_false(hub_tail_rate_admit(&r, 5999));
    /* A new window after a second. */
    assert_true(hub_tail_rate_admit(&r, 6000));
    assert_true(hub_tail_rate_admit(&r, 6500));
    assert_true(hub_tail_rate_admit(&r, 6999));
    assert_false(hub_tail_rate_admit(&r, 6999));
    /* A clock that went back starts over rather than stalling. */
    assert_true(hub_tail_rate_admit(&r, 100));
    /* cap 0 admits nothing. */
    r = (struct hub_tail_rate){ .cap = 0 };
    assert_false(hub_tail_rate_admit(&r, 1));
}

static unsigned notified;

static void count_notify(void *ctx)
{
    (void)ctx;
    notified++;
}

static void publish(struct fake_hub *fh, unsigned from, const char *ch,
                    const char *text)
{
    struct hub_frame *f = hub_frame_create_text(text, strlen(text));

    assert_non_null(f);
    assert_int_equal(hub_publish(fh->hub, fh->loops[from], 0, ch, strlen(ch),
                                 f, NULL),
                     0);
    hub_frame_unref(f);
}

static void test_tail_watch_across_loops_queue_and_drops(void **state)
{
    struct fake_hub fh;
    struct hub_tail_filter f = filter(0, HUB_TAIL_EVENTS, "room", false);
    struct hub_tail_watcher *w;
    uint64_t rd, qd;
    size_t len;
    char *line;

    (void)state;
    fake_hub_init(&fh, 2);
    assert_int_equal(fake_hub_start(&fh), 0);
    assert_false(hub_tail_watched());
    notified = 0;
    /* On loop 1, at most 5 a second, 3 queued. */
    w = hub_tail_watch(fh.loops[1], &f, 5, 3, count_notify, NULL);
    assert_non_null(w);
    assert_true(hub_tail_watched());
    assert_int_equal(hub_tail_watchers(), 1);

    /* Published on loop 0: the line waits in loop 1's inbox. */
    publish(&fh, 0, "room", "{\"event\":\"a\",\"channel\":\"room\",\"data\":\"1\"}");
    publish(&fh, 0, "other", "{\"event\":\"b\",\"channel\":\"other\",\"data\":\"2\"}");
    assert_int_equal(notified, 0);
    fake_hub_drain(&fh);
    assert_int_equal(notified, 1);
    line = hub_tail_next(w, &len);
    assert_non_null(line);
    assert_int_equal(strlen(line), len);
    assert_non_null(strstr(line, "\"type\":\"event\""));
    assert_non_null(strstr(line, "\"channel\":\"room\""));
    assert_non_null(strstr(line, "\\\"event\\\":\\\"a\\\""));
    free(line);
    assert_null(hub_tail_next(w, NULL));

    /* Three fit the queue, the fourth is a queue drop, then the rate cap
     * (5 this second, one used above) refuses the rest. */
    for (int i = 0; i < 8; i++)
        publish(&fh, 0, "room", "{\"event\":\"c\",\"channel\":\"room\",\"data\":\"3\"}");
    hub_tail_drops(w, &rd, &qd);
    assert_int_equal(qd, 1);
    assert_int_equal(rd, 4);
    fake_hub_drain(&fh);
    assert_int_equal(notified, 2);
    for (int i = 0; i < 3; i++) {
        line = hub_tail_next(w, NULL);
        assert_non_null(line);
        free(line);
    }
    assert_null(hub_tail_next(w, NULL));

    /* A new second: admitted again. One wakeup queued, then unwatched
     * before the loop runs it: the node still frees the watcher. */
    fake_hub_advance(&fh, 1000);
    publish(&fh, 0, "room", "{\"event\":\"d\",\"channel\":\"room\",\"data\":\"4\"}");
    hub_tail_unwatch(w);
    assert_false(hub_tail_watched());
    assert_int_equal(hub_tail_watchers(), 0);
    fake_hub_drain(&fh);
    assert_int_equal(notified, 2);
    hub_tail_unwatch(NULL);
    fake_hub_stop(&fh);
}

static void test_tail_watcher_cap(void **state)
{
    struct fake_hub fh;
    struct hub_tail_filter f = filter(0, HUB_TAIL_EVENTS, "", true);
    struct hub_tail_watcher *w[HUB_TAIL_MAX_WATCHERS];

    (void)state;
    fake_hub_init(&fh, 1);
    assert_int_equal(fake_hub_start(&fh), 0);
    for (unsigned i = 0; i < HUB_TAIL_MAX_WATCHERS; i++) {
        w[i] = hub_tail_watch(fh.loops[0], &f, 0, 0, count_notify, NULL);
        assert_non_null(w[i]);
    }
    assert_null(hub_tail_watch(fh.loops[0], &f, 0, 0, count_notify, NULL));
    hub_tail_unwatch(w[0]);
    w[0] = hub_tail_watch(fh.loops[0], &f, 0, 0, count_notify, NULL);
    assert_non_null(w[0]);
    for (unsigned i = 0; i < HUB_TAIL_MAX_WATCHERS; i++)
        hub_tail_unwatch(w[i]);
    assert_false(hub_tail_watched());
    fake_hub_stop(&fh);
}

static void test_tail_oversize_message_is_cut(void **state)
{
    struct fake_hub fh;
    struct hub_tail_filter f = filter(0, HUB_TAIL_EVENTS, "big", false);
    struct hub_tail_watcher *w;
    size_t n = HUB_TAIL_MESSAGE_MAX * 2;
    char *text = malloc(n + 1), *line;

    (void)state;
    assert_non_null(text);
    /* Multi-byte UTF-8 all along: the cut must not split a character. */
    for (size_t i = 0; i + 2 <= n; i += 2)
        memcpy(text + i, "\xc3\xa9", 2);
    text[n] = '\0';
    fake_hub_init(&fh, 1);
    assert_int_equal(fake_hub_start(&fh), 0);
    w = hub_tail_watch(fh.loops[0], &f, 0, 0, count_notify, NULL);
    assert_non_null(w);
    publish(&fh, 0, "big", text);
    fake_hub_drain(&fh);
    line = hub_tail_next(w, NULL);
    assert_non_null(line);
    assert_non_null(strstr(line, "\"truncated\":true"));
    assert_true(strlen(line) < HUB_TAIL_MESSAGE_MAX * 2);
    free(line);
    free(text);
    hub_tail_unwatch(w);
    fake_hub_stop(&fh);
}

static void test_tail_connection_lines(void **state)
{
    struct fake_hub fh;
    struct hub_tail_filter f = filter(0, HUB_TAIL_CONNECTIONS, "", true);
    struct hub_tail_watcher *w;
    struct fake_session fs, other;
    char *line;

    (void)state;
    fake_hub_init(&fh, 2);
    assert_int_equal(fake_hub_start(&fh), 0);
    w = hub_tail_watch(fh.loops[0], &f, 0, 0, count_notify, NULL);
    assert_non_null(w);
    assert_int_equal(fake_session_open(&fh, &fs, 1, &fh.apps[0]), 0);
    /* Another app's connection is not this watcher's. */
    assert_int_equal(fake_session_open(&fh, &other, 1, &fh.apps[1]), 0);
    fake_hub_drain(&fh);
    line = hub_tail_next(w, NULL);
    assert_non_null(line);
    assert_non_null(strstr(line, "\"state\":\"open\""));
    assert_non_null(strstr(line, HUB_SID(&fs.s)));
    free(line);
    assert_null(hub_tail_next(w, NULL));
    hub_session_fini(&fs.s, HUB_CLOSE_APP);
    hub_session_fini(&other.s, HUB_CLOSE_APP);
    line = hub_tail_next(w, NULL);
    assert_non_null(line);
    assert_non_null(strstr(line, "\"state\":\"close\""));
    free(line);
    assert_null(hub_tail_next(w, NULL));
    hub_tail_unwatch(w);
    fake_hub_drain(&fh);
    fake_hub_stop(&fh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tail_filter_exact_prefix_kinds),
        cmocka_unit_test(test_tail_rate_window),
        cmocka_unit_test(test_tail_watch_across_loops_queue_and_drops),
        cmocka_unit_test(test_tail_oversize_message_is_cut),
        cmocka_unit_test(test_tail_watcher_cap),
        cmocka_unit_test(test_tail_connection_lines),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
