/*
 * server/lws/direct.c - the read bypass for established sessions, plain
 * TCP and TLS (--ws-direct-read, docs/DESIGN.md section 14, docs/LWS.md
 * "The read bypass").
 *
 * lws 4.1.6 reads a WebSocket at most rx_buffer_size bytes per loop pass;
 * here one recv() of up to 64 KiB per readiness (on TLS: SSL_read() of
 * the session's own SSL, record after record up to 64 KiB,
 * server/lws/tlsread.c) goes into the loop's one buffer and
 * server/lws/wsread.c frames it. The handover:
 *
 * - ESTABLISHED only notes the session. lws parsed the upgrade out of its
 *   read and will put what followed the request (a client that did not
 *   wait for the 101) on the wsi's buflist after the callback returns.
 * - Right before the loop next polls (an ev_prepare watcher: every
 *   callback of this pass has run, lws has not serviced the socket
 *   again), lws_service_adjust_timeout() says whether any wsi of the
 *   context that is not flow-controlled holds buflist bytes. If none does,
 *   lws has parsed no WebSocket byte of these sessions and holds none, so
 *   lubdub takes the socket: lws's reading is turned off with a flow
 *   control reason bit of our own and the socket joins the loop's epoll
 *   set. If some wsi
 *   holds bytes (it may be one of ours), these sessions stay on lws's
 *   read path for good (counted as ws_direct_declined). The same answer
 *   covers TLS: a wsi that is not flow-controlled and whose last read
 *   left decrypted bytes in OpenSSL is on lws's TLS pending list, which
 *   makes it 0 too; from the handover on, lws's pending-list service
 *   skips the session (it fakes POLLIN only where POLLIN is wanted).
 * - TLS sessions have two more ways to hold bytes no socket event will
 *   announce: OpenSSL's (after the handover, or after a read that filled
 *   the buffer mid-record) and a read that waits for the socket to be
 *   writable (server/lws/tlsread.h). The first go on a "ready" list that
 *   our ev_prepare reads once per loop iteration (an ev_idle keeps the
 *   poll from blocking meanwhile), so one session gets 64 KiB a pass like
 *   any other; the second watch EPOLLOUT until the read goes through.
 * - lws re-enables its reading in its close states only by clearing the
 *   user-bool reason (ops-ws.c, rops_handle_POLLIN_ws); our own bit stays
 *   set, so from the handover until CLOSED only this file reads the
 *   socket. The closes lws runs (the hub's close frame, a 1002) wait for
 *   the peer's answer here: a close frame or EOF ends the connection
 *   (LWS_TO_KILL_SYNC, the read's last step), as lws would on the ack.
 * - A sul scheduled from here waits for lws's next timer run (lws re-arms
 *   its libev timer only from its own callbacks), so the corked flush of
 *   what the reads queued runs from our ev_prepare.
 * - CLOSED takes the socket out of the watch and frees the framing state
 *   before lws closes the fd.
 * - Input backpressure (hub_session_rx_pause): after a message that left
 *   the session's queue past the high mark, the feed stops, keeps the rest
 *   of the read in the framing state and the socket leaves the epoll set;
 *   nothing more is read of it. When the queue is back under the low mark
 *   (srv_direct_resume, from the write path) the session joins a list
 *   that our ev_prepare serves: the kept bytes are parsed, and if that
 *   does not pause it again the socket rejoins the set (and a TLS session
 *   the ready list: OpenSSL may hold the rest of the record the paused
 *   read ended in, and the socket may never be readable again).
 *
 * Memory: no byte per idle session in user space. The sockets handed over
 * sit in one epoll set per loop, watched by one ev_io on that set (a
 * libev watcher per socket would be 48 bytes a session); each one's data
 * is its wsi. The ready list holds a pointer per TLS session with bytes
 * to read now, for one loop iteration. The framing state
 * (server/lws/wsread.h, NULL while it holds none) hangs off lws's opaque
 * user pointer, which lubdub uses for nothing else: BYPASSED while there
 * is none. A TLS session's SSL is lws's, read buffers released when
 * empty (SSL_MODE_RELEASE_BUFFERS) as on lws's path.
 *
 * Thread: the loop's own.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <ev.h>

#include "hub/loop/compress.h"
#include "hub/pusher/pusher.h"
#include "server/lws/direct.h"
#include "server/lws/rxpool.h"
#include "server/lws/srv.h"
#include "server/lws/tlsread.h"
#include "server/lws/wsread.h"

#define DIRECT_BUF_BYTES (64 * 1024)
#define DIRECT_EVENTS 64
/* A flow-control reason bit lws itself never uses (lws-misc.h uses bits
 * 0, 6 and 7): lws's own "allow" in its close states leaves it set. */
