/*
 * server/loop/threads.c - event loops on libwebsockets 4.1.6: one thread per
 * loop, each with its own lws context (created serially on the main
 * thread: OpenSSL global init is not thread-safe), its own listener
 * (server/lws/listen.c) and its hub loop; the wheel's sul and its stall hold,
 * the heartbeat's yield, the wakeup, and the ordered teardown.
 *
 * lws's own "validity" ping/hangup is disabled (a policy of zeros): the
 * hub's heartbeat and timing wheel own liveness. One sul per loop ticks the
 * wheel; no lws timer exists per session.
 *
 * Thread: srv_loops_create on the main thread before any loop runs; each
 * loop's callbacks on its own thread.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <ev.h>
#include <jansson.h>

#include "hub/cluster/cluster.h"
#include "hub/ops/inspect.h"
#include "server/lws/hdrpool.h"
#include "server/lws/rxpool.h"
#include "server/lws/direct.h"
#include "server/lws/srv.h"

/* What the hub calls back on this transport: the write path's three ops and
 * the read bypass's resume (which calls the write path, so the table is
 * here, above both). */
static const struct hub_transport_ops transport_ops = {
    .want_writable = srv_write_want_writable,
    .flush_soon = srv_write_flush_soon,
    .kill = srv_write_kill,
    .resume_rx = srv_direct_resume_rx,
};

static const lws_retry_bo_t no_validity = {
    .secs_since_valid_ping = 0,
    .secs_since_valid_hangup = 0,
};

static void wake_loop(void *ctx)
{
    struct srv_loop *l = ctx;

    if (!atomic_load(&l->srv->stopping))
        lws_cancel_service(l->ctx);
}

/* The loop's queued POST answers (server/base/http_post.h), drained once the
 * events of a libev round are handled, before the next poll. */
static void post_prepare_cb(struct ev_loop *evl, ev_prepare *w, int revents)
{
    (void)evl;
    (void)revents;
    srv_http_post_flush(w->data);
}

/* Timers. */

static void wheel_sul_cb(lws_sorted_usec_list_t *sul);

/*
 * Leave lws_service(). On libev, ev_break. Under --event-loop poll, suls
 * run before poll() computes its timeout, so a flag set inside one would
 * only be seen after the next event; a 1 ms sul bounds that wait. (On
 * libev a sul scheduled outside lws's own callbacks does not re-arm lws's
 * timer: work that must run before the next poll uses an ev_prepare, as
 * server/lws/direct.c and the POST answer queue do.)
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
 * judge each peer by what it sent (hub/loop/session.c checks last_rx lazily).
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
        srv_log_event(HUB_LOG_WARN, l->id,
                      HUB_LOG_F(.event = "loop_stalled"),
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

/*
 * Protocol 0's callback: a wakeup (lws_cancel_service from another thread,
 * docs/LWS.md "Cross-thread wakeup") is the loop's; everything else goes
 * to the WebSocket callbacks and from there to HTTP.
 */
static int loop_cb(struct lws *wsi, enum lws_callback_reasons reason,
                   void *user, void *in, size_t len)
{
    struct srv_loop *l;

    if (reason != LWS_CALLBACK_EVENT_WAIT_CANCELLED)
        return srv_ws_callback(wsi, reason, user, in, len);
    l = lws_context_user(lws_get_context(wsi));
    if (!l || !l->hub)
        return 0;
    /* lws broadcasts the wakeup once per vhost: the metrics vhost
     * (server/ops/ops_http.c) shares this protocol, and one drain is enough. */
    if (l->vh_metrics && lws_get_vhost(wsi) == l->vh_metrics)
        return 0;
    hub_loop_drain_inbox(l->hub, srv_now_ms());
    if (l->srv->test_stall_ms &&
        atomic_exchange_explicit(&l->stall_armed, false,
                                 memory_order_relaxed))
        l->stall_after_ping = true;
    srv_tls_pick_up(l);
    if (l->hub->draining)
        srv_listen_stop(l);
    if (l->hub->stop && l->running)
        loop_leave(l);
    return 0;
}

/*
 * The table is every vhost's (the metrics vhost's too). lws binds a
 * WebSocket upgrade to whichever of them its Sec-WebSocket-Protocol
 * names, so the raw "acceptor" and "metrics-acceptor" refuse any upgrade
 * themselves and server/http/http.c refuses naming them first (docs/LWS.md,
 * "Subprotocol names bind to any protocol of the vhost").
 *
 * lws gives every WebSocket connection an rx buffer of --ws-rx-buffer bytes
 * for its whole life, and reads at most that much from one socket per loop
 * pass; a message that does not fit arrives in pieces and the hub
 * reassembles it (then frees the piece buffer). The trade is memory per
 * idle connection against how fast one client can send: see
 * docs/BENCHMARKS.md ("WebSocket read size").
 */
