/*
 * hub/loop/session.h - one WebSocket client of the hub.
 *
 * A session lives in the transport's per-connection storage (lws user
 * space) on one loop for its whole life. hub_session_init() links it into
 * the loop's shard and arms its deadlines; hub_session_fini() unlinks it
 * from everything, stops its timers and drops its queued frames, so nothing
 * can fire on or point at a freed session.
 *
 * Every state change is made here: inbound data (hub_session_rx_append:
 * reassembly, UTF-8, size), the heartbeat's ping, the drain, the close,
 * and what the transport writes. server/ calls functions and names no
 * field (tests/unit/no_session_fields.sh checks it).
 *
 * Outbound traffic: data frames wait in a bounded queue of frame references
 * (hub/loop/sendq.h; bytes counted against max_queue; over it the session is
 * closed with 4100, and so is a queue the socket takes nothing of for
 * write_timeout). When output appears, the session asks once (its
 * want_writable flag): an open session with only data joins the loop's
 * pending list (hub/loop/pending.h) and is written corked after the read pass;
 * a ping, a close or a backed-up socket asks for a writable callback. The
 * transport then pulls with hub_session_next_out() / _out_done().
 *
 * Thread: the owning loop only.
 */
#ifndef HUB_SESSION_H
#define HUB_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hub/app/app.h"
#include "hub/wire/frame.h"
#include "hub/loop/sendq.h"
#include "hub/loop/stats.h"
#include "timer/list.h"
#include "timer/wheel.h"

struct hub_loop;
struct hub_session;

/* How the hub reaches a session's connection; implemented by server/. */
struct hub_transport_ops {
    /* Serve the session from a writable callback: control output (ping,
     * close), or data for a socket the transport must not write to now
     * (see hub_session_await_writable). */
    void (*want_writable)(void *conn);
    /* The loop's pending list went non-empty: call hub_loop_flush() soon,
     * after the current read pass (ctx = the loop's wake_ctx). */
    void (*flush_soon)(void *ctx);
    /* Drop the connection without a close handshake, soon (not inside). */
    void (*kill)(void *conn);
    /* Input backpressure is over (hub_session_rx_pause): read the peer
     * again, starting with what the transport kept back. May be called
     * from inside a write or a close: the transport defers the reading. */
    void (*resume_rx)(void *conn);
};

/*
 * Upcalls into the layer above the session (the Pusher protocol), so that
 * session.c calls nothing above it. Installed in hub_config.session_hooks.
 */
struct hub_session_hooks {
    /* First thing in hub_session_fini(): leave every channel. */
    void (*on_fini)(struct hub_session *s);
};

enum hub_session_state {
    HUB_SESSION_OPEN,
    HUB_SESSION_CLOSING,   /* close requested; close frame not yet sent */
    HUB_SESSION_CLOSE_SENT,
};

