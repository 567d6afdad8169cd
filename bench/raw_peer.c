/*
 * raw_peer: the ceiling servers of make bench-fanout. Built twice:
 *   raw_single  (RAW_CORKED=0): one write() per delivery.
 *   raw_corked  (RAW_CORKED=1): per event-loop round, every subscriber gets
 *               one write() holding all the frames broadcast in that round.
 *
 * Raw epoll, one thread, just enough WebSocket: the upgrade handshake,
 * unmasking client frames (split across reads or many per read), ping/pong
 * and close. The protocol is trivial: a connection whose first message is
 * "pub" is a publisher; every text message a publisher sends is broadcast to
 * all connections that are not publishers. Nothing else is parsed, so the
 * numbers bound what any real WebSocket server could do on this machine.
 *
 * Rooms (S4): a connection whose first message is "sub <room>" (0..65535)
 * leaves the broadcast list, joins that room and is answered "subscribed";
 * a publisher's "r<room> <payload>" sends <payload> to the room's members
 * only (raw_single: one write() per delivery, the floor for small rooms
 * where no subscriber gets two messages in one round; raw_corked: one
 * write() per member per round, like the broadcast).
 *
 * A subscriber that cannot take its bytes keeps them in its own output
 * buffer; past OUT_LIMIT it is closed (a slow reader must not grow memory).
 *
 * --deflate (make bench-compression, the ceiling of compress-once): the
 * upgrade accepts a permessage-deflate offer (answering with
 * server_no_context_takeover and client_no_context_takeover, without
 * parsing the offer's parameters), and every broadcast message is deflated
 * once (zlib raw deflate, level 6, Z_SYNC_FLUSH, the 00 00 ff ff tail
 * stripped: RFC 7692 7.2.1, the hub's settings) and sent to every
 * subscriber as one RSV1 frame. Bench only: it assumes every subscriber
 * offered the extension (the loader's --deflate); nothing is inflated.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#ifndef RAW_CORKED
#define RAW_CORKED 0
#endif

#define RBUF_SIZE (64 * 1024)
#define OUT_LIMIT (4u << 20)
#define MAX_FRAME (1u << 20)
#define MAX_ROOMS 65536

struct peer {
    int fd;
    int upgraded, publisher, sub_index;
    int room, room_index; /* room -1: not in a room */
    unsigned char *in;
    size_t in_len, in_cap;
    unsigned char *out;
    size_t out_off, out_len, out_cap;
    int want_out;
};

static int ep, lfd;
static int deflate_on; /* --deflate */
static z_stream zs;
static struct peer **subs; /* dense array of subscribers */
static int nsubs, subs_cap;
static unsigned char rbuf[RBUF_SIZE];
#if RAW_CORKED
static unsigned char *round_buf; /* frames broadcast in this round */
static size_t round_len, round_cap;
#endif

struct room {
    struct peer **m; /* dense array of members */
    int n, cap;
#if RAW_CORKED
    unsigned char *buf; /* frames sent to this room in this round */
    size_t len, bcap;
    int dirty;
#endif
};
static struct room *rooms; /* MAX_ROOMS, allocated at the first "sub" */
#if RAW_CORKED
static int *dirty_rooms, ndirty;
#endif

static void die(const char *m)
{
    perror(m);
    exit(2);
}

static int grow(unsigned char **b, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 4096;
    while (n < need)
        n *= 2;
    unsigned char *p = realloc(*b, n);
    if (!p)
        return -ENOMEM;
    *b = p;
    *cap = n;
    return 0;
}

static void set_events(struct peer *p)
{
    struct epoll_event ev = {.events = EPOLLIN | (p->want_out ? EPOLLOUT : 0),
                             .data.ptr = p};
    epoll_ctl(ep, EPOLL_CTL_MOD, p->fd, &ev);
}

static void subs_remove(struct peer *p)
{
    if (p->sub_index >= 0) {
        struct peer *last = subs[--nsubs];
        subs[p->sub_index] = last;
        last->sub_index = p->sub_index;
        p->sub_index = -1;
    }
}

