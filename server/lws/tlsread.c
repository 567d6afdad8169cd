/*
 * server/lws/tlsread.c - one read of a TLS session the read bypass took
 * over, through the session's own SSL (server/lws/tlsread.h).
 *
 * SSL_read() hands out at most one record (16 KiB) a call, so a read
 * loops until OpenSSL needs the socket or the buffer is full: the same
 * 64 KiB a readiness as a plain session's recv(). Without read-ahead
 * (lws 4.1.6 never turns it on) OpenSSL takes from the socket only the
 * record it decrypts, so what it still holds after a full buffer is the
 * rest of that record (SSL_has_pending()), and the caller reads it again
 * without a socket event. lws sets SSL_MODE_RELEASE_BUFFERS on every
 * server SSL: an idle session's SSL keeps no read buffer, as on lws's
 * own path (whose reads are the same SSL_read() calls).
 *
 * OpenSSL's per-thread error queue is cleared before each call and after
 * a failure, as lws does around its own calls (lws_ssl_capable_read()), so
 * an error of ours is never taken for one of lws's writes or of the
 * thread's other TLS users.
 *
 * Thread: the session's loop.
 */
#include <errno.h>
#include <limits.h>

#include <openssl/err.h>

#include "server/lws/tlsread.h"

ssize_t srv_tlsread(SSL *ssl, void *buf, size_t cap, unsigned *flags)
{
    unsigned char *p = buf;
    size_t got = 0;

    *flags = 0;
    while (got < cap) {
        size_t want = cap - got;
        int n;

        ERR_clear_error();
        n = SSL_read(ssl, p + got, want > INT_MAX ? INT_MAX : (int)want);
        if (n > 0) {
            got += (size_t)n;
            continue;
        }
        switch (SSL_get_error(ssl, n)) {
        case SSL_ERROR_WANT_READ:
            /* A post-handshake message (a KeyUpdate) with no data ends up
             * here too: OpenSSL handled it. */
            return got ? (ssize_t)got : -EAGAIN;
        case SSL_ERROR_WANT_WRITE:
            /* OpenSSL must send something first and the socket is full
             * (not seen with OpenSSL 3.0, which answers a KeyUpdate with
             * the next SSL_write(), tests/unit/test_tlsread.c): the read is
             * retried once it is writable. */
            *flags |= SRV_TLSREAD_WANT_WRITE;
            return got ? (ssize_t)got : -EAGAIN;
        default:
            /* SSL_ERROR_ZERO_RETURN (close_notify), SSL_ERROR_SYSCALL
             * (EOF, a reset), SSL_ERROR_SSL: no more bytes, ever. OpenSSL
             * answers the same on every later call (its shutdown flag, a
             * socket at EOF, its error state), so the bytes read before
             * go out first and the next read ends the session. */
            ERR_clear_error();
            if (!got)
                return 0;
            *flags |= SRV_TLSREAD_MORE;
            return (ssize_t)got;
        }
    }
    if (SSL_has_pending(ssl))
        *flags |= SRV_TLSREAD_MORE;
    return (ssize_t)got;
}
