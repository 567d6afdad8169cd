/*
 * hub/loop/session.c - a session's state machine: lifecycle, inbound
 * reassembly and checks, deadlines, the heartbeat's ping, the drain, the
 * close, and what the transport pulls to write (next_out / out_done). The
 * queue's ring itself is hub/loop/sendq.c; the loop's list of sessions with
 * new output is hub/loop/pending.c, fed only by want_writable() below.
 *
 * Deadlines are lazy: nothing is re-armed per inbound frame. The pong timer
 * checks, when it fires, whether anything arrived since the ping; the
 * deadline timer re-arms itself for the rest of the idle timeout if data
 * arrived.
 *
 * The write deadline shares the deadline entry and is as lazy: the queue's
 * empty -> non-empty edge and every write that the socket took and that
 * left the queue at or under the low mark (HUB_RX_LOW) stamp tx_ms (a
 * store; the entry is armed only when it is idle or due later), and the
 * entry, when it fires, closes a queue that has held bytes since tx_ms
 * for write_timeout, else re-arms for the earlier of the two deadlines.
 * So a peer that takes nothing is closed after write_timeout, and so is
 * one that drains a trickle while its queue stays above the low mark: what
 * it drained meanwhile is not progress. An empty queue leaves nothing
 * armed for it.
 *
 * Every byte queued for a peer counts against its max_queue, replies and
 * errors included (a peer that sends messages the hub must answer and
 * reads nothing is a slow consumer like any other), and against its
 * loop's share of max_queued_total (hub/pusher/pusher.c holds a loop to it after
 * each message, as a fan-out does, so a loop that never publishes holds
 * its budget too).
 */
#include "hub/loop/session.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/loop/loop.h"
#include "hub/loop/compress.h"
#include "hub/loop/resume.h"
#include "hub/base/log.h"
#include "hub/wire/protocol.h"
#include "hub/wire/ws.h"

/* Per connection, so idle memory: a new field must pay for itself
 * (docs/BENCHMARKS.md). test_session_size checks the same figure. lws
 * mallocs it, and glibc serves a request of up to 248 B from a 256 B
 * chunk, 249-264 B from 272: 8 more bytes here cost 16 a session. */
#if defined(__LP64__)
_Static_assert(sizeof(struct hub_session) <= 248,
               "struct hub_session grew");
#endif

const char *hub_session_socket_id(const struct hub_session *s, char *buf)
{
    snprintf(buf, HUB_SOCKET_ID_MAX, "%" PRIu64 ".%" PRIu32, s->sid_hi,
             s->sid_lo);
    return buf;
}

static void pong_timer_cb(struct hub_timer *t, uint64_t now_ms);
static void deadline_timer_cb(struct hub_timer *t, uint64_t now_ms);
static void close_timer_cb(struct hub_timer *t, uint64_t now_ms);

/* The clock's microseconds, low 32 bits (ping round trips). */
static uint32_t ping_clock_us(const struct hub_loop *l)
{
    return (uint32_t)(hub_clock_now_ns(l->clock) / 1000);
}

static uint64_t slot_last_rx(const struct hub_session *s)
{
    return s->loop->shard.slots[s->shard_idx].last_rx_ms;
}

int hub_session_init(struct hub_session *s, struct hub_loop *l, void *conn,
                     uint64_t now_ms)
{
    int rc;

    memset(s, 0, sizeof(*s));
    s->loop = l;
    s->conn = conn;
    s->state = HUB_SESSION_OPEN;
    if (now_ms > l->now_ms)
        l->now_ms = now_ms;
    s->connected_ms = now_ms;
    s->last_data_ms = (uint32_t)now_ms;
    hub_timer_init(&s->pong_timer, pong_timer_cb);
    hub_timer_init(&s->deadline_timer, deadline_timer_cb);
    hub_list_init(&s->subs);
    hub_sendq_init(&s->q);
    rc = hub_shard_add(&l->shard, s, now_ms);
    if (rc) {
        s->loop = NULL;
        return rc;
    }
    /* Unique: the counter is per loop and the loop id is folded in. */
    s->sid_hi = ++l->sid_counter * HUB_MAX_LOOPS + l->id;
    /* In a cluster the node's tag is folded in too (hub_config). */
    if (l->cfg->node_tag)
        s->sid_hi = s->sid_hi << 16 | (l->cfg->node_tag & 0xffff);
    s->sid_lo = (uint32_t)hub_loop_random(l);
    if (l->cfg->idle_timeout_ms)
        hub_wheel_start(l->wheel, &s->deadline_timer, now_ms,
                        (int64_t)l->cfg->idle_timeout_ms);
    HUB_STAT_ADD(l->stats.sessions, 1);
    HUB_STAT_ADD(l->stats.accepted, 1);
    atomic_fetch_add(&l->hub->sessions, 1);
    return 0;
}

