/*
 * tests/fuzz/fuzz_message.c - libFuzzer target for the inbound message path:
 * hub_msg_parse(), channel classification and name checks, the channel and
 * sign-in auth checks, and every encoder fed with the parsed fields.
 *
 * Besides memory errors it checks two properties and traps when they fail:
 * each encoder's output parses back to the fields that went in, and a
 * truncated encoding is a terminated prefix of the full one that never
 * writes past cap. No network, no clock; one thread.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "hub/auth.h"
#include "hub/protocol.h"
#include "hub/query.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                           \
    do {                                                                      \
        if (!(cond))                                                          \
            __builtin_trap();                                                 \
    } while (0)

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

    if (hub_msg_parse(&m, (const char *)data, size, why, sizeof(why)) != 0) {
        CHECK(m.root == NULL);
        return 0;
    }
    CHECK(m.event != NULL && m.root != NULL);
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
