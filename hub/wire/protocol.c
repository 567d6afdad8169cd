/*
 * hub/wire/protocol.c - parse inbound Pusher v7 messages, check channel names,
 * and encode outbound messages.
 *
 * Parsing is lenient where real clients differ (pusher-js sends subscribe
 * data as an object, some clients as a string holding the object) and
 * strict where the hub relies on a field: every string it hands out is
 * free of NUL bytes, so C string functions see the whole value.
 *
 * The encoders do not use jansson: they run for every outbound frame, and
 * a hand-written writer needs no allocation (hub_proto_event_frame() only
 * allocates the frame it returns). Pure: any thread.
 */
#include "hub/base/json_escape.h"
#include "hub/base/why.h"
#include "hub/wire/protocol.h"

#include "hub/wire/client_event.h"
#include "hub/wire/frame.h"

#include <errno.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define USER_PREFIX "#server-to-user-"

/*
 * Deepest nesting of arrays and objects accepted in a message, or in a
 * data string parsed as JSON. jansson before 2.14 recurses without any
 * limit, so a peer could otherwise exhaust the stack with "[[[[...".
 */
#define MAX_DEPTH 256


/*
 * Borrow the string member name of obj. Returns 1 when present, 0 when
 * absent or null, -EINVAL when it has another type or holds a NUL byte.
 */
static int get_string(json_t *obj, const char *name, const char **s,
                      size_t *len)
{
    json_t *v = json_object_get(obj, name);

    *s = NULL;
    if (len != NULL)
        *len = 0;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return -EINVAL;
    if (strlen(json_string_value(v)) != json_string_length(v))
        return -EINVAL;
    *s = json_string_value(v);
    if (len != NULL)
        *len = json_string_length(v);
    return 1;
}

/*
 * True when text nests deeper than MAX_DEPTH. For valid JSON the count is
 * exact; for invalid JSON it errs on the side of more depth, and jansson
 * rejects the text anyway.
 */
static bool too_deep(const char *text, size_t len)
{
    bool in_string = false, escaped = false;
    size_t i, depth = 0;

    for (i = 0; i < len; i++) {
        char c = text[i];

        if (in_string) {
            if (escaped)
                escaped = false;
            else if (c == '\\')
                escaped = true;
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > MAX_DEPTH)
                return true;
        } else if ((c == ']' || c == '}') && depth > 0) {
            depth--;
        }
    }
    return false;
}

/*
 * For subscribe, unsubscribe and signin, data must be an object. Accept a
 * string holding one too, and swap the parsed object into the root so the
 * borrowed pointers stay valid for the life of the message.
 */
static json_t *data_object(json_t *root, char *why, size_t why_len)
{
    json_t *data = json_object_get(root, "data");
    json_t *inner;
    json_error_t err;

    if (json_is_object(data))
        return data;
    if (!json_is_string(data)) {
        hub__set_why(why, why_len, "data is not an object");
        return NULL;
    }
    if (too_deep(json_string_value(data), json_string_length(data))) {
        hub__set_why(why, why_len, "data string nested too deeply");
        return NULL;
    }
    inner = json_loadb(json_string_value(data), json_string_length(data), 0,
                       &err);
    if (!json_is_object(inner)) {
        json_decref(inner);
        hub__set_why(why, why_len, "data string is not a JSON object");
        return NULL;
    }
    /* Stolen by root; the old string member is released here. */
    if (json_object_set_new(root, "data", inner) < 0) {
        hub__set_why(why, why_len, "out of memory");
        return NULL;
    }
    return inner;
}

static int parse_subscribe(struct hub_msg *m, char *why, size_t why_len)
{
    json_t *data = data_object(m->root, why, why_len);
    int rc;

    if (data == NULL)
        return -EINVAL;
    m->data = data;
    if (get_string(data, "channel", &m->channel, &m->channel_len) != 1) {
        hub__set_why(why, why_len, "data.channel must be a string");
        return -EINVAL;
    }
    if (m->type == HUB_MSG_UNSUBSCRIBE)
        return 0;
    if (get_string(data, "auth", &m->auth, NULL) < 0) {
        hub__set_why(why, why_len, "data.auth must be a string");
        return -EINVAL;
    }
    rc = get_string(data, "channel_data", &m->channel_data,
                    &m->channel_data_len);
    if (rc < 0) {
        hub__set_why(why, why_len, "data.channel_data must be a string");
        return -EINVAL;
    }
    return 0;
}

