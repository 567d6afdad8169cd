/*
 * tests/unit/test_json_escape.c - the one JSON string writer
 * (hub/base/json_escape.h): every byte in each of the three spellings its
 * users write, the jansson one checked against jansson itself, and the
 * whole-string writer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "hub/base/json_escape.h"

static const char *one(unsigned c, unsigned flags)
{
    static char buf[HUB_JSON_ESC_MAX + 1];

    buf[hub_json_escape_byte((unsigned char)c, flags, buf)] = '\0';
    return buf;
}

/* The protocol encoder's spelling: \" \\ and \u00xx in lower case. */
static void test_json_escape_default_spelling(void **state)
{
    char want[8];

    (void)state;
    for (unsigned c = 1; c < 256; c++) {
        if (c == '"' || c == '\\')
            snprintf(want, sizeof(want), "\\%c", c);
        else if (c < 0x20)
            snprintf(want, sizeof(want), "\\u%04x", c);
        else
            snprintf(want, sizeof(want), "%c", c);
        assert_string_equal(one(c, 0), want);
        assert_int_equal(hub_json_needs_escape((unsigned char)c, 0),
                         strcmp(want, (char[]){(char)c, 0}) != 0);
    }
    assert_string_equal(one(0x1f, 0), "\\u001f");
}

/* The webhook encoder's: byte for byte what json_dumps() writes. */
static void test_json_escape_jansson_spelling_matches_jansson(void **state)
{
    (void)state;
    for (unsigned c = 1; c < 0x80; c++) {
        char s[2] = {(char)c, 0}, *d;
        json_t *j = json_string(s);

        assert_non_null(j);
        d = json_dumps(j, JSON_ENCODE_ANY | JSON_COMPACT);
        assert_non_null(d);
        d[strlen(d) - 1] = '\0';                     /* the quotes off */
        assert_string_equal(one(c, HUB_JSON_ESC_JANSSON), d + 1);
        free(d);
        json_decref(j);
    }
}

/* The log's: DEL escaped too, in lower case. */
static void test_json_escape_del_for_the_log(void **state)
{
    (void)state;
    assert_string_equal(one(0x7f, HUB_JSON_ESC_DEL), "\\u007f");
    assert_string_equal(one(0x7f, 0), "\x7f");
    assert_string_equal(one('\n', HUB_JSON_ESC_DEL), "\\u000a");
    assert_string_equal(one('"', HUB_JSON_ESC_DEL), "\\\"");
    assert_string_equal(one(0xc3, HUB_JSON_ESC_DEL), "\xc3");
}

static void test_json_escape_whole_string(void **state)
{
    const char in[] = "a\"b\\c\n\x01\x7f\xc3\xa9";
    char out[sizeof(in) * HUB_JSON_ESC_MAX], *end;

    (void)state;
    end = hub_json_escape(out, in, sizeof(in) - 1, HUB_JSON_ESC_JANSSON);
    *end = '\0';
    assert_string_equal(out, "a\\\"b\\\\c\\n\\u0001\x7f\xc3\xa9");
    end = hub_json_escape(out, in, 0, 0);
    assert_ptr_equal(end, out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_escape_default_spelling),
        cmocka_unit_test(test_json_escape_jansson_spelling_matches_jansson),
        cmocka_unit_test(test_json_escape_del_for_the_log),
        cmocka_unit_test(test_json_escape_whole_string),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
