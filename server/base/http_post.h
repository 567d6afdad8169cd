/*
 * server/base/http_post.h - when a POST body is answered, and when its
 * connection must close: keep-alive for POST without the lws 4.1.6
 * pipelined-body busy loop.
 *
 * The trap (docs/LWS.md, "A request pipelined behind a POST body"): a
 * response finished (lws_http_transaction_completed()) from inside
 * HTTP_BODY_COMPLETION runs while lws is still in its read path, before it
 * has put the bytes it read past the body in its buffer list; lws then
 * re-feeds those bytes in a state that consumes nothing, forever. So:
 *
 *   - the first BODY_COMPLETION does not answer: it puts the POST on its
 *     loop's answer queue (struct srv_http_postq), which the loop drains
 *     after lws has finished the read pass and before it polls again
 *     (srv_http_post_flush(), from a libev prepare watcher or right after
 *     lws_service()). By then lws has moved any bytes read past the body
 *     to its buffer list, so srv_http_post_rx_pending() sees them;
 *   - drained with nothing pending, the POST is answered there with
 *     keep-alive, outside the read path, and the connection is handed
 *     back to lws ready for its next request (srv_http_post_resume());
 *   - drained with input pending, it waits for HTTP_WRITEABLE as before
 *     (WAIT), and is answered there;
 *   - a second BODY_COMPLETION before that answer means lws is re-feeding
 *     bytes sent behind the body (a pipelined request): the POST is
 *     answered at once with "Connection: close" and the connection closed
 *     (ANSWER_CLOSE), so those bytes are never parsed and nothing loops;
 *   - any BODY_COMPLETION after an answer closes (CLOSE);
 *   - a POST that asked for "Connection: close" is answered at once and
 *     closed, as before keep-alive: nothing follows it to misparse; one
 *     whose client already half-closed is answered from the queue (lws
 *     reads nothing in between, so the FIN cannot close it first);
 *   - at HTTP_WRITEABLE the answer still says "Connection: close" when lws
 *     holds input that it read but has not parsed yet
 *     (srv_http_post_rx_pending()): bytes sent behind the body in the same
 *     read wait there, and lws 4.1.6 mangles a request parsed from them
 *     (a pipelined POST got a wrong 401 in tests/integration
 *     rest_keepalive.test.js before this check).
 *
 * A client that waits for each answer before its next request (every HTTP
 * agent, the Pusher SDKs) keeps its connection; one that pipelines behind
 * a POST body gets its first answer and a close, and resends the rest.
 *
 * Thread: the connection's loop. No allocation; the state lives in the
 * request (server/http/http.c), the queue in the loop (server/lws/srv.h).
 */
#ifndef SERVER_HTTP_POST_H
#define SERVER_HTTP_POST_H

#include <stdbool.h>

struct lws;

enum srv_http_post_phase {
    SRV_HTTP_POST_READING = 0, /* body not complete yet */
    SRV_HTTP_POST_PENDING,     /* body complete, answer waits for WRITEABLE */
    SRV_HTTP_POST_DONE,        /* answered, or being answered */
};

struct srv_http_post {
    enum srv_http_post_phase phase;
    /* On its loop's answer queue while queued (pprev != NULL). */
    struct srv_http_post *next, **pprev;
};

/* A loop's POSTs whose body completed in the read pass now running. */
struct srv_http_postq {
    struct srv_http_post *head;
    struct srv_http_post *cur;  /* the one being answered, or NULL */
    bool cur_gone;              /* cur's request was freed meanwhile */
};

/* Queue p (not queued yet); srv_http_postq_remove() before p goes. */
void srv_http_postq_add(struct srv_http_postq *q, struct srv_http_post *p);
/* Unqueue p if queued; notes it when it is the one being answered. */
void srv_http_postq_remove(struct srv_http_postq *q, struct srv_http_post *p);
/* The next queued POST, unqueued, or NULL. */
struct srv_http_post *srv_http_postq_pop(struct srv_http_postq *q);

enum srv_http_post_action {
    SRV_HTTP_POST_WAIT,         /* ask for WRITEABLE, return 0 */
    SRV_HTTP_POST_ANSWER_CLOSE, /* answer now with Connection: close, close */
    SRV_HTTP_POST_CLOSE,        /* close, no answer */
};

/* On HTTP_BODY_COMPLETION; answered: a response was already written.
 * WAIT: queue the POST (or, with Connection: close, answer it now). */
enum srv_http_post_action srv_http_post_body_complete(struct srv_http_post *p,
                                                      bool answered);

/* On HTTP_WRITEABLE, or when the queue is drained: true when the pending
 * POST is to be answered now (once; the phase moves to DONE). */
bool srv_http_post_writeable(struct srv_http_post *p);

/*
 * True when the connection's lws context has input read and not yet parsed
 * on any connection (lws_service_adjust_timeout() returns 0 then: its
 * public test for buffered rx). lws does not say which connection holds
 * it, so this is conservative: a POST answered while another connection
 * of the loop has such input closes too, which costs the client a new
 * connection and nothing else. Each loop has one service thread (tsi 0).
 */
bool srv_http_post_rx_pending(struct lws *wsi);

/*
 * True when the peer has already finished sending (its FIN is queued on
 * the socket with no data before it: a client that half-closed after its
 * request). Asked only when the drain cannot answer with keep-alive (input
 * pending): such a POST is then answered at once with "Connection: close",
 * since lws would read the FIN and close before HTTP_WRITEABLE. A peek,
 * nothing is consumed; a FIN that arrives later still loses the answer on
 * that path (the connection closes unanswered, as for any request cut
 * short).
 */
bool srv_http_post_peer_done(struct lws *wsi);

/*
 * After a keep-alive answer written from the queue: lws 4.1.6 leaves the
 * finished connection in a holding state until it sees POLLOUT
 * (LRS_DEFERRING_ACTION, lws_http_transaction_completed()), which costs
 * two poll changes and a poll round per request. The answer was just
 * written whole, so the socket was writable: this hands lws that POLLOUT
 * (lws_service_fd() with revents POLLOUT), which is all it waits for.
 * Only outside lws's service (the drain), and only when the transaction
 * completed with nothing buffered (lws_partial_buffered() false). With
 * libev (evl not NULL) the POLLOUT is fed to lws's write watcher
 * (ev_feed_fd_event()), so lws handles it in its own watcher callback,
 * which also starts lws's idle watcher: lws 4.1.6 re-arms its sul timer
 * only from there and from its timer callback, and the corked flush of
 * what the POST published is such a sul. With poll, lws_service_fd().
 */
struct ev_loop;
void srv_http_post_resume(struct lws *wsi, struct ev_loop *evl);

#endif
