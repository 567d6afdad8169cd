/*
 * tests/unit/test_help.c - --help by topic (server/config/help.h): every
 * row of the option table has a topic, the topics come in their order
 * with apps first, and each option is listed once, under its own topic.
 * (tests/unit/test_config.c checks each entry's env, JSON key and default,
 * and the 80-column wrap.)
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "server/config/config.h"

/* --help's text (owned). Through a temporary file: gcc 12 takes a
 * pointer open_memstream() fills for one that outlives its buffer. */
static char *help_text(void)
{
    FILE *out = tmpfile();
    char *text;
    long len;

    assert_non_null(out);
    srv_config_print_help(out);
    len = ftell(out);
    assert_true(len > 0);
    rewind(out);
    text = malloc((size_t)len + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)len, out), (size_t)len);
    text[len] = '\0';
    fclose(out);
    return text;
}

static void test_help_every_option_has_topic(void **state)
{
    const struct srv_option_desc *opts;
    size_t n = srv_config_options(&opts);

    (void)state;
    for (size_t i = 0; i < n; i++)
        if (srv_config_help_topic(opts[i].name) < 0)
            fail_msg("option \"%s\" has no topic in server/config/help.c's "
                     "srv__topics[]", opts[i].name);
    assert_int_equal(srv_config_help_topic("no_such_option"), -ENOENT);
    assert_null(srv_config_help_topic_title(SRV_HELP_TOPICS));
}

/* The order: apps, listen and TLS, limits, liveness, cluster,
 * webhooks, operations. */
static void test_help_topics_in_order_apps_first(void **state)
{
    static const char *const firsts[SRV_HELP_TOPICS] = {
        "Apps", "Listen and TLS", "Limits", "Liveness", "Cluster",
        "Webhooks", "Operations",
    };
    char *text = help_text();
    const char *at = text;

    (void)state;
    for (unsigned t = 0; t < SRV_HELP_TOPICS; t++) {
        const char *title = srv_config_help_topic_title(t);
        char line[128];
        const char *found;

        assert_non_null(title);
        assert_int_equal(strncmp(title, firsts[t], strlen(firsts[t])), 0);
        snprintf(line, sizeof(line), "\n%s\n", title);
        found = strstr(at, line);
        if (!found)
            fail_msg("--help lacks the heading \"%s\" after the one "
                     "before it", title);
        at = found + 1;
    }
    /* The default app's credentials open the list. */
    at = strstr(text, srv_config_help_topic_title(SRV_HELP_APPS));
    assert_non_null(at);
    assert_non_null(strstr(at, "\n  --app-id ID\n"));
    assert_true(strstr(at, "\n  --app-id ID\n") < strstr(text, "\n  --bind "));
    assert_null(strstr(text, "Other options"));
    free(text);
}

/* Option d's entry ("\n  --flag" and a space, a comma or the line's end)
 * in text, or NULL. */
static const char *entry_of(const char *text, const struct srv_option_desc *d)
{
    char flag[64];
    size_t len;

    srv_config_option_name(d, SRV_SRC_FLAG, flag, sizeof(flag));
    len = strlen(flag);
    for (const char *p = strstr(text, flag); p; p = strstr(p + 1, flag)) {
        const char *start = p;

        /* "  -h, --help" has its short form in front. */
        if (d->short_flag && p - text >= 6 && p[-2] == ',')
            start = p - 4;
        if (start - text >= 3 && !strncmp(start - 3, "\n  ", 3) &&
            (p[len] == ' ' || p[len] == ',' || p[len] == '\n'))
            return start;
    }
    return NULL;
}

static void test_help_options_under_their_topic(void **state)
{
    const struct srv_option_desc *opts;
    size_t n = srv_config_options(&opts);
    const char *heads[SRV_HELP_TOPICS + 1];
    char *text = help_text();

    (void)state;
    for (unsigned t = 0; t < SRV_HELP_TOPICS; t++)
        heads[t] = strstr(text, srv_config_help_topic_title(t));
    heads[SRV_HELP_TOPICS] = text + strlen(text);
    for (size_t i = 0; i < n; i++) {
        const char *e = entry_of(text, &opts[i]);
        int t = srv_config_help_topic(opts[i].name);

        if (!e)
            fail_msg("--help has no entry for %s", opts[i].name);
        assert_true(t >= 0);
        if (e < heads[t] || e > heads[t + 1])
            fail_msg("--help lists %s outside its topic \"%s\"",
                     opts[i].name, srv_config_help_topic_title(t));
        /* Listed once. */
        if (entry_of(e + 1, &opts[i]))
            fail_msg("--help lists %s twice", opts[i].name);
    }
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_every_option_has_topic),
        cmocka_unit_test(test_help_topics_in_order_apps_first),
        cmocka_unit_test(test_help_options_under_their_topic),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