struct hub_session {
    struct hub_loop *loop;
    void *conn;                    /* borrowed transport handle (wsi) */
    const struct hub_app *app;     /* a reference (hub/app/app.h); NULL until
                                      the key matched; a reload may move it
                                      to the app's new settings */
    uint32_t shard_idx;
    uint8_t state;                 /* enum hub_session_state (one byte) */
    uint8_t rx_utf8;               /* hub/wire/ws.h state of the text message */
    uint16_t close_code;
    uint8_t close_reason_id;       /* enum hub_close_reason */
    /* One byte of flags (bit-fields: no code takes their address). */
    bool ping_due : 1;             /* a heartbeat ping is waiting to go */
    bool ping_outstanding : 1;     /* a ping went out; pong timer armed */
    bool want_writable : 1;        /* asked (pending list or writable
                                      callback), not yet served */
    bool draining : 1;             /* the deadline timer is the drain close */
    bool app_counted : 1;          /* counted in the app's live sessions */
    bool online_counted : 1;       /* counted in the hub's online registry
                                      (hub/pusher/watchlist.c) */
    bool authorized : 1;           /* signed in, or subscribed to a private
                                      or presence channel (authorized
                                      connections) */
    bool rx_paused : 1;            /* input backpressure: the transport
                                      reads nothing of the peer until the
                                      queue is back under the low mark */
    /* permessage-deflate (hub/loop/compress.h), in what was padding: */
    bool pmd : 1;                  /* negotiated: the peer may compress */
    bool zout : 1;                 /* data frames go compressed (pmd and
                                      the app's "compression" key) */
    /* Recovery (hub/loop/resume.h): the session asked to resume (its
     * state is in the loop's table), and some subscription of it is
     * guarded (a replay, or a floor). */
    bool resume : 1;
    bool rguard : 1;
    /* Key rotation (hub/app/app.h): which of the app's key/secret pairs
     * the connection opened with (hub_app_key_at's index; set by
     * hub/pusher/pusher.c), so that a reload that removes that pair closes
     * this connection and no other (hub/loop/appswap.c). Four bits hold
     * every index below HUB_APP_KEYS_MAX, in what was padding. */
    uint8_t key_pair : 4;
    /* Subscribe and unsubscribe requests refused in a row by the rate
     * limit (hub/pusher/pusher.c); past HUB_SUB_REFUSALS_MAX the session closes. */
    uint8_t sub_refused;
    /* The subscribe rate limit's theoretical arrival time (GCRA), low 32
     * bits of loop ms: a request is admitted while sub_tat is at most the
     * burst's worth of intervals ahead of now (hub/pusher/pusher.c). */
    uint32_t sub_tat;
    uint32_t sid_lo;               /* socket_id = "<hi>.<lo>" */
    /* The last ping queued, low 32 bits of loop ms (compared as
     * differences: a ping is answered or timed out within a day). */
    uint32_t ping_sent_ms;
    uint64_t sid_hi;
    uint64_t connected_ms;
    /* The same ping on the clock's microseconds, low 32 bits with the low
     * bit set (0: no round trip to measure); also its payload's number,
     * "lubdub-<n>". A round trip is at most pong_timeout (a day), far
     * below the 71 minutes 32 bits of microseconds hold. */
    uint32_t ping_sent_us;
    /* Last inbound data message, low 32 bits of loop ms: only its age is
     * read, with idle_timeout (at most a day) set. */
    uint32_t last_data_ms;
    /* Client-event token bucket, in thousandths of an event. */
    uint64_t bucket_ms;
    uint32_t bucket_tokens;
    /* Write progress, low 32 bits of loop ms (in what was padding): when
     * the queue last went non-empty or the socket last took bytes. */
    uint32_t tx_ms;
    struct hub_timer pong_timer;   /* 4201 */
    /* The session's one deadline entry. Open: the earliest of the idle
     * deadline (4202), the write deadline (4100: queued bytes and no write
     * progress for write_timeout) and the sign-in deadline of authorized
     * connections (4009), or the paced drain close (4200). Once a close
     * has started (none of those matters any more) the same entry is the
     * close timeout. */
    struct hub_timer deadline_timer;
    struct hub_sendq q;
    struct hub_list subs;          /* struct hub_sub.session_link */
    /* pusher:signin: "<id>\0<user_info JSON or empty>\0" in one owned
     * allocation (hub_session_user_info()); NULL until signed in. */
    char *user_id;
    /* Inbound fragments being reassembled; NULL when none. */
    char *rx_buf;
    uint32_t rx_len, rx_cap;       /* <= max_message (1 GiB at most) */
    const char *close_text;        /* borrowed: a static string */
};
/* key_pair above is four bits: it must name every pair an app may hold. */
_Static_assert(HUB_APP_KEYS_MAX <= 16, "key_pair cannot name every pair");

/* The socket id, "<sid_hi>.<sid_lo>", formatted into buf (at least
 * HUB_SOCKET_ID_MAX bytes) when it is needed: kept formatted it was 32 B
 * of every idle session (docs/BENCHMARKS.md, "Where an idle session's
 * bytes go"), and it is needed only at the connect, on an auth check, in
 * a log line or a webhook, never per delivery. HUB_SID(s) formats it
 * into a buffer that lives until the end of the caller's block. */
