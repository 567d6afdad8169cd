/*
 * tests/unit/test_peerlog.c - server/base/peerlog.c on a fake clock: a bucket
 * per address under one shared bucket, the LRU table's bound and
 * eviction, the suppressed counts reported by an address's next line and
 * by the periodic sweep. srv_peerlog_check() runs after every change.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "server/base/peerlog.h"

static struct srv_peeraddr addr(unsigned i)
{
    struct srv_peeraddr a;
    char s[32];

    snprintf(s, sizeof(s), "10.%u.%u.%u", (i >> 16) & 255, (i >> 8) & 255,
             i & 255);
    assert_int_equal(srv_peeraddr_parse(&a, s, strlen(s)), 0);
    return a;
}

/* admit + check. */
static bool line(struct srv_peerlog *pl, unsigned who, uint64_t now,
                 struct srv_peerlog_note *note)
{
    struct srv_peeraddr a = addr(who);
    struct srv_peerlog_note scratch;
    bool ok = srv_peerlog_admit(pl, &a, now, note ? note : &scratch);

    assert_int_equal(srv_peerlog_check(pl), 0);
    return ok;
}

static struct srv_peerlog *make(unsigned entries, uint32_t addr_burst,
                                uint32_t addr_per_s, uint32_t all_burst,
                                uint32_t all_per_s)
{
    struct srv_peerlog_params p = { addr_burst, addr_per_s, all_burst,
                                    all_per_s };
    struct srv_peerlog *pl = srv_peerlog_create(entries, &p, 42, 1000);

    assert_non_null(pl);
    assert_int_equal(srv_peerlog_check(pl), 0);
    return pl;
}

static void test_peerlog_burst_then_rate(void **state)
{
    struct srv_peerlog *pl = make(8, 3, 1, 100, 100);
    struct srv_peerlog_note n;

    (void)state;
    for (int i = 0; i < 3; i++) {
        assert_true(line(pl, 1, 1000, &n));
        assert_int_equal(n.suppressed, 0);
    }
    assert_false(line(pl, 1, 1000, NULL));
    assert_false(line(pl, 1, 1500, NULL));
    assert_false(line(pl, 1, 1999, NULL));
    /* One line a second: the next passes at 2000 and reports the three
     * suppressed since the first of them. */
    assert_true(line(pl, 1, 2000, &n));
    assert_int_equal(n.suppressed, 3);
    assert_int_equal(n.since_ms, 1000);
    assert_false(line(pl, 1, 2000, NULL));
    /* Reported once: the next passing line carries only what came after. */
    assert_true(line(pl, 1, 3000, &n));
    assert_int_equal(n.suppressed, 1);
    assert_int_equal(n.since_ms, 2000);
    /* A long quiet refills to the burst, no more. */
    for (int i = 0; i < 3; i++)
        assert_true(line(pl, 1, 100000, NULL));
    assert_false(line(pl, 1, 100000, NULL));
    srv_peerlog_destroy(pl);
}

/* The point of it: a noisy address spends only its own bucket. */
static void test_peerlog_addresses_are_independent(void **state)
{
    struct srv_peerlog *pl = make(8, 5, 1, 100, 50);
    struct srv_peerlog_note n;
    int passed = 0;

    (void)state;
    for (int i = 0; i < 1000; i++)
        passed += line(pl, 1, 1000 + (uint64_t)i, NULL);
    /* 5 at once, then one a second over the second it took. */
    assert_int_equal(passed, 5 + 0);
    assert_true(line(pl, 2, 1999, &n));
    assert_int_equal(n.suppressed, 0);
    assert_true(line(pl, 1, 2000, &n));
    assert_int_equal(n.suppressed, 995);
    srv_peerlog_destroy(pl);
}

/* Many addresses: the shared bucket holds them, and what it refuses is
 * counted against each line's own address. */
static void test_peerlog_shared_cap(void **state)
{
    struct srv_peerlog *pl = make(64, 10, 10, 5, 2);
    struct srv_peerlog_note n;
    int passed = 0;

    (void)state;
    for (unsigned i = 0; i < 50; i++)
        passed += line(pl, i, 1000, NULL);
    assert_int_equal(passed, 5);
    assert_int_equal(srv_peerlog_count(pl), 50);
    /* Half a second gives the shared bucket one line: address 7's, which
     * was refused once by the shared bucket, says so. */
    assert_true(line(pl, 7, 1500, &n));
    assert_int_equal(n.suppressed, 1);
    assert_int_equal(n.since_ms, 1000);
    assert_false(line(pl, 8, 1500, NULL));
    srv_peerlog_destroy(pl);
}

