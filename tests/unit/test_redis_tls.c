/*
 * tests/unit/test_redis_tls.c - TLS to Redis (server/redis/redis_tls.h)
 * under both transports (server/redis/redis_async.h, redis_sync.h),
 * against a fake Redis thread speaking TLS on a loopback port
 * (tests/unit/fake_resp.h). The certificates are made here with OpenSSL's
 * API: a self-signed CA, a leaf it signs for IP 127.0.0.1 and DNS
 * redis.test, and a second CA that signed nothing of the fake's.
 *
 * Cases: which file a context refuses; a verified connection carrying a
 * megabyte out and 100 kB in, in order; a name or a CA that does not
 * match ends the connection with the verification's reason; a blocking
 * read or handshake under TLS that times out says so.
 *
 * Thread: the test's runs the loop or blocks; the fake serves on its own.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include "fake_resp.h"
#include "server/redis/redis_async.h"
#include "server/redis/redis_sync.h"
#include "server/redis/redis_tls.h"

#define WAIT_S 20.0
#define SETS 64
#define VAL 16384
#define BIG (100 * 1000)

/* ------------------------------------------------------- certificates */

static char dir[64];
static char ca_pem[128], other_ca_pem[128], leaf_pem[128], leaf_key[128],
    other_key[128];
static SSL_CTX *server_ctx;

static void add_ext(X509 *x, X509V3_CTX *v, int nid, const char *value)
{
    X509_EXTENSION *e = X509V3_EXT_conf_nid(NULL, v, nid, value);

    assert_non_null(e);
    assert_int_equal(X509_add_ext(x, e, -1), 1);
    X509_EXTENSION_free(e);
}

/* A certificate for key named cn: a CA's own (issuer NULL), or a server's
 * signed by issuer with ikey. */
static X509 *cert_new(EVP_PKEY *key, const char *cn, X509 *issuer,
                      EVP_PKEY *ikey)
{
    static long serial = 1;
    X509 *x = X509_new();
    X509_NAME *n;
    X509V3_CTX v;

    assert_non_null(x);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), serial++);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, key);
    n = X509_get_subject_name(x);
    X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC,
                               (const unsigned char *)cn, -1, -1, 0);
    X509_set_issuer_name(x, issuer ? X509_get_subject_name(issuer) : n);
    X509V3_set_ctx_nodb(&v);
    X509V3_set_ctx(&v, issuer ? issuer : x, x, NULL, NULL, 0);
    if (issuer) {
        add_ext(x, &v, NID_basic_constraints, "CA:FALSE");
        add_ext(x, &v, NID_key_usage, "critical,digitalSignature");
        add_ext(x, &v, NID_ext_key_usage, "serverAuth");
        add_ext(x, &v, NID_subject_alt_name, "IP:127.0.0.1,DNS:redis.test");
    } else {
        add_ext(x, &v, NID_basic_constraints, "critical,CA:TRUE");
        add_ext(x, &v, NID_key_usage, "critical,keyCertSign,cRLSign");
        add_ext(x, &v, NID_subject_key_identifier, "hash");
    }
    assert_true(X509_sign(x, issuer ? ikey : key, EVP_sha256()) > 0);
    return x;
}

static void write_pem(char *path, size_t cap, const char *name, X509 *x,
                      EVP_PKEY *k)
{
    FILE *f;

    snprintf(path, cap, "%s/%s", dir, name);
    f = fopen(path, "w");
    assert_non_null(f);
    if (x)
        assert_int_equal(PEM_write_X509(f, x), 1);
    else
        assert_int_equal(
            PEM_write_PrivateKey(f, k, NULL, NULL, 0, NULL, NULL), 1);
    fclose(f);
}

static int certs_setup(void **state)
{
    EVP_PKEY *ca_k = EVP_EC_gen("P-256"), *other_k = EVP_EC_gen("P-256"),
             *leaf_k = EVP_EC_gen("P-256");
    X509 *ca, *other, *leaf;

    (void)state;
    assert_non_null(ca_k);
    assert_non_null(other_k);
    assert_non_null(leaf_k);
    snprintf(dir, sizeof(dir), "/tmp/test_redis_tls.XXXXXX");
    assert_non_null(mkdtemp(dir));
    ca = cert_new(ca_k, "lubdub test CA", NULL, NULL);
    other = cert_new(other_k, "lubdub other CA", NULL, NULL);
    leaf = cert_new(leaf_k, "redis.test", ca, ca_k);
    write_pem(ca_pem, sizeof(ca_pem), "ca.pem", ca, NULL);
    write_pem(other_ca_pem, sizeof(other_ca_pem), "other-ca.pem", other, NULL);
    write_pem(leaf_pem, sizeof(leaf_pem), "leaf.pem", leaf, NULL);
    write_pem(leaf_key, sizeof(leaf_key), "leaf.key", NULL, leaf_k);
    write_pem(other_key, sizeof(other_key), "other.key", NULL, other_k);
    server_ctx = SSL_CTX_new(TLS_server_method());
    assert_non_null(server_ctx);
    assert_int_equal(SSL_CTX_use_certificate(server_ctx, leaf), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey(server_ctx, leaf_k), 1);
    X509_free(ca);
    X509_free(other);
    X509_free(leaf);
    EVP_PKEY_free(ca_k);
    EVP_PKEY_free(other_k);
    EVP_PKEY_free(leaf_k);
    return 0;
}