#define DIRECT_RXFLOW_BIT (1 << 4)

/* An established session waiting for the handover, and lws's receive
 * buffer of it when the pool lent it (server/lws/rxpool.h; else NULL). */
struct pending {
    struct lws *wsi;
    void *rx;
};

struct srv_direct {
    struct srv_loop *l;
    struct srv_wsread_loop *wr;
    unsigned char *buf;            /* DIRECT_BUF_BYTES */
    int epfd;                      /* the handed-over sockets */
    ev_io epw;                     /* on epfd */
    ev_prepare prep;
    struct pending *pending;       /* established, not handed over yet */
    size_t n_pending, cap_pending;
    struct lws **resumed;          /* paused sessions to read again */
    size_t n_resumed, cap_resumed;
    /* TLS sessions to read without a socket event (their bytes are in
     * OpenSSL), in order; a closed one's entries become NULL. The next
     * ev_prepare serves or drops every entry, so a session holds at most
     * a few (one a read or resume of it since). */
    struct lws **ready;
    size_t n_ready, cap_ready;
    ev_idle idle;                  /* no blocking poll while n_ready */
    bool flush_due;                /* a read ran: flush before polling */
    bool kill;                     /* the read's sink asked for a close */
};

/* lws's opaque pointer of a bypassed session that holds no state. */
static char bypassed_mark;
#define BYPASSED ((void *)&bypassed_mark)
/* ... and of a session between its 101 with permessage-deflate and its
 * ESTABLISHED (srv_direct_take_pmd clears it before any handover). */
static char pmd_mark;
#define PMD_NOTED ((void *)&pmd_mark)

/* From the sink (inside a feed): the connection ends once the feed is
 * over (read_one), synchronously, as nothing touches it afterwards. A
 * sul (LWS_TO_KILL_ASYNC) scheduled outside lws's service would wait for
 * lws's next timer run. */
static void kill_after_read(struct lws *wsi)
{
    srv_loop_of(wsi)->direct->kill = true;
}

/* The sink: what server/loop/ws.c does for lws's callbacks, from our frames.
 * u is the wsi. */

/* A piece of a data message; deflated: of a compressed one. */
static void sink_piece(void *u, const void *p, size_t len, size_t remaining,
                       bool fin, bool binary, bool deflated)
{
    struct hub_session *s = lws_wsi_user(u);
    const char *msg;
    size_t msg_len;
    uint64_t now;

    if (!hub_session_live(s)) {
        kill_after_read(u);
        return;
    }
    now = srv_now_ms();
    if ((deflated ? hub_session_rx_append_deflated
                  : hub_session_rx_append)(s, p, len, remaining, fin, binary,
                                           now, &msg, &msg_len) <= 0)
        return;
    hub_pusher_on_message(s, msg, msg_len, now);
    hub_session_rx_done(s);
    if (hub_session_rx_pause(s))
        srv_wsread_pause(srv_loop_of(u)->direct->wr);
}

static void sink_data(void *u, const void *p, size_t len, size_t remaining,
                      bool fin, bool binary)
{
    sink_piece(u, p, len, remaining, fin, binary, false);
}

static void sink_data_z(void *u, const void *p, size_t len, size_t remaining,
                        bool fin, bool binary)
{
    sink_piece(u, p, len, remaining, fin, binary, true);
}

