/*
 * server/lws/tls.c - what lubdub adds to libwebsockets' TLS: the key-exchange
 * groups, and replacing the certificate on SIGHUP without a restart.
 *
 * lws 4.1.6 builds each loop's vhost SSL_CTX from --tls-cert/--tls-key and
 * hands it to us once (LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS,
 * on the main thread, before the loops run). There we restrict the groups
 * to elliptic curves (OpenSSL 3 would also offer finite-field DHE groups
 * in TLS 1.3) and install a certificate callback.
 *
 * Reload. The main thread gets SIGHUP from sigwait() (no signal handler
 * exists), reads both files into a scratch SSL_CTX and checks them there:
 * the chain parses, the key parses (an encrypted key is refused, never
 * prompted for), the key matches the certificate, and a probe SSL accepts
 * the pair exactly as the loops will install it. Anything wrong is one
 * error line and nothing changes. Otherwise the parsed certificate, chain
 * and key (refcounted, read-only from then on) go to every loop through a
 * per-loop atomic slot and lws_cancel_service(); each loop picks them up
 * in LWS_CALLBACK_EVENT_WAIT_CANCELLED on its own thread, and its
 * certificate callback puts them on every new handshake (replacing what
 * the SSL inherited from the SSL_CTX, so a change of key type leaves no
 * old certificate behind). The SSL_CTX itself is never modified after
 * the loops start, and connections already up keep their session: OpenSSL
 * copies the certificate into each SSL when it is created. The last loop
 * to switch logs "tls: certificate reloaded".
 *
 * Thread: srv_tls_reload() on the main thread; srv_tls_pick_up() and the
 * certificate callback on the loop's thread.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "server/lws/srv.h"

/* Elliptic-curve groups only, best first: ECDHE in TLS 1.2 and 1.3. */
#define SRV_TLS_GROUPS "X25519:P-256:P-384"

struct srv_tls_creds {
    atomic_uint refs;
    atomic_uint left;           /* loops that have not switched yet */
    X509 *cert;
    STACK_OF(X509) *chain;      /* may be NULL */
    EVP_PKEY *key;
    char desc[384];             /* subject, serial, expiry, fingerprint */
};

static void creds_unref(struct srv_tls_creds *c)
{
    if (!c || atomic_fetch_sub(&c->refs, 1) != 1)
        return;
    X509_free(c->cert);
    sk_X509_pop_free(c->chain, X509_free);
    EVP_PKEY_free(c->key);
    free(c);
}

/* Put c's certificate, chain and key on ssl, instead of what it has. */
static int creds_install(SSL *ssl, const struct srv_tls_creds *c)
{
    SSL_certs_clear(ssl);
    return SSL_use_cert_and_key(ssl, c->cert, c->key, c->chain, 1) == 1
               ? 0
               : -1;
}

/* Before the server picks its certificate, for every handshake. */
static int cert_cb(SSL *ssl, void *arg)
{
    struct srv_loop *l = arg;

    if (!l->tls_current)
        return 1; /* still the certificate lws loaded at start */
    if (creds_install(ssl, l->tls_current)) {
        ERR_clear_error();
        return 0; /* fails this handshake only */
    }
    return 1;
}

int srv_tls_vhost_init(struct srv_loop *l, SSL_CTX *ctx)
{
    if (SSL_CTX_set1_groups_list(ctx, SRV_TLS_GROUPS) != 1) {
        srv_log_event(HUB_LOG_ERR, l->id,
                      HUB_LOG_F(.event = "start_failed",
                                .reason = "tls_groups"),
                      "tls: cannot set groups %s",
                      SRV_TLS_GROUPS);
        return -1;
    }
    SSL_CTX_set_cert_cb(ctx, cert_cb, l);
    l->ssl_ctx = ctx;
    return 0;
}

/* The first OpenSSL error as text (or fallback), and clear the queue. */
static const char *ssl_reason(char *buf, size_t len, const char *fallback)
{
    unsigned long e = ERR_peek_error(); /* the first: the root cause */

    if (e) {
        const char *r = ERR_reason_error_string(e);

        snprintf(buf, len, "%s", r ? r : fallback);
    } else {
        snprintf(buf, len, "%s", fallback);
    }
    ERR_clear_error();
    return buf;
}

/* Never prompt on a terminal for an encrypted key: refuse it. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return 0;
}

static void describe(struct srv_tls_creds *c)
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0, i;
    char subject[96] = "?", serial[48] = "?", fp[3 * 32 + 1] = "";
    char expiry[32] = "?";
    const ASN1_TIME *na = X509_get0_notAfter(c->cert);
    BIGNUM *bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(c->cert), NULL);
    char *hex = bn ? BN_bn2hex(bn) : NULL;
    struct tm tm;

    X509_NAME_oneline(X509_get_subject_name(c->cert), subject,
                      sizeof(subject));
    if (hex)
        snprintf(serial, sizeof(serial), "%s", hex);
    OPENSSL_free(hex);
    BN_free(bn);
    if (na && ASN1_TIME_to_tm(na, &tm))
        strftime(expiry, sizeof(expiry), "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (X509_digest(c->cert, EVP_sha256(), md, &md_len))
        for (i = 0; i < md_len && i < 32; i++)
            snprintf(fp + 3 * i, sizeof(fp) - 3 * i, "%02X%s", md[i],
                     i + 1 < md_len ? ":" : "");
    /* The fingerprint is spelled as node's fingerprint256 and openssl x509
     * -fingerprint -sha256 spell it. */
    snprintf(c->desc, sizeof(c->desc),
             "subject %s, serial %s, expires %s, sha256 %s", subject, serial,
             expiry, fp);
}