static void room_remove(struct peer *p)
{
    if (p->room < 0)
        return;
    struct room *r = &rooms[p->room];
    struct peer *last = r->m[--r->n];
    r->m[p->room_index] = last;
    last->room_index = p->room_index;
    p->room = -1;
}

static void peer_close(struct peer *p)
{
    if (p->fd < 0)
        return;
    subs_remove(p);
    room_remove(p);
    epoll_ctl(ep, EPOLL_CTL_DEL, p->fd, NULL);
    close(p->fd);
    p->fd = -1;
    /* Freed at the end of the round: the round may still point at it. */
}

static struct peer *dead[4096];
static int ndead;

static void peer_kill(struct peer *p)
{
    if (p->fd < 0)
        return;
    peer_close(p);
    if (ndead < (int)(sizeof dead / sizeof dead[0]))
        dead[ndead++] = p;
}

/* Writes what it can now, keeps the rest; closes a reader over the limit. */
static void peer_send(struct peer *p, const void *b, size_t n)
{
    if (p->fd < 0)
        return;
    size_t done = 0;
    if (p->out_len == 0) {
        ssize_t w = write(p->fd, b, n);
        if (w < 0 && errno != EAGAIN) {
            peer_kill(p);
            return;
        }
        done = w > 0 ? (size_t)w : 0;
        if (done == n)
            return;
    }
    if (p->out_len - p->out_off + n - done > OUT_LIMIT) {
        peer_kill(p);
        return;
    }
    if (grow(&p->out, &p->out_cap, p->out_len + n - done)) {
        peer_kill(p);
        return;
    }
    memcpy(p->out + p->out_len, (const unsigned char *)b + done, n - done);
    p->out_len += n - done;
    if (!p->want_out) {
        p->want_out = 1;
        set_events(p);
    }
}

static void peer_flush(struct peer *p)
{
    while (p->out_off < p->out_len) {
        ssize_t w = write(p->fd, p->out + p->out_off, p->out_len - p->out_off);
        if (w < 0) {
            if (errno == EAGAIN)
                return;
            peer_kill(p);
            return;
        }
        p->out_off += (size_t)w;
    }
    p->out_off = p->out_len = 0;
    p->want_out = 0;
    set_events(p);
}

static size_t frame_header(unsigned char *h, int op, size_t n)
{
    h[0] = (unsigned char)(0x80 | op);
    if (n < 126) {
        h[1] = (unsigned char)n;
        return 2;
    }
    if (n < 65536) {
        h[1] = 126;
        h[2] = (unsigned char)(n >> 8);
        h[3] = (unsigned char)n;
        return 4;
    }
    h[1] = 127;
    for (int i = 0; i < 8; i++)
        h[2 + i] = (unsigned char)((uint64_t)n >> (56 - 8 * i));
    return 10;
}

/* d deflated once, as the payload of one FIN|RSV1|text frame in a buffer
 * reused by every call (*len: its length); NULL on failure. */
static const unsigned char *deflate_frame(const unsigned char *d, size_t n,
                                          size_t *len)
{
    static unsigned char *f;
    static size_t fcap;
    size_t bound = deflateBound(&zs, n) + 16;
    if (grow(&f, &fcap, bound + 10))
        return NULL;
    /* Deflate behind the longest header, then move the header in front. */
    deflateReset(&zs);
    zs.next_in = (unsigned char *)d;
    zs.avail_in = (unsigned)n;
    zs.next_out = f + 10;
    zs.avail_out = (unsigned)bound;
    if (deflate(&zs, Z_SYNC_FLUSH) != Z_OK || zs.avail_in)
        return NULL;
    size_t cl = bound - zs.avail_out - 4; /* the 00 00 ff ff tail */
    unsigned char h[10];
    size_t hl = frame_header(h, 1, cl);
    h[0] |= 0x40; /* RSV1: compressed */
    memcpy(f + 10 - hl, h, hl);
    *len = hl + cl;
    return f + 10 - hl;
}

