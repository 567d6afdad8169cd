/*
 * tests/unit/test_auth.c - Pusher signatures against the test vectors of
 * docs/PROTOCOL.md 6.1 and 7, and every way a REST request can fail.
 *
 * Time is passed in as numbers; nothing reads a clock.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include <pthread.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "hub/app/auth.h"
#include "hub/base/query.h"

#define KEY "278d425bdf160c739803"
#define SECRET "7ad3773142a6692b25b8"
#define TS 1353088179u
#define EVENTS_BODY \
    "{\"name\":\"foo\",\"channels\":[\"project-3\"]," \
    "\"data\":\"{\\\"some\\\":\\\"data\\\"}\"}"
#define EVENTS_MD5 "ec365a775a4cd0599faeb73354201b6f"
#define EVENTS_SIG \
    "da454824c97ba181a32ccc17a72625ba02771f50b50e1e7430e47a1f3f457e6c"
#define CHANNELS_SIG \
    "16819168891cb5dfd72b5c7a5d3d602605b26c6ba1930033b5e2eeeb65010291"

static struct hub_app test_app(void)
{
    struct hub_app app;

    memset(&app, 0, sizeof(app));
    hub_app_defaults(&app);
    app.id = "3";
    app.key = KEY;
    app.secret = SECRET;
    return app;
}

/*
 * The query of the last rest() call, parsed as hub/rest/router.c parses it
 * before the check (one request at a time), and that parse's result.
 */
static struct hub_query parsed;
static int parsed_rc;

/* A request at the vectors' timestamp, checked five seconds later. */
static struct hub_rest_request rest(const char *method, const char *path,
                                    const char *query, const char *body)
{
    struct hub_rest_request r = {
        .method = strcmp(method, "POST") == 0 ? HUB_HTTP_POST : HUB_HTTP_GET,
        .path = path,
        .query = query ? &parsed : NULL,
        .body = body,
        .body_len = body ? strlen(body) : 0,
        .now_s = TS + 5,
        .window_s = 600,
    };

    parsed_rc = hub_query_parse(&parsed, query ? query : "",
                                query ? strlen(query) : 0);
    return r;
}

/* -EINVAL when the query does not parse (hub/rest/router.c answers 400
 * before the check), else what the check says. */
static int check(const char *method, const char *path, const char *query,
                 const char *body, char *why, size_t why_len)
{
    struct hub_app app = test_app();
    struct hub_rest_request r = rest(method, path, query, body);

    if (parsed_rc)
        return -EINVAL;
    return hub_auth_check_rest(&app, &r, why, why_len);
}

static void test_auth_hmac_webhook_vector(void **state)
{
    char hex[HUB_SHA256_HEX_LEN + 1];
    const char *body = "{\"hello\":\"world\"}";

    (void)state;
    hub_auth_hmac_hex("secret", 6, body, strlen(body), hex);
    assert_string_equal(hex, "2677ad3e7c090b2fa2c0fb13020d66d5"
                             "420879b8316eb356a2d60fb9073bc778");
}

static void test_auth_md5_events_body_vector(void **state)
{
    char hex[HUB_MD5_HEX_LEN + 1];

    (void)state;
    hub_auth_md5_hex(EVENTS_BODY, strlen(EVENTS_BODY), hex);
    assert_string_equal(hex, EVENTS_MD5);
}

static void test_auth_hmac_rest_post_string_vector(void **state)
{
    const char *s = "POST\n/apps/3/events\nauth_key=" KEY
                    "&auth_timestamp=1353088179&auth_version=1.0"
                    "&body_md5=" EVENTS_MD5;
    char hex[HUB_SHA256_HEX_LEN + 1];

    (void)state;
    hub_auth_hmac_hex(SECRET, strlen(SECRET), s, strlen(s), hex);
    assert_string_equal(hex, EVENTS_SIG);
}

static void test_auth_equal_is_exact(void **state)
{
    (void)state;
    assert_true(hub_auth_equal("abc", 3, "abc", 3));
    assert_false(hub_auth_equal("abc", 3, "abd", 3));
    assert_false(hub_auth_equal("abc", 3, "abcd", 4));
    assert_true(hub_auth_equal("", 0, "", 0));
}

static void test_auth_channel_private_vector(void **state)
{
    struct hub_app app = test_app();
    char expect[128];

    (void)state;
    assert_int_equal(hub_auth_check_channel(
                         &app, "1234.1234", "private-foobar", NULL, 0,
                         KEY ":58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f"
                             "5369f135bf843651c3a4",
                         expect, sizeof(expect)),
                     0);
    assert_string_equal(expect, "1234.1234:private-foobar");
}

static void test_auth_channel_presence_vector(void **state)
{
    struct hub_app app = test_app();
    const char *cd = "{\"user_id\":10,\"user_info\":{\"name\":"
                     "\"Mr. Channels\"}}";
    const char *good = KEY ":31935e7d86dba64c2a90aed31fdc61869f9b22ba9d88"
                           "63bba239c03ca481bc80";
    /* The value printed in Pusher's docs signs "Mr. Pusher" instead. */
    const char *docs = KEY ":afaed3695da2ffd16931f457e338e6c9f2921fa133ce"
                           "7dac49f529792be6304c";

    (void)state;
    assert_int_equal(hub_auth_check_channel(&app, "1234.1234",
                                            "presence-foobar", cd,
                                            strlen(cd), good, NULL, 0),
                     0);
    assert_int_equal(hub_auth_check_channel(&app, "1234.1234",
                                            "presence-foobar", cd,
                                            strlen(cd), docs, NULL, 0),
                     -EACCES);
}