/* Drop the queue, and its bytes from the loop's queued_bytes. */
static void sendq_drop(struct hub_session *s)
{
    uint64_t bytes = hub_sendq_drop(&s->q);

    if (bytes)
        hub_loop_queued_sub(s->loop, bytes);
}

/* Stop the pong deadline, keeping stats.pong_armed exact. */
static void stop_pong(struct hub_loop *l, struct hub_session *s)
{
    if (hub_timer_is_armed(&s->pong_timer)) {
        HUB_STAT_ADD(l->stats.pong_armed, -1);
        hub_wheel_stop(l->wheel, &s->pong_timer);
    }
}

void hub_session_fini(struct hub_session *s, enum hub_close_reason reason)
{
    struct hub_loop *l = s->loop;

    if (!l)
        return;
    if (l->cfg->session_hooks && l->cfg->session_hooks->on_fini)
        l->cfg->session_hooks->on_fini(s);
    if (s->resume)
        hub_resume_session_gone(s);
    /* Off the pending list. Listed means flagged; the list is empty
     * outside a read pass, so the second test is only a cheap guard. */
    if (s->want_writable || l->pending.n)
        hub_pending_forget(&l->pending, s);
    s->want_writable = false;
    stop_pong(l, s);
    hub_wheel_stop(l->wheel, &s->deadline_timer);
    hub_shard_remove(&l->shard, s);
    sendq_drop(s);
    hub_sendq_fini(&s->q);
    free(s->rx_buf);
    s->rx_buf = NULL;
    s->rx_paused = false;
    free(s->user_id);
    s->user_id = NULL;
    s->rx_len = s->rx_cap = 0;
    HUB_STAT_ADD(l->stats.sessions, -1);
    HUB_STAT_ADD(l->stats.closed[reason], 1);
    atomic_fetch_sub(&l->hub->sessions, 1);
    if (s->app_counted) {
        atomic_fetch_sub(&hub_app_live_of(l->hub, s->app->index)->sessions,
                         1);
        s->app_counted = false;
    }
    hub_app_unref(s->app);
    s->app = NULL;
    s->loop = NULL;
    s->conn = NULL;
}

void hub_session_opened(struct hub_session *s, const char *peer)
{
    if (!s->loop || s->state != HUB_SESSION_OPEN)
        return;
    HUB_LOG_EVENT(HUB_LOG_DEBUG, s->loop->id,
                  HUB_LOG_F(.event = "session_open", .socket_id = HUB_SID(s),
                            .app = s->app ? s->app->id : NULL, .peer = peer),
                  "socket %s: open app=%s peer=%s", HUB_SID(s),
                  s->app ? s->app->id : "-", peer);
}

/*
 * One line per session end, for the operator. Closes that point at the
 * network or at a client (4201 no pong, 4100 slow consumer, 1009 too big,
 * 4004 over quota, 1011 internal) are info; ordinary ends (the peer left,
 * the drain, idle, other app refusals) are debug. The server's hook puts
 * both under the peer rate limit, so a partition that drops thousands at
 * once cannot flood the log.
 */
