/*
 * tests/unit/test_redis_url.c - the --redis URL parser
 * (server/config/redis_url.h): the forms it takes, the defaults, percent-decoding,
 * and one-line refusals for everything else, including over-long fields.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "server/config/redis_url.h"

static void test_redis_url_forms(void **state)
{
    struct srv_redis_url u;
    char err[200];

    (void)state;
    assert_int_equal(srv_redis_url_parse("redis://127.0.0.1:6390/2", &u, err,
                                         sizeof(err)), 0);
    assert_string_equal(u.host, "127.0.0.1");
    assert_int_equal(u.port, 6390);
    assert_int_equal(u.db, 2);
    assert_string_equal(u.user, "");
    assert_string_equal(u.pass, "");
    assert_int_equal(srv_redis_url_parse("redis://redis", &u, err,
                                         sizeof(err)), 0);
    assert_string_equal(u.host, "redis");
    assert_int_equal(u.port, 6379);
    assert_int_equal(u.db, 0);
    assert_int_equal(srv_redis_url_parse("redis://h/", &u, err, sizeof(err)),
                     0);
    assert_int_equal(u.db, 0);
    assert_int_equal(srv_redis_url_parse("redis://:s%40cret@h:1/0", &u, err,
                                         sizeof(err)), 0);
    assert_string_equal(u.user, "");
    assert_string_equal(u.pass, "s@cret");
    assert_int_equal(srv_redis_url_parse("redis://app:p:w@x@h:2/15", &u, err,
                                         sizeof(err)), 0);
    assert_string_equal(u.user, "app");
    assert_string_equal(u.pass, "p:w@x");
    assert_string_equal(u.host, "h");
    assert_int_equal(u.db, 15);
    assert_int_equal(srv_redis_url_parse("redis://[::1]:6380/1", &u, err,
                                         sizeof(err)), 0);
    assert_string_equal(u.host, "::1");
    assert_int_equal(u.port, 6380);
    assert_int_equal(srv_redis_url_parse("redis://[::1]", &u, err,
                                         sizeof(err)), 0);
    assert_int_equal(u.port, 6379);
}

static void refused(const char *url, const char *why)
{
    struct srv_redis_url u;
    char err[200];

    assert_int_equal(srv_redis_url_parse(url, &u, err, sizeof(err)),
                     -EINVAL);
    if (!strstr(err, why))
        fail_msg("%s: \"%s\" lacks \"%s\"", url ? url : "(null)", err, why);
    assert_null(strchr(err, '\n'));
}

static void test_redis_url_refusals(void **state)
{
    char big[600];

    (void)state;
    refused(NULL, "not a redis:// URL");
    refused("", "not a redis:// URL");
    refused("rediss://h:1/0", "not a redis:// URL");
    refused("http://h:1/0", "not a redis:// URL");
    refused("redis://", "no host");
    refused("redis://:1/0", "no host");
    refused("redis://u:p@/0", "no host");
    refused("redis://h:0/0", "port must be 1..65535");
    refused("redis://h:65536/0", "port must be 1..65535");
    refused("redis://h:/0", "port must be 1..65535");
    refused("redis://h:12a/0", "port must be 1..65535");
    refused("redis://h:1/-1", "db must be");
    refused("redis://h:1/x", "db must be");
    refused("redis://h:1/99999999999", "db must be");
    refused("redis://h:1/0/extra", "db must be");
    refused("redis://h h:1/0", "space or control");
    refused("redis://h\x01:1/0", "space or control");
    refused("redis://h$:1/0", "bad character in host");
    refused("redis://[::1:1/0", "unclosed [");
    refused("redis://[::1]x/0", "junk after ]");
    refused("redis://u:%zz@h/0", "bad user or password");
    refused("redis://u:%00@h/0", "bad user or password");
    refused("redis://u:%4@h/0", "bad user or password");
    refused("redis://u:@h/0", "user without password");
    memset(big, 'a', sizeof(big));
    memcpy(big, "redis://", 8);
    big[sizeof(big) - 1] = '\0';
    refused(big, "host too long");
    big[300] = '@'; /* a 292-byte password: longer than the field */
    refused(big, "bad password");
    memcpy(big + 8, ":", 1);
    refused(big, "bad user or password");
}

/* The rules kept over libcurl's URL API (server/config/redis_url.c): '?'
 * and '#' are plain characters, the last '@' ends the credentials, a lone
 * userinfo is the password, the host keeps the operator's spelling. */
static void test_redis_url_keeps_lubdub_rules_over_curl(void **state)
{
    struct srv_redis_url u;
    char err[200];

    (void)state;
    assert_int_equal(srv_redis_url_parse("redis://u:p?w#x@h/3", &u, err,
                                         sizeof(err)), 0);
    assert_string_equal(u.user, "u");
    assert_string_equal(u.pass, "p?w#x");
    assert_string_equal(u.host, "h");
    assert_int_equal(u.db, 3);
    assert_int_equal(srv_redis_url_parse("redis://s%3acret@h", &u, err,
                                         sizeof(err)), 0);
    assert_string_equal(u.user, "");
    assert_string_equal(u.pass, "s:cret");
    assert_int_equal(srv_redis_url_parse("redis://1.2.3:7", &u, err,
                                         sizeof(err)), 0);
    assert_string_equal(u.host, "1.2.3");
    assert_int_equal(u.port, 7);
    refused("redis://h?x=1", "bad character in host");
    refused("redis://h:1?x/0", "port must be 1..65535");
    refused("redis://h:1/0?a", "db must be");
    refused("redis://h/./0", "db must be");
    refused("redis://h%41/0", "bad character in host");
    refused("redis://h:00000000001", "port must be 1..65535");
    refused("redis://::1", "no host");
    refused("redis://[::1]:/0", "port must be 1..65535");
    refused("redis://u:%0a@h/0", "bad user or password");
    refused("redis://%zz@h/0", "bad password");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redis_url_forms),
        cmocka_unit_test(test_redis_url_refusals),
        cmocka_unit_test(test_redis_url_keeps_lubdub_rules_over_curl),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