static void test_auth_channel_presence_uses_exact_bytes(void **state)
{
    struct hub_app app = test_app();
    /* Same JSON with one extra space: a different string to sign. */
    const char *cd = "{\"user_id\":10, \"user_info\":{\"name\":"
                     "\"Mr. Channels\"}}";
    const char *good = KEY ":31935e7d86dba64c2a90aed31fdc61869f9b22ba9d88"
                           "63bba239c03ca481bc80";

    (void)state;
    assert_int_equal(hub_auth_check_channel(&app, "1234.1234",
                                            "presence-foobar", cd,
                                            strlen(cd), good, NULL, 0),
                     -EACCES);
}

static void test_auth_channel_bad_signature_is_eacces(void **state)
{
    struct hub_app app = test_app();

    (void)state;
    assert_int_equal(hub_auth_check_channel(
                         &app, "1234.1234", "private-foobar", NULL, 0,
                         KEY ":58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f"
                             "5369f135bf843651c3a5",
                         NULL, 0),
                     -EACCES);
    /* The right signature for another socket. */
    assert_int_equal(hub_auth_check_channel(
                         &app, "1234.1235", "private-foobar", NULL, 0,
                         KEY ":58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f"
                             "5369f135bf843651c3a4",
                         NULL, 0),
                     -EACCES);
    assert_int_equal(hub_auth_check_channel(&app, "1234.1234",
                                            "private-foobar", NULL, 0,
                                            KEY ":", NULL, 0),
                     -EACCES);
}

static void test_auth_channel_wrong_key_is_einval(void **state)
{
    struct hub_app app = test_app();

    (void)state;
    assert_int_equal(hub_auth_check_channel(
                         &app, "1234.1234", "private-foobar", NULL, 0,
                         "otherkey:58df8b0c36d6982b82c3ecf6b4662e34fe8c25bb"
                         "a48f5369f135bf843651c3a4",
                         NULL, 0),
                     -EINVAL);
}

static void test_auth_channel_malformed_auth_is_einval(void **state)
{
    struct hub_app app = test_app();

    (void)state;
    assert_int_equal(hub_auth_check_channel(&app, "1234.1234",
                                            "private-foobar", NULL, 0, NULL,
                                            NULL, 0),
                     -EINVAL);
    assert_int_equal(hub_auth_check_channel(&app, "1234.1234",
                                            "private-foobar", NULL, 0, "",
                                            NULL, 0),
                     -EINVAL);
    assert_int_equal(hub_auth_check_channel(&app, "1234.1234",
                                            "private-foobar", NULL, 0,
                                            "58df8b0c36d6982b", NULL, 0),
                     -EINVAL);
}

static void test_auth_channel_expect_is_truncated(void **state)
{
    struct hub_app app = test_app();
    char expect[8];

    (void)state;
    memset(expect, 'x', sizeof(expect));
    assert_int_equal(hub_auth_check_channel(&app, "1234.1234",
                                            "private-foobar", NULL, 0, "x:y",
                                            expect, sizeof(expect)),
                     -EINVAL);
    assert_string_equal(expect, "1234.12");
}

static void test_auth_channel_long_channel_data(void **state)
{
    struct hub_app app = test_app();
    static char cd[5000];
    char msg[5100], auth[128], hex[HUB_SHA256_HEX_LEN + 1];
    int n;

    (void)state;
    memset(cd, 'a', sizeof(cd) - 1);
    n = snprintf(msg, sizeof(msg), "1.2:presence-x:%s", cd);
    hub_auth_hmac_hex(SECRET, strlen(SECRET), msg, (size_t)n, hex);
    snprintf(auth, sizeof(auth), "%s:%s", KEY, hex);
    assert_int_equal(hub_auth_check_channel(&app, "1.2", "presence-x", cd,
                                            strlen(cd), auth, NULL, 0),
                     0);
}

static void test_auth_user_signin_vector(void **state)
{
    struct hub_app app = test_app();
    const char *ud = "{\"id\":\"12345\"}";
    const char *auth = KEY ":4708d583dada6a56435fb8bc611c77c359a31eebde133"
                           "37c16ab43aa6de336ba";

    (void)state;
    assert_int_equal(hub_auth_check_user(&app, "1234.1234", ud, strlen(ud),
                                         auth),
                     0);
    assert_int_equal(hub_auth_check_user(&app, "1234.1235", ud, strlen(ud),
                                         auth),
                     -EACCES);
    assert_int_equal(hub_auth_check_user(&app, "1234.1234", ud, strlen(ud),
                                         "nokey"),
                     -EINVAL);
}

static void test_auth_rest_post_events_vector(void **state)
{
    char why[128];

    (void)state;
    assert_int_equal(check("POST", "/apps/3/events",
                           "auth_key=" KEY "&auth_timestamp=1353088179"
                           "&auth_version=1.0&body_md5=" EVENTS_MD5
                           "&auth_signature=" EVENTS_SIG,
                           EVENTS_BODY, why, sizeof(why)),
                     0);
    assert_string_equal(why, "ok");
}

static void test_auth_rest_get_channels_vector(void **state)
{
    char why[128];

    (void)state;
    assert_int_equal(check("GET", "/apps/3/channels",
                           "filter_by_prefix=presence-&info=user_count"
                           "&auth_key=" KEY "&auth_timestamp=1353088179"
                           "&auth_version=1.0&auth_signature=" CHANNELS_SIG,
                           NULL, why, sizeof(why)),
                     0);
}

