/*
 * tests/unit/test_redis_sentinel.c - which address is the primary
 * (server/redis/redis_sentinel.h), asked of fake sentinels on loopback
 * ports (tests/unit/fake_resp.h), blocking and on a libev loop: the first
 * sentinel that knows answers, one down or knowing nothing is passed
 * over, every reason is kept when none knows, AUTH goes first when a
 * password is set, the asynchronous answer comes later (never from inside
 * the ask), and +switch-master for our master, only, reaches switched.
 *
 * Thread: the test's (blocking, and running the loop); each fake sentinel
 * serves on its own.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "fake_resp.h"
#include "server/config/secret.h"
#include "server/redis/redis_sentinel.h"

#define WAIT_S 20.0
#define NIL "*-1\r\n"
#define NO_MASTER "-ERR No such master with that name\r\n"
/* An address whose host has 8 characters. */
#define KNOWS(h, p) "*2\r\n$8\r\n" h "\r\n$4\r\n" #p "\r\n"

/* What one fake sentinel answers, and what it was asked. */
struct sent {
    const char *answer; /* to get-master-addr-by-name */
    const char *auth;   /* to AUTH (NULL: +OK) */
    const char *push;   /* written after a SUBSCRIBE's confirmation */
    bool mute;          /* reads, never answers */
    int asked, auths, auth_bad, subs;
    struct fake_resp f;
};

static void serve_sentinel(struct fake_conn *fc, void *arg)
{
    struct sent *s = arg;

    if (s->mute) {
        fake_resp_drain(fc);
        return;
    }
    while (fake_resp_read(fc) > 0) {
        if (fake_resp_is(fc, 0, "AUTH")) {
            s->auths++;
            s->auth_bad += !(fc->argc == 2 && fake_resp_is(fc, 1, "s3cret"));
            fake_resp_write(fc, s->auth ? s->auth : "+OK\r\n", 0);
        } else if (fake_resp_is(fc, 0, "SENTINEL") && fc->argc == 3 &&
                   fake_resp_is(fc, 1, "get-master-addr-by-name") &&
                   fake_resp_is(fc, 2, "mymaster")) {
            s->asked++;
            fake_resp_split(fc, s->answer, 0, 7);
        } else if (fake_resp_is(fc, 0, "SUBSCRIBE") && fc->argc == 2 &&
                   fake_resp_is(fc, 1, "+switch-master")) {
            s->subs++;
            fake_resp_write(fc,
                            "*3\r\n$9\r\nsubscribe\r\n$14\r\n+switch-master"
                            "\r\n:1\r\n",
                            0);
            fake_resp_split(fc, s->push, 0, 9);
        } else {
            fake_resp_write(fc, "-ERR unknown command\r\n", 0);
        }
    }
}

/* Addresses for the sentinels: fakes for s[i] with an answer, a port
 * nobody listens on for the others. */
static void sentinels_of(struct srv_redis_sentinels *cfg, struct sent *s,
                         size_t n)
{
    memset(cfg, 0, sizeof(*cfg));
    snprintf(cfg->master, sizeof(cfg->master), "mymaster");
    for (size_t i = 0; i < n; i++) {
        snprintf(cfg->addr[i].host, sizeof(cfg->addr[i].host), "127.0.0.1");
        if (s[i].answer || s[i].push || s[i].mute) {
            fake_resp_start(&s[i].f, serve_sentinel, &s[i]);
            cfg->addr[i].port = s[i].f.port;
        } else {
            cfg->addr[i].port = fake_resp_closed_port();
        }
    }
    cfg->n = n;
}

static void sentinels_stop(struct sent *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i].answer || s[i].push || s[i].mute)
            fake_resp_stop(&s[i].f);
}

static const struct timeval five_s = {5, 0};

/* ------------------------------------------------------------ blocking */

