/*
 * loadgen: WebSocket fan-out load generator for make bench-fanout.
 *
 * One thread, raw epoll, no libwebsockets: the loader must cost far less per
 * delivery than any server it measures, and must not share code (or bugs)
 * with the hub. It opens subscriber connections in batches, optionally from
 * rotating source addresses 127.0.0.x, then publishes and records the
 * latency of every delivery from the send timestamp carried in the payload.
 *
 * Modes:
 *   pusher  Pusher Channels v7 clients: wait connection_established,
 *           subscribe, wait subscription_succeeded. With --publish rest
 *           (the default) publishing goes through the REST API (POST
 *           /apps/ID/events, HMAC-SHA256 signed) on one persistent
 *           keep-alive HTTP connection per publisher, pipelined. With
 *           --publish ws everyone subscribes to private-bench[-ROOM],
 *           signing its own subscription, and each publisher is a
 *           WebSocket connection that sends client events (client-bench);
 *           the server relays them to every other subscriber.
 *   raw     Plain WebSocket peers (bench/raw_peer.c, lws_minimal, node ws,
 *           uWebSockets.js): a publisher connection sends "pub" first, then
 *           every text message it sends is broadcast to all the others.
 *           With --rooms R (raw_single and raw_corked only) each subscriber
 *           sends "sub <room>" and waits for "subscribed"; publishers send
 *           "r<room> <payload>", round-robin over their rooms as in Pusher
 *           mode, and the server sends <payload> to that room's members.
 *
 * Every payload starts with "@<seq>:<t_ns>:" where t_ns is CLOCK_MONOTONIC
 * nanoseconds at send time; the rest is padding up to --size bytes. Several
 * loader processes on one machine share CLOCK_MONOTONIC, so a driver can
 * give them one absolute start time (--t0) and add their results.
 *
 * Closed loop (--window W): each publisher keeps at most W messages whose
 * deliveries to this process's reading subscribers are not all in yet. The
 * places freed by one subscriber's read are refilled after that read, so a
 * WebSocket publisher writes the messages they allow in one write().
 * Open loop (--rate R): R messages per second in total, whatever comes back.
 *
 * Several servers (make bench-cluster): --sub-ports P1,P2,.. spreads the
 * subscribers over servers round-robin (subscriber i on port i mod n),
 * --pub-ports the publishers the same way (both default to --port), and
 * --server-pid PID1,PID2,.. sums their CPU seconds (each one also listed in
 * "server_cpu_s_each"), and with several --sub-ports the latency of each
 * port's subscribers is in "lat_us_by_port". --channel renames the channel
 * ("bench" / "private-bench" by default).
 *
 * Compression (make bench-compression): --deflate offers permessage-deflate
 * (RFC 7692) in every upgrade; the loader never inflates, it counts the
 * sessions that negotiated it ("pmd_sessions") and the deliveries that came
 * compressed (RSV1 set, "rsv1_deliveries"); only the protocol messages of a
 * connection's setup (connection_established, subscription_succeeded: a
 * hub with --compression-min-size below their size compresses them) are
 * inflated, to be read. --payload FILE publishes one
 * fixed message instead of the stamped one: raw mode sends the file's bytes
 * as the message; Pusher mode (REST only) takes the file as the Pusher event
 * the server should send ({"event":..,"channel":..,"data":"<string>"}) and
 * publishes its event name and data string to its channel (--channel
 * overrides it). A fixed (or compressed) payload carries no stamp, so a
 * subscriber numbers its deliveries in arrival order instead: its k-th event
 * is taken as publication k (every subscriber is subscribed before the first
 * publication, and the server keeps one publisher's order). Uncompressed
 * deliveries are compared with the expected bytes ("payload_mismatch").
 * --raw-envelope (raw mode) wraps each stamped payload in the very Pusher
 * frame the hub sends for a client event on private-bench, so a raw server
 * sends the hub's bytes (bench-fanout's equal-work rows).
 * "wire_bytes" sums the WebSocket frame bytes (header and payload, TCP/IP
 * left out) of the deliveries counted in the window.
 *
 * Recovery (make bench-recovery): --resume makes every subscriber send
 * lubdub:resume ({"v":1,"channels":{}}: a first connect, nothing to
 * replay) right after connection_established, in the same write as its
 * subscribe, so the hub sends it the lubdub:id marker before each event of
 * a channel with history (docs/PROTOCOL.md "Recovery"). Markers are not
 * deliveries: every subscriber counts those it reads in the window
 * ("markers", and their frame bytes in "marker_bytes"), with or without
 * --resume, so a driver can check that a plain client gets none.
 *
 * Output: one JSON object on stdout. Deliveries and latencies count only
 * inside the measurement window [t0 + warmup, t0 + warmup + duration].
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define RBUF_SIZE (256 * 1024)
#define SLOTS 65536u /* in-flight message tracker ring; power of two */

/* ---- HDR-style log-linear histogram: 64 sub-buckets per power of two. */
#define H_SUB 64
#define H_BUCKETS (128 + 58 * H_SUB)

struct hist {
    uint64_t c[H_BUCKETS];
    uint64_t n, max;
};

static unsigned hist_index(uint64_t v)
{
    if (v < 128)
        return (unsigned)v;
    unsigned msb = 63u - (unsigned)__builtin_clzll(v);
    unsigned shift = msb - 6;
    return 128 + (shift - 1) * H_SUB + (unsigned)((v >> shift) - H_SUB);
}

static uint64_t hist_value(unsigned i)
{
    if (i < 128)
        return i;
    unsigned shift = (i - 128) / H_SUB + 1;
    uint64_t base = (uint64_t)((i - 128) % H_SUB + H_SUB) << shift;
    return base + ((1ull << shift) >> 1); /* bucket midpoint */
}

static void hist_add(struct hist *h, uint64_t v)
{
    unsigned i = hist_index(v);
    if (i >= H_BUCKETS)
        i = H_BUCKETS - 1;
    h->c[i]++;
    h->n++;
    if (v > h->max)
        h->max = v;
}

static uint64_t hist_pct(const struct hist *h, double p)
{
    if (!h->n)
        return 0;
    uint64_t want = (uint64_t)(p / 100.0 * (double)h->n);
    if (want >= h->n)
        want = h->n - 1;
    uint64_t seen = 0;
    for (unsigned i = 0; i < H_BUCKETS; i++) {
        seen += h->c[i];
        if (seen > want)
            return hist_value(i) < h->max ? hist_value(i) : h->max;
    }
    return h->max;
}

/* ---- options */
#define MAX_PIDS 16
#define MAX_PORTS 16
enum mode { MODE_RAW, MODE_PUSHER };
enum publish { PUB_REST, PUB_WS };

