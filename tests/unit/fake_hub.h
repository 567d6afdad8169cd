/*
 * tests/unit/fake_hub.h - a hub without a network for unit tests: a fake
 * clock, a fake transport that counts want_writable, flush_soon and kill
 * calls, one or more loops, sessions in zeroed test storage, and helpers that read the
 * frames a session has queued.
 *
 * Header-only (static functions) so each test executable gets its own copy.
 * Thread: the test's only thread plays every loop.
 */
#ifndef TESTS_UNIT_FAKE_HUB_H
#define TESTS_UNIT_FAKE_HUB_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "hub/app/auth.h"
#include "hub/hub.h"
#include "hub/loop/backplane.h"
#include "hub/loop/chanmap.h"
#include "hub/loop/loop.h"
#include "hub/loop/publish.h"
#include "hub/pusher/pusher.h"
#include "hub/loop/session.h"
#include "timer/clock.h"

#define FAKE_MAX_CONNS 64

/* A connection as the fake transport sees it. */
struct fake_conn {
    unsigned writable_calls;
    unsigned kills;
    unsigned resumes;              /* resume_rx: input backpressure over */
};

struct fake_hub {
    uint64_t now_ns;
    struct hub_clock clock;
    struct hub_config cfg;
    struct hub_app apps[2];
    struct hub *hub;
    struct hub_loop *loops[4];
    unsigned n_loops;
    unsigned wakes;
    unsigned flush_soons;          /* a loop's pending list went non-empty */
};

static inline void fake_want_writable(void *conn)
{
    ((struct fake_conn *)conn)->writable_calls++;
}

static inline void fake_kill(void *conn)
{
    ((struct fake_conn *)conn)->kills++;
}

static inline void fake_resume_rx(void *conn)
{
    ((struct fake_conn *)conn)->resumes++;
}

static inline void fake_wake(void *ctx)
{
    ((struct fake_hub *)ctx)->wakes++;
}

static inline void fake_flush_soon(void *ctx)
{
    ((struct fake_hub *)ctx)->flush_soons++;
}

static const struct hub_transport_ops fake_ops = {
    .want_writable = fake_want_writable,
    .flush_soon = fake_flush_soon,
    .kill = fake_kill,
    .resume_rx = fake_resume_rx,
};

static inline uint64_t fake_now_ms(const struct fake_hub *fh)
{
    return fh->now_ns / 1000000u;
}

/* Caller-owned fh; n_loops loops at t = 1000 s. */
static inline void fake_hub_init(struct fake_hub *fh, unsigned n_loops)
{
    memset(fh, 0, sizeof(*fh));
    fh->now_ns = 1000ull * 1000000000ull;
    fh->clock.now_ns = hub_clock_fake_now_ns;
    fh->clock.ctx = &fh->now_ns;
    fh->cfg.tick_ms = 10;
    fh->cfg.ping_interval_ms = 25000;
    fh->cfg.pong_timeout_ms = 10000;
    fh->cfg.close_timeout_ms = 2000;
    fh->cfg.drain_timeout_ms = 1000;
    fh->cfg.activity_timeout_s = 30;
    fh->cfg.max_message = 65536;
    fh->cfg.max_queue = 1 << 20;
    fh->cfg.auth_window_s = 600;
    fh->cfg.session_hooks = &hub_pusher_hooks;
    for (unsigned i = 0; i < 2; i++) {
        hub_app_defaults(&fh->apps[i]);
        fh->apps[i].index = i;
    }
    fh->apps[0].id = "app-id";
    fh->apps[0].key = "app-key";
    fh->apps[0].secret = "app-secret";
    fh->apps[1].id = "other-id";
    fh->apps[1].key = "other-key";
    fh->apps[1].secret = "other-secret";
    fh->cfg.apps = fh->apps;
    fh->cfg.n_apps = 2;
    fh->n_loops = n_loops;
}

/* Create the loops of fh->hub on the fake transport (a test that builds
 * its hub itself, e.g. with hub_create_with() and a backplane). */
