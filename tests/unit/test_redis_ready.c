/*
 * tests/unit/test_redis_ready.c - server/redis/redis_ready.c: the phases a
 * node goes through (connecting, syncing, joined, down, out of sync), the
 * connect counters it keeps in the backplane's stats, the reason it keeps
 * (cut, cleaned, and whether it changed), and the /readyz answer made
 * from a copy: 503 "waiting" before the first join, 200 "ready" joined,
 * "degraded" after (200, or 503 with --ready-requires-redis).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "hub/loop/stats.h"
#include "server/redis/redis_ready.h"

struct rig {
    struct srv_redis_ready rd;
    struct hub_backplane_stats st;
    struct srv_redis_ready_view v;
    char body[SRV_REDIS_READY_BODY_MAX];
};

static int setup(void **state)
{
    static struct rig rig;

    memset(&rig, 0, sizeof(rig));
    assert_int_equal(srv_redis_ready_init(&rig.rd), 0);
    srv_redis_ready_set_stats(&rig.rd, &rig.st);
    *state = &rig;
    return 0;
}

static int teardown(void **state)
{
    struct rig *g = *state;

    srv_redis_ready_fini(&g->rd);
    return 0;
}

/* The answer from a fresh copy. */
static unsigned answer(struct rig *g, bool requires)
{
    srv_redis_ready_get(&g->rd, &g->v);
    return srv_redis_ready_answer(&g->v, requires, g->body, sizeof(g->body));
}

static void test_redis_ready_waits_for_redis_before_the_first_join(
    void **state)
{
    struct rig *g = *state;

    assert_false(srv_redis_ready_joined(&g->rd));
    assert_int_equal(answer(g, false), 503);
    assert_string_equal(g->body, "waiting: redis (connecting)\n");
    srv_redis_ready_connecting(&g->rd, "127.0.0.1", 6379);
    assert_int_equal(answer(g, false), 503);
    assert_string_equal(g->body,
                        "waiting: redis (connecting to 127.0.0.1:6379)\n");
    assert_true(srv_redis_ready_down(&g->rd, "Connection refused", false));
    assert_false(srv_redis_ready_down(&g->rd, "Connection refused", false));
    srv_redis_ready_connecting(&g->rd, "127.0.0.1", 6379);
    assert_int_equal(answer(g, false), 503);
    assert_string_equal(g->body, "waiting: redis (connecting to "
                        "127.0.0.1:6379; attempt 2 failed: Connection "
                        "refused)\n");
    assert_int_equal(g->st.connect_attempts, 2);
    assert_int_equal(g->st.connect_failures, 2);
    assert_string_equal(srv_redis_ready_phase_name(g->v.phase), "connecting");
    /* A new reason is told as a change; an IPv6 host in brackets. */
    assert_true(srv_redis_ready_down(&g->rd, "WRONGPASS invalid", false));
    srv_redis_ready_connecting(&g->rd, "::1", 6380);
    assert_int_equal(answer(g, true), 503);
    assert_non_null(strstr(g->body, "[::1]:6380; attempt 3 failed: "
                                    "WRONGPASS invalid"));
}

static void test_redis_ready_joins_after_the_rejoin(void **state)
{
    struct rig *g = *state;

    srv_redis_ready_down(&g->rd, "Connection refused", false);
    srv_redis_ready_up(&g->rd, true);
    assert_int_equal(g->st.connect_attempts, 0);
    assert_int_equal(g->st.connect_failures, 1);
    assert_int_equal(answer(g, false), 503);
    assert_string_equal(g->body, "waiting: cluster directory (rejoin)\n");
    assert_false(srv_redis_ready_joined(&g->rd));
    assert_int_equal(g->st.joined, 0);
    srv_redis_ready_syncing(&g->rd);
    srv_redis_ready_synced(&g->rd, true, NULL);
    assert_true(srv_redis_ready_joined(&g->rd));
    assert_int_equal(g->st.joined, 1);
    assert_int_equal(answer(g, true), 200);
    assert_string_equal(g->body, "ready\n");
    /* The reason stays for /stats after the link came up. */
    assert_string_equal(g->v.reason, "Connection refused");
}

static void test_redis_ready_nothing_to_sync_is_joined_at_once(void **state)
{
    struct rig *g = *state;

    srv_redis_ready_up(&g->rd, false);
    assert_true(srv_redis_ready_joined(&g->rd));
    assert_int_equal(answer(g, false), 200);
}

static void test_redis_ready_failed_rejoin_before_join_keeps_waiting(
    void **state)
{
    struct rig *g = *state;

    srv_redis_ready_up(&g->rd, true);
    srv_redis_ready_synced(&g->rd, false, "a script call failed");
    assert_int_equal(answer(g, false), 503);
    assert_string_equal(g->body, "waiting: cluster directory (rejoin "
                        "failed: a script call failed; the next reconnect "
                        "rejoins again)\n");
    assert_string_equal(srv_redis_ready_phase_name(g->v.phase),
                        "out_of_sync");
}

