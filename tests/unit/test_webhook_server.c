/*
 * tests/unit/test_webhook_server.c - the server half of webhooks: the
 * "webhooks" key of an app (server/config/config_webhooks.c, through the config
 * loader) and the SQLite store (server/webhook/webhook_store.c) in a temporary
 * directory. Single-threaded.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fail_alloc.h"
#include "hub/webhook/webhook.h"
#include "server/config/config.h"
#include "server/webhook/webhook.h"

static int load(const char *text, struct srv_config *cfg, char *err,
                size_t errlen)
{
    srv_config_defaults(cfg);
    return srv_config_load_buffer(cfg, text, strlen(text), "apps.json", err,
                                  errlen);
}

#define APP "\"id\":\"1\",\"key\":\"k\",\"secret\":\"s\""

static void test_webhook_server_config_good(void **state)
{
    struct srv_config cfg;
    char err[512];
    const struct hub_wh_conf *w;

    (void)state;
    assert_int_equal(
        load("{\"apps\":[{" APP ",\"webhook_batching\":false,\"webhooks\":["
             "{\"url\":\"https://h/x\",\"event_types\":[\"channel_occupied\","
             "\"member_added\"],\"filter\":{\"channel_name_starts_with\":"
             "\"presence-\",\"channel_name_ends_with\":\"\"},\"headers\":"
             "{\"X-A\":\"b\\tc\"}},"
             "{\"url\":\"HTTP://h:8/\",\"event_types\":[\"cache_miss\"]}]}]}",
             &cfg, err, sizeof(err)),
        0);
    assert_int_equal(cfg.apps[0].n_webhooks, 2);
    assert_false(cfg.apps[0].webhook_batching);
    assert_int_equal(cfg.apps[0].webhook_types,
                     HUB_WH_BIT(HUB_WH_CHANNEL_OCCUPIED) |
                         HUB_WH_BIT(HUB_WH_MEMBER_ADDED) |
                         HUB_WH_BIT(HUB_WH_CACHE_MISS));
    w = &cfg.apps[0].webhooks[0];
    assert_string_equal(w->url, "https://h/x");
    assert_string_equal(w->starts_with, "presence-");
    assert_null(w->ends_with);        /* "" filters nothing */
    assert_int_equal(w->n_headers, 1);
    assert_string_equal(w->headers[0], "X-A: b\tc");
    assert_int_equal(srv_config_validate(&cfg, err, sizeof(err)), 0);
    srv_config_fini(&cfg);
    /* Defaults: batching on, no webhooks. */
    assert_int_equal(load("{\"apps\":[{" APP "}]}", &cfg, err, sizeof(err)),
                     0);
    assert_true(cfg.apps[0].webhook_batching);
    assert_int_equal(cfg.apps[0].n_webhooks, 0);
    assert_int_equal(cfg.webhook_delay_ms, 3000);
    assert_int_equal(cfg.webhook_timeout_ms, 4000);
    assert_int_equal(cfg.webhook_retry_window_ms, 300000);
    assert_null(cfg.state_dir);
    srv_config_fini(&cfg);
}