static struct lws_protocols protocols[] = {
    { "lubdub", loop_cb, 0, 128, 0, NULL, SRV_CORK_BYTES + 1024 },
    { "acceptor", srv_listen_callback, 0, 0, 0, NULL, 0 },
    { "metrics-acceptor", srv_ops_metrics_callback, 0, 0, 0, NULL, 0 },
    { "lubdub-console", srv_console_callback, 0, 4096, 0, NULL, 0 },
    { NULL, NULL, 0, 0, 0, NULL, 0 }
};

/* What lws's context creation is told about TLS (--tls-cert): the ciphers,
 * ALPN, options, and one empty client context shared by the loops.
 * 0 or -ENOMEM. */
static int tls_info(struct srv *srv, struct lws_context_creation_info *info)
{
    const struct srv_config *cfg = srv->cfg;

    info->options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
    info->ssl_cert_filepath = cfg->tls_cert;
    info->ssl_private_key_filepath = cfg->tls_key;
    info->ssl_cipher_list =
        "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
        "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
        "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";
    info->tls1_3_plus_cipher_list =
        "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
        "TLS_CHACHA20_POLY1305_SHA256";
    info->alpn = "http/1.1";
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
    info->provided_client_ssl_ctx = srv->client_ctx;
    /* lws adds no SSLv2/3, no compression, server preference.
     * No renegotiation at all: OpenSSL 3 already refuses it from
     * clients, and the hub never starts one. */
    info->ssl_options_set = SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1 |
                            SSL_OP_NO_RENEGOTIATION;
    return 0;
}

/* The loop's lws context, on its own libev loop (with the prepare watcher
 * that runs posted work before each poll) or on lws's default loop.
 * 0, -ENOMEM or -EIO (said in the log). */
static int create_context(struct srv_loop *l,
                          struct lws_context_creation_info *info)
{
    if (l->srv->cfg->event_loop == SRV_LOOP_LIBEV) {
        void *foreign[1];
        ev_prepare *w;

        l->evl = ev_loop_new(EVFLAG_AUTO | EVFLAG_NOSIGMASK);
        if (!l->evl)
            return -ENOMEM;
        foreign[0] = l->evl;
        info->options |= LWS_SERVER_OPTION_LIBEV;
        info->foreign_loops = foreign;
        l->ctx = lws_create_context(info);
        info->foreign_loops = NULL;
        w = calloc(1, sizeof(*w));
        if (!w)
            return -ENOMEM;
        ev_prepare_init(w, post_prepare_cb);
        w->data = l;
        ev_prepare_start(l->evl, w);
        l->post_prepare = w;
    } else {
        l->ctx = lws_create_context(info);
    }
    if (!l->ctx) {
        srv_log_event(HUB_LOG_ERR, l->id,
                      HUB_LOG_F(.event = "start_failed",
                                .reason = "lws_context"),
                      "lws_create_context failed%s",
                      l->srv->cfg->tls_cert ? " (check --tls-cert / --tls-key)" : "");
        return -EIO;
    }
    return 0;
}

/* One loop: its listener (loop 0's decides the port when it was 0), its
 * hub half, its lws context, the read bypass, the wheel's sul, the
 * metrics listener. 0 or -errno (said in the log). */
