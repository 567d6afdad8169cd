/*
 * tests/fuzz/fuzz_message.c - libFuzzer target for the inbound message path:
 * hub_msg_parse(), channel classification and name checks, the channel and
 * sign-in auth checks, and every encoder fed with the parsed fields.
 *
 * Besides memory errors it checks three properties and traps when they
 * fail: each encoder's output parses back to the fields that went in, a
 * truncated encoding is a terminated prefix of the full one that never
 * writes past cap, and whatever the client-event fast path
 * (hub/wire/client_event.h) accepts, jansson parses to the same fields and re-encodes to the very
 * data bytes the fast path relays.
 *
 * Then the same bytes drive the session protocol: split at newlines into
 * up to 16 messages, they go through hub_pusher_on_message() on three
 * sessions of a two-loop hub with a fake transport and a fake clock
 * (tests/unit/fake_hub.h), so the subscribe, presence, unsubscribe and
 * client-event, signin and lubdub:resume handlers run on fuzzed input
 * (every channel keeps a history of 4 events). A signin or a
 * subscribe to a private or presence channel is delivered once as sent and
 * once re-signed with the right HMAC, so the fuzzer gets past
 * authentication. After each message
 * the loops drain their inboxes and the queues are corked out; at the end
 * every queue must pass hub_session_check() and every session unlinks
 * cleanly. No network; one thread.
 *
 * When the input's length is odd, the messages come as the read bypass
 * reads them (hub_defer_begin): four lines of one session to a read, the
 * read's client events held on its loop and delivered at its end, nothing
 * drained or corked out in between; no client event may be left held.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "hub/app/auth.h"
#include "hub/wire/client_event.h"
#include "hub/wire/protocol.h"
#include "hub/base/query.h"
#include "hub/wire/ws.h"
#include "tests/unit/fake_hub.h"
#include "tests/fuzz/fuzz.h"

typedef size_t encode_fn(char *out, size_t cap, const struct hub_msg *m,
                         const char *data_json, size_t data_len);

static size_t enc_event(char *out, size_t cap, const struct hub_msg *m,
                        const char *data_json, size_t data_len)
{
    return hub_proto_encode_event(out, cap, m->event, m->channel, data_json,
                                  data_len, m->auth);
}

static size_t enc_established(char *out, size_t cap, const struct hub_msg *m,
                              const char *data_json, size_t data_len)
{
    return hub_proto_encode_established(out, cap, m->event, 30);
}

static size_t enc_error(char *out, size_t cap, const struct hub_msg *m,
                        const char *data_json, size_t data_len)
{
    return hub_proto_encode_error(out, cap, (int)(m->channel_len % 5000) - 1,
                                  m->event);
}

static size_t enc_sub_error(char *out, size_t cap, const struct hub_msg *m,
                            const char *data_json, size_t data_len)
{
    return hub_proto_encode_subscription_error(
        out, cap, m->channel ? m->channel : "", m->event,
        m->auth ? m->auth : "", 4009);
}

/*
 * Encode into an exactly sized heap buffer (so ASan sees any overrun),
 * check a truncated run against it, and return the full text (owned).
 */
static char *encode(encode_fn *fn, const struct hub_msg *m,
                    const char *data_json, size_t data_len, size_t *len)
{
    size_t need = fn(NULL, 0, m, data_json, data_len);
    size_t cut = need / 2 + 1;
    char *full = malloc(need + 1);
    char *part = malloc(cut);

    CHECK(full != NULL && part != NULL);
    CHECK(fn(full, need + 1, m, data_json, data_len) == need);
    CHECK(strlen(full) == need);
    CHECK(fn(part, cut, m, data_json, data_len) == need);
    CHECK(memcmp(part, full, cut - 1) == 0 && part[cut - 1] == '\0');
    free(part);
    *len = need;
    return full;
}

static const char *member(json_t *obj, const char *key)
{
    return json_string_value(json_object_get(obj, key));
}

