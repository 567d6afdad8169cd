/*
 * server/lws/direct.h - the read bypass (--ws-direct-read): an established
 * WebSocket, plain TCP or TLS, is read by lubdub itself, up to 64 KiB per
 * readiness into one per-loop buffer (recv(), or SSL_read() of the
 * session's own SSL: server/lws/tlsread.h), framed by server/lws/wsread.c;
 * lws keeps the upgrade, the TLS handshake, writes and closes. docs/LWS.md, "The read
 * bypass", says why it is safe; docs/DESIGN.md section 14 why it exists.
 *
 * Thread: the loop's own.
 */
#ifndef SRV_DIRECT_H
#define SRV_DIRECT_H

#include <libwebsockets.h>

#include <stdbool.h>

struct lws;
struct srv_loop;
struct srv_direct;

/* Per loop, with libev only; 0 or -ENOMEM. Without libev or with the
 * bypass off nothing is allocated and every call below is a no-op. */
int srv_direct_init(struct srv_loop *l);
void srv_direct_fini(struct srv_loop *l);

/* ESTABLISHED went through: the session is handed over right before the
 * loop next polls, if lws (and, on TLS, OpenSSL behind lws's last read)
 * holds none of its bytes. */
void srv_direct_established(struct srv_loop *l, struct lws *wsi);
/* SERVER_WRITEABLE: writes a control frame the bypass owes the peer (a
 * close echo or a pong). Returns 1 when it wrote one (*ret: what the
 * callback returns), 0 when there was none. */
int srv_direct_writable(struct lws *wsi, int *ret);
/* Input backpressure is over for the session of conn (a wsi;
 * hub_transport_ops.resume_rx): when it is bypassed, what its pause kept
 * is parsed and its socket watched again right before the loop next
 * polls; else lws's own reading is re-enabled (lws then delivers what it
 * kept first). */
void srv_direct_resume_rx(void *conn);
/*
 * permessage-deflate is offered only to sessions the bypass will read
 * (lws 4.1.6's own read path fails every RSV1 frame with 1002 unless an
 * lws extension is active): whether this upgrading session will be one,
 * as far as can be told now: the bypass is on for this loop and no wsi
 * lws would read holds bytes, which would decline this pass's handovers.
 * A handover that is still declined (bytes came in between, or the
 * client sent frames with its request) leaves the session with lws,
 * which then fails its first compressed message with 1002.
 */
bool srv_direct_would_take(const struct srv_loop *l, struct lws *wsi);
/* The 101 answered with the extension (LWS_CALLBACK_ADD_HEADERS); at
 * ESTABLISHED, srv_direct_take_pmd() says so once and forgets it. */
void srv_direct_note_pmd(struct lws *wsi);
bool srv_direct_take_pmd(struct lws *wsi);
/* CLOSED: out of the bypass before lws closes the fd. */
void srv_direct_closed(struct srv_loop *l, struct lws *wsi);

#endif
