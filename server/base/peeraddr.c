/*
 * server/base/peeraddr.c - client addresses, --trusted-proxies CIDRs and the
 * X-Forwarded-For walk (server/base/peeraddr.h).
 *
 * Every input here may come from a peer (an X-Forwarded-For header is
 * whatever the client or a proxy wrote), so each entry is copied into a
 * bounded buffer before inet_pton() sees it, and nothing is allocated.
 *
 * Thread: any.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "server/base/peeraddr.h"

static const uint8_t v4_mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff,
                                       0xff };

bool srv_peeraddr_is_set(const struct srv_peeraddr *a)
{
    for (size_t i = 0; i < sizeof(a->b); i++)
        if (a->b[i])
            return true;
    return false;
}

bool srv_peeraddr_equal(const struct srv_peeraddr *a,
                        const struct srv_peeraddr *b)
{
    return memcmp(a->b, b->b, sizeof(a->b)) == 0;
}

static bool is_v4(const struct srv_peeraddr *a)
{
    return memcmp(a->b, v4_mapped, sizeof(v4_mapped)) == 0;
}

static void set_v4(struct srv_peeraddr *a, const void *in4)
{
    memcpy(a->b, v4_mapped, sizeof(v4_mapped));
    memcpy(a->b + 12, in4, 4);
}

int srv_peeraddr_from_sockaddr(struct srv_peeraddr *a,
                               const struct sockaddr *sa, socklen_t len)
{
    if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        set_v4(a, &((const struct sockaddr_in *)sa)->sin_addr);
        return 0;
    }
    if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        memcpy(a->b, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        return 0;
    }
    return -EAFNOSUPPORT;
}

static bool all_digits(const char *s, size_t len)
{
    if (!len || len > 5)
        return false;
    for (size_t i = 0; i < len; i++)
        if (s[i] < '0' || s[i] > '9')
            return false;
    return true;
}

int srv_peeraddr_parse(struct srv_peeraddr *a, const char *s, size_t len)
{
    char buf[SRV_PEERADDR_ENTRY_MAX + 1];
    const char *colon;
    uint8_t in[16];

    if (!len || len > SRV_PEERADDR_ENTRY_MAX)
        return -EINVAL;
    if (s[0] == '[') {
        /* "[v6]" or "[v6]:port" */
        const char *close = memchr(s, ']', len);
        size_t rest;

        if (!close)
            return -EINVAL;
        rest = len - (size_t)(close + 1 - s);
        if (rest && (close[1] != ':' || !all_digits(close + 2, rest - 1)))
            return -EINVAL;
        len = (size_t)(close - s - 1);
        memcpy(buf, s + 1, len);
        buf[len] = '\0';
        if (inet_pton(AF_INET6, buf, in) != 1)
            return -EINVAL;
        memcpy(a->b, in, 16);
        return 0;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    colon = strchr(buf, ':');
    if (colon && !strchr(colon + 1, ':')) {
        /* One colon: "v4:port" (an IPv6 address has at least two). */
        if (!all_digits(colon + 1, strlen(colon + 1)))
            return -EINVAL;
        buf[colon - buf] = '\0';
    } else if (colon) {
        if (inet_pton(AF_INET6, buf, in) != 1)
            return -EINVAL;
        memcpy(a->b, in, 16);
        return 0;
    }
    if (inet_pton(AF_INET, buf, in) != 1)
        return -EINVAL;
    set_v4(a, in);
    return 0;
}

char *srv_peeraddr_format(const struct srv_peeraddr *a, char *buf)
{
    if (!srv_peeraddr_is_set(a))
        strcpy(buf, "-");
    else if (is_v4(a))
        inet_ntop(AF_INET, a->b + 12, buf, SRV_PEERADDR_STRLEN);
    else
        inet_ntop(AF_INET6, a->b, buf, SRV_PEERADDR_STRLEN);
    return buf;
}

static void clear_host_bits(struct srv_peeraddr *a, unsigned bits)
{
    for (unsigned i = 0; i < 16; i++) {
        if (bits >= 8 * (i + 1))
            continue;
        if (bits <= 8 * i)
            a->b[i] = 0;
        else
            a->b[i] &= (uint8_t)(0xff << (8 - (bits - 8 * i)));
    }
}

