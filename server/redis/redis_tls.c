/*
 * server/redis/redis_tls.c - the OpenSSL side of connections to Redis
 * (server/redis/redis_tls.h): the client context, a session per
 * connection with the name to verify, and errors an operator can read.
 *
 * Thread: any (no state of its own).
 */
#include "server/redis/redis_tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/x509v3.h>

/* OpenSSL's queued errors as one line ("" when none); the queue emptied. */
static void queued(char *out, size_t len)
{
    unsigned long e, last = 0;

    out[0] = '\0';
    while ((e = ERR_get_error()))
        last = e;
    if (last)
        ERR_error_string_n(last, out, len);
}

SSL_CTX *srv_redis_tls_ctx_create(const char *ca, const char *cert,
                                  const char *key, char *why, size_t len)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    char e[200];
    const char *what = NULL;

    if (!ctx) {
        snprintf(why, len, "TLS: out of memory");
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* The asynchronous connection's output buffer grows (and may move)
     * while a write waits for the socket: OpenSSL is told so. */
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE |
                              SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
    if (ca && *ca) {
        if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1)
            what = "--redis-tls-ca-file";
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        what = "the system's CA store";
    }
    if (!what && cert && *cert &&
        SSL_CTX_use_certificate_chain_file(ctx, cert) != 1)
        what = "--redis-tls-cert-file";
    if (!what && key && *key &&
        SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1)
        what = "--redis-tls-key-file";
    if (!what && cert && *cert && SSL_CTX_check_private_key(ctx) != 1)
        what = "--redis-tls-key-file (not the certificate's key)";
    if (what) {
        queued(e, sizeof(e));
        snprintf(why, len, "TLS: cannot use %s: %s", what, e);
        SSL_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

/* host is an IPv4 or IPv6 address (not a name). */
static int is_ip(const char *host)
{
    unsigned char buf[sizeof(struct in6_addr)];

    return inet_pton(AF_INET, host, buf) == 1 ||
           inet_pton(AF_INET6, host, buf) == 1;
}

SSL *srv_redis_tls_session(SSL_CTX *ctx, int fd, const char *host,
                           const char *name, char *why, size_t len)
{
    const char *v = name && *name ? name : host;
    SSL *s = SSL_new(ctx);
    int ok;

    if (!s) {
        snprintf(why, len, "TLS: out of memory");
        return NULL;
    }
    if (is_ip(v)) {
        /* An address is checked against the certificate's IP entries and
         * never sent as SNI (RFC 6066 §3). */
        ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(s), v) == 1;
    } else {
        ok = SSL_set_tlsext_host_name(s, v) == 1 && SSL_set1_host(s, v) == 1;
        SSL_set_hostflags(s, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    }
    if (!ok || SSL_set_fd(s, fd) != 1) {
        snprintf(why, len, "TLS: cannot verify the name %s", v);
        SSL_free(s);
        return NULL;
    }
    SSL_set_connect_state(s);
    return s;
}

int srv_redis_tls_error(SSL *s, int ret, char *why, size_t len)
{
    int err = SSL_get_error(s, ret), sys = errno;
    long vr;
    char e[200];

    switch (err) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        return err;
    case SSL_ERROR_ZERO_RETURN:
        snprintf(why, len, "connection closed");
        return err;
    default:
        break;
    }
    vr = SSL_get_verify_result(s);
    queued(e, sizeof(e));
    if (vr != X509_V_OK)
        snprintf(why, len, "TLS: certificate verify failed: %s",
                 X509_verify_cert_error_string(vr));
    else if (e[0])
        snprintf(why, len, "TLS: %s", e);
    else if (err == SSL_ERROR_SYSCALL && sys && ret < 0)
        snprintf(why, len, "TLS: %s", strerror(sys));
    else
        snprintf(why, len, "connection closed");
    return err;
}
