/*
 * tests/unit/test_query.c - percent-decoding and query splitting, including
 * every bound: parameter count, buffer size and destination size.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "hub/base/query.h"

static int decode(char *dst, size_t dst_len, const char *src)
{
    return hub_query_decode(dst, dst_len, src, strlen(src));
}

static void test_query_decode_percent_and_plus(void **state)
{
    char out[64];

    (void)state;
    assert_int_equal(decode(out, sizeof(out), "a%20b+c%2Bd%2f%2F"), 0);
    assert_string_equal(out, "a b c+d//");
    assert_int_equal(decode(out, sizeof(out), ""), 0);
    assert_string_equal(out, "");
}

static void test_query_decode_passes_utf8_through(void **state)
{
    char out[64];

    (void)state;
    assert_int_equal(decode(out, sizeof(out), "%C3%A9t\xc3\xa9"), 0);
    assert_string_equal(out, "\xc3\xa9t\xc3\xa9");
}

static void test_query_decode_bad_escape_is_einval(void **state)
{
    char out[64];

    (void)state;
    assert_int_equal(decode(out, sizeof(out), "%"), -EINVAL);
    assert_int_equal(decode(out, sizeof(out), "ab%2"), -EINVAL);
    assert_int_equal(decode(out, sizeof(out), "%g0"), -EINVAL);
    assert_int_equal(decode(out, sizeof(out), "%0g"), -EINVAL);
}

static void test_query_decode_nul_is_einval(void **state)
{
    char out[64];

    (void)state;
    assert_int_equal(decode(out, sizeof(out), "a%00b"), -EINVAL);
    assert_int_equal(hub_query_decode(out, sizeof(out), "a\0b", 3), -EINVAL);
}

static void test_query_decode_bounded(void **state)
{
    char out[4];

    (void)state;
    memset(out, 'x', sizeof(out));
    assert_int_equal(decode(out, sizeof(out), "abc"), 0);
    assert_string_equal(out, "abc");
    assert_int_equal(decode(out, sizeof(out), "abcd"), -E2BIG);
    assert_int_equal(decode(out, sizeof(out), "%41%42%43"), 0);
    assert_string_equal(out, "ABC");
    assert_int_equal(decode(out, 0, ""), -E2BIG);
    /* Only len bytes of src are read. */
    assert_int_equal(hub_query_decode(out, sizeof(out), "abcdef", 2), 0);
    assert_string_equal(out, "ab");
}

static void test_query_parse_pairs(void **state)
{
    struct hub_query q;
    const char *s = "a=1&b=x%20y&c&d=&e=f=g";

    (void)state;
    assert_int_equal(hub_query_parse(&q, s, strlen(s)), 0);
    assert_int_equal(q.n, 5);
    assert_string_equal(q.params[0].key, "a");
    assert_string_equal(hub_query_find(&q, "a"), "1");
    assert_string_equal(hub_query_find(&q, "b"), "x y");
    assert_string_equal(hub_query_find(&q, "c"), "");
    assert_string_equal(hub_query_find(&q, "d"), "");
    assert_string_equal(hub_query_find(&q, "e"), "f=g");
    assert_null(hub_query_find(&q, "f"));
    assert_null(hub_query_find(&q, "A"));
}

static void test_query_parse_decodes_keys(void **state)
{
    struct hub_query q;
    const char *s = "channels%5B%5D=a&x+y=1";

    (void)state;
    assert_int_equal(hub_query_parse(&q, s, strlen(s)), 0);
    assert_string_equal(hub_query_find(&q, "channels[]"), "a");
    assert_string_equal(hub_query_find(&q, "x y"), "1");
}

static void test_query_parse_skips_empty_segments(void **state)
{
    struct hub_query q;
    const char *s = "&a=1&&b=2&";

    (void)state;
    assert_int_equal(hub_query_parse(&q, s, strlen(s)), 0);
    assert_int_equal(q.n, 2);
    assert_int_equal(hub_query_parse(&q, "", 0), 0);
    assert_int_equal(q.n, 0);
}

static void test_query_parse_keeps_duplicates(void **state)
{
    struct hub_query q;
    const char *s = "a=1&a=2";

    (void)state;
    assert_int_equal(hub_query_parse(&q, s, strlen(s)), 0);
    assert_int_equal(q.n, 2);
    assert_string_equal(hub_query_find(&q, "a"), "1");
}

static void test_query_parse_too_many_is_e2big(void **state)
{
    struct hub_query q;
    char s[512];
    size_t off = 0;
    int i;

    (void)state;
    for (i = 0; i < HUB_QUERY_MAX_PARAMS; i++)
        off += (size_t)snprintf(s + off, sizeof(s) - off, "k%d=v&", i);
    assert_int_equal(hub_query_parse(&q, s, off), 0);
    assert_int_equal(q.n, HUB_QUERY_MAX_PARAMS);
    off += (size_t)snprintf(s + off, sizeof(s) - off, "one=more");
    assert_int_equal(hub_query_parse(&q, s, off), -E2BIG);
    assert_int_equal(q.n, 0);
}

static void test_query_parse_too_long_is_e2big(void **state)
{
    static char s[HUB_QUERY_MAX_BYTES + 8];
    struct hub_query q;

    (void)state;
    /* "k=" plus value plus two terminators must fit in buf. */
    s[0] = 'k';
    s[1] = '=';
    memset(s + 2, 'v', HUB_QUERY_MAX_BYTES - 3);
    assert_int_equal(hub_query_parse(&q, s, HUB_QUERY_MAX_BYTES - 1), 0);
    assert_int_equal(strlen(hub_query_find(&q, "k")),
                     HUB_QUERY_MAX_BYTES - 3);
    s[HUB_QUERY_MAX_BYTES - 1] = 'v';
    assert_int_equal(hub_query_parse(&q, s, HUB_QUERY_MAX_BYTES), -E2BIG);
    assert_int_equal(q.n, 0);
}

static void test_query_parse_bad_escape_is_einval(void **state)
{
    struct hub_query q;
    const char *s = "a=1&b=%zz";

    (void)state;
    assert_int_equal(hub_query_parse(&q, s, strlen(s)), -EINVAL);
    assert_int_equal(q.n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_query_decode_percent_and_plus),
        cmocka_unit_test(test_query_decode_passes_utf8_through),
        cmocka_unit_test(test_query_decode_bad_escape_is_einval),
        cmocka_unit_test(test_query_decode_nul_is_einval),
        cmocka_unit_test(test_query_decode_bounded),
        cmocka_unit_test(test_query_parse_pairs),
        cmocka_unit_test(test_query_parse_decodes_keys),
        cmocka_unit_test(test_query_parse_skips_empty_segments),
        cmocka_unit_test(test_query_parse_keeps_duplicates),
        cmocka_unit_test(test_query_parse_too_many_is_e2big),
        cmocka_unit_test(test_query_parse_too_long_is_e2big),
        cmocka_unit_test(test_query_parse_bad_escape_is_einval),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
