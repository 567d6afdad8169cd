/*
 * server/http_post.c - the POST answer state machine (server/http_post.h).
 */
#include "server/http_post.h"

#include <sys/socket.h>

#include <libwebsockets.h>

enum srv_http_post_action srv_http_post_body_complete(struct srv_http_post *p,
                                                      bool answered)
{
    if (answered || p->phase == SRV_HTTP_POST_DONE) {
        p->phase = SRV_HTTP_POST_DONE;
        return SRV_HTTP_POST_CLOSE;
    }
    if (p->phase == SRV_HTTP_POST_PENDING) {
        /* lws is re-feeding bytes sent behind the body. */
        p->phase = SRV_HTTP_POST_DONE;
        return SRV_HTTP_POST_ANSWER_CLOSE;
    }
    p->phase = SRV_HTTP_POST_PENDING;
    return SRV_HTTP_POST_WAIT;
}

bool srv_http_post_writeable(struct srv_http_post *p)
{
    if (p->phase != SRV_HTTP_POST_PENDING)
        return false;
    p->phase = SRV_HTTP_POST_DONE;
    return true;
}

bool srv_http_post_rx_pending(struct lws *wsi)
{
    return lws_service_adjust_timeout(lws_get_context(wsi), 1, 0) == 0;
}

bool srv_http_post_peer_done(struct lws *wsi)
{
    char c;
    lws_sockfd_type fd = lws_get_socket_fd(wsi);

    return fd >= 0 && recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}