#if RAW_CORKED
/* Appends one frame of d (compressed with --deflate) to *b. */
static int append_frame(unsigned char **b, size_t *len, size_t *cap,
                        const unsigned char *d, size_t n)
{
    if (deflate_on) {
        size_t fl;
        const unsigned char *f = deflate_frame(d, n, &fl);
        if (!f || grow(b, cap, *len + fl))
            return -1;
        memcpy(*b + *len, f, fl);
        *len += fl;
        return 0;
    }
    if (grow(b, cap, *len + n + 10))
        return -1;
    *len += frame_header(*b + *len, 1, n);
    memcpy(*b + *len, d, n);
    *len += n;
    return 0;
}
#endif

#if !RAW_CORKED
/* One text frame of d in a buffer reused by every call (*len: its
 * length); NULL when out of memory. */
static const unsigned char *one_frame(const unsigned char *d, size_t n,
                                      size_t *len)
{
    static unsigned char *f;
    static size_t fcap;
    if (deflate_on)
        return deflate_frame(d, n, len);
    if (grow(&f, &fcap, n + 10))
        return NULL;
    size_t hl = frame_header(f, 1, n);
    memcpy(f + hl, d, n);
    *len = hl + n;
    return f;
}
#endif

static void broadcast(const unsigned char *d, size_t n)
{
#if RAW_CORKED
    append_frame(&round_buf, &round_len, &round_cap, d, n);
#else
    size_t fl;
    const unsigned char *f = one_frame(d, n, &fl);
    if (!f)
        return;
    /* Backwards: a killed subscriber is replaced by the last one. */
    for (int i = nsubs - 1; i >= 0; i--)
        peer_send(subs[i], f, fl);
#endif
}

/* A publisher's "r<room> <payload>": the payload to the room's members. */
static void room_broadcast(int room, const unsigned char *d, size_t n)
{
    if (!rooms)
        return;
    struct room *r = &rooms[room];
#if RAW_CORKED
    if (append_frame(&r->buf, &r->len, &r->bcap, d, n))
        return;
    if (!r->dirty) {
        r->dirty = 1;
        dirty_rooms[ndirty++] = room;
    }
#else
    size_t fl;
    const unsigned char *f = one_frame(d, n, &fl);
    if (!f)
        return;
    for (int i = r->n - 1; i >= 0; i--)
        peer_send(r->m[i], f, fl);
#endif
}

/* "<digits><stop>" at d: the number (-1 when absent or >= MAX_ROOMS) and
 * its length through the stop byte. */
static int room_number(const unsigned char *d, size_t n, int stop,
                       size_t *used)
{
    size_t i = 0;
    long v = 0;
    while (i < n && i < 6 && d[i] >= '0' && d[i] <= '9')
        v = v * 10 + (d[i++] - '0');
    if (i == 0 || v >= MAX_ROOMS || (stop >= 0 && (i >= n || d[i] != stop)))
        return -1;
    *used = i + (stop >= 0);
    return (int)v;
}

static void room_join(struct peer *p, int room)
{
    if (!rooms) {
        rooms = calloc(MAX_ROOMS, sizeof *rooms);
#if RAW_CORKED
        dirty_rooms = calloc(MAX_ROOMS, sizeof *dirty_rooms);
        if (!dirty_rooms) {
            free(rooms);
            rooms = NULL;
        }
#endif
        if (!rooms) {
            peer_kill(p);
            return;
        }
    }
    struct room *r = &rooms[room];
    if (r->n == r->cap) {
        int nc = r->cap ? r->cap * 2 : 8;
        struct peer **nm = realloc(r->m, (size_t)nc * sizeof *nm);
        if (!nm) {
            peer_kill(p);
            return;
        }
        r->m = nm;
        r->cap = nc;
    }
    subs_remove(p);
    room_remove(p);
    p->room = room;
    p->room_index = r->n;
    r->m[r->n++] = p;
}