static void test_webhook_server_config_errors(void **state)
{
    static const struct {
        const char *hooks, *want;
    } cases[] = {
        { "{}", "apps[0].webhooks[0].url: is missing" },
        { "{\"url\":1}", "url: must be a string" },
        { "{\"url\":\"ftp://h/\",\"event_types\":[\"cache_miss\"]}",
          "must start with http:// or https://" },
        { "{\"url\":\"http://\",\"event_types\":[\"cache_miss\"]}",
          "has no host" },
        { "{\"url\":\"http://h/ x\",\"event_types\":[\"cache_miss\"]}",
          "spaces or control" },
        { "{\"url\":\"http://h/\"}", "event_types: is missing" },
        { "{\"url\":\"http://h/\",\"event_types\":[]}", "non-empty array" },
        { "{\"url\":\"http://h/\",\"event_types\":[\"x\"]}",
          "event_types[0]: \"x\" is not an event type" },
        { "{\"url\":\"http://h/\",\"event_types\":[3]}",
          "event_types[0]: 3 is not an event type" },
        { "{\"url\":\"http://h/\",\"event_types\":[\"cache_miss\"],"
          "\"filter\":{\"channel\":\"a\"}}", "filter.channel: unknown key" },
        { "{\"url\":\"http://h/\",\"event_types\":[\"cache_miss\"],"
          "\"filter\":[]}", "filter: must be an object" },
        { "{\"url\":\"http://h/\",\"event_types\":[\"cache_miss\"],"
          "\"headers\":{\"X\":\"a\\r\\nB: c\"}}", "CR, LF" },
        { "{\"url\":\"http://h/\",\"event_types\":[\"cache_miss\"],"
          "\"headers\":{\"X\":\"a\\nb\"}}", "CR, LF" },
        { "{\"url\":\"http://h/\",\"event_types\":[\"cache_miss\"],"
          "\"headers\":{\"X Y\":\"a\"}}", "not a valid header name" },
        { "{\"url\":\"http://h/\",\"event_types\":[\"cache_miss\"],"
          "\"headers\":{\"X:Y\":\"a\"}}", "not a valid header name" },
        { "{\"url\":\"http://h/\",\"event_types\":[\"cache_miss\"],"
          "\"headers\":{\"content-type\":\"a\"}}", "cannot be overridden" },
        { "{\"url\":\"http://h/\",\"event_types\":[\"cache_miss\"],"
          "\"headers\":{\"X\":1}}", "headers.X: must be a string" },
        { "{\"url\":\"http://h/\",\"event_types\":[\"cache_miss\"],"
          "\"lambda\":{}}", "lambda: unknown key" },
    };
    char text[1024], err[512];
    struct srv_config cfg;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(text, sizeof(text), "{\"apps\":[{" APP ",\"webhooks\":[%s]}]}",
                 cases[i].hooks);
        assert_int_equal(load(text, &cfg, err, sizeof(err)), -EINVAL);
        if (!strstr(err, cases[i].want))
            fail_msg("case %zu: \"%s\" lacks \"%s\"", i, err, cases[i].want);
        assert_null(strchr(err, '\n'));
        srv_config_fini(&cfg);
    }
    /* Too many webhooks; not an array. */
    strcpy(text, "{\"apps\":[{" APP ",\"webhooks\":[");
    for (int i = 0; i < HUB_WH_MAX_WEBHOOKS + 1; i++)
        strcat(text, i ? ",{}" : "{}");
    strcat(text, "]}]}");
    assert_int_equal(load(text, &cfg, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "17 webhooks; at most 16 per app"));
    srv_config_fini(&cfg);
    assert_int_equal(load("{\"apps\":[{" APP ",\"webhooks\":{}}]}", &cfg, err,
                          sizeof(err)),
                     -EINVAL);
    assert_non_null(strstr(err, "must be an array of webhooks"));
    srv_config_fini(&cfg);
    /* The CA file must be readable. */
    assert_int_equal(load("{\"webhook_ca_file\":\"/nonexistent/ca.pem\"}",
                          &cfg, err, sizeof(err)),
                     0);
    assert_int_equal(srv_config_validate(&cfg, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "--webhook-ca-file"));
    srv_config_fini(&cfg);
    /* So must the state directory be usable. */
    assert_int_equal(load("{\"state_dir\":\"/nonexistent/a/state\"}", &cfg,
                          err, sizeof(err)),
                     0);
    assert_int_equal(srv_config_validate(&cfg, err, sizeof(err)), -EINVAL);
    assert_non_null(strstr(err, "--state-dir: \"/nonexistent/a/state\" is "
                                "not a writable directory"));
    srv_config_fini(&cfg);
    /* A missing directory whose parent is writable is made at start. */
    assert_int_equal(load("{\"state_dir\":\"/tmp/lubdub-not-yet-made\"}",
                          &cfg, err, sizeof(err)),
                     0);
    assert_int_equal(srv_config_validate(&cfg, err, sizeof(err)), 0);
    srv_config_fini(&cfg);
}

/* Out of memory anywhere in the webhooks key: an error or the whole list,
 * never a leak. */
static void test_webhook_server_config_nomem(void **state)
{
    static const char text[] =
        "{\"apps\":[{" APP ",\"webhooks\":["
        "{\"url\":\"https://h/x\",\"event_types\":[\"channel_occupied\","
        "\"member_added\"],\"filter\":{\"channel_name_starts_with\":\"p\","
        "\"channel_name_ends_with\":\"q\"},\"headers\":{\"X-A\":\"b\","
        "\"X-B\":\"c\"}},{\"url\":\"http://h/\",\"event_types\":"
        "[\"cache_miss\"]}]}]}";

    (void)state;
    FAIL_ALLOC_COUNTDOWN(
        {
            struct srv_config cfg;
            char err[512];
            int rc = load(text, &cfg, err, sizeof(err));

            if (!rc) {
                assert_int_equal(cfg.apps[0].n_webhooks, 2);
                assert_int_equal(cfg.apps[0].webhooks[0].n_headers, 2);
            } else {
                assert_true(rc == -ENOMEM || rc == -EINVAL);
            }
            srv_config_fini(&cfg);
        },
        { assert_int_equal(fail_alloc_live(), fa_live_before); });
}

/* The store, in a temporary directory. */
static struct {
    int64_t id[16];
    char idem[16][48];
    char body[16][64];
    uint64_t created[16];
    unsigned n;
} rows;