static void test_auth_rest_param_order_is_irrelevant(void **state)
{
    (void)state;
    assert_int_equal(check("GET", "/apps/3/channels",
                           "auth_signature=" CHANNELS_SIG "&info=user_count"
                           "&auth_version=1.0&filter_by_prefix=presence-"
                           "&auth_timestamp=1353088179&auth_key=" KEY,
                           NULL, NULL, 0),
                     0);
}

static void test_auth_rest_keys_are_lowercased(void **state)
{
    (void)state;
    assert_int_equal(check("GET", "/apps/3/channels",
                           "FILTER_BY_PREFIX=presence-&Info=user_count"
                           "&auth_key=" KEY "&AUTH_TIMESTAMP=1353088179"
                           "&auth_version=1.0&auth_signature=" CHANNELS_SIG,
                           NULL, NULL, 0),
                     0);
}

static void test_auth_rest_values_are_decoded_before_signing(void **state)
{
    const char *s = "GET\n/apps/3/channels\nauth_key=" KEY
                    "&auth_timestamp=1353088179&auth_version=1.0"
                    "&filter_by_prefix=presence-a b&c/d&info=user_count";
    char hex[HUB_SHA256_HEX_LEN + 1], query[512];

    (void)state;
    hub_auth_hmac_hex(SECRET, strlen(SECRET), s, strlen(s), hex);
    snprintf(query, sizeof(query),
             "auth_key=" KEY "&auth_timestamp=1353088179&auth_version=1.0"
             "&filter_by_prefix=presence-a+b%%26c%%2Fd&info=user%%5fcount"
             "&auth_signature=%s",
             hex);
    assert_int_equal(check("GET", "/apps/3/channels", query, NULL, NULL, 0),
                     0);
}

static void test_auth_rest_bad_signature_is_eacces(void **state)
{
    char why[128];

    (void)state;
    assert_int_equal(check("GET", "/apps/3/channels",
                           "filter_by_prefix=presence-&info=user_count"
                           "&auth_key=" KEY "&auth_timestamp=1353088179"
                           "&auth_version=1.0&auth_signature=" EVENTS_SIG,
                           NULL, why, sizeof(why)),
                     -EACCES);
    assert_string_equal(why, "invalid signature");
    /* The signature covers the path. */
    assert_int_equal(check("GET", "/apps/4/channels",
                           "filter_by_prefix=presence-&info=user_count"
                           "&auth_key=" KEY "&auth_timestamp=1353088179"
                           "&auth_version=1.0&auth_signature=" CHANNELS_SIG,
                           NULL, NULL, 0),
                     -EACCES);
    /* And every parameter. */
    assert_int_equal(check("GET", "/apps/3/channels",
                           "filter_by_prefix=private-&info=user_count"
                           "&auth_key=" KEY "&auth_timestamp=1353088179"
                           "&auth_version=1.0&auth_signature=" CHANNELS_SIG,
                           NULL, NULL, 0),
                     -EACCES);
}

static void test_auth_rest_missing_signature_is_eacces(void **state)
{
    char why[128];

    (void)state;
    assert_int_equal(check("GET", "/apps/3/channels",
                           "auth_key=" KEY "&auth_timestamp=1353088179"
                           "&auth_version=1.0",
                           NULL, why, sizeof(why)),
                     -EACCES);
    assert_string_equal(why, "missing auth_signature");
}

static void test_auth_rest_wrong_key_is_eacces(void **state)
{
    char why[128];

    (void)state;
    assert_int_equal(check("GET", "/apps/3/channels",
                           "filter_by_prefix=presence-&info=user_count"
                           "&auth_key=278d425bdf160c739804"
                           "&auth_timestamp=1353088179"
                           "&auth_version=1.0&auth_signature=" CHANNELS_SIG,
                           NULL, why, sizeof(why)),
                     -EACCES);
    assert_string_equal(why, "unknown auth_key");
}

static void test_auth_rest_stale_timestamp_is_eacces(void **state)
{
    struct hub_app app = test_app();
    struct hub_rest_request r =
        rest("POST", "/apps/3/events",
             "auth_key=" KEY "&auth_timestamp=1353088179"
             "&auth_version=1.0&body_md5=" EVENTS_MD5
             "&auth_signature=" EVENTS_SIG,
             EVENTS_BODY);
    char why[128];

    (void)state;
    r.now_s = TS + 601;
    assert_int_equal(hub_auth_check_rest(&app, &r, why, sizeof(why)),
                     -EACCES);
    assert_non_null(strstr(why, "stale timestamp"));
    assert_non_null(strstr(why, "601"));
    /* Clocks skew both ways. */
    r.now_s = TS - 700;
    assert_int_equal(hub_auth_check_rest(&app, &r, why, sizeof(why)),
                     -EACCES);
    assert_non_null(strstr(why, "700"));
    /* The edge of the window is inside it. */
    r.now_s = TS + 600;
    assert_int_equal(hub_auth_check_rest(&app, &r, why, sizeof(why)), 0);
    /* A zero window accepts any time. */
    r.now_s = TS + 1000000;
    r.window_s = 0;
    assert_int_equal(hub_auth_check_rest(&app, &r, why, sizeof(why)), 0);
}

