/*
 * hub/app/auth.c - Pusher signatures: channel and user auth, REST request
 * verification and signing (docs/PROTOCOL.md 3.3, 3.4, 4.2, 6.1).
 *
 * Every comparison of a secret-derived value goes through CRYPTO_memcmp so
 * that timing reveals nothing about how much of a signature matched.
 * Strings to sign are assembled in stack buffers; only an unusually large
 * presence channel_data or user_data falls back to the heap. Any thread:
 * the keyed HMAC contexts (mac_cache below) are each thread's own, and
 * OpenSSL's one-shot HMAC() and EVP_Digest() are thread-safe.
 */
#include "hub/base/why.h"
#include "hub/app/auth.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "hub/base/query.h"

/* Room for the method, the path and the sorted query of a REST request. */
#define REST_STRING_MAX (HUB_QUERY_MAX_BYTES + 2048)

static void to_hex(const unsigned char *in, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    size_t i;

    for (i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

/*
 * Keyed HMAC-SHA256 contexts, a few per thread, found by the key's bytes.
 *
 * OpenSSL 3's one-shot HMAC() fetches the algorithm, allocates a context
 * and hashes the key pads on every call; a context keyed once and re-armed
 * with EVP_MAC_init(ctx, NULL, 0, NULL) (same key) skips all three. Every
 * REST request, private/presence subscription and sign-in signs with its
 * app's secret, so a loop thread sees the same few keys again and again.
 *
 * Lookup is by the key bytes themselves, not by app pointer or index: a
 * reload (hub/loop/appswap.c) that changes an app's secret simply misses and
 * keys a new slot, and nothing can answer with a stale key. The least
 * recently used slot is re-keyed on a miss (its old key wiped first), so a
 * thread serving more apps than slots costs what the one-shot costs, no
 * more. The keys compared are the hub's own configured secrets, never
 * attacker input, so the lookup needs no constant-time compare.
 *
 * The cache is thread-local: no context is ever shared between threads.
 * A thread's slots are freed when it exits (the pthread key's
 * destructor), or by hub_auth_thread_release().
 */
#define MAC_SLOTS 8

struct mac_slot {
    EVP_MAC_CTX *ctx;   /* keyed with key; NULL = empty slot */
    char *key;
    size_t key_len;
    uint64_t used;      /* the cache's tick when last used */
};

struct mac_cache {
    struct mac_slot slot[MAC_SLOTS];
    uint64_t tick;
    /* body_md5: MD5 fetched once (EVP_md5() is fetched again by name on
     * every EVP_Digest()) and one digest context, reset per use. */
    EVP_MD *md5;
    EVP_MD_CTX *md5_ctx;
    bool md5_tried;     /* fetched or failed once: not again */
};

static __thread struct mac_cache *mac_tls;
static pthread_key_t mac_key;
static pthread_once_t mac_once = PTHREAD_ONCE_INIT;
static bool mac_key_ok;

static void slot_drop(struct mac_slot *s)
{
    EVP_MAC_CTX_free(s->ctx);
    s->ctx = NULL;
    if (s->key) {
        OPENSSL_cleanse(s->key, s->key_len);
        free(s->key);
        s->key = NULL;
    }
    s->key_len = 0;
}

static void cache_free(void *v)
{
    struct mac_cache *c = v;

    if (!c)
        return;
    for (unsigned i = 0; i < MAC_SLOTS; i++)
        slot_drop(&c->slot[i]);
    EVP_MD_CTX_free(c->md5_ctx);
    EVP_MD_free(c->md5);
    free(c);
}

static void mac_key_init(void)
{
    mac_key_ok = pthread_key_create(&mac_key, cache_free) == 0;
}

void hub_auth_thread_release(void)
{
    struct mac_cache *c = mac_tls;

    mac_tls = NULL;
    if (mac_key_ok)
        pthread_setspecific(mac_key, NULL);
    cache_free(c);
}

static struct mac_cache *cache_get(void)
{
    struct mac_cache *c = mac_tls;

    if (c)
        return c;
    pthread_once(&mac_once, mac_key_init);
    /* Without the key the thread's slots could not be freed at its exit:
     * use the one-shot instead. */
    if (!mac_key_ok || !(c = calloc(1, sizeof(*c))))
        return NULL;
    if (pthread_setspecific(mac_key, c)) {
        free(c);
        return NULL;
    }
    mac_tls = c;
    return c;
}

/* A context keyed with key, ready for EVP_MAC_update(); NULL on failure
 * (the caller then uses the one-shot). */
static EVP_MAC_CTX *mac_for(const char *key, size_t key_len)
{
    struct mac_cache *c = cache_get();
    struct mac_slot *s, *lru;
    OSSL_PARAM params[2];
    EVP_MAC *alg;

    if (!c)
        return NULL;
    c->tick++;
    lru = NULL;
    for (unsigned i = 0; i < MAC_SLOTS; i++) {
        s = &c->slot[i];
        if (!s->ctx) {
            if (!lru || lru->ctx)
                lru = s; /* an empty slot before any used one */
            continue;
        }
        if (s->key_len == key_len &&
            (key_len == 0 || memcmp(s->key, key, key_len) == 0)) {
            s->used = c->tick;
            /* NULL key: start over with the key it already holds. */
            if (EVP_MAC_init(s->ctx, NULL, 0, NULL))
                return s->ctx;
            slot_drop(s);
            return NULL;
        }
        if (!lru || (lru->ctx && s->used < lru->used))
            lru = s;
    }
    s = lru;
    slot_drop(s);
    params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST,
                                                 (char *)"SHA256", 0);
    params[1] = OSSL_PARAM_construct_end();
    alg = EVP_MAC_fetch(NULL, "HMAC", NULL);
    s->ctx = alg ? EVP_MAC_CTX_new(alg) : NULL;
    EVP_MAC_free(alg);
    s->key = malloc(key_len ? key_len : 1);
    if (!s->ctx || !s->key ||
        !EVP_MAC_init(s->ctx, (const unsigned char *)key, key_len, params)) {
        slot_drop(s);
        return NULL;
    }
    if (key_len)
        memcpy(s->key, key, key_len);
    s->key_len = key_len;
    s->used = c->tick;
    return s->ctx;
}

void hub_auth_hmac_hex(const char *key, size_t key_len, const void *msg,
                       size_t msg_len, char out[HUB_SHA256_HEX_LEN + 1])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    EVP_MAC_CTX *ctx = key_len <= INT32_MAX ? mac_for(key, key_len) : NULL;

    if (ctx) {
        size_t n = 0;

        if (EVP_MAC_update(ctx, msg, msg_len) &&
            EVP_MAC_final(ctx, md, &n, sizeof(md)) &&
            n == HUB_SHA256_HEX_LEN / 2) {
            to_hex(md, n, out);
            return;
        }
        /* A context that failed is not trusted again. */
        hub_auth_thread_release();
    }
    /*
     * The one-shot: no cache on this thread, or it failed. HMAC() takes
     * an int key length; a longer key than that is not a credential
     * anyone configures. On failure out is empty, which then never equals
     * a received signature.
     */
    if (key_len > INT32_MAX ||
        HMAC(EVP_sha256(), key, (int)key_len, msg, msg_len, md, &md_len) ==
            NULL ||
        md_len != HUB_SHA256_HEX_LEN / 2) {
        out[0] = '\0';
        return;
    }
    to_hex(md, md_len, out);
}

