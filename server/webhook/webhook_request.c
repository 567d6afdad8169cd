/*
 * server/webhook/webhook_request.c - one webhook POST
 * (server/webhook/webhook_int.h): the head batch of an endpoint signed
 * (X-Pusher-Signature, from an HMAC context kept per endpoint), its
 * headers (the app key, the idempotency keys, the webhook's own), and the
 * endpoint's easy handle set up and added to the multi handle. The
 * response body is read and thrown away up to BODY_CAP bytes; past it the
 * transfer is cut (the status already read decides, webhook_send.c).
 *
 * Thread: the sender thread.
 */
#include "server/webhook/webhook_int.h"

#include <openssl/core_names.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/app/app.h"
#include "hub/app/auth.h"
#include "server/config/config.h"

#define BODY_CAP (64 * 1024)        /* response bytes read, then cut */

static size_t discard(char *p, size_t sz, size_t n, void *ctx)
{
    struct srv_wh_ep *ep = ctx;

    (void)p;
    ep->body_seen += sz * n;
    /* Past the cap: a short count makes curl stop (CURLE_WRITE_ERROR). */
    return ep->body_seen > BODY_CAP ? 0 : sz * n;
}

void srv__wh_mac_drop(struct srv_wh_ep *ep)
{
    EVP_MAC_CTX_free(ep->mac);
    ep->mac = NULL;
    if (ep->mac_key) {
        explicit_bzero(ep->mac_key, strlen(ep->mac_key));
        free(ep->mac_key);
        ep->mac_key = NULL;
    }
}

/*
 * X-Pusher-Signature of body: what hub_auth_hmac_hex gives, from a context
 * kept per endpoint (OpenSSL's one-shot HMAC fetches and keys a new one
 * each call, a sixth of this thread's CPU at one POST per 20 events). A
 * reload that changes the secret re-keys it; any failure falls back to
 * the one-shot.
 */
static void sign(struct srv_wh_ep *ep, const char *body, size_t len,
                 char out[HUB_SHA256_HEX_LEN + 1])
{
    static const char hex[] = "0123456789abcdef";
    const char *secret = ep->app->secret;
    unsigned char md[EVP_MAX_MD_SIZE];
    size_t md_len = 0;
    bool ok;

    if (ep->mac && !strcmp(ep->mac_key, secret)) {
        ok = EVP_MAC_init(ep->mac, NULL, 0, NULL);
    } else {
        EVP_MAC *alg = EVP_MAC_fetch(NULL, "HMAC", NULL);
        OSSL_PARAM params[] = {
            OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
                                             (char *)"SHA256", 0),
            OSSL_PARAM_construct_end(),
        };

        srv__wh_mac_drop(ep);
        ep->mac = alg ? EVP_MAC_CTX_new(alg) : NULL;
        EVP_MAC_free(alg);
        ep->mac_key = strdup(secret);
        ok = ep->mac && ep->mac_key &&
             EVP_MAC_init(ep->mac, (const unsigned char *)secret,
                          strlen(secret), params);
        if (!ok)
            srv__wh_mac_drop(ep);
    }
    ok = ok && EVP_MAC_update(ep->mac, (const unsigned char *)body, len) &&
         EVP_MAC_final(ep->mac, md, &md_len, sizeof(md)) &&
         md_len == HUB_SHA256_HEX_LEN / 2;
    if (!ok) {
        srv__wh_mac_drop(ep);
        hub_auth_hmac_hex(secret, strlen(secret), body, len, out);
        return;
    }
    for (size_t i = 0; i < md_len; i++) {
        out[2 * i] = hex[md[i] >> 4];
        out[2 * i + 1] = hex[md[i] & 15];
    }
    out[2 * md_len] = '\0';
}

void srv__wh_request_start(struct srv_wh_ep *ep, uint64_t now)
{
    struct srv_wh *wh = ep->wh;
    struct srv_wh_batch *b = ep->head;
    char sig[65], line[HUB_WH_MAX_HEADER_BYTES + 64];
    struct curl_slist *h = NULL, *t;
    bool ok = true;

    (void)now;
    sign(ep, b->body, b->len, sig);
#define ADD(text)                                                              \
    if (ok && (t = curl_slist_append(h, text)) != NULL)                        \
        h = t;                                                                 \
    else                                                                       \
        ok = false;
    ADD("Content-Type: application/json")
    ADD("Expect:")
    /* The app's first key/secret pair signs (key rotation: the sender's
     * copy of the app holds that pair only, server/webhook/webhook_view.c). */
    snprintf(line, sizeof(line), "X-Pusher-Key: %s", ep->app->key);
    ADD(line)
    snprintf(line, sizeof(line), "X-Pusher-Signature: %s", sig);
    ADD(line)
    snprintf(line, sizeof(line), "X-Lubdub-Idempotency-Key: %s", b->idem);
    ADD(line)
    snprintf(line, sizeof(line), "Idempotency-Key: %s", b->idem);
    ADD(line)
    for (unsigned i = 0; i < ep->conf->n_headers; i++) {
        ADD(ep->conf->headers[i])
    }
#undef ADD
    if (!ok) {
        curl_slist_free_all(h);
        b->next_ms = now + 1000;   /* out of memory: try again later */
        return;
    }
    if (!ep->easy) {
        ep->easy = curl_easy_init();
        if (!ep->easy) {
            curl_slist_free_all(h);
            b->next_ms = now + 1000;
            return;
        }
    }
    curl_easy_reset(ep->easy);
    curl_easy_setopt(ep->easy, CURLOPT_URL, ep->conf->url);
    curl_easy_setopt(ep->easy, CURLOPT_POST, 1L);
    curl_easy_setopt(ep->easy, CURLOPT_POSTFIELDS, b->body);
    curl_easy_setopt(ep->easy, CURLOPT_POSTFIELDSIZE_LARGE,
                     (curl_off_t)b->len);
    curl_easy_setopt(ep->easy, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(ep->easy, CURLOPT_USERAGENT, "lubdub-webhooks");
    curl_easy_setopt(ep->easy, CURLOPT_TIMEOUT_MS,
                     (long)wh->cfg->webhook_timeout_ms);
    curl_easy_setopt(ep->easy, CURLOPT_CONNECTTIMEOUT_MS,
                     (long)wh->cfg->webhook_timeout_ms);
    curl_easy_setopt(ep->easy, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(ep->easy, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(ep->easy, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(ep->easy, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(ep->easy, CURLOPT_WRITEDATA, ep);
    curl_easy_setopt(ep->easy, CURLOPT_PRIVATE, ep);
    curl_easy_setopt(ep->easy, CURLOPT_TCP_KEEPALIVE, 1L);
    if (wh->cfg->webhook_ca_file)
        curl_easy_setopt(ep->easy, CURLOPT_CAINFO, wh->cfg->webhook_ca_file);
    ep->hdrs = h;
    ep->body_seen = 0;
    if (b->attempts)
        atomic_fetch_add(&ep->retried, 1);
    if (curl_multi_add_handle(wh->multi, ep->easy) != CURLM_OK) {
        curl_slist_free_all(h);
        ep->hdrs = NULL;
        b->next_ms = now + 1000;
        return;
    }
    ep->in_flight = true;
}