static void test_redis_sentinel_ask_sync_first_that_knows_answers(
    void **state)
{
    struct sent s[2] = {{.answer = KNOWS("10.0.0.1", 6380)},
                        {.answer = KNOWS("10.0.0.2", 6381)}};
    struct srv_redis_sentinels cfg;
    struct srv_redis_addr out = {0};
    char why[512];

    (void)state;
    sentinels_of(&cfg, s, 2);
    assert_int_equal(srv_redis_sentinel_ask_sync(&cfg, &five_s, &out, why,
                                                 sizeof(why)),
                     0);
    assert_string_equal(out.host, "10.0.0.1");
    assert_int_equal(out.port, 6380);
    sentinels_stop(s, 2);
    assert_int_equal(s[0].asked, 1);
    assert_int_equal(s[1].asked, 0);
    assert_int_equal(s[0].auths, 0);
}

static void test_redis_sentinel_ask_sync_passes_over_down_and_unknowing(
    void **state)
{
    struct sent s[3] = {{0}, {.answer = NIL},
                        {.answer = KNOWS("10.0.0.3", 6390)}};
    struct srv_redis_sentinels cfg;
    struct srv_redis_addr out = {0};
    char why[512];

    (void)state;
    sentinels_of(&cfg, s, 3);
    assert_int_equal(srv_redis_sentinel_ask_sync(&cfg, &five_s, &out, why,
                                                 sizeof(why)),
                     0);
    assert_string_equal(out.host, "10.0.0.3");
    assert_int_equal(out.port, 6390);
    sentinels_stop(s, 3);
    assert_int_equal(s[1].asked, 1);
    assert_int_equal(s[2].asked, 1);
}

static void test_redis_sentinel_ask_sync_silent_sentinel_times_out(
    void **state)
{
    const struct timeval tv = {0, 300 * 1000};
    struct sent s[2] = {{.mute = true}, {.answer = KNOWS("10.0.0.8", 6379)}};
    struct srv_redis_sentinels cfg;
    struct srv_redis_addr out = {0};
    char why[512], want[512];

    (void)state;
    sentinels_of(&cfg, s, 2);
    assert_int_equal(srv_redis_sentinel_ask_sync(&cfg, &tv, &out, why,
                                                 sizeof(why)),
                     0);
    assert_string_equal(out.host, "10.0.0.8");
    cfg.n = 1;
    assert_int_equal(srv_redis_sentinel_ask_sync(&cfg, &tv, &out, why,
                                                 sizeof(why)),
                     -EHOSTUNREACH);
    snprintf(want, sizeof(want), "sentinel 127.0.0.1:%d: timed out",
             cfg.addr[0].port);
    assert_string_equal(why, want);
    sentinels_stop(s, 2);
}

/* The reasons, one per sentinel, as the code words them. */
static void every_reason(char *want, size_t cap,
                         const struct srv_redis_sentinels *cfg)
{
    snprintf(want, cap,
             "sentinel 127.0.0.1:%d: %s; "
             "sentinel 127.0.0.1:%d: knows no master named mymaster; "
             "sentinel 127.0.0.1:%d: ERR No such master with that name; "
             "sentinel 127.0.0.1:%d: answered a bad port",
             cfg->addr[0].port, strerror(ECONNREFUSED), cfg->addr[1].port,
             cfg->addr[2].port, cfg->addr[3].port);
}

static struct sent all_fail[4] = {
    {0},
    {.answer = NIL},
    {.answer = NO_MASTER},
    {.answer = "*2\r\n$8\r\n10.0.0.4\r\n$5\r\n99999\r\n"},
};

static void test_redis_sentinel_ask_sync_all_fail_gives_every_reason(
    void **state)
{
    struct sent *s = all_fail;
    struct srv_redis_sentinels cfg;
    struct srv_redis_addr out = {0};
    char why[1024], want[1024];

    (void)state;
    for (int i = 0; i < 4; i++)
        s[i].asked = 0;
    sentinels_of(&cfg, s, 4);
    assert_int_equal(srv_redis_sentinel_ask_sync(&cfg, &five_s, &out, why,
                                                 sizeof(why)),
                     -EHOSTUNREACH);
    every_reason(want, sizeof(want), &cfg);
    assert_string_equal(why, want);
    sentinels_stop(s, 4);
}

