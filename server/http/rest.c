/*
 * server/http/rest.c - the Pusher HTTP API's HTTP side
 * (server/http/rest.h): a request under /apps/ goes to hub/rest
 * (hub/rest/rest.h) with its path, query and body, and its answer is
 * written with a 429's Retry-After.
 *
 * Deferred answers: with a directory whose reads answer later (a cluster
 * directory), a REST read waits (hub_rest_handle_async()); its answer is
 * kept in the request and written from HTTP_WRITEABLE. A connection that
 * closes first cancels the wait (srv_http_req_free()), so the answer is
 * dropped and nothing touches the gone request or wsi. lws 4.1.6 reads
 * nothing of a connection whose GET is waiting (LRS_DOING_TRANSACTION),
 * so it would learn of a client that left only when the answer is
 * written, and its POLLIN would spin the loop meanwhile: a waiting GET
 * stops POLLIN and is probed instead (defer_probe(): a peek on its socket
 * every SRV_DEFER_PROBE_MS), and a client seen gone (FIN or reset) is
 * forgotten at once and its connection closed. A POST that must answer
 * now (bytes pipelined behind its body) cannot wait: hub/rest refuses it
 * with 400 unpublished (hub_rest_handle_nowait(), docs/LWS.md).
 *
 * Thread: the connection's loop.
 */
#include "server/http/rest.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* How often a waiting GET's socket is peeked at (ms). */
#define SRV_DEFER_PROBE_MS 100

/* Write a REST answer r (its body freed), with a 429's Retry-After. */
static int respond_rest(struct lws *wsi, struct http_req *p,
                        struct hub_rest_response *r)
{
    int rc;

    p->retry_after = r->status == 429 ? r->retry_after_s : 0;
    rc = srv_http_respond(wsi, p, (unsigned)r->status, "application/json",
                          r->body ? r->body : "{}", r->body ? r->len : 2);
    free(r->body);
    return rc;
}

/* A waiting GET's probe is over (answered, or the request goes). */
static void defer_probe_stop(struct http_req *p)
{
    if (p->loop)
        hub_wheel_stop(p->loop->hub->wheel, &p->probe);
    p->loop = NULL;
    if (p->rx_off) {
        p->rx_off = false;
        lws_rx_flow_control(p->wsi, 1);
    }
}

/* A waiting REST request's answer (hub/rest/rest.h), on the loop's thread:
 * kept until HTTP_WRITEABLE. p and its wsi are alive: srv_http_req_free()
 * cancels. */
static void rest_answer(void *ctx, struct hub_rest_response *r)
{
    struct http_req *p = ctx;

    p->wait = NULL;
    defer_probe_stop(p);
    p->later = *r;
    p->later_ready = true;
    lws_callback_on_writable(p->wsi);
}

/* A POST closes after the answer when lws holds unparsed input, as
 * srv_http_post_rx_pending() says. */
int srv_http_rest_write_later(struct lws *wsi, struct srv_loop *l,
                              struct http_req *p)
{
    struct hub_rest_response r = p->later;

    p->later_ready = false;
    memset(&p->later, 0, sizeof(p->later));
    if (p->post && !p->close && srv_http_post_rx_pending(wsi)) {
        HUB_STAT_ADD(l->hub->stats.http_post_closes, 1);
        p->close = true;
    }
    return respond_rest(wsi, p, &r);
}

/* A waiting GET: has its client gone? A FIN or an error on the socket
 * (bytes, a pipelined request, leave it waiting). Gone: the answer is
 * forgotten now (counted in rest_answers_dropped) and lws closes the
 * connection from its own service, outside this timer. */
static void defer_probe(struct hub_timer *t, uint64_t now_ms)
{
    struct http_req *p = hub_container_of(t, struct http_req, probe);
    int fd = lws_get_socket_fd(p->wsi);
    char c;
    ssize_t n = fd >= 0 ? recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) : 0;

    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK &&
                   errno != EINTR)) {
        if (p->wait)
            hub_rest_wait_cancel(p->wait);
        p->wait = NULL;
        p->loop = NULL;
        lws_set_timeout(p->wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
        return;
    }
    hub_wheel_start(p->loop->hub->wheel, &p->probe, now_ms,
                    SRV_DEFER_PROBE_MS);
}

/* A GET starts waiting: no POLLIN until its answer, a probe instead. */
static void defer_probe_start(struct srv_loop *l, struct http_req *p)
{
    hub_timer_init(&p->probe, defer_probe);
    if (hub_wheel_start(l->hub->wheel, &p->probe,
                        hub_clock_now_ms(l->hub->clock), SRV_DEFER_PROBE_MS))
        return;
    p->loop = l;
    if (!lws_rx_flow_control(p->wsi, 0))
        p->rx_off = true;
}

int srv_http_rest(struct lws *wsi, struct srv_loop *l, struct http_req *p)
{
    struct hub_rest_response r;

    if (p->too_big)
        return srv_http_respond_json_error(wsi, p, 413,
                                           "request body too large");
    p->wsi = wsi;
    if (p->nowait) {
        /* The connection closes after this answer (a request pipelined
         * behind the body): one that would wait for the directory is
         * refused, unpublished, rather than published unanswered. */
        hub_rest_handle_nowait(l->hub, p->post ? HUB_HTTP_POST : HUB_HTTP_GET,
                               p->path, p->query,
                               p->body ? p->body : "", p->body_len,
                               (uint64_t)time(NULL), &r);
        return respond_rest(wsi, p, &r);
    }
    p->wait = hub_rest_handle_async(
        l->hub, p->post ? HUB_HTTP_POST : HUB_HTTP_GET, p->path, p->query,
        p->body ? p->body : "", p->body_len, (uint64_t)time(NULL),
        rest_answer, p, &r);
    if (p->wait) {
        if (!p->post)
            defer_probe_start(l, p);
        return SRV_HTTP_DEFERRED;
    }
    return respond_rest(wsi, p, &r);
}

void srv_http_rest_close_early(struct lws *wsi, struct srv_loop *l,
                               struct http_req *p)
{
    struct hub_rest_response r;

    HUB_STAT_ADD(l->hub->stats.http_post_closes, 1);
    p->close = true;
    if (p->later_ready) {
        (void)srv_http_rest_write_later(wsi, l, p);
        return;
    }
    defer_probe_stop(p);
    hub_rest_wait_refuse(p->wait, &r);
    p->wait = NULL;
    (void)respond_rest(wsi, p, &r);
}