static void log_session_end(struct hub_session *s, enum hub_close_reason why,
                            uint64_t now_ms)
{
    unsigned code = why == HUB_CLOSE_PEER ? 0 : s->close_code;
    int level = HUB_LOG_DEBUG;

    if (code == 4201 || code == 4100 || code == 1009 || code == 4004 ||
        code == 1011)
        level = HUB_LOG_INFO;
    char sid[HUB_SOCKET_ID_MAX];
    unsigned long long ms = now_ms - s->connected_ms;
    const struct hub_log_fields *f;

    if (!hub_log_enabled(level))
        return;
    hub_session_socket_id(s, sid);
    f = HUB_LOG_F(.event = "session_close", .socket_id = sid, .code = code,
                  .app = s->app ? s->app->id : NULL, .user_id = s->user_id,
                  .reason = hub_close_reason_name(why), .duration_ms = ms);
    if (code)
        hub_log_event(level, s->loop->id, f,
                      "socket %s: closed %u (%s, %s) app=%s after %llums",
                      sid, code, hub_close_reason_name(why),
                      s->close_text ? s->close_text : "",
                      s->app ? s->app->id : "-", ms);
    else
        hub_log_event(level, s->loop->id, f,
                      "socket %s: closed by the peer app=%s after %llums",
                      sid, s->app ? s->app->id : "-", ms);
}

void hub_session_closed(struct hub_session *s, uint64_t now_ms)
{
    enum hub_close_reason why;

    if (!s->loop)
        return;
    why = s->state == HUB_SESSION_OPEN
              ? HUB_CLOSE_PEER
              : (enum hub_close_reason)s->close_reason_id;
    log_session_end(s, why, now_ms);
    hub_session_fini(s, why);
}

/*
 * RFC 6455 section 8.1: a text message must be UTF-8, and the connection
 * fails (1007) as soon as its bytes cannot be, in whichever fragment or
 * read shows it; a character may span fragments. -1 = closing.
 */
static int rx_utf8(struct hub_session *s, const void *in, size_t len,
                   bool last)
{
    s->rx_utf8 = hub_utf8_feed(s->rx_utf8, in, len);
    if (s->rx_utf8 == HUB_UTF8_ACCEPT ||
        (s->rx_utf8 != HUB_UTF8_REJECT && !last))
        return 0;
    s->rx_utf8 = HUB_UTF8_ACCEPT;
    /* Logs "socket ...: closing 1007 (invalid UTF-8)" (rate-limited). */
    hub_session_close(s, 1007, "invalid UTF-8", HUB_CLOSE_ERROR, true);
    return -1;
}

/* hub_session_rx_append(); deflated: the fragment is of a compressed
 * message, checked for UTF-8 only once inflated. */
static int rx_append(struct hub_session *s, const void *in, size_t len,
                     size_t remaining, bool final, bool binary, bool deflated,
                     uint64_t now_ms, const char **msg, size_t *msg_len)
{
    struct hub_loop *l = s->loop;
    size_t max;
    bool last = final && remaining == 0;

    if (!l)
        return -1;
    hub_session_stamp_rx(s, now_ms);
    if (s->state != HUB_SESSION_OPEN)
        return -1;
    if (!binary && !deflated && rx_utf8(s, in, len, last))
        return -1;
    max = l->cfg->max_message;
    if ((size_t)s->rx_len + len + remaining > max) {
        /* Counts 1009 via the close reason. */
        HUB_LOG_EVENT(HUB_LOG_INFO, l->id,
                      HUB_LOG_F(.event = "message_too_big", .code = 1009,
                                .socket_id = HUB_SID(s), .reason = "max_message",
                                .app = s->app ? s->app->id : NULL),
                      "socket %s: message over %zu bytes: closing 1009",
                      HUB_SID(s), max);
        hub_session_close(s, 1009, "message too big", HUB_CLOSE_TOO_BIG,
                          true);
        return -1;
    }
    if (last && s->rx_len == 0) {
        /* The common case: the whole message in one piece, not copied. */
        *msg = in;
        *msg_len = len;
    } else {
        if (s->rx_len + len > s->rx_cap) {
            /* Grown by what arrived, doubling, never by what a header
             * declares (remaining): a peer that declares 64 KiB and sends
             * 10 bytes gets a buffer of 1 KiB. */
            size_t cap = (size_t)s->rx_cap * 2, need = (size_t)s->rx_len + len;
            char *n;

            if (cap < need)
                cap = need;
            if (cap < 1024)
                cap = 1024;
            if (cap > max)
                cap = max;
            n = realloc(s->rx_buf, cap);
            if (!n) {
                hub_session_close(s, 1011, "out of memory", HUB_CLOSE_ERROR,
                                  true);
                return -1;
            }
            s->rx_buf = n;
            s->rx_cap = (uint32_t)cap;
        }
        memcpy(s->rx_buf + s->rx_len, in, len);
        s->rx_len += (uint32_t)len;
        if (!last)
            return 0;
        *msg = s->rx_buf;
        *msg_len = s->rx_len;
    }
    /* Inflated, the text is checked whole (it was not as it came). */
    if (deflated && (hub_session_inflate(s, msg, msg_len) ||
                     (!binary && rx_utf8(s, *msg, *msg_len, true))))
        return -1;
    HUB_STAT_ADD(l->stats.msgs_in, 1);
    HUB_STAT_ADD(l->stats.bytes_in, *msg_len);
    return 1;
}

