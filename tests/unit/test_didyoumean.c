/*
 * tests/unit/test_didyoumean.c - the nearest-name search of
 * server/config/didyoumean.h: the distance (edits, a swap of neighbours as
 * one, letters without case), the threshold by the word's length, ties
 * and words too long to compare.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "server/config/didyoumean.h"

static void test_didyoumean_distance_counts_edits(void **state)
{
    (void)state;
    assert_int_equal(srv_didyoumean_distance("", ""), 0);
    assert_int_equal(srv_didyoumean_distance("port", ""), 4);
    assert_int_equal(srv_didyoumean_distance("", "port"), 4);
    assert_int_equal(srv_didyoumean_distance("port", "port"), 0);
    assert_int_equal(srv_didyoumean_distance("kitten", "sitting"), 3);
    /* One insertion, one deletion, one substitution. */
    assert_int_equal(srv_didyoumean_distance("ping_intervall",
                                              "ping_interval"), 1);
    assert_int_equal(srv_didyoumean_distance("ping_interva",
                                              "ping_interval"), 1);
    assert_int_equal(srv_didyoumean_distance("ping-interval",
                                              "ping_interval"), 1);
    /* A swap of neighbours is one edit, not two. */
    assert_int_equal(srv_didyoumean_distance("prot", "port"), 1);
    assert_int_equal(srv_didyoumean_distance("LUBDUB_PROT", "LUBDUB_PORT"),
                     1);
    /* Case does not count. */
    assert_int_equal(srv_didyoumean_distance("Ping_Interval",
                                              "ping_interval"), 0);
    /* Symmetric. */
    assert_int_equal(srv_didyoumean_distance("max_conections",
                                              "max_connections"),
                     srv_didyoumean_distance("max_connections",
                                             "max_conections"));
}

/* The nearest of the usual candidates to word, or NULL. */
static const char *nearest(const char *word)
{
    static const char *const names[] = {
        "port", "bind", "ping_interval", "pong_timeout", "max_connections",
        "max_message", "apps", "id", "key", "secret", "secret_file", NULL,
    };
    struct srv_didyoumean m;

    srv_didyoumean_init(&m, word);
    for (size_t i = 0; names[i]; i++)
        srv_didyoumean_offer(&m, names[i]);
    return srv_didyoumean_get(&m);
}

static void test_didyoumean_suggests_near_names(void **state)
{
    (void)state;
    assert_string_equal(nearest("ping_intervall"), "ping_interval");
    assert_string_equal(nearest("prot"), "port");
    assert_string_equal(nearest("bnd"), "bind");
    assert_string_equal(nearest("max_conections"), "max_connections");
    assert_string_equal(nearest("secrt"), "secret");
    assert_string_equal(nearest("secretfile"), "secret_file");
    assert_string_equal(nearest("PORT"), "port");
    assert_string_equal(nearest("kye"), "key");
}

static void test_didyoumean_threshold_by_length(void **state)
{
    (void)state;
    /* Up to 4 characters: one edit. */
    assert_null(nearest("pt"));          /* port: 2 */
    assert_null(nearest("ap"));          /* apps: 2 */
    assert_null(nearest("xy"));
    /* Up to 8: two edits. */
    assert_string_equal(nearest("secrtt"), "secret");
    assert_null(nearest("sxcxext"));     /* secret: 3 */
    /* Beyond: three. */
    assert_string_equal(nearest("png_intervl"), "ping_interval");
    assert_null(nearest("something_else"));
    assert_null(nearest("zzzzzzzzzzzzzzzz"));
}

static void test_didyoumean_ties_go_to_the_first(void **state)
{
    struct srv_didyoumean m;

    (void)state;
    srv_didyoumean_init(&m, "cat");
    srv_didyoumean_offer(&m, "bat");
    srv_didyoumean_offer(&m, "car");
    assert_string_equal(srv_didyoumean_get(&m), "bat");
    /* Nothing offered: nothing suggested. */
    srv_didyoumean_init(&m, "cat");
    assert_null(srv_didyoumean_get(&m));
}

static void test_didyoumean_long_words_never_match(void **state)
{
    char word[SRV_DIDYOUMEAN_MAX + 2];
    struct srv_didyoumean m;

    (void)state;
    memset(word, 'a', sizeof(word) - 1);
    word[sizeof(word) - 1] = '\0';
    assert_int_equal(srv_didyoumean_distance(word, "a"), SIZE_MAX);
    assert_int_equal(srv_didyoumean_distance("a", word), SIZE_MAX);
    srv_didyoumean_init(&m, word);
    srv_didyoumean_offer(&m, word);
    assert_null(srv_didyoumean_get(&m));
    /* At the limit it still compares. */
    word[SRV_DIDYOUMEAN_MAX] = '\0';
    assert_int_equal(srv_didyoumean_distance(word, word), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_didyoumean_distance_counts_edits),
        cmocka_unit_test(test_didyoumean_suggests_near_names),
        cmocka_unit_test(test_didyoumean_threshold_by_length),
        cmocka_unit_test(test_didyoumean_ties_go_to_the_first),
        cmocka_unit_test(test_didyoumean_long_words_never_match),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
