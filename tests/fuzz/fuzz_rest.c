/*
 * tests/fuzz/fuzz_rest.c - libFuzzer target for the Pusher HTTP API at its
 * hub-level entry point, hub_rest_handle() (hub/rest/rest.c): method, path,
 * query string and body, on a two-loop hub with a fake transport and a
 * fake clock (tests/unit/fake_hub.h), where sessions already sit in a
 * public, a private and a presence channel and one is signed in, so that
 * publishing, channel listings, presence users and terminate_connections
 * all have something to work on.
 *
 * Input format (plain text, so seeds are written by hand):
 *
 *     [!]METHOD\n PATH\n QUERY\n BODY...
 *
 * METHOD "POST" is POST and anything else GET (the two methods
 * server/http/rest.c hands over).
 * Missing lines are empty. A leading '!' on the method line means "sign
 * it": the harness replaces the query with hub_auth_sign_rest()'s output
 * for the same method, path, query and body (for the app the path names,
 * else the first app), so the fuzzer gets past the signature check and
 * into the handlers. Without '!' the request goes in as sent, which
 * exercises the auth checks themselves.
 *
 * What server/http/ does before this point (headers: Content-Length, chunked
 * bodies, the body size cap) is libwebsockets-bound and not covered here;
 * hub_rest_handle() takes no headers.
 *
 * Checks, besides memory errors, leaks and UB: every answer is one of the
 * documented statuses with a JSON object body that has "error" exactly
 * when the status is not 200; queues stay consistent (hub_session_check)
 * after the publishes are delivered; everything unlinks cleanly.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "hub/app/auth.h"
#include "hub/base/query.h"
#include "hub/rest/rest.h"
#include "tests/unit/fake_hub.h"
#include "tests/fuzz/fuzz.h"

#define N_SESSIONS 4
#define NOW_S 1700000000ull

/* One line of the input as an exact-size heap string; advances *pos. */
static char *take_line(const uint8_t *data, size_t size, size_t *pos)
{
    const uint8_t *start = data + *pos, *nl;
    size_t len;
    char *out;

    if (*pos >= size) {
        out = malloc(1);
        CHECK(out != NULL);
        out[0] = '\0';
        return out;
    }
    nl = memchr(start, '\n', size - *pos);
    len = nl ? (size_t)(nl - start) : size - *pos;
    out = malloc(len + 1);
    CHECK(out != NULL);
    memcpy(out, start, len);
    out[len] = '\0';
    *pos += len + (nl ? 1 : 0);
    return out;
}

static bool status_known(int s)
{
    return s == 200 || s == 400 || s == 401 || s == 403 || s == 404 ||
           s == 405 || s == 413 || s == 500;
}

static void check_response(const struct hub_rest_response *r)
{
    json_error_t err;
    json_t *v;

    CHECK(status_known(r->status));
    CHECK(r->body != NULL && strlen(r->body) == r->len);
    v = json_loadb(r->body, r->len, 0, &err);
    CHECK(json_is_object(v));
    if (r->status == 200)
        CHECK(json_object_get(v, "error") == NULL);
    else
        CHECK(json_is_string(json_object_get(v, "error")));
    json_decref(v);
}

/* Sessions in public, private and presence channels; one signed in. */
static void populate(struct fake_hub *fh, struct fake_session *fs)
{
    for (unsigned i = 0; i < N_SESSIONS; i++)
        CHECK(fake_session_open(fh, &fs[i], i % 2, &fh->apps[0]) == 0);
    (void)fake_subscribe(fh, &fs[0].s, "news", NULL);
    (void)fake_subscribe(fh, &fs[1].s, "news", NULL);
    (void)fake_subscribe(fh, &fs[1].s, "private-a", NULL);
    (void)fake_subscribe(fh, &fs[0].s, "presence-room",
                         "{\"user_id\":\"u1\",\"user_info\":{\"n\":1}}");
    (void)fake_subscribe(fh, &fs[3].s, "presence-room",
                         "{\"user_id\":\"u2\"}");
    (void)fake_subscribe(fh, &fs[2].s, "private-encrypted-x", NULL);
    (void)fake_signin(fh, &fs[2].s, "{\"id\":\"u1\"}");
    fake_hub_drain(fh);
    for (unsigned i = 0; i < N_SESSIONS; i++)
        fake_flush(&fs[i].s);
}