static void test_redis_ready_outage_after_join_is_degraded(void **state)
{
    struct rig *g = *state;
    char since[32];

    srv_redis_ready_up(&g->rd, true);
    srv_redis_ready_synced(&g->rd, true, NULL);
    /* The outage: not a failed attempt, then one that is. */
    assert_true(srv_redis_ready_down(&g->rd, "Server closed the connection",
                                     true));
    assert_int_equal(g->st.connect_failures, 0);
    assert_true(srv_redis_ready_down(&g->rd, "Connection refused", false));
    assert_int_equal(g->st.connect_attempts, 1);
    assert_int_equal(g->st.joined, 0);
    assert_int_equal(answer(g, false), 200);
    srv_redis_ready_time(g->v.since_ms, since, sizeof(since));
    assert_int_equal(strlen(since), 20);
    assert_true(strncmp(g->body, "degraded: redis down since ", 27) == 0);
    assert_non_null(strstr(g->body, since));
    assert_non_null(strstr(g->body, "(Connection refused)"));
    assert_string_equal(srv_redis_ready_phase_name(g->v.phase), "down");
    assert_int_equal(answer(g, true), 503);
    /* Back: joined once the REJOIN is done; out of sync in between. */
    srv_redis_ready_up(&g->rd, true);
    assert_int_equal(answer(g, false), 200);
    assert_true(strncmp(g->body, "degraded: cluster directory out of sync "
                        "since ", 46) == 0);
    assert_int_equal(answer(g, true), 503);
    srv_redis_ready_synced(&g->rd, true, NULL);
    assert_int_equal(answer(g, true), 200);
}

static void test_redis_ready_rejoin_while_joined_is_out_of_sync(void **state)
{
    struct rig *g = *state;

    srv_redis_ready_up(&g->rd, true);
    srv_redis_ready_synced(&g->rd, true, NULL);
    /* The lease found the node reaped: REJOIN. */
    srv_redis_ready_syncing(&g->rd);
    assert_false(srv_redis_ready_joined(&g->rd));
    assert_int_equal(answer(g, true), 503);
    srv_redis_ready_synced(&g->rd, false, "a script call failed");
    assert_int_equal(answer(g, false), 200);
    assert_non_null(strstr(g->body, "(rejoin failed: a script call failed"));
    /* A REJOIN's end after the link went changes nothing. */
    srv_redis_ready_down(&g->rd, "Connection refused", true);
    srv_redis_ready_synced(&g->rd, true, NULL);
    assert_false(srv_redis_ready_joined(&g->rd));
    srv_redis_ready_syncing(&g->rd);
    assert_int_equal(answer(g, false), 200);
    assert_true(strncmp(g->body, "degraded: redis down", 20) == 0);
}

static void test_redis_ready_reason_is_cut_and_cleaned(void **state)
{
    struct rig *g = *state;
    char big[1000];

    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    big[3] = '\n';
    big[4] = (char)0xc3;
    srv_redis_ready_down(&g->rd, big, false);
    srv_redis_ready_get(&g->rd, &g->v);
    assert_int_equal(strlen(g->v.reason), SRV_REDIS_READY_REASON_MAX - 1);
    assert_memory_equal(g->v.reason, "xxx??xx", 7);
    /* The cut reason is the one kept: the same again is no change. */
    assert_false(srv_redis_ready_down(&g->rd, big, false));
    /* The longest body still fits, on one line. */
    srv_redis_ready_connecting(&g->rd, big, 65535);
    assert_int_equal(answer(g, false), 503);
    assert_non_null(strchr(g->body, '\n'));
    assert_ptr_equal(strchr(g->body, '\n'), g->body + strlen(g->body) - 1);
    assert_non_null(strstr(g->body, ":65535; attempt 2 failed: xxx??"));
}

static void test_redis_ready_nil_holder_is_ignored(void **state)
{
    (void)state;
    srv_redis_ready_connecting(NULL, "h", 1);
    srv_redis_ready_up(NULL, true);
    assert_false(srv_redis_ready_down(NULL, "x", false));
    srv_redis_ready_syncing(NULL);
    srv_redis_ready_synced(NULL, true, NULL);
    assert_false(srv_redis_ready_joined(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(
            test_redis_ready_waits_for_redis_before_the_first_join, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            test_redis_ready_joins_after_the_rejoin, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_redis_ready_nothing_to_sync_is_joined_at_once, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            test_redis_ready_failed_rejoin_before_join_keeps_waiting, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            test_redis_ready_outage_after_join_is_degraded, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_redis_ready_rejoin_while_joined_is_out_of_sync, setup,
            teardown),
        cmocka_unit_test_setup_teardown(
            test_redis_ready_reason_is_cut_and_cleaned, setup, teardown),
        cmocka_unit_test_setup_teardown(
            test_redis_ready_nil_holder_is_ignored, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
