/*
 * server/config/redis_url.c - parse the --redis URL of server/config/redis_url.h.
 */
#include "server/config/redis_url.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t errlen, const char *why)
{
    if (err && errlen)
        snprintf(err, errlen, "%s (want redis://[user:pass@]host:port/db)",
                 why);
    return -EINVAL;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = tolower(c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

/* Copy s[0..n) into out (cap bytes) decoding %XX; false when too long,
 * a bad escape or an escaped NUL. */
static bool decode(const char *s, size_t n, char *out, size_t cap)
{
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];

        if (c == '%') {
            int h, l;

            if (i + 2 >= n)
                return false;
            h = hexval((unsigned char)s[i + 1]);
            l = hexval((unsigned char)s[i + 2]);
            if (h < 0 || l < 0 || (h == 0 && l == 0))
                return false;
            c = h * 16 + l;
            i += 2;
        }
        if (o + 1 >= cap)
            return false;
        out[o++] = (char)c;
    }
    out[o] = '\0';
    return true;
}

/* A decimal in [lo, hi] spanning exactly s[0..n). */
static bool number(const char *s, size_t n, long lo, long hi, int *out)
{
    long v = 0;

    if (!n || n > 10)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi)
        return false;
    *out = (int)v;
    return true;
}

int srv_redis_url_parse(const char *s, struct srv_redis_url *u, char *err,
                        size_t errlen)
{
    static const char scheme[] = "redis://";
    const char *p, *end, *at, *host, *hend, *port = NULL, *slash;
    size_t hlen;

    memset(u, 0, sizeof(*u));
    u->port = 6379;
    if (!s || strncmp(s, scheme, sizeof(scheme) - 1))
        return fail(err, errlen, "not a redis:// URL");
    p = s + sizeof(scheme) - 1;
    for (const char *q = p; *q; q++)
        if ((unsigned char)*q <= ' ' || *q == 0x7f)
            return fail(err, errlen, "space or control character in URL");
    slash = strchr(p, '/');
    end = slash ? slash : p + strlen(p);
    /* The last '@' before the path ends the credentials. */
    at = NULL;
    for (const char *q = p; q < end; q++)
        if (*q == '@')
            at = q;
    if (at) {
        const char *colon = memchr(p, ':', (size_t)(at - p));

        if (colon) {
            if (!decode(p, (size_t)(colon - p), u->user, sizeof(u->user)) ||
                !decode(colon + 1, (size_t)(at - colon - 1), u->pass,
                        sizeof(u->pass)))
                return fail(err, errlen, "bad user or password");
        } else if (!decode(p, (size_t)(at - p), u->pass, sizeof(u->pass))) {
            return fail(err, errlen, "bad password");
        }
        if (u->user[0] && !u->pass[0])
            return fail(err, errlen, "user without password");
        host = at + 1;
    } else {
        host = p;
    }
    if (host < end && *host == '[') {
        const char *rb = memchr(host, ']', (size_t)(end - host));

        if (!rb)
            return fail(err, errlen, "unclosed [ in host");
        hlen = (size_t)(rb - host - 1);
        host++;
        hend = rb + 1;
        if (hend < end) {
            if (*hend != ':')
                return fail(err, errlen, "junk after ]");
            port = hend + 1;
        }
    } else {
        const char *colon = memchr(host, ':', (size_t)(end - host));

        hend = colon ? colon : end;
        hlen = (size_t)(hend - host);
        if (colon)
            port = colon + 1;
    }
    if (!hlen)
        return fail(err, errlen, "no host");
    if (hlen >= sizeof(u->host))
        return fail(err, errlen, "host too long");
    for (size_t i = 0; i < hlen; i++) {
        unsigned char c = (unsigned char)host[i];

        if (!(isalnum(c) || c == '.' || c == '-' || c == '_' || c == ':'))
            return fail(err, errlen, "bad character in host");
    }
    memcpy(u->host, host, hlen);
    u->host[hlen] = '\0';
    if (port && !number(port, (size_t)(end - port), 1, 65535, &u->port))
        return fail(err, errlen, "port must be 1..65535");
    if (slash && slash[1]) {
        if (!number(slash + 1, strlen(slash + 1), 0, 0x7fffffff, &u->db))
            return fail(err, errlen, "db must be a non-negative integer");
    }
    return 0;
}