static inline int fake_hub_loops_start(struct fake_hub *fh)
{
    for (unsigned i = 0; i < fh->n_loops; i++) {
        fh->loops[i] = hub_loop_create(fh->hub, &fake_ops, fake_wake, fh,
                                       fake_now_ms(fh));
        if (!fh->loops[i])
            return -1;
    }
    return 0;
}

/* Create the hub and its loops (after the test adjusted cfg and apps). */
static inline int fake_hub_start(struct fake_hub *fh)
{
    fh->hub = hub_create(&fh->cfg, &fh->clock);
    if (!fh->hub)
        return -1;
    return fake_hub_loops_start(fh);
}

static inline void fake_hub_stop(struct fake_hub *fh)
{
    for (unsigned i = 0; i < fh->n_loops; i++)
        hub_loop_destroy(fh->loops[i]);
    hub_destroy(fh->hub);
    /* The fake loops all ran on this thread: its keyed HMAC contexts
     * (hub/app/auth.h) go with them, so a leak check sees none left. */
    hub_auth_thread_release();
}

/* Advance the fake clock and run every loop's wheel and inbox. */
static inline void fake_hub_advance(struct fake_hub *fh, uint64_t ms)
{
    fh->now_ns += ms * 1000000ull;
    for (unsigned i = 0; i < fh->n_loops; i++) {
        hub_loop_drain_inbox(fh->loops[i], fake_now_ms(fh));
        hub_loop_service(fh->loops[i], fake_now_ms(fh));
    }
}

/* Deliver cross-loop publications (what a wakeup does). */
static inline void fake_hub_drain(struct fake_hub *fh)
{
    for (unsigned i = 0; i < fh->n_loops; i++)
        hub_loop_drain_inbox(fh->loops[i], fake_now_ms(fh));
}

/* A session in zeroed storage on loop li, opened for app (may be NULL). */
struct fake_session {
    struct hub_session s;
    struct fake_conn conn;
};

static inline int fake_session_open(struct fake_hub *fh,
                                    struct fake_session *fs,
                                    unsigned li, const struct hub_app *app)
{
    int rc;

    memset(fs, 0, sizeof(*fs));
    rc = hub_session_init(&fs->s, fh->loops[li], &fs->conn, fake_now_ms(fh));
    if (rc)
        return rc;
    if (app)
        hub_pusher_open(&fs->s, app);
    return 0;
}

/* Borrowed: the payload text of the i-th queued frame, NUL-terminated in
 * a static buffer (tests look at one at a time). */
static inline const char *fake_frame_text(const struct hub_session *s, uint32_t i)
{
    static char buf[64 * 1024];
    const struct hub_sendq *q = &s->q;
    const struct hub_frame *f;
    size_t n;

    if (i >= q->count)
        return NULL;
    f = q->ring[(q->head + i) & (q->cap - 1)];
    n = f->payload_len < sizeof(buf) - 1 ? f->payload_len : sizeof(buf) - 1;
    memcpy(buf, f->bytes + HUB_FRAME_HEADER_MAX, n);
    buf[n] = '\0';
    return buf;
}

/* Index of the first queued frame whose text contains needle, or -1. */
static inline int fake_find(const struct hub_session *s, const char *needle)
{
    for (uint32_t i = 0; i < s->q.count; i++)
        if (strstr(fake_frame_text(s, i), needle))
            return (int)i;
    return -1;
}

/* How many queued frames contain needle. */
static inline unsigned fake_count(const struct hub_session *s,
                                  const char *needle)
{
    unsigned n = 0;

    for (uint32_t i = 0; i < s->q.count; i++)
        if (strstr(fake_frame_text(s, i), needle))
            n++;
    return n;
}

/* The transport's asks for s: writable callbacks plus flushes of its
 * loop's pending list (tests that count them have one session a loop). */
static inline unsigned fake_asks(const struct fake_hub *fh,
                                 const struct fake_session *fs)
{
    return fs->conn.writable_calls + fh->flush_soons;
}

static inline void fake_flush_none(void *ctx, struct hub_session *s)
{
    (void)ctx;
    (void)s;
}