/* Whether the peer may send compressed messages: it negotiated
 * permessage-deflate in the handshake (server/loop/ws.c). */
static bool sink_pmd(void *u)
{
    struct hub_session *s = lws_wsi_user(u);

    return hub_session_live(s) && hub_session_pmd(s);
}

static void sink_pong(void *u)
{
    struct hub_session *s = lws_wsi_user(u);

    if (hub_session_live(s))
        hub_session_on_pong(s, srv_now_ms());
}

static void sink_want_write(void *u)
{
    lws_callback_on_writable(u);
}

static bool sink_close(void *u, const unsigned char *p, size_t len)
{
    struct hub_session *s = lws_wsi_user(u);
    const char *why;

    if (!hub_session_is_open(s)) {
        /* The answer to a close lws sent (or is about to): done, as lws
         * would be in AWAITING_CLOSE_ACK. */
        kill_after_read(u);
        return false;
    }
    if (hub_session_on_peer_close(s, p, len, srv_now_ms(), &why))
        /* The hub started its own close with that code (1002 or 1007)
         * instead of an echo; its close frame goes out as any other. */
        return false;
    /* Echoed from SERVER_WRITEABLE (srv_direct_writable), as lws does. */
    lws_callback_on_writable(u);
    return true;
}

static void sink_fail(void *u, unsigned code, const char *why)
{
    struct hub_session *s = lws_wsi_user(u);

    HUB_STAT_ADD(srv_loop_of(u)->hub->stats.ws_direct_proto_errors, 1);
    if (!hub_session_live(s)) {
        kill_after_read(u);
        return;
    }
    /* The close frame goes out through the hub's write path (lws's
     * LWS_TO_KILL_ASYNC would close without one). why is static. */
    hub_session_close(s, (uint16_t)code, why, HUB_CLOSE_ERROR, true);
}

static const struct srv_wsread_sink sink = {
    .data = sink_data,
    .pmd = sink_pmd,
    .data_z = sink_data_z,
    .pong = sink_pong,
    .want_write = sink_want_write,
    .close = sink_close,
    .fail = sink_fail,
};

/*
 * Feed wsi's framing state with n bytes at buf (resume: NULL, what a pause
 * kept). Returns true when the connection must end now (the sink's close,
 * or out of memory). A pause takes the socket out of the epoll set.
 */
static bool feed(struct srv_direct *d, struct lws *wsi, const void *buf,
                 size_t n)
{
    void *op = lws_get_opaque_user_data(wsi);
    struct srv_wsread *st = op == BYPASSED ? NULL : op;
    enum srv_wsread_rc rc;
    bool kill;

    d->kill = false;
    /* The client events of this read reach each channel's members in
     * one walk per run of them (hub/loop/publish.h, hub_defer_begin). */
    hub_defer_begin(d->l->hub);
    rc = buf ? srv_wsread_feed(d->wr, &st, buf, n, &sink, wsi)
             : srv_wsread_resume(d->wr, &st, &sink, wsi);
    hub_defer_end(d->l->hub);
    if (rc == SRV_WSREAD_NOMEM) {
        hub_session_close(lws_wsi_user(wsi), 1011, "out of memory",
                          HUB_CLOSE_ERROR, true);
        d->kill = true;
    }
    /* After a close or failure the state discards what follows until
     * EOF or the hub's close timeout ends the connection. */
    lws_set_opaque_user_data(wsi, st ? (void *)st : BYPASSED);
    d->flush_due = true;
    kill = d->kill;
    d->kill = false;
    if (rc == SRV_WSREAD_PAUSED && !kill)
        (void)epoll_ctl(d->epfd, EPOLL_CTL_DEL, lws_get_socket_fd(wsi), NULL);
    return kill;
}

/*
 * List a TLS session to be read by the next ev_prepare, whether or not its
 * socket becomes readable. 0, or -ENOMEM.
 */
