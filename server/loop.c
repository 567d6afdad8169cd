/*
 * server/loop.c - event loops on libwebsockets 4.1.6.
 *
 * Each loop is a thread with its own lws context, created serially on the
 * main thread (OpenSSL global init is not thread-safe), and its own
 * SO_REUSEPORT listen socket adopted as a raw file: lws's
 * ALLOW_LISTEN_SHARE does not set SO_REUSEPORT in Debian's build
 * (docs/LWS.md, "N contexts on one port"). We accept4() and hand each socket to
 * lws with lws_adopt_socket_vhost(); on EMFILE/ENFILE the listener pauses
 * for 100 ms instead of spinning.
 *
 * lws's own "validity" ping/hangup is disabled (a policy of zeros): the
 * hub's heartbeat and timing wheel own liveness. One sul per loop ticks the
 * wheel; no lws timer exists per session.
 *
 * Data goes out corked from a 1 us sul right after the read pass (the
 * flush list, flush_sul_cb()): one LWS_WRITE_RAW of every queued,
 * pre-framed frame that fits the cork. SERVER_WRITEABLE handles the rest,
 * one thing per callback: a queued heartbeat ping first, else one cork
 * (sockets lws still holds bytes for), else the close frame.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <ev.h>
#include <jansson.h>

#include "hub/pusher.h"
#include "hub/ws.h"
#include "server/srv.h"

static const lws_retry_bo_t no_validity = {
    .secs_since_valid_ping = 0,
    .secs_since_valid_hangup = 0,
};

/* Header budget (server/srv.h): every header token is capped, the
 * request line's are not. Filled once before the contexts are created. */
static struct lws_token_limits token_limits;

static bool request_line_token(int t)
{
    switch (t) {
    case WSI_TOKEN_GET_URI:
    case WSI_TOKEN_POST_URI:
    case WSI_TOKEN_OPTIONS_URI:
    case WSI_TOKEN_HEAD_URI:
    case WSI_TOKEN_PUT_URI:
    case WSI_TOKEN_PATCH_URI:
    case WSI_TOKEN_DELETE_URI:
    case WSI_TOKEN_CONNECT:
    case WSI_TOKEN_HTTP_COLON_PATH:
    case WSI_TOKEN_HTTP_URI_ARGS:
        return true;
    default:
        return false;
    }
}

unsigned srv_header_limit_of(int t)
{
    return t >= 0 && t < WSI_TOKEN_COUNT ? token_limits.token_limit[t] : 0;
}

static struct srv_loop *loop_of(struct lws *wsi)
{
    return lws_context_user(lws_get_context(wsi));
}

/* Transport ops for the hub. */

static void flush_sul_cb(lws_sorted_usec_list_t *sul);

/*
 * A session has new output. Data goes out corked, straight after the read
 * round that produced it: the session joins the loop's flush list, and a
 * 1 us sul (run before the next poll) writes every listed session's queue
 * with one lws_write(LWS_WRITE_RAW) each. That skips lws's POLLOUT round
 * trip (two pollfd changes, a poll() that reports every subscriber, one
 * WRITEABLE callback each), which the fan-out profile showed to be the
 * cost; docs/LWS.md ("Fan-out at the corked ceiling") measured the same.
 * Pings, closes and sessions whose socket is backed up still go through
 * SERVER_WRITEABLE.
 */
static void op_want_writable(void *conn)
{
    struct lws *wsi = conn;
    struct srv_loop *l = lws_context_user(lws_get_context(wsi));
    struct hub_session *s = lws_wsi_user(wsi);

    if (!s || s->state != HUB_SESSION_OPEN || s->ping_due)
        goto writable;
    if (l->n_flush == l->cap_flush) {
        uint32_t cap = l->cap_flush ? l->cap_flush * 2 : 1024;
        struct hub_session **n = realloc(l->flush, cap * sizeof(*n));

        if (!n)
            goto writable;
        l->flush = n;
        l->cap_flush = cap;
    }
    l->flush[l->n_flush++] = s;
    if (!l->flush_armed) {
        l->flush_armed = true;
        lws_sul_schedule(l->ctx, 0, &l->sul_flush, flush_sul_cb, 1);
    }
    return;
writable:
    lws_callback_on_writable(wsi);
}

/* A closing session must not stay on the flush list. */
static void flush_forget(struct srv_loop *l, struct hub_session *s)
{
    for (uint32_t i = 0; i < l->n_flush; i++)
        if (l->flush[i] == s)
            l->flush[i] = NULL;
}