static struct {
    const char *host, *path, *app_id, *key, *secret;
    int port;
    enum mode mode;
    enum publish publish; /* pusher mode only */
    int subs, pubs, rooms, size, window, batch, src_ips, churn;
    int rest_inflight; /* REST requests in flight per connection; 0: window */
    double rate, warmup, duration, setup_timeout, slow_pct, msg_timeout;
    uint64_t t0; /* absolute CLOCK_MONOTONIC ns; 0 = when ready */
    int server_pid[MAX_PIDS];
    int n_server_pids;
    int sub_ports[MAX_PORTS], pub_ports[MAX_PORTS];
    int n_sub_ports, n_pub_ports;
    const char *channel; /* NULL: bench / private-bench */
    int quiet;
    int deflate;      /* offer permessage-deflate in every upgrade */
    int raw_envelope; /* raw mode: send the hub's client-event frame */
    const char *payload_file;
    int resume;       /* subscribers send lubdub:resume before subscribing */
} opt = {
    .host = "127.0.0.1", .path = "/app/app-key", .app_id = "app-id",
    .key = "app-key", .secret = "app-secret", .port = 6001,
    .mode = MODE_PUSHER, .publish = PUB_REST, .subs = 1000, .pubs = 1,
    .rooms = 1, .size = 32,
    .window = 32, .batch = 500, .src_ips = 0, .churn = 0, .rate = 0,
    .warmup = 1, .duration = 5, .setup_timeout = 60, .slow_pct = 0,
    .msg_timeout = 2,
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- connections */
enum kind { K_SUB, K_SLOW, K_PUB_WS, K_PUB_REST, K_CHURN };
enum st {
    ST_IDLE,
    ST_CONNECTING,
    ST_HS,       /* upgrade request sent, waiting for 101 */
    ST_WAIT_EST, /* pusher: waiting for connection_established */
    ST_WAIT_SUB, /* pusher: subscription_succeeded; raw rooms: subscribed */
    ST_WAIT_PONG,/* churn: one round trip before closing */
    ST_READY,
    ST_DEAD
};

struct conn {
    int fd;
    enum kind kind;
    enum st st;
    int room;
    int idx;
    int port; /* the server this connection talks to */
    int port_idx; /* its index in --sub-ports (0 without) */
    uint64_t t_start;
    int pmd;          /* the server accepted permessage-deflate */
    uint64_t rx_count; /* --payload: events received since ready */
    /* Bytes of an incomplete frame or HTTP response kept between reads. */
    unsigned char *in;
    size_t in_len, in_cap;
    /* Bytes not yet accepted by the kernel. */
    unsigned char *out;
    size_t out_off, out_len, out_cap;
    int want_out;
    /* First fragment's stamp of a fragmented message. */
    uint64_t frag_seq, frag_t;
    int frag_has;
    /* Publisher state. */
    uint64_t outstanding;
    int refill; /* window places freed since the last publish_more */
    int pub_no; /* 0.. among publishers: picks its rooms (--publish ws) */
    uint64_t pub_rr;
    int subs_waiting; /* subscription_succeeded still to come */
    char socket_id[32];
    uint64_t http_pending;
    int http_closing; /* the server said Connection: close */
    /* Sequence numbers of the REST requests awaiting a response, FIFO. */
    uint64_t *pend;
    unsigned pend_head, pend_n, pend_cap;
};

struct slot {
    uint64_t seq;
    uint64_t t_sent;
    uint32_t expected, got;
    int pub;
    int live;
};

static int ep;
static struct conn *conns;
static int nconns;
static struct slot *slots;
static uint64_t next_seq = 1;
static unsigned char rbuf[RBUF_SIZE];
static char *padding, *pub_data, *rest_body; /* sized for --size */
static size_t rest_body_cap;
static int *room_readers; /* live reading subscribers per room */

static struct {
    uint64_t conn_ok, conn_failed, sub_closed, slow_closed, slow_total;
    uint64_t published, deliveries, deliveries_all, timeouts, http_ok,
        http_err, churn_cycles, churn_failed, bad_frames, rest_reconnects,
        rest_lost, pub_errors, echoes;
    uint64_t w_start, w_end;
    uint64_t pmd_sessions, wire_bytes, rsv1_deliveries, payload_mismatch;
    uint64_t markers, marker_bytes; /* lubdub:id frames read in the window */
    struct hist lat, churn_lat;
} S;

/* --payload: the message a publisher sends (raw mode) or, in Pusher mode,
 * the event name and data string (both still JSON-escaped, as in the file)
 * and the frame the server should send (expect). */
static char *payload, *pl_event, *pl_data, *expect;
static size_t payload_len, pl_event_len, pl_data_len, expect_len;
/* The frame being handled: its wire bytes and whether RSV1 was set. */
static size_t cur_wire;
static int cur_rsv1;

static char first_fail[96];
static int draining; /* after the window: reading what slow readers got */

static int in_window(uint64_t t)
{
    return t >= S.w_start && t < S.w_end;
}

static void die(const char *m)
{
    perror(m);
    exit(2);
}

static void grow(unsigned char **b, size_t *cap, size_t need)
{
    if (need <= *cap)
        return;
    size_t n = *cap ? *cap : 4096;
    while (n < need)
        n *= 2;
    unsigned char *p = realloc(*b, n);
    if (!p)
        die("realloc");
    *b = p;
    *cap = n;
}

static void conn_events(struct conn *c)
{
    struct epoll_event ev = {.data.ptr = c};
    if (c->kind == K_SLOW && c->st == ST_READY)
        ev.events = EPOLLRDHUP; /* a slow reader never reads again */
    else
        ev.events = EPOLLIN | EPOLLRDHUP | (c->want_out ? EPOLLOUT : 0);
    if (c->st == ST_CONNECTING)
        ev.events = EPOLLOUT;
    epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void conn_kill(struct conn *c, int failed);
static void publish_more(struct conn *c, uint64_t now);
static uint64_t t_pub_start;
/* What the REST server does with keep-alive: unknown until the first
 * response, so the first connection sends one request and waits. */
static enum { REST_UNKNOWN, REST_KEEPALIVE, REST_ONE_PER_CONN } rest_mode;

static void flush_out(struct conn *c)
{
    while (c->out_off < c->out_len) {
        ssize_t n = write(c->fd, c->out + c->out_off, c->out_len - c->out_off);
        if (n < 0) {
            if (errno == EAGAIN)
                break;
            if (errno == EINTR)
                continue;
            conn_kill(c, 1);
            return;
        }
        c->out_off += (size_t)n;
    }
    if (c->out_off == c->out_len)
        c->out_off = c->out_len = 0;
    int want = c->out_len > 0;
    if (want != c->want_out) {
        c->want_out = want;
        conn_events(c);
    }
}

static void queue_out(struct conn *c, const void *p, size_t n)
{
    grow(&c->out, &c->out_cap, c->out_len + n);
    memcpy(c->out + c->out_len, p, n);
    c->out_len += n;
}

static uint32_t rng_state = 0x9e3779b9u;
static uint32_t rng(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

/* Appends one masked client frame (RFC 6455 5.3) to c's output. */
static void queue_frame(struct conn *c, int opcode, const void *data, size_t n)
{
    unsigned char h[14];
    size_t hl = 0;
    h[hl++] = (unsigned char)(0x80 | opcode);
    if (n < 126) {
        h[hl++] = (unsigned char)(0x80 | n);
    } else if (n < 65536) {
        h[hl++] = 0x80 | 126;
        h[hl++] = (unsigned char)(n >> 8);
        h[hl++] = (unsigned char)n;
    } else {
        h[hl++] = 0x80 | 127;
        for (int i = 7; i >= 0; i--)
            h[hl++] = (unsigned char)((uint64_t)n >> (8 * i));
    }
    uint32_t m = rng();
    unsigned char mk[4] = {(unsigned char)m, (unsigned char)(m >> 8),
                           (unsigned char)(m >> 16), (unsigned char)(m >> 24)};
    memcpy(h + hl, mk, 4);
    hl += 4;
    grow(&c->out, &c->out_cap, c->out_len + hl + n);
    memcpy(c->out + c->out_len, h, hl);
    unsigned char *d = c->out + c->out_len + hl;
    const unsigned char *s = data;
    for (size_t i = 0; i < n; i++)
        d[i] = s[i] ^ mk[i & 3];
    c->out_len += hl + n;
}

static void send_text(struct conn *c, const char *s, size_t n)
{
    queue_frame(c, 1, s, n);
    flush_out(c);
}

/* ---- connection lifecycle */
static int n_inflight; /* connects + handshakes in progress */
static int next_to_start;

static int is_reader(const struct conn *c)
{
    return c->kind == K_SUB;
}

static void conn_kill(struct conn *c, int failed)
{
    if (c->st == ST_DEAD || c->st == ST_IDLE)
        return;
    int was_setup = c->st != ST_READY;
    if (c->st == ST_READY && is_reader(c))
        room_readers[c->room]--;
    if (was_setup && c->kind != K_CHURN)
        n_inflight--;
    if (failed) {
        if (c->kind == K_CHURN)
            S.churn_failed++;
        else if (was_setup) {
            /* Keep the first reason: it usually explains all the others. */
            if (S.conn_failed++ == 0)
                snprintf(first_fail, sizeof first_fail,
                         "state %d errno %d (%s)", (int)c->st, errno,
                         strerror(errno));
        }
        else if (c->kind == K_SLOW)
            S.slow_closed++;
        else if (c->kind == K_SUB)
            S.sub_closed++;
        else if (c->kind == K_PUB_WS && !draining && S.pub_errors++ == 0)
            fprintf(stderr, "loadgen: the server closed a publisher\n");
    }
    /* REST requests that got no response were never published: free
     * their window places instead of waiting for their timeout. */
    for (; c->pend_n; c->pend_n--, c->pend_head = (c->pend_head + 1) %
                                                  c->pend_cap) {
        uint64_t seq = c->pend[c->pend_head];
        struct slot *s = &slots[seq & (SLOTS - 1)];
        S.rest_lost++;
        if (s->live && s->seq == seq && s->got == 0) {
            s->live = 0;
            if (c->outstanding)
                c->outstanding--;
        }
    }
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    c->st = ST_DEAD;
    c->in_len = c->out_len = c->out_off = 0;
    c->want_out = 0;
}

static const char *src_addr(int i, char *buf)
{
    snprintf(buf, 16, "127.0.0.%u", 2u + (unsigned)(i % opt.src_ips) % 250u);
    return buf;
}

static void conn_start(struct conn *c)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        S.conn_failed++;
        c->st = ST_DEAD;
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (c->kind == K_SLOW) {
        int small = 4096;
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    }
    if (opt.src_ips > 0) {
        char b[16];
        struct sockaddr_in sa = {.sin_family = AF_INET};
        inet_pton(AF_INET, src_addr(c->idx, b), &sa.sin_addr);
        /* Pick the port at connect() time so each source address has the
         * whole ephemeral range per destination. */
        setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
        if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
            close(fd);
            S.conn_failed++;
            c->st = ST_DEAD;
            return;
        }
    }
    struct sockaddr_in da = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)c->port)};
    inet_pton(AF_INET, opt.host, &da.sin_addr);
    c->fd = fd;
    c->st = ST_CONNECTING;
    c->t_start = now_ns();
    c->in_len = c->out_len = c->out_off = 0;
    c->want_out = 0;
    c->frag_has = 0;
    c->http_pending = 0;
    c->http_closing = 0;
    if (c->kind != K_CHURN)
        n_inflight++;
    struct epoll_event ev = {.events = EPOLLOUT, .data.ptr = c};
    if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
        die("epoll_ctl");
    if (connect(fd, (struct sockaddr *)&da, sizeof da) < 0 &&
        errno != EINPROGRESS)
        conn_kill(c, 1);
}

