/*
 * tests/unit/test_tlsread.c - one read of a bypassed TLS session
 * (server/lws/tlsread.c) against a real OpenSSL client over a BIO pair,
 * with the server SSL set up as lws 4.1.6 sets it
 * (SSL_MODE_RELEASE_BUFFERS | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER, no
 * renegotiation): records read until the buffer is full, what OpenSSL keeps
 * after a full buffer (SRV_TLSREAD_MORE), nothing to read, close_notify
 * after data, EOF without it, a forged record, and a KeyUpdate that asks
 * for an answer while the send buffer is full.
 * The BIO pair makes the buffer sizes exact, which a socket does not.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "server/lws/tlsread.h"

/* Bytes the server can write before its side of the pair is full; the
 * client's side holds four full records. */
#define SERVER_BUF 4096
#define CLIENT_BUF (5 * 16500)
/* A TLS 1.3 AEAD record's bytes beyond its data: header 5, inner content
 * type 1, tag 16. */
#define TLS13_OVERHEAD 22

struct pair {
    SSL_CTX *sctx, *cctx;
    SSL *s, *c;
    BIO *sb, *cb; /* the server's and the client's end */
};

static void self_signed(SSL_CTX *ctx)
{
    EVP_PKEY *key = EVP_EC_gen("P-256");
    X509 *x = X509_new();

    assert_non_null(key);
    assert_non_null(x);
    X509_set_version(x, 2);
    ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
    X509_gmtime_adj(X509_getm_notBefore(x), -3600);
    X509_gmtime_adj(X509_getm_notAfter(x), 86400);
    X509_set_pubkey(x, key);
    X509_NAME_add_entry_by_txt(X509_get_subject_name(x), "CN", MBSTRING_ASC,
                               (const unsigned char *)"localhost", -1, -1, 0);
    X509_set_issuer_name(x, X509_get_subject_name(x));
    assert_true(X509_sign(x, key, EVP_sha256()) > 0);
    assert_int_equal(SSL_CTX_use_certificate(ctx, x), 1);
    assert_int_equal(SSL_CTX_use_PrivateKey(ctx, key), 1);
    X509_free(x);
    EVP_PKEY_free(key);
}

/* Both handshakes, pumped until done (each side writes what fits). */
static void handshake(struct pair *p)
{
    int sdone = 0, cdone = 0;

    for (int i = 0; i < 100 && !(sdone && cdone); i++) {
        if (!cdone)
            cdone = SSL_do_handshake(p->c) == 1;
        if (!sdone)
            sdone = SSL_do_handshake(p->s) == 1;
    }
    assert_true(sdone && cdone);
    assert_int_equal(SSL_version(p->s), TLS1_3_VERSION);
}

static int pair_setup(void **state)
{
    struct pair *p = calloc(1, sizeof(*p));

    assert_non_null(p);
    p->sctx = SSL_CTX_new(TLS_server_method());
    p->cctx = SSL_CTX_new(TLS_client_method());
    assert_non_null(p->sctx);
    assert_non_null(p->cctx);
    self_signed(p->sctx);
    /* What lws 4.1.6 and lubdub set (docs/LWS.md, "TLS"). */
    SSL_CTX_set_options(p->sctx, SSL_OP_NO_RENEGOTIATION);
    /* No session tickets: nothing from the server after the handshake
     * but what a test writes. */
    SSL_CTX_set_num_tickets(p->sctx, 0);
    p->s = SSL_new(p->sctx);
    p->c = SSL_new(p->cctx);
    SSL_set_mode(p->s, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                           SSL_MODE_RELEASE_BUFFERS);
    assert_int_equal(BIO_new_bio_pair(&p->sb, SERVER_BUF, &p->cb, CLIENT_BUF),
                     1);
    SSL_set_bio(p->s, p->sb, p->sb);
    SSL_set_bio(p->c, p->cb, p->cb);
    SSL_set_accept_state(p->s);
    SSL_set_connect_state(p->c);
    handshake(p);
    *state = p;
    return 0;
}

static int pair_teardown(void **state)
{
    struct pair *p = *state;

    SSL_free(p->s);
    SSL_free(p->c);
    SSL_CTX_free(p->sctx);
    SSL_CTX_free(p->cctx);
    free(p);
    return 0;
}