static void test_auth_rest_bad_timestamp_is_einval(void **state)
{
    (void)state;
    assert_int_equal(check("GET", "/apps/3/channels",
                           "auth_key=" KEY "&auth_timestamp=13530881x9"
                           "&auth_version=1.0&auth_signature=" CHANNELS_SIG,
                           NULL, NULL, 0),
                     -EINVAL);
}

static void test_auth_rest_tampered_body_is_eacces(void **state)
{
    (void)state;
    assert_int_equal(check("POST", "/apps/3/events",
                           "auth_key=" KEY "&auth_timestamp=1353088179"
                           "&auth_version=1.0&body_md5=" EVENTS_MD5
                           "&auth_signature=" EVENTS_SIG,
                           "{\"name\":\"foo\",\"channels\":[\"project-4\"],"
                           "\"data\":\"{\\\"some\\\":\\\"data\\\"}\"}",
                           NULL, 0),
                     -EACCES);
}

static void test_auth_rest_client_body_md5_is_not_trusted(void **state)
{
    const char *s = "POST\n/apps/3/events\nauth_key=" KEY
                    "&auth_timestamp=1353088179&auth_version=1.0"
                    "&body_md5=00000000000000000000000000000000";
    char hex[HUB_SHA256_HEX_LEN + 1], query[512];

    (void)state;
    /* Signed consistently with a wrong MD5: still refused. */
    hub_auth_hmac_hex(SECRET, strlen(SECRET), s, strlen(s), hex);
    snprintf(query, sizeof(query),
             "auth_key=" KEY "&auth_timestamp=1353088179&auth_version=1.0"
             "&body_md5=00000000000000000000000000000000"
             "&auth_signature=%s",
             hex);
    assert_int_equal(check("POST", "/apps/3/events", query, EVENTS_BODY,
                           NULL, 0),
                     -EACCES);
}

static void test_auth_rest_missing_body_md5_is_eacces(void **state)
{
    char why[128];

    (void)state;
    assert_int_equal(check("POST", "/apps/3/events",
                           "auth_key=" KEY "&auth_timestamp=1353088179"
                           "&auth_version=1.0&auth_signature=" EVENTS_SIG,
                           EVENTS_BODY, why, sizeof(why)),
                     -EACCES);
    assert_string_equal(why, "missing body_md5");
}

static void test_auth_rest_no_credentials_is_eacces(void **state)
{
    char why[128];

    (void)state;
    assert_int_equal(check("GET", "/apps/3/channels", "", NULL, why,
                           sizeof(why)),
                     -EACCES);
    assert_int_equal(check("GET", "/apps/3/channels", NULL, NULL, why,
                           sizeof(why)),
                     -EACCES);
}

static void test_auth_rest_empty_body_with_md5_round_trips(void **state)
{
    struct hub_app app = test_app();
    struct hub_rest_request r;
    char q[512];

    (void)state;
    /* An empty body signs as MD5("") when the client sends body_md5. */
    assert_int_equal(hub_auth_sign_rest(&app, "POST", "/apps/3/events",
                                        "body_md5=d41d8cd98f00b204e9800998"
                                        "ecf8427e",
                                        NULL, 0, TS, q, sizeof(q)),
                     0);
    r = rest("POST", "/apps/3/events", q, NULL);
    assert_int_equal(hub_auth_check_rest(&app, &r, NULL, 0), 0);
}

static void test_auth_rest_bad_version_is_einval(void **state)
{
    char why[128];

    (void)state;
    assert_int_equal(check("GET", "/apps/3/channels",
                           "auth_key=" KEY "&auth_timestamp=1353088179"
                           "&auth_version=2.0&auth_signature=" CHANNELS_SIG,
                           NULL, why, sizeof(why)),
                     -EINVAL);
    assert_int_equal(check("GET", "/apps/3/channels",
                           "auth_key=" KEY "&auth_timestamp=1353088179"
                           "&auth_signature=" CHANNELS_SIG,
                           NULL, why, sizeof(why)),
                     -EINVAL);
}

static void test_auth_rest_duplicate_param_is_einval(void **state)
{
    char why[128];

    (void)state;
    assert_int_equal(check("GET", "/apps/3/channels",
                           "info=user_count&info=subscription_count"
                           "&auth_key=" KEY "&auth_timestamp=1353088179"
                           "&auth_version=1.0&auth_signature=" CHANNELS_SIG,
                           NULL, why, sizeof(why)),
                     -EINVAL);
    assert_non_null(strstr(why, "duplicate"));
    /* Keys differing only in case are the same key. */
    assert_int_equal(check("GET", "/apps/3/channels",
                           "auth_key=" KEY "&AUTH_KEY=" KEY
                           "&auth_timestamp=1353088179"
                           "&auth_version=1.0&auth_signature=" CHANNELS_SIG,
                           NULL, NULL, 0),
                     -EINVAL);
}

static void test_auth_rest_bad_encoding_is_einval(void **state)
{
    (void)state;
    assert_int_equal(check("GET", "/apps/3/channels",
                           "filter_by_prefix=%zz&auth_key=" KEY
                           "&auth_timestamp=1353088179"
                           "&auth_version=1.0&auth_signature=" CHANNELS_SIG,
                           NULL, NULL, 0),
                     -EINVAL);
}