static void send_upgrade(struct conn *c)
{
    char req[512];
    int n;
    if (c->kind == K_PUB_REST) {
        c->st = ST_READY;
        n_inflight--;
        conn_events(c);
        if (!t_pub_start)
            S.conn_ok++;
        else if (opt.rate <= 0)
            publish_more(c, now_ns());
        return;
    }
    /* A fixed key is fine: the loader checks the accept value anyway.
     * --deflate offers what browsers offer. */
    n = snprintf(req, sizeof req,
                 "GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\n"
                 "Connection: Upgrade\r\n"
                 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                 "%s"
                 "Sec-WebSocket-Version: 13\r\n\r\n",
                 opt.path, opt.host, c->port,
                 opt.deflate ? "Sec-WebSocket-Extensions: permessage-deflate; "
                               "client_max_window_bits\r\n"
                             : "");
    c->st = ST_HS;
    queue_out(c, req, (size_t)n);
    conn_events(c);
    flush_out(c);
}

static int ws_publish(void)
{
    return opt.mode == MODE_PUSHER && opt.publish == PUB_WS;
}

/* bench[-ROOM]; private-bench[-ROOM] when publishing client events, which
 * Pusher allows on private and presence channels only. */
static void channel_name(int room, char *ch, size_t n)
{
    const char *prefix = opt.channel ? opt.channel
                         : ws_publish() ? "private-bench" : "bench";
    if (opt.rooms <= 1)
        snprintf(ch, n, "%s", prefix);
    else
        snprintf(ch, n, "%s-%d", prefix, room);
}

/* A ws publisher's rooms: with P publishers and R rooms, publisher p takes
 * p, p + P, p + 2P, ... (one room, p mod R, when P >= R), so together they
 * go round-robin over every room and each subscribes only to its own. */
static int pub_nrooms(const struct conn *c)
{
    if (opt.pubs >= opt.rooms)
        return 1;
    return (opt.rooms - c->pub_no + opt.pubs - 1) / opt.pubs;
}

static int pub_room(const struct conn *c, uint64_t j)
{
    if (opt.pubs >= opt.rooms)
        return c->pub_no % opt.rooms;
    return c->pub_no + (int)(j % (uint64_t)pub_nrooms(c)) * opt.pubs;
}

static void hexs(const unsigned char *d, unsigned n, char *out);

/* Queues pusher:subscribe for one channel; private channels carry
 * "<key>:<hex HMAC-SHA256(secret, socket_id:channel)>", docs/PROTOCOL.md 3.3 */
static void queue_subscribe(struct conn *c, int room)
{
    char m[768], ch[64], auth[512] = "", sig_in[128], sigh[65];
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdl = 0;
    channel_name(room, ch, sizeof ch);
    if (ws_publish() || strncmp(ch, "private-", 8) == 0) {
        int sl = snprintf(sig_in, sizeof sig_in, "%s:%s", c->socket_id, ch);
        HMAC(EVP_sha256(), opt.secret, (int)strlen(opt.secret),
             (unsigned char *)sig_in, (size_t)sl, md, &mdl);
        hexs(md, mdl, sigh);
        snprintf(auth, sizeof auth, "%s:%s", opt.key, sigh);
    }
    int n = snprintf(m, sizeof m,
                     "{\"event\":\"pusher:subscribe\",\"data\":{\"channel\":"
                     "\"%s\",\"auth\":\"%s\"}}",
                     ch, auth);
    queue_frame(c, 1, m, (size_t)n);
}

/* Subscribers join their room; a ws publisher joins every room it
 * publishes to (a client event needs the sender subscribed). */
static void subscribe(struct conn *c)
{
    c->st = ST_WAIT_SUB;
    if (c->kind == K_PUB_WS) {
        c->subs_waiting = pub_nrooms(c);
        for (int j = 0; j < c->subs_waiting; j++)
            queue_subscribe(c, pub_room(c, (uint64_t)j));
    } else {
        c->subs_waiting = 1;
        queue_subscribe(c, c->room);
    }
    flush_out(c);
}

/* Copies the socket_id ("123.456") out of connection_established, whose
 * data is a JSON string: ...\"socket_id\":\"123.456\"... */
static int parse_socket_id(struct conn *c, const unsigned char *p, size_t n)
{
    const unsigned char *a = memmem(p, n, "socket_id", 9);
    if (!a)
        return 0;
    const unsigned char *e = p + n;
    a += 9;
    while (a < e && !isdigit(*a))
        a++;
    size_t k = 0;
    while (a < e && (isdigit(*a) || *a == '.') && k < sizeof c->socket_id - 1)
        c->socket_id[k++] = (char)*a++;
    c->socket_id[k] = 0;
    return k > 0;
}

static void became_ready(struct conn *c)
{
    if (c->kind == K_CHURN) {
        /* One round trip, then close: pusher:ping in Pusher mode, a
         * WebSocket ping in raw mode. */
        c->st = ST_WAIT_PONG;
        if (opt.mode == MODE_PUSHER) {
            static const char p[] = "{\"event\":\"pusher:ping\",\"data\":{}}";
            send_text(c, p, sizeof p - 1);
        } else {
            queue_frame(c, 9, "x", 1);
            flush_out(c);
        }
        return;
    }
    c->st = ST_READY;
    n_inflight--;
    S.conn_ok++;
    if (is_reader(c))
        room_readers[c->room]++;
    if (c->kind == K_SLOW) {
        S.slow_total++;
        conn_events(c);
    }
    if (c->kind == K_PUB_WS && opt.mode == MODE_RAW)
        send_text(c, "pub", 3);
}

static void churn_done(struct conn *c)
{
    uint64_t t = now_ns();
    if (in_window(t)) {
        S.churn_cycles++;
        hist_add(&S.churn_lat, t - c->t_start);
    }
    static const unsigned char cl[] = {0x03, 0xe8};
    queue_frame(c, 8, cl, 2);
    flush_out(c);
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    c->fd = -1;
    c->st = ST_DEAD;
}

/* ---- delivery accounting */

/* Reads "@<seq>:<t_ns>:" from the head of a payload. */
static int parse_stamp(const unsigned char *p, size_t n, uint64_t *seqp,
                       uint64_t *tp)
{
    /* The stamp follows {"event":..,"channel":..,"data":" at most. */
    const unsigned char *a = memchr(p, '@', n < 128 ? n : 128);
    if (!a)
        return 0;
    const unsigned char *e = p + n;
    uint64_t seq = 0, t = 0;
    a++;
    while (a < e && isdigit(*a))
        seq = seq * 10 + (uint64_t)(*a++ - '0');
    if (a >= e || *a != ':')
        return 0;
    a++;
    while (a < e && isdigit(*a))
        t = t * 10 + (uint64_t)(*a++ - '0');
    *seqp = seq;
    *tp = t;
    return 1;
}

static int refill_pending;

/* Latency per --sub-ports entry, so a driver can compare the subscribers
 * of several servers measured at the same moment. */
static struct hist *lat_by_port;

static void record_delivery(const struct conn *c, uint64_t seq, uint64_t t,
                            uint64_t now)
{
    S.deliveries_all++;
    if (in_window(now)) {
        S.deliveries++;
        S.wire_bytes += cur_wire;
        if (cur_rsv1)
            S.rsv1_deliveries++;
        hist_add(&S.lat, now > t ? now - t : 0);
        if (lat_by_port)
            hist_add(&lat_by_port[c->port_idx], now > t ? now - t : 0);
    }
    struct slot *s = &slots[seq & (SLOTS - 1)];
    if (s->live && s->seq == seq && ++s->got >= s->expected) {
        s->live = 0;
        struct conn *pc = &conns[s->pub];
        if (pc->outstanding)
            pc->outstanding--;
        /* Refill after the whole read (run_refills), not per message: the
         * places one read frees go out in one write. */
        if (opt.rate <= 0 && pc->st == ST_READY) {
            pc->refill = 1;
            refill_pending = 1;
        }
    }
}