static int parse_signin(struct hub_msg *m, char *why, size_t why_len)
{
    json_t *data = data_object(m->root, why, why_len);

    if (data == NULL)
        return -EINVAL;
    m->data = data;
    if (get_string(data, "user_data", &m->user_data, &m->user_data_len) !=
        1) {
        hub__set_why(why, why_len, "data.user_data must be a string");
        return -EINVAL;
    }
    if (get_string(data, "auth", &m->auth, NULL) != 1) {
        hub__set_why(why, why_len, "data.auth must be a string");
        return -EINVAL;
    }
    return 0;
}

static enum hub_msg_type classify_event(const char *event)
{
    if (strcmp(event, "pusher:ping") == 0)
        return HUB_MSG_PING;
    if (strcmp(event, "pusher:pong") == 0)
        return HUB_MSG_PONG;
    if (strcmp(event, "pusher:subscribe") == 0)
        return HUB_MSG_SUBSCRIBE;
    if (strcmp(event, "pusher:unsubscribe") == 0)
        return HUB_MSG_UNSUBSCRIBE;
    if (strcmp(event, "pusher:signin") == 0)
        return HUB_MSG_SIGNIN;
    if (strncmp(event, "client-", 7) == 0)
        return HUB_MSG_CLIENT_EVENT;
    return HUB_MSG_OTHER;
}

static int parse_root(struct hub_msg *m, const char *text, size_t len,
                      char *why, size_t why_len)
{
    json_error_t err;
    int rc;

    if (len == 0) {
        hub__set_why(why, why_len, "empty message");
        return -EINVAL;
    }
    if (too_deep(text, len)) {
        hub__set_why(why, why_len, "nested too deeply");
        return -EINVAL;
    }
    /*
     * JSON_ALLOW_NUL keeps "\u0000" inside relayed payloads legal; the
     * fields the hub reads are checked for NUL by get_string() instead.
     */
    m->root = json_loadb(text, len, JSON_ALLOW_NUL, &err);
    if (m->root == NULL) {
        hub__set_why(why, why_len, "invalid JSON: %.80s", err.text);
        return -EINVAL;
    }
    if (!json_is_object(m->root)) {
        hub__set_why(why, why_len, "message is not an object");
        return -EINVAL;
    }
    if (get_string(m->root, "event", &m->event, NULL) != 1 ||
        m->event[0] == '\0') {
        hub__set_why(why, why_len, "event must be a non-empty string");
        return -EINVAL;
    }
    m->type = classify_event(m->event);

    switch (m->type) {
    case HUB_MSG_SUBSCRIBE:
    case HUB_MSG_UNSUBSCRIBE:
        return parse_subscribe(m, why, why_len);
    case HUB_MSG_SIGNIN:
        return parse_signin(m, why, why_len);
    default:
        break;
    }

    m->data = json_object_get(m->root, "data");
    rc = get_string(m->root, "channel", &m->channel, &m->channel_len);
    if (rc < 0 || (m->type == HUB_MSG_CLIENT_EVENT && rc == 0)) {
        hub__set_why(why, why_len, "channel must be a string");
        return -EINVAL;
    }
    return 0;
}

/*
 * The fast path for the commonest message a client sends: a client event
 * whose data can be relayed as it came (hub/wire/client_event.h). False
 * when the message is anything else; then jansson parses it.
 */
static bool parse_fast(struct hub_msg *m, const char *text, size_t len)
{
    struct hub_client_event ev;

    if (len == 0 || !hub_client_event_scan(&ev, text, len) ||
        ev.event_len + ev.channel_len + 2 > sizeof(m->names))
        return false;
    memcpy(m->names, ev.event, ev.event_len);
    m->names[ev.event_len] = '\0';
    memcpy(m->names + ev.event_len + 1, ev.channel, ev.channel_len);
    m->names[ev.event_len + 1 + ev.channel_len] = '\0';
    m->type = HUB_MSG_CLIENT_EVENT;
    m->event = m->names;
    m->channel = m->names + ev.event_len + 1;
    m->channel_len = ev.channel_len;
    m->data_raw = ev.data;
    m->data_raw_len = ev.data_len;
    return true;
}

