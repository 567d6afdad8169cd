/*
 * server/loop/ws.c - the WebSocket callbacks of protocol "lubdub": the upgrade
 * checks (server/http/http.c decides), then one hub session per connection in
 * lws's per-session storage. Each callback hands lws's facts to the
 * session (hub/loop/session.h) and does what the session answers; it names no
 * session field (tests/unit/no_session_fields.sh).
 *
 * Thread: the connection's loop.
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/ssl.h>

#include "hub/loop/compress.h"
#include "hub/pusher/pusher.h"
#include "server/lws/direct.h"
#include "server/lws/srv.h"

/*
 * The upgrade went through: a session in lws's per-session storage, told
 * whether its 101 carried permessage-deflate (before the app match, which
 * decides whether it compresses); the hub finds the app from the path and
 * the protocol version from the query (hub_pusher_connect); the debug
 * "open" line gets the client's address (only looked up when it is
 * logged; through trusted proxies, server/lws/peer.c); then the read
 * bypass may take the socket.
 */
static int ws_established(struct hub_session *s, struct lws *wsi)
{
    char uri[256], arg[64], peer[SRV_PEERADDR_STRLEN];
    struct srv_loop *l = srv_loop_of(wsi);
    bool pmd = srv_direct_take_pmd(wsi);
    int n, proto = -1;

    if (hub_session_init(s, l->hub, wsi, srv_now_ms()))
        return -1;
    if (pmd)
        hub_session_set_pmd(s);
    n = lws_hdr_copy(wsi, uri, sizeof(uri), WSI_TOKEN_GET_URI);
    for (int i = 0; lws_hdr_copy_fragment(wsi, arg, sizeof(arg),
                                          WSI_TOKEN_HTTP_URI_ARGS, i) > 0;
         i++)
        if (strncmp(arg, "protocol=", 9) == 0)
            proto = atoi(arg + 9);
    hub_pusher_connect(s, n > 0 ? uri : NULL, n > 0 ? (size_t)n : 0, proto);
    if (srv_log_enabled(HUB_LOG_DEBUG))
        hub_session_opened(s, srv_peer_str(wsi, peer));
    srv_direct_established(l, wsi);
    return 0;
}

static int ws_callback(struct lws *wsi, enum lws_callback_reasons reason,
                       void *user, void *in, size_t len)
{
    struct hub_session *s = user;
    const char *msg;
    size_t msg_len;
    uint64_t now;

    switch (reason) {
    case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
        return srv_http_confirm_upgrade(srv_loop_of(wsi), wsi, in);
    case LWS_CALLBACK_FILTER_HTTP_CONNECTION:
        return srv_http_filter_request(srv_loop_of(wsi), wsi) ? 1 : 0;
    case LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS:
        /* user is the vhost's SSL_CTX; main thread, context creation. */
        return srv_tls_vhost_init(srv_loop_of(wsi), (SSL_CTX *)user) ? 1 : 0;
    case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
        /* The request's headers go at the upgrade: the client's address
         * (X-Forwarded-For) is read now. */
        srv_peer_note(wsi);
        if (srv_ops_is_metrics(wsi)) {
            /* The metrics port serves no WebSocket. */
            lws_return_http_status(wsi, HTTP_STATUS_NOT_FOUND, NULL);
            return 1;
        }
        return srv_http_filter_upgrade(srv_loop_of(wsi), wsi);
    case LWS_CALLBACK_ADD_HEADERS:
        return srv_http_ws_extensions(srv_loop_of(wsi), wsi, in);
    case LWS_CALLBACK_ESTABLISHED:
        return ws_established(s, wsi);
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
        /* Input backpressure (hub_session_rx_pause): lws keeps what it
         * read and delivers it when the hub resumes (resume_rx). On TLS
         * only once OpenSSL holds no decrypted byte: lws 4.1.6 spins when
         * a TLS session's reading stops while it does (docs/LWS.md,
         * "Stopping a TLS session's reads"); until then the messages of
         * the record being read are handled, and asked about again. */
        if (hub_session_rx_pause(s) &&
            (!lws_is_ssl(wsi) || SSL_pending(lws_get_ssl(wsi)) == 0))
            lws_rx_flow_control(wsi, LWS_RXFLOW_REASON_APPLIES_DISABLE |
                                         SRV_RXFLOW_BACKPRESSURE);
        return 0;
    case LWS_CALLBACK_RECEIVE_PONG:
        if (hub_session_live(s))
            hub_session_on_pong(s, srv_now_ms());
        return 0;
    case LWS_CALLBACK_SERVER_WRITEABLE: {
        int ret;

        /* A pong or close echo the read bypass owes goes first, as lws
         * writes its own ahead of the user's. */
        if (srv_direct_writable(wsi, &ret))
            return ret;
        if (!hub_session_live(s))
            return 0;
        return srv_write_one(srv_loop_of(wsi), s, wsi);
    }
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
        srv_direct_closed(srv_loop_of(wsi), wsi);
        hub_session_closed(s, srv_now_ms());
        return 0;
    default:
        return srv_http_callback(wsi, reason, user, in, len);
    }
}

/*
 * Whatever the hub logs while it runs this connection's callback (a
 * refusal, bad input, the session's end) is charged to the connection's
 * client (hub/base/log.h, server/lws/log.c).
 */
int srv_ws_callback(struct lws *wsi, enum lws_callback_reasons reason,
                    void *user, void *in, size_t len)
{
    void *was = hub_log_conn_swap(wsi);
    int rc = ws_callback(wsi, reason, user, in, len);

    hub_log_conn_swap(was);
    return rc;
}

size_t srv_ws_pss_size(void)
{
    size_t h = srv_http_pss_size();

    return h > sizeof(struct hub_session) ? h : sizeof(struct hub_session);
}

