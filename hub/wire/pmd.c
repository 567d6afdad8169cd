/*
 * hub/wire/pmd.c - permessage-deflate negotiation: a bounded scanner of
 * Sec-WebSocket-Extensions (RFC 6455 section 9.1, RFC 7230 sections 3.2.6
 * and 7) and the server's choice among the offers (RFC 7692 section 7.1).
 *
 * The value is a peer's bytes, so the scanner moves one cursor forward
 * and never back: each step reads only while bytes are left, there is no
 * recursion, and a malformed element costs one pass to the next comma.
 * Pure, no allocation: any thread.
 */
#include "hub/wire/pmd.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define PMD_NAME "permessage-deflate"

static void advance(struct hub_pmd_scan *s, size_t n)
{
    s->p += n;
    s->left -= n;
}

static bool is_ows(unsigned char c)
{
    return c == ' ' || c == '\t';
}

/* RFC 7230 section 3.2.6's tchar. */
static bool is_tchar(unsigned char c)
{
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
        (c >= 'A' && c <= 'Z'))
        return true;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static void skip_ows(struct hub_pmd_scan *s)
{
    while (s->left && is_ows((unsigned char)*s->p))
        advance(s, 1);
}

static size_t take_token(struct hub_pmd_scan *s, const char **tok)
{
    size_t n = 0;

    *tok = s->p;
    while (s->left && is_tchar((unsigned char)*s->p)) {
        advance(s, 1);
        n++;
    }
    return n;
}

/*
 * A quoted-string, s->p at its opening quote. RFC 6455 section 9.1 asks
 * that the value, unescaped, be a token, so every character (escaped or
 * not) must be a tchar and there must be one at least. On failure s->p
 * is left at the offending byte, inside the quotes.
 */
static int take_quoted(struct hub_pmd_scan *s, const char **v, size_t *n)
{
    const char *start;
    size_t chars = 0;

    advance(s, 1);
    start = s->p;
    while (s->left) {
        unsigned char c = (unsigned char)*s->p;

        if (c == '"') {
            if (!chars)
                return -EINVAL;
            *v = start;
            *n = (size_t)(s->p - start);
            advance(s, 1);
            return 0;
        }
        if (c == '\\') {
            if (s->left < 2 || !is_tchar((unsigned char)s->p[1]))
                return -EINVAL;
            advance(s, 1);
        } else if (!is_tchar(c)) {
            return -EINVAL;
        }
        advance(s, 1);
        chars++;
    }
    return -EINVAL;
}

/*
 * Move past the rest of a malformed (or unread) element: to the next
 * comma outside a quoted-string, or the end. in_quote says whether the
 * cursor stands inside one already.
 */
static int skip_element(struct hub_pmd_scan *s, bool in_quote)
{
    while (s->left) {
        char c = *s->p;

        if (in_quote) {
            if (c == '\\' && s->left >= 2) {
                advance(s, 2);
                continue;
            }
            if (c == '"')
                in_quote = false;
        } else if (c == ',') {
            break;
        } else if (c == '"') {
            in_quote = true;
        }
        advance(s, 1);
    }
    s->in_offer = false;
    return -EINVAL;
}

/* After a name or a value: only OWS, then ';', ',' or the end. */
static bool at_item_end(struct hub_pmd_scan *s)
{
    skip_ows(s);
    return !s->left || *s->p == ',' || *s->p == ';';
}

void hub_pmd_scan_init(struct hub_pmd_scan *s, const char *hdr, size_t len)
{
    s->p = hdr;
    s->left = hdr ? len : 0;
    s->in_offer = false;
}

int hub_pmd_scan_offer(struct hub_pmd_scan *s, const char **name,
                       size_t *name_len)
{
    size_t n;

    if (s->in_offer)
        skip_element(s, false);
    while (s->left && (is_ows((unsigned char)*s->p) || *s->p == ','))
        advance(s, 1);
    if (!s->left)
        return 0;
    n = take_token(s, name);
    if (!n || !at_item_end(s))
        return skip_element(s, false);
    *name_len = n;
    s->in_offer = true;
    return 1;
}

int hub_pmd_scan_param(struct hub_pmd_scan *s, struct hub_pmd_param *p)
{
    if (!s->in_offer)
        return 0;
    skip_ows(s);
    if (!s->left || *s->p == ',') {
        s->in_offer = false;
        return 0;
    }
    advance(s, 1); /* the ';' at_item_end() stopped at */
    skip_ows(s);
    p->name_len = take_token(s, &p->name);
    if (!p->name_len)
        return skip_element(s, false);
    p->value = NULL;
    p->value_len = 0;
    p->quoted = false;
    skip_ows(s);
    if (s->left && *s->p == '=') {
        advance(s, 1);
        skip_ows(s);
        if (s->left && *s->p == '"') {
            if (take_quoted(s, &p->value, &p->value_len) < 0)
                return skip_element(s, true);
            p->quoted = true;
        } else if (!(p->value_len = take_token(s, &p->value))) {
            return skip_element(s, false);
        }
    }
    if (!at_item_end(s))
        return skip_element(s, false);
    return 1;
}