static void check_encoders(const struct hub_msg *m)
{
    char *text, *data_json = NULL;
    size_t len, data_len = 0;
    json_error_t err;
    json_t *v, *inner;

    if (m->data != NULL) {
        data_json = json_dumps(m->data, JSON_COMPACT | JSON_ENCODE_ANY);
        CHECK(data_json != NULL);
        data_len = strlen(data_json);
    } else if (m->data_raw != NULL) {
        data_json = strndup(m->data_raw, m->data_raw_len);
        CHECK(data_json != NULL);
        data_len = m->data_raw_len;
    }

    /* Relayed payloads may hold "\u0000", as the parser allows. */
    text = encode(enc_event, m, data_json, data_len, &len);
    v = json_loadb(text, len, JSON_ALLOW_NUL, &err);
    CHECK(v != NULL);
    CHECK(strcmp(member(v, "event"), m->event) == 0);
    if (m->channel != NULL)
        CHECK(strcmp(member(v, "channel"), m->channel) == 0);
    if (m->auth != NULL)
        CHECK(strcmp(member(v, "user_id"), m->auth) == 0);
    if (m->data != NULL)
        CHECK(json_equal(json_object_get(v, "data"), m->data));
    if (m->data_raw != NULL) {
        /* The spliced data value reads back as what was sent. */
        json_t *sent = json_loadb(m->data_raw, m->data_raw_len,
                                  JSON_DECODE_ANY | JSON_ALLOW_NUL, &err);

        CHECK(sent != NULL);
        CHECK(json_equal(json_object_get(v, "data"), sent));
        json_decref(sent);
    }
    json_decref(v);
    free(text);

    /* The double-encoded frame must decode twice to the socket id. */
    text = encode(enc_established, m, NULL, 0, &len);
    v = json_loadb(text, len, 0, &err);
    CHECK(v != NULL);
    inner = json_loads(member(v, "data"), 0, &err);
    CHECK(inner != NULL);
    CHECK(strcmp(member(inner, "socket_id"), m->event) == 0);
    json_decref(inner);
    json_decref(v);
    free(text);

    text = encode(enc_error, m, NULL, 0, &len);
    v = json_loadb(text, len, 0, &err);
    CHECK(v != NULL);
    CHECK(strcmp(member(json_object_get(v, "data"), "message"), m->event) ==
          0);
    json_decref(v);
    free(text);

    text = encode(enc_sub_error, m, NULL, 0, &len);
    v = json_loadb(text, len, 0, &err);
    CHECK(v != NULL);
    json_decref(v);
    free(text);
    free(data_json);
}

/*
 * The client-event fast path against jansson: whatever the scanner
 * accepts, jansson parses to an object of exactly event, channel and data,
 * the names match, and jansson's compact dump of data is the relayed text
 * byte for byte. A scanner that declines costs nothing but speed.
 */
static void check_fast_path(const uint8_t *data, size_t size)
{
    struct hub_client_event ev;
    json_error_t err;
    json_t *root, *d;
    char *dump;

    if (!hub_client_event_scan(&ev, (const char *)data, size))
        return;
    root = json_loadb((const char *)data, size, JSON_ALLOW_NUL, &err);
    CHECK(root != NULL && json_is_object(root));
    CHECK(json_object_size(root) == 3);
    CHECK(json_string_length(json_object_get(root, "event")) ==
              ev.event_len &&
          memcmp(json_string_value(json_object_get(root, "event")), ev.event,
                 ev.event_len) == 0);
    CHECK(json_string_length(json_object_get(root, "channel")) ==
              ev.channel_len &&
          memcmp(json_string_value(json_object_get(root, "channel")),
                 ev.channel, ev.channel_len) == 0);
    CHECK(ev.event_len >= 7 && memcmp(ev.event, "client-", 7) == 0);
    d = json_object_get(root, "data");
    CHECK(d != NULL);
    dump = json_dumps(d, JSON_COMPACT | JSON_ENCODE_ANY);
    CHECK(dump != NULL && strlen(dump) == ev.data_len &&
          memcmp(dump, ev.data, ev.data_len) == 0);
    free(dump);
    json_decref(root);
}