/* Read and check cert + key; the new creds (refs 1), or NULL with why. */
static struct srv_tls_creds *creds_load(const char *cert, const char *key,
                                        char *why, size_t why_len)
{
    struct srv_tls_creds *c = NULL;
    STACK_OF(X509) *chain = NULL;
    char reason[160];
    SSL_CTX *ctx;
    SSL *probe = NULL;
    FILE *f;

    ERR_clear_error();
    /* Missing or unreadable files, with the system's words. */
    if (!(f = fopen(cert, "r"))) {
        snprintf(why, why_len, "cannot read --tls-cert %s: %s", cert,
                 strerror(errno));
        return NULL;
    }
    fclose(f);
    if (!(f = fopen(key, "r"))) {
        snprintf(why, why_len, "cannot read --tls-key %s: %s", key,
                 strerror(errno));
        return NULL;
    }
    fclose(f);
    ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        snprintf(why, why_len, "out of memory");
        return NULL;
    }
    SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        snprintf(why, why_len, "--tls-cert %s: %s", cert,
                 ssl_reason(reason, sizeof(reason), "not a PEM certificate"));
        goto out;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        snprintf(why, why_len, "--tls-key %s: %s", key,
                 ssl_reason(reason, sizeof(reason), "not a PEM private key"));
        goto out;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(why, why_len, "--tls-key %s does not match --tls-cert %s",
                 key, cert);
        ERR_clear_error();
        goto out;
    }
    c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(why, why_len, "out of memory");
        goto out;
    }
    atomic_init(&c->refs, 1);
    c->cert = SSL_CTX_get0_certificate(ctx);
    c->key = SSL_CTX_get0_privatekey(ctx);
    SSL_CTX_get0_chain_certs(ctx, &chain);
    X509_up_ref(c->cert);
    EVP_PKEY_up_ref(c->key);
    c->chain = chain ? X509_chain_up_ref(chain) : NULL;
    /* Exactly what the loops will do, once, here. */
    probe = SSL_new(ctx);
    if (!probe || (chain && !c->chain) || creds_install(probe, c)) {
        snprintf(why, why_len, "--tls-cert %s: %s", cert,
                 ssl_reason(reason, sizeof(reason),
                            "refused by the TLS library"));
        creds_unref(c);
        c = NULL;
        goto out;
    }
    describe(c);
out:
    SSL_free(probe);
    SSL_CTX_free(ctx);
    return c;
}

int srv_tls_reload(struct srv *srv)
{
    const struct srv_config *cfg = srv->cfg;
    struct srv_tls_creds *c;
    char why[512];

    if (!cfg->tls_cert) {
        srv_log_event(HUB_LOG_INFO, 0,
                      HUB_LOG_F(.event = "reload", .reason = "tls"),
                      "tls: SIGHUP: no --tls-cert, nothing to "
                      "reload");
        return 0;
    }
    c = creds_load(cfg->tls_cert, cfg->tls_key, why, sizeof(why));
    if (!c) {
        srv_log_event(HUB_LOG_ERR, 0,
                      HUB_LOG_F(.event = "reload_failed", .reason = "tls"),
                      "tls: certificate not reloaded, keeping the "
                      "old one: %s", why);
        return -1;
    }
    if (X509_cmp_current_time(X509_get0_notAfter(c->cert)) < 0)
        srv_log_event(HUB_LOG_WARN, 0,
                      HUB_LOG_F(.event = "tls_cert_expired"),
                      "tls: the new certificate has expired "
                      "(%s)", c->desc);
    atomic_store(&c->left, srv->n_loops);
    atomic_fetch_add(&c->refs, srv->n_loops);
    for (unsigned i = 0; i < srv->n_loops; i++) {
        struct srv_loop *l = &srv->loops[i];

        /* One the loop has not picked up yet is superseded. */
        creds_unref(atomic_exchange(&l->tls_pending, c));
        lws_cancel_service(l->ctx);
    }
    creds_unref(c);
    return 0;
}

void srv_tls_pick_up(struct srv_loop *l)
{
    struct srv_tls_creds *c = atomic_exchange(&l->tls_pending, NULL);

    if (!c)
        return;
    creds_unref(l->tls_current);
    l->tls_current = c; /* keeps the reference the main thread gave */
    if (atomic_fetch_sub(&c->left, 1) == 1)
        srv_log_event(HUB_LOG_INFO, l->id,
                      HUB_LOG_F(.event = "reload", .reason = "tls"),
                      "tls: certificate reloaded on %u loops: %s",
                      l->srv->n_loops, c->desc);
}

void srv_tls_loop_fini(struct srv_loop *l)
{
    creds_unref(atomic_exchange(&l->tls_pending, NULL));
    creds_unref(l->tls_current);
    l->tls_current = NULL;
}
