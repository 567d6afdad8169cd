/*
 * server/lws/write.c - the write path: three of the hub's transport ops
 * (server/loop/threads.c puts them in the table) and the two places bytes
 * go to lws. Which bytes, and in which order, is the
 * session's decision (hub_session_next_out / _out_done, docs/DESIGN.md
 * section 6); this file only hands them to lws_write().
 *
 * Data goes out corked from a 1 us sul right after the read pass that
 * queued it (hub_loop_flush over the loop's pending list, flush_one()):
 * one LWS_WRITE_RAW of every queued, pre-framed frame that fits the cork.
 * SERVER_WRITEABLE (srv_write_one) handles the rest, one thing per
 * callback: a due heartbeat ping first, else one cork (sockets lws still
 * holds bytes for), else the close frame.
 *
 * Thread: the loop's own, except srv_test_stall_arm (any thread).
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "server/lws/srv.h"

static void flush_sul_cb(lws_sorted_usec_list_t *sul);

void srv_write_want_writable(void *conn)
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
 * SERVER_WRITEABLE (srv_write_want_writable).
 */
void srv_write_flush_soon(void *ctx)
{
    struct srv_loop *l = ctx;

    lws_sul_schedule(l->ctx, 0, &l->sul_flush, flush_sul_cb, 1);
}

void srv_write_kill(void *conn)
{
    lws_set_timeout(conn, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
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
    srv_log_event(HUB_LOG_WARN, l->id,
                  HUB_LOG_F(.event = "test_hook"),
                  "test: stalling loop %u for %u ms", l->id,
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
/*
 * A TLS session paused by backpressure whose reading server/loop/ws.c could not
 * stop (OpenSSL still held decrypted bytes after its last message: lws
 * 4.1.6 would loop forever between its cache and them, docs/LWS.md,
 * "Stopping a TLS session's reads") stops being read here: lws's read of
 * it is over and OpenSSL holds nothing, so the stop is clean, and a paused
 * session always has output, so one of the two writers below comes by.
 * Repeated calls change nothing in lws.
 */
static void rx_pause_tls(struct hub_session *s, struct lws *wsi)
{
    if (hub_session_rx_paused(s) && lws_is_ssl(wsi))
        lws_rx_flow_control(wsi, LWS_RXFLOW_REASON_APPLIES_DISABLE |
                                     SRV_RXFLOW_BACKPRESSURE);
}

int srv_write_one(struct srv_loop *l, struct hub_session *s, struct lws *wsi)
{
    unsigned char ping[LWS_PRE + sizeof(((struct hub_out *)0)->ping)];
    struct hub_out o;

    rx_pause_tls(s, wsi);
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

    rx_pause_tls(s, wsi);
    switch (hub_session_peek_out(s)) {
    case HUB_OUT_NONE:
        (void)hub_session_next_out(s, NULL, 0, &o); /* served: nothing */
        return;
    case HUB_OUT_DATA:
        if (hub_session_is_open(s) && !lws_partial_buffered(wsi)) {
            (void)hub_session_next_out(s, l->cork, SRV_CORK_BYTES, &o);
            if (lws_write(wsi, (unsigned char *)o.data, o.len,
                          LWS_WRITE_RAW) < (int)o.len) {
                srv_write_kill(wsi);
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

/*
 * The read bypass's pass is over (server/lws/direct.c, before the loop polls):
 * the same flush, now. Its reads run outside lws's service, and a sul
 * scheduled there is only noticed when lws next runs its timers (its libev
 * idle or timer watcher), up to a wheel tick later.
 */
void srv_write_flush_now(struct srv_loop *l)
{
    lws_sul_cancel(&l->sul_flush);
    hub_loop_flush(l->hub, flush_one, l);
}