static void test_auth_sign_rest_reproduces_vectors(void **state)
{
    struct hub_app app = test_app();
    char q[512];

    (void)state;
    assert_int_equal(hub_auth_sign_rest(&app, "POST", "/apps/3/events", "",
                                        EVENTS_BODY, strlen(EVENTS_BODY), TS,
                                        q, sizeof(q)),
                     0);
    assert_string_equal(q, "auth_key=" KEY "&auth_timestamp=1353088179"
                           "&auth_version=1.0&body_md5=" EVENTS_MD5
                           "&auth_signature=" EVENTS_SIG);
    assert_int_equal(hub_auth_sign_rest(&app, "GET", "/apps/3/channels",
                                        "filter_by_prefix=presence-"
                                        "&info=user_count",
                                        NULL, 0, TS, q, sizeof(q)),
                     0);
    assert_non_null(strstr(q, "&auth_signature=" CHANNELS_SIG));
}

static void test_auth_sign_rest_round_trips(void **state)
{
    struct hub_app app = test_app();
    struct hub_rest_request r;
    char q[512];

    (void)state;
    assert_int_equal(hub_auth_sign_rest(&app, "GET", "/apps/3/channels/x",
                                        "info=user%2Ccount", NULL, 0, 1000,
                                        q, sizeof(q)),
                     0);
    r = rest("GET", "/apps/3/channels/x", q, NULL);
    r.now_s = 1000;
    assert_int_equal(hub_auth_check_rest(&app, &r, NULL, 0), 0);
}

static void test_auth_sign_rest_small_buffer_is_e2big(void **state)
{
    struct hub_app app = test_app();
    char q[64];

    (void)state;
    memset(q, 'x', sizeof(q));
    assert_int_equal(hub_auth_sign_rest(&app, "POST", "/apps/3/events", NULL,
                                        EVENTS_BODY, strlen(EVENTS_BODY), TS,
                                        q, sizeof(q)),
                     -E2BIG);
    assert_true(memchr(q, '\0', sizeof(q)) != NULL);
}

static void test_auth_sign_rest_refuses_reserved_params(void **state)
{
    struct hub_app app = test_app();
    char q[512];

    (void)state;
    assert_int_equal(hub_auth_sign_rest(&app, "GET", "/apps/3/channels",
                                        "auth_timestamp=1", NULL, 0, TS, q,
                                        sizeof(q)),
                     -EINVAL);
}

