/*
 * bench/idle_client.c - opens N idle Pusher WebSocket sessions and holds
 * them (S1, make bench-idle). Raw epoll, no lws: the client must not be
 * what limits the run.
 *
 * usage: idle_client [--deflate] [--resume] HOST PORT N [FIRST_SRC_OCTET]
 * Connects in batches of 500, rotating source addresses 127.0.0.X.. so
 * the 4-tuples never run out, waits for each session's
 * pusher:connection_established, prints "ready N failed F deflate D" (D:
 * sessions whose 101 accepted permessage-deflate) and then answers pings
 * (as a live idle client would) until stdin closes or SIGTERM, bounded by
 * 10 minutes. --deflate offers permessage-deflate in every upgrade, as a
 * browser does (make bench-compression: idle bytes per session with the
 * extension negotiated against without). --resume: each session sends
 * lubdub:resume ({"v":1,"channels":{}}, a first connect) once it is
 * established, so the hub keeps it as a resuming session (make
 * bench-recovery: idle bytes per session that asked to resume).
 *
 * Thread: single-threaded.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct conn {
    int fd;
    int state;          /* 0 connecting, 1 wait 101, 2 wait established, 3 ok */
    size_t have;
    char buf[1024];
};

static volatile sig_atomic_t stop;

static void on_term(int sig)
{
    (void)sig;
    stop = 1;
}

static const char *req_fmt =
    "GET /app/app-key?protocol=7&client=bench&version=1 HTTP/1.1\r\n"
    "Host: %s:%s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
    "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
    "%s"
    "Sec-WebSocket-Version: 13\r\n\r\n";

static int start_conn(struct conn *c, const char *host, int port, int src)
{
    struct sockaddr_in a = { 0 }, s = { 0 };
    int one = 1;

    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return -errno;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    s.sin_family = AF_INET;
    s.sin_addr.s_addr = htonl(0x7f000000u | (unsigned)src);
    bind(c->fd, (struct sockaddr *)&s, sizeof(s));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    inet_pton(AF_INET, host, &a.sin_addr);
    if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) && errno != EINPROGRESS)
        return -errno;
    c->state = 0;
    c->have = 0;
    return 0;
}

/* {"event":"lubdub:resume",...} as one masked text frame (zero mask key:
 * the payload goes as it is). */
static void send_resume(struct conn *c)
{
    static const char m[] =
        "{\"event\":\"lubdub:resume\",\"data\":{\"v\":1,\"channels\":{}}}";
    unsigned char out[2 + 4 + sizeof(m)];

    out[0] = 0x81;
    out[1] = (unsigned char)(0x80 | (sizeof(m) - 1));
    memset(out + 2, 0, 4);
    memcpy(out + 6, m, sizeof(m) - 1);
    if (write(c->fd, out, 6 + sizeof(m) - 1) < 0)
        return; /* the read side sees the close */
}

/* Answer a server ping frame found in buf (masked pong with its payload). */
static void answer_pings(struct conn *c, unsigned char *p, size_t n)
{
    while (n >= 2) {
        size_t len = p[1] & 0x7f, hl = 2;
        unsigned char out[2 + 4 + 125];

        if (len >= 126)
            return; /* Only control frames matter for an idle client. */
        if (n < hl + len)
            return;
        if ((p[0] & 0x0f) == 0x9) {
            out[0] = 0x8a;
            out[1] = (unsigned char)(0x80 | len);
            memset(out + 2, 0, 4); /* zero mask key: payload unchanged */
            memcpy(out + 6, p + hl, len);
            if (write(c->fd, out, 6 + len) < 0)
                return;
        }
        p += hl + len;
        n -= hl + len;
    }
}