static void test_redis_sentinel_ask_sync_sends_auth_and_reports_its_error(
    void **state)
{
    struct sent s[2] = {
        {.answer = KNOWS("10.0.0.5", 6379),
         .auth = "-WRONGPASS invalid username-password pair\r\n"},
        {.answer = KNOWS("10.0.0.6", 6379)}};
    struct srv_redis_sentinels cfg;
    struct srv_secret pass;
    struct srv_redis_addr out = {0};
    char why[512], want[512];

    (void)state;
    assert_int_equal(srv_secret_init(&pass, "s3cret"), 0);
    sentinels_of(&cfg, s, 2);
    cfg.pass = &pass;
    assert_int_equal(srv_redis_sentinel_ask_sync(&cfg, &five_s, &out, why,
                                                 sizeof(why)),
                     0);
    assert_string_equal(out.host, "10.0.0.6");
    /* The first alone: its AUTH refused. */
    cfg.n = 1;
    assert_int_equal(srv_redis_sentinel_ask_sync(&cfg, &five_s, &out, why,
                                                 sizeof(why)),
                     -EHOSTUNREACH);
    snprintf(want, sizeof(want),
             "sentinel 127.0.0.1:%d: AUTH: WRONGPASS invalid "
             "username-password pair",
             cfg.addr[0].port);
    assert_string_equal(why, want);
    sentinels_stop(s, 2);
    assert_int_equal(s[0].auths, 2);
    assert_int_equal(s[0].auth_bad, 0);
    assert_int_equal(s[1].auths, 1);
    assert_int_equal(s[1].auth_bad, 0);
    assert_int_equal(s[1].asked, 1);
    srv_secret_fini(&pass);
}

/* -------------------------------------------------------- asynchronous */

struct answer {
    int calls;
    bool in_ask; /* set around srv_redis_sentinel_ask */
    bool from_inside;
    char host[256], why[1024];
    int port;
    atomic_bool done;
};

static void on_answer(void *ctx, const char *host, int port, const char *why)
{
    struct answer *a = ctx;

    a->from_inside |= a->in_ask;
    a->calls++;
    snprintf(a->host, sizeof(a->host), "%s", host ? host : "");
    snprintf(a->why, sizeof(a->why), "%s", why ? why : "");
    a->port = port;
    atomic_store(&a->done, true);
}

static void ask(struct ev_loop *loop, struct srv_redis_sentinel *sn,
                struct answer *a)
{
    memset(a, 0, sizeof(*a));
    a->in_ask = true;
    srv_redis_sentinel_ask(sn, on_answer, a);
    a->in_ask = false;
    assert_int_equal(a->calls, 0);
    assert_true(fake_resp_run(loop, &a->done, WAIT_S));
    assert_false(a->from_inside);
    assert_int_equal(a->calls, 1);
}

static void test_redis_sentinel_ask_passes_over_down_and_unknowing(
    void **state)
{
    struct sent s[3] = {{0}, {.answer = NIL},
                        {.answer = KNOWS("10.0.0.3", 6390)}};
    struct srv_redis_sentinels cfg;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct srv_redis_sentinel *sn;
    struct answer a;

    (void)state;
    sentinels_of(&cfg, s, 3);
    sn = srv_redis_sentinel_create(loop, &cfg, NULL, NULL);
    assert_non_null(sn);
    ask(loop, sn, &a);
    assert_string_equal(a.host, "10.0.0.3");
    assert_int_equal(a.port, 6390);
    assert_string_equal(a.why, "");
    /* The one that answered is asked first next time. */
    ask(loop, sn, &a);
    assert_string_equal(a.host, "10.0.0.3");
    srv_redis_sentinel_destroy(sn);
    sentinels_stop(s, 3);
    assert_int_equal(s[1].asked, 1);
    assert_int_equal(s[2].asked, 2);
    ev_loop_destroy(loop);
}

static void test_redis_sentinel_ask_all_fail_gives_every_reason(void **state)
{
    struct sent *s = all_fail;
    struct srv_redis_sentinels cfg;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct srv_redis_sentinel *sn;
    struct answer a;
    char want[1024];

    (void)state;
    sentinels_of(&cfg, s, 4);
    sn = srv_redis_sentinel_create(loop, &cfg, NULL, NULL);
    ask(loop, sn, &a);
    assert_string_equal(a.host, "");
    every_reason(want, sizeof(want), &cfg);
    assert_string_equal(a.why, want);
    srv_redis_sentinel_destroy(sn);
    sentinels_stop(s, 4);
    ev_loop_destroy(loop);
}