int hub_session_rx_append(struct hub_session *s, const void *in, size_t len,
                          size_t remaining, bool final, bool binary,
                          uint64_t now_ms, const char **msg, size_t *msg_len)
{
    return rx_append(s, in, len, remaining, final, binary, false, now_ms, msg,
                     msg_len);
}

int hub_session_rx_append_deflated(struct hub_session *s, const void *in,
                                   size_t len, size_t remaining, bool final,
                                   bool binary, uint64_t now_ms,
                                   const char **msg, size_t *msg_len)
{
    return rx_append(s, in, len, remaining, final, binary, true, now_ms, msg,
                     msg_len);
}

bool hub_session_rx_pause(struct hub_session *s)
{
    if (s->rx_paused)
        return true;
    if (!s->loop || s->state != HUB_SESSION_OPEN ||
        s->q.bytes <= HUB_RX_HIGH(s->loop->cfg->max_queue))
        return false;
    s->rx_paused = true;
    HUB_STAT_ADD(s->loop->stats.rx_paused, 1);
    return true;
}

/* The queue is back at or under the low mark, or the session closes (the
 * peer's answer to the close must be read): read the peer again. */
static void rx_resume(struct hub_session *s)
{
    s->rx_paused = false;
    if (s->loop->ops->resume_rx)
        s->loop->ops->resume_rx(s->conn);
}

void hub_session_rx_done(struct hub_session *s)
{
    s->rx_len = 0;
    if (s->rx_buf) {
        free(s->rx_buf);
        s->rx_buf = NULL;
        s->rx_cap = 0;
    }
}

unsigned hub_session_on_peer_close(struct hub_session *s,
                                   const unsigned char *in, size_t len,
                                   uint64_t now_ms, const char **why)
{
    unsigned code;

    if (s->loop)
        hub_session_stamp_rx(s, now_ms);
    code = hub_ws_close_payload_check(in, len);
    if (!code)
        return 0;
    *why = code == 1007 ? "invalid UTF-8 in close reason"
                        : "invalid close frame";
    /* Logs the close, and counts it as an error, not a peer close. */
    if (s->loop)
        hub_session_close(s, (uint16_t)code, *why, HUB_CLOSE_ERROR, true);
    return code;
}

void hub_session_stamp_rx(struct hub_session *s, uint64_t now_ms)
{
    s->loop->shard.slots[s->shard_idx].last_rx_ms = now_ms;
}

void hub_session_on_pong(struct hub_session *s, uint64_t now_ms)
{
    struct hub_loop *l = s->loop;

    hub_session_stamp_rx(s, now_ms);
    HUB_STAT_ADD(l->stats.pongs, 1);
    /* The pong timer stays armed (no per-frame timer work) and finds the
     * peer alive when it fires; the next ping need not wait for it. */
    s->ping_outstanding = false;
    if (s->ping_sent_us) {
        uint32_t rtt = ping_clock_us(l) - s->ping_sent_us;

        hub_hist_add(&l->stats.pong_rtt, rtt);
        s->ping_sent_us = 0;
    }
}

void hub_session_ping_written(struct hub_session *s, uint64_t now_ms)
{
    struct hub_loop *l = s->loop;

    if ((uint32_t)now_ms - s->ping_sent_ms > l->cfg->tick_ms &&
        hub_timer_is_armed(&s->pong_timer))
        hub_wheel_start(l->wheel, &s->pong_timer, now_ms,
                        (int64_t)l->cfg->pong_timeout_ms);
}

/*
 * Output appeared: ask the transport, once until it serves s. An open
 * session with nothing but data joins the loop's pending list, written
 * corked right after the read pass (the first listing asks for that
 * flush); pings and closes, and a list that cannot grow, take a writable
 * callback.
 */
