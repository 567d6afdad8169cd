/*
 * server/lws/tlsread.h - one read of a TLS session the read bypass took
 * over (server/lws/direct.c): the decrypted bytes come from the session's
 * own OpenSSL SSL object (lws_get_ssl()), the one lws writes through.
 * docs/LWS.md, "The read bypass", says why lws 4.1.6 lets us read it.
 * Nothing here knows lws: tests/unit/test_tlsread.c drives it over BIO
 * pairs.
 *
 * The caller needs two facts a plain recv() never gives: OpenSSL may hold
 * decrypted bytes the socket will never signal (SRV_TLSREAD_MORE: read the
 * session again without waiting for a socket event), and a read may need
 * the socket writable first (SRV_TLSREAD_WANT_WRITE: OpenSSL wrote
 * something from inside SSL_read() that the send buffer could not take.
 * lws turns renegotiation off, and OpenSSL 3.0 answers a KeyUpdate with
 * the next SSL_write(), so this is for other OpenSSL versions).
 *
 * Thread: the session's loop (the one lws writes it from).
 */
#ifndef SRV_TLSREAD_H
#define SRV_TLSREAD_H

#include <stddef.h>
#include <sys/types.h>

#include <openssl/ssl.h>

/* Set in *flags by srv_tlsread(). */
#define SRV_TLSREAD_MORE 1u       /* OpenSSL still holds bytes: read again */
#define SRV_TLSREAD_WANT_WRITE 2u /* retry the read once the socket is
                                     writable */

/*
 * Read what ssl (borrowed) has, up to cap bytes into buf, record after
 * record until OpenSSL needs the socket (SSL_ERROR_WANT_READ) or buf is
 * full. Returns the bytes read (> 0), -EAGAIN when there were none yet,
 * or 0 when the session is over: the peer's close_notify, EOF, a reset or
 * a TLS error (nothing more can be read; the error queue is cleared).
 * Bytes read before such an end are returned first, with
 * SRV_TLSREAD_MORE: the next read finds the end again (OpenSSL keeps it).
 * *flags gets SRV_TLSREAD_* bits.
 */
ssize_t srv_tlsread(SSL *ssl, void *buf, size_t cap, unsigned *flags);

#endif