static void test_redis_sentinel_ask_sends_auth_and_reports_its_error(
    void **state)
{
    struct sent s[2] = {
        {.answer = KNOWS("10.0.0.5", 6379),
         .auth = "-WRONGPASS invalid username-password pair\r\n"},
        {.answer = KNOWS("10.0.0.6", 6379)}};
    struct srv_redis_sentinels cfg;
    struct srv_secret pass;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct srv_redis_sentinel *sn;
    struct answer a;
    char want[512];

    (void)state;
    assert_int_equal(srv_secret_init(&pass, "s3cret"), 0);
    sentinels_of(&cfg, s, 2);
    cfg.pass = &pass;
    sn = srv_redis_sentinel_create(loop, &cfg, NULL, NULL);
    ask(loop, sn, &a);
    assert_string_equal(a.host, "10.0.0.6");
    srv_redis_sentinel_destroy(sn);
    cfg.n = 1;
    sn = srv_redis_sentinel_create(loop, &cfg, NULL, NULL);
    ask(loop, sn, &a);
    snprintf(want, sizeof(want),
             "sentinel 127.0.0.1:%d: AUTH: WRONGPASS invalid "
             "username-password pair",
             cfg.addr[0].port);
    assert_string_equal(a.why, want);
    srv_redis_sentinel_destroy(sn);
    sentinels_stop(s, 2);
    assert_int_equal(s[0].auths, 2);
    assert_int_equal(s[0].auth_bad, 0);
    assert_int_equal(s[1].auths, 1);
    srv_secret_fini(&pass);
    ev_loop_destroy(loop);
}

static void test_redis_sentinel_ask_silent_sentinel_passed_over_after_1s(
    void **state)
{
    struct sent s[2] = {{.mute = true}, {.answer = KNOWS("10.0.0.8", 6379)}};
    struct srv_redis_sentinels cfg;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct srv_redis_sentinel *sn;
    struct answer a;
    char want[512];

    (void)state;
    sentinels_of(&cfg, s, 2);
    sn = srv_redis_sentinel_create(loop, &cfg, NULL, NULL);
    ask(loop, sn, &a);
    assert_string_equal(a.host, "10.0.0.8");
    srv_redis_sentinel_destroy(sn);
    cfg.n = 1;
    sn = srv_redis_sentinel_create(loop, &cfg, NULL, NULL);
    ask(loop, sn, &a);
    snprintf(want, sizeof(want), "sentinel 127.0.0.1:%d: no answer within 1 s",
             cfg.addr[0].port);
    assert_string_equal(a.why, want);
    srv_redis_sentinel_destroy(sn);
    sentinels_stop(s, 2);
    ev_loop_destroy(loop);
}

static void test_redis_sentinel_ask_unresolvable_answers_later(void **state)
{
    struct srv_redis_sentinels cfg = {.n = 2, .master = "mymaster"};
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct srv_redis_sentinel *sn;
    struct answer a;

    (void)state;
    for (int i = 0; i < 2; i++) {
        snprintf(cfg.addr[i].host, sizeof(cfg.addr[i].host),
                 "no-such-sentinel-%d.invalid", i);
        cfg.addr[i].port = 26379;
    }
    sn = srv_redis_sentinel_create(loop, &cfg, NULL, NULL);
    /* Every sentinel fails inside the ask: the answer still comes later. */
    ask(loop, sn, &a);
    assert_string_equal(a.host, "");
    assert_non_null(strstr(a.why, "sentinel no-such-sentinel-0.invalid:26379:"
                                  " cannot resolve"));
    assert_non_null(strstr(a.why, "; sentinel no-such-sentinel-1.invalid"));
    srv_redis_sentinel_destroy(sn);
    ev_loop_destroy(loop);
}