static void want_writable(struct hub_session *s)
{
    struct hub_loop *l = s->loop;
    int rc;

    if (s->want_writable)
        return;
    s->want_writable = true;
    if (s->state == HUB_SESSION_OPEN && !s->ping_due) {
        rc = hub_pending_add(&l->pending, s);
        if (rc == 1)
            l->ops->flush_soon(l->wake_ctx);
        if (rc >= 0)
            return;
    }
    l->ops->want_writable(s->conn);
}

void hub_session_await_writable(struct hub_session *s)
{
    s->want_writable = true;
    s->loop->ops->want_writable(s->conn);
}

int hub_session_queue_ping(struct hub_session *s, uint64_t now_ms)
{
    struct hub_loop *l = s->loop;
    bool armed;

    if (s->ping_outstanding || s->state != HUB_SESSION_OPEN)
        return 1;
    /* Still armed after an earlier pong: re-armed, not one more. */
    armed = hub_timer_is_armed(&s->pong_timer);
    if (hub_wheel_start(l->wheel, &s->pong_timer, now_ms,
                        (int64_t)l->cfg->pong_timeout_ms))
        return -EIO;
    if (!armed)
        HUB_STAT_ADD(l->stats.pong_armed, 1);
    s->ping_outstanding = true;
    s->ping_due = true;
    s->ping_sent_ms = (uint32_t)now_ms;
    s->ping_sent_us = ping_clock_us(l) | 1u;
    want_writable(s);
    return 0;
}

void hub_session_drain(struct hub_session *s, uint64_t now_ms,
                       uint64_t delay_ms)
{
    if (!s->loop || s->state != HUB_SESSION_OPEN)
        return;
    s->draining = true;
    hub_wheel_start(s->loop->wheel, &s->deadline_timer, now_ms,
                    (int64_t)delay_ms);
}

/* Milliseconds since tx_ms (never negative). */
static uint64_t tx_idle(const struct hub_session *s, uint64_t now_ms)
{
    int32_t d = (int32_t)((uint32_t)now_ms - s->tx_ms);

    return d > 0 ? (uint64_t)d : 0;
}

/* The queue goes non-empty: the write deadline starts now. */
static void write_deadline_start(struct hub_session *s)
{
    struct hub_loop *l = s->loop;
    uint64_t wt = l->cfg->write_timeout_ms, due;

    if (!wt || s->state != HUB_SESSION_OPEN || s->draining)
        return;
    s->tx_ms = (uint32_t)l->now_ms;
    due = l->now_ms + wt;
    if (!hub_timer_is_armed(&s->deadline_timer) ||
        hub_timer_deadline_ms(&s->deadline_timer) > due)
        hub_wheel_start_at(l->wheel, &s->deadline_timer, due);
}

/*
 * Queue f; take_ref false means the caller adds the reference later, and
 * account false that it accounts the bytes (a fan-out, once for all).
 */
static int sendq_push(struct hub_session *s, struct hub_frame *f,
                      bool take_ref, bool account)
{
    if (s->q.count == 0)
        write_deadline_start(s);
    if (hub_sendq_push(&s->q, f, take_ref))
        return -ENOMEM;
    if (account)
        hub_loop_queued_add(s->loop, f->len);
    want_writable(s);
    return 0;
}

static int send_frame(struct hub_session *s, struct hub_frame *f,
                      bool take_ref)
{
    if (s->state != HUB_SESSION_OPEN)
        return -EPIPE;
    /* A push's caller chose the frame (and accounts it); a send queues
     * what this session gets: the compressed variant when it compresses. */
    if (take_ref && s->zout)
        f = hub_loop_zframe(s->loop, f);
    if (s->q.bytes + f->len > s->loop->cfg->max_queue) {
        hub_session_send_error(s, 4100, "Slow consumer: send queue full",
                               true);
        return -ENOBUFS;
    }
    if (sendq_push(s, f, take_ref, take_ref)) {
        hub_session_close(s, 1011, "out of memory", HUB_CLOSE_ERROR, true);
        return -ENOMEM;
    }
    return 0;
}

int hub_session_send(struct hub_session *s, struct hub_frame *f)
{
    return send_frame(s, f, true);
}