static void op_kill(void *conn)
{
    lws_set_timeout(conn, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
}

static const struct hub_transport_ops transport_ops = {
    .want_writable = op_want_writable,
    .kill = op_kill,
};

static void wake_loop(void *ctx)
{
    struct srv_loop *l = ctx;

    if (!atomic_load(&l->srv->stopping))
        lws_cancel_service(l->ctx);
}

/* Timers. */

static void wheel_sul_cb(lws_sorted_usec_list_t *sul);

/*
 * Leave lws_service(): suls run before poll() computes its timeout, so a
 * flag set inside one would only be seen after the next event. A 1 ms sul
 * bounds that wait.
 */
static void loop_leave(struct srv_loop *l)
{
    l->running = false;
    if (l->evl)
        ev_break(l->evl, EVBREAK_ALL);
    else
        lws_sul_schedule(l->ctx, 0, &l->sul_wheel, wheel_sul_cb, 1000);
}

/*
 * A loop whose thread did not run for a while (a callback that blocked, the
 * host descheduling it) wakes with deadlines that look expired while the
 * frames that would cancel them, pongs and data, still wait in its sockets:
 * lws runs due suls before it polls, and libev may invoke the timer watcher
 * before the I/O ones of the same round. So when the wheel's sul comes more
 * than two ticks after the last advance, the advance waits one more tick;
 * lws polls and reads every socket in between, and the pong timers then
 * judge each peer by what it sent (hub/session.c checks last_rx lazily).
 * The stall is counted (lubdub_loop_stalls_total), and the timers' lateness
 * shows it (lubdub_wheel_lateness_seconds).
 */
static bool wheel_hold_after_stall(struct srv_loop *l, uint64_t now)
{
    uint64_t tick = l->srv->hcfg.tick_ms;
    uint64_t gap = now > l->last_wheel_ms ? now - l->last_wheel_ms : 0;

    if (l->wheel_held || gap <= 2 * tick) {
        l->wheel_held = false;
        l->last_wheel_ms = now;
        return false;
    }
    l->wheel_held = true;
    hub_loop_note_stall(l->hub, gap);
    if (gap >= 1000)
        srv_log(HUB_LOG_WARN, l->id,
                "loop %u did not run for %llu ms; its timers wait one read "
                "pass", l->id, (unsigned long long)gap);
    return true;
}

static void wheel_sul_cb(lws_sorted_usec_list_t *sul)
{
    struct srv_loop *l = lws_container_of(sul, struct srv_loop, sul_wheel);
    uint64_t now;

    if (!l->running)
        return;
    now = srv_now_ms();
    if (wheel_hold_after_stall(l, now)) {
        lws_sul_schedule(l->ctx, 0, &l->sul_wheel, wheel_sul_cb,
                         (lws_usec_t)l->srv->hcfg.tick_ms * 1000);
        return;
    }
    hub_loop_service(l->hub, now);
    if (l->hub->stop) {
        loop_leave(l);
        return;
    }
    lws_sul_schedule(l->ctx, 0, &l->sul_wheel, wheel_sul_cb,
                     (lws_usec_t)l->srv->hcfg.tick_ms * 1000);
}

static void heartbeat_sul_cb(lws_sorted_usec_list_t *sul)
{
    struct srv_loop *l = lws_container_of(sul, struct srv_loop,
                                          sul_heartbeat);

    hub_task_resume(&l->hub->heartbeat, srv_now_ms());
}

/* The heartbeat yields between slices: run the next one after I/O. */
static void heartbeat_yield(struct hub_task *t, void *arg)
{
    struct hub_loop *hl = arg;
    struct srv_loop *l = hl->wake_ctx;

    (void)t;
    lws_sul_schedule(l->ctx, 0, &l->sul_heartbeat, heartbeat_sul_cb, 1);
}

static void accept_resume_cb(lws_sorted_usec_list_t *sul)
{
    struct srv_loop *l = lws_container_of(sul, struct srv_loop, sul_accept);

    if (l->acceptor && l->accepting)
        lws_rx_flow_control(l->acceptor, 1);
}

/* Listener. */

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

static int acceptor_cb(struct lws *wsi, enum lws_callback_reasons reason,
                       void *user, void *in, size_t len)
{
    struct srv_loop *l;
    int one = 1;

    switch (reason) {
    case LWS_CALLBACK_RAW_ADOPT_FILE:
        l = loop_of(wsi);
        l->acceptor = wsi;
        break;
    case LWS_CALLBACK_RAW_RX_FILE:
        l = loop_of(wsi);
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
                        srv_log(HUB_LOG_WARN, l->id,
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
            if (!lws_adopt_socket_vhost(l->vh, c))
                close(c); /* lws closes it on most failures; be sure. */
        }
        break;
    case LWS_CALLBACK_RAW_CLOSE_FILE:
        l = loop_of(wsi);
        l->acceptor = NULL;
        break;
    default:
        break;
    }
    (void)user;
    (void)in;
    (void)len;
    return 0;
}

static void stop_accepting(struct srv_loop *l)
{
    if (!l->accepting)
        return;
    l->accepting = false;
    if (l->acceptor)
        lws_rx_flow_control(l->acceptor, 0);
    lws_sul_cancel(&l->sul_accept);
}

/* WebSocket. */

/* Reassemble a message; returns 1 when complete in (*msg, *msg_len). */
static int rx_collect(struct hub_session *s, struct lws *wsi, void *in,
                      size_t len, const char **msg, size_t *msg_len)
{
    size_t max = s->loop->cfg->max_message;
    size_t remaining = lws_remaining_packet_payload(wsi);
    bool final = lws_is_final_fragment(wsi) && remaining == 0;

    if (s->rx_len + len + remaining > max) {
        /* Counts 1009 via the close reason. */
        srv_log_peer(HUB_LOG_INFO, s->loop->id,
                     "socket %s: message over %zu bytes: closing 1009",
                     s->socket_id, max);
        hub_session_close(s, 1009, "message too big", HUB_CLOSE_TOO_BIG,
                          true);
        return -1;
    }
    if (final && s->rx_len == 0) {
        *msg = in;
        *msg_len = len;
        return 1;
    }
    if (s->rx_len + len > s->rx_cap) {
        size_t cap = s->rx_len + len + remaining;
        char *n;

        if (cap < 1024)
            cap = 1024;
        if (cap > max)
            cap = max;
        n = realloc(s->rx_buf, cap);
        if (!n) {
            hub_session_close(s, 1011, "out of memory", HUB_CLOSE_ERROR, true);
            return -1;
        }
        s->rx_buf = n;
        s->rx_cap = cap;
    }
    memcpy(s->rx_buf + s->rx_len, in, len);
    s->rx_len += len;
    if (!final)
        return 0;
    *msg = s->rx_buf;
    *msg_len = s->rx_len;
    return 1;
}

/*
 * RFC 6455 section 8.1: a text message must be UTF-8, and the connection
 * fails (1007) as soon as its bytes cannot be, in whichever fragment or
 * lws read that shows it; a character may span fragments. Returns -1 when
 * the session is being closed.
 */
static int rx_utf8(struct hub_session *s, struct lws *wsi, const void *in,
                   size_t len)
{
    bool final = lws_is_final_fragment(wsi) &&
                 lws_remaining_packet_payload(wsi) == 0;

    s->rx_utf8 = hub_utf8_feed(s->rx_utf8, in, len);
    if (s->rx_utf8 == HUB_UTF8_ACCEPT ||
        (s->rx_utf8 != HUB_UTF8_REJECT && !final))
        return 0;
    s->rx_utf8 = HUB_UTF8_ACCEPT;
    /* Logs "socket ...: closing 1007 (invalid UTF-8)" (rate-limited). */
    hub_session_close(s, 1007, "invalid UTF-8", HUB_CLOSE_ERROR, true);
    return -1;
}

/*
 * A peer's close frame, before lws echoes it (RFC 6455 sections 5.5.1,
 * 7.4): lws 4.1.6 echoes a one-byte payload, codes of 5000 and up and
 * reasons that are not UTF-8 (it answers codes below 3000 that are not for
 * peers with 1002 itself). Those fail the connection with 1002 or 1007
 * instead: the close reason is set and -1 makes lws send it.
 */
static int peer_close(struct hub_session *s, struct lws *wsi,
                      const unsigned char *in, size_t len)
{
    unsigned code = hub_ws_close_payload_check(in, len);
    const char *why = code == 1007 ? "invalid UTF-8 in close reason"
                                   : "invalid close frame";

    if (!code)
        return 0;
    /* Logs the close, and counts it as an error, not a peer close. */
    if (s->loop)
        hub_session_close(s, (uint16_t)code, why, HUB_CLOSE_ERROR, true);
    lws_close_reason(wsi, (enum lws_close_status)code, (unsigned char *)why,
                     strlen(why));
    return -1;
}

/* The pusher-js URL: /app/{key}?protocol=7&client=js&version=8.x */
static void ws_established(struct srv_loop *l, struct hub_session *s,
                           struct lws *wsi)
{
    char uri[256], arg[64];
    const struct hub_app *app = NULL;
    int n = lws_hdr_copy(wsi, uri, sizeof(uri), WSI_TOKEN_GET_URI);
    int proto = -1;

    if (n > 5 && strncmp(uri, "/app/", 5) == 0)
        app = hub_find_app_by_key(l->srv->hub, uri + 5, (size_t)n - 5);
    for (int i = 0; lws_hdr_copy_fragment(wsi, arg, sizeof(arg),
                                          WSI_TOKEN_HTTP_URI_ARGS, i) > 0;
         i++)
        if (strncmp(arg, "protocol=", 9) == 0)
            proto = atoi(arg + 9);
    if (!app) {
        srv_log_peer(HUB_LOG_INFO, l->id, "socket %s: unknown app key in %s",
                     s->socket_id, n > 0 ? uri : "?");
        hub_session_send_error(s, 4001, "App key not in this cluster", true);
        return;
    }
    if (proto != -1 && (proto < 5 || proto > 7)) {
        hub_session_send_error(s, 4007, "Unsupported protocol version", true);
        return;
    }
    /* hub_pusher_open() enforces the app's max_connections (4004). */
    hub_pusher_open(s, app);
}

/*
 * One line per session end, for the operator. Closes that point at the
 * network or at a client (4201 no pong, 4100 slow consumer, 1009 too big,
 * 4004 over quota, 1011 internal) are info; ordinary ends (the peer left,
 * the drain, idle, other app refusals) are debug. Both go through the
 * peer rate limit, so a partition that drops thousands at once cannot
 * flood the log.
 */
static void log_session_end(struct hub_session *s, enum hub_close_reason why,
                            uint64_t now_ms)
{
    unsigned code = why == HUB_CLOSE_PEER ? 0 : s->close_code;
    int level = HUB_LOG_DEBUG;

    if (code == 4201 || code == 4100 || code == 1009 || code == 4004 ||
        code == 1011)
        level = HUB_LOG_INFO;
    if (!srv_log_enabled(level))
        return;
    if (code)
        srv_log_peer(level, s->loop->id,
                     "socket %s: closed %u (%s, %s) app=%s after %llums",
                     s->socket_id, code, hub_close_reason_name(why),
                     s->close_text ? s->close_text : "",
                     s->app ? s->app->id : "-",
                     (unsigned long long)(now_ms - s->connected_ms));
    else
        srv_log_peer(level, s->loop->id,
                     "socket %s: closed by the peer app=%s after %llums",
                     s->socket_id, s->app ? s->app->id : "-",
                     (unsigned long long)(now_ms - s->connected_ms));
}

static void log_session_open(struct hub_session *s, struct lws *wsi)
{
    char peer[64];

    if (!srv_log_enabled(HUB_LOG_DEBUG) || s->state != HUB_SESSION_OPEN)
        return;
    if (!lws_get_peer_simple(wsi, peer, sizeof(peer)))
        strcpy(peer, "?");
    srv_log_peer(HUB_LOG_DEBUG, s->loop->id, "socket %s: open app=%s peer=%s",
                 s->socket_id, s->app ? s->app->id : "-", peer);
}

/*
 * Write as much of a session's queue as one cork holds (a frame bigger than
 * the cork goes by itself) with one lws_write(RAW); 0, or -1 when the
 * write failed. Used from SERVER_WRITEABLE and from the flush sul.
 */
static int write_cork(struct srv_loop *l, struct hub_session *s)
{
    struct lws *wsi = s->conn;
    const unsigned char *direct;
    size_t n, direct_len;
    unsigned frames;

    n = hub_session_cork(s, l->cork, SRV_CORK_BYTES, &direct, &direct_len,
                         &frames);
    if (!n && direct) {
        if (lws_write(wsi, (unsigned char *)direct, direct_len,
                      LWS_WRITE_RAW) < (int)direct_len)
            return -1;
        n = direct_len;
    } else if (n && lws_write(wsi, l->cork, n, LWS_WRITE_RAW) < (int)n) {
        return -1;
    }
    hub_session_cork_done(s, n, frames);
    return 0;
}

/*
 * Test only (LUBDUB_TEST_STALL_MS, tests/integration/stall.test.js): block
 * this loop's thread right after it wrote a heartbeat ping, so the peer's
 * pong waits in the kernel while the pong deadline passes. Never armed
 * unless the variable was set at start.
 */
static void test_stall(struct srv_loop *l)
{
    unsigned ms = l->srv->test_stall_ms;
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

    l->stall_after_ping = false;
    srv_log(HUB_LOG_WARN, l->id, "test: stalling loop %u for %u ms", l->id,
            ms);
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

bool srv_test_stall_arm(struct srv *srv, unsigned id)
{
    struct srv_loop *l;

    if (!srv->test_stall_ms || id >= srv->n_loops ||
        atomic_load(&srv->stopping))
        return false;
    l = &srv->loops[id];
    atomic_store_explicit(&l->stall_armed, true, memory_order_relaxed);
    lws_cancel_service(l->ctx);
    return true;
}

static int ws_writeable(struct srv_loop *l, struct hub_session *s,
                        struct lws *wsi)
{
    unsigned char buf[LWS_PRE + 32];

    s->want_writable = false;
    if (s->ping_due && s->state == HUB_SESSION_OPEN) {
        /* ASCII payload: lws 4.1.6 never reports an empty pong, and
         * may UTF-8-check pongs (docs/LWS.md, "Pings and pongs"). */
        int len = snprintf((char *)buf + LWS_PRE, 32, "lubdub-%u",
                           ++s->ping_seq);

        s->ping_due = false;
        if (lws_write(wsi, buf + LWS_PRE, (size_t)len, LWS_WRITE_PING) < len)
            return -1;
        HUB_STAT_ADD(l->hub->stats.pings_sent, 1);
        hub_session_ping_written(s, srv_now_ms());
        if (l->stall_after_ping)
            test_stall(l);
        goto more;
    }
    if (s->q.count) {
        if (write_cork(l, s))
            return -1;
        goto more;
    }
    if (s->state == HUB_SESSION_CLOSING) {
        s->state = HUB_SESSION_CLOSE_SENT;
        lws_close_reason(wsi, (enum lws_close_status)s->close_code,
                         (unsigned char *)s->close_text,
                         strlen(s->close_text) > 123 ? 123
                                                     : strlen(s->close_text));
        return -1;
    }
    return 0;
more:
    if (hub_session_has_output(s)) {
        s->want_writable = true;
        lws_callback_on_writable(wsi);
    }
    return 0;
}


static void flush_sul_cb(lws_sorted_usec_list_t *sul)
{
    struct srv_loop *l = lws_container_of(sul, struct srv_loop, sul_flush);
    uint32_t count = l->n_flush;

    l->flush_armed = false;
    for (uint32_t i = 0; i < count; i++) {
        struct hub_session *s = l->flush[i];

        if (!s || !s->loop)
            continue;
        s->want_writable = false;
        if (s->state != HUB_SESSION_OPEN || s->ping_due ||
            lws_partial_buffered(s->conn)) {
            /* Control frames, and sockets lws still holds bytes for,
             * take the WRITEABLE path: lws flushes its buffer first, so
             * at most one cork ever waits inside lws. */
            s->want_writable = true;
            lws_callback_on_writable(s->conn);
            continue;
        }
        if (s->q.count && write_cork(l, s)) {
            op_kill(s->conn);
            continue;
        }
        if (hub_session_has_output(s)) {
            s->want_writable = true;
            lws_callback_on_writable(s->conn);
        }
    }
    /* Sessions listed while flushing (none today) stay for the next run. */
    memmove(l->flush, l->flush + count, (l->n_flush - count) * sizeof(*l->flush));
    l->n_flush -= count;
    if (l->n_flush && !l->flush_armed) {
        l->flush_armed = true;
        lws_sul_schedule(l->ctx, 0, &l->sul_flush, flush_sul_cb, 1);
    }
}

static int main_cb(struct lws *wsi, enum lws_callback_reasons reason,
                   void *user, void *in, size_t len)
{
    struct srv_loop *l;
    struct hub_session *s = user;
    const char *msg;
    size_t msg_len;
    uint64_t now;
    int rc;

    switch (reason) {
    case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
        l = lws_context_user(lws_get_context(wsi));
        if (!l || !l->hub)
            return 0;
        hub_loop_drain_inbox(l->hub, srv_now_ms());
        if (l->srv->test_stall_ms &&
            atomic_exchange_explicit(&l->stall_armed, false,
                                     memory_order_relaxed))
            l->stall_after_ping = true;
        srv_tls_pick_up(l);
        if (l->hub->draining)
            stop_accepting(l);
        if (l->hub->stop && l->running)
            loop_leave(l);
        return 0;
    case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
        return srv_http_confirm_upgrade(loop_of(wsi), wsi, in);
    case LWS_CALLBACK_FILTER_HTTP_CONNECTION:
        return srv_http_filter_request(loop_of(wsi), wsi) ? 1 : 0;
    case LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS:
        /* user is the vhost's SSL_CTX; main thread, context creation. */
        return srv_tls_vhost_init(loop_of(wsi), (SSL_CTX *)user) ? 1 : 0;
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
        return srv_http_filter_upgrade(loop_of(wsi), wsi);
    case LWS_CALLBACK_ESTABLISHED:
        l = loop_of(wsi);
        memset(s, 0, sizeof(*s));
        if (hub_session_init(s, l->hub, wsi, srv_now_ms()))
            return -1;
        ws_established(l, s, wsi);
        log_session_open(s, wsi);
        return 0;
    case LWS_CALLBACK_RECEIVE:
        if (!s->loop)
            return -1;
        l = loop_of(wsi);
        now = srv_now_ms();
        hub_session_stamp_rx(s, now);
        if (s->state != HUB_SESSION_OPEN)
            return 0;
        if (!lws_frame_is_binary(wsi) && rx_utf8(s, wsi, in, len))
            return 0;
        rc = rx_collect(s, wsi, in, len, &msg, &msg_len);
        if (rc <= 0)
            return 0;
        HUB_STAT_ADD(l->hub->stats.msgs_in, 1);
        HUB_STAT_ADD(l->hub->stats.bytes_in, msg_len);
        hub_pusher_on_message(s, msg, msg_len, now);
        /* Idle sessions hold no reassembly buffer. */
        s->rx_len = 0;
        if (s->rx_buf) {
            free(s->rx_buf);
            s->rx_buf = NULL;
            s->rx_cap = 0;
        }
        return 0;
    case LWS_CALLBACK_RECEIVE_PONG:
        if (s->loop)
            hub_session_on_pong(s, srv_now_ms());
        return 0;
    case LWS_CALLBACK_SERVER_WRITEABLE:
        if (!s->loop)
            return 0;
        return ws_writeable(loop_of(wsi), s, wsi);
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
        if (s->loop)
            hub_session_stamp_rx(s, srv_now_ms());
        return peer_close(s, wsi, in, len);
    case LWS_CALLBACK_CLOSED:
        if (s->loop && s->want_writable)
            flush_forget(loop_of(wsi), s);
        if (s->loop) {
            enum hub_close_reason why =
                s->state == HUB_SESSION_OPEN
                    ? HUB_CLOSE_PEER
                    : (enum hub_close_reason)s->close_reason_id;

            log_session_end(s, why, srv_now_ms());
            hub_session_fini(s, why);
        }
        return 0;
    default:
        return srv_http_callback(wsi, reason, user, in, len);
    }
}

static size_t pss_size(void)
{
    size_t h = srv_http_pss_size();

    return h > sizeof(struct hub_session) ? h : sizeof(struct hub_session);
}

/*
 * lws gives every WebSocket connection an rx buffer of --ws-rx-buffer bytes
 * for its whole life, and reads at most that much from one socket per loop
 * pass; a message that does not fit arrives in pieces and the hub
 * reassembles it (then frees the piece buffer). The trade is memory per
 * idle connection against how fast one client can send: see
 * docs/BENCHMARKS.md ("WebSocket read size").
 */
static struct lws_protocols protocols[] = {
    { "lubdub", main_cb, 0, 128, 0, NULL, SRV_CORK_BYTES + 1024 },
    { "acceptor", acceptor_cb, 0, 0, 0, NULL, 0 },
    { NULL, NULL, 0, 0, 0, NULL, 0 }
};

static void lws_emit(int level, const char *line)
{
    size_t n = strlen(line);

    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r'))
        n--;
    /* A header over SRV_HEADER_ONE_MAX: the hub answers 431 and logs. */
    if (strncmp(line, "header ", 7) == 0 && strstr(line, "exceeds limit"))
        return;
    /* Past SRV_HEADER_BYTES lws closes without a status (no hook lets
     * the hub answer): peer-caused, so rate-limited, not an error. */
    if (strncmp(line, "Ran out of header data space", 28) == 0) {
        srv_log_peer(HUB_LOG_INFO, 0,
                     "request headers over %u bytes: closed without a "
                     "response", SRV_HEADER_BYTES);
        return;
    }
    if (strncmp(line, "More hdr frags than we can deal with", 36) == 0) {
        srv_log_peer(HUB_LOG_INFO, 0, "request with too many header lines: "
                                      "closed without a response");
        return;
    }
    /* lws warns mostly about what peers do (bad headers, refused
     * upgrades), so its warnings share the peer rate limit. */
    if (level == LLL_ERR)
        srv_log(HUB_LOG_ERR, 0, "lws: %.*s", (int)n, line);
    else
        srv_log_peer(HUB_LOG_WARN, 0, "lws: %.*s", (int)n, line);
}

/*
 * lws 4.1.6 as Debian builds it formats every log line into one global
 * buffer inside _lws_logv() and hands that buffer to the emit callback
 * (ThreadSanitizer: vsnprintf from _lws_logv writes a global in
 * libwebsockets.so's data, which lws_emit() then reads). With one lws
 * context per thread, two loops logging at once overwrite each other's line
 * while it is read: TSan reports the race when two loops refuse upgrades at
 * the same moment. lws calls its own _lws_log()/_lws_logv() through the PLT, so the
 * definitions below, in the executable, take their place: same public
 * signatures (lws-logs.h), a buffer on the caller's stack, and the levels
 * srv_loops_create() asks lws for.
 */
#define SRV_LWS_LEVELS (LLL_ERR | LLL_WARN)

void _lws_logv(int filter, const char *format, va_list vl)
{
    char line[256];

    if (!(filter & SRV_LWS_LEVELS))
        return;
    vsnprintf(line, sizeof(line), format, vl);
    lws_emit(filter, line);
}

void _lws_log(int filter, const char *format, ...)
{
    va_list ap;

    va_start(ap, format);
    _lws_logv(filter, format, ap);
    va_end(ap);
}

static void hub_log_bridge(int level, unsigned loop, const char *fmt, ...)
{
    char line[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    srv_log_peer(level, loop, "%s", line);
}

int srv_loops_create(struct srv *srv)
{
    struct srv_config *cfg = srv->cfg;
    char err[256];
    uint16_t port = cfg->port;

    for (int t = 0; t < WSI_TOKEN_COUNT; t++)
        token_limits.token_limit[t] =
            request_line_token(t) ? 0 : SRV_HEADER_ONE_MAX;
    protocols[0].per_session_data_size = pss_size();
    protocols[0].rx_buffer_size = cfg->ws_rx_buffer;
    lws_set_log_level(SRV_LWS_LEVELS, lws_emit);
    hub_log = hub_log_bridge;
    json_object_seed(0);
    srv->loops = calloc(srv->n_loops, sizeof(*srv->loops));
    if (!srv->loops)
        return -ENOMEM;
    for (unsigned i = 0; i < srv->n_loops; i++) {
        struct srv_loop *l = &srv->loops[i];
        struct lws_context_creation_info info;
        lws_sock_file_fd_type u;

        l->srv = srv;
        l->id = i;
        l->listen_fd = make_listener(srv, port, err, sizeof(err));
        if (l->listen_fd < 0) {
            srv_log(HUB_LOG_ERR, i, "%s", err);
            return -EADDRINUSE;
        }
        if (i == 0) {
            port = bound_port(l->listen_fd);
            srv->port = port;
        }
        l->cork = malloc(SRV_CORK_BYTES);
        l->hub = hub_loop_create(srv->hub, &transport_ops, wake_loop, l,
                                 srv_now_ms());
        if (!l->cork || !l->hub)
            return -ENOMEM;
        hub_loop_set_heartbeat_yield(l->hub, heartbeat_yield);
        memset(&info, 0, sizeof(info));
        info.port = CONTEXT_PORT_NO_LISTEN_SERVER;
        info.protocols = protocols;
        info.user = l;
        info.retry_and_idle_policy = &no_validity;
        info.options = LWS_SERVER_OPTION_DISABLE_IPV6 * 0;
        info.timeout_secs = 10;
        info.pt_serv_buf_size = 4096;
        /* Browsers with a large cookie jar send 8-16 KB of headers; lws
         * holds this buffer only while it parses them. */
        info.max_http_header_data = SRV_HEADER_BYTES;
        info.token_limits = &token_limits;
        if (cfg->tls_cert) {
            info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
            info.ssl_cert_filepath = cfg->tls_cert;
            info.ssl_private_key_filepath = cfg->tls_key;
            info.ssl_cipher_list =
                "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
            info.tls1_3_plus_cipher_list =
                "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                "TLS_CHACHA20_POLY1305_SHA256";
            info.alpn = "http/1.1";
            /*
             * lws also builds a client SSL_CTX per vhost, with the whole
             * system CA store, for outbound connections the hub never
             * makes. It finds that context's bookkeeping again through a
             * process-global SSL_CTX ex_data index, which every context
             * creation with DO_SSL_GLOBAL_INIT reassigns, so with N loops
             * the first N-1 never free theirs (LeakSanitizer: about 700 KB
             * of CA certificates at exit). One empty client context of
             * ours, shared by the loops and freed after them, avoids both.
             */
            if (!srv->client_ctx)
                srv->client_ctx = SSL_CTX_new(TLS_client_method());
            if (!srv->client_ctx)
                return -ENOMEM;
            info.provided_client_ssl_ctx = srv->client_ctx;
            /* lws adds no SSLv2/3, no compression, server preference.
             * No renegotiation at all: OpenSSL 3 already refuses it from
             * clients, and the hub never starts one. */
            info.ssl_options_set = SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1 |
                                   SSL_OP_NO_RENEGOTIATION;
        }
        if (cfg->event_loop == SRV_LOOP_LIBEV) {
            void *foreign[1];

            l->evl = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK);
            if (!l->evl)
                return -ENOMEM;
            foreign[0] = l->evl;
            info.options |= LWS_SERVER_OPTION_LIBEV;
            info.foreign_loops = foreign;
            l->ctx = lws_create_context(&info);
            info.foreign_loops = NULL;
        } else {
            l->ctx = lws_create_context(&info);
        }
        if (!l->ctx) {
            srv_log(HUB_LOG_ERR, i, "lws_create_context failed%s",
                    cfg->tls_cert ? " (check --tls-cert / --tls-key)" : "");
            return -EIO;
        }
        l->vh = lws_get_vhost_by_name(l->ctx, "default");
        /* No service thread runs yet, so touching the sul list is safe. */
        l->running = true;
        l->last_wheel_ms = srv_now_ms();
        atomic_init(&l->stall_armed, false);
        lws_sul_schedule(l->ctx, 0, &l->sul_wheel, wheel_sul_cb,
                         (lws_usec_t)srv->hcfg.tick_ms * 1000);
        u.filefd = (lws_filefd_type)(intptr_t)l->listen_fd;
        l->accepting = true;
        if (!l->vh || !lws_adopt_descriptor_vhost(l->vh, LWS_ADOPT_RAW_FILE_DESC,
                                                  u, "acceptor", NULL)) {
            srv_log(HUB_LOG_ERR, i, "cannot adopt the listen socket");
            return -EIO;
        }
    }
    return 0;
}

static void *loop_thread(void *arg)
{
    struct srv_loop *l = arg;

    if (l->evl) {
        while (l->running)
            ev_run(l->evl, 0);
    } else {
        while (l->running)
            if (lws_service(l->ctx, 0) < 0)
                break;
    }
    /* Every loop has stopped servicing before any context goes away: a
     * late lws_cancel_service() into a destroyed context would be a
     * use-after-free (docs/LWS.md, "Cross-thread wakeup"). */
    pthread_barrier_wait(&l->srv->barrier);
    atomic_store(&l->srv->stopping, true);
    atomic_store(&l->srv->hub->stopping, true);
    lws_context_destroy(l->ctx);
    l->ctx = NULL;
    if (l->evl) {
        ev_loop_destroy(l->evl);
        l->evl = NULL;
    }
    pthread_barrier_wait(&l->srv->barrier);
    hub_loop_destroy(l->hub);
    l->hub = NULL;
    atomic_fetch_add(&l->srv->loops_done, 1);
    return NULL;
}

int srv_loops_start(struct srv *srv)
{
    pthread_barrier_init(&srv->barrier, NULL, srv->n_loops);
    for (unsigned i = 0; i < srv->n_loops; i++) {
        struct srv_loop *l = &srv->loops[i];
        char name[16];

        l->running = true;
        if (pthread_create(&l->thread, NULL, loop_thread, l))
            return -errno;
        snprintf(name, sizeof(name), "lubdub-%u", i % 1000);
        pthread_setname_np(l->thread, name);
    }
    return 0;
}

void srv_loops_join(struct srv *srv)
{
    for (unsigned i = 0; i < srv->n_loops; i++)
        pthread_join(srv->loops[i].thread, NULL);
    for (unsigned i = 0; i < srv->n_loops; i++) {
        if (srv->loops[i].listen_fd >= 0)
            close(srv->loops[i].listen_fd);
        free(srv->loops[i].cork);
        free(srv->loops[i].flush);
        srv_tls_loop_fini(&srv->loops[i]);
    }
    pthread_barrier_destroy(&srv->barrier);
    SSL_CTX_free(srv->client_ctx); /* the contexts are gone */
    srv->client_ctx = NULL;
    free(srv->loops);
    srv->loops = NULL;
}
