/*
 * server/lws/srv.h - the libwebsockets adapter's internals, shared by the
 * server/ files: one struct srv_loop per event loop (thread + lws context +
 * own SO_REUSEPORT listener + its hub loop), and the process-wide struct srv.
 *
 * Thread: a srv_loop's fields belong to its thread, except where noted.
 */
#ifndef SRV_SRV_H
#define SRV_SRV_H

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <libwebsockets.h>

#include "hub/loop/loop.h"
#include "hub/base/log.h"
#include "timer/clock.h"
#include "server/config/config.h"
#include "server/base/http_post.h"
#include "server/config/secret.h"
#include "server/base/peeraddr.h"

#define SRV_CORK_BYTES (64 * 1024)

struct srv;
struct srv_tls_creds;
typedef struct ssl_ctx_st SSL_CTX;

struct srv_loop {
    struct srv *srv;
    unsigned id;
    struct hub_loop *hub;
    struct lws_context *ctx;
    struct lws_vhost *vh;
    int listen_fd;
    struct lws *acceptor;
    lws_sorted_usec_list_t sul_wheel;     /* drives the timing wheel */
    lws_sorted_usec_list_t sul_heartbeat; /* next heartbeat slice */
    lws_sorted_usec_list_t sul_accept;    /* resume after EMFILE */
    lws_sorted_usec_list_t sul_flush;     /* hub_loop_flush after reads */
    pthread_t thread;
    struct ev_loop *evl;                  /* libev loop, NULL with poll */
    bool accepting;
    bool running;
    uint64_t last_emfile_log_ms;
    uint64_t last_wheel_ms;               /* the wheel's last advance */
    bool wheel_held;                      /* one tick held after a stall */
    /* Test only (LUBDUB_TEST_STALL_MS): GET /test/stall?loop=N sets
     * stall_armed from any loop; the owner moves it to stall_after_ping
     * and sleeps right after writing its next heartbeat ping. */
    atomic_bool stall_armed;
    bool stall_after_ping;
    /* --metrics-port, first loop only (server/ops/ops.c): its own vhost. */
    int metrics_fd;                       /* -1 = none */
    struct lws_vhost *vh_metrics;
    struct lws *metrics_acceptor;         /* paused after EMFILE */
    lws_sorted_usec_list_t sul_metrics;   /* resume it */
    unsigned char *cork;                  /* SRV_CORK_BYTES */
    struct srv_direct *direct;            /* read bypass; NULL when off */
    SSL_CTX *ssl_ctx;                     /* the vhost's, with TLS */
    struct srv_tls_creds *tls_current;    /* reloaded cert, NULL = lws's */
    /* Set by the main thread on SIGHUP, taken by the loop (server/lws/tls.c). */
    _Atomic(struct srv_tls_creds *) tls_pending;
    /* POSTs answered after the read pass, before the next poll
     * (server/base/http_post.h); with libev, the prepare watcher that drains
     * them (an ev_prepare, server/loop/threads.c). */
    struct srv_http_postq postq;
    void *post_prepare;
};

struct ev_loop;

struct srv {
    struct srv_config *cfg;
    struct hub_config hcfg;
    struct hub *hub;
    struct srv_loop *loops;
    unsigned n_loops;
    uint16_t port;                        /* the bound port */
    pthread_barrier_t barrier;
    atomic_uint loops_done;
    atomic_bool stopping;                 /* contexts are being destroyed */
    uint64_t started_wall_s;
    /* Test only: how long a /test/stall sleeps; 0 (the path is a 404)
     * unless LUBDUB_TEST_STALL_MS was set at start. */
    unsigned test_stall_ms;
    SSL_CTX *client_ctx;                  /* empty, for lws (server/loop/threads.c) */
    /* The command line and environment, read again by an apps reload
     * (server/reload.c). */
    int argc;
    char **argv;
    char **envp;
    /* The operator tokens and the Redis password in force: cfg's at
     * start, replaced by a SIGHUP (server/config/secret.h). Read these, never
     * cfg->admin_token / metrics_token, after the start. */
    struct srv_secrets secrets;
    /* Scale-out (--redis; server/redis/cluster.c): NULL for one node. */
    struct hub_cluster *cluster;
    struct srv_redis *redis;
    char *node_id;                        /* derived or --node-id */
    /* --trusted-proxies, parsed (n == 0: none); server/lws/peer.c reads it. */
    struct srv_peeraddr_cidrs trusted;
};