int hub_msg_parse(struct hub_msg *m, const char *text, size_t len, char *why,
                  size_t why_len)
{
    int rc;

    /* Not the whole struct: names is only read up to its NULs. */
    memset(m, 0, offsetof(struct hub_msg, names));
    m->names[0] = '\0';
    hub__set_why(why, why_len, "ok");
    if (parse_fast(m, text, len))
        return 0;
    rc = parse_root(m, text, len, why, why_len);
    if (rc < 0)
        hub_msg_fini(m);
    return rc;
}

void hub_msg_fini(struct hub_msg *m)
{
    json_decref(m->root);
    memset(m, 0, offsetof(struct hub_msg, names));
}

static bool has_prefix(const char *name, size_t len, const char *prefix)
{
    size_t n = strlen(prefix);

    return len >= n && memcmp(name, prefix, n) == 0;
}

enum hub_channel_kind hub_channel_classify(const char *name, size_t len)
{
    /* private-encrypted- must win over its own prefix private-. */
    if (has_prefix(name, len, "private-encrypted-"))
        return HUB_CHANNEL_ENCRYPTED;
    if (has_prefix(name, len, "private-"))
        return HUB_CHANNEL_PRIVATE;
    if (has_prefix(name, len, "presence-"))
        return HUB_CHANNEL_PRESENCE;
    if (has_prefix(name, len, USER_PREFIX))
        return HUB_CHANNEL_USER;
    return HUB_CHANNEL_PUBLIC;
}

static bool name_char_ok(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        (c >= '0' && c <= '9'))
        return true;
    return c != '\0' && strchr("-_=@,.;", c) != NULL;
}

int hub_channel_name_check(const char *name, size_t len, size_t max)
{
    size_t i = 0;

    if (name == NULL || len == 0 || len > max)
        return -EINVAL;
    if (name[0] == '#') {
        /* Reserved: only "#server-to-user-<id>" with a non-empty id. */
        if (!has_prefix(name, len, USER_PREFIX) ||
            len == sizeof(USER_PREFIX) - 1)
            return -EINVAL;
        i = 1;
    }
    for (; i < len; i++)
        if (!name_char_ok((unsigned char)name[i]))
            return -EINVAL;
    return 0;
}

/*
 * The encoders' writer. It counts every byte it would write and stores
 * those that fit in cap - 1, so the result is always NUL-terminated. With
 * inner set, each byte is escaped as the content of a JSON string: that is
 * how a JSON document is nested as a string value (the double encoding of
 * docs/PROTOCOL.md section 1) without a second buffer.
 */
struct writer {
    char *out;
    size_t cap;
    size_t len;
    bool inner;
};

static void w_raw(struct writer *w, char c)
{
    if (w->len + 1 < w->cap)
        w->out[w->len] = c;
    w->len++;
}

static void w_raw_str(struct writer *w, const char *s)
{
    for (; *s; s++)
        w_raw(w, *s);
}

/* c as it goes inside a JSON string (hub/base/json_escape.h, inline: this
 * is the publish path), handed to put. */
static void w_escape_to(struct writer *w, unsigned char c,
                        void (*put)(struct writer *, const char *))
{
    char esc[HUB_JSON_ESC_MAX + 1];

    esc[hub_json_escape_byte(c, 0, esc)] = '\0';
    put(w, esc);
}

/* One byte of JSON text, escaped when inside a nested document. */
static void w_byte(struct writer *w, char c)
{
    if (w->inner)
        w_escape_to(w, (unsigned char)c, w_raw_str);
    else
        w_raw(w, c);
}

static void w_text(struct writer *w, const char *s)
{
    for (; *s; s++)
        w_byte(w, *s);
}

static void w_bytes(struct writer *w, const char *s, size_t n)
{
    size_t i;

    if (!w->inner) {
        /* Verbatim (a relayed data value): copy what fits in cap - 1. */
        if (w->len + 1 < w->cap) {
            size_t room = w->cap - 1 - w->len;

            memcpy(w->out + w->len, s, n < room ? n : room);
        }
        w->len += n;
        return;
    }
    for (i = 0; i < n; i++)
        w_byte(w, s[i]);
}

