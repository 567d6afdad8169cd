/*
 * hub/base/query.c - split and percent-decode URL query strings.
 *
 * Invariant: every key and value in a parsed struct hub_query is a
 * NUL-terminated string inside q->buf, so a decoded NUL byte (%00) is
 * refused rather than silently cutting a value short. Nothing allocates.
 * Pure: any thread.
 */
#include "hub/base/query.h"

#include <errno.h>
#include <string.h>

static int hex_value(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/*
 * Decode src into dst without terminating it. Returns the decoded length,
 * -EINVAL or -E2BIG. A bad escape is an error rather than a literal '%'
 * because a signature computed over a guessed value could never match.
 */
static long decode(char *dst, size_t dst_len, const char *src, size_t src_len)
{
    size_t i = 0, o = 0;

    while (i < src_len) {
        unsigned char c = (unsigned char)src[i];

        if (c == '%') {
            int hi, lo;

            if (src_len - i < 3)
                return -EINVAL;
            hi = hex_value((unsigned char)src[i + 1]);
            lo = hex_value((unsigned char)src[i + 2]);
            if (hi < 0 || lo < 0)
                return -EINVAL;
            c = (unsigned char)(hi << 4 | lo);
            i += 3;
        } else {
            if (c == '+')
                c = ' ';
            i++;
        }
        if (c == '\0')
            return -EINVAL;
        if (o >= dst_len)
            return -E2BIG;
        dst[o++] = (char)c;
    }
    return (long)o;
}

int hub_query_decode(char *dst, size_t dst_len, const char *src,
                     size_t src_len)
{
    long n;

    if (dst_len == 0)
        return -E2BIG;
    /* Keep the last byte for the terminator. */
    n = decode(dst, dst_len - 1, src, src_len);
    if (n < 0)
        return (int)n;
    dst[n] = '\0';
    return 0;
}

static int parse(struct hub_query *q, const char *query, size_t len)
{
    size_t pos = 0, used = 0;

    while (pos < len) {
        const char *seg = query + pos;
        const char *amp = memchr(seg, '&', len - pos);
        size_t seg_len = amp ? (size_t)(amp - seg) : len - pos;
        const char *eq = memchr(seg, '=', seg_len);
        size_t key_len = eq ? (size_t)(eq - seg) : seg_len;
        long n;

        pos += seg_len + 1;
        /* "a=1&&b=2" and a trailing '&' carry no parameter. */
        if (seg_len == 0)
            continue;
        if (q->n == HUB_QUERY_MAX_PARAMS)
            return -E2BIG;

        n = decode(q->buf + used, sizeof(q->buf) - used, seg, key_len);
        if (n < 0 || used + (size_t)n + 1 > sizeof(q->buf))
            return n < 0 ? (int)n : -E2BIG;
        q->params[q->n].key = q->buf + used;
        used += (size_t)n;
        q->buf[used++] = '\0';

        if (eq)
            n = decode(q->buf + used, sizeof(q->buf) - used, eq + 1,
                       seg_len - key_len - 1);
        else
            n = 0;
        if (n < 0 || used + (size_t)n + 1 > sizeof(q->buf))
            return n < 0 ? (int)n : -E2BIG;
        q->params[q->n].value = q->buf + used;
        used += (size_t)n;
        q->buf[used++] = '\0';
        q->n++;
    }
    return 0;
}

int hub_query_parse(struct hub_query *q, const char *query, size_t len)
{
    int rc;

    q->n = 0;
    rc = parse(q, query, len);
    /* A half-filled table must not be mistaken for the whole query. */
    if (rc < 0)
        q->n = 0;
    return rc;
}

const char *hub_query_find(const struct hub_query *q, const char *key)
{
    unsigned i;

    for (i = 0; i < q->n; i++)
        if (strcmp(q->params[i].key, key) == 0)
            return q->params[i].value;
    return NULL;
}