#define HUB_SOCKET_ID_MAX 32
const char *hub_session_socket_id(const struct hub_session *s, char *buf);
#define HUB_SID(s) hub_session_socket_id((s), (char[HUB_SOCKET_ID_MAX]){0})

/*
 * Link s into its loop (shard, timers) as a new connection. s is transport
 * storage; init zeroes it first. 0, or -ENOMEM / -ENOSPC (shard full).
 */
int hub_session_init(struct hub_session *s, struct hub_loop *loop, void *conn,
                     uint64_t now_ms);
/* Unlink s everywhere; reason counts the close in stats. Idempotent. */
void hub_session_fini(struct hub_session *s, enum hub_close_reason reason);

/* After the app handshake: the debug "open" line, with the peer address
 * (only while open; the caller skips it when debug is off). */
void hub_session_opened(struct hub_session *s, const char *peer);
/*
 * The transport is gone: one line for the operator (what ended the
 * session, after how long), then hub_session_fini() with the reason the
 * session closed for (HUB_CLOSE_PEER while it was still open). No-op on
 * a session already finished.
 */
void hub_session_closed(struct hub_session *s, uint64_t now_ms);

/*
 * One inbound data fragment, as the transport read it: len bytes at in,
 * remaining bytes of this frame still to come, final when it is the
 * message's last frame, binary for a binary message. Stamps the receive
 * time, checks UTF-8 as the bytes come (1007, RFC 6455 section 8.1),
 * closes 1009 past max_message and 1011 when the buffer cannot grow, and
 * reassembles. Returns 1 with the whole message in *msg / *msg_len
 * (in itself when it came in one piece; valid until hub_session_rx_done()),
 * 0 while more is to come, -1 when the session is closing (drop the data).
 */
int hub_session_rx_append(struct hub_session *s, const void *in, size_t len,
                          size_t remaining, bool final, bool binary,
                          uint64_t now_ms, const char **msg, size_t *msg_len);
/*
 * The same for a fragment of a message compressed with permessage-deflate
 * (RSV1 on its first frame, the extension negotiated): the compressed
 * bytes are reassembled (at most max_message), then inflated in one go
 * into the loop's buffer (hub/loop/compress.h): 1009 when the message
 * inflates past max_message, 1007 when it does not inflate or its text is
 * not UTF-8. *msg is valid until the loop's next message.
 */
int hub_session_rx_append_deflated(struct hub_session *s, const void *in,
                                   size_t len, size_t remaining, bool final,
                                   bool binary, uint64_t now_ms,
                                   const char **msg, size_t *msg_len);
/* The message rx_append returned was handled: free the reassembly
 * buffer (idle sessions hold none). */
void hub_session_rx_done(struct hub_session *s);

/*
 * Input backpressure (docs/RELIABILITY.md, "What a peer can make the hub
 * hold"). A session whose send queue is past the high mark stops being
 * read until the queue is back at or under the low mark: whatever the
 * peer asks, its replies cannot pile up faster than it takes them. The
 * transport asks after each whole message it handed to the hub: true
 * means stop reading now and keep the rest of the read (at most one
 * read's bytes) for later; ops->resume_rx() says when to go on. While
 * paused, the pong deadline is not judged (the pong is behind the unread
 * bytes); the write deadline is, and closes a queue that stays above the
 * low mark for write_timeout.
 */
#define HUB_RX_HIGH(max_queue) ((max_queue) / 2)
#define HUB_RX_LOW(max_queue) ((max_queue) / 4)
bool hub_session_rx_pause(struct hub_session *s);
static inline bool hub_session_rx_paused(const struct hub_session *s)
{
    return s->rx_paused;
}
/*
 * The peer sent a close frame (payload in/len), before the transport
 * echoes it. Stamps the receive time. A payload the hub must not echo
 * (RFC 6455 sections 5.5.1, 7.4) starts a close with 1002 or 1007 (logged,
 * counted as an error): returns that code with the reason text in *why,
 * for the transport to send instead. 0 = echo as usual.
 */
