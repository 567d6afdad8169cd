/*
 * tests/unit/test_print_config.c - --print-config
 * (server/config/print_config.h): each option's line shows where its
 * value came from (default, file, env, flag, and a secret file "via" its
 * option), every option but the commands has exactly one line, and no
 * secret, given by any source, ever shows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "server/config/config.h"
#include "server/config/print_config.h"

#define MAX_ARGS 16

/* A file written for one case, removed at its end. */
static char path[64];

static const char *write_file(const char *text)
{
    int fd;

    snprintf(path, sizeof(path), "/tmp/lubdub-printcfg-XXXXXX");
    fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

static int teardown(void **state)
{
    (void)state;
    if (path[0])
        unlink(path);
    path[0] = '\0';
    return 0;
}

/* Load from envp and the flags (NULL-terminated), print, return the text
 * (owned). */
static char *printed(char **envp, ...)
{
    char *argv[MAX_ARGS] = {"lubdub"}, *a, *text = NULL, err[512];
    int argc = 1;
    size_t len = 0;
    struct srv_config cfg;
    va_list ap;
    FILE *out;

    va_start(ap, envp);
    while ((a = va_arg(ap, char *)) != NULL) {
        assert_true(argc < MAX_ARGS - 1);
        argv[argc++] = a;
    }
    va_end(ap);
    srv_config_defaults(&cfg);
    if (srv_config_load(&cfg, argc, argv, envp, err, sizeof(err)))
        fail_msg("load: %s", err);
    out = open_memstream(&text, &len);
    assert_non_null(out);
    srv_config_print(out, &cfg);
    fclose(out);
    srv_config_fini(&cfg);
    return text;
}

/* The line of option name in text, without its newline, into line. */
static void line_of(const char *text, const char *name, char *line,
                    size_t cap)
{
    char want[80];
    const char *p, *e;

    snprintf(want, sizeof(want), "\n%s ", name);
    p = strstr(text, want);
    if (!p)
        fail_msg("--print-config has no line for %s", name);
    p++;
    e = strchr(p, '\n');
    assert_non_null(e);
    assert_true((size_t)(e - p) < cap);
    memcpy(line, p, (size_t)(e - p));
    line[e - p] = '\0';
}

/* Option name's line shows value and (source). */
static void expect_line(const char *text, const char *name,
                        const char *value, const char *source)
{
    char line[512], want[256];

    line_of(text, name, line, sizeof(line));
    snprintf(want, sizeof(want), "= %s   (%s)", value, source);
    if (!strstr(line, want))
        fail_msg("%s: want \"%s\", got \"%s\"", name, want, line);
}

static void test_print_config_shows_each_source(void **state)
{
    char *envp[] = {"LUBDUB_LOG_LEVEL=warn", "LUBDUB_PONG_TIMEOUT=11s",
                    "LUBDUB_IDLE_TIMEOUT=", NULL};
    char *text, flag[80];

    (void)state;
    write_file("{\"tick\": \"200ms\", \"log_level\": \"debug\", "
               "\"max_queue\": 2097152, \"tls_cert\": null}");
    snprintf(flag, sizeof(flag), "--config=%s", path);
    text = printed(envp, flag, "--pong-timeout", "12s", "--loops=2",
                   "--compression=off", NULL);
    expect_line(text, "tick", "200ms", "file");
    expect_line(text, "max_queue", "2MiB", "file");
    expect_line(text, "tls_cert", "unset", "file");
    expect_line(text, "log_level", "warn", "env");        /* env > file */
    expect_line(text, "pong_timeout", "12s", "flag");     /* flag > env */
    expect_line(text, "loops", "2", "flag");
    expect_line(text, "compression", "off", "flag");
    expect_line(text, "config", path, "flag");
    /* An empty variable is unset: the default stays, and says so. */
    expect_line(text, "idle_timeout", "0", "default");
    expect_line(text, "bind", "127.0.0.1", "default");
    expect_line(text, "ping_interval", "25s", "default");
    expect_line(text, "auth_timestamp_window", "10m", "default");
    expect_line(text, "allow_default_secret", "false", "default");
    assert_non_null(strstr(text, "\napps (the default app):\n"
                                 "  id=app-id key=app-key secret=****\n"));
    free(text);

    /* The file named by LUBDUB_CONFIG: its option says env. */
    {
        char cfgvar[96];
        char *env2[] = {cfgvar, NULL};

        snprintf(cfgvar, sizeof(cfgvar), "LUBDUB_CONFIG=%s", path);
        text = printed(env2, NULL);
        expect_line(text, "config", path, "env");
        expect_line(text, "tick", "200ms", "file");
        free(text);
    }
}

static void test_print_config_every_option_once(void **state)
{
    static const char *const commands[] = {
        "help", "version", "print_config", "new_app", "check_config",
        "webhook_dead_letters", "webhook_replay",
    };
    const struct srv_option_desc *opts;
    size_t n = srv_config_options(&opts);
    char *text = printed(NULL, NULL), want[80];

    (void)state;
    assert_int_equal(strncmp(text, "# lubdub ", 9), 0);
    for (size_t i = 0; i < n; i++) {
        bool command = false;
        const char *p;

        for (size_t c = 0; c < sizeof(commands) / sizeof(*commands); c++)
            command |= !strcmp(opts[i].name, commands[c]);
        snprintf(want, sizeof(want), "\n%s ", opts[i].name);
        p = strstr(text, want);
        if (command) {
            if (p)
                fail_msg("--print-config shows the command %s",
                         opts[i].name);
            continue;
        }
        if (!p)
            fail_msg("--print-config lacks %s", opts[i].name);
        if (strstr(p + 1, want))
            fail_msg("--print-config shows %s twice", opts[i].name);
    }
    free(text);
}

/* Secrets, one per way of giving one; none may show. */
#define S_APP "app-secret-from-a-flag-1234"
#define S_ADMIN "admin-token-from-the-env-5678"
#define S_METRICS "metrics-token-from-a-file-9012"
#define S_REDIS "redis-pass-3456"
#define S_FILEAPP "file-app-secret-7890"
#define S_SECFILE "secret-file-app-secret-2468"
#define S_PAIR1 "rotation-pair-one-1357"
#define S_PAIR2 "rotation-pair-two-8642"

static void assert_no_secret(const char *text)
{
    static const char *const secrets[] = {
        S_APP, S_ADMIN, S_METRICS, S_REDIS, S_FILEAPP, S_SECFILE, S_PAIR1,
        S_PAIR2,
        "redis-user",
    };

    for (size_t i = 0; i < sizeof(secrets) / sizeof(*secrets); i++)
        if (strstr(text, secrets[i]))
            fail_msg("--print-config shows the secret %s:\n%s", secrets[i],
                     text);
}

static void test_print_config_masks_secrets(void **state)
{
    char *envp[] = {"LUBDUB_ADMIN_TOKEN=" S_ADMIN, NULL};
    char tokfile[64] = "/tmp/lubdub-printtok-XXXXXX", flag[96];
    char secfile[64] = "/tmp/lubdub-printsec-XXXXXX", json[768];
    char *text;
    int fd;

    (void)state;
    fd = mkstemp(tokfile);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, S_METRICS "\n", strlen(S_METRICS) + 1),
                     (ssize_t)strlen(S_METRICS) + 1);
    close(fd);
    snprintf(flag, sizeof(flag), "--metrics-token-file=%s", tokfile);
    text = printed(envp, "--app-secret", S_APP, flag, "--redis",
                   "redis://redis-user:" S_REDIS "@redis.example:6380/2",
                   NULL);
    assert_no_secret(text);
    expect_line(text, "app_secret", "****", "flag");
    expect_line(text, "admin_token", "****", "env");
    expect_line(text, "metrics_token", "****", "flag via metrics_token_file");
    expect_line(text, "metrics_token_file", tokfile, "flag");
    expect_line(text, "redis", "redis://****@redis.example:6380/2", "flag");
    free(text);

    /* The file's apps: a secret given and one read from a secret_file. */
    fd = mkstemp(secfile);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, S_SECFILE, strlen(S_SECFILE)),
                     (ssize_t)strlen(S_SECFILE));
    close(fd);
    snprintf(json, sizeof(json),
             "{\"apps\": [{\"id\": \"1001\", \"key\": \"k1\", \"secret\": \""
             S_FILEAPP "\"}, {\"id\": \"1002\", \"key\": \"k2\", "
             "\"secret_file\": \"%s\", \"enabled\": false}, "
             "{\"id\": \"1003\", \"keys\": [{\"key\": \"k3a\", \"secret\": \""
             S_PAIR1 "\"}, {\"key\": \"k3b\", \"secret\": \"" S_PAIR2 "\"}]}]}",
             secfile);
    write_file(json);
    snprintf(flag, sizeof(flag), "--config=%s", path);
    text = printed(NULL, flag, NULL);
    assert_no_secret(text);
    assert_non_null(strstr(text, "\napps (file):\n"
                                 "  id=1001 key=k1 secret=****\n"
                                 "  id=1002 key=k2 secret=**** "
                                 "enabled=false\n"
                                 "  id=1003 key=k3a secret=**** key2=k3b "
                                 "secret2=****\n"));
    free(text);
    unlink(tokfile);
    unlink(secfile);
}

