/*
 * tests/unit/fake_resp.h - a fake Redis (or sentinel) for the transport's
 * unit tests: a loopback listening socket on port 0 served by a thread of
 * the test, one connection at a time, each handed to the test's serve
 * function, which reads commands (fake_resp_read) and writes canned RESP
 * bytes (fake_resp_write, or fake_resp_split: in pieces, to show partial
 * replies).
 *
 * fake_resp_start_tls accepts each connection under TLS with the server
 * context given first (one that fails its handshake is closed, not
 * served). SIGPIPE is ignored from the first start on (OpenSSL writes
 * with write(2)).
 *
 * Thread: fake_resp_start and fake_resp_stop on the test's thread; serve
 * and the fake_resp_read/write calls on the fake's thread. What serve
 * records in its arg is the test's to read after fake_resp_stop (which
 * joins the thread).
 */
#ifndef FAKE_RESP_H
#define FAKE_RESP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include <openssl/ssl.h>

#define FAKE_RESP_ARGS 16

struct fake_conn {
    int fd;
    SSL *ssl;           /* NULL: plaintext */
    int stop;           /* the fake's stop pipe (read end) */
    char *in;           /* bytes read, not yet parsed */
    size_t len, cap;
    char *arg[FAKE_RESP_ARGS]; /* the last command's words (owned) */
    size_t arglen[FAKE_RESP_ARGS];
    int argc;
};

struct fake_resp;
typedef void fake_resp_serve_fn(struct fake_conn *fc, void *arg);

struct fake_resp {
    int lfd, port;
    int pipe[2];
    pthread_t thread;
    fake_resp_serve_fn *serve;
    void *arg;
    SSL_CTX *tls;      /* borrowed; NULL: plaintext */
    int conns; /* connections served (read after fake_resp_stop) */
};

/* Listen on 127.0.0.1:0 and serve each connection with serve(fc, arg). */
void fake_resp_start(struct fake_resp *f, fake_resp_serve_fn *serve,
                     void *arg);
/* The same under TLS with tls (borrowed, outlives the fake). */
void fake_resp_start_tls(struct fake_resp *f, SSL_CTX *tls,
                         fake_resp_serve_fn *serve, void *arg);
/* Stop serving (a serve blocked in fake_resp_read returns -1), join. */
void fake_resp_stop(struct fake_resp *f);

/* The next command: its word count (fc->arg, fc->arglen), or -1 when the
 * peer closed or the fake stops. */
int fake_resp_read(struct fake_conn *fc);
/* Is word i of the last command s (case-insensitive)? */
bool fake_resp_is(const struct fake_conn *fc, int i, const char *s);
/* Write all of s (n bytes; n 0: strlen). */
void fake_resp_write(struct fake_conn *fc, const char *s, size_t n);
/* Write s in pieces of at most piece bytes, a millisecond apart. */
void fake_resp_split(struct fake_conn *fc, const char *s, size_t n,
                     size_t piece);
/* Wait until the peer closes (or the fake stops), reading what it sends. */
void fake_resp_drain(struct fake_conn *fc);

/* Run loop until *done (set by the loop's callbacks or the fake's
 * thread), or for at most max seconds: *done then. */
struct ev_loop;
bool fake_resp_run(struct ev_loop *loop, const atomic_bool *done,
                   double max);

/* A port nothing listens on (bound, then closed). */
int fake_resp_closed_port(void);

#endif