/* Handles one complete text/binary message from the server. */
static void on_message(struct conn *c, const unsigned char *p, size_t n,
                       uint64_t now)
{
    if (opt.mode == MODE_PUSHER && c->st != ST_READY) {
        if (c->st == ST_WAIT_EST &&
            memmem(p, n, "pusher:connection_established", 29)) {
            /* The socket_id signs private subscriptions. */
            if (!parse_socket_id(c, p, n) &&
                (ws_publish() || (opt.channel &&
                                  strncmp(opt.channel, "private-", 8) == 0))) {
                errno = EPROTO;
                conn_kill(c, 1);
            } else if (c->kind == K_PUB_WS && !ws_publish()) {
                became_ready(c);
            } else {
                if (opt.resume && c->kind != K_PUB_WS) {
                    /* Queued before the subscribe: one write carries both,
                     * and the hub reads the resume first. */
                    static const char r[] =
                        "{\"event\":\"lubdub:resume\",\"data\":{\"v\":1,"
                        "\"channels\":{}}}";
                    queue_frame(c, 1, r, sizeof r - 1);
                }
                subscribe(c);
            }
        } else if (c->st == ST_WAIT_SUB &&
                   memmem(p, n, "subscription_succeeded", 22)) {
            if (--c->subs_waiting <= 0)
                became_ready(c);
        } else if (c->st == ST_WAIT_SUB &&
                   (memmem(p, n, "subscription_error", 18) ||
                    memmem(p, n, "pusher:error", 12))) {
            fprintf(stderr, "loadgen: subscribe refused: %.*s\n",
                    (int)(n < 300 ? n : 300), (const char *)p);
            errno = EACCES;
            conn_kill(c, 1);
        } else if (c->st == ST_WAIT_PONG && memmem(p, n, "pusher:pong", 11)) {
            churn_done(c);
        }
        return;
    }
    if (opt.mode == MODE_PUSHER && n < 80 && memmem(p, n, "pusher:ping", 11)) {
        static const char pong[] = "{\"event\":\"pusher:pong\",\"data\":{}}";
        send_text(c, pong, sizeof pong - 1);
        return;
    }
    if (opt.mode == MODE_RAW && c->st == ST_WAIT_SUB) {
        if (n == 10 && memcmp(p, "subscribed", 10) == 0) {
            became_ready(c);
        } else {
            errno = EPROTO;
            conn_kill(c, 1);
        }
        return;
    }
    uint64_t seq, t;
    if (draining)
        return;
    if (!cur_rsv1 && opt.mode == MODE_PUSHER && n >= 20 &&
        memcmp(p, "{\"event\":\"lubdub:id\"", 20) == 0) {
        /* A recovery marker: the next event's id, not a delivery. */
        if (c->st == ST_READY && in_window(now)) {
            S.markers++;
            S.marker_bytes += cur_wire;
        }
        return;
    }
    if (c->kind == K_PUB_WS && opt.mode == MODE_PUSHER) {
        /* A publisher is not a reader. It gets the other publishers'
         * events when it shares a room with them, never its own: client
         * events are not echoed to their sender. Errors (rate limit,
         * refusal) are counted. */
        if (parse_stamp(p, n, &seq, &t)) {
            const struct slot *s = &slots[seq & (SLOTS - 1)];
            if (s->seq == seq && s->pub == (int)(c - conns))
                S.echoes++;
        } else if (memmem(p, n, "pusher:error", 12) && S.pub_errors++ == 0)
            fprintf(stderr, "loadgen: publisher got: %.*s\n",
                    (int)(n < 300 ? n : 300), (const char *)p);
        return;
    }
    if (c->st == ST_READY && payload) {
        /* No stamp: the k-th event since ready is publication k. Pusher
         * protocol messages (pusher:*, pusher_internal:*) are not events. */
        if (!cur_rsv1 && opt.mode == MODE_PUSHER &&
            n >= 17 && memcmp(p, "{\"event\":\"pusher", 16) == 0)
            return;
        if (!cur_rsv1 && (n != expect_len || memcmp(p, expect, n) != 0) &&
            S.payload_mismatch++ == 0)
            fprintf(stderr, "loadgen: unexpected payload: %.*s\n",
                    (int)(n < 300 ? n : 300), (const char *)p);
        seq = ++c->rx_count;
        const struct slot *s = &slots[seq & (SLOTS - 1)];
        record_delivery(c, seq, s->seq == seq ? s->t_sent : now, now);
        return;
    }
    if (c->st == ST_READY && parse_stamp(p, n, &seq, &t))
        record_delivery(c, seq, t, now);
}

/* A compressed message of a connection's setup, inflated (RFC 7692 7.2.2:
 * the 00 00 ff ff tail appended) into a buffer reused by every call;
 * NULL when it does not inflate. Setup messages only: deliveries are
 * counted, never inflated. */
static const unsigned char *inflate_setup(const unsigned char *d, size_t n,
                                          size_t *out_len)
{
    static unsigned char out[64 * 1024];
    static const unsigned char tail[4] = {0, 0, 0xff, 0xff};
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, -15) != Z_OK)
        return NULL;
    z.next_out = out;
    z.avail_out = sizeof out;
    z.next_in = (unsigned char *)d;
    z.avail_in = (unsigned)n;
    int rc = inflate(&z, Z_SYNC_FLUSH);
    if (rc == Z_OK || rc == Z_BUF_ERROR) {
        z.next_in = (unsigned char *)tail;
        z.avail_in = 4;
        rc = inflate(&z, Z_SYNC_FLUSH);
    }
    *out_len = sizeof out - z.avail_out;
    inflateEnd(&z);
    return rc == Z_OK || rc == Z_BUF_ERROR || rc == Z_STREAM_END ? out : NULL;
}

/* Parses as many complete frames as buf holds; returns bytes consumed. */
static size_t parse_frames(struct conn *c, unsigned char *buf, size_t len,
                           uint64_t now)
{
    size_t off = 0;
    while (c->st != ST_DEAD && len - off >= 2) {
        unsigned char *f = buf + off;
        int fin = f[0] & 0x80, op = f[0] & 0x0f, masked = f[1] & 0x80;
        uint64_t pl = f[1] & 0x7f;
        size_t hl = 2;
        if (pl == 126) {
            if (len - off < 4)
                break;
            pl = ((uint64_t)f[2] << 8) | f[3];
            hl = 4;
        } else if (pl == 127) {
            if (len - off < 10)
                break;
            pl = 0;
            for (int i = 0; i < 8; i++)
                pl = (pl << 8) | f[2 + i];
            hl = 10;
        }
        if (masked)
            hl += 4;
        if (pl > (64u << 20)) {
            S.bad_frames++;
            conn_kill(c, 1);
            return len;
        }
        if (len - off < hl + pl)
            break;
        unsigned char *d = f + hl;
        if (masked)
            for (uint64_t i = 0; i < pl; i++)
                d[i] ^= f[hl - 4 + (i & 3)];
        off += hl + (size_t)pl;
        cur_wire = hl + (size_t)pl;
        cur_rsv1 = (f[0] & 0x40) != 0;
        switch (op) {
        case 0x1:
        case 0x2:
            if (fin && cur_rsv1 && c->st != ST_READY) {
                size_t il;
                const unsigned char *in = inflate_setup(d, (size_t)pl, &il);
                if (!in) {
                    S.bad_frames++;
                    errno = EPROTO;
                    conn_kill(c, 1);
                    return len;
                }
                cur_rsv1 = 0;
                on_message(c, in, il, now);
            } else if (fin) {
                on_message(c, d, (size_t)pl, now);
            } else {
                /* Keep only the first fragment's stamp; count at FIN. */
                c->frag_has = c->st == ST_READY &&
                               parse_stamp(d, (size_t)pl, &c->frag_seq,
                                           &c->frag_t);
            }
            break;
        case 0x0:
            if (fin && c->frag_has) {
                c->frag_has = 0;
                record_delivery(c, c->frag_seq, c->frag_t, now);
            }
            break;
        case 0x8:
            conn_kill(c, 1);
            return len;
        case 0x9: {
            unsigned char cp[125];
            size_t k = pl < sizeof cp ? (size_t)pl : sizeof cp;
            memcpy(cp, d, k);
            queue_frame(c, 0xA, cp, k);
            flush_out(c);
            break;
        }
        case 0xA:
            if (c->st == ST_WAIT_PONG)
                churn_done(c);
            break;
        default:
            S.bad_frames++;
        }
    }
    return off;
}

