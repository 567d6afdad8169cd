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

uint64_t srv_now_ms(void)
{
    return hub_clock_now_ms(hub_clock_monotonic());
}

static struct srv_loop *loop_of(struct lws *wsi)
{
    return lws_context_user(lws_get_context(wsi));
}

/* Transport ops for the hub. */

static void flush_sul_cb(lws_sorted_usec_list_t *sul);

static void op_want_writable(void *conn)
{
    lws_callback_on_writable(conn);
}

/*
 * The loop's pending list went non-empty: its sessions' data goes out
 * corked, straight after the read round that produced it, from a 1 us sul
 * (run before the next poll) that writes every listed session's queue
 * with one lws_write(LWS_WRITE_RAW) each. That skips lws's POLLOUT round
 * trip (two pollfd changes, a poll() that reports every subscriber, one
 * WRITEABLE callback each), which the fan-out profile showed to be the
 * cost; docs/LWS.md ("Fan-out at the corked ceiling") measured the same.
 * Pings, closes and sessions whose socket is backed up still go through
 * SERVER_WRITEABLE (op_want_writable).
 */
static void op_flush_soon(void *ctx)
{
    struct srv_loop *l = ctx;

    lws_sul_schedule(l->ctx, 0, &l->sul_flush, flush_sul_cb, 1);
}

