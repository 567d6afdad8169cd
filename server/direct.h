/*
 * server/direct.h - the read bypass (--ws-direct-read): an established
 * plain-TCP WebSocket is read by lubdub's own libev watcher into one
 * per-loop buffer and framed by server/wsread.c; lws keeps the upgrade,
 * TLS, writes and closes. docs/LWS.md, "The read bypass", says why it is
 * safe; docs/DESIGN.md section 14 why it exists.
 *
 * Thread: the loop's own.
 */
#ifndef SRV_DIRECT_H
#define SRV_DIRECT_H

#include <ev.h>
#include <libwebsockets.h>

#include "hub/session.h"

struct srv_loop;
struct srv_direct;

/* lws's per-session storage of protocol "lubdub": the hub session (its
 * 304 B stay as they are) and the bypass's watcher, whose data pointer is
 * the session's framing state (server/wsread.h; NULL while it holds
 * none). */
struct srv_ws_pss {
    struct hub_session s;
    ev_io rd;
};

/* Per loop, with libev only; 0 or -ENOMEM. Without libev or with the
 * bypass off nothing is allocated and every call below is a no-op. */
int srv_direct_init(struct srv_loop *l);
void srv_direct_fini(struct srv_loop *l);

/* ESTABLISHED went through: a plain-TCP session is handed over right
 * before the loop next polls, if lws holds none of its bytes. */
void srv_direct_established(struct srv_loop *l, struct lws *wsi,
                            struct srv_ws_pss *p);
/* SERVER_WRITEABLE: writes a control frame the bypass owes the peer (a
 * close echo or a pong). Returns 1 when it wrote one (*ret: what the
 * callback returns), 0 when there was none. */
int srv_direct_writable(struct lws *wsi, struct srv_ws_pss *p, int *ret);
/* CLOSED: the watcher stops before lws closes the fd. */
void srv_direct_closed(struct srv_loop *l, struct lws *wsi,
                       struct srv_ws_pss *p);

#endif