static void client_write(struct pair *p, const void *buf, int len)
{
    assert_int_equal(SSL_write(p->c, buf, len), len);
}

static unsigned char rbuf[64 * 1024];

static void test_tlsread_nothing_to_read_is_eagain(void **state)
{
    struct pair *p = *state;
    unsigned fl = 99;

    assert_int_equal(srv_tlsread(p->s, rbuf, sizeof(rbuf), &fl), -EAGAIN);
    assert_int_equal(fl, 0);
    assert_int_equal(ERR_peek_error(), 0);
}

/* Three 16 KiB records read into 40,000 bytes: two whole records and part
 * of the third, whose rest OpenSSL keeps (no socket event would say). */
static void test_tlsread_full_buffer_mid_record_says_more(void **state)
{
    struct pair *p = *state;
    static unsigned char msg[3 * 16384];
    unsigned fl;

    for (size_t i = 0; i < sizeof(msg); i++)
        msg[i] = (unsigned char)(i * 7);
    for (int r = 0; r < 3; r++)
        client_write(p, msg + r * 16384, 16384);
    assert_int_equal(srv_tlsread(p->s, rbuf, 40000, &fl), 40000);
    assert_int_equal(fl, SRV_TLSREAD_MORE);
    assert_memory_equal(rbuf, msg, 40000);
    assert_int_equal(srv_tlsread(p->s, rbuf, sizeof(rbuf), &fl),
                     sizeof(msg) - 40000);
    assert_int_equal(fl, 0);
    assert_memory_equal(rbuf, msg + 40000, sizeof(msg) - 40000);
    assert_int_equal(srv_tlsread(p->s, rbuf, sizeof(rbuf), &fl), -EAGAIN);
}

/* A buffer that fills at a record's end leaves nothing in OpenSSL. */
static void test_tlsread_full_buffer_at_record_end_says_nothing_more(
    void **state)
{
    struct pair *p = *state;
    static unsigned char msg[16384];
    unsigned fl;

    memset(msg, 'a', sizeof(msg));
    client_write(p, msg, sizeof(msg));
    client_write(p, msg, 100);
    assert_int_equal(srv_tlsread(p->s, rbuf, 16384, &fl), 16384);
    assert_int_equal(fl, 0);
    /* The next record is still in the "socket": a read event says so. */
    assert_int_equal(srv_tlsread(p->s, rbuf, sizeof(rbuf), &fl), 100);
}

/* Data then close_notify: the data first, flagged MORE so the caller
 * reads again; that read finds the end (OpenSSL keeps it). */
static void test_tlsread_close_notify_after_data_ends_on_next_read(
    void **state)
{
    struct pair *p = *state;
    unsigned fl;

    client_write(p, "0123456789", 10);
    assert_true(SSL_shutdown(p->c) >= 0);
    assert_int_equal(srv_tlsread(p->s, rbuf, sizeof(rbuf), &fl), 10);
    assert_int_equal(fl, SRV_TLSREAD_MORE);
    assert_memory_equal(rbuf, "0123456789", 10);
    assert_int_equal(srv_tlsread(p->s, rbuf, sizeof(rbuf), &fl), 0);
    assert_int_equal(srv_tlsread(p->s, rbuf, sizeof(rbuf), &fl), 0);
    assert_int_equal(ERR_peek_error(), 0);
}

/* EOF with no close_notify (a peer that went away) ends the session. */
static void test_tlsread_eof_without_close_notify_ends(void **state)
{
    struct pair *p = *state;
    unsigned fl;

    assert_int_equal(BIO_shutdown_wr(p->cb), 1);
    assert_int_equal(srv_tlsread(p->s, rbuf, sizeof(rbuf), &fl), 0);
    assert_int_equal(srv_tlsread(p->s, rbuf, sizeof(rbuf), &fl), 0);
    assert_int_equal(ERR_peek_error(), 0);
}

/* A record that does not decrypt ends the session, and leaves nothing on
 * the thread's error queue for lws's next call to trip on. */
static void test_tlsread_forged_record_ends_and_clears_the_error_queue(
    void **state)
{
    struct pair *p = *state;
    unsigned char rec[5 + 40] = { 0x17, 0x03, 0x03, 0x00, 40 };
    unsigned fl;

    memset(rec + 5, 0x5a, 40);
    assert_int_equal(BIO_write(p->cb, rec, sizeof(rec)), (int)sizeof(rec));
    assert_int_equal(srv_tlsread(p->s, rbuf, sizeof(rbuf), &fl), 0);
    assert_int_equal(ERR_peek_error(), 0);
    assert_int_equal(srv_tlsread(p->s, rbuf, sizeof(rbuf), &fl), 0);
}