/*
 * Pretend the transport wrote everything queued (the data; a due ping or
 * close stays due). s leaves its loop's pending list; when no other
 * session is left listed, the list is flushed empty, as the server's
 * flush would leave it. Other sessions' queues are untouched.
 */
static inline void fake_flush(struct hub_session *s)
{
    static unsigned char buf[256 * 1024];
    struct hub_loop *l = s->loop;
    struct hub_pending *p = &l->pending;
    struct hub_out o;
    bool others = false;

    hub_pending_forget(p, s);
    for (uint32_t i = 0; i < p->n; i++)
        others |= p->v[i] != NULL;
    if (!others)
        hub_loop_flush(l, fake_flush_none, NULL);
    while (s->q.count) {
        size_t n = hub_sendq_cork(&s->q, buf, sizeof(buf), &o.data, &o.len,
                                  &o.frames);

        o.kind = HUB_OUT_DATA;
        hub_session_out_done(s, &o, n ? n : o.len, 0);
    }
    s->want_writable = false;
}

/* Send a message to the hub as the client would. */
static inline int fake_recv(struct fake_hub *fh, struct hub_session *s,
                     const char *text)
{
    return hub_pusher_on_message(s, text, strlen(text), fake_now_ms(fh));
}

/* The channel signature hex of s for channel (channel_data may be NULL);
 * no allocation, so allocation-failure tests can use it too. */
static inline void fake_channel_sig(const struct hub_session *s,
                                    const char *channel,
                                    const char *channel_data,
                                    char sig[HUB_SHA256_HEX_LEN + 1])
{
    const struct hub_app *app = s->app;
    char tosign[1024];

    if (channel_data)
        snprintf(tosign, sizeof(tosign), "%s:%s:%s", HUB_SID(s), channel,
                 channel_data);
    else
        snprintf(tosign, sizeof(tosign), "%s:%s", HUB_SID(s), channel);
    hub_auth_hmac_hex(app->secret, strlen(app->secret), tosign,
                      strlen(tosign), sig);
}

/* Subscribe with a correct signature (channel_data may be NULL). */
static inline int fake_subscribe(struct fake_hub *fh, struct hub_session *s,
                          const char *channel, const char *channel_data)
{
    const struct hub_app *app = s->app;
    char sig[HUB_SHA256_HEX_LEN + 1], auth[256];
    json_t *data, *msg;
    char *text;
    int rc;

    fake_channel_sig(s, channel, channel_data, sig);
    snprintf(auth, sizeof(auth), "%s:%s", app->key, sig);
    data = json_pack("{s:s,s:s}", "channel", channel, "auth", auth);
    if (channel_data)
        json_object_set_new(data, "channel_data", json_string(channel_data));
    msg = json_pack("{s:s,s:o}", "event", "pusher:subscribe", "data", data);
    text = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    rc = fake_recv(fh, s, text);
    free(text);
    return rc;
}

/* The text of a pusher:signin of s with a correct signature over
 * user_data (allocated; the caller frees it). */
static inline char *fake_signin_text(const struct hub_session *s,
                                     const char *user_data)
{
    const struct hub_app *app = s->app;
    char tosign[1024], sig[HUB_SHA256_HEX_LEN + 1], auth[256];
    json_t *msg;
    char *text;

    snprintf(tosign, sizeof(tosign), "%s::user::%s", HUB_SID(s),
             user_data);
    hub_auth_hmac_hex(app->secret, strlen(app->secret), tosign,
                      strlen(tosign), sig);
    snprintf(auth, sizeof(auth), "%s:%s", app->key, sig);
    msg = json_pack("{s:s,s:{s:s,s:s}}", "event", "pusher:signin", "data",
                    "auth", auth, "user_data", user_data);
    text = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    return text;
}

/* pusher:signin with a correct signature over user_data. */
static inline int fake_signin(struct fake_hub *fh, struct hub_session *s,
                              const char *user_data)
{
    char *text = fake_signin_text(s, user_data);
    int rc = fake_recv(fh, s, text);

    free(text);
    return rc;
}

#endif