/* server/redis/cluster.c: with --redis, the hub on the cluster backplane;
 * without, the in-process hub. NULL = out of memory. */
struct hub *srv_redis_cluster_hub_create(struct srv *srv);
/* Start the backplane thread, after the loops' listeners exist (so that
 * it never holds a descriptor number a listener reuses) and before the
 * loops run; 0 without --redis. -1 when the thread would not start. */
int srv_redis_cluster_start(struct srv *srv);
/* After every loop is gone, before hub_destroy(). */
void srv_redis_cluster_stop(struct srv *srv);
/* /stats's view: NULL without --redis, else "up"/"down". */
const char *srv_redis_cluster_state(const struct srv *srv);
/* A /readyz body always fits in this. */
#define SRV_READYZ_BODY_MAX 640
/* /readyz's answer of a node that is not draining: 200 "ready\n" without
 * --redis; with it, joined or not (server/redis/redis_ready.h) and
 * --ready-requires-redis. The body (one line) into body of cap bytes (at
 * least SRV_READYZ_BODY_MAX). Any thread. */
unsigned srv_redis_cluster_ready(const struct srv *srv, char *body,
                                 size_t cap);

/* server/loop/threads.c: the loops' contexts, threads and teardown. */
int srv_loops_create(struct srv *srv);
int srv_loops_start(struct srv *srv);
void srv_loops_join(struct srv *srv);

/* The loop whose context wsi belongs to. */
static inline struct srv_loop *srv_loop_of(struct lws *wsi)
{
    return lws_context_user(lws_get_context(wsi));
}

/* server/lws/listen.c: each loop's own SO_REUSEPORT listener. */
/* Bind and listen on port (0 = any) for l; 0, or -1 with err set. */
int srv_listen_open(struct srv_loop *l, uint16_t port, char *err,
                    size_t errlen);
/* The port l's listener is bound to. */
uint16_t srv_listen_port(const struct srv_loop *l);
/* Hand the listener to l's lws context (after it exists); 0 or -1. */
int srv_listen_adopt(struct srv_loop *l);
/* The "acceptor" protocol's callback: accept4() on readiness. */
int srv_listen_callback(struct lws *wsi, enum lws_callback_reasons reason,
                        void *user, void *in, size_t len);
/* Draining: accept nothing more (loop thread). */
void srv_listen_stop(struct srv_loop *l);
/* Is p one of the hub's internal raw protocols (the listeners'
 * acceptors: "acceptor", "metrics-acceptor"), which no client's upgrade
 * may bind to? */
bool srv_protocol_internal(const struct lws_protocols *p);

/* server/loop/ws.c: the WebSocket callbacks (then HTTP's, for the rest). */
int srv_ws_callback(struct lws *wsi, enum lws_callback_reasons reason,
                    void *user, void *in, size_t len);
/* lws's per-session storage: a hub session or an HTTP request. */
size_t srv_ws_pss_size(void);

/* server/lws/write.c: the write path's transport ops (hub_transport_ops;
 * server/loop/threads.c's table adds srv_direct_resume_rx). */
void srv_write_want_writable(void *conn);
void srv_write_flush_soon(void *ctx);
void srv_write_kill(void *conn);
/* lws flow-control reason bit of input backpressure on lws's read path
 * (hub_session_rx_pause). lws-misc.h uses bits 0, 6 and 7; server/lws/direct.c
 * uses bit 4. */
#define SRV_RXFLOW_BACKPRESSURE (1 << 5)
/* SERVER_WRITEABLE: write what the session has next; 0, or -1 to close. */
int srv_write_one(struct srv_loop *l, struct hub_session *s, struct lws *wsi);
/* The corked flush now, not from its sul (the read bypass's pass end). */
void srv_write_flush_now(struct srv_loop *l);
/* Test only: arm a stall on loop id (any thread); false if no such loop. */
bool srv_test_stall_arm(struct srv *srv, unsigned id);

/* server/lws/lwslog.c: lws's log lines and the hub's log hook, bridged to
 * server/lws/log.c; links the _lws_log/_lws_logv overrides in. */
void srv_lwslog_install(void);

/* server/http/http.c: HTTP routes of protocol 0. Returns lws callback result. */
int srv_http_callback(struct lws *wsi, enum lws_callback_reasons reason,
                      void *user, void *in, size_t len);
size_t srv_http_pss_size(void);
/* Answer the loop's queued POSTs (server/base/http_post.h): after lws's read
 * pass, before it polls again, outside any lws callback. Loop thread. */
