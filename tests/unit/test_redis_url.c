/*
 * tests/unit/test_redis_url.c - the --redis URL parser
 * (server/config/redis_url.h): the forms it takes, the defaults, percent-decoding,
 * and one-line refusals for everything else, including over-long fields;
 * rediss:// (TLS) under the same rules; and the --redis-sentinel list.
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
    refused("redis:/h:1/0", "not a redis:// URL");
    refused("redisss://h:1/0", "not a redis:// URL");
    refused("REDIS://h:1/0", "not a redis:// URL");
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

/* rediss:// is redis:// with tls set: the same fields, the same
 * refusals, and the error names both schemes. */
static void test_redis_url_rediss_is_tls(void **state)
{
    struct srv_redis_url u;
    char err[200];

    (void)state;
    assert_int_equal(srv_redis_url_parse("redis://h", &u, err, sizeof(err)),
                     0);
    assert_false(u.tls);
    assert_int_equal(srv_redis_url_parse("rediss://app:p%40w@cache.example"
                                         ":6380/3", &u, err, sizeof(err)), 0);
    assert_true(u.tls);
    assert_string_equal(u.host, "cache.example");
    assert_int_equal(u.port, 6380);
    assert_int_equal(u.db, 3);
    assert_string_equal(u.user, "app");
    assert_string_equal(u.pass, "p@w");
    assert_int_equal(srv_redis_url_parse("rediss://:s@[::1]", &u, err,
                                         sizeof(err)), 0);
    assert_true(u.tls);
    assert_string_equal(u.host, "::1");
    assert_int_equal(u.port, 6379);
    assert_string_equal(u.pass, "s");
    assert_int_equal(srv_redis_url_parse("rediss://u:p?w#x@h/3", &u, err,
                                         sizeof(err)), 0);
    assert_string_equal(u.pass, "p?w#x");
    refused("rediss://", "no host");
    refused("rediss://h:0/0", "port must be 1..65535");
    refused("rediss://h:1/x", "db must be");
    refused("rediss://h$/0", "bad character in host");
    refused("rediss://u:@h/0", "user without password");
    refused("rediss://h h", "space or control");
    refused("redis://h:0/0", "want redis[s]://[user:pass@]host:port/db");
}

/* Parse a sentinel list that must be good; returns the count. */
static size_t sentinels(const char *s, struct srv_redis_addr *a, size_t max)
{
    char err[200] = "";
    size_t n = 99;

    if (srv_redis_sentinels_parse(s, a, max, &n, err, sizeof(err)))
        fail_msg("%s: refused: %s", s, err);
    return n;
}

/* The good lists: one or many, ports given or 26379, IPv6 in brackets,
 * up to the maximum. */
static void test_redis_url_sentinel_lists(void **state)
{
    struct srv_redis_addr a[SRV_REDIS_SENTINELS_MAX];
    char many[SRV_REDIS_SENTINELS_MAX * 16];
    size_t o = 0;

    (void)state;
    assert_int_equal(sentinels("s1", a, 16), 1);
    assert_string_equal(a[0].host, "s1");
    assert_int_equal(a[0].port, SRV_REDIS_SENTINEL_PORT);
    assert_int_equal(SRV_REDIS_SENTINEL_PORT, 26379);
    assert_int_equal(sentinels("10.0.0.1:26380,s-2.example,[::1]:5,[fe80::1]",
                               a, 16), 4);
    assert_string_equal(a[0].host, "10.0.0.1");
    assert_int_equal(a[0].port, 26380);
    assert_string_equal(a[1].host, "s-2.example");
    assert_int_equal(a[1].port, 26379);
    assert_string_equal(a[2].host, "::1");
    assert_int_equal(a[2].port, 5);
    assert_string_equal(a[3].host, "fe80::1");
    assert_int_equal(a[3].port, 26379);
    /* The same host on two ports is two sentinels. */
    assert_int_equal(sentinels("h:1,h:2,h", a, 16), 3);
    for (int i = 0; i < SRV_REDIS_SENTINELS_MAX; i++)
        o += (size_t)snprintf(many + o, sizeof(many) - o, "%sh:%d",
                              i ? "," : "", 1000 + i);
    assert_int_equal(sentinels(many, a, SRV_REDIS_SENTINELS_MAX),
                     SRV_REDIS_SENTINELS_MAX);
    assert_int_equal(a[15].port, 1015);
}

