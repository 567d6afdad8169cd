/*
 * hub/wire/ws.h - RFC 6455 rules the hub checks itself because libwebsockets
 * 4.1.6 does not (or does not without side effects): UTF-8 in text
 * messages and close reasons, close codes a peer may send, and the opening
 * handshake's Sec-WebSocket-Version, Sec-WebSocket-Key and Connection
 * headers.
 *
 * Pure functions on bytes: no libwebsockets, any thread.
 */
#ifndef HUB_WS_H
#define HUB_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Incremental UTF-8 validation (RFC 3629, as RFC 6455 section 8.1 asks):
 * the state is one byte, kept across fragments. It is HUB_UTF8_ACCEPT at a
 * character boundary, HUB_UTF8_REJECT from the first byte that makes the
 * text impossible to complete as UTF-8 (an overlong form, a surrogate, a
 * code point past U+10FFFF, a stray or missing continuation byte; the
 * state then stays REJECT), and anything else in the middle of a
 * character. A message is valid when its last fragment leaves ACCEPT.
 */
#define HUB_UTF8_ACCEPT 0
#define HUB_UTF8_REJECT 0xff

uint8_t hub_utf8_feed(uint8_t state, const void *buf, size_t len);

/* Whole text: valid UTF-8 that ends on a character boundary. */
bool hub_utf8_valid(const void *buf, size_t len);

/*
 * A close code a peer may put on the wire (RFC 6455 section 7.4):
 * 1000-1003, 1007-1011 and 3000-4999. 1004-1006 and 1015 are reserved
 * for local use, 0-999 and 1012-2999 are not for peers (libwebsockets
 * 4.1.6 draws the same line below 3000).
 */
bool hub_ws_close_code_ok(unsigned code);

/*
 * Check a peer's close frame payload. Returns 0 when it is well formed
 * (empty, or a valid code followed by a UTF-8 reason), 1002 when the
 * payload is one byte or the code is not one a peer may send, 1007 when
 * the reason is not UTF-8.
 */
unsigned hub_ws_close_payload_check(const void *payload, size_t len);

/* Sec-WebSocket-Version is exactly 13 (surrounding blanks allowed). */
bool hub_ws_version_ok(const char *value, size_t len);

/* Sec-WebSocket-Key is base64 that decodes to exactly 16 bytes. */
bool hub_ws_key_ok(const char *value, size_t len);

/* A comma-separated header value holds token, case-insensitively
 * ("Connection: keep-alive, Upgrade"). */
bool hub_ws_list_has_token(const char *value, size_t len, const char *token);

#endif