static void control(struct peer *p, int op, const unsigned char *d, size_t n)
{
    unsigned char f[140];
    if (n > 125)
        n = 125;
    size_t hl = frame_header(f, op, n);
    memcpy(f + hl, d, n);
    peer_send(p, f, hl + n);
}

static void on_message(struct peer *p, const unsigned char *d, size_t n)
{
    size_t used;
    int room;
    if (!p->publisher && n == 3 && memcmp(d, "pub", 3) == 0) {
        p->publisher = 1;
        subs_remove(p);
        room_remove(p);
        return;
    }
    if (!p->publisher && n > 4 && memcmp(d, "sub ", 4) == 0) {
        room = room_number(d + 4, n - 4, -1, &used);
        if (room < 0 || used != n - 4) {
            peer_kill(p);
            return;
        }
        room_join(p, room);
        if (p->fd >= 0) {
            unsigned char f[16];
            size_t hl = frame_header(f, 1, 10);
            memcpy(f + hl, "subscribed", 10);
            peer_send(p, f, hl + 10);
        }
        return;
    }
    if (p->publisher && n > 1 && d[0] == 'r' &&
        (room = room_number(d + 1, n - 1, ' ', &used)) >= 0) {
        room_broadcast(room, d + 1 + used, n - 1 - used);
        return;
    }
    if (p->publisher)
        broadcast(d, n);
}

static size_t parse_frames(struct peer *p, unsigned char *b, size_t len)
{
    size_t off = 0;
    while (p->fd >= 0 && len - off >= 2) {
        unsigned char *f = b + off;
        int op = f[0] & 0x0f, masked = f[1] & 0x80;
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
        if (pl > MAX_FRAME) {
            peer_kill(p);
            break;
        }
        if (masked)
            hl += 4;
        if (len - off < hl + pl)
            break;
        unsigned char *d = f + hl;
        if (masked)
            for (uint64_t i = 0; i < pl; i++)
                d[i] ^= f[hl - 4 + (i & 3)];
        off += hl + (size_t)pl;
        if (op == 1 || op == 2 || op == 0)
            on_message(p, d, (size_t)pl);
        else if (op == 9)
            control(p, 0xA, d, (size_t)pl);
        else if (op == 8) {
            control(p, 8, d, pl >= 2 ? 2 : 0);
            peer_kill(p);
        }
    }
    return off;
}

static size_t parse_upgrade(struct peer *p, unsigned char *b, size_t len)
{
    unsigned char *e = memmem(b, len, "\r\n\r\n", 4);
    if (!e) {
        if (len > 8192)
            peer_kill(p);
        return 0;
    }
    *e = 0;
    char *k = strcasestr((char *)b, "Sec-WebSocket-Key:");
    if (!k) {
        peer_kill(p);
        return len;
    }
    k += 18;
    while (*k == ' ')
        k++;
    size_t kl = strcspn(k, "\r\n ");
    char cat[128];
    if (kl > 64) {
        peer_kill(p);
        return len;
    }
    memcpy(cat, k, kl);
    memcpy(cat + kl, "258EAFA5-E914-47DA-95CA-C5AB0DC85B11", 36);
    unsigned char sha[SHA_DIGEST_LENGTH];
    SHA1((unsigned char *)cat, kl + 36, sha);
    char acc[64];
    EVP_EncodeBlock((unsigned char *)acc, sha, SHA_DIGEST_LENGTH);
    char resp[384];
    int pmd = deflate_on && strcasestr((char *)b, "permessage-deflate");
    int n = snprintf(resp, sizeof resp,
                     "HTTP/1.1 101 Switching Protocols\r\n"
                     "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                     "%s"
                     "Sec-WebSocket-Accept: %s\r\n\r\n",
                     pmd ? "Sec-WebSocket-Extensions: permessage-deflate; "
                           "server_no_context_takeover; "
                           "client_no_context_takeover\r\n"
                         : "",
                     acc);
    p->upgraded = 1;
    peer_send(p, resp, (size_t)n);
    return (size_t)(e - b) + 4;
}