static int list_ready(struct srv_direct *d, struct lws *wsi)
{
    if (d->n_ready == d->cap_ready) {
        size_t cap = d->cap_ready ? d->cap_ready * 2 : 16;
        struct lws **n = realloc(d->ready, cap * sizeof(*n));

        if (!n)
            return -ENOMEM;
        d->ready = n;
        d->cap_ready = cap;
    }
    d->ready[d->n_ready++] = wsi;
    ev_prepare_start(d->l->evl, &d->prep);
    return 0;
}

/* What the epoll set watches of a handed-over socket. */
static void watch(struct srv_direct *d, struct lws *wsi, uint32_t events)
{
    struct epoll_event ev = { .events = events, .data.ptr = wsi };

    (void)epoll_ctl(d->epfd, EPOLL_CTL_MOD, lws_get_socket_fd(wsi), &ev);
}

/*
 * One handed-over session to read: its socket is ready (events, from the
 * epoll set), or it is a TLS session from the ready list (events 0).
 */
static void read_one(struct srv_direct *d, struct lws *wsi, uint32_t events)
{
    unsigned tls = 0;
    ssize_t n;

    if (lws_is_ssl(wsi)) {
        n = srv_tlsread(lws_get_ssl(wsi), d->buf, DIRECT_BUF_BYTES, &tls);
        /* EPOLLOUT only while a read waits for it. (A paused session is
         * out of the set: the MOD fails, its resume adds EPOLLIN.) */
        if (tls & SRV_TLSREAD_WANT_WRITE)
            watch(d, wsi, EPOLLIN | EPOLLOUT);
        else if (events & EPOLLOUT)
            watch(d, wsi, EPOLLIN);
    } else {
        n = recv(lws_get_socket_fd(wsi), d->buf, DIRECT_BUF_BYTES, 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            n = -EAGAIN;
    }
    if (n == -EAGAIN)
        return;
    if (n > 0) {
        struct hub_session *s = lws_wsi_user(wsi);

        HUB_STAT_ADD(d->l->hub->stats.ws_direct_reads, 1);
        if (feed(d, wsi, d->buf, (size_t)n))
            goto kill;
        /* OpenSSL holds more (or an end): read it next pass, unless a
         * pause stopped the session; its resume lists it. */
        if (!(tls & SRV_TLSREAD_MORE) ||
            (hub_session_live(s) && hub_session_rx_paused(s)))
            return;
        if (list_ready(d, wsi) == 0)
            return;
    }
kill:
    /* EOF, a reset, a TLS error or close_notify, the sink's close, or no
     * memory to list it: lws closes the session now (CLOSED takes it out
     * of the set and frees the state; hub_session_closed runs there,
     * once). */
    lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_SYNC);
}

/*
 * The TLS sessions listed before this pass, in order, each read once
 * (entries listed meanwhile wait for the next pass: one session with a
 * stream of records cannot hold the loop). A paused session is skipped:
 * its resume lists it again. Entries are taken by index, as a read can
 * list, close or grow the list.
 */
static void read_ready(struct srv_direct *d)
{
    size_t n0 = d->n_ready;

    if (!n0)
        return;
    for (size_t i = 0; i < n0; i++) {
        struct lws *wsi = d->ready[i];
        struct hub_session *s;

        if (!wsi)
            continue;
        d->ready[i] = NULL;
        s = lws_wsi_user(wsi);
        if (hub_session_live(s) && hub_session_rx_paused(s))
            continue;
        read_one(d, wsi, 0);
    }
    memmove(d->ready, d->ready + n0, (d->n_ready - n0) * sizeof(*d->ready));
    d->n_ready -= n0;
}

static void on_idle(struct ev_loop *evl, ev_idle *w, int revents)
{
    struct srv_direct *d = w->data;

    /* Only there to keep the poll from blocking while sessions are
     * listed; the ev_prepare reads them. */
    (void)revents;
    if (!d->n_ready)
        ev_idle_stop(evl, w);
}

/* The paused sessions whose queues went back under the low mark: parse
 * what each kept, then watch its socket again unless that paused it once
 * more. A session that closed meanwhile left the list (srv_direct_closed).
 * Each entry is taken off before it is fed: a feed can close or resume
 * any session. */
