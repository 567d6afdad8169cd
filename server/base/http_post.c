/*
 * server/base/http_post.c - the POST answer state machine (server/base/http_post.h).
 */
#include "server/base/http_post.h"

#include <sys/socket.h>

#include <ev.h>
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

void srv_http_postq_add(struct srv_http_postq *q, struct srv_http_post *p)
{
    p->next = q->head;
    if (q->head)
        q->head->pprev = &p->next;
    q->head = p;
    p->pprev = &q->head;
}

void srv_http_postq_remove(struct srv_http_postq *q, struct srv_http_post *p)
{
    if (q->cur == p)
        q->cur_gone = true;
    if (!p->pprev)
        return;
    *p->pprev = p->next;
    if (p->next)
        p->next->pprev = p->pprev;
    p->next = NULL;
    p->pprev = NULL;
}

struct srv_http_post *srv_http_postq_pop(struct srv_http_postq *q)
{
    struct srv_http_post *p = q->head;

    if (p)
        srv_http_postq_remove(q, p);
    return p;
}

void srv_http_post_resume(struct lws *wsi, struct ev_loop *evl)
{
    struct lws_pollfd pfd;

    pfd.fd = lws_get_socket_fd(wsi);
    if (pfd.fd < 0)
        return;
    if (evl) {
        /* Through lws's own write watcher (started by the transaction's
         * end): libev runs it within this prepare round, and lws's
         * watcher callback also starts its idle watcher, which re-arms
         * lws's timer for the suls the answer scheduled (the corked
         * flush of what the POST published). */
        ev_feed_fd_event(evl, pfd.fd, EV_WRITE);
        return;
    }
    pfd.events = LWS_POLLIN | LWS_POLLOUT;
    pfd.revents = LWS_POLLOUT;
    (void)lws_service_fd(lws_get_context(wsi), &pfd);
}
