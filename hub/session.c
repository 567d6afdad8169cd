/*
 * hub/session.c - session lifecycle, deadlines and the corked send queue.
 *
 * Deadlines are lazy: nothing is re-armed per inbound frame. The pong timer
 * checks, when it fires, whether anything arrived since the ping; the idle
 * timer re-arms itself for the rest of the timeout if data arrived.
 *
 * The write deadline shares the idle entry and is as lazy: the queue's
 * empty -> non-empty edge and every write that the socket took stamp
 * tx_ms (a store; the entry is armed only when it is idle or due later),
 * and the entry, when it fires, closes a queue that has held bytes with no
 * write progress for write_timeout, else re-arms for the earlier of the two
 * deadlines. An empty queue leaves nothing armed for it.
 */
#include "hub/session.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/loop.h"
#include "hub/log.h"
#include "hub/pusher.h"
#include "hub/protocol.h"

static void pong_timer_cb(struct hub_timer *t, uint64_t now_ms);
static void idle_timer_cb(struct hub_timer *t, uint64_t now_ms);
static void close_timer_cb(struct hub_timer *t, uint64_t now_ms);

static uint64_t slot_last_rx(const struct hub_session *s)
{
    return s->loop->shard.slots[s->shard_idx].last_rx_ms;
}

int hub_session_init(struct hub_session *s, struct hub_loop *l, void *conn,
                     uint64_t now_ms)
{
    int rc;

    s->loop = l;
    s->conn = conn;
    s->state = HUB_SESSION_OPEN;
    if (now_ms > l->now_ms)
        l->now_ms = now_ms;
    s->connected_ms = now_ms;
    s->last_data_ms = now_ms;
    hub_timer_init(&s->pong_timer, pong_timer_cb);
    hub_timer_init(&s->idle_timer, idle_timer_cb);
    hub_list_init(&s->subs);
    s->q.ring = s->q.inline_ring;
    s->q.cap = HUB_SENDQ_INLINE;
    rc = hub_shard_add(&l->shard, s, now_ms);
    if (rc) {
        s->loop = NULL;
        return rc;
    }
    /* Unique: the counter is per loop and the loop id is folded in. */
    s->sid_hi = ++l->sid_counter * HUB_MAX_LOOPS + l->id;
    s->sid_lo = (uint32_t)hub_loop_random(l);
    snprintf(s->socket_id, sizeof(s->socket_id), "%" PRIu64 ".%" PRIu32,
             s->sid_hi, s->sid_lo);
    if (l->cfg->idle_timeout_ms)
        hub_wheel_start(l->wheel, &s->idle_timer, now_ms,
                        (int64_t)l->cfg->idle_timeout_ms);
    HUB_STAT_ADD(l->stats.sessions, 1);
    HUB_STAT_ADD(l->stats.accepted, 1);
    atomic_fetch_add(&l->hub->sessions, 1);
    return 0;
}

static void sendq_drop(struct hub_session *s)
{
    struct hub_sendq *q = &s->q;

    if (q->bytes)
        hub_loop_queued_sub(s->loop, q->bytes);
    while (q->count) {
        hub_frame_unref(q->ring[q->head]);
        q->head = (q->head + 1) & (q->cap - 1);
        q->count--;
    }
    q->head = q->head_off = 0;
    q->bytes = 0;
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
    hub_pusher_leave_all(s);
    stop_pong(l, s);
    hub_wheel_stop(l->wheel, &s->idle_timer);
    hub_shard_remove(&l->shard, s);
    sendq_drop(s);
    if (s->q.ring != s->q.inline_ring)
        free(s->q.ring);
    s->q.ring = NULL;
    s->q.cap = 0;
    free(s->rx_buf);
    s->rx_buf = NULL;
    free(s->user_id);
    s->user_id = NULL;
    s->rx_len = s->rx_cap = 0;
    HUB_STAT_ADD(l->stats.sessions, -1);
    HUB_STAT_ADD(l->stats.closed[reason], 1);
    atomic_fetch_sub(&l->hub->sessions, 1);
    if (s->app_counted) {
        atomic_fetch_sub(&l->hub->app_sessions[s->app->index], 1);
        s->app_counted = false;
    }
    s->loop = NULL;
    s->conn = NULL;
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
    if (s->ping_sent_ns) {
        uint64_t rtt = hub_clock_now_ns(l->clock) - s->ping_sent_ns;

        hub_hist_add(&l->stats.pong_rtt, rtt / 1000);
        s->ping_sent_ns = 0;
    }
}

void hub_session_ping_written(struct hub_session *s, uint64_t now_ms)
{
    struct hub_loop *l = s->loop;

    if (now_ms > s->ping_sent_ms + l->cfg->tick_ms &&
        hub_timer_is_armed(&s->pong_timer))
        hub_wheel_start(l->wheel, &s->pong_timer, now_ms,
                        (int64_t)l->cfg->pong_timeout_ms);
}

static void want_writable(struct hub_session *s)
{
    if (!s->want_writable) {
        s->want_writable = true;
        s->loop->ops->want_writable(s->conn);
    }
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
    if (!hub_timer_is_armed(&s->idle_timer) ||
        hub_timer_deadline_ms(&s->idle_timer) > due)
        hub_wheel_start_at(l->wheel, &s->idle_timer, due);
}

/*
 * Queue f; take_ref false means the caller adds the reference later, and
 * account false that it accounts the bytes (a fan-out, once for all).
 */
