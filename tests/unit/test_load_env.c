/*
 * tests/unit/test_load_env.c - the LUBDUB_* environment's warnings
 * (server/config/load_env.c): a variable that is no option is warned
 * about once, with the option's variable it most likely meant; the names
 * other parts of lubdub and its tests read are not; the commands that
 * answer alone read no environment; a warning is one line; under failing
 * allocations a warning is dropped, never the load.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fail_alloc.h"
#include "server/config/config.h"

/* Load cfg from envp and the flag arg (NULL: none); returns the load's
 * status, err filled. */
static int load(struct srv_config *cfg, char **envp, char *arg)
{
    char *argv[] = {"lubdub", arg, NULL};
    char err[512];

    srv_config_defaults(cfg);
    return srv_config_load(cfg, arg ? 2 : 1, argv, envp, err, sizeof(err));
}

static void test_load_env_unknown_variable_warned_with_suggestion(void **s)
{
    char *envp[] = {
        "LUBDUB_PING_INTERVALL=3s",     /* a typo of an option */
        "LUBDUB_PORT=7000",             /* an option */
        "LUBDUB_FOOBARBAZQUUX=1",       /* near nothing */
        "LUBDUB_REDIS_URL=",            /* --redis's own spelling */
        "LUBDUB_CONFIG=",
        "PATH=/bin",
        "lubdub_port=1",                /* not the prefix */
        NULL,
    };
    struct srv_config cfg;

    (void)s;
    assert_int_equal(load(&cfg, envp, NULL), 0);
    assert_int_equal(cfg.port, 7000);
    assert_int_equal(cfg.ping_interval_ms, 25000);
    assert_non_null(cfg.warnings);
    assert_string_equal(cfg.warnings,
        "LUBDUB_PING_INTERVALL: not a lubdub option, ignored; did you mean "
        "LUBDUB_PING_INTERVAL?\n"
        "LUBDUB_FOOBARBAZQUUX: not a lubdub option, ignored\n");
    srv_config_fini(&cfg);
}

static void test_load_env_names_read_elsewhere_not_warned(void **s)
{
    char *envp[] = {
        "LUBDUB_TEST_STALL_MS=5",       /* server/main.c's test hooks */
        "LUBDUB_TEST_DIR_DELAY_MS=5",
        "LUBDUB_TEST_DROP_RX=3",        /* server/redis/redis.c */
        "LUBDUB_TEST_ANYTHING_NEW=1",
        "LUBDUB_HEALTH_PORT=6002",      /* deploy/healthcheck.sh */
        "LUBDUB_BINARY=/x/lubdub",      /* the test harnesses' */
        "LUBDUB_TIME_SCALE=4",
        "LUBDUB_CHROMIUM=/usr/bin/chromium",
        "LUBDUB_EXPECT_TLS_PMD=1",
        "LUBDUB_DOCS_DIR=/x",
        "LUBDUB_CI_CACHE=/x",
        "LUBDUB_CI_STORAGE_DRIVER=vfs",
        "LUBDUB_COMMIT=abc",            /* deploy/Dockerfile's ARG */
        "LUBDUB_APP_SECRET_FILE=",      /* options, set or empty */
        "LUBDUB_LOG_LEVEL=debug",
        NULL,
    };
    struct srv_config cfg;

    (void)s;
    assert_int_equal(load(&cfg, envp, NULL), 0);
    assert_string_equal(cfg.log_level, "debug");
    assert_null(cfg.warnings);
    srv_config_fini(&cfg);
}

static void test_load_env_commands_read_no_environment(void **s)
{
    char *envp[] = {"LUBDUB_PROT=1", "LUBDUB_PORT=nope", NULL};
    char *cmds[] = {"--version", "--new-app", "--help"};
    struct srv_config cfg;

    (void)s;
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(load(&cfg, envp, cmds[i]), 0);
        assert_null(cfg.warnings);
        assert_int_equal(cfg.port, 6001);
        srv_config_fini(&cfg);
    }
    /* --print-config reads everything, as the hub would. */
    assert_int_equal(load(&cfg, envp + 0, "--print-config"), -EINVAL);
    srv_config_fini(&cfg);
    envp[1] = NULL;
    assert_int_equal(load(&cfg, envp, "--print-config"), 0);
    assert_true(cfg.print_config);
    assert_string_equal(cfg.warnings, "LUBDUB_PROT: not a lubdub option, "
                        "ignored; did you mean LUBDUB_PORT?\n");
    srv_config_fini(&cfg);
}

static void test_load_env_warning_is_one_line(void **s)
{
    char *envp[] = {"LUBDUB_A\nB=1", NULL};
    struct srv_config cfg;

    (void)s;
    assert_int_equal(load(&cfg, envp, NULL), 0);
    assert_non_null(cfg.warnings);
    assert_non_null(strstr(cfg.warnings, "LUBDUB_A\\x0aB"));
    assert_ptr_equal(strchr(cfg.warnings, '\n'),
                     cfg.warnings + strlen(cfg.warnings) - 1);
    srv_config_fini(&cfg);
}

/* Out of memory at each allocation: the load never fails for a warning
 * (it fails only where an option's own value needs memory), and nothing
 * leaks. */
static void test_load_env_warning_out_of_memory(void **s)
{
    char *envp[] = {"LUBDUB_PROT=1", "LUBDUB_LOG_LEVEL=debug", NULL};
    struct srv_config cfg;
    int rc = 0;

    (void)s;
    FAIL_ALLOC_COUNTDOWN(
        { rc = load(&cfg, envp, NULL); },
        {
            if (!rc && !fa_failed)
                assert_non_null(cfg.warnings);
            if (rc)
                assert_int_equal(rc, -ENOMEM);
            srv_config_fini(&cfg);
            assert_int_equal(fail_alloc_live(), fa_live_before);
        });
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_env_unknown_variable_warned_with_suggestion),
        cmocka_unit_test(test_load_env_names_read_elsewhere_not_warned),
        cmocka_unit_test(test_load_env_commands_read_no_environment),
        cmocka_unit_test(test_load_env_warning_is_one_line),
        cmocka_unit_test(test_load_env_warning_out_of_memory),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