static void resume_all(struct srv_direct *d)
{
    while (d->n_resumed) {
        struct lws *wsi = d->resumed[--d->n_resumed];
        struct hub_session *s = lws_wsi_user(wsi);
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = wsi };

        if (feed(d, wsi, NULL, 0)) {
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_SYNC);
            continue;
        }
        if (hub_session_live(s) && hub_session_rx_paused(s))
            continue;
        /* A TLS session is read once more whatever its socket says:
         * OpenSSL may hold the rest of the record its paused read ended
         * in (or an end), which no socket event would announce. */
        if ((epoll_ctl(d->epfd, EPOLL_CTL_ADD, lws_get_socket_fd(wsi), &ev) &&
             errno != EEXIST) ||
            (lws_is_ssl(wsi) && list_ready(d, wsi)))
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
    }
}

static void on_readable(struct ev_loop *evl, ev_io *w, int revents)
{
    struct srv_direct *d = w->data;
    struct epoll_event ev[DIRECT_EVENTS];
    int n;

    (void)revents;
    n = epoll_wait(d->epfd, ev, DIRECT_EVENTS, 0);
    /* Each event names a live wsi: a closed one leaves the set in CLOSED,
     * and the only close read_one makes synchronously is its own wsi's,
     * after which nothing of it is touched. (Every other close the hub
     * asks for is asynchronous, LWS_TO_KILL_ASYNC or a close frame.) */
    for (int i = 0; i < n; i++)
        read_one(d, ev[i].data.ptr, ev[i].events);
    /* What the messages queued goes out before the loop polls. */
    if (d->flush_due)
        ev_prepare_start(evl, &d->prep);
}

static void handover(struct srv_direct *d, struct lws *wsi, void *rx)
{
    struct epoll_event ev = { .events = EPOLLIN, .data.ptr = wsi };

    if (epoll_ctl(d->epfd, EPOLL_CTL_ADD, lws_get_socket_fd(wsi), &ev)) {
        HUB_STAT_ADD(d->l->hub->stats.ws_direct_declined, 1);
        return;
    }
    /* A TLS session's first read does not wait for its socket: OpenSSL
     * may hold bytes of the request's last record (or, with read-ahead,
     * more records), which no socket event would announce. */
    if (lws_is_ssl(wsi) && list_ready(d, wsi)) {
        (void)epoll_ctl(d->epfd, EPOLL_CTL_DEL, lws_get_socket_fd(wsi), NULL);
        HUB_STAT_ADD(d->l->hub->stats.ws_direct_declined, 1);
        return;
    }
    lws_set_opaque_user_data(wsi, BYPASSED);
    lws_rx_flow_control(wsi, LWS_RXFLOW_REASON_APPLIES_DISABLE |
                                 DIRECT_RXFLOW_BIT |
                                 LWS_RXFLOW_REASON_FLAG_PROCESS_NOW);
    /* lws's parser, the only user of its receive buffer, never runs for
     * this session again: the buffer goes back to the pool now (lws's
     * free of it at the close is then ignored). */
    if (rx) {
        srv_rxpool_release(rx);
        HUB_STAT_ADD(d->l->hub->stats.ws_direct_rx_released, 1);
    }
    HUB_STAT_ADD(d->l->hub->stats.ws_direct_sessions, 1);
}