void hub_auth_md5_hex(const void *data, size_t len,
                      char out[HUB_MD5_HEX_LEN + 1])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    struct mac_cache *c = cache_get();

    if (c && !c->md5_tried) {
        c->md5_tried = true;
        c->md5 = EVP_MD_fetch(NULL, "MD5", NULL);
        c->md5_ctx = c->md5 ? EVP_MD_CTX_new() : NULL;
    }
    if (c && c->md5 && c->md5_ctx) {
        if (EVP_DigestInit_ex(c->md5_ctx, c->md5, NULL) &&
            EVP_DigestUpdate(c->md5_ctx, data, len) &&
            EVP_DigestFinal_ex(c->md5_ctx, md, &md_len) &&
            md_len == HUB_MD5_HEX_LEN / 2) {
            to_hex(md, md_len, out);
            return;
        }
        md_len = 0;
    }

    /* MD5 can be missing under a FIPS-only provider: out is then empty. */
    if (!EVP_Digest(data, len, md, &md_len, EVP_md5(), NULL) ||
        md_len != HUB_MD5_HEX_LEN / 2) {
        out[0] = '\0';
        return;
    }
    to_hex(md, md_len, out);
}

bool hub_auth_equal(const void *a, size_t a_len, const void *b, size_t b_len)
{
    /* The length is public (a hex digest has a fixed one); the bytes not. */
    if (a_len != b_len)
        return false;
    if (a_len == 0)
        return true;
    return CRYPTO_memcmp(a, b, a_len) == 0;
}