static int sendq_push(struct hub_session *s, struct hub_frame *f,
                      bool take_ref, bool account)
{
    struct hub_sendq *q = &s->q;

    if (q->count == 0)
        write_deadline_start(s);

    if (q->count == q->cap) {
        uint32_t cap = q->cap * 2;
        struct hub_frame **ring = malloc((size_t)cap * sizeof(*ring));

        if (!ring)
            return -ENOMEM;
        for (uint32_t i = 0; i < q->count; i++)
            ring[i] = q->ring[(q->head + i) & (q->cap - 1)];
        if (q->ring != q->inline_ring)
            free(q->ring);
        q->ring = ring;
        q->cap = cap;
        q->head = 0;
    }
    q->ring[(q->head + q->count) & (q->cap - 1)] =
        take_ref ? hub_frame_ref(f) : f;
    q->count++;
    q->bytes += f->len;
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
    if (f) {
        /* Errors bypass max_queue: they are small and one per cause. */
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
        hub_log(why == HUB_CLOSE_APP ? HUB_LOG_DEBUG : HUB_LOG_INFO, l->id,
                "socket %s: closing %u (%s)", s->socket_id, code,
                reason ? reason : "");
    s->state = HUB_SESSION_CLOSING;
    s->close_code = code;
    s->close_reason_id = (uint8_t)why;
    s->close_text = reason ? reason : "";
    if (drop_queue)
        sendq_drop(s);
    s->ping_due = false;
    stop_pong(l, s);
    hub_wheel_stop(l->wheel, &s->idle_timer);
    /* The idle entry is stopped (or is the one firing): it becomes the
     * close timeout. */
    hub_timer_init(&s->idle_timer, close_timer_cb);
    hub_wheel_start(l->wheel, &s->idle_timer, hub_clock_now_ms(l->clock),
                    (int64_t)l->cfg->close_timeout_ms);
    want_writable(s);
}

size_t hub_session_cork(struct hub_session *s, unsigned char *buf, size_t cap,
                        const unsigned char **direct, size_t *direct_len,
                        unsigned *frames)
{
    struct hub_sendq *q = &s->q;
    size_t placed = 0;
    uint32_t off = q->head_off;

    *direct = NULL;
    *direct_len = 0;
    *frames = 0;
    for (uint32_t i = 0; i < q->count; i++) {
        struct hub_frame *f = q->ring[(q->head + i) & (q->cap - 1)];
        size_t n = f->len - off;

        if (placed + n > cap) {
            if (placed == 0) {
                *direct = hub_frame_data(f) + off;
                *direct_len = n;
                *frames = 1;
            }
            break;
        }
        memcpy(buf + placed, hub_frame_data(f) + off, n);
        placed += n;
        (*frames)++;
        off = 0;
    }
    return placed;
}

void hub_session_cork_done(struct hub_session *s, size_t sent,
                           unsigned frames)
{
    struct hub_sendq *q = &s->q;
    struct hub_loop *l = s->loop;

    HUB_STAT_ADD(l->stats.bytes_out, sent);
    HUB_STAT_ADD(l->stats.writes, 1);
    if (sent) {
        /* Write progress: one clock read per write, not per frame. */
        l->now_ms = hub_clock_now_ms(l->clock);
        s->tx_ms = (uint32_t)l->now_ms;
        hub_loop_queued_sub(l, sent);
    }
    q->bytes -= sent;
    while (sent && q->count) {
        struct hub_frame *f = q->ring[q->head];
        size_t n = f->len - q->head_off;

        if (sent < n) {
            q->head_off += (uint32_t)sent;
            break;
        }
        sent -= n;
        hub_frame_unref(f);
        q->head = (q->head + 1) & (q->cap - 1);
        q->count--;
        q->head_off = 0;
        HUB_STAT_ADD(l->stats.msgs_out, 1);
    }
    (void)frames;
}

int hub_session_check(const struct hub_session *s)
{
    const struct hub_sendq *q = &s->q;
    uint64_t bytes = 0;

    if (q->count > q->cap || (q->cap & (q->cap - 1)))
        return -EFAULT;
    for (uint32_t i = 0; i < q->count; i++)
        bytes += q->ring[(q->head + i) & (q->cap - 1)]->len;
    if (bytes - q->head_off != q->bytes)
        return -EFAULT;
    return 0;
}

/* Deadlines. */

static void pong_timer_cb(struct hub_timer *t, uint64_t now_ms)
{
    struct hub_session *s = hub_container_of(t, struct hub_session,
                                             pong_timer);

    HUB_STAT_ADD(s->loop->stats.pong_armed, -1); /* fired: disarmed */
    s->ping_outstanding = false;
    if (slot_last_rx(s) >= s->ping_sent_ms)
        return; /* Seen since the ping: alive. */
    hub_session_send_error(s, 4201, "Pong reply not received in time", true);
    (void)now_ms;
}

static void idle_timer_cb(struct hub_timer *t, uint64_t now_ms)
{
    struct hub_session *s = hub_container_of(t, struct hub_session,
                                             idle_timer);
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
    if (cfg->idle_timeout_ms) {
        uint64_t idle = now_ms - s->last_data_ms;

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

static void close_timer_cb(struct hub_timer *t, uint64_t now_ms)
{
    struct hub_session *s = hub_container_of(t, struct hub_session,
                                             idle_timer);

    HUB_STAT_ADD(s->loop->stats.close_timeouts, 1);
    s->loop->ops->kill(s->conn);
    (void)now_ms;
}