static void on_readable(struct peer *p)
{
    ssize_t n = read(p->fd, rbuf, sizeof rbuf);
    if (n <= 0) {
        if (n < 0 && (errno == EAGAIN || errno == EINTR))
            return;
        peer_kill(p);
        return;
    }
    unsigned char *b = rbuf;
    size_t len = (size_t)n;
    if (p->in_len) {
        if (grow(&p->in, &p->in_cap, p->in_len + len)) {
            peer_kill(p);
            return;
        }
        memcpy(p->in + p->in_len, rbuf, len);
        b = p->in;
        len += p->in_len;
    }
    size_t off = 0;
    if (!p->upgraded) {
        off = parse_upgrade(p, b, len);
        if (!p->upgraded)
            off = 0;
    }
    if (p->upgraded && p->fd >= 0)
        off += parse_frames(p, b + off, len - off);
    if (p->fd < 0)
        return;
    size_t rest = len - off;
    if (rest) {
        if (b == rbuf) {
            if (grow(&p->in, &p->in_cap, rest)) {
                peer_kill(p);
                return;
            }
            memcpy(p->in, rbuf + off, rest);
        } else {
            memmove(p->in, p->in + off, rest);
        }
    }
    p->in_len = rest;
}

static void on_accept(void)
{
    for (int i = 0; i < 256; i++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0)
            return;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct peer *p = calloc(1, sizeof *p);
        if (!p) {
            close(fd);
            free(p);
            continue;
        }
        if (nsubs == subs_cap) {
            int nc = subs_cap ? subs_cap * 2 : 1024;
            struct peer **ns = realloc(subs, (size_t)nc * sizeof *ns);
            if (!ns) {
                close(fd);
                free(p);
                continue;
            }
            subs = ns;
            subs_cap = nc;
        }
        p->fd = fd;
        p->room = -1;
        p->sub_index = nsubs;
        subs[nsubs++] = p;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = p};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
    }
}

int main(int argc, char **argv)
{
    int port = 7001;
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--port") && i + 1 < argc)
            port = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--deflate"))
            deflate_on = 1;
    if (deflate_on && deflateInit2(&zs, 6, Z_DEFLATED, -15, 8,
                                   Z_DEFAULT_STRATEGY) != Z_OK)
        die("deflateInit2");
    signal(SIGPIPE, SIG_IGN);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in sa = {.sin_family = AF_INET,
                             .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0)
        die("bind");
    if (listen(lfd, 4096) < 0)
        die("listen");
    ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event lev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &lev);
    struct epoll_event evs[512];
    for (;;) {
        int n = epoll_wait(ep, evs, 512, -1);
        for (int i = 0; i < n; i++) {
            struct peer *p = evs[i].data.ptr;
            if (!p) {
                on_accept();
                continue;
            }
            if (p->fd < 0)
                continue;
            if (evs[i].events & EPOLLOUT)
                peer_flush(p);
            if (p->fd >= 0 && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                on_readable(p);
        }
#if RAW_CORKED
        /* The whole point: one write per subscriber per round. */
        if (round_len) {
            for (int i = nsubs - 1; i >= 0; i--)
                peer_send(subs[i], round_buf, round_len);
            round_len = 0;
        }
        for (int k = 0; k < ndirty; k++) {
            struct room *r = &rooms[dirty_rooms[k]];
            for (int i = r->n - 1; i >= 0; i--)
                peer_send(r->m[i], r->buf, r->len);
            r->len = 0;
            r->dirty = 0;
        }
        ndirty = 0;
#endif
        for (int i = 0; i < ndead; i++) {
            free(dead[i]->in);
            free(dead[i]->out);
            free(dead[i]);
        }
        ndead = 0;
    }
}
