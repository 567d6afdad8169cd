/*
 * tests/unit/test_secret.c - server/config/secret.c: reading a secret file (one
 * trailing newline dropped, nothing else; empty, NUL bytes, too large, not
 * a regular file and unreadable refused with one line naming the file),
 * and the live secrets a SIGHUP replaces: set, copy, unset, a buffer too
 * small, and readers on other threads while the main thread replaces the
 * value (make test-tsan runs it).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "server/config/config.h"
#include "server/config/secret.h"

/* A fresh temp dir per case, removed by teardown with what is in it. */
struct dir {
    char path[64];
    char file[128];
};

static int setup(void **state)
{
    struct dir *d = calloc(1, sizeof(*d));

    if (!d)
        return -1;
    snprintf(d->path, sizeof(d->path), "/tmp/lubdub-secret-XXXXXX");
    if (!mkdtemp(d->path)) {
        free(d);
        return -1;
    }
    snprintf(d->file, sizeof(d->file), "%s/s", d->path);
    *state = d;
    return 0;
}

static int teardown(void **state)
{
    struct dir *d = *state;
    char p[160];

    unlink(d->file);
    snprintf(p, sizeof(p), "%s/fifo", d->path);
    unlink(p);
    rmdir(d->path);
    free(d);
    return 0;
}

static void put(struct dir *d, const char *text, size_t len)
{
    FILE *f = fopen(d->file, "wb");

    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    fclose(f);
}

/* Read d->file; the value, or NULL with why filled. */
static char *got(struct dir *d, int *rc, char *why, size_t whylen)
{
    char *v = (char *)1;

    *rc = srv_secret_read_file(d->file, &v, why, whylen);
    if (*rc)
        assert_null(v);
    return v;
}

static void test_secret_file_drops_one_newline(void **state)
{
    static const struct {
        const char *text;
        size_t len;
        const char *want;
    } cases[] = {
        {"s3cret", 6, "s3cret"},
        {"s3cret\n", 7, "s3cret"},
        {"s3cret\r\n", 8, "s3cret"},
        {"s3cret\n\n", 8, "s3cret\n"},       /* one only */
        {" spaced \t\n", 10, " spaced \t"},  /* nothing else trimmed */
        {"line1\nline2\n", 12, "line1\nline2"},
        {"\r", 1, "\r"},                    /* a lone CR is the secret */
    };
    struct dir *d = *state;
    char why[256];
    int rc;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *v;

        put(d, cases[i].text, cases[i].len);
        v = got(d, &rc, why, sizeof(why));
        if (rc)
            fail_msg("case %zu: %s", i, why);
        assert_string_equal(v, cases[i].want);
        free(v);
    }
}

static void test_secret_file_refusals_name_the_file(void **state)
{
    struct dir *d = *state;
    char why[256], big[SRV_SECRET_FILE_MAX + 2], fifo[160];
    char *v;
    int rc;

    /* Missing: errno's text. */
    v = got(d, &rc, why, sizeof(why));
    assert_int_equal(rc, -ENOENT);
    assert_non_null(strstr(why, d->file));
    assert_non_null(strstr(why, "No such file or directory"));
    /* Empty, or only the newline. */
    put(d, "", 0);
    assert_null(got(d, &rc, why, sizeof(why)));
    assert_int_equal(rc, -EINVAL);
    assert_non_null(strstr(why, "is empty"));
    put(d, "\r\n", 2);
    assert_null(got(d, &rc, why, sizeof(why)));
    assert_non_null(strstr(why, "is empty"));
    /* A NUL byte cannot be part of a C string secret. */
    put(d, "ab\0cd", 5);
    assert_null(got(d, &rc, why, sizeof(why)));
    assert_non_null(strstr(why, "NUL"));
    /* The largest size passes, one byte more does not. */
    memset(big, 'x', sizeof(big));
    put(d, big, SRV_SECRET_FILE_MAX);
    v = got(d, &rc, why, sizeof(why));
    assert_int_equal(rc, 0);
    assert_int_equal(strlen(v), SRV_SECRET_FILE_MAX);
    free(v);
    put(d, big, SRV_SECRET_FILE_MAX + 1);
    assert_null(got(d, &rc, why, sizeof(why)));
    assert_int_equal(rc, -EFBIG);
    assert_non_null(strstr(why, "larger than"));
    /* A directory and a FIFO (no writer: the open must not wait). */
    assert_int_equal(srv_secret_read_file(d->path, &v, why, sizeof(why)),
                     -EINVAL);
    assert_non_null(strstr(why, "not a regular file"));
    snprintf(fifo, sizeof(fifo), "%s/fifo", d->path);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    assert_int_equal(srv_secret_read_file(fifo, &v, why, sizeof(why)),
                     -EINVAL);
    assert_non_null(strstr(why, "not a regular file"));
    /* Unreadable: only without the power to read anything. */
    put(d, "s", 1);
    chmod(d->file, 0);
    if (geteuid() != 0) {
        assert_int_equal(srv_secret_read_file(d->file, &v, why, sizeof(why)),
                         -EACCES);
        assert_non_null(strstr(why, "Permission denied"));
    }
}