/* Parses the 101 response; returns bytes consumed or 0 if incomplete. */
static size_t parse_upgrade(struct conn *c, unsigned char *buf, size_t len)
{
    unsigned char *e = memmem(buf, len, "\r\n\r\n", 4);
    if (!e)
        return 0;
    if (len < 12 || memcmp(buf + 9, "101", 3) != 0 ||
        !memmem(buf, (size_t)(e - buf), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", 28)) {
        conn_kill(c, 1);
        return len;
    }
    c->pmd = opt.deflate && memmem(buf, (size_t)(e - buf),
                                   "permessage-deflate", 18) != NULL;
    if (c->pmd && c->kind == K_SUB)
        S.pmd_sessions++;
    if (opt.mode == MODE_PUSHER) {
        c->st = ST_WAIT_EST;
    } else if (opt.rooms > 1 && (c->kind == K_SUB || c->kind == K_SLOW)) {
        /* Raw rooms (raw_single): join one room, ready at its answer. */
        char m[32];
        int k = snprintf(m, sizeof m, "sub %d", c->room);
        c->st = ST_WAIT_SUB;
        queue_frame(c, 1, m, (size_t)k);
        flush_out(c);
    } else {
        became_ready(c);
    }
    return (size_t)(e - buf) + 4;
}

/* ---- REST publisher: signed POST /apps/ID/events, pipelined */
static void hexs(const unsigned char *d, unsigned n, char *out)
{
    static const char hx[] = "0123456789abcdef";
    for (unsigned i = 0; i < n; i++) {
        out[2 * i] = hx[d[i] >> 4];
        out[2 * i + 1] = hx[d[i] & 15];
    }
    out[2 * n] = 0;
}

static void rest_publish(struct conn *c, const char *ch, const char *name,
                         const char *data, uint64_t seq)
{
    char q[256], sig_in[512], md5h[33], sigh[65];
    char *body = rest_body;
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdl = 0;
    int bl = snprintf(body, rest_body_cap,
                      "{\"name\":\"%s\",\"channels\":[\"%s\"],\"data\":\"%s\"}",
                      name, ch, data);
    EVP_Digest(body, (size_t)bl, md, &mdl, EVP_md5(), NULL);
    hexs(md, mdl, md5h);
    snprintf(q, sizeof q,
             "auth_key=%s&auth_timestamp=%ld&auth_version=1.0&body_md5=%s",
             opt.key, (long)time(NULL), md5h);
    int sl = snprintf(sig_in, sizeof sig_in, "POST\n/apps/%s/events\n%s",
                      opt.app_id, q);
    HMAC(EVP_sha256(), opt.secret, (int)strlen(opt.secret),
         (unsigned char *)sig_in, (size_t)sl, md, &mdl);
    hexs(md, mdl, sigh);
    char hdr[768];
    int hl = snprintf(hdr, sizeof hdr,
                      "POST /apps/%s/events?%s&auth_signature=%s HTTP/1.1\r\n"
                      "Host: %s:%d\r\nContent-Type: application/json\r\n"
                      "Content-Length: %d\r\n\r\n",
                      opt.app_id, q, sigh, opt.host, c->port, bl);
    queue_out(c, hdr, (size_t)hl);
    queue_out(c, body, (size_t)bl);
    c->http_pending++;
    if (c->pend_n == c->pend_cap) {
        unsigned nc = c->pend_cap ? c->pend_cap * 2 : 64;
        uint64_t *np = malloc(nc * sizeof *np);
        if (!np)
            die("malloc");
        for (unsigned i = 0; i < c->pend_n; i++)
            np[i] = c->pend[(c->pend_head + i) % c->pend_cap];
        free(c->pend);
        c->pend = np;
        c->pend_cap = nc;
        c->pend_head = 0;
    }
    c->pend[(c->pend_head + c->pend_n++) % c->pend_cap] = seq;
}

/* Consumes complete HTTP responses; returns bytes consumed. */
static size_t parse_http(struct conn *c, unsigned char *buf, size_t len)
{
    size_t off = 0;
    for (;;) {
        unsigned char *b = buf + off;
        size_t l = len - off;
        unsigned char *e = memmem(b, l, "\r\n\r\n", 4);
        if (!e)
            break;
        size_t hlen = (size_t)(e - b) + 4;
        size_t clen = 0;
        unsigned char *cl = memmem(b, hlen, "ontent-Length:", 14);
        if (!cl)
            cl = memmem(b, hlen, "ontent-length:", 14);
        if (cl)
            clen = strtoul((char *)cl + 14, NULL, 10);
        if (l < hlen + clen)
            break;
        if (memmem(b, hlen, "onnection: close", 16) ||
            memmem(b, hlen, "onnection: Close", 16))
            c->http_closing = 1;
        if (l >= 12 && memcmp(b + 9, "200", 3) == 0) {
            S.http_ok++;
        } else {
            if (S.http_err++ == 0)
                fprintf(stderr, "loadgen: REST error: %.*s\n",
                        (int)(hlen + clen < 300 ? hlen + clen : 300), b);
        }
        if (c->http_closing)
            rest_mode = REST_ONE_PER_CONN;
        else if (rest_mode == REST_UNKNOWN)
            rest_mode = REST_KEEPALIVE;
        if (c->http_pending)
            c->http_pending--;
        if (c->pend_n) {
            c->pend_head = (c->pend_head + 1) % c->pend_cap;
            c->pend_n--;
        }
        off += hlen + clen;
    }
    return off;
}

static int n_pub_conns;
static int *pub_conn_idx;
static void publish_one(struct conn *c, uint64_t now)
{
    char *data = pub_data;
    uint64_t seq = next_seq++;
    int room = c->kind == K_PUB_WS && (ws_publish() || opt.mode == MODE_RAW)
                   ? pub_room(c, c->pub_rr++)
                   : (int)(seq % (uint64_t)opt.rooms);
    int n = snprintf(data, 64, "@%" PRIu64 ":%" PRIu64 ":", seq, now);
    if (payload) {
        n = 0; /* the fixed message below carries no stamp */
    } else if (n < opt.size) {
        int pad = opt.size - n;
        memcpy(data + n, padding, (size_t)pad);
        n += pad;
        data[n] = 0;
    }
    struct slot *s = &slots[seq & (SLOTS - 1)];
    if (s->live && s->pub >= 0 && conns[s->pub].outstanding)
        conns[s->pub].outstanding--;
    s->seq = seq;
    s->t_sent = now;
    s->got = 0;
    s->expected = (uint32_t)room_readers[room];
    s->pub = (int)(c - conns);
    s->live = s->expected > 0;
    if (s->live)
        c->outstanding++;
    S.published++;
    if (c->kind == K_PUB_REST) {
        char ch[64];
        channel_name(room, ch, sizeof ch);
        rest_publish(c, ch, payload ? pl_event : "b", payload ? pl_data : data,
                     seq);
    } else if (payload) {
        queue_frame(c, 1, payload, payload_len);
    } else if (ws_publish()) {
        /* A client event; the data string needs no escaping (digits,
         * ':', '@' and 'x' padding). */
        char ch[64];
        channel_name(room, ch, sizeof ch);
        int bl = snprintf(rest_body, rest_body_cap,
                          "{\"event\":\"client-bench\",\"channel\":\"%s\","
                          "\"data\":\"%s\"}",
                          ch, data);
        queue_frame(c, 1, rest_body, (size_t)bl);
    } else if (opt.rooms > 1) {
        /* Raw rooms: "r<room> " names the room; the server sends what
         * follows it, so subscribers get the same payload as without. */
        int bl = snprintf(rest_body, rest_body_cap, "r%d %s", room, data);
        queue_frame(c, 1, rest_body, (size_t)bl);
    } else if (opt.raw_envelope) {
        /* The bytes the hub sends for the client event above. */
        int bl = snprintf(rest_body, rest_body_cap,
                          "{\"event\":\"client-bench\",\"channel\":"
                          "\"private-bench\",\"data\":\"%s\"}",
                          data);
        queue_frame(c, 1, rest_body, (size_t)bl);
    } else {
        queue_frame(c, 1, data, (size_t)n);
    }
}

/* Closed loop: publishers whose window places were freed by the read just
 * handled send again, all the new messages in one write each. */
static void run_refills(uint64_t now)
{
    if (!refill_pending)
        return;
    refill_pending = 0;
    for (int i = 0; i < n_pub_conns; i++) {
        struct conn *c = &conns[pub_conn_idx[i]];
        if (c->refill) {
            c->refill = 0;
            publish_more(c, now);
        }
    }
}

static void publish_more(struct conn *c, uint64_t now)
{
    if (!t_pub_start || now >= S.w_end || c->st != ST_READY)
        return;
    int sent = 0;
    /* Keep the kernel buffer, not our own, as the queue: stop adding while
     * earlier bytes are still waiting. */
    while (c->outstanding < (uint64_t)opt.window && c->out_len < (1u << 20) &&
           (c->kind != K_PUB_REST ||
            (c->http_pending < (uint64_t)(opt.rest_inflight > 0
                                              ? opt.rest_inflight
                                              : opt.window) &&
             !c->http_closing))) {
        /* A server that closes after each response (soketi does) gets one
         * request per connection; the publisher reconnects. */
        if (c->kind == K_PUB_REST && rest_mode != REST_KEEPALIVE &&
            c->http_pending)
            break;
        publish_one(c, now);
        sent++;
    }
    if (sent)
        flush_out(c);
}

/* Open loop: sends what the schedule says is due, spread over publishers. */
static void open_loop_tick(uint64_t now)
{
    static uint64_t sent;
    if (!t_pub_start || now >= S.w_end || n_pub_conns == 0)
        return;
    uint64_t due = (uint64_t)((double)(now - t_pub_start) / 1e9 * opt.rate);
    static int rr;
    while (sent < due) {
        struct conn *c = &conns[pub_conn_idx[rr++ % n_pub_conns]];
        if (c->st != ST_READY)
            break;
        if (c->out_len > (4u << 20))
            break; /* the server is not reading: do not grow without bound */
        publish_one(c, now);
        sent++;
    }
    for (int i = 0; i < n_pub_conns; i++)
        flush_out(&conns[pub_conn_idx[i]]);
}

static void expire_slots(uint64_t now)
{
    for (unsigned i = 0; i < SLOTS; i++) {
        struct slot *s = &slots[i];
        if (s->live && now - s->t_sent > (uint64_t)(opt.msg_timeout * 1e9)) {
            s->live = 0;
            S.timeouts++;
            if (conns[s->pub].outstanding)
                conns[s->pub].outstanding--;
        }
    }
}

static void on_readable(struct conn *c, uint64_t now)
{
    for (int rounds = 0; rounds < 4 && c->st != ST_DEAD; rounds++) {
        ssize_t n = read(c->fd, rbuf, sizeof rbuf);
        if (n == 0) {
            errno = 0; /* the server closed */
            conn_kill(c, 1);
            return;
        }
        if (n < 0) {
            if (errno == EAGAIN)
                return;
            if (errno == EINTR)
                continue;
            conn_kill(c, 1);
            return;
        }
        if (rounds)
            now = now_ns(); /* a delivery is received when it is read */
        unsigned char *b = rbuf;
        size_t len = (size_t)n;
        if (c->in_len) {
            grow(&c->in, &c->in_cap, c->in_len + len);
            memcpy(c->in + c->in_len, rbuf, len);
            b = c->in;
            len = c->in_len + len;
        }
        size_t off = 0;
        if (c->st == ST_HS) {
            off = parse_upgrade(c, b, len);
            if (off == 0) {
                if (b == rbuf) {
                    grow(&c->in, &c->in_cap, len);
                    memcpy(c->in, rbuf, len);
                }
                c->in_len = len;
                continue;
            }
        }
        if (c->st == ST_DEAD)
            return;
        if (c->kind == K_PUB_REST)
            off += parse_http(c, b + off, len - off);
        else
            off += parse_frames(c, b + off, len - off, now);
        if (c->st == ST_DEAD)
            return;
        size_t rest = len - off;
        if (rest) {
            if (b == rbuf) {
                grow(&c->in, &c->in_cap, rest);
                memcpy(c->in, rbuf + off, rest);
            } else {
                memmove(c->in, c->in + off, rest);
            }
        }
        c->in_len = rest;
        if ((size_t)n < sizeof rbuf)
            return;
    }
}

static void on_event(struct conn *c, uint32_t ev, uint64_t now)
{
    if (c->st == ST_CONNECTING) {
        int err = 0;
        socklen_t l = sizeof err;
        getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &l);
        if (err || (ev & (EPOLLERR | EPOLLHUP))) {
            errno = err;
            conn_kill(c, 1);
            return;
        }
        send_upgrade(c);
        return;
    }
    if (c->kind == K_SLOW && c->st == ST_READY && !draining) {
        conn_kill(c, 1); /* the server gave up on it: that is the point */
        return;
    }
    if (ev & EPOLLOUT) {
        flush_out(c);
        if (c->st == ST_READY && opt.rate <= 0 &&
            (c->kind == K_PUB_WS || c->kind == K_PUB_REST))
            publish_more(c, now);
    }
    if (c->st != ST_DEAD && (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)))
        on_readable(c, now);
    if (c->kind == K_PUB_REST && c->st == ST_READY && opt.rate <= 0)
        publish_more(c, now);
    run_refills(now);
}

