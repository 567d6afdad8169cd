/*
 * server/ops/ops_http.c - what the operator surfaces share (server/ops/ops.c, the
 * console in server/ops/console.c) and the REST and page routes
 * (server/http/request.c): one whole HTTP response with extra headers; and for
 * the operator surfaces the bearer-token check with a constant-time
 * compare and the metrics port's listener and vhost.
 *
 * The metrics port is one more lws vhost ("metrics") in the first loop's
 * context, with no listener of lws's own: like the main port (docs/LWS.md,
 * "N contexts on one port") the loop binds the socket itself, adopts it as
 * a raw file into the "metrics-acceptor" protocol and hands each accepted
 * connection to lws_adopt_socket_vhost() on the metrics vhost. Requests
 * then arrive at the same HTTP callback; srv_ops_route() (server/ops/ops.c)
 * tells the vhosts apart with srv_ops_is_metrics(). No thread of its own,
 * nothing that blocks.
 *
 * Thread: srv_ops_metrics_open on the main thread before the loops run;
 * the rest on the loop of the connection (the metrics vhost: the first).
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <jansson.h>

#include "server/lws/srv.h"

int srv_http_reply(struct lws *wsi, unsigned status, const char *ctype,
                   const char *body, size_t len, bool close,
                   const char *const *hdrs)
{
    unsigned char *buf = malloc(LWS_PRE + 1024 + len), *start, *q, *end;
    int n;

    if (!buf)
        return -1;
    start = q = buf + LWS_PRE;
    end = start + 1024;
    if (lws_add_http_common_headers(wsi, status, ctype, (lws_filepos_t)len, &q,
                                    end) ||
        lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CACHE_CONTROL,
                                     (unsigned char *)"no-store", 8, &q, end))
        goto fail;
    for (size_t i = 0; hdrs && hdrs[i]; i += 2)
        if (lws_add_http_header_by_name(
                wsi, (const unsigned char *)hdrs[i],
                (const unsigned char *)hdrs[i + 1], (int)strlen(hdrs[i + 1]),
                &q, end))
            goto fail;
    if ((close && lws_add_http_header_by_token(
                      wsi, WSI_TOKEN_CONNECTION, (unsigned char *)"close", 5,
                      &q, end)) ||
        lws_finalize_http_header(wsi, &q, end))
        goto fail;
    memcpy(q, body, len);
    q += len;
    n = lws_write(wsi, start, (size_t)(q - start), LWS_WRITE_HTTP_FINAL);
    free(buf);
    if (n < 0 || close)
        return -1;
    return lws_http_transaction_completed(wsi) ? -1 : 0;
fail:
    free(buf);
    return -1;
}

int srv_ops_respond(struct lws *wsi, unsigned status, const char *ctype,
                    const char *body, size_t len, bool close,
                    const char *hname, const char *hval)
{
    const char *hdrs[3] = { hname, hval, NULL };

    return srv_http_reply(wsi, status, ctype, body, len, close,
                          hname ? hdrs : NULL);
}

int srv_ops_respond_json(struct lws *wsi, unsigned status, json_t *o,
                         bool close)
{
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    int rc;

    json_decref(o);
    if (!text)
        return -1;
    rc = srv_ops_respond(wsi, status, "application/json", text, strlen(text),
                         close, NULL, NULL);
    free(text);
    return rc;
}

/*
 * Equal in time that depends only on want's length: every byte of want is
 * compared whatever given holds, so the answer's timing tells nothing
 * about how much of a guess was right.
 */
bool srv_ops_token_equal(const char *given, size_t len, const char *want)
{
    size_t wlen = strlen(want);
    volatile unsigned char d = (unsigned char)(len != wlen);

    for (size_t i = 0; i < wlen; i++)
        d |= (unsigned char)(want[i] ^ (len ? given[i % len] : 0));
    return d == 0;
}

bool srv_ops_bearer_ok(struct lws *wsi, const char *token)
{
    char h[512];
    int n;

    if (!token)
        return true;
    n = lws_hdr_copy(wsi, h, sizeof(h), WSI_TOKEN_HTTP_AUTHORIZATION);
    if (n < 8 || strncasecmp(h, "Bearer ", 7) != 0)
        return false;
    return srv_ops_token_equal(h + 7, (size_t)n - 7, token);
}

bool srv_ops_is_metrics(struct lws *wsi)
{
    struct srv_loop *l = srv_loop_of(wsi);

    return l->vh_metrics && lws_get_vhost(wsi) == l->vh_metrics;
}

/* The metrics listener. */

