/*
 * server/config/redis_url.h - the --redis URL: redis://[user:pass@]host[:port][/db]
 * (also redis://:pass@host, and [v6addr] hosts), or rediss://... for TLS,
 * with the same rules. Percent-escapes in user and password are decoded.
 * Port 1..65535, default 6379; db a non-negative integer below 2^31,
 * default 0.
 *
 * Also the --redis-sentinel list: host[:port][,host[:port]...], each host
 * spelled as a URL's ([v6addr] in brackets), port default 26379, no empty
 * item, no address twice, at most a given number.
 *
 * Thread: any (pure).
 */
#ifndef SRV_REDIS_URL_H
#define SRV_REDIS_URL_H

#include <stdbool.h>
#include <stddef.h>

struct srv_redis_url {
    char host[256];
    int port;
    int db;
    char user[128];      /* "" = none (AUTH pass only) */
    char pass[256];      /* "" = no AUTH */
    bool tls;            /* rediss:// */
};

/* 0, or -EINVAL with a one-line reason in err. */
int srv_redis_url_parse(const char *s, struct srv_redis_url *u, char *err,
                        size_t errlen);

/* One sentinel's address. host as spelled, without brackets. */
struct srv_redis_addr {
    char host[256];
    int port;
};

/* The most sentinels --redis-sentinel names (validate.c checks it). */
#define SRV_REDIS_SENTINELS_MAX 16
/* A sentinel's port when its item names none. */
#define SRV_REDIS_SENTINEL_PORT 26379

/*
 * The comma-separated list s into out[0..*n) (room for max). 0, or -EINVAL
 * with a one-line reason in err naming the item at fault (*n is then 0).
 */
int srv_redis_sentinels_parse(const char *s, struct srv_redis_addr *out,
                              size_t max, size_t *n, char *err,
                              size_t errlen);

#endif
