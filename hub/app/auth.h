/*
 * hub/app/auth.h - Pusher signatures: channel auth (private, presence), user
 * sign-in, REST request signing (docs/PROTOCOL.md 6.1) and webhook bodies.
 * HMAC-SHA256 and MD5 through OpenSSL; every comparison is constant-time.
 *
 * Any thread (hub_auth_hmac_hex()'s contexts are per thread).
 */
#ifndef HUB_AUTH_H
#define HUB_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hub/app/app.h"

#define HUB_SHA256_HEX_LEN 64
#define HUB_MD5_HEX_LEN 32

/*
 * out gets lowercase hex HMAC-SHA256(key, msg) and a NUL (65 bytes). Each
 * thread keeps a few contexts keyed by the keys it used last (found by
 * the key's bytes, so a changed secret takes effect at once); when that
 * fails it falls back to OpenSSL's one-shot. Empty out on failure.
 */
void hub_auth_hmac_hex(const char *key, size_t key_len, const void *msg,
                       size_t msg_len, char out[HUB_SHA256_HEX_LEN + 1]);
/* Free the calling thread's keyed contexts now (a thread's are freed at
 * its exit anyway; tests and the main thread call this). */
void hub_auth_thread_release(void);
/* out gets lowercase hex MD5(data) and a NUL (33 bytes). */
void hub_auth_md5_hex(const void *data, size_t len,
                      char out[HUB_MD5_HEX_LEN + 1]);
/* Constant-time equality of two byte strings (false if lengths differ). */
bool hub_auth_equal(const void *a, size_t a_len, const void *b, size_t b_len);

/*
 * Check a subscribe's auth "<app_key>:<hex>" against
 * HMAC(secret, "<socket_id>:<channel>") or, when channel_data is not NULL,
 * "<socket_id>:<channel>:<channel_data>" (the exact bytes received).
 * app_key may be any of the app's key/secret pairs' (key rotation,
 * hub/app/app.h), not only the connection's: secret is that pair's.
 * Returns 0, -EINVAL (missing or malformed auth, wrong key), -EACCES
 * (signature mismatch) or -ENOMEM (a string to sign over 2 KB is built on
 * the heap and that allocation failed). If expect is not NULL it receives
 * the string that should have been signed (for the operator log; never sent
 * to the client), truncated to expect_len.
 */
int hub_auth_check_channel(const struct hub_app *app, const char *socket_id,
                           const char *channel, const char *channel_data,
                           size_t channel_data_len, const char *auth,
                           char *expect, size_t expect_len);

/* The same for pusher:signin: "<socket_id>::user::<user_data>", with the
 * same return values. */
int hub_auth_check_user(const struct hub_app *app, const char *socket_id,
                        const char *user_data, size_t user_data_len,
                        const char *auth);

/* The HTTP methods the REST API answers. */
enum hub_http_method { HUB_HTTP_GET, HUB_HTTP_POST };

/* "GET" or "POST": the method as it goes into the string to sign. */
const char *hub_http_method_name(enum hub_http_method m);

struct hub_query;

/* A REST request as it arrived, its query parsed once by the caller. */
struct hub_rest_request {
    enum hub_http_method method;
    const char *path;        /* "/apps/3/events" */
    /* hub_query_parse() of the query string, keys as sent (the check
     * lower-cases them in a copy of its own); NULL = no parameters. */
    const struct hub_query *query;
    const void *body;
    size_t body_len;
    uint64_t now_s;          /* wall clock, Unix seconds */
    uint64_t window_s;       /* allowed |now - auth_timestamp|; 0 = any */
};

/*
 * Verify a REST request per docs/PROTOCOL.md 6.1: auth_key is one of the
 * app's key/secret pairs' (key rotation) and that pair's secret signs,
 * auth_version 1.0, auth_timestamp within the window, body_md5 recomputed
 * from the body, params lower-cased and sorted, values URL-decoded,
 * auth_signature compared in constant time. Returns 0, -EINVAL (malformed:
 * HTTP 400) or -EACCES (HTTP 401). why gets a one-line reason.
 *
 * 401: auth_key, auth_timestamp or auth_signature missing; unknown
 * auth_key; stale timestamp; body without body_md5; bad signature.
 * 400: a key given twice (after lower-casing), auth_version missing or not
 * "1.0", auth_timestamp not a number. (A query that does not parse - bad
 * percent-encoding, over HUB_QUERY_MAX_BYTES or HUB_QUERY_MAX_PARAMS - is
 * the caller's 400 before this check: hub/rest/router.c.)
 */
int hub_auth_check_rest(const struct hub_app *app,
                        const struct hub_rest_request *req, char *why,
                        size_t why_len);

/*
 * Sign a REST request for tests and tools. out_query gets auth_key,
 * auth_timestamp, auth_version, body_md5 (when body_len > 0), then
 * query_without_auth (still URL-encoded, may be NULL) and auth_signature
 * last. Returns 0, -E2BIG (out_len too small) or -EINVAL (bad encoding, or
 * query_without_auth already holds one of those keys).
 */
int hub_auth_sign_rest(const struct hub_app *app, const char *method,
                       const char *path, const char *query_without_auth,
                       const void *body, size_t body_len, uint64_t ts,
                       char *out_query, size_t out_len);
/* The same with a given pair (hub_auth_sign_rest() signs with the app's
 * first pair, key and secret). */
int hub_auth_sign_rest_pair(const char *key, const char *secret,
                            const char *method, const char *path,
                            const char *query_without_auth, const void *body,
                            size_t body_len, uint64_t ts, char *out_query,
                            size_t out_len);

#endif
