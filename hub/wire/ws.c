/*
 * hub/wire/ws.c - RFC 6455 checks on bytes: incremental UTF-8, close codes and
 * payloads, and the handshake headers libwebsockets 4.1.6 lets through.
 */
#include "hub/wire/ws.h"

#include <string.h>
#include <strings.h>

/*
 * UTF-8 state: 0 at a boundary, 0xff rejected, otherwise the low two bits
 * count the continuation bytes still due (1..3) and bits 2..4 say which
 * range the next one must fall in. Only the byte after a lead byte is
 * narrowed (RFC 3629 section 4): that is where overlongs (E0, F0),
 * surrogates (ED) and code points past U+10FFFF (F4) show.
 */
enum {
    NEXT_ANY = 0,  /* 80..BF */
    NEXT_A0 = 1,   /* A0..BF, after E0: no overlong 3-byte form */
    NEXT_9F = 2,   /* 80..9F, after ED: no surrogate D800..DFFF */
    NEXT_90 = 3,   /* 90..BF, after F0: no overlong 4-byte form */
    NEXT_8F = 4,   /* 80..8F, after F4: nothing past U+10FFFF */
};

#define ST(due, next) ((uint8_t)((due) | ((next) << 2)))

static uint8_t lead(unsigned char c)
{
    if (c >= 0xc2 && c <= 0xdf)
        return ST(1, NEXT_ANY);
    if (c == 0xe0)
        return ST(2, NEXT_A0);
    if (c == 0xed)
        return ST(2, NEXT_9F);
    if (c >= 0xe1 && c <= 0xef)
        return ST(2, NEXT_ANY);
    if (c == 0xf0)
        return ST(3, NEXT_90);
    if (c >= 0xf1 && c <= 0xf3)
        return ST(3, NEXT_ANY);
    if (c == 0xf4)
        return ST(3, NEXT_8F);
    /* 80..BF stray continuation, C0/C1 overlong, F5..FF out of range. */
    return HUB_UTF8_REJECT;
}

static bool next_ok(unsigned kind, unsigned char c)
{
    switch (kind) {
    case NEXT_A0: return c >= 0xa0 && c <= 0xbf;
    case NEXT_9F: return c >= 0x80 && c <= 0x9f;
    case NEXT_90: return c >= 0x90 && c <= 0xbf;
    case NEXT_8F: return c >= 0x80 && c <= 0x8f;
    default: return c >= 0x80 && c <= 0xbf;
    }
}

uint8_t hub_utf8_feed(uint8_t state, const void *buf, size_t len)
{
    const unsigned char *p = buf, *end = p + len;

    if (state == HUB_UTF8_REJECT)
        return state;
    while (p < end) {
        unsigned char c = *p;

        if (state == HUB_UTF8_ACCEPT) {
            if (c < 0x80) {
                p++;
                /* Pusher messages are mostly ASCII: skip runs of it. */
                while (end - p >= 8) {
                    uint64_t w;

                    memcpy(&w, p, sizeof(w));
                    if (w & 0x8080808080808080ull)
                        break;
                    p += 8;
                }
                continue;
            }
            state = lead(c);
            if (state == HUB_UTF8_REJECT)
                return state;
        } else {
            if (!next_ok(state >> 2, c))
                return HUB_UTF8_REJECT;
            state = (uint8_t)((state & 3) - 1); /* later bytes: any */
        }
        p++;
    }
    return state;
}

bool hub_utf8_valid(const void *buf, size_t len)
{
    return hub_utf8_feed(HUB_UTF8_ACCEPT, buf, len) == HUB_UTF8_ACCEPT;
}

bool hub_ws_close_code_ok(unsigned code)
{
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1011) ||
           (code >= 3000 && code <= 4999);
}

unsigned hub_ws_close_payload_check(const void *payload, size_t len)
{
    const unsigned char *p = payload;

    if (len == 0)
        return 0;
    if (len == 1 || !hub_ws_close_code_ok((unsigned)p[0] << 8 | p[1]))
        return 1002;
    if (!hub_utf8_valid(p + 2, len - 2))
        return 1007;
    return 0;
}

static bool blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Trim blanks on both sides of [*s, *s + *len). */
static void trim(const char **s, size_t *len)
{
    while (*len && blank(**s)) {
        (*s)++;
        (*len)--;
    }
    while (*len && blank((*s)[*len - 1]))
        (*len)--;
}

bool hub_ws_version_ok(const char *value, size_t len)
{
    if (!value)
        return false;
    trim(&value, &len);
    return len == 2 && value[0] == '1' && value[1] == '3';
}

static bool b64_char(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
           (c >= '0' && c <= '9') || c == '+' || c == '/';
}

bool hub_ws_key_ok(const char *value, size_t len)
{
    /* 16 bytes are 5 groups of 3 plus one byte: 22 characters and "==". */
    if (!value)
        return false;
    trim(&value, &len);
    if (len != 24 || value[22] != '=' || value[23] != '=')
        return false;
    for (size_t i = 0; i < 22; i++)
        if (!b64_char(value[i]))
            return false;
    return true;
}

bool hub_ws_list_has_token(const char *value, size_t len, const char *token)
{
    size_t tlen = strlen(token);

    while (value && len) {
        const char *comma = memchr(value, ',', len);
        size_t n = comma ? (size_t)(comma - value) : len;
        const char *item = value;
        size_t ilen = n;

        trim(&item, &ilen);
        if (ilen == tlen && strncasecmp(item, token, tlen) == 0)
            return true;
        if (!comma)
            break;
        value = comma + 1;
        len -= n + 1;
    }
    return false;
}
