/*
 * tests/unit/test_fdlimit.c - srv_fd_limit_pick (server/base/fdlimit.c): the
 * soft RLIMIT_NOFILE the hub runs with, from --fd-limit, --max-connections
 * and the hard limit; never above the hard limit nor lws's 10,000,000.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "server/base/fdlimit.h"

static uint64_t pick(uint64_t want, uint32_t conns, uint64_t hard,
                     enum srv_fd_limit_why *why)
{
    return srv_fd_limit_pick(want, conns, hard, why);
}

static void test_fdlimit_flag(void **state)
{
    enum srv_fd_limit_why why;

    (void)state;
    assert_int_equal(pick(4096, 0, 20000, &why), 4096);
    assert_int_equal(why, SRV_FDL_FLAG);
    /* The flag wins over --max-connections. */
    assert_int_equal(pick(4096, 100000, 1048576, &why), 4096);
    assert_int_equal(why, SRV_FDL_FLAG);
    assert_int_equal(pick(20000, 0, 20000, &why), 20000);
    assert_int_equal(why, SRV_FDL_FLAG);
    /* Above the hard limit: the hard limit, said so. */
    assert_int_equal(pick(20001, 0, 20000, &why), 20000);
    assert_int_equal(why, SRV_FDL_FLAG_HARD);
    assert_int_equal(pick(200000, 0, UINT64_MAX, &why), 200000);
    assert_int_equal(why, SRV_FDL_FLAG);
}

static void test_fdlimit_connections(void **state)
{
    enum srv_fd_limit_why why;

    (void)state;
    /* Small: the fixed reserve. */
    assert_int_equal(pick(0, 100, 20000, &why), 100 + 1024);
    assert_int_equal(why, SRV_FDL_CONNECTIONS);
    assert_int_equal(pick(0, 4096, 20000, &why), 4096 + 1024);
    /* Large: a quarter on top. */
    assert_int_equal(pick(0, 100000, 1048576, &why), 125000);
    assert_int_equal(why, SRV_FDL_CONNECTIONS);
    /* More than the hard limit holds: the hard limit, said so. */
    assert_int_equal(pick(0, 19500, 20000, &why), 20000);
    assert_int_equal(why, SRV_FDL_CONNECTIONS_HARD);
    assert_int_equal(pick(0, UINT32_MAX, UINT64_MAX, &why),
                     SRV_FD_LIMIT_MAX);
    assert_int_equal(why, SRV_FDL_CONNECTIONS_HARD);
    /* Exactly at the hard limit still counts as sized to the need. */
    assert_int_equal(pick(0, 16000, 20000, &why), 20000);
    assert_int_equal(why, SRV_FDL_CONNECTIONS);
}

static void test_fdlimit_auto(void **state)
{
    enum srv_fd_limit_why why;

    (void)state;
    assert_int_equal(pick(0, 0, 20000, &why), 20000);
    assert_int_equal(why, SRV_FDL_HARD);
    assert_int_equal(pick(0, 0, 1024, &why), 1024);
    assert_int_equal(pick(0, 0, 65536, &why), 65536);
    assert_int_equal(why, SRV_FDL_HARD);
    assert_int_equal(pick(0, 0, 1048576, &why), SRV_FD_LIMIT_AUTO_CAP);
    assert_int_equal(why, SRV_FDL_CAPPED);
    assert_int_equal(pick(0, 0, UINT64_MAX, &why), SRV_FD_LIMIT_AUTO_CAP);
    assert_int_equal(why, SRV_FDL_CAPPED);
}

static void test_fdlimit_lws_ceiling(void **state)
{
    enum srv_fd_limit_why why;

    (void)state;
    /* lws would fall back to 2,560 slots above 10,000,000. */
    assert_int_equal(pick(SRV_FD_LIMIT_MAX, 0, UINT64_MAX, &why),
                     SRV_FD_LIMIT_MAX);
    assert_int_equal(why, SRV_FDL_FLAG);
    assert_int_equal(pick(SRV_FD_LIMIT_MAX + 1, 0, UINT64_MAX, &why),
                     SRV_FD_LIMIT_MAX);
    assert_int_equal(why, SRV_FDL_FLAG_HARD);
    /* Every reason has its phrase for the startup line. */
    for (int w = SRV_FDL_FLAG; w <= SRV_FDL_CAPPED; w++)
        assert_string_not_equal(srv_fd_limit_why_str(w), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fdlimit_flag),
        cmocka_unit_test(test_fdlimit_connections),
        cmocka_unit_test(test_fdlimit_auto),
        cmocka_unit_test(test_fdlimit_lws_ceiling),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
