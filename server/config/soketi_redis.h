/*
 * server/config/soketi_redis.h - soketi's database.redis spelled as
 * lubdub's options: its host, port, db, username and password as a --redis
 * URL, its sentinels array as a --redis-sentinel list. Pure text
 * conversions; load_soketi.c decides what to read and what to warn of.
 *
 * Thread: any (pure).
 */
#ifndef SRV_SOKETI_REDIS_H
#define SRV_SOKETI_REDIS_H

#include <stddef.h>

/*
 * redis://[user:pass@]host:port/db in *url (owned; free() it), user and
 * pass percent-escaped, [host] bracketed when it holds a ':'. No part is
 * cut, whatever its length (lubdub's URL parser then refuses one too
 * long, saying which). user is used only with pass (NULL: none). 0 or
 * -ENOMEM.
 */
int srv_soketi_redis_url(const char *host, const char *port, const char *db,
                         const char *user, const char *pass, char **url);

/* Room for --redis-sentinel's longest list: its most sentinels
 * (SRV_REDIS_SENTINELS_MAX, 16), each a bracketed host below 256 bytes, a
 * port and a comma. */
#define SRV_SOKETI_SENTINELS_LEN (16 * (256 + 2 + 7 + 1))

/*
 * database.redis.sentinels (text: [{"host": ..., "port": ...}, ...], port
 * 26379 when missing) as "host:port,..." in out (len bytes). 0; -EINVAL
 * when text is not a non-empty array of such objects; -E2BIG when the
 * list does not fit (never cut).
 */
int srv_soketi_sentinels(const char *text, char *out, size_t len);

#endif