static int certs_teardown(void **state)
{
    const char *files[] = {ca_pem, other_ca_pem, leaf_pem, leaf_key,
                           other_key};

    (void)state;
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
        unlink(files[i]);
    rmdir(dir);
    SSL_CTX_free(server_ctx);
    return 0;
}

static SSL_CTX *client_ctx(const char *ca)
{
    char why[300] = "";
    SSL_CTX *c = srv_redis_tls_ctx_create(ca, NULL, NULL, why, sizeof(why));

    if (!c)
        fail_msg("ctx: %s", why);
    return c;
}

/* ---------------------------------------------------------- the fake */

/* PING: +PONG; GET: a 100 kB bulk; SET k v: +OK when v is whole;
 * BLPOP: no answer (a blocking read that outlasts the timeout). */
static void serve_tls(struct fake_conn *fc, void *arg)
{
    int *bad = arg;
    char *big;

    while (fake_resp_read(fc) > 0) {
        if (fake_resp_is(fc, 0, "PING")) {
            fake_resp_write(fc, "+PONG\r\n", 0);
        } else if (fake_resp_is(fc, 0, "GET")) {
            big = malloc(BIG + 32);
            assert_non_null(big);
            int n = snprintf(big, 32, "$%d\r\n", BIG);
            for (int i = 0; i < BIG; i++)
                big[n + i] = (char)('a' + i % 26);
            memcpy(big + n + BIG, "\r\n", 2);
            fake_resp_split(fc, big, (size_t)n + BIG + 2, 30000);
            free(big);
        } else if (fake_resp_is(fc, 0, "SET")) {
            *bad += fc->argc != 3 || fc->arglen[2] != VAL ||
                    fc->arg[2][VAL - 1] != 'v';
            fake_resp_write(fc, "+OK\r\n", 0);
        }
    }
}

/* --------------------------------------------------------------- cases */

static void test_redis_tls_ctx_create_says_which_file_is_refused(
    void **state)
{
    char why[300] = "", missing[160];
    SSL_CTX *c;

    (void)state;
    snprintf(missing, sizeof(missing), "%s/missing.pem", dir);
    assert_null(srv_redis_tls_ctx_create(missing, NULL, NULL, why,
                                         sizeof(why)));
    assert_non_null(strstr(why, "TLS: cannot use --redis-tls-ca-file: "));
    assert_null(srv_redis_tls_ctx_create(ca_pem, missing, leaf_key, why,
                                         sizeof(why)));
    assert_non_null(strstr(why, "TLS: cannot use --redis-tls-cert-file: "));
    assert_null(srv_redis_tls_ctx_create(ca_pem, leaf_pem, other_key, why,
                                         sizeof(why)));
    /* OpenSSL refuses a key that is not the certificate's as it loads it. */
    assert_non_null(strstr(why, "TLS: cannot use --redis-tls-key-file"));
    assert_non_null(strstr(why, "mismatch"));
    c = srv_redis_tls_ctx_create(ca_pem, leaf_pem, leaf_key, why,
                                 sizeof(why));
    assert_non_null(c);
    SSL_CTX_free(c);
}

struct rec {
    int got, bad, closed;
    char why[300];
    atomic_bool done;
};

static void on_closed(struct srv_redis_async *c, void *data, const char *why)
{
    struct rec *r = data;

    (void)c;
    r->closed++;
    snprintf(r->why, sizeof(r->why), "%s", why);
    atomic_store(&r->done, true);
}

