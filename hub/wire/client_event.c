/*
 * hub/wire/client_event.c - the client-event fast path
 * (hub/wire/client_event.h): hub_client_event_scan() and its recogniser.
 *
 * A recursive-descent recogniser of the JSON subset whose compact
 * re-encoding by jansson is the text itself, plus the envelope around it.
 * Every function returns false to decline; nothing is reported, because
 * the caller then runs jansson, which reports what is wrong (if anything).
 * Recursion is bounded by HUB_CLIENT_EVENT_MAX_DEPTH.
 */
#include "hub/wire/client_event.h"

#include <stdint.h>
#include <string.h>

#include "hub/wire/ws.h"

struct span {
    const unsigned char *p;
    size_t n;
};

struct scan {
    const unsigned char *p, *end;
    unsigned depth;
    unsigned nkeys;
    struct span keys[HUB_CLIENT_EVENT_MAX_KEYS];
};

#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

/* Whether any byte of w is zero (exact as a yes/no answer). */
static inline uint64_t has_zero(uint64_t w)
{
    return (w - ONES) & ~w & HIGHS;
}

/* Whether any byte of w needs a look: a control byte, '"', '\\', or a
 * byte of a multi-byte UTF-8 sequence. */
static inline bool word_special(uint64_t w)
{
    return ((w | has_zero(w & ~(ONES * 0x1f)) | has_zero(w ^ (ONES * '"')) |
             has_zero(w ^ (ONES * '\\'))) &
            HIGHS) != 0;
}

/*
 * A string starting at sc->p (which is '"'). Escapes: only those jansson
 * writes back the same way (\" \\ \b \f \n \r \t). The content (between
 * the quotes) goes to *content; *escaped tells whether it had any escape.
 */
