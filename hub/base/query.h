/*
 * hub/base/query.h - URL query strings: split "a=1&b=x%20y" into decoded pairs.
 * The caller owns the storage (a fixed array); nothing allocates.
 * Pure: any thread.
 */
#ifndef HUB_QUERY_H
#define HUB_QUERY_H

#include <stddef.h>

#define HUB_QUERY_MAX_PARAMS 32
#define HUB_QUERY_MAX_BYTES 4096

struct hub_query {
    unsigned n;
    struct {
        char *key;           /* decoded; points into buf */
        char *value;         /* decoded; "" when absent */
    } params[HUB_QUERY_MAX_PARAMS];
    char buf[HUB_QUERY_MAX_BYTES];
};

/*
 * 0, or -E2BIG (too many / too long), -EINVAL (bad percent escape, or one
 * that decodes to a NUL byte). Empty segments ("a=1&&b=2") are skipped. On
 * error q->n is 0.
 */
int hub_query_parse(struct hub_query *q, const char *query, size_t len);
/* Borrowed from q; NULL when key is absent (keys compare exactly). */
const char *hub_query_find(const struct hub_query *q, const char *key);
/*
 * Percent-decode (and '+' to space) src into dst and NUL-terminate it;
 * dst_len counts the terminator. 0, -EINVAL (as above) or -E2BIG.
 */
int hub_query_decode(char *dst, size_t dst_len, const char *src,
                     size_t src_len);

#endif