static const struct hub_app *signing_app(const struct fake_hub *fh,
                                         const char *path)
{
    const char *id = path, *slash;

    if (strncmp(path, "/apps/", 6) == 0) {
        id = path + 6;
        slash = strchr(id, '/');
        for (unsigned i = 0; slash && i < fh->cfg.n_apps; i++)
            if (strlen(fh->apps[i].id) == (size_t)(slash - id) &&
                memcmp(fh->apps[i].id, id, (size_t)(slash - id)) == 0)
                return &fh->apps[i];
    }
    return &fh->apps[0];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fake_hub fh;
    struct fake_session *fs = calloc(N_SESSIONS, sizeof(*fs));
    struct hub_rest_response r;
    size_t pos = 0, body_len;
    char *method, *path, *query, *body, *m;
    enum hub_http_method hm;
    bool sign;

    CHECK(fs != NULL);
    method = take_line(data, size, &pos);
    path = take_line(data, size, &pos);
    query = take_line(data, size, &pos);
    body_len = size - (pos < size ? pos : size);
    /* Exact size, not NUL-terminated: the handler must honour body_len. */
    body = malloc(body_len ? body_len : 1);
    CHECK(body != NULL);
    memcpy(body, data + (size - body_len), body_len);

    fake_hub_init(&fh, 2);
    /* Small limits so the fuzzer reaches them. */
    fh.apps[0].max_batch_events = 3;
    fh.apps[0].max_channels_per_event = 3;
    fh.apps[0].max_event_bytes = 200;
    fh.apps[0].max_event_name = 40;
    fh.apps[0].max_channel_name = 60;
    fh.apps[0].max_user_id_len = 16;
    fh.apps[1].enabled = false;
    fh.cfg.max_queue = 4096;
    fh.now_ns = NOW_S * 1000000000ull;
    CHECK(fake_hub_start(&fh) == 0);
    populate(&fh, fs);

    sign = method[0] == '!';
    m = method + (sign ? 1 : 0);
    /* The server only ever hands over GET or POST; any other text is GET. */
    hm = strcmp(m, "POST") == 0 ? HUB_HTTP_POST : HUB_HTTP_GET;
    if (sign) {
        char signed_query[HUB_QUERY_MAX_BYTES];

        if (hub_auth_sign_rest(signing_app(&fh, path),
                               hub_http_method_name(hm), path, query, body,
                               body_len, NOW_S, signed_query,
                               sizeof(signed_query)) == 0) {
            free(query);
            query = strdup(signed_query);
            CHECK(query != NULL);
        }
    }
    /* Alternate the loop that receives the request. */
    hub_rest_handle(fh.loops[size % 2], hm, path, query, body, body_len, NOW_S,
                    &r);
    /* FUZZ_REST_VERBOSE=1 shows each answer (for writing seeds). */
    if (getenv("FUZZ_REST_VERBOSE"))
        fprintf(stderr, "fuzz_rest: %s %s -> %d %s\n", m, path, r.status,
                r.body);
    check_response(&r);
    free(r.body);

    fake_hub_drain(&fh);
    for (unsigned i = 0; i < N_SESSIONS; i++) {
        CHECK(hub_session_check(&fs[i].s) == 0);
        fake_flush(&fs[i].s);
    }
    for (unsigned i = 0; i < N_SESSIONS; i++)
        hub_session_fini(&fs[i].s, HUB_CLOSE_PEER);
    fake_hub_drain(&fh);
    for (unsigned i = 0; i < fh.n_loops; i++)
        CHECK(hub_chanmap_count(fh.loops[i]->chans) == 0);
    fake_hub_stop(&fh);
    free(fs);
    free(method);
    free(path);
    free(query);
    free(body);
    return 0;
}