static long clk_tck;

/* The last proc_cpu_s() call's user share (utime), seconds. */
static double last_user_s;

static double proc_cpu_s(int pid)
{
    char path[64], buf[1024];
    if (pid)
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
    else
        snprintf(path, sizeof path, "/proc/self/stat");
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    unsigned long ut = 0, st = 0;
    /* Fields after the command: state(3) ... utime(14) stime(15). */
    if (sscanf(p + 2,
               "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
               &st) != 2)
        return -1;
    last_user_s = (double)ut / (double)clk_tck;
    return (double)(ut + st) / (double)clk_tck;
}

/* Busy jiffies per CPU from /proc/stat (total minus idle and iowait), so a
 * driver can tell a loader or server starved by some other process. */
#define MAX_CPUS 64
static int read_cpu_busy(unsigned long long *busy, unsigned long long *total)
{
    FILE *f = fopen("/proc/stat", "r");
    char line[512];
    int n = 0;
    if (!f)
        return 0;
    while (fgets(line, sizeof line, f) && n < MAX_CPUS) {
        unsigned long long v[8] = {0};
        int cpu;
        if (strncmp(line, "cpu", 3) != 0 || !isdigit((unsigned char)line[3]))
            continue;
        if (sscanf(line + 3, "%d %llu %llu %llu %llu %llu %llu %llu %llu",
                   &cpu, &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &v[6],
                   &v[7]) < 9)
            continue;
        unsigned long long t = 0;
        for (int i = 0; i < 8; i++)
            t += v[i];
        total[n] = t;
        busy[n] = t - v[3] - v[4];
        n++;
    }
    fclose(f);
    return n;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: loadgen [--mode pusher|raw] [--host H] [--port P] "
            "[--path /app/app-key]\n"
            "  [--subs N] [--pubs N] [--rooms R] [--size B] [--window W | "
            "--rate MSGS_PER_S]\n"
            "  [--warmup S] [--duration S] [--t0 MONOTONIC_NS] [--batch N] "
            "[--src-ips K]\n"
            "  [--slow-pct P] [--churn N] [--server-pid PID] "
            "[--setup-timeout S]\n"
            "  [--msg-timeout S] [--publish rest|ws] [--rest-inflight N] "
            "[--quiet]\n"
            "  [--sub-ports P1,P2,..] [--pub-ports P1,..] [--channel NAME]\n"
            "  [--deflate] [--payload FILE] [--raw-envelope] [--resume]\n"
            "  --deflate: offer permessage-deflate; --payload FILE: publish "
            "that fixed\n"
            "  message (raw) or Pusher event (pusher, REST); --raw-envelope: "
            "raw mode\n"
            "  sends the hub's client-event frame around the stamp; --resume: "
            "subscribers\n"
            "  send lubdub:resume after connection_established (markers "
            "counted)\n"
            "  --server-pid takes a comma list too (CPU seconds summed)\n"
            "  --sub-ports/--pub-ports: subscriber (publisher) i talks to "
            "port i mod n\n"
            "  --rest-inflight N: at most N REST requests in flight per "
            "keep-alive\n"
            "  connection (1: no pipelining, like an HTTP agent; default: "
            "the window)\n"
            "  --publish ws (pusher mode): client events on private-bench "
            "from WebSocket\n"
            "  publishers; the server must allow client events without a "
            "rate limit\n");
    exit(2);
}

/* "1,2,3" into out[]; at most max numbers, each > 0, or usage(). */
static int parse_list(const char *s, int *out, int max)
{
    int n = 0;
    while (*s) {
        char *e;
        long v = strtol(s, &e, 10);
        if (e == s || v <= 0 || v > 0x7fffffff || n == max ||
            (*e && *e != ','))
            usage();
        out[n++] = (int)v;
        s = *e ? e + 1 : e;
    }
    if (n == 0)
        usage();
    return n;
}