static void op_kill(void *conn)
{
    lws_set_timeout(conn, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
}

static const struct hub_transport_ops transport_ops = {
    .want_writable = op_want_writable,
    .flush_soon = op_flush_soon,
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

/*
 * The upgrade went through: the hub finds the app from the path and the
 * protocol version from the query (hub_pusher_connect), then the debug
 * "open" line gets the peer's address (only looked up when it is logged).
 */
static void ws_established(struct hub_session *s, struct lws *wsi)
{
    char uri[256], arg[64], peer[64];
    int n = lws_hdr_copy(wsi, uri, sizeof(uri), WSI_TOKEN_GET_URI);
    int proto = -1;

    for (int i = 0; lws_hdr_copy_fragment(wsi, arg, sizeof(arg),
                                          WSI_TOKEN_HTTP_URI_ARGS, i) > 0;
         i++)
        if (strncmp(arg, "protocol=", 9) == 0)
            proto = atoi(arg + 9);
    hub_pusher_connect(s, n > 0 ? uri : NULL, n > 0 ? (size_t)n : 0, proto);
    if (!srv_log_enabled(HUB_LOG_DEBUG))
        return;
    if (!lws_get_peer_simple(wsi, peer, sizeof(peer)))
        strcpy(peer, "?");
    hub_session_opened(s, peer);
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

/*
 * SERVER_WRITEABLE: write the one thing the session has next (a ping, a
 * cork of data, or the close). out_done asks for another callback when
 * more is left. 0, or -1 to close the connection (after the close frame,
 * or when a write failed).
 */
static int srv_write_one(struct srv_loop *l, struct hub_session *s,
                         struct lws *wsi)
{
    unsigned char ping[LWS_PRE + sizeof(((struct hub_out *)0)->ping)];
    struct hub_out o;

    switch (hub_session_next_out(s, l->cork, SRV_CORK_BYTES, &o)) {
    case HUB_OUT_PING:
        memcpy(ping + LWS_PRE, o.data, o.len);
        if (lws_write(wsi, ping + LWS_PRE, o.len, LWS_WRITE_PING) <
            (int)o.len)
            return -1;
        hub_session_out_done(s, &o, o.len, srv_now_ms());
        if (l->stall_after_ping)
            test_stall(l);
        return 0;
    case HUB_OUT_DATA:
        if (lws_write(wsi, (unsigned char *)o.data, o.len, LWS_WRITE_RAW) <
            (int)o.len)
            return -1;
        hub_session_out_done(s, &o, o.len, 0);
        return 0;
    case HUB_OUT_CLOSE:
        lws_close_reason(wsi, (enum lws_close_status)o.close_code,
                         (unsigned char *)o.data, o.len);
        return -1;
    case HUB_OUT_NONE:
        break;
    }
    return 0;
}

/*
 * One session of the pending list, from the flush sul: an open session
 * with data and a socket lws holds nothing for is written here, corked;
 * anything else (a ping or close came up since it was listed, or lws
 * still buffers bytes for the socket: then lws flushes first, so at most
 * one cork ever waits inside lws) takes the WRITEABLE path.
 */
static void flush_one(void *ctx, struct hub_session *s)
{
    struct srv_loop *l = ctx;
    struct lws *wsi = hub_session_conn(s);
    struct hub_out o;

    switch (hub_session_peek_out(s)) {
    case HUB_OUT_NONE:
        (void)hub_session_next_out(s, NULL, 0, &o); /* served: nothing */
        return;
    case HUB_OUT_DATA:
        if (hub_session_is_open(s) && !lws_partial_buffered(wsi)) {
            (void)hub_session_next_out(s, l->cork, SRV_CORK_BYTES, &o);
            if (lws_write(wsi, (unsigned char *)o.data, o.len,
                          LWS_WRITE_RAW) < (int)o.len) {
                op_kill(wsi);
                return;
            }
            hub_session_out_done(s, &o, o.len, 0);
            return;
        }
        break;
    default:
        break;
    }
    hub_session_await_writable(s);
}

static void flush_sul_cb(lws_sorted_usec_list_t *sul)
{
    struct srv_loop *l = lws_container_of(sul, struct srv_loop, sul_flush);

    hub_loop_flush(l->hub, flush_one, l);
}

static int main_cb(struct lws *wsi, enum lws_callback_reasons reason,
                   void *user, void *in, size_t len)
{
    struct srv_loop *l;
    struct hub_session *s = user;
    const char *msg;
    size_t msg_len;
    uint64_t now;

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
        if (hub_session_init(s, l->hub, wsi, srv_now_ms()))
            return -1;
        ws_established(s, wsi);
        return 0;
    case LWS_CALLBACK_RECEIVE:
        if (!hub_session_live(s))
            return -1;
        now = srv_now_ms();
        if (hub_session_rx_append(s, in, len,
                                  lws_remaining_packet_payload(wsi),
                                  lws_is_final_fragment(wsi),
                                  lws_frame_is_binary(wsi), now, &msg,
                                  &msg_len) <= 0)
            return 0;
        hub_pusher_on_message(s, msg, msg_len, now);
        hub_session_rx_done(s);
        return 0;
    case LWS_CALLBACK_RECEIVE_PONG:
        if (hub_session_live(s))
            hub_session_on_pong(s, srv_now_ms());
        return 0;
    case LWS_CALLBACK_SERVER_WRITEABLE:
        if (!hub_session_live(s))
            return 0;
        return srv_write_one(loop_of(wsi), s, wsi);
    case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE: {
        /* Before lws echoes the peer's close: lws 4.1.6 would echo a
         * one-byte payload, codes of 5000 and up and reasons that are not
         * UTF-8; the hub fails those with 1002 or 1007 instead (-1 makes
         * lws send the reason set here). */
        const char *why;
        unsigned code = hub_session_on_peer_close(s, in, len, srv_now_ms(),
                                                  &why);

        if (!code)
            return 0;
        lws_close_reason(wsi, (enum lws_close_status)code,
                         (unsigned char *)why, strlen(why));
        return -1;
    }
    case LWS_CALLBACK_CLOSED:
        hub_session_closed(s, srv_now_ms());
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
    hub_log_enabled = srv_log_enabled;
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
        srv_tls_loop_fini(&srv->loops[i]);
    }
    pthread_barrier_destroy(&srv->barrier);
    SSL_CTX_free(srv->client_ctx); /* the contexts are gone */
    srv->client_ctx = NULL;
    free(srv->loops);
    srv->loops = NULL;
}
