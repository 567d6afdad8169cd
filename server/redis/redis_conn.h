/*
 * server/redis/redis_conn.h - how this process reaches its Redis (--redis):
 * the one place that opens a connection and starts its session, for the
 * backplane's two asynchronous connections (server/redis/redis.c) and the
 * webhook sender's synchronous one (server/webhook/webhook_stream.c).
 *
 * A session starts with AUTH when a password is in force (the URL's, or
 * --redis-password-file's as the last SIGHUP left it: read at each
 * connect, so a new password applies from the next reconnect), as
 * "AUTH user pass" when the URL names a user, then SELECT of the URL's db
 * as the caller asks. Transport choices (TLS, and a Sentinel that names
 * the master to connect to) belong here as well: callers hold a struct
 * srv_redis_conn and name nothing else of them.
 *
 * Thread: any. A struct srv_redis_conn is not changed after init; the
 * secret it borrows has its own lock (server/config/secret.h).
 */
#ifndef SRV_REDIS_CONN_H
#define SRV_REDIS_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/time.h>

#include <openssl/ssl.h>

#include "server/config/redis_url.h"
#include "server/redis/redis_async.h"
#include "server/redis/redis_sentinel.h"
#include "server/redis/redis_sync.h"

struct srv_config;
struct srv_secret;
struct srv_secrets;

struct srv_redis_conn {
    struct srv_redis_url url;      /* where, as whom, which db (a copy) */
    struct srv_secret *pass;       /* the password in force, borrowed
                                      (outlives the struct); NULL: the
                                      URL's */
    SSL_CTX *tls;                  /* rediss://: owned; NULL: plaintext */
    char tls_name[256];            /* name to verify; "": the host's */
    struct srv_redis_sentinels sentinels; /* n == 0: the URL's address */
};

void srv_redis_conn_init(struct srv_redis_conn *c,
                         const struct srv_redis_url *u,
                         struct srv_secret *pass);
/*
 * The whole of it from the configuration: --redis (or, with sentinels
 * only, its default), the password in force (sec's, borrowed), TLS
 * (rediss://, --redis-tls-*) and the sentinels (--redis-sentinel,
 * --redis-master, --redis-sentinel-password-file). 0, or -EINVAL with
 * the reason in why (len bytes): a CA, certificate or key OpenSSL refuses.
 */
int srv_redis_conn_from_config(struct srv_redis_conn *c,
                               const struct srv_config *cfg,
                               struct srv_secrets *sec, char *why, size_t len);
/* What init and a TLS context hold. */
void srv_redis_conn_fini(struct srv_redis_conn *c);

/* Where Redis is for a log line: "host:port", or "master NAME via N
 * sentinels" (out of cap bytes); TLS or not is said apart. */
void srv_redis_conn_describe(const struct srv_redis_conn *c, char *out,
                             size_t cap);

/*
 * With sentinels the address connected to must be the primary: a start
 * asks ROLE and this says whether the answer is "master" (else why).
 */
bool srv_redis_conn_checks_role(const struct srv_redis_conn *c);
bool srv_redis_conn_role_ok(const redisReply *r, char *why, size_t len);

/* When a session SELECTs the URL's db. */
enum srv_redis_select {
    SRV_REDIS_SELECT_NONE,         /* never: pub/sub knows no db */
    SRV_REDIS_SELECT_NONZERO,      /* a db other than 0, where sessions
                                      start */
    SRV_REDIS_SELECT_ALWAYS,
};

/* One command of a session's start: argc words argv[i] of lens[i] bytes.
 * 0 to go on; anything else stops the start and is returned. */
typedef int srv_redis_send_fn(void *ctx, int argc, const char **argv,
                              const size_t *lens);

/*
 * The commands that start a session on a new connection, in order: AUTH
 * when a password is in force, then SELECT as sel says; each goes to
 * send(ctx, ...). The copy of the password is wiped before this returns
 * (commands are formatted when they are queued). 0, or the first nonzero
 * value send returned.
 */
int srv_redis_conn_setup(const struct srv_redis_conn *c,
                         enum srv_redis_select sel, srv_redis_send_fn *send,
                         void *ctx);

/*
 * A new asynchronous connection on loop (server/redis/redis_async.h) to
 * at (NULL: the URL's address; with sentinels, the primary they named),
 * connecting: the caller sets its callbacks and queues the start
 * (srv_redis_conn_setup, then ROLE when srv_redis_conn_checks_role)
 * before anything else. NULL with the reason in why (len bytes) when it
 * could not even begin.
 */
struct srv_redis_async *srv_redis_conn_async(const struct srv_redis_conn *c,
                                             struct ev_loop *loop,
                                             const struct srv_redis_addr *at,
                                             char *why, size_t len);

/*
 * A synchronous connection, ready for commands: to the primary the
 * sentinels name (asked first, each within timeout) or the URL's address,
 * connected within timeout, which then bounds every command too, AUTHed,
 * SELECTed (always, db 0 too) and, with sentinels, its ROLE checked. NULL with
 * the reason in why (len bytes) when a step failed or Redis refused one.
 */
struct srv_redis_sync *srv_redis_conn_sync(const struct srv_redis_conn *c,
                                           const struct timeval *timeout,
                                           char *why, size_t len);

#endif
