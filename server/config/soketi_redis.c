/*
 * server/config/soketi_redis.c - soketi's database.redis as lubdub's
 * --redis URL and --redis-sentinel list (server/config/soketi_redis.h).
 *
 * Invariant: nothing is cut: the URL is sized from its parts, and a
 * sentinel list that does not fit is an error.
 *
 * Thread: any (pure).
 */
#include "server/config/soketi_redis.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* src with every byte but RFC 3986's unreserved ones percent-escaped,
 * written at dst (room for 3 * strlen(src) + 1 bytes); returns the end. */
static char *sk_pct(char *dst, const char *src)
{
    for (; *src; src++) {
        unsigned char ch = (unsigned char)*src;

        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
            (ch >= '0' && ch <= '9') || strchr("-._~", ch))
            *dst++ = (char)ch;
        else
            dst += sprintf(dst, "%%%02X", ch);
    }
    *dst = '\0';
    return dst;
}

int srv_soketi_redis_url(const char *host, const char *port, const char *db,
                         const char *user, const char *pass, char **url)
{
    const char *lb = strchr(host, ':') ? "[" : "";
    size_t len;
    char *o;

    /* Each escaped byte takes at most three. */
    len = sizeof("redis://:@[]:/") + strlen(host) + strlen(port) +
          strlen(db) + (pass ? 3 * strlen(pass) : 0) +
          (pass && user ? 3 * strlen(user) : 0);
    *url = o = malloc(len);
    if (!o)
        return -ENOMEM;
    o += sprintf(o, "redis://");
    if (pass) {
        if (user)
            o = sk_pct(o, user);
        *o++ = ':';
        o = sk_pct(o, pass);
        *o++ = '@';
    }
    sprintf(o, "%s%s%s:%s/%s", lb, host, *lb ? "]" : "", port, db);
    return 0;
}

int srv_soketi_sentinels(const char *text, char *out, size_t len)
{
    json_t *arr = json_loads(text, JSON_DECODE_ANY, NULL), *s;
    const char *lb;
    size_t i, o = 0;
    int rc = 0;

    out[0] = '\0';
    if (!json_is_array(arr) || !json_array_size(arr))
        rc = -EINVAL;
    json_array_foreach(arr, i, s) {
        const char *host = json_string_value(json_object_get(s, "host"));
        json_t *port = json_object_get(s, "port");

        if (!host || (port && !json_is_integer(port))) {
            rc = -EINVAL;
            break;
        }
        if (o >= len) {
            rc = -E2BIG;
            break;
        }
        lb = strchr(host, ':') ? "[" : "";
        o += (size_t)snprintf(out + o, len - o, "%s%s%s%s:%lld",
                              i ? "," : "", lb, host, *lb ? "]" : "",
                              port ? (long long)json_integer_value(port)
                                   : 26379LL);
    }
    json_decref(arr);
    if (!rc && o >= len)
        rc = -E2BIG;
    if (rc)
        out[0] = '\0';
    return rc;
}