static bool scan_string(struct scan *sc, struct span *content, bool *escaped)
{
    const unsigned char *p = sc->p + 1, *end = sc->end, *start = p;
    bool high = false, esc = false;

    for (;;) {
        unsigned char c;

        while (end - p >= 8) {
            uint64_t w;

            memcpy(&w, p, sizeof(w));
            if (word_special(w))
                break;
            p += 8;
        }
        if (p >= end)
            return false;
        c = *p;
        if (c == '"')
            break;
        if (c == '\\') {
            if (end - p < 2)
                return false;
            switch (p[1]) {
            case '"':
            case '\\':
            case 'b':
            case 'f':
            case 'n':
            case 'r':
            case 't':
                esc = true;
                p += 2;
                continue;
            default:
                return false;   /* \u, \/ or not an escape at all */
            }
        }
        if (c < 0x20)
            return false;       /* raw control bytes are not JSON */
        if (c >= 0x80)
            high = true;
        p++;
    }
    /* A multi-byte sequence cut by the closing quote fails here too. */
    if (high && !hub_utf8_valid(start, (size_t)(p - start)))
        return false;
    content->p = start;
    content->n = (size_t)(p - start);
    *escaped = esc;
    sc->p = p + 1;
    return true;
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* An integer jansson reads into a json_int_t and prints back the same:
 * no fraction, no exponent, not "-0", at most 18 digits. */
static bool scan_number(struct scan *sc)
{
    const unsigned char *p = sc->p, *end = sc->end, *digits;

    if (*p == '-')
        p++;
    digits = p;
    if (p >= end || !is_digit(*p))
        return false;
    if (*p == '0') {
        p++;
        if (digits != sc->p)
            return false;       /* "-0" is printed back as "0" */
    } else {
        while (p < end && is_digit(*p))
            p++;
    }
    if (p - digits > 18)
        return false;
    if (p < end && (*p == '.' || *p == 'e' || *p == 'E' || is_digit(*p)))
        return false;
    sc->p = p;
    return true;
}

static bool scan_literal(struct scan *sc, const char *word, size_t n)
{
    if ((size_t)(sc->end - sc->p) < n || memcmp(sc->p, word, n) != 0)
        return false;
    sc->p += n;
    return true;
}

static bool scan_value(struct scan *sc);

static bool scan_object(struct scan *sc)
{
    unsigned base = sc->nkeys;

    if (++sc->depth > HUB_CLIENT_EVENT_MAX_DEPTH)
        return false;
    sc->p++;
    if (sc->p < sc->end && *sc->p == '}') {
        sc->p++;
        sc->depth--;
        return true;
    }
    for (;;) {
        struct span key;
        bool esc;

        if (sc->p >= sc->end || *sc->p != '"' ||
            !scan_string(sc, &key, &esc))
            return false;
        /*
         * The allowed escapes each stand for one character that has no
         * other spelling here, so equal keys have equal bytes.
         */
        for (unsigned i = base; i < sc->nkeys; i++)
            if (sc->keys[i].n == key.n &&
                memcmp(sc->keys[i].p, key.p, key.n) == 0)
                return false;   /* jansson keeps the last one */
        if (sc->nkeys == HUB_CLIENT_EVENT_MAX_KEYS)
            return false;
        sc->keys[sc->nkeys++] = key;
        if (sc->p >= sc->end || *sc->p != ':')
            return false;
        sc->p++;
        if (!scan_value(sc))
            return false;
        if (sc->p >= sc->end)
            return false;
        if (*sc->p == '}')
            break;
        if (*sc->p != ',')
            return false;
        sc->p++;
    }
    sc->p++;
    sc->nkeys = base;
    sc->depth--;
    return true;
}

static bool scan_array(struct scan *sc)
{
    if (++sc->depth > HUB_CLIENT_EVENT_MAX_DEPTH)
        return false;
    sc->p++;
    if (sc->p < sc->end && *sc->p == ']') {
        sc->p++;
        sc->depth--;
        return true;
    }
    for (;;) {
        if (!scan_value(sc) || sc->p >= sc->end)
            return false;
        if (*sc->p == ']')
            break;
        if (*sc->p != ',')
            return false;
        sc->p++;
    }
    sc->p++;
    sc->depth--;
    return true;
}

/* One value, no whitespace anywhere in it. */
static bool scan_value(struct scan *sc)
{
    struct span s;
    bool esc;

    if (sc->p >= sc->end)
        return false;
    switch (*sc->p) {
    case '"':
        return scan_string(sc, &s, &esc);
    case '{':
        return scan_object(sc);
    case '[':
        return scan_array(sc);
    case 't':
        return scan_literal(sc, "true", 4);
    case 'f':
        return scan_literal(sc, "false", 5);
    case 'n':
        return scan_literal(sc, "null", 4);
    default:
        return scan_number(sc);
    }
}

/* JSON whitespace between the envelope's tokens (RFC 8259 section 2). */
static void skip_ws(struct scan *sc)
{
    while (sc->p < sc->end && (*sc->p == ' ' || *sc->p == '\t' ||
                               *sc->p == '\n' || *sc->p == '\r'))
        sc->p++;
}

static bool key_is(const struct span *k, const char *name, size_t n)
{
    return k->n == n && memcmp(k->p, name, n) == 0;
}

/* A string member of the envelope: no escapes, so its bytes are its
 * value. */
static bool plain_string(struct scan *sc, const char **s, size_t *len)
{
    struct span v;
    bool esc;

    if (sc->p >= sc->end || *sc->p != '"' || !scan_string(sc, &v, &esc) ||
        esc)
        return false;
    *s = (const char *)v.p;
    *len = v.n;
    return true;
}

bool hub_client_event_scan(struct hub_client_event *ev, const char *text,
                             size_t len)
{
    struct scan sc;
    bool seen_event = false, seen_channel = false, seen_data = false;

    sc.p = (const unsigned char *)text;
    sc.end = sc.p + len;
    sc.depth = 0;
    sc.nkeys = 0;
    memset(ev, 0, sizeof(*ev));

    skip_ws(&sc);
    if (sc.p >= sc.end || *sc.p != '{')
        return false;
    sc.p++;
    for (;;) {
        struct span key;
        bool esc;

        skip_ws(&sc);
        if (sc.p >= sc.end || *sc.p != '"' || !scan_string(&sc, &key, &esc) ||
            esc)
            return false;
        skip_ws(&sc);
        if (sc.p >= sc.end || *sc.p != ':')
            return false;
        sc.p++;
        skip_ws(&sc);
        if (key_is(&key, "event", 5) && !seen_event) {
            if (!plain_string(&sc, &ev->event, &ev->event_len))
                return false;
            seen_event = true;
        } else if (key_is(&key, "channel", 7) && !seen_channel) {
            if (!plain_string(&sc, &ev->channel, &ev->channel_len))
                return false;
            seen_channel = true;
        } else if (key_is(&key, "data", 4) && !seen_data) {
            const unsigned char *start = sc.p;

            if (!scan_value(&sc))
                return false;
            ev->data = (const char *)start;
            ev->data_len = (size_t)(sc.p - start);
            seen_data = true;
        } else {
            return false;       /* another member, or one of ours twice */
        }
        skip_ws(&sc);
        if (sc.p >= sc.end)
            return false;
        if (*sc.p == '}')
            break;
        if (*sc.p != ',')
            return false;
        sc.p++;
    }
    sc.p++;
    skip_ws(&sc);
    if (sc.p != sc.end || !seen_event || !seen_channel || !seen_data)
        return false;
    return ev->event_len >= 7 && memcmp(ev->event, "client-", 7) == 0;
}