/* Drain what the server wrote, as the peer's reads would. */
static size_t client_drain(struct pair *p)
{
    size_t got = 0;
    int n;

    while ((n = SSL_read(p->c, rbuf, sizeof(rbuf))) > 0)
        got += (size_t)n;
    assert_int_equal(SSL_get_error(p->c, n), SSL_ERROR_WANT_READ);
    return got;
}

/* A KeyUpdate asking for ours, while the server's send buffer has room for
 * less than a record: OpenSSL 3.0 does not answer from inside SSL_read(),
 * then or once there is room (no SSL_ERROR_WANT_WRITE: the read goes on to
 * the record behind it), but with the session's next SSL_write(), lws's;
 * both ways work after it.
 * (Should another OpenSSL answer from SSL_read(), SRV_TLSREAD_WANT_WRITE
 * is what server/lws/direct.c waits on.) */
static void test_tlsread_keyupdate_answer_goes_with_the_next_write(
    void **state)
{
    struct pair *p = *state;
    static unsigned char fill[SERVER_BUF];
    size_t written = 0, room;
    unsigned fl;

    /* Fill the server's side to 5 bytes of room, whole records only. */
    memset(fill, 'f', sizeof(fill));
    while ((room = BIO_ctrl_get_write_guarantee(p->sb)) > 5 + TLS13_OVERHEAD) {
        int n = (int)(room - 5 - TLS13_OVERHEAD);

        assert_int_equal(SSL_write(p->s, fill, n), n);
        written += (size_t)n;
    }
    assert_true(BIO_ctrl_get_write_guarantee(p->sb) < 5 + TLS13_OVERHEAD);
    assert_int_equal(SSL_key_update(p->c, SSL_KEY_UPDATE_REQUESTED), 1);
    client_write(p, "behind", 6);
    assert_int_equal(srv_tlsread(p->s, rbuf, sizeof(rbuf), &fl), 6);
    assert_int_equal(fl, 0);
    assert_memory_equal(rbuf, "behind", 6);
    assert_int_equal(srv_tlsread(p->s, rbuf, sizeof(rbuf), &fl), -EAGAIN);
    assert_int_equal(fl, 0);
    /* Nothing was written meanwhile. */
    assert_true(BIO_ctrl_get_write_guarantee(p->sb) < 5 + TLS13_OVERHEAD);
    assert_int_equal(client_drain(p), written);
    room = BIO_ctrl_get_write_guarantee(p->sb);
    /* With room now, a read still writes nothing. */
    assert_int_equal(srv_tlsread(p->s, rbuf, sizeof(rbuf), &fl), -EAGAIN);
    assert_int_equal(fl, 0);
    assert_int_equal(BIO_ctrl_get_write_guarantee(p->sb), room);
    /* The next write carries the KeyUpdate (a record of its own) too. */
    assert_int_equal(SSL_write(p->s, "back", 4), 4);
    assert_true(room - BIO_ctrl_get_write_guarantee(p->sb) >
                4 + TLS13_OVERHEAD);
    assert_int_equal(client_drain(p), 4);
    assert_memory_equal(rbuf, "back", 4);
    client_write(p, "after", 5);
    assert_int_equal(srv_tlsread(p->s, rbuf, sizeof(rbuf), &fl), 5);
    assert_memory_equal(rbuf, "after", 5);
    assert_int_equal(ERR_peek_error(), 0);
}

#define T(f) cmocka_unit_test_setup_teardown(f, pair_setup, pair_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_tlsread_nothing_to_read_is_eagain),
        T(test_tlsread_full_buffer_mid_record_says_more),
        T(test_tlsread_full_buffer_at_record_end_says_nothing_more),
        T(test_tlsread_close_notify_after_data_ends_on_next_read),
        T(test_tlsread_eof_without_close_notify_ends),
        T(test_tlsread_forged_record_ends_and_clears_the_error_queue),
        T(test_tlsread_keyupdate_answer_goes_with_the_next_write),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