/* The one-shot, as OpenSSL computes it, for comparison. */
static void oneshot_hex(const char *key, size_t key_len, const void *msg,
                        size_t msg_len, char out[HUB_SHA256_HEX_LEN + 1])
{
    static const char digits[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;

    assert_non_null(HMAC(EVP_sha256(), key, (int)key_len, msg, msg_len, md,
                         &n));
    assert_int_equal(n, HUB_SHA256_HEX_LEN / 2);
    for (unsigned i = 0; i < n; i++) {
        out[2 * i] = digits[md[i] >> 4];
        out[2 * i + 1] = digits[md[i] & 15];
    }
    out[2 * n] = '\0';
}

/* Deterministic bytes (no clock, no rand()). */
static uint32_t next_u32(uint32_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 17;
    *x ^= *x << 5;
    return *x;
}

/*
 * The keyed contexts give what the one-shot gives: many keys (more than a
 * thread keeps, so slots are re-keyed), keys of every length up to and
 * past the SHA-256 block (64 bytes: longer keys are hashed first), the
 * empty key and message, and keys used again after others.
 */
static void test_auth_hmac_cached_equals_oneshot(void **state)
{
    char key[160], msg[300];
    char got[HUB_SHA256_HEX_LEN + 1], want[HUB_SHA256_HEX_LEN + 1];
    uint32_t x = 0x9e3779b9u;

    (void)state;
    for (int round = 0; round < 2000; round++) {
        /* 20 distinct keys, reused in a pattern that hits and misses. */
        uint32_t k = next_u32(&x) % 20;
        size_t key_len = (k * 7) % sizeof(key);
        size_t msg_len = next_u32(&x) % sizeof(msg);

        for (size_t i = 0; i < key_len; i++)
            key[i] = (char)('a' + (k * 31 + i * 17) % 26);
        for (size_t i = 0; i < msg_len; i++)
            msg[i] = (char)next_u32(&x);
        hub_auth_hmac_hex(key, key_len, msg, msg_len, got);
        oneshot_hex(key, key_len, msg, msg_len, want);
        assert_string_equal(got, want);
    }
    /* Two messages in a row with one key: the re-armed context does not
     * carry anything of the first into the second. */
    hub_auth_hmac_hex(SECRET, strlen(SECRET), "a", 1, got);
    hub_auth_hmac_hex(SECRET, strlen(SECRET), "b", 1, got);
    oneshot_hex(SECRET, strlen(SECRET), "b", 1, want);
    assert_string_equal(got, want);
    hub_auth_thread_release();
}

/*
 * A reload that changes an app's secret: the same app (same struct, same
 * pointer), a new secret of the same length, and a channel auth signed
 * with the old one is refused at once, the new one accepted. Back to the
 * old secret works too.
 */
static void test_auth_hmac_key_change_takes_effect(void **state)
{
    struct hub_app app = test_app();
    char secret[] = SECRET;
    char sig_old[HUB_SHA256_HEX_LEN + 1], sig_new[HUB_SHA256_HEX_LEN + 1];
    char auth[128];
    const char *tosign = "1234.1234:private-foobar";

    (void)state;
    app.secret = secret;
    oneshot_hex(SECRET, strlen(SECRET), tosign, strlen(tosign), sig_old);
    snprintf(auth, sizeof(auth), "%s:%s", KEY, sig_old);
    assert_int_equal(hub_auth_check_channel(&app, "1234.1234",
                                            "private-foobar", NULL, 0, auth,
                                            NULL, 0),
                     0);
    secret[0] = secret[0] == 'x' ? 'y' : 'x'; /* same length, new bytes */
    oneshot_hex(secret, strlen(secret), tosign, strlen(tosign), sig_new);
    assert_int_equal(hub_auth_check_channel(&app, "1234.1234",
                                            "private-foobar", NULL, 0, auth,
                                            NULL, 0),
                     -EACCES);
    snprintf(auth, sizeof(auth), "%s:%s", KEY, sig_new);
    assert_int_equal(hub_auth_check_channel(&app, "1234.1234",
                                            "private-foobar", NULL, 0, auth,
                                            NULL, 0),
                     0);
    memcpy(secret, SECRET, sizeof(secret));
    snprintf(auth, sizeof(auth), "%s:%s", KEY, sig_old);
    assert_int_equal(hub_auth_check_channel(&app, "1234.1234",
                                            "private-foobar", NULL, 0, auth,
                                            NULL, 0),
                     0);
    hub_auth_thread_release();
}

/* hub_auth_md5_hex (a context kept per thread) against EVP_Digest. */
static void test_auth_md5_cached_equals_oneshot(void **state)
{
    static const char digits[] = "0123456789abcdef";
    char msg[300], got[HUB_MD5_HEX_LEN + 1], want[HUB_MD5_HEX_LEN + 1];
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n;
    uint32_t x = 0x2545f491u;

    (void)state;
    for (int round = 0; round < 500; round++) {
        size_t len = next_u32(&x) % sizeof(msg);

        for (size_t i = 0; i < len; i++)
            msg[i] = (char)next_u32(&x);
        hub_auth_md5_hex(msg, len, got);
        assert_true(EVP_Digest(msg, len, md, &n, EVP_md5(), NULL));
        for (unsigned i = 0; i < n; i++) {
            want[2 * i] = digits[md[i] >> 4];
            want[2 * i + 1] = digits[md[i] & 15];
        }
        want[2 * n] = '\0';
        assert_string_equal(got, want);
    }
    hub_auth_thread_release();
}

/* Each thread signs with contexts of its own; a thread's are freed when
 * it exits (ASan's leak check sees it otherwise). */
struct mac_thread_arg {
    uint32_t seed;
    int mismatches;
};

static void *mac_thread(void *v)
{
    struct mac_thread_arg *a = v;
    char key[40], msg[64];
    char got[HUB_SHA256_HEX_LEN + 1], want[HUB_SHA256_HEX_LEN + 1];
    uint32_t x = a->seed;

    for (int i = 0; i < 3000; i++) {
        size_t key_len = 1 + next_u32(&x) % 12, msg_len = sizeof(msg);

        for (size_t j = 0; j < key_len; j++)
            key[j] = (char)('0' + next_u32(&x) % 3);
        for (size_t j = 0; j < msg_len; j++)
            msg[j] = (char)next_u32(&x);
        hub_auth_hmac_hex(key, key_len, msg, msg_len, got);
        oneshot_hex(key, key_len, msg, msg_len, want);
        if (strcmp(got, want))
            a->mismatches++;
    }
    return NULL;
}

static void test_auth_hmac_threads_own_contexts(void **state)
{
    pthread_t t[4];
    struct mac_thread_arg a[4];

    (void)state;
    for (int i = 0; i < 4; i++) {
        a[i] = (struct mac_thread_arg){ 0x1234567u * (uint32_t)(i + 1), 0 };
        assert_int_equal(pthread_create(&t[i], NULL, mac_thread, &a[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        assert_int_equal(pthread_join(t[i], NULL), 0);
        assert_int_equal(a[i].mismatches, 0);
    }
}

/* Key rotation (hub/app/app.h): an app of three pairs, the vectors' pair
 * last, so that nothing passes by being the first. */
static struct hub_app_pair rotation_pairs[] = {
    { "k-mid", "s-mid" },
    { KEY, SECRET },
};

static struct hub_app rotation_app(void)
{
    struct hub_app app = test_app();

    app.key = "k-new";
    app.secret = "s-new";
    app.more_keys = rotation_pairs;
    app.n_more_keys = 2;
    return app;
}

/* The channel signature hex of "1234.1234:private-x" with secret. */
static void channel_sig(const char *secret, char *auth, size_t len,
                        const char *key)
{
    char hex[HUB_SHA256_HEX_LEN + 1];
    const char *tosign = "1234.1234:private-x";

    hub_auth_hmac_hex(secret, strlen(secret), tosign, strlen(tosign), hex);
    snprintf(auth, len, "%s:%s", key, hex);
}

/* Channel auth names any pair's key and verifies with that pair's secret;
 * another pair's secret under a key is refused, an unknown key too. */
static void test_auth_keys_channel_any_pair(void **state)
{
    struct hub_app app = rotation_app();
    const char *keys[] = { "k-new", "k-mid", KEY };
    const char *secrets[] = { "s-new", "s-mid", SECRET };
    char auth[128], expect[128];

    (void)state;
    for (int i = 0; i < 3; i++) {
        channel_sig(secrets[i], auth, sizeof(auth), keys[i]);
        assert_int_equal(hub_auth_check_channel(&app, "1234.1234",
                                                "private-x", NULL, 0, auth,
                                                expect, sizeof(expect)),
                         0);
        assert_string_equal(expect, "1234.1234:private-x");
        /* The right key with the next pair's secret. */
        channel_sig(secrets[(i + 1) % 3], auth, sizeof(auth), keys[i]);
        assert_int_equal(hub_auth_check_channel(&app, "1234.1234",
                                                "private-x", NULL, 0, auth,
                                                NULL, 0),
                         -EACCES);
    }
    channel_sig("s-new", auth, sizeof(auth), "k-gone");
    assert_int_equal(hub_auth_check_channel(&app, "1234.1234", "private-x",
                                            NULL, 0, auth, expect,
                                            sizeof(expect)),
                     -EINVAL);
    /* Still said for the operator's log, signed with the first pair. */
    assert_string_equal(expect, "1234.1234:private-x");
    /* A prefix of a key is no key. */
    channel_sig("s-mid", auth, sizeof(auth), "k-mi");
    assert_int_equal(hub_auth_check_channel(&app, "1234.1234", "private-x",
                                            NULL, 0, auth, NULL, 0),
                     -EINVAL);
}

/* Sign-in: the same rule, with the vectors' pair third. */
static void test_auth_keys_user_any_pair(void **state)
{
    struct hub_app app = rotation_app();
    const char *ud = "{\"id\":\"12345\"}";
    const char *auth = KEY ":4708d583dada6a56435fb8bc611c77c359a31eebde133"
                           "37c16ab43aa6de336ba";
    const char *other = "k-mid:4708d583dada6a56435fb8bc611c77c359a31eebde133"
                        "37c16ab43aa6de336ba";

    (void)state;
    assert_int_equal(hub_auth_check_user(&app, "1234.1234", ud, strlen(ud),
                                         auth),
                     0);
    assert_int_equal(hub_auth_check_user(&app, "1234.1234", ud, strlen(ud),
                                         other),
                     -EACCES);
    assert_int_equal(hub_auth_check_user(&app, "1234.1234", ud, strlen(ud),
                                         "k-x:00"),
                     -EINVAL);
}

/* A key that holds ':' (nothing in the config forbids one): the auth
 * splits at the last ':', since the signature after it is hex, so channel
 * auth and sign-in on that pair pass and a wrong signature still fails. */
static void test_auth_keys_colon_in_key(void **state)
{
    static struct hub_app_pair colon_pair[] = { { "k:colon", "s-colon" } };
    struct hub_app app = rotation_app();
    const char *ud = "{\"id\":\"12345\"}";
    const char *tosign = "1234.1234::user::{\"id\":\"12345\"}";
    char hex[HUB_SHA256_HEX_LEN + 1], auth[160];

    (void)state;
    app.key = "a:b:first";
    app.more_keys = colon_pair;
    app.n_more_keys = 1;
    channel_sig("s-colon", auth, sizeof(auth), "k:colon");
    assert_int_equal(hub_auth_check_channel(&app, "1234.1234", "private-x",
                                            NULL, 0, auth, NULL, 0),
                     0);
    channel_sig(app.secret, auth, sizeof(auth), app.key);
    assert_int_equal(hub_auth_check_channel(&app, "1234.1234", "private-x",
                                            NULL, 0, auth, NULL, 0),
                     0);
    channel_sig("s-mid", auth, sizeof(auth), "k:colon");
    assert_int_equal(hub_auth_check_channel(&app, "1234.1234", "private-x",
                                            NULL, 0, auth, NULL, 0),
                     -EACCES);
    hub_auth_hmac_hex("s-colon", 7, tosign, strlen(tosign), hex);
    snprintf(auth, sizeof(auth), "k:colon:%s", hex);
    assert_int_equal(hub_auth_check_user(&app, "1234.1234", ud, strlen(ud),
                                         auth),
                     0);
    /* The key's first part alone is no key. */
    snprintf(auth, sizeof(auth), "k:%s", hex);
    assert_int_equal(hub_auth_check_user(&app, "1234.1234", ud, strlen(ud),
                                         auth),
                     -EINVAL);
}

/* REST: auth_key picks the pair whose secret verifies; each pair signs
 * for itself, a pair's key with another's secret is refused (401), an
 * unknown key too; the vectors still verify as the third pair. */
static void test_auth_keys_rest_any_pair(void **state)
{
    struct hub_app app = rotation_app();
    const char *keys[] = { "k-new", "k-mid", KEY };
    const char *secrets[] = { "s-new", "s-mid", SECRET };
    struct hub_rest_request r;
    char q[512], why[128];

    (void)state;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(hub_auth_sign_rest_pair(keys[i], secrets[i], "POST",
                                                 "/apps/3/events", NULL,
                                                 EVENTS_BODY,
                                                 strlen(EVENTS_BODY), TS, q,
                                                 sizeof(q)),
                         0);
        r = rest("POST", "/apps/3/events", q, EVENTS_BODY);
        assert_int_equal(hub_auth_check_rest(&app, &r, why, sizeof(why)), 0);
        assert_int_equal(hub_auth_sign_rest_pair(keys[i], secrets[(i + 2) % 3],
                                                 "POST", "/apps/3/events",
                                                 NULL, EVENTS_BODY,
                                                 strlen(EVENTS_BODY), TS, q,
                                                 sizeof(q)),
                         0);
        r = rest("POST", "/apps/3/events", q, EVENTS_BODY);
        assert_int_equal(hub_auth_check_rest(&app, &r, why, sizeof(why)),
                         -EACCES);
        assert_string_equal(why, "invalid signature");
    }
    assert_int_equal(hub_auth_sign_rest_pair("k-gone", "s-new", "GET",
                                             "/apps/3/channels", NULL, NULL,
                                             0, TS, q, sizeof(q)),
                     0);
    r = rest("GET", "/apps/3/channels", q, NULL);
    assert_int_equal(hub_auth_check_rest(&app, &r, why, sizeof(why)),
                     -EACCES);
    assert_string_equal(why, "unknown auth_key");
    /* hub_auth_sign_rest signs with the first pair. */
    assert_int_equal(hub_auth_sign_rest(&app, "GET", "/apps/3/channels",
                                        NULL, NULL, 0, TS, q, sizeof(q)),
                     0);
    assert_non_null(strstr(q, "auth_key=k-new&"));
    r = rest("GET", "/apps/3/channels", q, NULL);
    assert_int_equal(hub_auth_check_rest(&app, &r, why, sizeof(why)), 0);
}

/* A pair without a secret (an app built in code, not by the loader,
 * which requires one) verifies nothing: REST on its key is refused, not a
 * strlen(NULL), and so is channel auth. */
static void test_auth_keys_pair_without_secret_is_refused(void **state)
{
    static struct hub_app_pair bare[] = { { "k-bare", NULL } };
    struct hub_app app = test_app();
    struct hub_rest_request r;
    char q[512], why[128], auth[128];

    (void)state;
    app.more_keys = bare;
    app.n_more_keys = 1;
    assert_int_equal(hub_auth_sign_rest_pair("k-bare", "x", "GET",
                                             "/apps/3/channels", NULL, NULL,
                                             0, TS, q, sizeof(q)),
                     0);
    r = rest("GET", "/apps/3/channels", q, NULL);
    assert_int_equal(hub_auth_check_rest(&app, &r, why, sizeof(why)),
                     -EACCES);
    assert_string_equal(why, "unknown auth_key");
    channel_sig("x", auth, sizeof(auth), "k-bare");
    assert_int_equal(hub_auth_check_channel(&app, "1234.1234", "private-x",
                                            NULL, 0, auth, NULL, 0),
                     -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auth_keys_channel_any_pair),
        cmocka_unit_test(test_auth_keys_user_any_pair),
        cmocka_unit_test(test_auth_keys_colon_in_key),
        cmocka_unit_test(test_auth_keys_pair_without_secret_is_refused),
        cmocka_unit_test(test_auth_keys_rest_any_pair),
        cmocka_unit_test(test_auth_hmac_webhook_vector),
        cmocka_unit_test(test_auth_md5_events_body_vector),
        cmocka_unit_test(test_auth_hmac_rest_post_string_vector),
        cmocka_unit_test(test_auth_equal_is_exact),
        cmocka_unit_test(test_auth_channel_private_vector),
        cmocka_unit_test(test_auth_channel_presence_vector),
        cmocka_unit_test(test_auth_channel_presence_uses_exact_bytes),
        cmocka_unit_test(test_auth_channel_bad_signature_is_eacces),
        cmocka_unit_test(test_auth_channel_wrong_key_is_einval),
        cmocka_unit_test(test_auth_channel_malformed_auth_is_einval),
        cmocka_unit_test(test_auth_channel_expect_is_truncated),
        cmocka_unit_test(test_auth_channel_long_channel_data),
        cmocka_unit_test(test_auth_user_signin_vector),
        cmocka_unit_test(test_auth_rest_post_events_vector),
        cmocka_unit_test(test_auth_rest_get_channels_vector),
        cmocka_unit_test(test_auth_rest_param_order_is_irrelevant),
        cmocka_unit_test(test_auth_rest_keys_are_lowercased),
        cmocka_unit_test(test_auth_rest_values_are_decoded_before_signing),
        cmocka_unit_test(test_auth_rest_bad_signature_is_eacces),
        cmocka_unit_test(test_auth_rest_missing_signature_is_eacces),
        cmocka_unit_test(test_auth_rest_wrong_key_is_eacces),
        cmocka_unit_test(test_auth_rest_stale_timestamp_is_eacces),
        cmocka_unit_test(test_auth_rest_bad_timestamp_is_einval),
        cmocka_unit_test(test_auth_rest_tampered_body_is_eacces),
        cmocka_unit_test(test_auth_rest_client_body_md5_is_not_trusted),
        cmocka_unit_test(test_auth_rest_missing_body_md5_is_eacces),
        cmocka_unit_test(test_auth_rest_no_credentials_is_eacces),
        cmocka_unit_test(test_auth_rest_empty_body_with_md5_round_trips),
        cmocka_unit_test(test_auth_rest_bad_version_is_einval),
        cmocka_unit_test(test_auth_rest_duplicate_param_is_einval),
        cmocka_unit_test(test_auth_rest_bad_encoding_is_einval),
        cmocka_unit_test(test_auth_sign_rest_reproduces_vectors),
        cmocka_unit_test(test_auth_sign_rest_round_trips),
        cmocka_unit_test(test_auth_sign_rest_small_buffer_is_e2big),
        cmocka_unit_test(test_auth_sign_rest_refuses_reserved_params),
        cmocka_unit_test(test_auth_hmac_cached_equals_oneshot),
        cmocka_unit_test(test_auth_hmac_key_change_takes_effect),
        cmocka_unit_test(test_auth_hmac_threads_own_contexts),
        cmocka_unit_test(test_auth_md5_cached_equals_oneshot),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
