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

#include <stddef.h>
#include <sys/time.h>

#include <openssl/ssl.h>

#include "server/config/redis_url.h"
#include "server/redis/redis_async.h"
#include "server/redis/redis_sync.h"

struct srv_secret;

struct srv_redis_conn {
    struct srv_redis_url url;      /* where, as whom, which db (a copy) */
    struct srv_secret *pass;       /* the password in force, borrowed
                                      (outlives the struct); NULL: the
                                      URL's */
    SSL_CTX *tls;                  /* rediss://: owned; NULL: plaintext */
    char tls_name[256];            /* name to verify; "": the host's */
};

void srv_redis_conn_init(struct srv_redis_conn *c,
                         const struct srv_redis_url *u,
                         struct srv_secret *pass);
/* What init and a TLS context hold. */
void srv_redis_conn_fini(struct srv_redis_conn *c);

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
 * A new asynchronous connection on loop (server/redis/redis_async.h),
 * connecting: the caller sets its callbacks and queues the start
 * (srv_redis_conn_setup) before anything else. NULL with the reason in
 * why (len bytes) when it could not even begin.
 */
struct srv_redis_async *srv_redis_conn_async(const struct srv_redis_conn *c,
                                             struct ev_loop *loop, char *why,
                                             size_t len);

/*
 * A synchronous connection, ready for commands: connected within
 * timeout, which then bounds every command too, AUTHed and SELECTed
 * (always, db 0 too). NULL with the reason in why (len bytes) when a step
 * failed or Redis refused one.
 */
struct srv_redis_sync *srv_redis_conn_sync(const struct srv_redis_conn *c,
                                           const struct timeval *timeout,
                                           char *why, size_t len);

#endif
