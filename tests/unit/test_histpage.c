/*
 * tests/unit/test_histpage.c - one page of a channel's stream read from
 * Redis (hub/rest/histpage.h): after= anchored on the origin's last entry
 * at or under the seq and paging across origins, an id the stream lacks
 * (the last-ids hash and trimming decide) or a page read Redis cut after
 * its anchor, since= against trimming and
 * the stream's age, and neither against trimming within the ttl.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "hub/channel/history.h"
#include "hub/loop/backplane.h"
#include "hub/rest/histpage.h"

#define NOW 1800000000000ull
#define TTL 120000ull
#define M HUB_HISTORY_AWAY_MARGIN_MS

/* Six entries, origins a and b taking turns (a:1 b:1 a:2 b:2 a:3 b:3),
 * a second apart ending a minute ago; last ids a:3 b:3. */
struct fx {
    struct hub_hist_read rd;
    struct hub_hist_entry e[6];
    size_t idx[16];
    bool complete;
};

static void stream6(struct fx *f)
{
    struct hub_hist_read *rd = &f->rd;
    struct hub_hist_entry *e = f->e;

    memset(f, 0, sizeof(*f));
    for (unsigned i = 0; i < 6; i++) {
        strcpy(e[i].origin, i % 2 ? "b" : "a");
        e[i].seq = i / 2 + 1;
        e[i].time_ms = NOW - 66000 + i * 1000;
    }
    rd->e = e;
    rd->n = 6;
    strcpy(rd->last[0].origin, "a");
    rd->last[0].seq = 3;
    strcpy(rd->last[1].origin, "b");
    rd->last[1].seq = 3;
    rd->n_last = 2;
    rd->now_ms = NOW;
    rd->first_ms = NOW - 66000;
}

static size_t page(const struct hub_hist_read *rd,
                   const struct hub_histpage_args *a, size_t *idx,
                   bool *complete)
{
    *complete = !*complete; /* flipped: the call must set it */
    return hub_histpage_select(rd, a, idx, complete);
}

static void test_histpage_after_pages_across_origins(void **state)
{
    struct fx f;
    struct hub_histpage_args a = { .has_after = true, .after_origin = "b",
                                   .after_seq = 1, .limit = 2,
                                   .ttl_ms = TTL };

    (void)state;
    stream6(&f);
    f.complete = false;
    /* After b:1 (index 1): a:2 b:2, then a:3 b:3. */
    assert_int_equal(page(&f.rd, &a, f.idx, &f.complete), 2);
    assert_true(f.complete);
    assert_int_equal(f.idx[0], 2);
    assert_int_equal(f.idx[1], 3);
    a.after_origin = "b";
    a.after_seq = 2;
    assert_int_equal(page(&f.rd, &a, f.idx, &f.complete), 2);
    assert_int_equal(f.idx[0], 4);
    assert_int_equal(f.idx[1], 5);
    /* A seq between two of its entries anchors on the lower one. */
    a.after_origin = "a";
    a.after_seq = 2;
    a.limit = 6;
    assert_int_equal(page(&f.rd, &a, f.idx, &f.complete), 3);
    assert_int_equal(f.idx[0], 3);
    assert_true(f.complete);
    /* The last one: nothing after it, complete; anchored even when the
     * stream was trimmed. */
    a.after_seq = 3;
    f.rd.deleted_ms = NOW - 70000;
    assert_int_equal(page(&f.rd, &a, f.idx, &f.complete), 1);
    assert_true(f.complete);
}