/* A JSON string literal; escapes are themselves re-escaped when inner. */
static void w_string(struct writer *w, const char *s, size_t n)
{
    size_t i;

    w_byte(w, '"');
    for (i = 0; s != NULL && i < n; i++)
        w_escape_to(w, (unsigned char)s[i], w_text);
    w_byte(w, '"');
}

static void w_cstring(struct writer *w, const char *s)
{
    w_string(w, s, s ? strlen(s) : 0);
}

static void w_int(struct writer *w, long long v)
{
    char num[24];

    snprintf(num, sizeof(num), "%lld", v);
    w_text(w, num);
}

static size_t w_finish(struct writer *w)
{
    if (w->cap > 0)
        w->out[w->len < w->cap ? w->len : w->cap - 1] = '\0';
    return w->len;
}

size_t hub_proto_encode_string(char *out, size_t cap, const char *s,
                               size_t len)
{
    struct writer w = { out, cap, 0, false };

    w_string(&w, s, len);
    return w_finish(&w);
}

size_t hub_proto_encode_established(char *out, size_t cap,
                                    const char *socket_id,
                                    unsigned activity_timeout_s)
{
    struct writer w = { out, cap, 0, false };

    w_text(&w, "{\"event\":\"pusher:connection_established\",\"data\":\"");
    w.inner = true;
    w_text(&w, "{\"socket_id\":");
    w_cstring(&w, socket_id);
    w_text(&w, ",\"activity_timeout\":");
    w_int(&w, activity_timeout_s);
    w_text(&w, "}");
    w.inner = false;
    w_text(&w, "\"}");
    return w_finish(&w);
}

size_t hub_proto_encode_error(char *out, size_t cap, int code,
                              const char *message)
{
    struct writer w = { out, cap, 0, false };

    w_text(&w, "{\"event\":\"pusher:error\",\"data\":{\"code\":");
    if (code < 0)
        w_text(&w, "null");
    else
        w_int(&w, code);
    w_text(&w, ",\"message\":");
    w_cstring(&w, message);
    w_text(&w, "}}");
    return w_finish(&w);
}

size_t hub_proto_encode_pong(char *out, size_t cap)
{
    struct writer w = { out, cap, 0, false };

    w_text(&w, "{\"event\":\"pusher:pong\",\"data\":\"{}\"}");
    return w_finish(&w);
}

size_t hub_proto_encode_subscription_error(char *out, size_t cap,
                                           const char *channel,
                                           const char *type,
                                           const char *error, int status)
{
    struct writer w = { out, cap, 0, false };

    w_text(&w, "{\"event\":\"pusher:subscription_error\",\"channel\":");
    w_cstring(&w, channel);
    w_text(&w, ",\"data\":{\"type\":");
    w_cstring(&w, type);
    w_text(&w, ",\"error\":");
    w_cstring(&w, error);
    w_text(&w, ",\"status\":");
    w_int(&w, status);
    w_text(&w, "}}");
    return w_finish(&w);
}

size_t hub_proto_encode_event(char *out, size_t cap, const char *event,
                              const char *channel, const char *data_json,
                              size_t data_json_len, const char *user_id)
{
    struct writer w = { out, cap, 0, false };

    w_text(&w, "{\"event\":");
    w_cstring(&w, event);
    if (channel != NULL) {
        w_text(&w, ",\"channel\":");
        w_cstring(&w, channel);
    }
    /* Without data text there is no value to copy, so no member either. */
    if (data_json != NULL && data_json_len > 0) {
        w_text(&w, ",\"data\":");
        w_bytes(&w, data_json, data_json_len);
    }
    if (user_id != NULL) {
        w_text(&w, ",\"user_id\":");
        w_cstring(&w, user_id);
    }
    w_text(&w, "}");
    return w_finish(&w);
}

struct hub_frame *hub_proto_event_frame(const char *event, const char *channel,
                                        const char *data_json,
                                        size_t data_json_len,
                                        const char *user_id)
{
    size_t n = hub_proto_encode_event(NULL, 0, event, channel, data_json,
                                      data_json_len, user_id);
    struct hub_frame *f = hub_frame_create(n + 1);

    if (!f)
        return NULL;
    /* The second pass writes exactly the n bytes the first one counted. */
    n = hub_proto_encode_event(hub_frame_payload(f), n + 1, event, channel,
                               data_json, data_json_len, user_id);
    hub_frame_seal(f, n);
    return f;
}