/* A --redis URL shows no userinfo whatever its spelling: one that does
 * not parse (a lost '/', another scheme) is printed also when validation
 * fails, and shows as **** whole; a sentinel list with an '@' too. */
static void test_print_config_masks_any_redis_url(void **state)
{
    char *bad[] = {"LUBDUB_REDIS_URL=redis:/:hunter2@redis:6379/0", NULL};
    char *other[] = {"LUBDUB_REDIS_URL=valkey://u:hunter2@redis:6379/0",
                     NULL};
    char *tls[] = {"LUBDUB_REDIS_URL=rediss://:hun@ter2@redis:6379/0",
                   "LUBDUB_REDIS_SENTINEL=u:hunter2@s1:26379,s2", NULL};
    char *text;

    (void)state;
    text = printed(bad, NULL);
    if (strstr(text, "hunter2"))
        fail_msg("--print-config shows the password:\n%s", text);
    expect_line(text, "redis", "****", "env");
    free(text);
    text = printed(other, NULL);
    if (strstr(text, "hunter2"))
        fail_msg("--print-config shows the password:\n%s", text);
    expect_line(text, "redis", "****", "env");
    free(text);
    text = printed(tls, NULL);
    if (strstr(text, "hunter2") || strstr(text, "ter2"))
        fail_msg("--print-config shows the password:\n%s", text);
    expect_line(text, "redis", "rediss://****@redis:6379/0", "env");
    expect_line(text, "redis_sentinel", "****", "env");
    free(text);
}

/* Control characters a source gave stay on their line. */
static void test_print_config_one_line_per_option(void **state)
{
    char *envp[] = {"LUBDUB_NODE_ID=a\nb", NULL};
    char *text = printed(envp, NULL);

    (void)state;
    expect_line(text, "node_id", "a\\x0ab", "env");
    free(text);
}

#define T(name) cmocka_unit_test_teardown(name, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_print_config_shows_each_source),
        T(test_print_config_every_option_once),
        T(test_print_config_masks_secrets),
        T(test_print_config_one_line_per_option),
        T(test_print_config_masks_any_redis_url),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