static void test_secret_set_copy_unset(void **state)
{
    struct srv_secret s;
    char buf[8];

    (void)state;
    assert_int_equal(srv_secret_init(&s, NULL), 0);
    assert_false(srv_secret_isset(&s));
    assert_int_equal(srv_secret_copy(&s, buf, sizeof(buf)), 0);
    assert_string_equal(buf, "");
    assert_int_equal(srv_secret_set(&s, "abc"), 1);
    assert_true(srv_secret_isset(&s));
    assert_int_equal(srv_secret_copy(&s, buf, sizeof(buf)), 1);
    assert_string_equal(buf, "abc");
    /* The same value again: no change. */
    assert_int_equal(srv_secret_set(&s, "abc"), 0);
    /* Exactly the buffer, and one byte more. */
    assert_int_equal(srv_secret_set(&s, "1234567"), 1);
    assert_int_equal(srv_secret_copy(&s, buf, sizeof(buf)), 1);
    assert_int_equal(srv_secret_set(&s, "12345678"), 1);
    assert_int_equal(srv_secret_copy(&s, buf, sizeof(buf)), -ENOSPC);
    assert_string_equal(buf, "");
    assert_int_equal(srv_secret_set(&s, NULL), 1);
    assert_false(srv_secret_isset(&s));
    assert_int_equal(srv_secret_set(&s, NULL), 0);
    srv_secret_fini(&s);
}

/* The live secrets from a configuration: the Redis password from the
 * file wins over the URL's; without it the URL's; without both none. */
static void test_secret_from_config(void **state)
{
    struct srv_config cfg;
    struct srv_secrets s;
    char buf[64], changed[96];

    (void)state;
    memset(&cfg, 0, sizeof(cfg));
    cfg.admin_token = "admin-token-0123456789";
    cfg.redis = "redis://u:url%40pass@127.0.0.1:6379/0";
    assert_int_equal(srv_secrets_init(&s, &cfg), 0);
    assert_int_equal(srv_secret_copy(&s.admin_token, buf, sizeof(buf)), 1);
    assert_string_equal(buf, "admin-token-0123456789");
    assert_int_equal(srv_secret_copy(&s.metrics_token, buf, sizeof(buf)), 0);
    assert_int_equal(srv_secret_copy(&s.redis_password, buf, sizeof(buf)),
                     1);
    assert_string_equal(buf, "url@pass");

    cfg.redis_password = "from-the-file";
    assert_int_equal(srv_secrets_update(&s, &cfg, changed, sizeof(changed)),
                     0);
    assert_string_equal(changed, "Redis password");
    assert_int_equal(srv_secret_copy(&s.redis_password, buf, sizeof(buf)),
                     1);
    assert_string_equal(buf, "from-the-file");

    cfg.admin_token = "admin-token-new-456789";
    cfg.metrics_token = "metrics-token-0123456";
    assert_int_equal(srv_secrets_update(&s, &cfg, changed, sizeof(changed)),
                     0);
    assert_string_equal(changed, "admin token, metrics token");
    assert_int_equal(srv_secrets_update(&s, &cfg, changed, sizeof(changed)),
                     0);
    assert_string_equal(changed, "");

    cfg.redis_password = NULL;
    cfg.redis = "redis://127.0.0.1:6379/0";
    assert_int_equal(srv_secrets_update(&s, &cfg, changed, sizeof(changed)),
                     0);
    assert_int_equal(srv_secret_copy(&s.redis_password, buf, sizeof(buf)),
                     0);
    srv_secrets_fini(&s);
}

