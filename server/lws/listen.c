/*
 * server/lws/listen.c - each loop's own listener. Every loop binds its own
 * SO_REUSEPORT socket (lws's ALLOW_LISTEN_SHARE does not set SO_REUSEPORT
 * in Debian's build: docs/LWS.md, "N contexts on one port"), adopts it
 * into its lws context as a raw file, accept4()s on readiness and hands
 * each connection to lws with lws_adopt_socket_vhost(). On EMFILE/ENFILE
 * the listener pauses for 100 ms instead of spinning.
 *
 * Thread: the loop's own, except srv_listen_open/_port/_adopt (main
 * thread, before the loops run).
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "server/lws/srv.h"

static void accept_resume_cb(lws_sorted_usec_list_t *sul)
{
    struct srv_loop *l = lws_container_of(sul, struct srv_loop, sul_accept);

    if (l->acceptor && l->accepting)
        lws_rx_flow_control(l->acceptor, 1);
}

static int make_listener(struct srv *srv, uint16_t port, char *err,
                         size_t errlen)
{
    struct addrinfo hints = { 0 }, *ai = NULL;
    char portbuf[8];
    int fd, one = 1, rc;

    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(portbuf, sizeof(portbuf), "%u", port);
    rc = getaddrinfo(srv->cfg->bind, portbuf, &hints, &ai);
    if (rc) {
        snprintf(err, errlen, "bind address %s: %s", srv->cfg->bind,
                 gai_strerror(rc));
        return -1;
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 4096)) {
        snprintf(err, errlen, "listen on %s:%u: %s", srv->cfg->bind, port,
                 strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    return fd;
}

static uint16_t bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);

    if (getsockname(fd, (struct sockaddr *)&ss, &sl))
        return 0;
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

int srv_listen_callback(struct lws *wsi, enum lws_callback_reasons reason,
                        void *user, void *in, size_t len)
{
    struct srv_loop *l;
    int one = 1;

    switch (reason) {
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
        /* A client's upgrade naming "acceptor" (server/http/http.c refuses it
         * first; this is the backstop): never a WebSocket here. */
        lws_return_http_status(wsi, HTTP_STATUS_BAD_REQUEST, NULL);
        return 1;
    case LWS_CALLBACK_RAW_ADOPT_FILE:
        l = srv_loop_of(wsi);
        l->acceptor = wsi;
        break;
    case LWS_CALLBACK_RAW_RX_FILE:
        l = srv_loop_of(wsi);
        for (int i = 0; i < 64 && l->accepting; i++) {
            int c = accept4(l->listen_fd, NULL, NULL,
                            SOCK_NONBLOCK | SOCK_CLOEXEC);

            if (c < 0) {
                if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                    errno == ENOMEM) {
                    uint64_t now = srv_now_ms();

                    HUB_STAT_ADD(l->hub->stats.accept_paused, 1);
                    if (now - l->last_emfile_log_ms >= 1000) {
                        l->last_emfile_log_ms = now;
                        srv_log_event(HUB_LOG_WARN, l->id,
                                      HUB_LOG_F(.event = "accept_paused",
                                                .reason =
                                                    errno == EMFILE ? "fd_limit"
                                                    : errno == ENFILE
                                                        ? "system_fd_limit"
                                                        : "out_of_memory"),
                                      "accept: %s; pausing accepts for 100 ms",
                                      strerror(errno));
                    }
                    lws_rx_flow_control(wsi, 0);
                    lws_sul_schedule(l->ctx, 0, &l->sul_accept,
                                     accept_resume_cb, 100 * 1000);
                }
                break;
            }
            setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            /* Not closed here when the adoption fails: lws 4.1.6 has
             * closed c itself on every failure path a non-blocking
             * socket can take, and another thread may already hold the
             * same fd number (a backplane Redis socket, another loop's
             * session; docs/RELIABILITY.md, series 10). */
            (void)lws_adopt_socket_vhost(l->vh, c);
        }
        break;
    case LWS_CALLBACK_RAW_CLOSE_FILE:
        l = srv_loop_of(wsi);
        l->acceptor = NULL;
        /* lws closes the adopted descriptor when this returns (4.1.6,
         * __lws_close_free_wsi_final): it is no longer ours to close. A
         * second close() at shutdown would take whatever fd number the
         * backplane, the webhook sender or its store had just been given
         * (docs/RELIABILITY.md, series 10). */
        l->listen_fd = -1;
        break;
    default:
        break;
    }
    (void)user;
    (void)in;
    (void)len;
    return 0;
}

bool srv_protocol_internal(const struct lws_protocols *p)
{
    return p && (p->callback == srv_listen_callback ||
                 p->callback == srv_ops_metrics_callback);
}

void srv_listen_stop(struct srv_loop *l)
{
    if (!l->accepting)
        return;
    l->accepting = false;
    if (l->acceptor)
        lws_rx_flow_control(l->acceptor, 0);
    lws_sul_cancel(&l->sul_accept);
}

int srv_listen_open(struct srv_loop *l, uint16_t port, char *err,
                    size_t errlen)
{
    l->listen_fd = make_listener(l->srv, port, err, errlen);
    return l->listen_fd < 0 ? -1 : 0;
}

uint16_t srv_listen_port(const struct srv_loop *l)
{
    return bound_port(l->listen_fd);
}

int srv_listen_adopt(struct srv_loop *l)
{
    lws_sock_file_fd_type u;

    u.filefd = (lws_filefd_type)(intptr_t)l->listen_fd;
    l->accepting = true;
    if (!l->vh || !lws_adopt_descriptor_vhost(l->vh, LWS_ADOPT_RAW_FILE_DESC,
                                              u, "acceptor", NULL))
        return -1;
    return 0;
}