unsigned hub_session_on_peer_close(struct hub_session *s,
                                   const unsigned char *in, size_t len,
                                   uint64_t now_ms, const char **why);

/* Every inbound frame that reaches the hub (data, pong, close) calls this;
 * nothing else. Client pings never do: lws answers them itself. */
void hub_session_stamp_rx(struct hub_session *s, uint64_t now_ms);
/* An inbound WebSocket pong. */
void hub_session_on_pong(struct hub_session *s, uint64_t now_ms);
/*
 * The transport wrote the heartbeat ping the session had queued. A ping
 * that waited more than a tick to go out (its loop stalled or fell behind
 * after the heartbeat queued it) gets the whole pong timeout from now: the
 * peer cannot answer a ping it was not sent.
 */
void hub_session_ping_written(struct hub_session *s, uint64_t now_ms);

/*
 * The heartbeat found s silent for ping_interval: arm the pong deadline
 * and queue a ping (written first, ahead of data). 0 queued; 1 skipped
 * (not open, or a ping is already unanswered); -EIO when the deadline
 * could not be armed (nothing queued).
 */
int hub_session_queue_ping(struct hub_session *s, uint64_t now_ms);
/*
 * The loop drains: from now, s's deadline entry is the drain close (4200)
 * due in delay_ms. Only while open.
 */
void hub_session_drain(struct hub_session *s, uint64_t now_ms,
                       uint64_t delay_ms);

/*
 * Queue a reference to f (the caller keeps its own). Returns 0, or
 * -ENOBUFS when the queue would pass max_queue: the session is then being
 * closed with 4100 and f was not queued.
 */
int hub_session_send(struct hub_session *s, struct hub_frame *f);
/*
 * hub_session_send() without taking the reference: on 0 the queue holds f
 * and the caller owes it one reference, which a fan-out adds for all its
 * recipients at once with hub_frame_ref_n() (one atomic, not one each).
 * The caller's own reference keeps f alive until then. The caller also
 * accounts the bytes (hub_loop_queued_add), once for all recipients.
 * Until the reference is added nothing may drop this queue (an eviction
 * closing the session would release a reference it does not yet hold),
 * so a walk that can evict uses hub_session_send().
 */
int hub_session_push(struct hub_session *s, struct hub_frame *f);
/*
 * k frames of one fan-out at once, as hub_session_push() queues one: all of
 * them (returns k; the caller owes a reference to each and accounts
 * total, their bytes), or none. 0: the session is not open. -1: they do not
 * all fit (the queue limit, or the ring could not grow) and nothing
 * changed; the caller then sends them one by one with hub_session_send(),
 * so that a full queue or a failed allocation closes the session as a
 * single push would, while no queued frame lacks its reference.
 */
int hub_session_push_n(struct hub_session *s, struct hub_frame *const *fs,
                       unsigned k, uint64_t total);
/* Queue a copy of a text message (control messages, errors). */
int hub_session_send_text(struct hub_session *s, const char *text, size_t len);
/* pusher:error {code, message}; when close is true, then close with code
 * (msg must then be a static string: the close keeps it). */
void hub_session_send_error(struct hub_session *s, int code, const char *msg,
                            bool close);

/*
 * pusher:error 4100 and close 4100, dropping the backlog, counted as why
 * (slow consumer, write timeout, queue budget). msg must be static.
 */
void hub_session_close_behind(struct hub_session *s, const char *msg,
                              enum hub_close_reason why);

/*
 * Start closing: the transport sends a close frame with code and reason
 * after what is queued (unless drop_queue), and the close timer kills the
 * connection if the peer never completes it. Idempotent. reason must be a
 * static string (it is kept, not copied).
 */