/* A list that must be refused, with why in its one-line error and *n 0. */
static void sentinels_refused(const char *s, size_t max, const char *why)
{
    struct srv_redis_addr a[SRV_REDIS_SENTINELS_MAX + 1];
    char err[200];
    size_t n = 99;

    assert_int_equal(srv_redis_sentinels_parse(s, a, max, &n, err,
                                               sizeof(err)), -EINVAL);
    assert_int_equal(n, 0);
    if (!strstr(err, why))
        fail_msg("%s: \"%s\" lacks \"%s\"", s ? s : "(null)", err, why);
    assert_null(strchr(err, '\n'));
}

/* Bad lists: empty ones and items, the URL's host rules, ports, IPv6
 * without brackets, duplicates, too many; the error names the item. */
static void test_redis_url_sentinel_refusals(void **state)
{
    char big[400];

    (void)state;
    sentinels_refused(NULL, 16, "no sentinel given");
    sentinels_refused("", 16, "no sentinel given");
    sentinels_refused(",", 16, "sentinel 1 (\"\"): empty");
    sentinels_refused("a,,b", 16, "sentinel 2 (\"\"): empty");
    sentinels_refused("a,", 16, "sentinel 2 (\"\"): empty");
    sentinels_refused(",a", 16, "sentinel 1 (\"\"): empty");
    sentinels_refused("a, b", 16, "space or control character");
    sentinels_refused("a\tb", 16, "space or control character");
    sentinels_refused("a:0", 16, "sentinel 1 (\"a:0\"): port must be 1..65535");
    sentinels_refused("a:65536", 16, "port must be 1..65535");
    sentinels_refused("a:", 16, "port must be 1..65535");
    sentinels_refused("a:x", 16, "port must be 1..65535");
    sentinels_refused("a:1:2", 16, "needs brackets");
    sentinels_refused("b,::1", 16, "sentinel 2 (\"::1\"): an IPv6 address "
                                   "needs brackets");
    sentinels_refused(":1", 16, "no host");
    sentinels_refused("h$:1", 16, "bad character in host");
    sentinels_refused("u@h:1", 16, "bad character in host");
    sentinels_refused("h/0", 16, "bad character in host");
    sentinels_refused("[::1", 16, "unclosed [");
    sentinels_refused("[::1]x", 16, "junk after ]");
    sentinels_refused("[h]:1", 16, "no IPv6 address in [ ]");
    sentinels_refused("a:1,b,a:1", 16, "sentinel 3 (\"a:1\"): named twice");
    sentinels_refused("a,A:26379", 16, "sentinel 2 (\"A:26379\"): named "
                                       "twice");
    sentinels_refused("a,b,c", 2, "more than 2 sentinels");
    memset(big, 'h', sizeof(big));
    big[sizeof(big) - 1] = '\0';
    sentinels_refused(big, 16, "host too long");
    sentinels_refused(big, 16, "...\")");
    sentinels_refused("a:0", 16, "want host[:port][,host[:port]...]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redis_url_forms),
        cmocka_unit_test(test_redis_url_refusals),
        cmocka_unit_test(test_redis_url_keeps_lubdub_rules_over_curl),
        cmocka_unit_test(test_redis_url_rediss_is_tls),
        cmocka_unit_test(test_redis_url_sentinel_lists),
        cmocka_unit_test(test_redis_url_sentinel_refusals),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