static void check_channel(const struct hub_msg *m)
{
    enum hub_channel_kind kind;
    size_t i;
    int rc;

    kind = hub_channel_classify(m->channel, m->channel_len);
    rc = hub_channel_name_check(m->channel, m->channel_len, 200);
    /* A name that passes has only the documented characters. */
    if (rc == 0) {
        CHECK(m->channel_len >= 1 && m->channel_len <= 200);
        for (i = m->channel[0] == '#' ? 1 : 0; i < m->channel_len; i++)
            CHECK(strchr("-_=@,.;", m->channel[i]) != NULL ||
                  (m->channel[i] >= '0' && m->channel[i] <= '9') ||
                  (m->channel[i] >= 'a' && m->channel[i] <= 'z') ||
                  (m->channel[i] >= 'A' && m->channel[i] <= 'Z'));
        if (m->channel[0] == '#')
            CHECK(kind == HUB_CHANNEL_USER);
    }
}

#define N_SESSIONS 3
#define MAX_LINES 16

/* Deliver m (already parsed from line) re-signed for s, when it is a
 * subscribe to a private or presence channel, or a signin. */
static void deliver_signed(struct fake_hub *fh, struct hub_session *s,
                           const struct hub_msg *m)
{
    enum hub_channel_kind kind;
    char *channel, *cd = NULL;

    if (m->type == HUB_MSG_SIGNIN && s->state == HUB_SESSION_OPEN) {
        (void)fake_signin(fh, s, m->user_data);
        return;
    }
    if (m->type != HUB_MSG_SUBSCRIBE || s->state != HUB_SESSION_OPEN)
        return;
    kind = hub_channel_classify(m->channel, m->channel_len);
    if (kind != HUB_CHANNEL_PRIVATE && kind != HUB_CHANNEL_ENCRYPTED &&
        kind != HUB_CHANNEL_PRESENCE)
        return;
    /* Copies: fake_subscribe() encodes a new message from them. */
    channel = strndup(m->channel, m->channel_len);
    if (m->channel_data)
        cd = strndup(m->channel_data, m->channel_data_len);
    CHECK(channel != NULL && (m->channel_data == NULL || cd != NULL));
    (void)fake_subscribe(fh, s, channel, cd);
    free(channel);
    free(cd);
}