static void test_histpage_after_an_id_the_stream_lacks(void **state)
{
    struct fx f;
    struct hub_histpage_args a = { .has_after = true, .after_origin = "c",
                                   .after_seq = 9, .limit = 10,
                                   .ttl_ms = TTL };

    (void)state;
    stream6(&f);
    f.complete = true;
    /* An origin nobody knows: everything, incomplete. */
    assert_int_equal(page(&f.rd, &a, f.idx, &f.complete), 6);
    assert_false(f.complete);
    assert_int_equal(f.idx[0], 0);
    /* The hash says c published nothing after 9 and the stream lost
     * nothing: complete. */
    strcpy(f.rd.last[2].origin, "c");
    f.rd.last[2].seq = 9;
    f.rd.n_last = 3;
    assert_int_equal(page(&f.rd, &a, f.idx, &f.complete), 6);
    assert_true(f.complete);
    /* ... but not once trimmed, nor when c went on past 9. */
    f.rd.deleted_ms = NOW - 70000;
    page(&f.rd, &a, f.idx, &f.complete);
    assert_false(f.complete);
    f.rd.deleted_ms = 0;
    f.rd.last[2].seq = 10;
    page(&f.rd, &a, f.idx, &f.complete);
    assert_false(f.complete);
    /* A page read that Redis already cut after its anchor. */
    f.rd.anchored = true;
    assert_int_equal(page(&f.rd, &a, f.idx, &f.complete), 6);
    assert_true(f.complete);
    assert_int_equal(f.idx[0], 0);
    f.rd.anchored = false;
    /* a:0 lies before a's first kept entry: everything, incomplete. */
    a.after_origin = "a";
    a.after_seq = 0;
    assert_int_equal(page(&f.rd, &a, f.idx, &f.complete), 6);
    assert_false(f.complete);
}

static void test_histpage_since_trim_and_age(void **state)
{
    struct fx f;
    struct hub_histpage_args a = { .has_since = true, .limit = 10,
                                   .since_ms = NOW - 63000, .ttl_ms = TTL };

    (void)state;
    stream6(&f);
    f.complete = false;
    /* t at or after since: the last three. */
    assert_int_equal(page(&f.rd, &a, f.idx, &f.complete), 3);
    assert_int_equal(f.idx[0], 3);
    assert_true(f.complete); /* within the ttl, nothing trimmed */
    /* Trimmed newer than since less the margin: incomplete. */
    f.rd.deleted_ms = a.since_ms - M;
    page(&f.rd, &a, f.idx, &f.complete);
    assert_false(f.complete);
    f.rd.deleted_ms = a.since_ms - M - 1;
    page(&f.rd, &a, f.idx, &f.complete);
    assert_true(f.complete);
    /* Older than the ttl: only a stream born before it vouches. */
    f.rd.deleted_ms = 0;
    a.since_ms = NOW - TTL - 5000;
    assert_int_equal(page(&f.rd, &a, f.idx, &f.complete), 6);
    assert_false(f.complete);
    f.rd.first_ms = a.since_ms - M;
    page(&f.rd, &a, f.idx, &f.complete);
    assert_true(f.complete);
    /* since=0: everything ever, never complete. */
    a.since_ms = 0;
    page(&f.rd, &a, f.idx, &f.complete);
    assert_false(f.complete);
    /* The limit cuts the page, not its completeness. */
    a.since_ms = NOW - 63000;
    a.limit = 1;
    assert_int_equal(page(&f.rd, &a, f.idx, &f.complete), 1);
    assert_int_equal(f.idx[0], 3);
    assert_true(f.complete);
}

static void test_histpage_neither_ttl_window(void **state)
{
    struct fx f;
    struct hub_histpage_args a = { .limit = 10, .ttl_ms = 64000 };

    (void)state;
    stream6(&f);
    f.complete = false;
    /* The window is the last 64 s (an entry just 64 s old is out, as on
     * one node): 63, 62 and 61 s back. */
    assert_int_equal(page(&f.rd, &a, f.idx, &f.complete), 3);
    assert_int_equal(f.idx[0], 3);
    assert_true(f.complete);
    /* Trimmed before the window: complete; within it: not. */
    f.rd.deleted_ms = NOW - 64000;
    page(&f.rd, &a, f.idx, &f.complete);
    assert_true(f.complete);
    f.rd.deleted_ms = NOW - 63999;
    page(&f.rd, &a, f.idx, &f.complete);
    assert_false(f.complete);
    /* Nothing kept: empty, complete. */
    f.rd.n = 0;
    f.rd.deleted_ms = 0;
    assert_int_equal(page(&f.rd, &a, f.idx, &f.complete), 0);
    assert_true(f.complete);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_histpage_after_pages_across_origins),
        cmocka_unit_test(test_histpage_after_an_id_the_stream_lacks),
        cmocka_unit_test(test_histpage_since_trim_and_age),
        cmocka_unit_test(test_histpage_neither_ttl_window),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