int main(int argc, char **argv)
{
    const char *host, *port_s;
    int port, n, src_first, ep, ready = 0, started = 0, failed = 0;
    int deflate = 0, resume = 0, negotiated = 0;
    struct conn *cs;
    struct rlimit rl;
    char req[512];
    int reqlen;
    time_t t0 = time(NULL);

    while (argc > 1 && (strcmp(argv[1], "--deflate") == 0 ||
                        strcmp(argv[1], "--resume") == 0)) {
        if (argv[1][2] == 'd')
            deflate = 1;
        else
            resume = 1;
        argv++;
        argc--;
    }
    if (argc < 4) {
        fprintf(stderr, "usage: idle_client [--deflate] [--resume] HOST PORT "
                        "N [FIRST_SRC_OCTET]\n");
        return 2;
    }
    host = argv[1];
    port_s = argv[2];
    port = atoi(port_s);
    n = atoi(argv[3]);
    src_first = argc > 4 ? atoi(argv[4]) : 2;
    getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
    if (n < 1 || (rlim_t)n + 16 > rl.rlim_cur) {
        fprintf(stderr, "idle_client: N must be 1..%lu\n",
                (unsigned long)rl.rlim_cur - 16);
        return 2;
    }
    signal(SIGTERM, on_term);
    signal(SIGPIPE, SIG_IGN);
    reqlen = snprintf(req, sizeof(req), req_fmt, host, port_s,
                      deflate ? "Sec-WebSocket-Extensions: permessage-deflate; "
                                "client_max_window_bits\r\n"
                              : "");
    cs = calloc((size_t)n, sizeof(*cs));
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (!cs || ep < 0)
        return 1;
    while (!stop && time(NULL) - t0 < 600) {
        struct epoll_event evs[256];
        int k;

        /* Keep at most 500 handshakes in flight. */
        while (started < n && started - ready - failed < 500) {
            struct conn *c = &cs[started];
            struct epoll_event ev = { EPOLLOUT | EPOLLIN, { .ptr = c } };

            if (start_conn(c, host, port, src_first + started % 50)) {
                failed++;
                started++;
                continue;
            }
            epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
            started++;
        }
        if (ready + failed == n && ready > 0 && cs[0].state == 3) {
            static int announced;

            if (!announced) {
                announced = 1;
                printf("ready %d failed %d deflate %d\n", ready, failed,
                       negotiated);
                fflush(stdout);
            }
        }
        k = epoll_wait(ep, evs, 256, 200);
        for (int i = 0; i < k; i++) {
            struct conn *c = evs[i].data.ptr;
            ssize_t r;

            if (c->state == 0 && (evs[i].events & EPOLLOUT)) {
                struct epoll_event ev = { EPOLLIN, { .ptr = c } };

                if (write(c->fd, req, (size_t)reqlen) != reqlen) {
                    failed++;
                    close(c->fd);
                    c->state = -1;
                    continue;
                }
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
                c->state = 1;
                continue;
            }
            r = read(c->fd, c->buf + c->have, sizeof(c->buf) - c->have - 1);
            if (r <= 0) {
                if (c->state != 3)
                    failed++;
                else
                    ready--, failed++;
                epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
                close(c->fd);
                c->state = -1;
                continue;
            }
            if (c->state == 3) {
                answer_pings(c, (unsigned char *)c->buf, (size_t)r);
                continue;
            }
            c->have += (size_t)r;
            c->buf[c->have] = '\0';
            if (c->state == 1) {
                char *e = strstr(c->buf, "\r\n\r\n");

                if (!e)
                    continue;
                if (strncmp(c->buf, "HTTP/1.1 101", 12) != 0) {
                    failed++;
                    close(c->fd);
                    c->state = -1;
                    continue;
                }
                *e = '\0';
                if (strcasestr(c->buf, "permessage-deflate"))
                    negotiated++;
                e += 4;
                c->have -= (size_t)(e - c->buf);
                memmove(c->buf, e, c->have + 1);
                c->state = 2;
            }
            if (c->state == 2 && strstr(c->buf, "connection_established")) {
                c->state = 3;
                c->have = 0;
                ready++;
                if (resume)
                    send_resume(c);
            }
        }
    }
    return 0;
}