void hub_session_close(struct hub_session *s, uint16_t code, const char *reason,
                       enum hub_close_reason why, bool drop_queue);

/*
 * The transport's side: it pulls what to write, one thing at a time, in
 * the order the protocol needs (a ping only while open and ahead of data,
 * data before the close, nothing after it).
 */
enum hub_out_kind {
    HUB_OUT_NONE,
    HUB_OUT_PING,          /* a WebSocket ping; payload data/len (ASCII) */
    HUB_OUT_DATA,          /* pre-framed bytes: data/len, frames whole ones */
    HUB_OUT_CLOSE,         /* close_code, reason data/len (<= 123 bytes) */
};

struct hub_out {
    enum hub_out_kind kind;
    const unsigned char *data;
    size_t len;
    unsigned frames;
    uint16_t close_code;
    char ping[24];         /* a PING's payload (data points here) */
};

/* What hub_session_next_out() would return; changes nothing. */
enum hub_out_kind hub_session_peek_out(const struct hub_session *s);
/*
 * The next thing to write, in *out (only the fields of its kind are set):
 * PING when one is due and the session is open (clears ping_due; the
 * payload is "lubdub-<ping_sent_us>"); else DATA, as many whole queued frames as
 * fit cork (cap bytes), or a bigger head frame by pointer; else CLOSE when
 * closing (the session is then CLOSE_SENT: the transport sends the close
 * and drops the connection when the peer answers); else NONE. Clears the
 * want_writable flag: the transport is serving s now.
 */
enum hub_out_kind hub_session_next_out(struct hub_session *s,
                                       unsigned char *cork, size_t cap,
                                       struct hub_out *out);
/*
 * out was written (written bytes of a DATA; the transport's write either
 * took all of out or failed, and then it drops the connection instead).
 * PING: counted, and a late ping gets its pong timeout from now_ms
 * (hub_session_ping_written). DATA: counted, the frames written leave the
 * queue, and the write deadline sees progress (one clock read, not now_ms:
 * a data write need not read the clock unless it wrote bytes). Then, if
 * output remains, hub_session_await_writable().
 */
void hub_session_out_done(struct hub_session *s, const struct hub_out *out,
                          size_t written, uint64_t now_ms);
/* Ask the transport for a writable callback for s (want_writable). */
void hub_session_await_writable(struct hub_session *s);

static inline bool hub_session_has_output(const struct hub_session *s)
{
    return s->q.count > 0 || s->ping_due || s->state == HUB_SESSION_CLOSING;
}

/*
 * Authorized connections (the app's enable_user_authentication): arm the
 * session's deadline entry for the signin deadline, connected_ms +
 * user_authentication_timeout, when that is earlier than what it holds.
 * The entry's callback closes a session still not authorized then with
 * pusher:error 4009 and close 4009. No-op for other apps.
 */
void hub_session_arm_signin_deadline(struct hub_session *s);
/* s signed in, or a private or presence subscription of s succeeded (what
 * Pusher counts as an authorized connection): the signin deadline is void
 * for good; the deadline entry is stopped when no other deadline needs it.
 * Cheap when already authorized. */
void hub_session_authorized(struct hub_session *s);

/* The signed-in user's user_info (JSON text), NULL when none. */
static inline const char *hub_session_user_info(const struct hub_session *s)
{
    const char *p;

    if (!s->user_id)
        return NULL;
    p = s->user_id + strlen(s->user_id) + 1;
    return *p ? p : NULL;
}

/* Check the queue's invariants; 0 or -EFAULT. For tests. */
int hub_session_check(const struct hub_session *s);

/* The transport's handle the session was created with. */
static inline void *hub_session_conn(const struct hub_session *s)
{
    return s->conn;
}

static inline bool hub_session_is_open(const struct hub_session *s)
{
    return s->state == HUB_SESSION_OPEN;
}

/* Between hub_session_init() and hub_session_fini(). */
static inline bool hub_session_live(const struct hub_session *s)
{
    return s->loop != NULL;
}

#endif