static void test_peerlog_lru_bound_and_eviction(void **state)
{
    struct srv_peerlog *pl = make(4, 1, 1, 1000, 1000);
    struct srv_peerlog_report r;
    struct srv_peerlog_note n;

    (void)state;
    for (unsigned i = 1; i <= 4; i++)
        assert_true(line(pl, i, 1000, NULL));
    assert_int_equal(srv_peerlog_count(pl), 4);
    /* 2 is suppressed (its count pending); 1 is seen again, so 2 is now
     * the least recently seen of all. */
    assert_false(line(pl, 2, 1000, NULL));
    assert_false(line(pl, 2, 1000, NULL));
    assert_false(line(pl, 1, 1001, NULL));
    assert_false(line(pl, 3, 1002, NULL));
    assert_false(line(pl, 4, 1003, NULL));
    /* 5 takes 2's entry: the table stays at its bound. */
    assert_true(line(pl, 5, 1004, NULL));
    assert_int_equal(srv_peerlog_count(pl), 4);
    /* 2 comes back as new: a full bucket, its old count gone to the
     * untracked total (and 1, the least recent now, evicted for it). */
    assert_true(line(pl, 2, 1005, &n));
    assert_int_equal(n.suppressed, 0);
    assert_int_equal(srv_peerlog_count(pl), 4);
    assert_true(srv_peerlog_sweep(pl, 1000 + SRV_PEERLOG_REPORT_MS, &r));
    assert_int_equal(r.gone_addrs, 2);
    assert_int_equal(r.gone_lines, 3);       /* 2's two, 1's one */
    assert_int_equal(r.addrs, 2);            /* 3 and 4 */
    assert_int_equal(r.lines, 5);
    assert_int_equal(r.since_ms, 1000);
    /* Thousands of addresses through a table of four. */
    for (unsigned i = 100; i < 5100; i++)
        line(pl, i, 20000 + i, NULL);
    assert_int_equal(srv_peerlog_count(pl), 4);
    srv_peerlog_destroy(pl);
}

static void test_peerlog_sweep_reports_once(void **state)
{
    struct srv_peerlog *pl = make(16, 1, 1, 1000, 1000);
    struct srv_peerlog_report r;
    struct srv_peerlog_note n;
    char buf[SRV_PEERADDR_STRLEN];

    (void)state;
    /* Address i sends i + 1 lines at once: i of them suppressed. */
    for (unsigned i = 0; i < 8; i++)
        for (unsigned k = 0; k <= i; k++)
            line(pl, i, 2000 + i, NULL);
    assert_false(srv_peerlog_sweep(pl, 1000 + SRV_PEERLOG_REPORT_MS - 1, &r));
    assert_true(srv_peerlog_sweep(pl, 1000 + SRV_PEERLOG_REPORT_MS, &r));
    assert_int_equal(r.lines, 1 + 2 + 3 + 4 + 5 + 6 + 7);
    assert_int_equal(r.addrs, 7);
    assert_int_equal(r.since_ms, 2001);
    assert_int_equal(r.gone_lines, 0);
    /* The largest few, largest first. */
    assert_int_equal(r.n_top, SRV_PEERLOG_TOP);
    for (unsigned i = 0; i < SRV_PEERLOG_TOP; i++) {
        struct srv_peeraddr want = addr(7 - i);

        assert_int_equal(r.top[i].lines, 7 - i);
        assert_string_equal(srv_peeraddr_format(&r.top[i].addr, buf),
                            srv_peeraddr_format(&want, (char[46]){ 0 }));
    }
    /* Reported, so reset: nothing for the next sweep, nor for the
     * address's next line. */
    assert_false(srv_peerlog_sweep(pl, 1000 + 2 * SRV_PEERLOG_REPORT_MS, &r));
    assert_true(line(pl, 7, 1000 + 2 * SRV_PEERLOG_REPORT_MS, &n));
    assert_int_equal(n.suppressed, 0);
    srv_peerlog_destroy(pl);
}

/* Lines with no known address share the all-zero address's entry. */
static void test_peerlog_unknown_address(void **state)
{
    struct srv_peerlog *pl = make(8, 2, 1, 100, 100);
    struct srv_peeraddr none = { 0 };
    struct srv_peerlog_note n;

    (void)state;
    assert_true(srv_peerlog_admit(pl, &none, 1000, &n));
    assert_true(srv_peerlog_admit(pl, &none, 1000, &n));
    assert_false(srv_peerlog_admit(pl, &none, 1000, &n));
    assert_true(line(pl, 1, 1000, NULL));
    assert_true(srv_peerlog_admit(pl, &none, 2000, &n));
    assert_int_equal(n.suppressed, 1);
    assert_int_equal(srv_peerlog_count(pl), 2);
    assert_int_equal(srv_peerlog_check(pl), 0);
    srv_peerlog_destroy(pl);
}

static void test_peerlog_create_bounds(void **state)
{
    struct srv_peerlog_params p = { 1, 1, 1, 1 };

    (void)state;
    assert_null(srv_peerlog_create(0, &p, 0, 0));
    /* The documented bound: 56-byte entries on LP64. */
#if defined(__x86_64__) || defined(__aarch64__)
    assert_int_equal(sizeof(struct srv_peerlog_entry), 56);
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peerlog_burst_then_rate),
        cmocka_unit_test(test_peerlog_addresses_are_independent),
        cmocka_unit_test(test_peerlog_shared_cap),
        cmocka_unit_test(test_peerlog_lru_bound_and_eviction),
        cmocka_unit_test(test_peerlog_sweep_reports_once),
        cmocka_unit_test(test_peerlog_unknown_address),
        cmocka_unit_test(test_peerlog_create_bounds),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