static int create_loop(struct srv *srv, unsigned i, uint16_t *port)
{
    struct srv_loop *l = &srv->loops[i];
    struct lws_context_creation_info info;
    char err[256];
    int rc;

    l->srv = srv;
    l->id = i;
    if (srv_listen_open(l, *port, err, sizeof(err))) {
        srv_log_event(HUB_LOG_ERR, i,
                      HUB_LOG_F(.event = "listen_failed", .reason = "listen"),
                      "%s", err);
        return -EADDRINUSE;
    }
    if (i == 0) {
        *port = srv_listen_port(l);
        srv->port = *port;
    }
    if (srv_ops_metrics_open(l, err, sizeof(err))) {
        srv_log_event(HUB_LOG_ERR, i,
                      HUB_LOG_F(.event = "listen_failed", .reason = "metrics"),
                      "%s", err);
        return -EADDRINUSE;
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
    info.timeout_secs = 10;
    info.pt_serv_buf_size = 4096;
    /* Browsers with a large cookie jar send 8-16 KB of headers; lws
     * holds this buffer only while it parses them. */
    info.max_http_header_data = SRV_HEADER_BYTES;
    info.token_limits = srv_http_token_limits();
    if (srv->cfg->tls_cert && tls_info(srv, &info))
        return -ENOMEM;
    rc = create_context(l, &info);
    if (rc)
        return rc;
    l->vh = lws_get_vhost_by_name(l->ctx, "default");
    if (srv_direct_init(l))
        return -ENOMEM;
    /* No service thread runs yet, so touching the sul list is safe. */
    l->running = true;
    l->last_wheel_ms = srv_now_ms();
    atomic_init(&l->stall_armed, false);
    lws_sul_schedule(l->ctx, 0, &l->sul_wheel, wheel_sul_cb,
                     (lws_usec_t)srv->hcfg.tick_ms * 1000);
    if (srv_listen_adopt(l)) {
        srv_log_event(HUB_LOG_ERR, i,
                      HUB_LOG_F(.event = "start_failed",
                                .reason = "listen_socket"),
                      "cannot adopt the listen socket");
        return -EIO;
    }
    if (srv_ops_metrics_start(l, protocols)) {
        srv_log_event(HUB_LOG_ERR, i,
                      HUB_LOG_F(.event = "start_failed",
                                .reason = "metrics_listener"),
                      "cannot start the metrics listener");
        return -EIO;
    }
    return 0;
}

int srv_loops_create(struct srv *srv)
{
    struct srv_config *cfg = srv->cfg;
    uint16_t port = cfg->port;

    protocols[0].per_session_data_size = srv_ws_pss_size();
    protocols[0].rx_buffer_size = cfg->ws_rx_buffer;
    protocols[3].per_session_data_size = srv_console_pss_size();
    /* With --trusted-proxies each connection keeps its resolved address
     * at the end of its storage (server/lws/peer.c). */
    for (struct lws_protocols *p = protocols; p->name; p++)
        if (p->per_session_data_size)
            p->per_session_data_size += srv_peer_pss_extra();
    srv_lwslog_install();
    /* Before the first context: lws's header buffers from their own pool. */
    srv_hdrpool_install();
    /* The receive buffers of sessions the read bypass will own, from a
     * pool that takes them back at the handover (server/lws/rxpool.h): the
     * size lws 4.1.6 asks for (another lws's size goes to the heap). */
    if (cfg->ws_direct_read)
        (void)srv_rxpool_init((size_t)cfg->ws_rx_buffer + LWS_PRE + 4,
                              SRV_RXPOOL_SLOTS);
    json_object_seed(0);
    srv->loops = calloc(srv->n_loops, sizeof(*srv->loops));
    if (!srv->loops)
        return -ENOMEM;
    for (unsigned i = 0; i < srv->n_loops; i++) {
        int rc = create_loop(srv, i, &port);

        if (rc)
            return rc;
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
        while (l->running) {
            if (lws_service(l->ctx, 0) < 0)
                break;
            srv_http_post_flush(l);
        }
    }
    /* Every loop has stopped servicing before any context goes away: a
     * late lws_cancel_service() into a destroyed context would be a
     * use-after-free (docs/LWS.md, "Cross-thread wakeup"). */
    pthread_barrier_wait(&l->srv->barrier);
    /* Nothing from other nodes reaches a loop from here on: neither
     * their publications nor their questions to the socket inspector. */
    if (l->srv->cluster)
        hub_cluster_close(l->srv->cluster);
    hub_inspect_shutdown(l->srv->hub);
    atomic_store(&l->srv->stopping, true);
    atomic_store(&l->srv->hub->stopping, true);
    lws_context_destroy(l->ctx);
    l->ctx = NULL;
    srv_direct_fini(l);
    if (l->evl) {
        if (l->post_prepare)
            ev_prepare_stop(l->evl, l->post_prepare);
        free(l->post_prepare);
        l->post_prepare = NULL;
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
        int rc;

        l->running = true;
        rc = pthread_create(&l->thread, NULL, loop_thread, l);
        if (rc)
            return -rc;
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
        /* Only a listener lws never adopted is still ours (an adopted one
         * was closed by lws and set to -1 in its close callback): the
         * backplane and the webhook sender still run, and a number closed
         * twice would be theirs by now. */
        if (srv->loops[i].listen_fd >= 0)
            close(srv->loops[i].listen_fd);
        srv_ops_metrics_close(&srv->loops[i]);
        free(srv->loops[i].cork);
        srv_tls_loop_fini(&srv->loops[i]);
    }
    pthread_barrier_destroy(&srv->barrier);
    SSL_CTX_free(srv->client_ctx); /* the contexts are gone */
    srv->client_ctx = NULL;
    free(srv->loops);
    srv->loops = NULL;
}