static void drive_sessions(const uint8_t *data, size_t size)
{
    struct fake_hub fh;
    struct fake_session *fs = calloc(N_SESSIONS, sizeof(*fs));
    size_t pos = 0;
    unsigned line = 0;
    bool reads = size % 2 == 1;

    CHECK(fs != NULL);
    fake_hub_init(&fh, 2);
    /* Small limits so the fuzzer reaches them. */
    fh.apps[0].max_presence_members = 2;
    fh.apps[0].max_user_info_bytes = 64;
    fh.apps[0].max_user_id_len = 16;
    fh.apps[0].max_channel_name = 40;
    fh.apps[0].max_event_bytes = 256;
    fh.apps[0].client_event_rate = 3;
    /* Recovery: every channel keeps a short history, so lubdub:resume,
     * the markers, positions and replays run on fuzzed input too. */
    fh.apps[0].history = true;
    fh.apps[0].history_ttl_ms = 60000;
    fh.apps[0].history_size = 4;
    fh.cfg.max_queue = 4096;
    CHECK(fake_hub_start(&fh) == 0);
    for (unsigned i = 0; i < N_SESSIONS; i++)
        CHECK(fake_session_open(&fh, &fs[i], i == 2 ? 1 : 0, &fh.apps[0]) ==
              0);
    while (pos < size && line < MAX_LINES) {
        const uint8_t *nl = memchr(data + pos, '\n', size - pos);
        size_t len = nl ? (size_t)(nl - (data + pos)) : size - pos;
        struct hub_session *s =
            &fs[(reads ? line / 4 : line) % N_SESSIONS].s;
        struct hub_msg m;

        if (reads && line % 4 == 0)
            hub_defer_begin(s->loop);
        (void)hub_pusher_on_message(s, (const char *)data + pos, len,
                                    fake_now_ms(&fh));
        if (hub_msg_parse(&m, (const char *)data + pos, len, NULL, 0) ==
            0) {
            deliver_signed(&fh, s, &m);
            hub_msg_fini(&m);
        }
        pos += len + 1;
        if (reads && line % 4 != 3 && pos < size && line + 1 < MAX_LINES) {
            /* The read goes on: no other event of the loop runs. */
            fh.now_ns += (uint64_t)(len % 512) * 1000000ull;
            line++;
            continue;
        }
        if (reads) {
            hub_defer_end(s->loop);
            CHECK(s->loop->defer.k == 0 && !s->loop->defer.open);
        }
        fake_hub_drain(&fh);
        for (unsigned i = 0; i < N_SESSIONS; i++) {
            CHECK(hub_session_check(&fs[i].s) == 0);
            if (line % 4 != 3)
                fake_flush(&fs[i].s);
        }
        /* Time moves with the input, for the client-event bucket. */
        fh.now_ns += (uint64_t)(len % 512) * 1000000ull;
        line++;
    }
    /* Terminate the first signed-in user, from the other loop. */
    for (unsigned i = 0; i < N_SESSIONS; i++) {
        if (fs[i].s.user_id) {
            CHECK(hub_terminate_user(fh.hub, fh.loops[1], 0,
                                     fs[i].s.user_id) == 0);
            fake_hub_drain(&fh);
            CHECK(fs[i].s.state != HUB_SESSION_OPEN);
            break;
        }
    }
    for (unsigned i = 0; i < N_SESSIONS; i++) {
        CHECK(hub_session_check(&fs[i].s) == 0);
        hub_session_fini(&fs[i].s, HUB_CLOSE_PEER);
    }
    /* Every membership is gone from both indexes. */
    for (unsigned i = 0; i < fh.n_loops; i++)
        CHECK(hub_chanmap_count(fh.loops[i]->chans) == 0);
    {
        json_t *left = hub_dir_list(fh.hub, 0, NULL, false);

        CHECK(left != NULL && json_object_size(left) == 0);
        json_decref(left);
    }
    fake_hub_stop(&fh);
    free(fs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct hub_app app = {
        .id = "1", .key = "278d425bdf160c739803",
        .secret = "7ad3773142a6692b25b8",
    };
    struct hub_query q;
    struct hub_msg m;
    char why[128], expect[256];

    /* The raw bytes as a query string: parse must never overrun. */
    (void)hub_query_parse(&q, (const char *)data, size);

    /* The raw bytes as a text message: the UTF-8 verdict must not depend
     * on where the fragments split it. */
    {
        bool whole = hub_utf8_valid(data, size);
        size_t cut = size ? data[0] % (size + 1) : 0;
        uint8_t st = hub_utf8_feed(HUB_UTF8_ACCEPT, data, cut);

        st = hub_utf8_feed(st, data + cut, size - cut);
        CHECK(whole == (st == HUB_UTF8_ACCEPT));
    }

    drive_sessions(data, size);

    check_fast_path(data, size);

    if (hub_msg_parse(&m, (const char *)data, size, why, sizeof(why)) != 0) {
        CHECK(m.root == NULL && m.data_raw == NULL);
        return 0;
    }
    /* A tree, or a fast-path client event (hub/wire/client_event.h). */
    CHECK(m.event != NULL && (m.root != NULL) != (m.data_raw != NULL));
    CHECK(m.root != NULL || m.type == HUB_MSG_CLIENT_EVENT);
    if (m.channel != NULL) {
        CHECK(strlen(m.channel) == m.channel_len);
        check_channel(&m);
        if (m.type == HUB_MSG_SUBSCRIBE)
            (void)hub_auth_check_channel(&app, "1234.1234", m.channel,
                                         m.channel_data, m.channel_data_len,
                                         m.auth, expect, sizeof(expect));
    }
    if (m.type == HUB_MSG_SIGNIN)
        (void)hub_auth_check_user(&app, "1234.1234", m.user_data,
                                  m.user_data_len, m.auth);
    check_encoders(&m);
    hub_msg_fini(&m);
    return 0;
}