static void parse_args(int argc, char **argv)
{
    static const struct option lo[] = {
        {"mode", 1, 0, 'm'},      {"host", 1, 0, 'H'},
        {"port", 1, 0, 'p'},      {"path", 1, 0, 'P'},
        {"subs", 1, 0, 's'},      {"pubs", 1, 0, 'u'},
        {"rooms", 1, 0, 'r'},     {"size", 1, 0, 'z'},
        {"window", 1, 0, 'w'},    {"rate", 1, 0, 'R'},
        {"warmup", 1, 0, 'W'},    {"duration", 1, 0, 'd'},
        {"t0", 1, 0, 'T'},        {"batch", 1, 0, 'b'},
        {"src-ips", 1, 0, 'i'},   {"slow-pct", 1, 0, 'l'},
        {"churn", 1, 0, 'c'},     {"server-pid", 1, 0, 'S'},
        {"setup-timeout", 1, 0, 'o'}, {"quiet", 0, 0, 'q'},
        {"msg-timeout", 1, 0, 'M'}, {"publish", 1, 0, 'B'},
        {"rest-inflight", 1, 0, 'I'},
        {"sub-ports", 1, 0, 'x'}, {"pub-ports", 1, 0, 'y'},
        {"channel", 1, 0, 'C'},
        {"deflate", 0, 0, 'D'},   {"payload", 1, 0, 'F'},
        {"raw-envelope", 0, 0, 'E'}, {"resume", 0, 0, 'Z'},
        {"help", 0, 0, 'h'},      {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (ch) {
        case 'm':
            if (!strcmp(optarg, "raw"))
                opt.mode = MODE_RAW;
            else if (!strcmp(optarg, "pusher"))
                opt.mode = MODE_PUSHER;
            else
                usage();
            break;
        case 'H': opt.host = optarg; break;
        case 'p': opt.port = atoi(optarg); break;
        case 'P': opt.path = optarg; break;
        case 's': opt.subs = atoi(optarg); break;
        case 'u': opt.pubs = atoi(optarg); break;
        case 'r': opt.rooms = atoi(optarg); break;
        case 'z': opt.size = atoi(optarg); break;
        case 'w': opt.window = atoi(optarg); break;
        case 'R': opt.rate = atof(optarg); break;
        case 'W': opt.warmup = atof(optarg); break;
        case 'd': opt.duration = atof(optarg); break;
        case 'T': opt.t0 = strtoull(optarg, NULL, 10); break;
        case 'b': opt.batch = atoi(optarg); break;
        case 'i': opt.src_ips = atoi(optarg); break;
        case 'l': opt.slow_pct = atof(optarg); break;
        case 'c': opt.churn = atoi(optarg); break;
        case 'S': opt.n_server_pids = parse_list(optarg, opt.server_pid,
                                                 MAX_PIDS); break;
        case 'x': opt.n_sub_ports = parse_list(optarg, opt.sub_ports,
                                               MAX_PORTS); break;
        case 'y': opt.n_pub_ports = parse_list(optarg, opt.pub_ports,
                                               MAX_PORTS); break;
        case 'C': opt.channel = optarg; break;
        case 'D': opt.deflate = 1; break;
        case 'F': opt.payload_file = optarg; break;
        case 'E': opt.raw_envelope = 1; break;
        case 'Z': opt.resume = 1; break;
        case 'o': opt.setup_timeout = atof(optarg); break;
        case 'q': opt.quiet = 1; break;
        case 'M': opt.msg_timeout = atof(optarg); break;
        case 'I': opt.rest_inflight = atoi(optarg); break;
        case 'B':
            if (!strcmp(optarg, "ws"))
                opt.publish = PUB_WS;
            else if (!strcmp(optarg, "rest"))
                opt.publish = PUB_REST;
            else
                usage();
            break;
        default: usage();
        }
    }
    if (opt.rooms < 1 || opt.size < 0 || opt.size > (1 << 20) || opt.window < 1 ||
        opt.subs < 0 || opt.pubs < 0 || opt.batch < 1 ||
        opt.subs + opt.pubs > 19900 || opt.churn > 1000 ||
        (opt.mode == MODE_RAW && (opt.rooms > 65536 ||
                                  (opt.rooms > 1 && opt.churn)))) {
        fprintf(stderr, "loadgen: bad option values (subs+pubs <= 19900, "
                        "size <= 1 MiB, raw mode: rooms <= 65536 and no "
                        "churn with rooms)\n");
        exit(2);
    }
    if (opt.payload_file && opt.mode == MODE_PUSHER && opt.publish != PUB_REST) {
        fprintf(stderr, "loadgen: --payload in pusher mode publishes through "
                        "REST (the event name is the file's)\n");
        exit(2);
    }
    if (opt.raw_envelope && opt.mode != MODE_RAW) {
        fprintf(stderr, "loadgen: --raw-envelope is for raw mode\n");
        exit(2);
    }
    if (opt.resume && opt.mode != MODE_PUSHER) {
        fprintf(stderr, "loadgen: --resume is for pusher mode\n");
        exit(2);
    }
}

/* The JSON string value of "key" in j, still escaped, without its quotes;
 * NULL when absent. */
static char *json_str_field(const char *j, size_t n, const char *key,
                            size_t *len)
{
    char pat[32];
    int pl = snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *a = memmem(j, n, pat, (size_t)pl), *e = j + n;
    if (!a)
        return NULL;
    a += pl;
    const char *b = a;
    while (b < e && *b != '"')
        b += *b == '\\' ? 2 : 1;
    if (b >= e)
        return NULL;
    char *out = malloc((size_t)(b - a) + 1);
    if (!out)
        die("malloc");
    memcpy(out, a, (size_t)(b - a));
    out[b - a] = 0;
    *len = (size_t)(b - a);
    return out;
}

/* --payload FILE: the fixed message, and in Pusher mode its event name,
 * data string and channel, and the frame the server should send. */
static void load_payload(void)
{
    FILE *f = fopen(opt.payload_file, "rb");
    if (!f)
        die(opt.payload_file);
    payload = malloc((1u << 20) + 1);
    if (!payload)
        die("malloc");
    payload_len = fread(payload, 1, 1u << 20, f);
    fclose(f);
    while (payload_len && (payload[payload_len - 1] == '\n' ||
                           payload[payload_len - 1] == '\r'))
        payload_len--; /* a trailing newline is the file's, not the event's */
    payload[payload_len] = 0;
    expect = payload;
    expect_len = payload_len;
    if (opt.mode != MODE_PUSHER)
        return;
    size_t chl;
    char *ch = json_str_field(payload, payload_len, "channel", &chl);
    pl_event = json_str_field(payload, payload_len, "event", &pl_event_len);
    pl_data = json_str_field(payload, payload_len, "data", &pl_data_len);
    if (!pl_event || !pl_data || !ch) {
        fprintf(stderr, "loadgen: %s: no event, channel or data string\n",
                opt.payload_file);
        exit(2);
    }
    if (!opt.channel)
        opt.channel = ch;
    expect_len = strlen(opt.channel) + pl_event_len + pl_data_len + 40;
    expect = malloc(expect_len);
    if (!expect)
        die("malloc");
    expect_len = (size_t)snprintf(expect, expect_len,
                                  "{\"event\":\"%s\",\"channel\":\"%s\","
                                  "\"data\":\"%s\"}",
                                  pl_event, opt.channel, pl_data);
}

static unsigned long long cb0[MAX_CPUS], ct0[MAX_CPUS], cb1[MAX_CPUS],
    ct1[MAX_CPUS];
static int ncpu0, ncpu1;

static double server_cpu_each[MAX_PIDS];
/* User CPU seconds of every --server-pid over the window (the rest of
 * server_cpu_s is system time: the kernel's send path, mostly). */
static double server_user_s;

/* Sums the CPU seconds of every --server-pid into each[]; -1 if one is
 * unreadable (gone). */
static double servers_cpu_s(double *each)
{
    double sum = 0, user = 0;
    for (int i = 0; i < opt.n_server_pids; i++) {
        each[i] = proc_cpu_s(opt.server_pid[i]);
        if (each[i] < 0)
            return -1;
        sum += each[i];
        user += last_user_s;
    }
    server_user_s = user - server_user_s; /* start, then end - start */
    return sum;
}

static void print_json(double loader_cpu, double server_cpu, double win_s)
{
    printf("{\"mode\":\"%s\",\"subs\":%d,\"pubs\":%d,\"rooms\":%d,"
           "\"size\":%d,\"window\":%d,\"rate\":%.0f,\"publish\":\"%s\",",
           opt.mode == MODE_RAW ? "raw" : "pusher", opt.subs, opt.pubs,
           opt.rooms, opt.size, opt.window, opt.rate,
           opt.mode == MODE_RAW ? "ws" : ws_publish() ? "client-event"
                                                       : "rest");
    printf("\"conn_ok\":%" PRIu64 ",\"conn_failed\":%" PRIu64
           ",\"sub_closed\":%" PRIu64 ",\"slow_total\":%" PRIu64
           ",\"slow_closed\":%" PRIu64 ",",
           S.conn_ok, S.conn_failed, S.sub_closed, S.slow_total,
           S.slow_closed);
    printf("\"published\":%" PRIu64 ",\"deliveries\":%" PRIu64
           ",\"deliveries_all\":%" PRIu64 ",\"timeouts\":%" PRIu64
           ",\"http_ok\":%" PRIu64 ",\"http_err\":%" PRIu64
           ",\"bad_frames\":%" PRIu64 ",\"rest_reconnects\":%" PRIu64
           ",\"rest_lost\":%" PRIu64 ",\"pub_errors\":%" PRIu64
           ",\"echoes\":%" PRIu64 ",\"pmd_sessions\":%" PRIu64
           ",\"wire_bytes\":%" PRIu64 ",\"rsv1_deliveries\":%" PRIu64
           ",\"payload_mismatch\":%" PRIu64 ",\"markers\":%" PRIu64
           ",\"marker_bytes\":%" PRIu64 ",",
           S.published, S.deliveries, S.deliveries_all, S.timeouts,
           S.http_ok, S.http_err, S.bad_frames, S.rest_reconnects,
           S.rest_lost, S.pub_errors, S.echoes, S.pmd_sessions, S.wire_bytes,
           S.rsv1_deliveries, S.payload_mismatch, S.markers, S.marker_bytes);
    printf("\"window_s\":%.3f,\"deliveries_per_s\":%.1f,", win_s,
           win_s > 0 ? (double)S.deliveries / win_s : 0.0);
    printf("\"lat_us\":{\"p50\":%.1f,\"p99\":%.1f,\"p999\":%.1f,"
           "\"max\":%.1f},",
           hist_pct(&S.lat, 50) / 1e3, hist_pct(&S.lat, 99) / 1e3,
           hist_pct(&S.lat, 99.9) / 1e3, S.lat.max / 1e3);
    printf("\"lat_us_by_port\":[");
    for (int i = 0; lat_by_port && i < opt.n_sub_ports; i++)
        printf("%s{\"port\":%d,\"n\":%" PRIu64 ",\"p50\":%.1f,"
               "\"p99\":%.1f}",
               i ? "," : "", opt.sub_ports[i], lat_by_port[i].n,
               hist_pct(&lat_by_port[i], 50) / 1e3,
               hist_pct(&lat_by_port[i], 99) / 1e3);
    printf("],");
    printf("\"churn_cycles\":%" PRIu64 ",\"churn_failed\":%" PRIu64
           ",\"churn_per_s\":%.1f,\"churn_lat_us\":{\"p50\":%.1f,"
           "\"p99\":%.1f},",
           S.churn_cycles, S.churn_failed,
           win_s > 0 ? (double)S.churn_cycles / win_s : 0.0,
           hist_pct(&S.churn_lat, 50) / 1e3, hist_pct(&S.churn_lat, 99) / 1e3);
    printf("\"loader_cpu_s\":%.3f,\"server_cpu_s\":%.3f,"
           "\"server_user_s\":%.3f,", loader_cpu, server_cpu, server_user_s);
    printf("\"server_cpu_s_each\":[");
    for (int i = 0; i < opt.n_server_pids; i++)
        printf("%s%.3f", i ? "," : "", server_cpu_each[i]);
    printf("],");
    printf("\"first_fail\":\"%s\",", first_fail);
    printf("\"cpu_busy\":[");
    for (int i = 0; i < ncpu0 && i < ncpu1; i++) {
        unsigned long long dt = ct1[i] - ct0[i];
        printf("%s%.3f", i ? "," : "",
               dt ? (double)(cb1[i] - cb0[i]) / (double)dt : 0.0);
    }
    printf("],");
    /* Sparse bins so a driver can merge histograms of several loaders. */
    printf("\"hist\":[");
    int first = 1;
    for (unsigned i = 0; i < H_BUCKETS; i++)
        if (S.lat.c[i]) {
            printf("%s[%u,%" PRIu64 "]", first ? "" : ",", i, S.lat.c[i]);
            first = 0;
        }
    printf("]}\n");
    fflush(stdout);
}

int main(int argc, char **argv)
{
    parse_args(argc, argv);
    signal(SIGPIPE, SIG_IGN);
    clk_tck = sysconf(_SC_CLK_TCK);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        die("epoll_create1");
    padding = malloc((size_t)opt.size + 1);
    pub_data = malloc((size_t)opt.size + 64);
    if (opt.payload_file)
        load_payload();
    rest_body_cap = (size_t)opt.size + 512 + 2 * payload_len;
    rest_body = malloc(rest_body_cap);
    if (!padding || !pub_data || !rest_body)
        die("malloc");
    memset(padding, 'x', (size_t)opt.size + 1);
    slots = calloc(SLOTS, sizeof *slots);
    room_readers = calloc((size_t)opt.rooms, sizeof *room_readers);
    int n_slow = (int)(opt.subs * opt.slow_pct / 100.0 + 0.5);
    int n_pub = opt.churn ? 0 : opt.pubs;
    nconns = opt.subs + n_pub + opt.churn;
    conns = calloc((size_t)nconns, sizeof *conns);
    pub_conn_idx = calloc((size_t)(n_pub + 1), sizeof *pub_conn_idx);
    if (!slots || !room_readers || !conns || !pub_conn_idx)
        die("calloc");
    if (opt.n_sub_ports > 1 &&
        !(lat_by_port = calloc((size_t)opt.n_sub_ports, sizeof *lat_by_port)))
        die("calloc");
    /* Spread the slow readers evenly among the subscribers. */
    for (int i = 0; i < opt.subs; i++) {
        struct conn *c = &conns[i];
        c->idx = i;
        c->room = i % opt.rooms;
        c->port_idx = opt.n_sub_ports ? i % opt.n_sub_ports : 0;
        c->port = opt.n_sub_ports ? opt.sub_ports[c->port_idx] : opt.port;
        c->kind = (n_slow && (i % (opt.subs / n_slow)) == 0 &&
                   i / (opt.subs / n_slow) < n_slow)
                      ? K_SLOW
                      : K_SUB;
    }
    for (int i = 0; i < n_pub; i++) {
        struct conn *c = &conns[opt.subs + i];
        c->idx = opt.subs + i;
        c->kind = opt.mode == MODE_PUSHER && opt.publish == PUB_REST
                      ? K_PUB_REST
                      : K_PUB_WS;
        c->pub_no = i;
        c->port = opt.n_pub_ports ? opt.pub_ports[i % opt.n_pub_ports]
                                  : opt.port;
        pub_conn_idx[n_pub_conns++] = opt.subs + i;
    }
    for (int i = 0; i < opt.churn; i++) {
        struct conn *c = &conns[opt.subs + n_pub + i];
        c->idx = opt.subs + n_pub + i;
        c->port = opt.port;
        c->kind = K_CHURN;
        /* With --rooms, churn slot i cycles on its own channel bench-i, so
         * every cycle is an occupied and a vacated edge (webhook bench). */
        c->room = i % opt.rooms;
    }

    uint64_t t_begin = now_ns();
    uint64_t setup_deadline =
        t_begin + (uint64_t)(opt.setup_timeout * 1e9);
    int setup_n = opt.subs + n_pub; /* churn conns start with the clock */
    struct epoll_event evs[1024];
    double cpu0 = 0, scpu0 = 0, cpu1 = 0, scpu1 = 0;
    double scpu0_each[MAX_PIDS] = {0};
    int w_started = 0, churn_started = 0;
    uint64_t last_expire = 0;

    for (;;) {
        uint64_t now = now_ns();
        /* Setup: keep at most --batch connects/handshakes in flight. */
        while (next_to_start < setup_n && n_inflight < opt.batch)
            conn_start(&conns[next_to_start++]);
        int setup_done = next_to_start >= setup_n && n_inflight == 0;
        if (!t_pub_start && (setup_done || now > setup_deadline)) {
            if (!setup_done)
                fprintf(stderr, "loadgen: setup timed out; %d in flight\n",
                        n_inflight);
            uint64_t t0 = opt.t0 ? opt.t0 : now;
            if (now >= t0) {
                t_pub_start = now;
                S.w_start = t0 + (uint64_t)(opt.warmup * 1e9);
                S.w_end = S.w_start + (uint64_t)(opt.duration * 1e9);
                if (opt.t0 && now > S.w_start)
                    fprintf(stderr, "loadgen: ready after the window "
                                    "opened\n");
                if (!opt.quiet)
                    fprintf(stderr,
                            "loadgen: ready: %" PRIu64 " ok, %" PRIu64
                            " failed in %.2f s\n",
                            S.conn_ok, S.conn_failed,
                            (double)(now - t_begin) / 1e9);
                if (opt.rate <= 0)
                    for (int i = 0; i < n_pub_conns; i++)
                        publish_more(&conns[pub_conn_idx[i]], now);
            }
        }
        if (t_pub_start && !churn_started && opt.churn) {
            churn_started = 1;
            for (int i = 0; i < opt.churn; i++)
                conn_start(&conns[opt.subs + n_pub + i]);
        }
        if (t_pub_start && !w_started && now >= S.w_start) {
            w_started = 1;
            cpu0 = proc_cpu_s(0);
            scpu0 = opt.n_server_pids ? servers_cpu_s(scpu0_each) : 0;
            ncpu0 = read_cpu_busy(cb0, ct0);
        }
        if (t_pub_start && now >= S.w_end) {
            cpu1 = proc_cpu_s(0);
            scpu1 = opt.n_server_pids ? servers_cpu_s(server_cpu_each) : 0;
            for (int i = 0; i < opt.n_server_pids; i++)
                server_cpu_each[i] -= scpu0_each[i];
            ncpu1 = read_cpu_busy(cb1, ct1);
            break;
        }
        if (opt.rate > 0)
            open_loop_tick(now);
        if (t_pub_start && now - last_expire > 100000000ull) {
            last_expire = now;
            expire_slots(now);
            /* A closed loop whose window drained (timeouts) restarts here. */
            if (opt.rate <= 0)
                for (int i = 0; i < n_pub_conns; i++)
                    if (conns[pub_conn_idx[i]].st == ST_READY)
                        publish_more(&conns[pub_conn_idx[i]], now);
        }
        int tmo = opt.rate > 0 ? 1 : 10;
        int n = epoll_wait(ep, evs, 1024, tmo);
        if (n < 0 && errno != EINTR)
            die("epoll_wait");
        /* One clock read per event, not per epoll_wait: a busy loader
         * takes a whole server cycle over 1,000 events, and stamping them
         * all with the batch's start would shorten the latency of every
         * delivery it reads late -- the more the busier the loader, which
         * flattered the peer that keeps it busiest. */
        for (int i = 0; i < n; i++) {
            struct conn *c = evs[i].data.ptr;
            now = now_ns();
            if (c->st == ST_DEAD || c->fd < 0)
                continue;
            on_event(c, evs[i].events, now);
        }
        now = now_ns();
        /* REST publishers whose server closed the connection reconnect. */
        if (t_pub_start && now < S.w_end)
            for (int i = 0; i < n_pub_conns; i++) {
                struct conn *c = &conns[pub_conn_idx[i]];
                if (c->st == ST_DEAD && c->kind == K_PUB_REST) {
                    S.rest_reconnects++;
                    conn_start(c);
                }
            }
        /* Churn: replace every finished cycle with a new connection. */
        if (churn_started)
            for (int i = 0; i < opt.churn; i++) {
                struct conn *c = &conns[opt.subs + n_pub + i];
                if (c->st == ST_DEAD && now < S.w_end)
                    conn_start(c);
            }
    }
    /* A server that closes a reader that stopped reading cannot tell it so:
     * its close frame and FIN wait behind the unread bytes. So read what
     * the slow readers were sent, for at most 2 s, and count those that end
     * in a close frame or EOF. Reading now cannot trigger a close that had
     * not already been decided. */
    /* Whatever is still missing at the end, older than the timeout, also
     * counts; judged at the window's end, not after the drain below. */
    expire_slots(S.w_end);
    if (S.slow_total) {
        draining = 1;
        for (int i = 0; i < opt.subs; i++) {
            struct conn *c = &conns[i];
            if (c->kind == K_SLOW && c->st == ST_READY) {
                struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP,
                                         .data.ptr = c};
                epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
            }
        }
        uint64_t dl = now_ns() + 2000000000ull;
        while (S.slow_closed < S.slow_total && now_ns() < dl) {
            int n = epoll_wait(ep, evs, 1024, 50);
            for (int i = 0; i < n; i++) {
                struct conn *c = evs[i].data.ptr;
                if (c->kind == K_SLOW && c->st == ST_READY)
                    on_readable(c, now_ns());
            }
        }
    }
    double win_s = (double)(S.w_end - S.w_start) / 1e9;
    print_json(cpu1 - cpu0,
               opt.n_server_pids && scpu0 >= 0 && scpu1 >= 0 ? scpu1 - scpu0
                                                            : -1,
               win_s);
    return 0;
}
