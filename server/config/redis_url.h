/*
 * server/config/redis_url.h - the --redis URL: redis://[user:pass@]host[:port][/db]
 * (also redis://:pass@host, and [v6addr] hosts). Percent-escapes in user and
 * password are decoded. Port 1..65535, default 6379; db a
 * non-negative integer below 2^31, default 0.
 *
 * Thread: any (pure).
 */
#ifndef SRV_REDIS_URL_H
#define SRV_REDIS_URL_H

#include <stddef.h>

struct srv_redis_url {
    char host[256];
    int port;
    int db;
    char user[128];      /* "" = none (AUTH pass only) */
    char pass[256];      /* "" = no AUTH */
};

/* 0, or -EINVAL with a one-line reason in err. */
int srv_redis_url_parse(const char *s, struct srv_redis_url *u, char *err,
                        size_t errlen);

#endif