int hub_session_push(struct hub_session *s, struct hub_frame *f)
{
    return send_frame(s, f, false);
}

int hub_session_push_n(struct hub_session *s, struct hub_frame *const *fs,
                       unsigned k, uint64_t total)
{
    if (s->state != HUB_SESSION_OPEN)
        return 0;
    if (s->q.bytes + total > s->loop->cfg->max_queue)
        return -1;
    while (s->q.cap - s->q.count < k)
        if (hub_sendq_grow(&s->q))
            return -1;
    if (s->q.count == 0)
        write_deadline_start(s);
    for (unsigned j = 0; j < k; j++)
        (void)hub_sendq_push(&s->q, fs[j], false); /* room was made */
    want_writable(s);
    return (int)k;
}

int hub_session_send_text(struct hub_session *s, const char *text, size_t len)
{
    struct hub_frame *f;
    int rc;

    if (s->state != HUB_SESSION_OPEN)
        return -EPIPE;
    f = hub_frame_create_text(text, len);
    if (!f)
        return -ENOMEM;
    rc = hub_session_send(s, f);
    hub_frame_unref(f);
    return rc;
}

static void send_error_why(struct hub_session *s, int code, const char *msg,
                           bool close, enum hub_close_reason why);

static enum hub_close_reason reason_of(int code)
{
    switch (code) {
    case 4201: return HUB_CLOSE_PONG_TIMEOUT;
    case 4202: return HUB_CLOSE_IDLE;
    case 4100: return HUB_CLOSE_SLOW;
    case 1009: return HUB_CLOSE_TOO_BIG;
    case 4200: return HUB_CLOSE_DRAIN;
    case 4001: case 4003: case 4004: case 4005: case 4007: case 4009:
        return HUB_CLOSE_APP;
    default: return HUB_CLOSE_ERROR;
    }
}

void hub_session_send_error(struct hub_session *s, int code, const char *msg,
                            bool close)
{
    send_error_why(s, code, msg, close, reason_of(code));
}

void hub_session_close_behind(struct hub_session *s, const char *msg,
                              enum hub_close_reason why)
{
    send_error_why(s, 4100, msg, true, why);
}

static void send_error_why(struct hub_session *s, int code, const char *msg,
                           bool close, enum hub_close_reason why)
{
    char buf[512];
    size_t n;
    struct hub_frame *f;

    if (s->state != HUB_SESSION_OPEN)
        return;
    n = hub_proto_encode_error(buf, sizeof(buf), code, msg);
    if (n >= sizeof(buf))
        n = hub_proto_encode_error(buf, sizeof(buf), code, "error");
    if (close && code == 4100)
        sendq_drop(s); /* a slow consumer's backlog is what we drop */
    f = hub_frame_create_text(buf, n);
    if (f && !(close && code == 4100) &&
        s->q.bytes + f->len > s->loop->cfg->max_queue) {
        /* An error is a reply like any other: one that does not fit the
         * queue makes the peer a slow consumer. Then the backlog is
         * dropped and only the 4100 goes, which always fits. */
        hub_frame_unref(f);
        send_error_why(s, 4100, "Slow consumer: send queue full", true,
                       HUB_CLOSE_SLOW);
        return;
    }
    if (f) {
        (void)sendq_push(s, f, true, true);
        hub_frame_unref(f);
    }
    if (close)
        hub_session_close(s, (uint16_t)code, msg, why, false);
}

void hub_session_close(struct hub_session *s, uint16_t code, const char *reason,
                       enum hub_close_reason why, bool drop_queue)
{
    struct hub_loop *l = s->loop;

    if (!l || s->state != HUB_SESSION_OPEN)
        return;
    if (why != HUB_CLOSE_DRAIN)
        HUB_LOG_EVENT(why == HUB_CLOSE_APP ? HUB_LOG_DEBUG : HUB_LOG_INFO,
                      l->id,
                      HUB_LOG_F(.event = "session_closing", .code = code,
                                .socket_id = HUB_SID(s),
                                .app = s->app ? s->app->id : NULL,
                                .reason = hub_close_reason_name(why)),
                      "socket %s: closing %u (%s)", HUB_SID(s), code,
                      reason ? reason : "");
    s->state = HUB_SESSION_CLOSING;
    s->close_code = code;
    s->close_reason_id = (uint8_t)why;
    s->close_text = reason ? reason : "";
    if (drop_queue)
        sendq_drop(s);
    if (s->rx_paused)
        rx_resume(s);
    s->ping_due = false;
    stop_pong(l, s);
    hub_wheel_stop(l->wheel, &s->deadline_timer);
    /* The deadline entry is stopped (or is the one firing): it becomes the
     * close timeout. */
    hub_timer_init(&s->deadline_timer, close_timer_cb);
    hub_wheel_start(l->wheel, &s->deadline_timer, hub_clock_now_ms(l->clock),
                    (int64_t)l->cfg->close_timeout_ms);
    want_writable(s);
}