static void on_prepare(struct ev_loop *evl, ev_prepare *w, int revents)
{
    struct srv_direct *d = w->data;
    /* Non-zero: no wsi that lws would read holds buflist bytes. */
    bool clean = d->n_pending &&
                 lws_service_adjust_timeout(d->l->ctx, 1, 0) != 0;

    (void)revents;
    for (size_t i = 0; i < d->n_pending; i++) {
        /* A session paused by backpressure on lws's path has bytes in
         * lws's buflist that the check above does not see (it skips
         * flow-controlled wsis): it stays with lws. */
        if (clean &&
            !hub_session_rx_paused(lws_wsi_user(d->pending[i].wsi)))
            handover(d, d->pending[i].wsi, d->pending[i].rx);
        else
            HUB_STAT_ADD(d->l->hub->stats.ws_direct_declined, 1);
    }
    d->n_pending = 0;
    read_ready(d);
    /* A flush can drain a paused session's queue and list it again: a few
     * rounds here, then the next loop iteration (the prepare stays on). */
    for (int round = 0; round < 4; round++) {
        resume_all(d);
        if (!d->flush_due)
            break;
        d->flush_due = false;
        srv_write_flush_now(d->l);
        if (!d->n_resumed)
            break;
    }
    /* Listed TLS sessions are read next pass, whatever the poll finds. */
    if (d->n_ready)
        ev_idle_start(evl, &d->idle);
    if (!d->n_resumed && !d->flush_due && !d->n_ready)
        ev_prepare_stop(evl, w);
}

int srv_direct_init(struct srv_loop *l)
{
    struct srv_direct *d;

    l->direct = NULL;
    if (!l->evl || !l->srv->cfg->ws_direct_read)
        return 0;
    d = calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    d->l = l;
    d->epfd = epoll_create1(EPOLL_CLOEXEC);
    d->wr = srv_wsread_loop_new();
    d->buf = malloc(DIRECT_BUF_BYTES);
    if (d->epfd < 0 || !d->wr || !d->buf) {
        if (d->epfd >= 0)
            close(d->epfd);
        srv_wsread_loop_free(d->wr);
        free(d->buf);
        free(d);
        return -ENOMEM;
    }
    ev_io_init(&d->epw, on_readable, d->epfd, EV_READ);
    d->epw.data = d;
    ev_io_start(l->evl, &d->epw);
    ev_prepare_init(&d->prep, on_prepare);
    d->prep.data = d;
    ev_idle_init(&d->idle, on_idle);
    d->idle.data = d;
    l->direct = d;
    return 0;
}

void srv_direct_fini(struct srv_loop *l)
{
    struct srv_direct *d = l->direct;

    if (!d)
        return;
    if (l->evl) {
        ev_io_stop(l->evl, &d->epw);
        ev_prepare_stop(l->evl, &d->prep);
        ev_idle_stop(l->evl, &d->idle);
    }
    close(d->epfd);
    srv_wsread_loop_free(d->wr);
    free(d->pending);
    free(d->resumed);
    free(d->ready);
    free(d->buf);
    free(d);
    l->direct = NULL;
}

void srv_direct_established(struct srv_loop *l, struct lws *wsi)
{
    struct srv_direct *d = l->direct;
    /* lws allocated this session's receive buffer right before calling
     * ESTABLISHED (server/lws/rxpool.h); taken here whatever happens next so
     * that no later session can take it. */
    void *rx = srv_rxpool_take_last();

    if (!d)
        return;
    if (d->n_pending == d->cap_pending) {
        size_t cap = d->cap_pending ? d->cap_pending * 2 : 64;
        struct pending *n = realloc(d->pending, cap * sizeof(*n));

        if (!n) {
            /* Stays on lws's read path: nothing lost but speed. */
            HUB_STAT_ADD(l->hub->stats.ws_direct_declined, 1);
            return;
        }
        d->pending = n;
        d->cap_pending = cap;
    }
    d->pending[d->n_pending].wsi = wsi;
    d->pending[d->n_pending++].rx = rx;
    ev_prepare_start(l->evl, &d->prep);
}

