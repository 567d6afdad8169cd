/*
 * hub/wire/client_event.h - the client-event fast path: a scan that takes
 * apart {"event":"client-...","channel":"...","data":<value>} in one pass
 * over the bytes, without building a jansson tree, so that the relay can
 * send the data on as it came (hub_client_event_scan(), called by
 * hub_msg_parse() in hub/wire/protocol.c).
 *
 * The scanner accepts only messages it can answer exactly as the jansson
 * path (hub/wire/protocol.c) would: the message is valid JSON (RFC 8259, UTF-8
 * checked with hub_utf8_valid), and the data value's bytes are the very
 * text jansson's compact re-encoding of it produces (json_dumps with
 * JSON_COMPACT | JSON_ENCODE_ANY), so the relay can splice them into the
 * outgoing frame unchanged. Anything else it declines, and the caller
 * parses the message with jansson as before:
 *   - root members other than event, channel and data, or one of them
 *     twice; event or channel holding a backslash escape;
 *   - an event name not starting with "client-", or no data member;
 *   - inside data: whitespace, "\u" and "\/" escapes (jansson writes those
 *     characters differently), numbers with a fraction or an exponent,
 *     "-0", integers of more than 18 digits (jansson re-prints or rejects
 *     them), a key twice in one object (jansson keeps the last), nesting
 *     deeper than HUB_CLIENT_EVENT_MAX_DEPTH, more than
 *     HUB_CLIENT_EVENT_MAX_KEYS keys open at once;
 *   - anything that is not valid JSON (jansson then gives the reason).
 * Declining is always safe: the answer is only ever "same as jansson" or
 * "ask jansson".
 *
 * Pure, no allocation: any thread.
 */
#ifndef HUB_CLIENT_EVENT_H
#define HUB_CLIENT_EVENT_H

#include <stdbool.h>
#include <stddef.h>

/* Nesting accepted inside data (the jansson path allows 256). */
#define HUB_CLIENT_EVENT_MAX_DEPTH 32
/* Object keys remembered at once for the duplicate check (all objects
 * open on the current path). */
#define HUB_CLIENT_EVENT_MAX_KEYS 64

/* Spans into the scanned text; event and channel are the string contents
 * without quotes (no escapes in them, so the bytes are the value). */
struct hub_client_event {
    const char *event;
    size_t event_len;
    const char *channel;
    size_t channel_len;
    const char *data;           /* the data value's JSON text */
    size_t data_len;
};

/* True when text[0..len) is a client event in the form above (ev filled
 * in); false when the caller must parse it with jansson. */
bool hub_client_event_scan(struct hub_client_event *ev, const char *text,
                             size_t len);

#endif