void srv_http_post_flush(struct srv_loop *l);
/* server/http/upgrade.c: reject a ws upgrade before it happens (origin,
 * capacity); 0 = accept. */
int srv_http_filter_upgrade(struct srv_loop *l, struct lws *wsi);
/* LWS_CALLBACK_ADD_HEADERS of an upgrade: the permessage-deflate answer. */
int srv_http_ws_extensions(struct srv_loop *l, struct lws *wsi,
                           struct lws_process_html_args *a);
/* RFC 6455 handshake checks (400, 426, 431) on an "Upgrade: websocket"
 * request; 0 = go on, -1 = refused (a response is written). */
int srv_http_confirm_upgrade(struct srv_loop *l, struct lws *wsi,
                             const char *upgrade);
/* server/http/headers.c: a plain HTTP request with a header over the limit
 * gets 431; 0 = go on. */
int srv_http_filter_request(struct srv_loop *l, struct lws *wsi);

/*
 * Request header budget. lws keeps a request's headers in one buffer of
 * SRV_HEADER_BYTES while it parses them (freed at the upgrade or the end
 * of the request) and stores at most SRV_HEADER_ONE_MAX - 1 bytes of any
 * one header; such a header gets 431. Past SRV_HEADER_BYTES in all lws
 * closes the connection itself (see docs/COMPATIBILITY.md).
 */
#define SRV_HEADER_BYTES (32 * 1024)
#define SRV_HEADER_ONE_MAX (16 * 1024)
/* server/http/headers.c: the stored limit of token t: SRV_HEADER_ONE_MAX,
 * or 0 (none) for the request line's tokens. */
unsigned srv_header_limit_of(int t);
/* The table lws applies (info.token_limits); fills it (main thread). */
const struct lws_token_limits *srv_http_token_limits(void);

/* server/lws/tls.c: groups, certificate reload on SIGHUP. */
/* At vhost creation (main thread, LOAD_EXTRA_SERVER_VERIFY_CERTS). */
int srv_tls_vhost_init(struct srv_loop *l, SSL_CTX *ctx);
/* Main thread: re-read --tls-cert/--tls-key and hand them to every loop;
 * -1 (one error line logged, nothing changed) when they are unusable. */
int srv_tls_reload(struct srv *srv);
/* Loop thread, on wakeup: switch to a certificate the main thread sent. */
void srv_tls_pick_up(struct srv_loop *l);
/* After the loop's thread is gone. */
void srv_tls_loop_fini(struct srv_loop *l);

/* server/reload.c: main thread, on SIGHUP: load the configuration again
 * (the --config file, the environment, the flags, the secret files) and
 * take its apps, operator tokens and Redis password; -1 (one error line,
 * nothing changed) when it is unusable. Without --config or a secret
 * file, one info line and nothing else. */
int srv_config_reload(struct srv *srv);

/* server/lws/log.c. 0, or -ENOMEM (the per-address table). prio: the
 * "<N>" prefix on, off, or on when stderr is the journal. */
int srv_log_init(int level, enum srv_log_format fmt,
                 enum srv_log_priority prio);