/* The sentinels' password: --redis-sentinel-password-file's only (never
 * the URL's, which is the master's), replaced and named by a reload. */
static void test_secret_sentinel_password_from_config(void **state)
{
    struct srv_config cfg;
    struct srv_secrets s;
    char buf[64], changed[96];

    (void)state;
    memset(&cfg, 0, sizeof(cfg));
    cfg.redis = "redis://:master-pass@127.0.0.1:6379/0";
    assert_int_equal(srv_secrets_init(&s, &cfg), 0);
    assert_false(srv_secret_isset(&s.redis_sentinel_password));
    assert_int_equal(srv_secret_copy(&s.redis_sentinel_password, buf,
                                     sizeof(buf)), 0);
    cfg.redis_sentinel_password = "sentinel-pass";
    assert_int_equal(srv_secrets_update(&s, &cfg, changed, sizeof(changed)),
                     0);
    assert_string_equal(changed, "Redis Sentinel password");
    assert_int_equal(srv_secret_copy(&s.redis_sentinel_password, buf,
                                     sizeof(buf)), 1);
    assert_string_equal(buf, "sentinel-pass");
    assert_int_equal(srv_secret_copy(&s.redis_password, buf, sizeof(buf)),
                     1);
    assert_string_equal(buf, "master-pass");
    srv_secrets_fini(&s);

    assert_int_equal(srv_secrets_init(&s, &cfg), 0);
    assert_int_equal(srv_secret_copy(&s.redis_sentinel_password, buf,
                                     sizeof(buf)), 1);
    assert_string_equal(buf, "sentinel-pass");
    cfg.redis_sentinel_password = NULL;
    cfg.admin_token = "admin-token-0123456789";
    assert_int_equal(srv_secrets_update(&s, &cfg, changed, sizeof(changed)),
                     0);
    assert_string_equal(changed, "admin token, Redis Sentinel password");
    assert_false(srv_secret_isset(&s.redis_sentinel_password));
    srv_secrets_fini(&s);
}

/* Readers copy while the main thread replaces the value: every copy is
 * one of the values ever set, whole (TSan: no race on the string). */
struct reader {
    struct srv_secret *s;
    atomic_bool *stop;
    unsigned long reads, bad;
};

static void *read_loop(void *arg)
{
    struct reader *r = arg;
    char buf[64];

    while (!atomic_load(r->stop) || r->reads < 1000) {
        int rc = srv_secret_copy(r->s, buf, sizeof(buf));

        if (rc != 1 || (strcmp(buf, "old-value-aaaaaaaa") &&
                        strcmp(buf, "new-value-bbbbbbbbbbbbbbbb")))
            r->bad++;
        r->reads++;
    }
    return NULL;
}

static void test_secret_readers_while_replaced(void **state)
{
    struct srv_secret s;
    atomic_bool stop = false;
    struct reader r[2] = {{&s, &stop, 0, 0}, {&s, &stop, 0, 0}};
    pthread_t t[2];

    (void)state;
    assert_int_equal(srv_secret_init(&s, "old-value-aaaaaaaa"), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, read_loop, &r[i]), 0);
    for (int i = 0; i < 20000; i++)
        assert_true(srv_secret_set(&s, i % 2 ? "old-value-aaaaaaaa"
                                             : "new-value-bbbbbbbbbbbbbbbb")
                    == 1);
    atomic_store(&stop, true);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        assert_true(r[i].reads >= 1000);
        assert_int_equal(r[i].bad, 0);
    }
    srv_secret_fini(&s);
}

#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_secret_file_drops_one_newline),
        T(test_secret_file_refusals_name_the_file),
        cmocka_unit_test(test_secret_set_copy_unset),
        cmocka_unit_test(test_secret_from_config),
        cmocka_unit_test(test_secret_sentinel_password_from_config),
        cmocka_unit_test(test_secret_readers_while_replaced),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