/* priv: 'O' for +OK, 'B' for the 100 kB bulk, 'P' for +PONG (the last). */
static void reply_cb(struct srv_redis_async *c, void *reply, void *priv)
{
    struct rec *r = srv_redis_async_data(c);
    const redisReply *rep = reply;
    int kind = (int)(intptr_t)priv;

    r->got++;
    if (!rep) {
        r->bad++;
    } else if (kind == 'B') {
        r->bad += rep->type != REDIS_REPLY_STRING || rep->len != BIG ||
                  rep->str[BIG - 1] != (char)('a' + (BIG - 1) % 26);
    } else {
        r->bad += rep->type != REDIS_REPLY_STATUS ||
                  strcmp(rep->str, kind == 'O' ? "OK" : "PONG");
    }
    if (kind == 'P')
        atomic_store(&r->done, true);
}

static struct srv_redis_async *open_tls(struct ev_loop *loop, int port,
                                        SSL_CTX *ctx, const char *name,
                                        struct rec *r)
{
    char why[300] = "";
    struct srv_redis_async *c = srv_redis_async_open(
        loop, "127.0.0.1", port, ctx, name, why, sizeof(why));

    assert_non_null(c);
    memset(r, 0, sizeof(*r));
    srv_redis_async_on(c, on_closed, NULL, r);
    return c;
}

static void test_redis_tls_async_verified_carries_a_megabyte_both_ways(
    void **state)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    SSL_CTX *ctx = client_ctx(ca_pem);
    struct fake_resp f;
    struct srv_redis_async *c;
    struct rec r;
    char *v = malloc(VAL);
    int bad = 0;

    (void)state;
    assert_non_null(v);
    memset(v, 'v', VAL);
    fake_resp_start_tls(&f, server_ctx, serve_tls, &bad);
    /* Verified by its IP address, then by the name --redis-tls-server-name
     * would give. */
    for (int pass = 0; pass < 2; pass++) {
        c = open_tls(loop, f.port, ctx, pass ? "redis.test" : NULL, &r);
        for (int i = 0; i < SETS; i++)
            assert_int_equal(srv_redis_async_cmd(c, reply_cb,
                                                 (void *)(intptr_t)'O',
                                                 "SET k%d %b", i, v,
                                                 (size_t)VAL),
                             0);
        assert_int_equal(srv_redis_async_cmd(c, reply_cb,
                                             (void *)(intptr_t)'B', "GET big"),
                         0);
        assert_int_equal(srv_redis_async_cmd(c, reply_cb,
                                             (void *)(intptr_t)'P', "PING"),
                         0);
        assert_true(fake_resp_run(loop, &r.done, WAIT_S));
        assert_int_equal(r.closed, 0);
        assert_int_equal(r.got, SETS + 2);
        assert_int_equal(r.bad, 0);
        srv_redis_async_close(c);
    }
    fake_resp_stop(&f);
    assert_int_equal(f.conns, 2);
    assert_int_equal(bad, 0);
    SSL_CTX_free(ctx);
    free(v);
    ev_loop_destroy(loop);
}

static void test_redis_tls_async_wrong_name_or_ca_fails_verification(
    void **state)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    SSL_CTX *ctx = client_ctx(ca_pem), *other = client_ctx(other_ca_pem);
    struct fake_resp f;
    struct srv_redis_async *c;
    struct rec r;
    int bad = 0;

    (void)state;
    fake_resp_start_tls(&f, server_ctx, serve_tls, &bad);
    c = open_tls(loop, f.port, ctx, "other.test", &r);
    assert_int_equal(srv_redis_async_cmd(c, reply_cb, (void *)(intptr_t)'P',
                                         "PING"),
                     0);
    assert_true(fake_resp_run(loop, &r.done, WAIT_S));
    assert_int_equal(r.closed, 1);
    assert_int_equal(r.got, 1); /* with NULL */
    assert_non_null(strstr(r.why, "TLS: certificate verify failed: "));
    assert_non_null(strstr(r.why, "hostname mismatch"));
    c = open_tls(loop, f.port, other, NULL, &r);
    assert_true(fake_resp_run(loop, &r.done, WAIT_S));
    assert_int_equal(r.closed, 1);
    assert_non_null(strstr(r.why, "TLS: certificate verify failed: "));
    fake_resp_stop(&f);
    assert_int_equal(f.conns, 0);
    SSL_CTX_free(ctx);
    SSL_CTX_free(other);
    ev_loop_destroy(loop);
}

