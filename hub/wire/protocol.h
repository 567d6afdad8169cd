/*
 * hub/wire/protocol.h - the Pusher v7 wire format: parse inbound client messages,
 * classify and validate channel names, and encode outbound messages.
 *
 * Encoders write into a caller buffer snprintf-style: they return the length
 * the full message needs (excluding NUL); when that is >= cap the output is
 * truncated and the caller retries with a bigger buffer. Outbound `data` is a
 * JSON *string* holding JSON, except pusher:error whose data is an object
 * (docs/PROTOCOL.md section 1).
 *
 * Pure: any thread. Parsed messages own their jansson tree.
 */
#ifndef HUB_PROTOCOL_H
#define HUB_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include <jansson.h>

struct hub_frame;

/* Room for the event and channel names of a fast-path client event (both
 * NUL-terminated); longer ones take the jansson path. */
#define HUB_MSG_NAMES_INLINE 448

enum hub_msg_type {
    HUB_MSG_PING,          /* pusher:ping */
    HUB_MSG_PONG,          /* pusher:pong */
    HUB_MSG_SUBSCRIBE,     /* pusher:subscribe */
    HUB_MSG_UNSUBSCRIBE,   /* pusher:unsubscribe */
    HUB_MSG_SIGNIN,        /* pusher:signin */
    HUB_MSG_CLIENT_EVENT,  /* client-* */
    HUB_MSG_OTHER,         /* any other event name: ignored, counted */
};

struct hub_msg {
    enum hub_msg_type type;
    const char *event;          /* borrowed from root */
    const char *channel;        /* NULL when absent */
    size_t channel_len;
    const char *auth;           /* subscribe/signin; NULL when absent */
    const char *channel_data;   /* presence subscribe: the raw string */
    size_t channel_data_len;
    const char *user_data;      /* signin */
    size_t user_data_len;
    json_t *data;               /* borrowed from root; NULL when absent */
    json_t *root;               /* owned; freed by hub_msg_fini */
    /*
     * A client event in the common form (hub/wire/client_event.h) is not parsed into
     * a tree: root and data stay NULL, data_raw is the data value's JSON
     * text inside the parsed message (not NUL-terminated, byte for byte
     * what jansson's compact encoding of data would be), and event and
     * channel are copied into names.
     */
    const char *data_raw;
    size_t data_raw_len;
    char names[HUB_MSG_NAMES_INLINE];
};

/*
 * Parse one text message. Returns 0, or -EINVAL with a short reason in why
 * (not JSON, not an object, no string "event", subscribe without a string
 * channel, nested deeper than 256 levels, ...). On error nothing needs
 * freeing. Subscribe, unsubscribe and signin data may also arrive as a
 * string holding the object; it is then parsed and replaces data in root.
 * The strings handed out contain no NUL byte. A client event may come back
 * without a tree (data_raw set, root NULL; see struct hub_msg).
 */
int hub_msg_parse(struct hub_msg *m, const char *text, size_t len, char *why,
                  size_t why_len);
void hub_msg_fini(struct hub_msg *m);

enum hub_channel_kind {
    HUB_CHANNEL_PUBLIC,
    HUB_CHANNEL_PRIVATE,
    HUB_CHANNEL_ENCRYPTED,      /* private-encrypted-* */
    HUB_CHANNEL_PRESENCE,
    HUB_CHANNEL_USER,           /* #server-to-user-<id> */
};

/* Match in docs/PROTOCOL.md 3.1 order. name need not be NUL-terminated. */
enum hub_channel_kind hub_channel_classify(const char *name, size_t len);
/* Whether name is a cache channel: cache-, private-cache-,
 * private-encrypted-cache- or presence-cache-. Inline: the HTTP API's
 * publish asks it once per channel, and the first byte answers for most
 * names. */
static inline bool hub_channel_has_prefix(const char *name, size_t len,
                                          const char *prefix, size_t n)
{
    return len >= n && memcmp(name, prefix, n) == 0;
}

static inline bool hub_channel_is_cache(const char *name, size_t len)
{
    if (len < 6 || (name[0] != 'c' && name[0] != 'p'))
        return false;
    return hub_channel_has_prefix(name, len, "cache-", 6) ||
           hub_channel_has_prefix(name, len, "private-cache-", 14) ||
           hub_channel_has_prefix(name, len, "private-encrypted-cache-", 24) ||
           hub_channel_has_prefix(name, len, "presence-cache-", 15);
}
/* Charset ^#?[-a-zA-Z0-9_=@,.;]+$, length 1..max, '#' only for
 * "#server-to-user-". Returns 0 or -EINVAL. */
int hub_channel_name_check(const char *name, size_t len, size_t max);

/* {"event":"pusher:connection_established","data":"{\"socket_id\":..,
 *  \"activity_timeout\":N}"} */
size_t hub_proto_encode_established(char *out, size_t cap,
                                    const char *socket_id,
                                    unsigned activity_timeout_s);
/* {"event":"pusher:error","data":{"code":C,"message":"..."}}; code < 0
 * encodes null. */
size_t hub_proto_encode_error(char *out, size_t cap, int code,
                              const char *message);
/* {"event":"pusher:pong","data":"{}"} */
size_t hub_proto_encode_pong(char *out, size_t cap);
/* {"event":"pusher:subscription_error","channel":..,"data":{"type":..,
 *  "error":..,"status":N}} (the soketi form, docs/PROTOCOL.md 3.5) */
size_t hub_proto_encode_subscription_error(char *out, size_t cap,
                                           const char *channel,
                                           const char *type,
                                           const char *error, int status);
/*
 * A channel event: {"event":E,"channel":C,"data":D[,"user_id":U]}. data is
 * already a JSON *value text* (e.g. "\"{\\\"a\\\":1}\"" for a string, or an
 * object text for client events as sent); it is copied verbatim. user_id
 * may be NULL. channel may be NULL (no channel member).
 */
size_t hub_proto_encode_event(char *out, size_t cap, const char *event,
                              const char *channel, const char *data_json,
                              size_t data_json_len, const char *user_id);
/*
 * The same event encoded into a new sealed frame (hub/wire/frame.h) with one
 * reference for the caller; NULL when out of memory. Every channel event
 * the hub sends is built here, so hub/pusher and hub/rest agree byte for
 * byte.
 */
struct hub_frame *hub_proto_event_frame(const char *event, const char *channel,
                                        const char *data_json,
                                        size_t data_json_len,
                                        const char *user_id);
/* Write s as a JSON string literal (quotes included); returns needed len. */
size_t hub_proto_encode_string(char *out, size_t cap, const char *s,
                               size_t len);

#endif
