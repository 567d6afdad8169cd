/*
 * tests/unit/test_ops.c - the bearer-token compare of the operator surfaces
 * (srv_ops_token_equal, server/ops/ops_http.c): equal only on the same bytes
 * and length, whatever the guess's length (empty, a prefix, longer, one
 * byte off at either end).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "server/lws/srv.h"

static bool eq(const char *given, const char *want)
{
    return srv_ops_token_equal(given, strlen(given), want);
}

static void test_ops_token_equal(void **state)
{
    const char *want = "admin-token-0123456789";

    (void)state;
    assert_true(eq("admin-token-0123456789", want));
    assert_false(eq("", want));
    assert_false(eq("admin-token-012345678", want));
    assert_false(eq("admin-token-01234567890", want));
    assert_false(eq("Admin-token-0123456789", want));
    assert_false(eq("admin-token-0123456788", want));
    /* A guess that repeats to the right length is not accepted either. */
    assert_false(eq("ad", "adad"));
    assert_true(srv_ops_token_equal("admin-token-0123456789XYZ", 22, want));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_token_equal),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