int srv_direct_writable(struct lws *wsi, int *ret)
{
    unsigned char buf[LWS_PRE + 2 + 125];
    void *op = lws_get_opaque_user_data(wsi);
    struct srv_wsread *st = op == BYPASSED ? NULL : op;
    size_t len = 0;
    unsigned code;

    if (!st)
        return 0;
    code = srv_wsread_take_out(&st, buf + LWS_PRE + 2, &len);
    lws_set_opaque_user_data(wsi, st ? (void *)st : BYPASSED);
    if (code == 0x8) {
        /* The close echo, byte for byte (an empty close gets an empty
         * one), as a raw server frame: lws's public API sends close
         * frames only with a status code (lws_close_reason). Then lws
         * closes without a close frame of its own (no reason was set). */
        buf[LWS_PRE] = 0x88;
        buf[LWS_PRE + 1] = (unsigned char)len;
        (void)lws_write(wsi, buf + LWS_PRE, len + 2, LWS_WRITE_RAW);
        *ret = -1;
        return 1;
    }
    if (code == 0xA) {
        *ret = lws_write(wsi, buf + LWS_PRE + 2, len, LWS_WRITE_PONG) <
                       (int)len
                   ? -1
                   : 0;
        /* Whatever else the session has goes out on the next callback. */
        lws_callback_on_writable(wsi);
        return 1;
    }
    return 0;
}

void srv_direct_resume_rx(void *conn)
{
    struct lws *wsi = conn;
    struct srv_direct *d = srv_loop_of(wsi)->direct;

    if (!d || !lws_get_opaque_user_data(wsi)) {
        lws_rx_flow_control(wsi, LWS_RXFLOW_REASON_APPLIES_ENABLE |
                                     SRV_RXFLOW_BACKPRESSURE);
        return;
    }
    /* Never listed twice: the hub resumes a session once per pause, and a
     * listed session is not read (so not paused again) until served. */
    if (d->n_resumed == d->cap_resumed) {
        size_t cap = d->cap_resumed ? d->cap_resumed * 2 : 16;
        struct lws **n = realloc(d->resumed, cap * sizeof(*n));

        if (!n) {
            /* Cannot read it again: end it rather than leave it deaf. */
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
            return;
        }
        d->resumed = n;
        d->cap_resumed = cap;
    }
    d->resumed[d->n_resumed++] = wsi;
    ev_prepare_start(d->l->evl, &d->prep);
}

bool srv_direct_would_take(const struct srv_loop *l, struct lws *wsi)
{
    (void)wsi; /* plain TCP and TLS alike */
    /* The handover right after this pass is declined when some wsi lws
     * would read holds bytes (on_prepare): if one does now, a session
     * negotiating permessage-deflate would likely stay with lws and fail
     * its first compressed message, so it is answered without. */
    return l->direct && lws_service_adjust_timeout(l->ctx, 1, 0) != 0;
}

void srv_direct_note_pmd(struct lws *wsi)
{
    lws_set_opaque_user_data(wsi, PMD_NOTED);
}

bool srv_direct_take_pmd(struct lws *wsi)
{
    if (lws_get_opaque_user_data(wsi) != PMD_NOTED)
        return false;
    lws_set_opaque_user_data(wsi, NULL);
    return true;
}

void srv_direct_closed(struct srv_loop *l, struct lws *wsi)
{
    struct srv_direct *d = l->direct;
    void *op;

    if (!d)
        return;
    op = lws_get_opaque_user_data(wsi);
    if (op == PMD_NOTED) {
        /* Closed between the 101 and ESTABLISHED: never bypassed. */
        lws_set_opaque_user_data(wsi, NULL);
        op = NULL;
    }
    if (op) {
        /* Out of the set before lws closes the fd: no event can name
         * this wsi again. */
        (void)epoll_ctl(d->epfd, EPOLL_CTL_DEL, lws_get_socket_fd(wsi), NULL);
        if (op != BYPASSED) {
            struct srv_wsread *st = op;

            srv_wsread_free(&st);
        }
        lws_set_opaque_user_data(wsi, NULL);
    }
    for (size_t i = 0; i < d->n_pending; i++)
        if (d->pending[i].wsi == wsi) {
            d->pending[i] = d->pending[--d->n_pending];
            break;
        }
    for (size_t i = 0; i < d->n_resumed; i++)
        if (d->resumed[i] == wsi) {
            d->resumed[i] = d->resumed[--d->n_resumed];
            break;
        }
    /* NULL in place: read_ready walks the list by index. */
    for (size_t i = 0; i < d->n_ready; i++)
        if (d->ready[i] == wsi)
            d->ready[i] = NULL;
}