int srv_ops_metrics_open(struct srv_loop *l, char *err, size_t errlen)
{
    const struct srv_config *cfg = l->srv->cfg;
    const char *bind_to = cfg->metrics_bind ? cfg->metrics_bind : cfg->bind;
    struct addrinfo hints = { 0 }, *ai = NULL;
    char portbuf[8];
    int fd, one = 1, rc;

    l->metrics_fd = -1;
    if (!cfg->metrics_port || l->id != 0)
        return 0;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    snprintf(portbuf, sizeof(portbuf), "%u", (unsigned)cfg->metrics_port);
    rc = getaddrinfo(bind_to, portbuf, &hints, &ai);
    if (rc) {
        snprintf(err, errlen, "--metrics-bind %s: %s", bind_to,
                 gai_strerror(rc));
        return -1;
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
        bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, 128)) {
        snprintf(err, errlen, "metrics listen on %s:%u: %s", bind_to,
                 (unsigned)cfg->metrics_port, strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    freeaddrinfo(ai);
    l->metrics_fd = fd;
    return 0;
}

int srv_ops_metrics_start(struct srv_loop *l,
                          const struct lws_protocols *protocols)
{
    struct lws_context_creation_info info;
    lws_sock_file_fd_type u;

    if (l->metrics_fd <= 0)
        return 0;
    memset(&info, 0, sizeof(info));
    /*
     * NO_LISTEN, not NO_LISTEN_SERVER like the default vhost: lws re-binds
     * each HTTP request to a vhost chosen by its Host header among the
     * vhosts with the same listen_port (lws_select_vhost() in
     * lib/roles/http/server/server.c, falling back to the first on that
     * port), so the two must differ or a Host header would move requests
     * between the ports. NO_LISTEN also keeps TLS off here
     * (lib/tls/tls-server.c).
     */
    info.port = CONTEXT_PORT_NO_LISTEN;
    info.vhost_name = "metrics";
    info.protocols = protocols;
    info.keepalive_timeout = 5;
    /* Plain HTTP whatever the main port does: scrapers sit on the private
     * network (docs/OPERATIONS.md, "Metrics port"). */
    l->vh_metrics = lws_create_vhost(l->ctx, &info);
    if (!l->vh_metrics)
        return -1;
    u.filefd = (lws_filefd_type)(intptr_t)l->metrics_fd;
    if (!lws_adopt_descriptor_vhost(l->vh, LWS_ADOPT_RAW_FILE_DESC, u,
                                    "metrics-acceptor", NULL))
        return -1;
    return 0;
}

void srv_ops_metrics_close(struct srv_loop *l)
{
    if (l->metrics_fd > 0) /* calloc'd loops that never opened hold 0 */
        close(l->metrics_fd);
    l->metrics_fd = -1;
}

static void metrics_resume(lws_sorted_usec_list_t *sul)
{
    struct srv_loop *l = lws_container_of(sul, struct srv_loop, sul_metrics);

    if (l->metrics_acceptor)
        lws_rx_flow_control(l->metrics_acceptor, 1);
}

int srv_ops_metrics_callback(struct lws *wsi, enum lws_callback_reasons reason,
                             void *user, void *in, size_t len)
{
    struct srv_loop *l;
    int one = 1;

    (void)user;
    (void)in;
    (void)len;
    if (reason == LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION) {
        /* A client's upgrade naming "metrics-acceptor" (server/http/upgrade.c
         * refuses it first; this is the backstop). */
        lws_return_http_status(wsi, HTTP_STATUS_BAD_REQUEST, NULL);
        return 1;
    }
    if (reason == LWS_CALLBACK_RAW_CLOSE_FILE) {
        l = srv_loop_of(wsi);
        lws_sul_cancel(&l->sul_metrics);
        l->metrics_acceptor = NULL;
        /* lws closes the adopted listener itself (server/lws/listen.c). */
        l->metrics_fd = -1;
        return 0;
    }
    if (reason != LWS_CALLBACK_RAW_RX_FILE)
        return 0;
    l = srv_loop_of(wsi);
    /* A few scrapers: 16 accepts a wakeup is plenty. Out of descriptors
     * the main listener's pause covers the process; here the pending
     * connection just waits for the next readiness. */
    for (int i = 0; i < 16; i++) {
        int c = accept4(l->metrics_fd, NULL, NULL,
                        SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (c < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
                errno == ENOMEM) {
                /* Do not spin on a listener that stays readable. */
                lws_rx_flow_control(wsi, 0);
                l->metrics_acceptor = wsi;
                lws_sul_schedule(l->ctx, 0, &l->sul_metrics, metrics_resume,
                                 100 * 1000);
            }
            break;
        }
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        /* lws closes c when the adoption fails (server/lws/listen.c). */
        (void)lws_adopt_socket_vhost(l->vh_metrics, c);
    }
    return 0;
}