/* One "addr[/bits]" of len bytes (spaces trimmed): no brackets, no port. */
static int parse_cidr(struct srv_peeraddr_cidr *c, const char *s, size_t len)
{
    const char *slash = memchr(s, '/', len);
    size_t alen = slash ? (size_t)(slash - s) : len;
    char buf[SRV_PEERADDR_ENTRY_MAX + 1];
    unsigned max, bits;
    uint8_t in[16];

    if (!alen || alen > SRV_PEERADDR_ENTRY_MAX)
        return -EINVAL;
    memcpy(buf, s, alen);
    buf[alen] = '\0';
    if (memchr(buf, ':', alen)) {
        if (inet_pton(AF_INET6, buf, in) != 1)
            return -EINVAL;
        memcpy(c->net.b, in, 16);
        max = 128;
    } else {
        if (inet_pton(AF_INET, buf, in) != 1)
            return -EINVAL;
        set_v4(&c->net, in);
        max = 32;
    }
    bits = max;
    if (slash) {
        size_t blen = len - alen - 1;

        if (!all_digits(slash + 1, blen) || blen > 3)
            return -EINVAL;
        bits = 0;
        for (size_t i = 0; i < blen; i++)
            bits = bits * 10 + (unsigned)(slash[1 + i] - '0');
        if (bits > max)
            return -EINVAL;
    }
    /* IPv4 prefixes count from the mapped address's 96 fixed bits. */
    if (max == 32)
        bits += 96;
    c->bits = (uint8_t)bits;
    clear_host_bits(&c->net, bits);
    return 0;
}

int srv_peeraddr_cidrs_parse(struct srv_peeraddr_cidrs *set, const char *list,
                             char *err, size_t errlen)
{
    const char *p = list;

    set->n = 0;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);

        while (len && (*p == ' ' || *p == '\t')) {
            p++;
            len--;
        }
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (!len) {
            snprintf(err, errlen, "an empty entry");
            return -EINVAL;
        }
        if (set->n == SRV_PEERADDR_CIDRS_MAX) {
            snprintf(err, errlen, "more than %d entries",
                     SRV_PEERADDR_CIDRS_MAX);
            return -EINVAL;
        }
        if (parse_cidr(&set->c[set->n], p, len)) {
            snprintf(err, errlen,
                     "\"%.*s\" is not an address or CIDR (like 10.0.0.0/8 "
                     "or 2001:db8::/32)",
                     (int)(len > 64 ? 64 : len), p);
            return -EINVAL;
        }
        set->n++;
        if (!e)
            return 0;
        p = e + 1;
    }
}

static bool in_cidr(const struct srv_peeraddr_cidr *c,
                    const struct srv_peeraddr *a)
{
    unsigned whole = c->bits / 8, rest = c->bits % 8;

    if (memcmp(c->net.b, a->b, whole))
        return false;
    return !rest ||
           ((a->b[whole] ^ c->net.b[whole]) & (uint8_t)(0xff << (8 - rest))) ==
               0;
}

bool srv_peeraddr_cidrs_match(const struct srv_peeraddr_cidrs *set,
                              const struct srv_peeraddr *a)
{
    for (unsigned i = 0; set && i < set->n; i++)
        if (in_cidr(&set->c[i], a))
            return true;
    return false;
}

int srv_peeraddr_forwarded(const struct srv_peeraddr_cidrs *trusted,
                           const struct srv_peeraddr *peer, const char *xff,
                           size_t len, struct srv_peeraddr *client)
{
    struct srv_peeraddr hop = *peer;

    *client = *peer;
    if (!len || !srv_peeraddr_cidrs_match(trusted, peer))
        return 0;
    /* Right to left: each entry was appended by the hop to its right. */
    while (len) {
        size_t end = len, start;
        struct srv_peeraddr a;

        while (end && (xff[end - 1] == ' ' || xff[end - 1] == '\t'))
            end--;
        start = end;
        while (start && xff[start - 1] != ',')
            start--;
        len = start ? start - 1 : 0;
        while (start < end && (xff[start] == ' ' || xff[start] == '\t'))
            start++;
        if (start == end)
            continue; /* an empty element: "a,,b" or a trailing comma */
        if (srv_peeraddr_parse(&a, xff + start, end - start)) {
            /* Not an address ("unknown", a forged token): the last
             * trusted hop is the nearest address known to be true. */
            *client = hop;
            return -EINVAL;
        }
        if (!srv_peeraddr_cidrs_match(trusted, &a)) {
            *client = a;
            return 0;
        }
        hop = a;
    }
    /* Every entry is a trusted proxy: the left-most is the client. */
    *client = hop;
    return 0;
}