/* One piece of a string to sign. */
struct part {
    const char *p;
    size_t n;
};

/*
 * HMAC over the concatenation of parts, and optionally a copy of that
 * string (truncated, NUL-terminated) in expect. Returns 0 or -ENOMEM.
 */
static int hmac_parts(const char *secret, const struct part *parts,
                      size_t n_parts, char out[HUB_SHA256_HEX_LEN + 1],
                      char *expect, size_t expect_len)
{
    char stack[2048];
    char *buf = stack;
    size_t total = 0, off = 0, i;

    for (i = 0; i < n_parts; i++)
        total += parts[i].n;
    if (total > sizeof(stack)) {
        buf = malloc(total);
        if (buf == NULL)
            return -ENOMEM;
    }
    for (i = 0; i < n_parts; i++) {
        if (parts[i].n > 0)
            memcpy(buf + off, parts[i].p, parts[i].n);
        off += parts[i].n;
    }
    hub_auth_hmac_hex(secret, strlen(secret), buf, total, out);
    if (expect != NULL && expect_len > 0) {
        size_t n = total < expect_len - 1 ? total : expect_len - 1;

        memcpy(expect, buf, n);
        expect[n] = '\0';
    }
    if (buf != stack)
        free(buf);
    return 0;
}

/*
 * Compare auth "<key>:<hex>" with HMAC over parts. The key part is checked
 * too, unlike Reverb, so a signature made for another app is refused early.
 *
 * Key rotation (hub/app/app.h): the key may be any of the app's pairs',
 * not only the one the connection opened with, and the HMAC is keyed with
 * that pair's secret. An app server signs with one pair of its choice
 * while the clients in the field connect with the old key and the new
 * one; requiring the connection's own pair would refuse one of the two
 * groups for the whole rotation, and gain nothing: every pair is the
 * same app's credential, and the signed string names the socket. Without
 * a usable auth the string is still signed with the first pair, so that
 * expect shows it.
 */
static int check_auth(const struct hub_app *app, const char *auth,
                      const struct part *parts, size_t n_parts, char *expect,
                      size_t expect_len)
{
    char want[HUB_SHA256_HEX_LEN + 1];
    /* The last ':': the signature is hex, a key may hold ':'. */
    const char *colon = auth ? strrchr(auth, ':') : NULL;
    int pair = colon ? hub_app_key_find(app, auth, (size_t)(colon - auth))
                     : -1;
    const char *secret;
    int rc;

    if (expect != NULL && expect_len > 0)
        expect[0] = '\0';
    secret = hub_app_secret_at(app, pair < 0 ? 0 : (unsigned)pair);
    if (secret == NULL)
        return -EINVAL;
    rc = hmac_parts(secret, parts, n_parts, want, expect, expect_len);
    if (rc < 0)
        return rc;
    if (pair < 0)
        return -EINVAL;
    if (want[0] == '\0' ||
        !hub_auth_equal(colon + 1, strlen(colon + 1), want, strlen(want)))
        return -EACCES;
    return 0;
}