static void test_redis_sentinel_ask_again_drops_the_running_question(
    void **state)
{
    struct sent s[1] = {{.answer = KNOWS("10.0.0.7", 6379)}};
    struct srv_redis_sentinels cfg;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct srv_redis_sentinel *sn;
    struct answer first = {0}, a;

    (void)state;
    sentinels_of(&cfg, s, 1);
    sn = srv_redis_sentinel_create(loop, &cfg, NULL, NULL);
    srv_redis_sentinel_ask(sn, on_answer, &first);
    ask(loop, sn, &a);
    assert_string_equal(a.host, "10.0.0.7");
    /* A cancelled question is never answered either. */
    srv_redis_sentinel_ask(sn, on_answer, &first);
    srv_redis_sentinel_cancel(sn);
    ask(loop, sn, &a);
    assert_int_equal(first.calls, 0);
    srv_redis_sentinel_destroy(sn);
    sentinels_stop(s, 1);
    ev_loop_destroy(loop);
}

struct switched {
    int calls;
    char host[256];
    int port;
    atomic_bool done;
};

static void on_switched(void *ctx, const char *host, int port,
                        const char *why)
{
    struct switched *w = ctx;

    assert_null(why);
    w->calls++;
    snprintf(w->host, sizeof(w->host), "%s", host);
    w->port = port;
    atomic_store(&w->done, true);
}

/* +switch-master messages for these payloads, one after the other. */
static void switches(char *out, size_t cap, const char *const *m, size_t n)
{
    size_t len = 0;

    for (size_t i = 0; i < n; i++)
        len += (size_t)snprintf(out + len, cap - len,
                                "*3\r\n$7\r\nmessage\r\n$14\r\n"
                                "+switch-master\r\n$%zu\r\n%s\r\n",
                                strlen(m[i]), m[i]);
}

static void test_redis_sentinel_watch_switch_master_for_ours_only(void **state)
{
    static const char *const m[] = {
        "other 10.0.0.1 6379 10.0.0.2 6379",
        "mymasterx 10.0.0.1 6379 10.0.0.2 6379",
        "mymaster 10.0.0.1 6379 10.0.0.2 0",
        "mymaster 10.0.0.1 6379 10.0.0.3 6390",
    };
    char push[1024];
    struct sent s[1] = {{.push = push}};
    struct srv_redis_sentinels cfg;
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    struct srv_redis_sentinel *sn;
    struct switched w = {0};

    (void)state;
    switches(push, sizeof(push), m, 4);
    sentinels_of(&cfg, s, 1);
    sn = srv_redis_sentinel_create(loop, &cfg, on_switched, &w);
    srv_redis_sentinel_watch(sn);
    srv_redis_sentinel_watch(sn); /* one subscription, still */
    assert_true(fake_resp_run(loop, &w.done, WAIT_S));
    /* Messages come in order: the others were seen and passed over. */
    assert_int_equal(w.calls, 1);
    assert_string_equal(w.host, "10.0.0.3");
    assert_int_equal(w.port, 6390);
    srv_redis_sentinel_destroy(sn);
    sentinels_stop(s, 1);
    assert_int_equal(s[0].subs, 1);
    assert_int_equal(s[0].f.conns, 1);
    ev_loop_destroy(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redis_sentinel_ask_sync_first_that_knows_answers),
        cmocka_unit_test(
            test_redis_sentinel_ask_sync_passes_over_down_and_unknowing),
        cmocka_unit_test(
            test_redis_sentinel_ask_sync_silent_sentinel_times_out),
        cmocka_unit_test(
            test_redis_sentinel_ask_sync_all_fail_gives_every_reason),
        cmocka_unit_test(
            test_redis_sentinel_ask_sync_sends_auth_and_reports_its_error),
        cmocka_unit_test(
            test_redis_sentinel_ask_passes_over_down_and_unknowing),
        cmocka_unit_test(test_redis_sentinel_ask_all_fail_gives_every_reason),
        cmocka_unit_test(
            test_redis_sentinel_ask_sends_auth_and_reports_its_error),
        cmocka_unit_test(
            test_redis_sentinel_ask_silent_sentinel_passed_over_after_1s),
        cmocka_unit_test(test_redis_sentinel_ask_unresolvable_answers_later),
        cmocka_unit_test(
            test_redis_sentinel_ask_again_drops_the_running_question),
        cmocka_unit_test(
            test_redis_sentinel_watch_switch_master_for_ours_only),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