static void test_redis_tls_sync_round_trip_then_timeout_says_timed_out(
    void **state)
{
    const struct timeval tv = {0, 300 * 1000};
    SSL_CTX *ctx = client_ctx(ca_pem);
    struct fake_resp f;
    struct srv_redis_sync *s;
    redisReply *r;
    char why[300] = "";
    int bad = 0;

    (void)state;
    fake_resp_start_tls(&f, server_ctx, serve_tls, &bad);
    s = srv_redis_sync_open("127.0.0.1", f.port, ctx, "redis.test", &tv, why,
                            sizeof(why));
    if (!s)
        fail_msg("open: %s", why);
    r = srv_redis_sync_argv(s, 1, (const char *[]){"PING"}, NULL);
    assert_non_null(r);
    assert_string_equal(r->str, "PONG");
    freeReplyObject(r);
    r = srv_redis_sync_argv(s, 3, (const char *[]){"BLPOP", "q", "0"}, NULL);
    assert_null(r);
    assert_string_equal(srv_redis_sync_error(s), "timed out");
    assert_null(srv_redis_sync_argv(s, 1, (const char *[]){"PING"}, NULL));
    srv_redis_sync_close(s);
    fake_resp_stop(&f);
    SSL_CTX_free(ctx);
}

/* Reads and never answers: TCP, no TLS. */
static void serve_mute(struct fake_conn *fc, void *arg)
{
    (void)arg;
    fake_resp_drain(fc);
}

static void test_redis_tls_sync_handshake_timeout_says_timed_out(
    void **state)
{
    const struct timeval tv = {0, 300 * 1000};
    SSL_CTX *ctx = client_ctx(ca_pem);
    struct fake_resp f;
    char why[300] = "untouched";

    (void)state;
    fake_resp_start(&f, serve_mute, NULL);
    assert_null(srv_redis_sync_open("127.0.0.1", f.port, ctx, NULL, &tv, why,
                                    sizeof(why)));
    assert_string_equal(why, "TLS handshake timed out");
    fake_resp_stop(&f);
    SSL_CTX_free(ctx);
}

/* A closed callback that records it ran. */
static void closed_flag(struct srv_redis_async *c, void *data,
                        const char *why)
{
    (void)c;
    (void)why;
    atomic_store((atomic_bool *)data, true);
}

/* A server that answers nothing: connected, the handshake never ends. */
static void test_redis_tls_async_mute_server_stays_in_handshake(void **state)
{
    struct ev_loop *loop = ev_loop_new(EVFLAG_AUTO);
    SSL_CTX *ctx = client_ctx(ca_pem);
    struct fake_resp f;
    struct srv_redis_async *c;
    atomic_bool never = false, closed = false;
    char why[300];

    (void)state;
    fake_resp_start(&f, serve_mute, NULL);
    c = srv_redis_async_open(loop, "127.0.0.1", f.port, ctx, NULL, why,
                             sizeof(why));
    assert_non_null(c);
    srv_redis_async_on(c, closed_flag, NULL, &closed);
    assert_false(srv_redis_async_in_handshake(c)); /* connecting */
    /* Connected, then the ClientHello gets no answer: the connection
     * stays in its handshake (what redis.c's connect timeout reports). */
    for (int i = 0; i < 400 && !srv_redis_async_in_handshake(c); i++)
        fake_resp_run(loop, &never, 0.05);
    assert_true(srv_redis_async_in_handshake(c));
    fake_resp_run(loop, &never, 0.1);
    assert_true(srv_redis_async_in_handshake(c));
    assert_false(atomic_load(&closed));
    srv_redis_async_close(c);
    fake_resp_stop(&f);
    SSL_CTX_free(ctx);
    ev_loop_destroy(loop);
}

static void test_redis_tls_sync_wrong_name_fails_open(void **state)
{
    const struct timeval tv = {5, 0};
    SSL_CTX *ctx = client_ctx(ca_pem);
    struct fake_resp f;
    char why[300] = "";
    int bad = 0;

    (void)state;
    fake_resp_start_tls(&f, server_ctx, serve_tls, &bad);
    assert_null(srv_redis_sync_open("127.0.0.1", f.port, ctx, "other.test",
                                    &tv, why, sizeof(why)));
    assert_non_null(strstr(why, "TLS: certificate verify failed: "));
    fake_resp_stop(&f);
    SSL_CTX_free(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            test_redis_tls_ctx_create_says_which_file_is_refused),
        cmocka_unit_test(
            test_redis_tls_async_verified_carries_a_megabyte_both_ways),
        cmocka_unit_test(
            test_redis_tls_async_wrong_name_or_ca_fails_verification),
        cmocka_unit_test(
            test_redis_tls_sync_round_trip_then_timeout_says_timed_out),
        cmocka_unit_test(
            test_redis_tls_sync_handshake_timeout_says_timed_out),
        cmocka_unit_test(test_redis_tls_async_mute_server_stays_in_handshake),
        cmocka_unit_test(test_redis_tls_sync_wrong_name_fails_open),
    };

    return cmocka_run_group_tests(tests, certs_setup, certs_teardown);
}