int hub_auth_check_channel(const struct hub_app *app, const char *socket_id,
                           const char *channel, const char *channel_data,
                           size_t channel_data_len, const char *auth,
                           char *expect, size_t expect_len)
{
    struct part parts[5];
    size_t n = 0;

    if (socket_id == NULL || channel == NULL) {
        if (expect != NULL && expect_len > 0)
            expect[0] = '\0';
        return -EINVAL;
    }
    parts[n++] = (struct part){ socket_id, strlen(socket_id) };
    parts[n++] = (struct part){ ":", 1 };
    parts[n++] = (struct part){ channel, strlen(channel) };
    if (channel_data != NULL) {
        parts[n++] = (struct part){ ":", 1 };
        parts[n++] = (struct part){ channel_data, channel_data_len };
    }
    return check_auth(app, auth, parts, n, expect, expect_len);
}

int hub_auth_check_user(const struct hub_app *app, const char *socket_id,
                        const char *user_data, size_t user_data_len,
                        const char *auth)
{
    struct part parts[3];

    if (socket_id == NULL || user_data == NULL)
        return -EINVAL;
    parts[0] = (struct part){ socket_id, strlen(socket_id) };
    parts[1] = (struct part){ "::user::", 8 };
    parts[2] = (struct part){ user_data, user_data_len };
    return check_auth(app, auth, parts, 3, NULL, 0);
}

/* A bounded string builder; overflow sticks and is reported once. */
struct sbuf {
    char *p;
    size_t cap, len;
    bool overflow;
};

