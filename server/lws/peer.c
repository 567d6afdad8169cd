/*
 * server/lws/peer.c - the client address of an lws connection, for the log's
 * per-address rate limit and the lines that name a peer.
 *
 * Without --trusted-proxies the address is the socket's peer, asked of
 * the kernel when a line needs it: nothing is stored per connection.
 * With it, a request from a trusted proxy names its client in
 * X-Forwarded-For (server/base/peeraddr.h), and lws frees the request headers
 * at the WebSocket upgrade (and between keep-alive requests), so the
 * resolved address is kept in the last SRV_PEER_SLOT bytes of the
 * connection's lws storage: every protocol with storage gets those bytes
 * added (srv_peer_pss_extra()), 16 bytes a connection, only with the flag
 * set. srv_peer_note() fills them when the request's headers are there
 * (FILTER_PROTOCOL_CONNECTION for a WebSocket, LWS_CALLBACK_HTTP for each
 * HTTP request; lws zeroes the storage when it re-binds a connection).
 *
 * Thread: srv_peer_init on the main thread before the loops run; the rest
 * on the connection's loop.
 */
#include <string.h>
#include <sys/socket.h>

#include "server/base/peeraddr.h"
#include "server/lws/srv.h"

static const struct srv_peeraddr_cidrs *trusted;

void srv_peer_init(const struct srv_peeraddr_cidrs *t)
{
    trusted = t && t->n ? t : NULL;
}

size_t srv_peer_pss_extra(void)
{
    return trusted ? sizeof(struct srv_peeraddr) : 0;
}

/* The connection's stored address, or NULL: no --trusted-proxies, no
 * storage bound (yet), a protocol without storage. */
static struct srv_peeraddr *slot_of(struct lws *wsi)
{
    const struct lws_protocols *p;
    unsigned char *u;

    if (!trusted)
        return NULL;
    p = lws_get_protocol(wsi);
    u = lws_wsi_user(wsi);
    if (!p || !u || p->per_session_data_size < sizeof(struct srv_peeraddr))
        return NULL;
    return (struct srv_peeraddr *)(u + p->per_session_data_size -
                                   sizeof(struct srv_peeraddr));
}

static bool socket_peer(struct lws *wsi, struct srv_peeraddr *a)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int fd = lws_get_socket_fd(wsi);

    return fd >= 0 && getpeername(fd, (struct sockaddr *)&ss, &sl) == 0 &&
           srv_peeraddr_from_sockaddr(a, (struct sockaddr *)&ss, sl) == 0;
}

/* A trusted proxy's request: its X-Forwarded-For, while lws holds it. A
 * function of its own so that only this path has the buffer's frame. */
static __attribute__((noinline)) void forwarded(struct lws *wsi,
                                                struct srv_peeraddr *a)
{
    /* The header's whole value: lws caps each header (and a header at the
     * cap is refused with 431 before anything reads it here). */
    char xff[SRV_HEADER_ONE_MAX + 1];
    struct srv_peeraddr peer = *a;
    int n;

    if (lws_hdr_total_length(wsi, WSI_TOKEN_X_FORWARDED_FOR) <= 0)
        return;
    n = lws_hdr_copy(wsi, xff, sizeof(xff), WSI_TOKEN_X_FORWARDED_FOR);
    if (n > 0)
        (void)srv_peeraddr_forwarded(trusted, &peer, xff, (size_t)n, a);
}

/* The socket's peer, or the client a trusted proxy names. */
static bool resolve(struct lws *wsi, struct srv_peeraddr *a)
{
    if (!socket_peer(wsi, a))
        return false;
    if (trusted && srv_peeraddr_cidrs_match(trusted, a))
        forwarded(wsi, a);
    return true;
}

void srv_peer_note(struct lws *wsi)
{
    struct srv_peeraddr *slot = slot_of(wsi);

    if (slot && !resolve(wsi, slot))
        memset(slot, 0, sizeof(*slot));
}

bool srv_peer_get(struct lws *wsi, struct srv_peeraddr *a)
{
    struct srv_peeraddr *slot = wsi ? slot_of(wsi) : NULL;

    if (slot && srv_peeraddr_is_set(slot)) {
        *a = *slot;
        return true;
    }
    return wsi && resolve(wsi, a);
}

char *srv_peer_str(struct lws *wsi, char *buf)
{
    struct srv_peeraddr a;

    if (!srv_peer_get(wsi, &a))
        memset(&a, 0, sizeof(a));
    return srv_peeraddr_format(&a, buf);
}
