/*
 * hub/base/json_escape.c - a whole string escaped for JSON with
 * hub/base/json_escape.h's per-byte step (the webhook body encoder's use).
 *
 * Thread: any (no state).
 */
#include "hub/base/json_escape.h"

char *hub_json_escape(char *out, const char *s, size_t n, unsigned flags)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (!hub_json_needs_escape(c, flags))
            *out++ = (char)c;
        else
            out += hub_json_escape_byte(c, flags, out);
    }
    return out;
}
