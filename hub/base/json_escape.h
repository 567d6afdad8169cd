/*
 * hub/base/json_escape.h - the one JSON string writer: the escape of each
 * byte of a string's content, in the three spellings lubdub writes.
 *
 * Every writer of a JSON string goes through it: the protocol encoder
 * (hub/wire/protocol.c, on the publish path, so the per-byte step is
 * inline), the webhook body encoder (hub/webhook/webhook.c, which must
 * write what jansson writes) and the JSON log lines (server/lws/log.c).
 * Flags choose the spelling; with none, '"' and '\\' get a backslash and
 * every other byte below 0x20 is \u00xx in lower-case hex. Bytes from 0x80
 * are copied: checking UTF-8 is the caller's (the log replaces what is not
 * UTF-8, the webhook encoder hands such strings to jansson).
 *
 * Thread: any (no state).
 */
#ifndef HUB_JSON_ESCAPE_H
#define HUB_JSON_ESCAPE_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/* \b \f \n \r \t for those five bytes, as jansson writes them. */
#define HUB_JSON_ESC_SHORT 1u
/* Upper-case hex digits in \u00XX, as jansson writes them. */
#define HUB_JSON_ESC_UPPER 2u
/* Escape DEL (0x7f) too, which JSON allows raw (the log lines). */
#define HUB_JSON_ESC_DEL 4u
/* jansson's own spelling (json_dumps() of a string). */
#define HUB_JSON_ESC_JANSSON (HUB_JSON_ESC_SHORT | HUB_JSON_ESC_UPPER)

/* The longest escape of one byte: \u00XX. */
#define HUB_JSON_ESC_MAX 6

/* Whether c is written other than as itself inside a JSON string. */
static inline bool hub_json_needs_escape(unsigned char c, unsigned flags)
{
    return c < 0x20 || c == '"' || c == '\\' ||
           (c == 0x7f && (flags & HUB_JSON_ESC_DEL));
}

/*
 * Write c as it goes inside a JSON string to out (room for
 * HUB_JSON_ESC_MAX bytes; no NUL written) and return how many bytes that
 * is: 1 for a byte written as itself, 2 for \" \\ and the short forms, 6
 * for \u00xx.
 */
static inline size_t hub_json_escape_byte(unsigned char c, unsigned flags,
                                          char *out)
{
    const char *hex = (flags & HUB_JSON_ESC_UPPER) ? "0123456789ABCDEF"
                                                   : "0123456789abcdef";

    if (!hub_json_needs_escape(c, flags)) {
        out[0] = (char)c;
        return 1;
    }
    out[0] = '\\';
    if (c == '"' || c == '\\') {
        out[1] = (char)c;
        return 2;
    }
    if (flags & HUB_JSON_ESC_SHORT) {
        static const char shorts[] = "\bb\ff\nn\rr\tt";

        for (size_t i = 0; i + 1 < sizeof(shorts); i += 2)
            if ((unsigned char)shorts[i] == c) {
                out[1] = shorts[i + 1];
                return 2;
            }
    }
    memcpy(out + 1, "u00", 3);
    out[4] = hex[c >> 4];
    out[5] = hex[c & 15];
    return 6;
}

/*
 * Write s[0..n) escaped as the content of a JSON string (no quotes) to out,
 * which has room for HUB_JSON_ESC_MAX bytes per byte of s (or the exact
 * count the caller computed); returns the end of what was written (no NUL).
 */
char *hub_json_escape(char *out, const char *s, size_t n, unsigned flags);

#endif
