/*
 * server/redis/redis_tls.h - TLS to Redis (rediss://): the OpenSSL client
 * context every connection of this process to Redis and its sentinels
 * shares, and the per-connection session on a connected socket, for the
 * asynchronous (server/redis/redis_async.h) and the synchronous
 * (server/redis/redis_sync.h) transport alike.
 *
 * Verification is always on: the peer's chain must lead to the CA file
 * given (--redis-tls-ca-file) or, without one, to the system's default
 * store, and its certificate must name the host connected to (a DNS name
 * or an IP address), or the name given by --redis-tls-server-name, which
 * is also sent as SNI. TLS 1.2 is the least version offered.
 *
 * Thread: any. A context is read-only once made (OpenSSL makes sessions
 * from one context on several threads).
 */
#ifndef SRV_REDIS_TLS_H
#define SRV_REDIS_TLS_H

#include <stddef.h>

#include <openssl/ssl.h>

/*
 * A client context: ca (NULL: the system's store), cert and key (both or
 * neither: the client certificate Redis may ask for). Owned by the
 * caller (SSL_CTX_free); NULL with the reason in why (len bytes).
 */
SSL_CTX *srv_redis_tls_ctx_create(const char *ca, const char *cert,
                                  const char *key, char *why, size_t len);

/*
 * A client session on the connected socket fd, to verify host (or name,
 * when not NULL or ""). Owned by the caller (SSL_free; fd stays the
 * caller's); NULL with the reason in why.
 */
SSL *srv_redis_tls_session(SSL_CTX *ctx, int fd, const char *host,
                           const char *name, char *why, size_t len);

/*
 * Why a TLS call on s failed (ret its return value): the certificate's
 * verification failure, OpenSSL's error queue (emptied), or the errno of
 * a failed system call, as one line in why. Returns OpenSSL's error code
 * for ret (SSL_ERROR_WANT_READ and SSL_ERROR_WANT_WRITE leave why as is).
 */
int srv_redis_tls_error(SSL *s, int ret, char *why, size_t len);

#endif