int hub_pmd_param_value(const struct hub_pmd_param *p, char *buf, size_t cap)
{
    size_t n = 0;

    if (!p->value)
        return -ENOENT;
    if (cap > INT_MAX)
        cap = INT_MAX;
    for (size_t i = 0; i < p->value_len; i++) {
        char c = p->value[i];

        /* The scanner saw to it that an escape has its character. */
        if (p->quoted && c == '\\' && i + 1 < p->value_len)
            c = p->value[++i];
        if (n + 1 >= cap)
            return -ENOSPC;
        buf[n++] = c;
    }
    if (!cap)
        return -ENOSPC;
    buf[n] = '\0';
    return (int)n;
}

/* The parameters of RFC 7692 section 7.1, one bit each in seen. */
enum { SNCT, CNCT, SMWB, CMWB, NPARAMS };

static const char *const param_names[NPARAMS] = {
    [SNCT] = "server_no_context_takeover",
    [CNCT] = "client_no_context_takeover",
    [SMWB] = "server_max_window_bits",
    [CMWB] = "client_max_window_bits",
};

struct offer {
    unsigned seen;          /* 1 << SNCT ... */
    unsigned client_bits;   /* the answer's client_max_window_bits */
};

static bool name_is(const char *name, size_t len, const char *want)
{
    return len == strlen(want) && strncasecmp(name, want, len) == 0;
}

/* RFC 7692 sections 7.1.2.1-2: decimal 8..15, no leading zero. */
static int window_bits(const struct hub_pmd_param *p, unsigned *bits)
{
    char v[3];
    int n = hub_pmd_param_value(p, v, sizeof(v));
    unsigned b = 0;

    if (n < 1 || v[0] == '0')
        return -EINVAL;
    for (int i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return -EINVAL;
        b = b * 10 + (unsigned)(v[i] - '0');
    }
    if (b < 8 || b > 15)
        return -EINVAL;
    *bits = b;
    return 0;
}

/* One parameter of a permessage-deflate offer: known, new, a value we take. */
static int offer_param(struct offer *o, const struct hub_pmd_param *p)
{
    unsigned bits = 15;
    int k = 0;

    while (k < NPARAMS && !name_is(p->name, p->name_len, param_names[k]))
        k++;
    if (k == NPARAMS || (o->seen & (1u << k)))
        return -EINVAL;
    o->seen |= 1u << k;
    switch (k) {
    case SNCT:
    case CNCT:
        return p->value ? -EINVAL : 0;
    case SMWB:
        /* Our deflate always uses the full window (RFC 7692 7.1.2.1). */
        if (window_bits(p, &bits) < 0 || bits != 15)
            return -EINVAL;
        return 0;
    default:
        /* zlib inflates any window up to 15 bits (RFC 7692 7.1.2.2). */
        if (p->value && window_bits(p, &bits) < 0)
            return -EINVAL;
        o->client_bits = bits;
        return 0;
    }
}

static int offer_read(struct hub_pmd_scan *s, struct offer *o)
{
    struct hub_pmd_param p;
    int rc;

    o->seen = 0;
    o->client_bits = 0;
    while ((rc = hub_pmd_scan_param(s, &p)) > 0) {
        if (offer_param(o, &p) < 0)
            return -EINVAL;
    }
    return rc;
}

static int answer(const struct offer *o, char *out, size_t cap)
{
    char cmwb[40] = "";
    int n;

    if (o->seen & (1u << CMWB))
        snprintf(cmwb, sizeof(cmwb), "; client_max_window_bits=%u",
                 o->client_bits);
    n = snprintf(out, cap, "%s%s%s",
                 PMD_NAME "; server_no_context_takeover"
                 "; client_no_context_takeover",
                 (o->seen & (1u << SMWB)) ? "; server_max_window_bits=15" : "",
                 cmwb);
    if (n < 0 || (size_t)n >= cap) {
        if (cap)
            out[0] = '\0';
        return 0;
    }
    return 1;
}

int hub_pmd_negotiate(const char *hdr, size_t len, char *out, size_t cap)
{
    struct hub_pmd_scan s;
    struct offer o;
    const char *name;
    size_t nlen;
    int rc;

    hub_pmd_scan_init(&s, hdr, len);
    while ((rc = hub_pmd_scan_offer(&s, &name, &nlen)) != 0) {
        if (rc < 0 || !name_is(name, nlen, PMD_NAME))
            continue;
        if (offer_read(&s, &o) == 0)
            return answer(&o, out, cap);
    }
    if (cap)
        out[0] = '\0';
    return 0;
}