static void sb_put(struct sbuf *b, const char *s, size_t n)
{
    if (b->overflow || n >= b->cap - b->len) {
        b->overflow = true;
        return;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_str(struct sbuf *b, const char *s)
{
    sb_put(b, s, strlen(s));
}

static int cmp_param(const void *a, const void *b)
{
    const char *const *ka = a;
    const char *const *kb = b;

    /* strcmp orders by unsigned byte value, which is what 6.1 asks for. */
    return strcmp(*ka, *kb);
}


static int parse_timestamp(const char *s, uint64_t *out)
{
    uint64_t v = 0;

    if (*s == '\0' || strlen(s) > 19)
        return -EINVAL;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return -EINVAL;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

/*
 * Build METHOD\nPATH\nQUERY from a parsed query whose keys are already
 * lower-case, leaving out auth_signature and putting body_md5 (when not
 * NULL) in place of the received value. Returns 0, -EINVAL (duplicate key)
 * or -E2BIG.
 */
static int string_to_sign(struct sbuf *b, const char *method,
                          const char *path, struct hub_query *q,
                          const char *body_md5)
{
    /* Pairs of key and value pointers, sorted by key. */
    const char *pairs[HUB_QUERY_MAX_PARAMS][2];
    unsigned i, n = 0;

    for (i = 0; i < q->n; i++) {
        if (strcmp(q->params[i].key, "auth_signature") == 0)
            continue;
        pairs[n][0] = q->params[i].key;
        pairs[n][1] = q->params[i].value;
        if (body_md5 != NULL && strcmp(pairs[n][0], "body_md5") == 0)
            pairs[n][1] = body_md5;
        n++;
    }
    qsort(pairs, n, sizeof(pairs[0]), cmp_param);
    for (i = 1; i < n; i++)
        if (strcmp(pairs[i - 1][0], pairs[i][0]) == 0)
            return -EINVAL;

    sb_str(b, method);
    sb_put(b, "\n", 1);
    sb_str(b, path);
    sb_put(b, "\n", 1);
    for (i = 0; i < n; i++) {
        if (i > 0)
            sb_put(b, "&", 1);
        sb_str(b, pairs[i][0]);
        sb_put(b, "=", 1);
        sb_str(b, pairs[i][1]);
    }
    return b->overflow ? -E2BIG : 0;
}

static void lower_keys(struct hub_query *q)
{
    unsigned i;
    char *k;

    for (i = 0; i < q->n; i++)
        for (k = q->params[i].key; *k; k++)
            if (*k >= 'A' && *k <= 'Z')
                *k = (char)(*k - 'A' + 'a');
}

/* dst = src with every pointer moved into dst->buf (keys and values of a
 * parsed query all live in its buf: hub/base/query.c). */
static void query_copy(struct hub_query *dst, const struct hub_query *src)
{
    unsigned i;

    assert(src->n <= HUB_QUERY_MAX_PARAMS);
    memcpy(dst->buf, src->buf, sizeof(dst->buf));
    dst->n = src->n;
    for (i = 0; i < src->n; i++) {
        assert(src->params[i].key >= src->buf &&
               src->params[i].key < src->buf + sizeof(src->buf));
        assert(src->params[i].value >= src->buf &&
               src->params[i].value < src->buf + sizeof(src->buf));
        dst->params[i].key = dst->buf + (src->params[i].key - src->buf);
        dst->params[i].value = dst->buf + (src->params[i].value - src->buf);
    }
}

const char *hub_http_method_name(enum hub_http_method m)
{
    assert(m == HUB_HTTP_GET || m == HUB_HTTP_POST);
    return m == HUB_HTTP_POST ? "POST" : "GET";
}

/* Count how often key occurs; duplicates are refused before anything. */
static unsigned count_key(const struct hub_query *q, const char *key)
{
    unsigned i, n = 0;

    for (i = 0; i < q->n; i++)
        n += strcmp(q->params[i].key, key) == 0;
    return n;
}

int hub_auth_check_rest(const struct hub_app *app,
                        const struct hub_rest_request *req, char *why,
                        size_t why_len)
{
    static const char *const required[] = { "auth_key", "auth_timestamp",
                                            "auth_signature" };
    struct hub_query q;
    char md5[HUB_MD5_HEX_LEN + 1];
    char want[HUB_SHA256_HEX_LEN + 1];
    char str[REST_STRING_MAX];
    struct sbuf b = { str, sizeof(str), 0, false };
    const char *key, *version, *ts_text, *sig, *client_md5, *secret;
    uint64_t ts, skew;
    unsigned i, j;
    int rc, pair;

    hub__set_why(why, why_len, "ok");
    if (req->path == NULL) {
        hub__set_why(why, why_len, "missing path");
        return -EINVAL;
    }
    /* Lower-cased in our copy: the caller's lookups stay exact. */
    if (req->query)
        query_copy(&q, req->query);
    else
        q.n = 0;
    lower_keys(&q);
    for (i = 0; i < q.n; i++)
        for (j = i + 1; j < q.n; j++)
            if (strcmp(q.params[i].key, q.params[j].key) == 0) {
                hub__set_why(why, why_len, "duplicate query parameter %.64s",
                        q.params[i].key);
                return -EINVAL;
            }

    /* No credentials at all is a 401; credentials of another kind a 400. */
    for (i = 0; i < sizeof(required) / sizeof(required[0]); i++)
        if (count_key(&q, required[i]) == 0) {
            hub__set_why(why, why_len, "missing %s", required[i]);
            return -EACCES;
        }
    version = hub_query_find(&q, "auth_version");
    if (version == NULL || strcmp(version, "1.0") != 0) {
        hub__set_why(why, why_len, "auth_version must be 1.0");
        return -EINVAL;
    }
    /* Any of the app's pairs (key rotation); its secret signs below. */
    key = hub_query_find(&q, "auth_key");
    pair = hub_app_key_find(app, key, strlen(key));
    /* No secret (no pair) refuses here, as check_auth does. */
    secret = pair < 0 ? NULL : hub_app_secret_at(app, (unsigned)pair);
    if (!secret) {
        hub__set_why(why, why_len, "unknown auth_key");
        return -EACCES;
    }
    ts_text = hub_query_find(&q, "auth_timestamp");
    if (parse_timestamp(ts_text, &ts) < 0) {
        hub__set_why(why, why_len, "auth_timestamp is not a number");
        return -EINVAL;
    }
    skew = req->now_s > ts ? req->now_s - ts : ts - req->now_s;
    if (req->window_s != 0 && skew > req->window_s) {
        hub__set_why(why, why_len,
                "stale timestamp: |now - auth_timestamp| = %" PRIu64
                " s, allowed %" PRIu64 " s",
                skew, req->window_s);
        return -EACCES;
    }

    /*
     * The body's own MD5 goes into the string, never the client's claim,
     * so a body changed in flight fails the signature.
     */
    client_md5 = hub_query_find(&q, "body_md5");
    if (req->body_len > 0 && client_md5 == NULL) {
        hub__set_why(why, why_len, "missing body_md5");
        return -EACCES;
    }
    if (client_md5 != NULL) {
        hub_auth_md5_hex(req->body, req->body_len, md5);
        if (md5[0] == '\0') {
            hub__set_why(why, why_len, "MD5 unavailable");
            return -EACCES;
        }
    }
    rc = string_to_sign(&b, hub_http_method_name(req->method), req->path, &q,
                        client_md5 ? md5 : NULL);
    if (rc < 0) {
        hub__set_why(why, why_len, "request too long");
        return -EINVAL;
    }
    hub_auth_hmac_hex(secret, strlen(secret), str, b.len, want);
    sig = hub_query_find(&q, "auth_signature");
    if (want[0] == '\0' ||
        !hub_auth_equal(sig, strlen(sig), want, strlen(want))) {
        hub__set_why(why, why_len, "invalid signature");
        return -EACCES;
    }
    return 0;
}

int hub_auth_sign_rest(const struct hub_app *app, const char *method,
                       const char *path, const char *query_without_auth,
                       const void *body, size_t body_len, uint64_t ts,
                       char *out_query, size_t out_len)
{
    return hub_auth_sign_rest_pair(app->key, app->secret, method, path,
                                   query_without_auth, body, body_len, ts,
                                   out_query, out_len);
}

int hub_auth_sign_rest_pair(const char *key, const char *secret,
                            const char *method, const char *path,
                            const char *query_without_auth, const void *body,
                            size_t body_len, uint64_t ts, char *out_query,
                            size_t out_len)
{
    struct hub_query q;
    char md5[HUB_MD5_HEX_LEN + 1];
    char sig[HUB_SHA256_HEX_LEN + 1];
    char str[REST_STRING_MAX];
    struct sbuf sb = { str, sizeof(str), 0, false };
    struct sbuf out = { out_query, out_len, 0, false };
    char num[24];
    int rc;

    if (out_len == 0)
        return -E2BIG;
    out_query[0] = '\0';

    /*
     * Assemble the query as it will be sent (still encoded), then sign
     * exactly what hub_auth_check_rest() will rebuild from it.
     */
    snprintf(num, sizeof(num), "%" PRIu64, ts);
    sb_str(&out, "auth_key=");
    sb_str(&out, key);
    sb_str(&out, "&auth_timestamp=");
    sb_str(&out, num);
    sb_str(&out, "&auth_version=1.0");
    if (body_len > 0) {
        hub_auth_md5_hex(body, body_len, md5);
        if (md5[0] == '\0')
            return -EINVAL;
        sb_str(&out, "&body_md5=");
        sb_str(&out, md5);
    }
    if (query_without_auth != NULL && query_without_auth[0] != '\0') {
        sb_put(&out, "&", 1);
        sb_str(&out, query_without_auth);
    }
    if (out.overflow)
        return -E2BIG;

    rc = hub_query_parse(&q, out_query, out.len);
    if (rc < 0)
        return rc;
    lower_keys(&q);
    rc = string_to_sign(&sb, method, path, &q, NULL);
    if (rc < 0)
        return rc;
    hub_auth_hmac_hex(secret, strlen(secret), str, sb.len, sig);
    if (sig[0] == '\0')
        return -EINVAL;
    sb_str(&out, "&auth_signature=");
    sb_str(&out, sig);
    return out.overflow ? -E2BIG : 0;
}
