/*
 * tests/unit/test_load_file.c - the JSON file's unknown keys
 * (server/config/load_file.c): still errors, now with the known key they
 * most likely meant when one is close, at the top level and in an app
 * object; none suggested when nothing is near.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "server/config/config.h"

/* Load text as the file "f.json"; expect -EINVAL and err to be want. */
static void expect_error(const char *text, const char *want)
{
    struct srv_config cfg;
    char err[512];

    srv_config_defaults(&cfg);
    assert_int_equal(srv_config_load_buffer(&cfg, text, strlen(text),
                                            "f.json", err, sizeof(err)),
                     -EINVAL);
    assert_string_equal(err, want);
    srv_config_fini(&cfg);
}

static void test_load_file_unknown_key_suggests_nearest(void **state)
{
    (void)state;
    expect_error("{\"ping_intervall\": \"3s\"}",
                 "f.json: \"ping_intervall\": unknown key; did you mean "
                 "\"ping_interval\"?");
    expect_error("{\"max_conections\": 5}",
                 "f.json: \"max_conections\": unknown key; did you mean "
                 "\"max_connections\"?");
    /* "apps" is a key of the file too. */
    expect_error("{\"aps\": []}",
                 "f.json: \"aps\": unknown key; did you mean \"apps\"?");
    /* Nothing near: the error alone. */
    expect_error("{\"frobnicate\": 1}", "f.json: \"frobnicate\": unknown key");
    /* The default app's options are no JSON keys: not suggested. */
    expect_error("{\"app_ids\": \"x\"}", "f.json: \"app_ids\": unknown key");
}

static void test_load_file_unknown_app_key_suggests_nearest(void **state)
{
    (void)state;
    expect_error("{\"apps\": [{\"id\": \"1\", \"key\": \"k\", \"secret\": "
                 "\"s\", \"client_event\": true}]}",
                 "f.json: apps[0].client_event: unknown key; did you mean "
                 "\"client_events\"?");
    /* The keys the loader handles itself are suggested too. */
    expect_error("{\"apps\": [{\"id\": \"1\", \"key\": \"k\", \"secret\": "
                 "\"s\", \"webhook\": []}]}",
                 "f.json: apps[0].webhook: unknown key; did you mean "
                 "\"webhooks\"?");
    expect_error("{\"apps\": [{\"id\": \"1\", \"key\": \"k\", \"secret\": "
                 "\"s\", \"histroy\": true}]}",
                 "f.json: apps[0].histroy: unknown key; did you mean "
                 "\"history\"?");
    /* "keys" (key rotation) is one of them. */
    expect_error("{\"apps\": [{\"id\": \"1\", \"key\": \"k\", \"secret\": "
                 "\"s\", \"kyes\": [{\"key\": \"k2\", \"secret\": \"s2\"}]}]}",
                 "f.json: apps[0].kyes: unknown key; did you mean "
                 "\"keys\"?");
    expect_error("{\"apps\": [{\"id\": \"1\", \"key\": \"k\", \"secret\": "
                 "\"s\", \"colour\": \"red\"}]}",
                 "f.json: apps[0].colour: unknown key");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_file_unknown_key_suggests_nearest),
        cmocka_unit_test(test_load_file_unknown_app_key_suggests_nearest),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
