/*
 * lws_minimal: the naive libwebsockets broadcast baseline for bench-fanout.
 * One lws_write() per SERVER_WRITEABLE, lws_callback_on_writable_all_protocol
 * per message (docs/LWS.md, "Fan-out at the corked ceiling", first row).
 * A connection whose first message is "pub" publishes; its messages go to a
 * ring that every other connection drains; one lapped by the ring is closed.
 * Single thread; the only state is the ring and per-session read positions.
 */
#include <libwebsockets.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#define RING 4096u
#define MSG_MAX 2048u

struct msg { size_t len; unsigned char b[LWS_PRE + MSG_MAX]; };
struct pss { uint64_t next; int publisher; };

static struct msg ring[RING];
static uint64_t head; /* sequence number of the next message to store */
static volatile int interrupted;

static int cb(struct lws *wsi, enum lws_callback_reasons reason, void *user,
              void *in, size_t len)
{
    struct pss *p = user;
    switch (reason) {
    case LWS_CALLBACK_ESTABLISHED:
        p->next = head;
        break;
    case LWS_CALLBACK_RECEIVE:
        if (!p->publisher && len == 3 && !memcmp(in, "pub", 3)) {
            p->publisher = 1;
            break;
        }
        if (!p->publisher || len > MSG_MAX)
            break;
        memcpy(ring[head % RING].b + LWS_PRE, in, len);
        ring[head % RING].len = len;
        head++;
        lws_callback_on_writable_all_protocol(lws_get_context(wsi),
                                              lws_get_protocol(wsi));
        break;
    case LWS_CALLBACK_SERVER_WRITEABLE: {
        if (p->publisher || p->next == head)
            break;
        if (head - p->next > RING)
            return -1; /* lapped: a slow reader is closed, not buffered */
        struct msg *m = &ring[p->next % RING];
        if (lws_write(wsi, m->b + LWS_PRE, m->len, LWS_WRITE_TEXT) <
            (int)m->len)
            return -1;
        if (++p->next != head)
            lws_callback_on_writable(wsi);
        break;
    }
    default:
        break;
    }
    return 0;
}

static const struct lws_protocols protocols[] = {
    {"bench", cb, sizeof(struct pss), 4096, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0}};
static const lws_retry_bo_t no_validity = {.secs_since_valid_ping = 0,
                                           .secs_since_valid_hangup = 0};

static void on_sigint(int sig) { interrupted = 1; }

int main(int argc, char **argv)
{
    struct lws_context_creation_info info;
    int port = 7003;
    for (int i = 1; i + 1 < argc; i++)
        if (!strcmp(argv[i], "--port"))
            port = atoi(argv[i + 1]);
    signal(SIGINT, on_sigint);
    signal(SIGTERM, on_sigint);
    lws_set_log_level(LLL_ERR, NULL);
    memset(&info, 0, sizeof info);
    info.port = port;
    info.iface = "127.0.0.1";
    info.protocols = protocols;
    info.retry_and_idle_policy = &no_validity;
    info.options = LWS_SERVER_OPTION_DISABLE_IPV6;
    info.pvo = NULL;
    struct lws_context *ctx = lws_create_context(&info);
    if (!ctx)
        return 1;
    while (!interrupted && lws_service(ctx, 0) >= 0)
        ;
    lws_context_destroy(ctx);
    return 0;
}