enum hub_out_kind hub_session_peek_out(const struct hub_session *s)
{
    if (s->ping_due && s->state == HUB_SESSION_OPEN)
        return HUB_OUT_PING;
    if (s->q.count)
        return HUB_OUT_DATA;
    if (s->state == HUB_SESSION_CLOSING)
        return HUB_OUT_CLOSE;
    return HUB_OUT_NONE;
}

enum hub_out_kind hub_session_next_out(struct hub_session *s,
                                       unsigned char *cork, size_t cap,
                                       struct hub_out *out)
{
    size_t n;

    s->want_writable = false;
    out->kind = hub_session_peek_out(s);
    switch (out->kind) {
    case HUB_OUT_PING:
        /* ASCII payload: lws 4.1.6 never reports an empty pong, and may
         * UTF-8-check pongs (docs/LWS.md, "Pings and pongs"). */
        s->ping_due = false;
        out->len = (size_t)snprintf(out->ping, sizeof(out->ping),
                                    "lubdub-%" PRIu32, s->ping_sent_us);
        out->data = (const unsigned char *)out->ping;
        break;
    case HUB_OUT_DATA:
        n = hub_sendq_cork(&s->q, cork, cap, &out->data, &out->len,
                           &out->frames);
        if (n) {
            out->data = cork;
            out->len = n;
        }
        break;
    case HUB_OUT_CLOSE:
        s->state = HUB_SESSION_CLOSE_SENT;
        out->close_code = s->close_code;
        out->data = (const unsigned char *)s->close_text;
        out->len = strlen(s->close_text);
        if (out->len > 123)
            out->len = 123; /* RFC 6455 5.5: 125 bytes with the code */
        break;
    case HUB_OUT_NONE:
        break;
    }
    return out->kind;
}

/* The socket took sent bytes of the queue. */
static void data_written(struct hub_session *s, size_t sent)
{
    struct hub_loop *l = s->loop;
    unsigned done;

    HUB_STAT_ADD(l->stats.bytes_out, sent);
    HUB_STAT_ADD(l->stats.writes, 1);
    if (sent)
        hub_loop_queued_sub(l, sent);
    done = hub_sendq_consume(&s->q, sent);
    if (done)
        HUB_STAT_ADD(l->stats.msgs_out, done);
    if (sent && s->q.bytes <= HUB_RX_LOW(l->cfg->max_queue)) {
        /* Write progress, and only under the low mark (the header
         * comment): one clock read per write, not per frame. */
        l->now_ms = hub_clock_now_ms(l->clock);
        s->tx_ms = (uint32_t)l->now_ms;
        if (s->rx_paused && s->state == HUB_SESSION_OPEN)
            rx_resume(s);
        /* A resumed subscription's replay goes as the queue drains. */
        if (s->rguard && s->state == HUB_SESSION_OPEN)
            hub_resume_pump(s);
    }
}

void hub_session_out_done(struct hub_session *s, const struct hub_out *out,
                          size_t written, uint64_t now_ms)
{
    switch (out->kind) {
    case HUB_OUT_PING:
        HUB_STAT_ADD(s->loop->stats.pings_sent, 1);
        hub_session_ping_written(s, now_ms);
        break;
    case HUB_OUT_DATA:
        data_written(s, written);
        break;
    case HUB_OUT_CLOSE:
    case HUB_OUT_NONE:
        return;
    }
    if (hub_session_has_output(s))
        hub_session_await_writable(s);
}

int hub_session_check(const struct hub_session *s)
{
    return hub_sendq_check(&s->q);
}

/* Deadlines. */

