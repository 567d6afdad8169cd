/*
 * tests/unit/fake_resp.c - the fake Redis of tests/unit/fake_resp.h: a
 * listening socket, a thread that accepts one connection at a time, and
 * a small RESP command reader (arrays of bulk strings, as hiredis's
 * formatter writes them).
 *
 * Thread: see fake_resp.h.
 */
#include "fake_resp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>

static void die(const char *what)
{
    fprintf(stderr, "fake_resp: %s: %s\n", what, strerror(errno));
    abort();
}

/* Wait for fd to be readable; false when the fake stops. */
static bool wait_in(int fd, int stop)
{
    struct pollfd p[2] = {{.fd = fd, .events = POLLIN},
                          {.fd = stop, .events = POLLIN}};

    for (;;) {
        int r = poll(p, 2, -1);

        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            die("poll");
        if (p[1].revents)
            return false;
        if (p[0].revents)
            return true;
    }
}

/* More input into fc->in; false at EOF or stop. */
static bool fill(struct fake_conn *fc)
{
    ssize_t k;

    if (fc->cap - fc->len < 65536) {
        fc->cap = fc->cap ? fc->cap * 2 : 131072;
        fc->in = realloc(fc->in, fc->cap);
        if (!fc->in)
            die("realloc");
    }
    /* A TLS record already read waits in OpenSSL, not in the socket. */
    if (!(fc->ssl && SSL_pending(fc->ssl)) && !wait_in(fc->fd, fc->stop))
        return false;
    if (fc->ssl)
        k = SSL_read(fc->ssl, fc->in + fc->len, (int)(fc->cap - fc->len));
    else
        k = read(fc->fd, fc->in + fc->len, fc->cap - fc->len);
    if (k <= 0)
        return false;
    fc->len += (size_t)k;
    return true;
}

/* "<c><number>\r\n" at *at: the number, *at past it; -2 when incomplete. */
static long number(const struct fake_conn *fc, size_t *at, char c)
{
    char *end;
    long v;
    const char *nl;

    if (*at >= fc->len)
        return -2;
    if (fc->in[*at] != c)
        die("not a command");
    nl = memchr(fc->in + *at, '\n', fc->len - *at);
    if (!nl)
        return -2;
    v = strtol(fc->in + *at + 1, &end, 10);
    *at = (size_t)(nl - fc->in) + 1;
    return v;
}

/* One whole command at the start of fc->in: its length, or 0. */
static size_t parse(struct fake_conn *fc)
{
    size_t at = 0;
    long argc = number(fc, &at, '*');

    if (argc == -2)
        return 0;
    if (argc < 1 || argc > FAKE_RESP_ARGS)
        die("too many words");
    for (long i = 0; i < argc; i++) {
        long n = number(fc, &at, '$');

        if (n == -2 || at + (size_t)n + 2 > fc->len)
            return 0;
        free(fc->arg[i]);
        fc->arg[i] = malloc((size_t)n + 1);
        if (!fc->arg[i])
            die("malloc");
        memcpy(fc->arg[i], fc->in + at, (size_t)n);
        fc->arg[i][n] = '\0';
        fc->arglen[i] = (size_t)n;
        at += (size_t)n + 2;
    }
    fc->argc = (int)argc;
    return at;
}

int fake_resp_read(struct fake_conn *fc)
{
    for (;;) {
        size_t n = parse(fc);

        if (n) {
            memmove(fc->in, fc->in + n, fc->len - n);
            fc->len -= n;
            return fc->argc;
        }
        if (!fill(fc))
            return -1;
    }
}

bool fake_resp_is(const struct fake_conn *fc, int i, const char *s)
{
    return i < fc->argc && !strcasecmp(fc->arg[i], s);
}

void fake_resp_write(struct fake_conn *fc, const char *s, size_t n)
{
    if (!n)
        n = strlen(s);
    while (n) {
        ssize_t k = fc->ssl ? SSL_write(fc->ssl, s, (int)n)
                            : send(fc->fd, s, n, MSG_NOSIGNAL);

        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return; /* the peer went: the test sees it its own way */
        s += k;
        n -= (size_t)k;
    }
}

void fake_resp_split(struct fake_conn *fc, const char *s, size_t n,
                     size_t piece)
{
    const struct timespec ms = {0, 1000000};

    if (!n)
        n = strlen(s);
    while (n) {
        size_t k = n < piece ? n : piece;

        fake_resp_write(fc, s, k);
        s += k;
        n -= k;
        if (n)
            nanosleep(&ms, NULL);
    }
}

void fake_resp_drain(struct fake_conn *fc)
{
    while (fill(fc))
        fc->len = 0;
}

static void *fake_main(void *p)
{
    struct fake_resp *f = p;

    while (wait_in(f->lfd, f->pipe[0])) {
        struct fake_conn fc = {.stop = f->pipe[0]};

        fc.fd = accept(f->lfd, NULL, NULL);
        if (fc.fd < 0)
            continue;
        if (f->tls) {
            fc.ssl = SSL_new(f->tls);
            if (!fc.ssl || SSL_set_fd(fc.ssl, fc.fd) != 1 ||
                SSL_accept(fc.ssl) != 1) {
                SSL_free(fc.ssl);
                close(fc.fd);
                continue;
            }
        }
        f->conns++;
        f->serve(&fc, f->arg);
        if (fc.ssl) {
            SSL_shutdown(fc.ssl);
            SSL_free(fc.ssl);
        }
        close(fc.fd);
        free(fc.in);
        for (int i = 0; i < FAKE_RESP_ARGS; i++)
            free(fc.arg[i]);
    }
    return NULL;
}

static int listener(int *port, bool listen_too)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t al = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) ||
        (listen_too && listen(fd, 16)) ||
        getsockname(fd, (struct sockaddr *)&a, &al))
        die("listen");
    *port = ntohs(a.sin_port);
    return fd;
}

void fake_resp_start_tls(struct fake_resp *f, SSL_CTX *tls,
                         fake_resp_serve_fn *serve, void *arg)
{
    signal(SIGPIPE, SIG_IGN);
    f->tls = tls;
    f->lfd = listener(&f->port, true);
    f->serve = serve;
    f->arg = arg;
    f->conns = 0;
    if (pipe(f->pipe) || pthread_create(&f->thread, NULL, fake_main, f))
        die("start");
}

void fake_resp_start(struct fake_resp *f, fake_resp_serve_fn *serve,
                     void *arg)
{
    fake_resp_start_tls(f, NULL, serve, arg);
}

void fake_resp_stop(struct fake_resp *f)
{
    if (write(f->pipe[1], "x", 1) != 1)
        die("stop");
    pthread_join(f->thread, NULL);
    close(f->pipe[0]);
    close(f->pipe[1]);
    close(f->lfd);
}

int fake_resp_closed_port(void)
{
    int port, fd = listener(&port, false);

    close(fd);
    return port;
}

static void run_tick(struct ev_loop *loop, ev_timer *t, int revents)
{
    (void)loop;
    (void)t;
    (void)revents;
}

bool fake_resp_run(struct ev_loop *loop, const atomic_bool *done,
                   double max)
{
    /* A tick wakes the loop to look at *done, which the fake's thread
     * may set. */
    ev_timer tick;
    ev_tstamp end;

    ev_now_update(loop);
    end = ev_now(loop) + max;
    ev_timer_init(&tick, run_tick, 0.01, 0.01);
    ev_timer_start(loop, &tick);
    while (!atomic_load(done) && ev_now(loop) < end)
        ev_run(loop, EVRUN_ONCE);
    ev_timer_stop(loop, &tick);
    return atomic_load(done);
}