void srv_log(int level, unsigned loop, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Peer-caused events: at most a few lines a second per address (that of
 * hub_log_conn's connection), the rest counted. */
void srv_log_peer(int level, unsigned loop, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same two with the line's fields (hub/base/log.h; borrowed for the
 * call, may be NULL): keys of the JSON line, docs/LOGS.md. */
void srv_log_event(int level, unsigned loop, const struct hub_log_fields *f,
                   const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void srv_log_peer_event(int level, unsigned loop,
                        const struct hub_log_fields *f, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* What the four above and the hub's hook come to; peer as srv_log_peer. */
void srv_log_vevent(bool peer, int level, unsigned loop,
                    const struct hub_log_fields *f, const char *fmt,
                    va_list ap) __attribute__((format(printf, 5, 0)));
/* The node id every JSON line carries from now on (copied; NULL: none). */
void srv_log_set_node(const char *node);
/* Main thread, about once a second: the summary of suppressed lines no
 * later line reported, at most every SRV_PEERLOG_REPORT_MS. */
void srv_log_tick(uint64_t now_ms);

/* server/lws/peer.c: a connection's client address (docs/RELIABILITY.md,
 * "Whose address"). Main thread, before the contexts: the trusted
 * proxies (borrowed for the process's life; NULL or empty: none). */
void srv_peer_init(const struct srv_peeraddr_cidrs *trusted);
/* Bytes every protocol's per-connection storage needs at its end for the
 * address: 16 with trusted proxies, else 0. */
size_t srv_peer_pss_extra(void);
/* While lws holds the request's headers: resolve and keep the address. */
void srv_peer_note(struct lws *wsi);
/* The connection's client address; false when the socket has none. */
bool srv_peer_get(struct lws *wsi, struct srv_peeraddr *a);
/* The same, formatted into buf (SRV_PEERADDR_STRLEN); "-" when none. */
char *srv_peer_str(struct lws *wsi, char *buf);
int srv_log_level_parse(const char *s);
/* Would a line at this level be written? Guards costly arguments. */
bool srv_log_enabled(int level);

/* server/ops/ops.c: /metrics and /stats (token, own port), /console routing. */
/* Main thread, loop 0, before its context: bind --metrics-port if set. */
int srv_ops_metrics_open(struct srv_loop *l, char *err, size_t errlen);
/* After l's context exists: the metrics vhost and its acceptor. */
int srv_ops_metrics_start(struct srv_loop *l,
                          const struct lws_protocols *protocols);
/* After the loop's thread is gone. */
void srv_ops_metrics_close(struct srv_loop *l);
/* The "metrics-acceptor" protocol's callback. */
int srv_ops_metrics_callback(struct lws *wsi, enum lws_callback_reasons reason,
                             void *user, void *in, size_t len);
/* Does wsi belong to the metrics vhost? */
bool srv_ops_is_metrics(struct lws *wsi);
/* /readyz on either port: 503 "draining" once the drain began, else
 * srv_redis_cluster_ready(). The status; the body into body (cap at
 * least SRV_READYZ_BODY_MAX). */
unsigned srv_ops_readyz(struct srv *srv, char *body, size_t cap);
/* First thing for every HTTP request: true when the path is an operator
 * surface's (or anything on the metrics vhost); *rc is then the lws result
 * of the answer written. body: a POST's body (body_len bytes, at most
 * HUB_REST_MAX_BODY; NULL when none or it was too big). */
bool srv_ops_route(struct lws *wsi, struct srv_loop *l, const char *path,
                   bool post, const char *body, size_t body_len, bool close,
                   int *rc);
/* One whole response (headers and body in one write) and the end of the
 * transaction: cache-control no-store, then hdrs (NULL, or "name:", value
 * pairs ending at a NULL name), then "Connection: close" when close.
 * Returns -1 when the connection must close (close, or any failure), else
 * lws_http_transaction_completed()'s verdict. */
int srv_http_reply(struct lws *wsi, unsigned status, const char *ctype,
                   const char *body, size_t len, bool close,
                   const char *const *hdrs);
/* srv_http_reply() with one optional extra header ("name:", value). */
int srv_ops_respond(struct lws *wsi, unsigned status, const char *ctype,
                    const char *body, size_t len, bool close,
                    const char *hname, const char *hval);
/* srv_ops_respond() of o's compact JSON text (o taken; NULL, or text that
 * cannot be made: -1, the connection closes). */
struct json_t;
int srv_ops_respond_json(struct lws *wsi, unsigned status, struct json_t *o,
                         bool close);
/* "Authorization: Bearer <token>" present and right (NULL token: true). */
bool srv_ops_bearer_ok(struct lws *wsi, const char *token);
/* Constant time in want's length. */
bool srv_ops_token_equal(const char *given, size_t len, const char *want);

/* server/ops/console.c: the operator console (--admin-token). */
int srv_console_http(struct lws *wsi, struct srv_loop *l, const char *path,
                     bool post, const char *body, size_t body_len,
                     bool close);
/* The "lubdub-console" WebSocket protocol (the live tail). */
int srv_console_callback(struct lws *wsi, enum lws_callback_reasons reason,
                         void *user, void *in, size_t len);
size_t srv_console_pss_size(void);

/* server/ops/stats.c: /stats JSON and /metrics text (owned, malloc'd). */
char *srv_stats_json(struct srv *srv, size_t *len);
char *srv_metrics_text(struct srv *srv, size_t *len);

/* Monotonic ms from the hub's clock. Inline, so that no server/ file
 * calls the loops' file for the time. */
static inline uint64_t srv_now_ms(void)
{
    return hub_clock_now_ms(hub_clock_monotonic());
}

#endif