static void pong_timer_cb(struct hub_timer *t, uint64_t now_ms)
{
    struct hub_session *s = hub_container_of(t, struct hub_session,
                                             pong_timer);

    HUB_STAT_ADD(s->loop->stats.pong_armed, -1); /* fired: disarmed */
    s->ping_outstanding = false;
    if ((int32_t)((uint32_t)slot_last_rx(s) - s->ping_sent_ms) >= 0)
        return; /* Seen since the ping: alive. */
    /* Paused by backpressure: the pong waits behind bytes the hub does
     * not read, and the write deadline judges the session instead. */
    if (s->rx_paused && s->loop->cfg->write_timeout_ms)
        return;
    hub_session_send_error(s, 4201, "Pong reply not received in time", true);
    (void)now_ms;
}

static void deadline_timer_cb(struct hub_timer *t, uint64_t now_ms)
{
    struct hub_session *s = hub_container_of(t, struct hub_session,
                                             deadline_timer);
    struct hub_loop *l = s->loop;
    const struct hub_config *cfg = l->cfg;
    uint64_t due = UINT64_MAX;

    if (s->draining) {
        hub_session_send_error(s, 4200,
                               "Server is restarting. Please reconnect.", true);
        return;
    }
    if (cfg->write_timeout_ms && s->q.count) {
        uint64_t stalled = tx_idle(s, now_ms);

        if (stalled >= cfg->write_timeout_ms) {
            hub_session_close_behind(s, "Write timeout: the client takes "
                                        "nothing of its queue",
                                     HUB_CLOSE_WRITE_TIMEOUT);
            return;
        }
        due = now_ms + (cfg->write_timeout_ms - stalled);
    }
    /* Authorized connections: a session neither signed in nor on a
     * private or presence channel by its deadline. */
    if (s->app && s->app->enable_user_authentication && !s->authorized) {
        uint64_t dl = s->connected_ms + s->app->user_auth_timeout_ms;

        if (now_ms >= dl) {
            HUB_STAT_ADD(l->stats.unauthorized_closes, 1);
            hub_session_send_error(s, 4009,
                                   "Connection not authorized within timeout",
                                   true);
            return;
        }
        if (dl < due)
            due = dl;
    }
    if (cfg->idle_timeout_ms) {
        uint64_t idle = (uint32_t)((uint32_t)now_ms - s->last_data_ms);

        if (idle >= cfg->idle_timeout_ms) {
            hub_session_send_error(s, 4202, "Closed after inactivity", true);
            return;
        }
        if (now_ms + (cfg->idle_timeout_ms - idle) < due)
            due = now_ms + (cfg->idle_timeout_ms - idle);
    }
    if (due != UINT64_MAX)
        hub_wheel_start_at(l->wheel, t, due);
}

void hub_session_arm_signin_deadline(struct hub_session *s)
{
    struct hub_loop *l = s->loop;
    uint64_t due;

    if (!l || s->state != HUB_SESSION_OPEN || s->draining || !s->app ||
        !s->app->enable_user_authentication || s->authorized)
        return;
    due = s->connected_ms + s->app->user_auth_timeout_ms;
    if (!hub_timer_is_armed(&s->deadline_timer) ||
        hub_timer_deadline_ms(&s->deadline_timer) > due)
        hub_wheel_start_at(l->wheel, &s->deadline_timer, due);
}

void hub_session_authorized(struct hub_session *s)
{
    struct hub_loop *l = s->loop;

    if (s->authorized)
        return;
    s->authorized = true;
    /* The entry re-arms itself for the idle and write deadlines when it
     * fires; with neither in play nothing else is waiting on it. */
    if (!l || !s->app || !s->app->enable_user_authentication ||
        s->state != HUB_SESSION_OPEN || s->draining ||
        l->cfg->idle_timeout_ms || (l->cfg->write_timeout_ms && s->q.count))
        return;
    hub_wheel_stop(l->wheel, &s->deadline_timer);
}

static void close_timer_cb(struct hub_timer *t, uint64_t now_ms)
{
    struct hub_session *s = hub_container_of(t, struct hub_session,
                                             deadline_timer);

    HUB_STAT_ADD(s->loop->stats.close_timeouts, 1);
    s->loop->ops->kill(s->conn);
    (void)now_ms;
}