static void collect(void *ctx, const struct srv_wh_row *r)
{
    (void)ctx;
    assert_true(rows.n < 16);
    rows.id[rows.n] = r->id;
    snprintf(rows.idem[rows.n], 48, "%s", r->idem);
    snprintf(rows.body[rows.n], 64, "%.*s", (int)r->len, r->body);
    rows.created[rows.n] = r->created_ms;
    rows.n++;
}

static void test_webhook_server_store(void **state)
{
    char dir[] = "/tmp/lubdub-store-XXXXXX", path[256], err[256];
    struct srv_wh_store *s;
    struct srv_wh_row r = { .app = "1", .url = "http://h/", .n_events = 1 };
    int64_t ids[3];
    uint64_t pending, dead;
    unsigned n;

    (void)state;
    assert_non_null(mkdtemp(dir));
    assert_int_equal(srv_wh_store_open(dir, &s, err, sizeof(err)), 0);
    assert_int_equal(srv_wh_store_begin(s), 0);
    for (int i = 0; i < 3; i++) {
        char idem[8], body[8];

        snprintf(idem, sizeof(idem), "b%d", i);
        snprintf(body, sizeof(body), "{\"%d\"}", i);
        r.idem = idem;
        r.body = body;
        r.len = strlen(body);
        r.created_ms = 100 + (uint64_t)i;
        ids[i] = srv_wh_store_add(s, &r);
        assert_true(ids[i] > 0);
    }
    assert_int_equal(srv_wh_store_commit(s), 0);
    srv_wh_store_close(s);

    /* Reopened: all three, in order. */
    assert_int_equal(srv_wh_store_open(dir, &s, err, sizeof(err)), 0);
    memset(&rows, 0, sizeof(rows));
    assert_int_equal(srv_wh_store_load(s, 0, collect, NULL), 0);
    assert_int_equal(rows.n, 3);
    assert_string_equal(rows.idem[2], "b2");
    assert_string_equal(rows.body[1], "{\"1\"}");
    assert_int_equal(rows.created[0], 100);
    assert_int_equal(srv_wh_store_begin(s), 0);
    assert_int_equal(srv_wh_store_done(s, ids[0]), 0);
    assert_int_equal(srv_wh_store_dead(s, ids[1], 999, 7, "HTTP 500"), 0);
    assert_int_equal(srv_wh_store_commit(s), 0);
    assert_int_equal(srv_wh_store_counts(s, &pending, &dead), 0);
    assert_int_equal(pending, 1);
    assert_int_equal(dead, 1);
    memset(&rows, 0, sizeof(rows));
    assert_int_equal(srv_wh_store_list_dead(s, collect, NULL), 0);
    assert_int_equal(rows.n, 1);
    assert_string_equal(rows.idem[0], "b1");
    /* Replay: bad ids refused; the row goes through the replay table. */
    assert_int_equal(srv_wh_store_replay(s, "x", &n), -EINVAL);
    assert_int_equal(srv_wh_store_replay(s, "0", &n), -EINVAL);
    assert_int_equal(srv_wh_store_replay(s, "all", &n), 0);
    assert_int_equal(n, 1);
    assert_int_equal(srv_wh_store_counts(s, &pending, &dead), 0);
    assert_int_equal(dead, 0);
    assert_int_equal(srv_wh_store_begin(s), 0);
    memset(&rows, 0, sizeof(rows));
    assert_int_equal(srv_wh_store_take_replays(s, 5000, collect, NULL), 0);
    assert_int_equal(srv_wh_store_commit(s), 0);
    assert_int_equal(rows.n, 1);
    assert_string_equal(rows.idem[0], "b1");
    assert_int_equal(rows.created[0], 5000);
    assert_true(rows.id[0] > ids[2]);
    memset(&rows, 0, sizeof(rows));
    assert_int_equal(srv_wh_store_take_replays(s, 6000, collect, NULL), 0);
    assert_int_equal(rows.n, 0);
    assert_int_equal(srv_wh_store_counts(s, &pending, &dead), 0);
    assert_int_equal(pending, 2);
    srv_wh_store_checkpoint(s);
    srv_wh_store_close(s);
    /* An unwritable directory: one line. */
    assert_int_equal(srv_wh_store_open("/nonexistent/dir", &s, err,
                                       sizeof(err)),
                     -1);
    assert_non_null(strstr(err, "webhooks.db"));
    assert_null(s);
    for (const char *f = "webhooks.db\0webhooks.db-wal\0webhooks.db-shm\0"; *f;
         f += strlen(f) + 1) {
        snprintf(path, sizeof(path), "%s/%s", dir, f);
        unlink(path);
    }
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_webhook_server_config_good),
        cmocka_unit_test(test_webhook_server_config_errors),
        cmocka_unit_test(test_webhook_server_config_nomem),
        cmocka_unit_test(test_webhook_server_store),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
