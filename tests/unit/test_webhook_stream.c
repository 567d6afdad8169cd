/*
 * tests/unit/test_webhook_stream.c - durable cluster webhooks, the sender
 * thread's half (server/webhook/webhook_stream*.c), against a fake Redis:
 * a thread on a loopback port that speaks RESP and keeps, in memory, what the
 * module's commands touch (the app's stream with its consumer groups and
 * pending lists, the lease key, the counter hash, a script cache). The
 * module's scripts are recognised by their text (EVAL, or EVALSHA of a
 * text SCRIPT LOAD kept) and run here in C, the delay pump
 * as "nothing due". The test thread plays the sender thread: it calls
 * srv_wh_stream_take / srv_wh_stream_round / srv_wh_stream_done with its
 * own clock and holds the batches the module pushes, as
 * server/webhook/webhook_endpoint.c would.
 * It reads and sets the fake's data between calls, when every command of
 * the call has had its reply and the fake thread waits in poll().
 *
 * Covered: client events and cache misses go to the stream (the rest back
 * to the local engine, and everything when Redis does not answer); the
 * lease taken and held, entries read into one batch with the stream's
 * event ids, acknowledged once delivered, then trimmed; a dead holder's
 * pending entries claimed and sent again from the pending list; a lease
 * held by another node reads nothing; entries the endpoint's filter does
 * not take, and malformed ones, acknowledged at once; a lost lease drops
 * the batches not in flight; a clean stop releases the lease. Reloads:
 * an app that gets webhooks takes the lease and reads its stream from the
 * start; an endpoint added to a served app starts at new entries; a
 * removed endpoint's read entries become a batch and its group is
 * destroyed; a removed app gives its lease up and lets its keys expire
 * (not while another node holds the lease), and taking the lease again
 * cancels the expiry. Scripts: each loaded on connect and called as
 * EVALSHA; a NOSCRIPT (the cache flushed) on a call or in the XADD
 * pipeline sends it once more as EVAL, each event added once, and loads it
 * again; a refused SCRIPT LOAD leaves the script on EVAL.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "hub/webhook/wh_stream.h"
#include "server/config/config.h"
#include "server/lws/srv.h"
#include "server/webhook/webhook_int.h"
#include "server/webhook/webhook_stream.h"

/* ------------------------------------------------------------ fake Redis */

#define MAX_ENTRIES 64
#define MAX_FIELDS 12
#define MAX_GROUPS 4
#define MAX_ARGS 64

struct entry {
    uint64_t seq;                  /* id "1-<seq>" */
    char *f[MAX_FIELDS];
    unsigned nf;
};

struct pending {
    uint64_t seq;
    char consumer[32];
};

struct group {
    char name[HUB_WHS_GROUP_LEN];
    uint64_t last;                 /* last-delivered-id "1-<last>" */
    struct pending p[MAX_ENTRIES];
    unsigned np;
};

struct fake_redis {
    pthread_t thread;
    pthread_mutex_t mu;
    int lfd, wake[2];
    uint16_t port;
    /* The data set (one app's keys). */
    bool exists;                   /* the stream key */
    struct entry e[MAX_ENTRIES];
    unsigned ne;
    uint64_t next_seq;
    struct group g[MAX_GROUPS];
    unsigned ng;
    char lease[32];                /* P:whl:<app>; "" = none */
    bool expiring;                 /* the app's keys have a TTL */
    long long queued, dropped;     /* P:whn:<app> */
    /* What it was asked. */
    unsigned xadds, xacks, claims, trims, releases, reads, retires, destroys;
    unsigned idle_drops;           /* wh_stream_consumers.lua, per group */
    char last_group[64];           /* its ARGV[1] */
    char last_read_id[32];
    char last_bound[16];           /* ARGV[1] of the last XADD script */
    /* The script cache: SCRIPT LOAD keeps a text under a made-up SHA;
     * EVALSHA runs it, or answers NOSCRIPT. */
    struct { char sha[41]; char *text; } scr[8];
    unsigned nscr;
    unsigned loads, evals, evalshas, noscripts;
    bool flush_once;               /* the next EVALSHA: cache flushed first */
    bool refuse_load;              /* SCRIPT LOAD answers -NOPERM */
};

static struct group *group_of(struct fake_redis *r, const char *name)
{
    for (unsigned i = 0; i < r->ng; i++)
        if (!strcmp(r->g[i].name, name))
            return &r->g[i];
    return NULL;
}

/* The id of entry seq: "1-<seq>", "0-0" for none. */
static void id_of(uint64_t seq, char *out, size_t n)
{
    if (seq)
        snprintf(out, n, "1-%llu", (unsigned long long)seq);
    else
        snprintf(out, n, "0-0");
}

/* "1-7" -> 7; "0", "0-0" -> 0. */
static uint64_t seq_of(const char *id)
{
    const char *d = strchr(id, '-');

    return d ? strtoull(d + 1, NULL, 10) : 0;
}

static void add_entry(struct fake_redis *r, const char *const *fv, unsigned n)
{
    struct entry *e = &r->e[r->ne++];

    assert_true(r->ne <= MAX_ENTRIES && n <= MAX_FIELDS);
    e->seq = ++r->next_seq;
    e->nf = n;
    for (unsigned i = 0; i < n; i++)
        e->f[i] = strdup(fv[i]);
    r->exists = true;
}

static void drop_pending(struct group *g, uint64_t seq, unsigned *n)
{
    for (unsigned i = 0; i < g->np; i++)
        if (g->p[i].seq == seq) {
            g->p[i] = g->p[--g->np];
            (*n)++;
            return;
        }
}

/* The reply text. */
struct out {
    char *b;
    size_t n, cap;
};

static void put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    int k;

    for (;;) {
        va_start(ap, fmt);
        k = vsnprintf(o->b + o->n, o->cap - o->n, fmt, ap);
        va_end(ap);
        assert_true(k >= 0);
        if ((size_t)k < o->cap - o->n)
            break;
        o->cap = o->cap * 2 + (size_t)k + 64;
        o->b = realloc(o->b, o->cap);
        assert_non_null(o->b);
    }
    o->n += (size_t)k;
}

static void bulk(struct out *o, const char *s)
{
    put(o, "$%zu\r\n%s\r\n", strlen(s), s);
}

static void put_entry(struct out *o, const struct entry *e)
{
    char id[32];

    id_of(e->seq, id, sizeof(id));
    put(o, "*2\r\n");
    bulk(o, id);
    put(o, "*%u\r\n", e->nf);
    for (unsigned i = 0; i < e->nf; i++)
        bulk(o, e->f[i]);
}

/* Entries of the read, in id order (the array keeps them so). */
static void read_reply(struct out *o, const char *key,
                       struct entry *const *es, unsigned n)
{
    put(o, "*1\r\n*2\r\n");
    bulk(o, key);
    put(o, "*%u\r\n", n);
    for (unsigned i = 0; i < n; i++)
        put_entry(o, es[i]);
}

static void xreadgroup(struct fake_redis *r, char **a, unsigned n,
                       struct out *o)
{
    /* XREADGROUP GROUP g c COUNT n STREAMS k id */
    struct group *g;
    struct entry *es[MAX_ENTRIES];
    unsigned count, m = 0;

    assert_int_equal(n, 9);
    g = group_of(r, a[2]);
    count = (unsigned)atoi(a[5]);
    r->reads++;
    snprintf(r->last_read_id, sizeof(r->last_read_id), "%s", a[8]);
    if (!g) {
        put(o, "-NOGROUP No such key or consumer group\r\n");
        return;
    }
    if (!strcmp(a[8], ">")) {
        for (unsigned i = 0; i < r->ne && m < count; i++) {
            if (r->e[i].seq <= g->last)
                continue;
            es[m++] = &r->e[i];
            g->last = r->e[i].seq;
            assert_true(g->np < MAX_ENTRIES);
            g->p[g->np].seq = r->e[i].seq;
            snprintf(g->p[g->np].consumer, sizeof(g->p[0].consumer), "%s",
                     a[3]);
            g->np++;
        }
        if (!m) {
            put(o, "*-1\r\n");
            return;
        }
    } else {
        uint64_t after = seq_of(a[8]);

        /* This consumer's pending list past the id, in id order. */
        for (unsigned i = 0; i < r->ne && m < count; i++)
            for (unsigned j = 0; j < g->np; j++)
                if (g->p[j].seq == r->e[i].seq && r->e[i].seq > after &&
                    !strcmp(g->p[j].consumer, a[3]))
                    es[m++] = &r->e[i];
    }
    read_reply(o, a[7], es, m);
}

static void eval(struct fake_redis *r, char **a, unsigned n, struct out *o)
{
    const char *s = a[1];

    if (strstr(s, "PERSIST")) {     /* the lease: KEYS l wh whd whn; ARGV me ms */
        assert_int_equal(n, 9);
        if (!strcmp(r->lease, a[7])) {
            put(o, ":1\r\n");
        } else if (!r->lease[0]) {
            snprintf(r->lease, sizeof(r->lease), "%s", a[7]);
            r->expiring = false;
            put(o, ":2\r\n");
        } else {
            put(o, ":0\r\n");
        }
    } else if (strstr(s, "PEXPIRE")) {     /* retire: KEYS l wh whd whn; me ttl */
        assert_int_equal(n, 9);
        r->retires++;
        if (r->lease[0] && strcmp(r->lease, a[7])) {
            put(o, ":0\r\n");
        } else {
            r->lease[0] = '\0';
            r->expiring = true;
            put(o, ":1\r\n");
        }
    } else if (strstr(s, "ZRANGEBYSCORE")) {
        put(o, ":0\r\n");                  /* the pump: nothing due */
    } else if (strstr(s, "XADD")) {        /* KEYS wh whn; ARGV bound f v.. */
        assert_true(n >= 6);
        snprintf(r->last_bound, sizeof(r->last_bound), "%s", a[5]);
        add_entry(r, (const char *const *)(a + 6), n - 6);
        r->queued++;
        r->xadds++;
        put(o, ":1\r\n");
    } else if (strstr(s, "DELCONSUMER")) { /* KEYS wh; ARGV group me max */
        assert_int_equal(n, 7);
        snprintf(r->last_group, sizeof(r->last_group), "%s", a[4]);
        r->idle_drops++;
        put(o, ":0\r\n");
    } else if (strstr(s, "DEL")) {         /* release: KEYS l; ARGV me */
        if (!strcmp(r->lease, a[4]))
            r->lease[0] = '\0';
        r->releases++;
        put(o, ":0\r\n");
    } else {
        put(o, "-ERR unknown script\r\n");
    }
}

/* SCRIPT LOAD: a 40-hex name made from the text (FNV-1a, not SHA1: the
 * module only keeps what it is told). */
static void script_load(struct fake_redis *r, const char *text, struct out *o)
{
    uint64_t h = 1469598103934665603ull;
    char sha[41];

    r->loads++;
    if (r->refuse_load) {
        put(o, "-NOPERM this user has no permissions to run the 'script|load' "
               "command\r\n");
        return;
    }
    for (const char *p = text; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    snprintf(sha, sizeof(sha), "%016llx%016llx%08x", (unsigned long long)h,
             (unsigned long long)~h, (unsigned)(h >> 7));
    for (unsigned i = 0; i < r->nscr; i++)
        if (!strcmp(r->scr[i].sha, sha)) {
            bulk(o, sha);
            return;
        }
    assert_true(r->nscr < 8);
    memcpy(r->scr[r->nscr].sha, sha, 41);
    r->scr[r->nscr++].text = strdup(text);
    bulk(o, sha);
}

static void script_flush(struct fake_redis *r)
{
    while (r->nscr)
        free(r->scr[--r->nscr].text);
}

/* EVALSHA sha ...: the script it names, run as EVAL would. */
static void evalsha(struct fake_redis *r, char **a, unsigned n, struct out *o)
{
    char *b[MAX_ARGS];

    r->evalshas++;
    if (r->flush_once) {
        r->flush_once = false;
        script_flush(r);
    }
    for (unsigned i = 0; i < r->nscr; i++)
        if (!strcmp(r->scr[i].sha, a[1])) {
            memcpy(b, a, n * sizeof(*b));
            b[1] = r->scr[i].text;
            eval(r, b, n, o);
            return;
        }
    r->noscripts++;
    put(o, "-NOSCRIPT No matching script. Please use EVAL.\r\n");
}

static void xinfo_groups(struct fake_redis *r, struct out *o)
{
    if (!r->exists && !r->ng) {
        put(o, "-ERR no such key\r\n");
        return;
    }
    put(o, "*%u\r\n", r->ng);
    for (unsigned i = 0; i < r->ng; i++) {
        char id[32];
        unsigned lag = 0;

        for (unsigned j = 0; j < r->ne; j++)
            lag += r->e[j].seq > r->g[i].last;
        id_of(r->g[i].last, id, sizeof(id));
        put(o, "*10\r\n");
        bulk(o, "name");
        bulk(o, r->g[i].name);
        bulk(o, "consumers");
        put(o, ":1\r\n");
        bulk(o, "pending");
        put(o, ":%u\r\n", r->g[i].np);
        bulk(o, "last-delivered-id");
        bulk(o, id);
        bulk(o, "lag");
        put(o, ":%u\r\n", lag);
    }
}

static void xpending(struct fake_redis *r, const char *name, struct out *o)
{
    struct group *g = group_of(r, name);
    uint64_t lo = UINT64_MAX, hi = 0;
    char a[32], b[32];

    if (!g || !g->np) {
        put(o, "*4\r\n:0\r\n$-1\r\n$-1\r\n*-1\r\n");
        return;
    }
    for (unsigned i = 0; i < g->np; i++) {
        lo = g->p[i].seq < lo ? g->p[i].seq : lo;
        hi = g->p[i].seq > hi ? g->p[i].seq : hi;
    }
    id_of(lo, a, sizeof(a));
    id_of(hi, b, sizeof(b));
    put(o, "*4\r\n:%u\r\n", g->np);
    bulk(o, a);
    bulk(o, b);
    put(o, "*0\r\n");
}

static void command(struct fake_redis *r, char **a, unsigned n, struct out *o)
{
    const char *c = a[0];

    if (!strcasecmp(c, "SELECT")) {
        put(o, "+OK\r\n");
    } else if (!strcasecmp(c, "EVAL")) {
        r->evals++;
        eval(r, a, n, o);
    } else if (!strcasecmp(c, "EVALSHA")) {
        evalsha(r, a, n, o);
    } else if (!strcasecmp(c, "SCRIPT") && !strcasecmp(a[1], "LOAD")) {
        script_load(r, a[2], o);
    } else if (!strcasecmp(c, "XGROUP") && !strcasecmp(a[1], "DESTROY")) {
        struct group *g = group_of(r, a[3]);  /* DESTROY k g */

        if (g) {
            *g = r->g[--r->ng];
            r->destroys++;
        }
        put(o, ":%u\r\n", g ? 1u : 0u);
    } else if (!strcasecmp(c, "XGROUP")) {  /* CREATE k g 0|$ MKSTREAM */
        if (group_of(r, a[3])) {
            put(o, "-BUSYGROUP Consumer Group name already exists\r\n");
            return;
        }
        assert_true(r->ng < MAX_GROUPS);
        memset(&r->g[r->ng], 0, sizeof(r->g[0]));
        snprintf(r->g[r->ng].name, sizeof(r->g[0].name), "%s", a[3]);
        r->g[r->ng++].last = strcmp(a[4], "$") ? seq_of(a[4]) : r->next_seq;
        r->exists = true;
        put(o, "+OK\r\n");
    } else if (!strcasecmp(c, "XAUTOCLAIM")) { /* k g c 0 start COUNT n JUSTID */
        struct group *g = group_of(r, a[2]);
        uint64_t from = seq_of(a[5]);
        unsigned m = 0;

        r->claims++;
        for (unsigned i = 0; g && i < g->np; i++)
            if (g->p[i].seq >= from)
                m++;
        put(o, "*3\r\n");
        bulk(o, "0-0");
        put(o, "*%u\r\n", m);
        for (unsigned i = 0; g && i < g->np; i++) {
            char id[32];

            if (g->p[i].seq < from)
                continue;
            snprintf(g->p[i].consumer, sizeof(g->p[i].consumer), "%s", a[3]);
            id_of(g->p[i].seq, id, sizeof(id));
            bulk(o, id);
        }
        put(o, "*0\r\n");
    } else if (!strcasecmp(c, "XREADGROUP")) {
        xreadgroup(r, a, n, o);
    } else if (!strcasecmp(c, "XACK")) {    /* k g id... */
        struct group *g = group_of(r, a[2]);
        unsigned acked = 0;

        for (unsigned i = 3; g && i < n; i++)
            drop_pending(g, seq_of(a[i]), &acked);
        r->xacks += acked;
        put(o, ":%u\r\n", acked);
    } else if (!strcasecmp(c, "XINFO")) {
        xinfo_groups(r, o);
    } else if (!strcasecmp(c, "XPENDING")) {
        xpending(r, a[2], o);
    } else if (!strcasecmp(c, "XTRIM")) {   /* k MINID id */
        uint64_t min = seq_of(a[3]);
        unsigned k = 0, gone = 0;

        r->trims++;
        for (unsigned i = 0; i < r->ne; i++) {
            if (r->e[i].seq < min) {
                for (unsigned j = 0; j < r->e[i].nf; j++)
                    free(r->e[i].f[j]);
                gone++;
                continue;
            }
            r->e[k++] = r->e[i];
        }
        r->ne = k;
        put(o, ":%u\r\n", gone);
    } else if (!strcasecmp(c, "HGET")) {    /* whn dropped */
        char v[24];

        snprintf(v, sizeof(v), "%lld", r->dropped);
        bulk(o, v);
    } else {
        put(o, "-ERR unknown command '%s'\r\n", c);
    }
}

/* One RESP command (an array of bulk strings) at the start of buf[0..len):
 * its length, or 0 when incomplete. */
static size_t parse(const char *buf, size_t len, char **a, unsigned *n)
{
    const char *p = buf, *end = buf + len, *nl;
    long k;

    *n = 0;
    if (len < 4 || (nl = memchr(p, '\n', len)) == NULL)
        return 0;
    assert_int_equal(*p, '*');
    k = strtol(p + 1, NULL, 10);
    assert_true(k > 0 && k <= MAX_ARGS);
    p = nl + 1;
    for (long i = 0; i < k; i++) {
        long bl;

        if (p >= end || (nl = memchr(p, '\n', (size_t)(end - p))) == NULL)
            return 0;
        assert_int_equal(*p, '$');
        bl = strtol(p + 1, NULL, 10);
        p = nl + 1;
        if (end - p < bl + 2)
            return 0;
        a[i] = strndup(p, (size_t)bl);
        p += bl + 2;
        (*n)++;
    }
    return (size_t)(p - buf);
}

static void serve(struct fake_redis *r, int fd)
{
    char *buf = NULL;
    size_t len = 0, cap = 0;

    for (;;) {
        struct pollfd pf[2] = { { fd, POLLIN, 0 }, { r->wake[0], POLLIN, 0 } };
        char *a[MAX_ARGS];
        unsigned n;
        size_t used;
        ssize_t got;

        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            break;
        if (pf[1].revents)
            break;
        if (!pf[0].revents)
            continue;
        if (cap - len < 4096) {
            cap = cap * 2 + 4096;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        got = read(fd, buf + len, cap - len);
        if (got <= 0)
            break;
        len += (size_t)got;
        while ((used = parse(buf, len, a, &n)) > 0) {
            struct out o = { NULL, 0, 0 };

            pthread_mutex_lock(&r->mu);
            command(r, a, n, &o);
            pthread_mutex_unlock(&r->mu);
            for (unsigned i = 0; i < n; i++)
                free(a[i]);
            for (size_t w = 0; w < o.n;) {
                ssize_t k = write(fd, o.b + w, o.n - w);

                if (k <= 0)
                    break;
                w += (size_t)k;
            }
            free(o.b);
            memmove(buf, buf + used, len - used);
            len -= used;
        }
    }
    free(buf);
    close(fd);
}

static void *fake_main(void *arg)
{
    struct fake_redis *r = arg;

    for (;;) {
        struct pollfd pf[2] = { { r->lfd, POLLIN, 0 },
                                { r->wake[0], POLLIN, 0 } };
        int fd;

        if (poll(pf, 2, -1) < 0 && errno != EINTR)
            break;
        if (pf[1].revents)
            break;
        fd = accept(r->lfd, NULL, NULL);
        if (fd >= 0)
            serve(r, fd);
    }
    return NULL;
}

static void fake_start(struct fake_redis *r)
{
    struct sockaddr_in sa = { .sin_family = AF_INET };
    socklen_t sl = sizeof(sa);

    memset(r, 0, sizeof(*r));
    pthread_mutex_init(&r->mu, NULL);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    r->lfd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(r->lfd >= 0);
    assert_int_equal(bind(r->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(r->lfd, 4), 0);
    assert_int_equal(getsockname(r->lfd, (struct sockaddr *)&sa, &sl), 0);
    r->port = ntohs(sa.sin_port);
    assert_int_equal(pipe(r->wake), 0);
    assert_int_equal(pthread_create(&r->thread, NULL, fake_main, r), 0);
}

static void fake_stop(struct fake_redis *r)
{
    assert_int_equal(write(r->wake[1], "x", 1), 1);
    pthread_join(r->thread, NULL);
    close(r->lfd);
    close(r->wake[0]);
    close(r->wake[1]);
    for (unsigned i = 0; i < r->ne; i++)
        for (unsigned j = 0; j < r->e[i].nf; j++)
            free(r->e[i].f[j]);
    script_flush(r);
    pthread_mutex_destroy(&r->mu);
}

/* ----------------------------------------------------- the sender's side */

#define URL "http://127.0.0.1:9/hook"

struct rig {
    struct fake_redis redis;
    char url[64];
    struct srv srv;
    struct srv_config cfg;
    struct hub_wh_conf conf;
    struct hub_app app;
    struct srv_wh_view view;
    struct srv_wh_ep ep;
    struct srv_wh_ep *eps[1];
    unsigned ep_base[1];
    struct srv_wh wh;
    uint64_t now;
};

/* As server/webhook/webhook_endpoint.c holds a stream batch: at ep's
 * tail. */
static bool push(struct srv_wh_ep *ep, struct srv_wh_batch *b)
{
    ep->wh->held_bytes += b->len;
    b->next = NULL;
    *ep->tail = b;
    ep->tail = &b->next;
    atomic_fetch_add(&ep->depth, 1);
    return true;
}

static void batch_free(struct srv_wh_batch *b)
{
    while (b->n_acks)
        free(b->acks[--b->n_acks]);
    free(b->acks);
    free(b->body);
    free(b);
}

/* The head batch delivered: acknowledged through the module, then gone. */
static void deliver_head(struct rig *g)
{
    struct srv_wh_batch *b = g->ep.head;

    assert_non_null(b);
    srv_wh_stream_done(&g->wh, &g->ep, b);
    g->ep.head = b->next;
    if (!g->ep.head)
        g->ep.tail = &g->ep.head;
    g->wh.held_bytes -= b->len;
    atomic_fetch_sub(&g->ep.depth, 1);
    batch_free(b);
}

static unsigned held(const struct rig *g)
{
    unsigned n = 0;

    for (const struct srv_wh_batch *b = g->ep.head; b; b = b->next)
        n++;
    return n;
}

/* n rounds, each one batch window (HUB_WH_BATCH_MS) after the last. */
static void rounds(struct rig *g, unsigned n)
{
    while (n--) {
        g->now += HUB_WH_BATCH_MS + 1;
        srv_wh_stream_round(&g->wh, g->now);
    }
}

static int rig_setup(void **state)
{
    struct rig *g = calloc(1, sizeof(*g));

    if (!g)
        return -1;
    fake_start(&g->redis);
    snprintf(g->url, sizeof(g->url), "redis://127.0.0.1:%u/0",
             g->redis.port);
    g->srv.node_id = "n1";
    g->cfg.redis = g->url;
    g->cfg.redis_prefix = "lubdub";
    g->cfg.node_lease_ms = 3000;
    g->conf.url = URL;
    g->conf.types = 0xffff;                 /* every type */
    g->app.id = "app-id";
    g->app.secret = "app-secret";
    g->app.key = "app-key";
    g->app.webhook_batching = true;
    g->app.webhooks = &g->conf;
    g->app.n_webhooks = 1;
    g->view.n = 1;
    g->view.apps = &g->app;
    g->wh.srv = &g->srv;
    g->wh.cfg = &g->cfg;
    g->wh.view = &g->view;
    g->wh.push = push;
    g->ep.wh = &g->wh;
    g->ep.app = &g->app;
    g->ep.conf = &g->conf;
    g->ep.tail = &g->ep.head;
    g->eps[0] = &g->ep;
    g->wh.eps = g->eps;
    g->wh.n_eps = 1;
    g->wh.ep_base = g->ep_base;
    assert_int_equal(srv_wh_stream_create(&g->wh), 0);
    assert_non_null(g->wh.whs);
    assert_int_equal(srv_wh_stream_ep_init(&g->wh, &g->ep), 0);
    g->now = srv_now_ms();
    *state = g;
    return 0;
}

static int rig_teardown(void **state)
{
    struct rig *g = *state;

    while (g->ep.head) {
        struct srv_wh_batch *b = g->ep.head;

        g->ep.head = b->next;
        batch_free(b);
    }
    srv_wh_stream_ep_fini(&g->ep);
    srv_wh_stream_free(&g->wh);
    fake_stop(&g->redis);
    free(g);
    return 0;
}

static struct hub_wh_event *client_event(const char *channel, const char *d)
{
    return hub_wh_event_new(0, HUB_WH_CLIENT_EVENT, channel, strlen(channel),
                            "u1", "client-hi", d, "1.2");
}

/* Entries of the app's stream, as another node's scripts leave them. */
static void stream_add(struct rig *g, const char *name, const char *channel)
{
    const char *fv[4] = { "name", name, "channel", channel };

    pthread_mutex_lock(&g->redis.mu);
    add_entry(&g->redis, fv, 4);
    pthread_mutex_unlock(&g->redis.mu);
}

static json_int_t whs_stat(struct rig *g, const char *name)
{
    json_t *j = srv_wh_stream_stats_json(&g->wh);
    json_int_t v;

    assert_non_null(j);
    v = json_integer_value(json_object_get(j, name));
    json_decref(j);
    return v;
}

static void test_webhook_stream_take_sends_client_events_to_the_stream(
    void **state)
{
    struct rig *g = *state;
    struct hub_wh_event *l, *keep;

    l = client_event("private-a", "{\"k\":1}");
    l->next = hub_wh_event_new(0, HUB_WH_CHANNEL_OCCUPIED, "pub", 3, NULL,
                               NULL, NULL, NULL);
    l->next->next = hub_wh_event_new(0, HUB_WH_CACHE_MISS, "cache-x", 7, NULL,
                                     NULL, NULL, NULL);
    keep = srv_wh_stream_take(&g->wh, l);
    /* The edge is the local engine's; the other two are in the stream. */
    assert_non_null(keep);
    assert_int_equal(keep->type, HUB_WH_CHANNEL_OCCUPIED);
    assert_null(keep->next);
    free(keep);
    assert_int_equal(g->redis.xadds, 2);
    assert_int_equal(g->redis.ne, 2);
    assert_int_equal(g->redis.queued, 2);
    assert_string_equal(g->redis.e[0].f[1], "client_event");
    assert_string_equal(g->redis.e[0].f[3], "private-a");
    assert_int_equal(g->redis.e[0].nf, 12);  /* + user_id event data socket_id */
    assert_string_equal(g->redis.e[1].f[1], "cache_miss");
    assert_int_equal(g->redis.e[1].nf, 4);
    assert_int_equal(whs_stat(g, "added"), 2);
    /* The bound the script checks: --webhook-stream-max (its default). */
    assert_string_equal(g->redis.last_bound, "100000");
    {
        json_t *j = srv_wh_stream_stats_json(&g->wh);

        assert_true(json_is_true(json_object_get(j, "connected")));
        json_decref(j);
    }
}

static void test_webhook_stream_max_is_the_scripts_bound(void **state)
{
    struct rig *g = *state;

    srv_wh_stream_ep_fini(&g->ep);
    srv_wh_stream_free(&g->wh);
    g->cfg.webhook_stream_max = 1234;
    assert_int_equal(srv_wh_stream_create(&g->wh), 0);
    assert_int_equal(srv_wh_stream_ep_init(&g->wh, &g->ep), 0);
    assert_null(srv_wh_stream_take(&g->wh, client_event("private-a", "1")));
    assert_string_equal(g->redis.last_bound, "1234");
    g->cfg.webhook_stream_max = 0;
}

static void test_webhook_stream_take_without_redis_keeps_every_event(
    void **state)
{
    struct rig *g = *state;
    struct hub_wh_event *keep;
    unsigned n = 0;

    /* Nothing listens here any more: the events go to the local engine. */
    srv_wh_stream_ep_fini(&g->ep);
    srv_wh_stream_free(&g->wh);
    snprintf(g->url, sizeof(g->url), "redis://127.0.0.1:1/0");
    assert_int_equal(srv_wh_stream_create(&g->wh), 0);
    assert_int_equal(srv_wh_stream_ep_init(&g->wh, &g->ep), 0);
    keep = srv_wh_stream_take(&g->wh, client_event("private-a", "1"));
    for (struct hub_wh_event *e = keep, *next; e; e = next) {
        next = e->next;
        n++;
        free(e);
    }
    assert_int_equal(n, 1);
    assert_int_equal(g->redis.xadds, 0);
    assert_int_equal(whs_stat(g, "added"), 0);
}

static void test_webhook_stream_holder_reads_one_batch_acks_and_trims(
    void **state)
{
    struct rig *g = *state;
    char id[64];

    stream_add(g, "channel_occupied", "c1");
    stream_add(g, "channel_vacated", "c1");
    stream_add(g, "channel_occupied", "c2");
    srv_wh_stream_round(&g->wh, g->now);
    assert_string_equal(g->redis.lease, "n1");
    assert_true(srv_wh_stream_holds(&g->wh, &g->ep));
    assert_int_equal(g->redis.ng, 1);
    hub_wh_stream_group(URL, id);
    assert_string_equal(g->redis.g[0].name, id);
    /* Its own pending list first (empty), then the new entries. */
    rounds(g, 2);
    assert_int_equal(held(g), 1);
    assert_int_equal(g->ep.head->n_acks, 3);
    assert_string_equal(g->ep.head->acks[0], "1-1");
    assert_string_equal(g->ep.head->acks[2], "1-3");
    assert_int_equal(g->ep.head->n_events, 3);
    assert_non_null(strstr(g->ep.head->body, "\"id\":\"app-id-1-1\""));
    assert_non_null(strstr(g->ep.head->body, "\"id\":\"app-id-1-3\""));
    assert_int_equal(g->redis.g[0].np, 3);
    assert_int_equal(whs_stat(g, "read"), 3);
    /* Delivered: acknowledged, then trimmed on the next trim round. */
    deliver_head(g);
    assert_int_equal(g->redis.g[0].np, 0);
    assert_int_equal(whs_stat(g, "acked"), 3);
    g->now += 1001;
    rounds(g, 1);
    assert_true(g->redis.trims >= 1);
    assert_int_equal(g->redis.ne, 1);        /* MINID: the last one stays */
    /* The trim pass also drops other nodes' idle consumers of the group. */
    assert_true(g->redis.idle_drops >= 1);
    assert_string_equal(g->redis.last_group, g->redis.g[0].name);
    assert_int_equal(held(g), 0);
    assert_int_equal(whs_stat(g, "leases_held"), 1);
}

static void test_webhook_stream_new_holder_claims_a_dead_ones_entries(
    void **state)
{
    struct rig *g = *state;
    struct group *gr;

    /* n0 took the lease, read two entries and died before delivering. */
    stream_add(g, "channel_occupied", "presence-a");
    stream_add(g, "channel_occupied", "presence-b");
    gr = &g->redis.g[g->redis.ng++];
    hub_wh_stream_group(URL, gr->name);
    gr->last = 2;
    gr->np = 2;
    gr->p[0].seq = 1;
    gr->p[1].seq = 2;
    snprintf(gr->p[0].consumer, sizeof(gr->p[0].consumer), "n0");
    snprintf(gr->p[1].consumer, sizeof(gr->p[1].consumer), "n0");
    /* Its lease expired: n1 takes it and claims every pending entry. */
    srv_wh_stream_round(&g->wh, g->now);
    assert_true(srv_wh_stream_holds(&g->wh, &g->ep));
    assert_int_equal(g->redis.claims, 1);
    assert_string_equal(gr->p[0].consumer, "n1");
    assert_string_equal(gr->p[1].consumer, "n1");
    assert_int_equal(whs_stat(g, "claimed"), 2);
    rounds(g, 2);
    assert_int_equal(held(g), 1);
    assert_int_equal(g->ep.head->n_acks, 2);
    assert_string_equal(g->ep.head->acks[0], "1-1");
    deliver_head(g);
    assert_int_equal(gr->np, 0);
    /* A new entry after that comes as new (">"), not from the list. */
    stream_add(g, "channel_vacated", "presence-a");
    rounds(g, 3);
    assert_string_equal(g->redis.last_read_id, ">");
    assert_int_equal(held(g), 1);
    assert_string_equal(g->ep.head->acks[0], "1-3");
}

static void test_webhook_stream_another_holder_means_no_reads(void **state)
{
    struct rig *g = *state;

    snprintf(g->redis.lease, sizeof(g->redis.lease), "n2");
    stream_add(g, "channel_occupied", "c1");
    rounds(g, 3);
    assert_false(srv_wh_stream_holds(&g->wh, &g->ep));
    assert_int_equal(g->redis.reads, 0);
    assert_int_equal(g->redis.ng, 0);
    assert_int_equal(held(g), 0);
    assert_int_equal(whs_stat(g, "leases_held"), 0);
    /* n2 goes (its lease expires): n1 takes over and reads. */
    g->redis.lease[0] = '\0';
    g->now += 1001;                          /* past the renew time */
    rounds(g, 3);
    assert_true(srv_wh_stream_holds(&g->wh, &g->ep));
    assert_int_equal(held(g), 1);
}

static void test_webhook_stream_filtered_entries_are_acked_at_once(void **state)
{
    struct rig *g = *state;

    g->conf.starts_with = "presence-";
    stream_add(g, "channel_occupied", "public-1");
    stream_add(g, "member_added", "presence-1");    /* no user_id */
    stream_add(g, "channel_occupied", "presence-1");
    rounds(g, 3);
    assert_int_equal(held(g), 1);
    assert_int_equal(g->ep.head->n_acks, 1);
    assert_string_equal(g->ep.head->acks[0], "1-3");
    /* public-1 was not this endpoint's and the member event without its
     * user is no event at all: both acknowledged without a batch. */
    assert_int_equal(g->redis.xacks, 2);
    assert_int_equal(g->redis.g[0].np, 1);
    g->conf.starts_with = NULL;
}

static void test_webhook_stream_lost_lease_drops_batches_stop_releases(
    void **state)
{
    struct rig *g = *state;

    stream_add(g, "channel_occupied", "c1");
    rounds(g, 3);
    assert_int_equal(held(g), 1);
    /* Another node holds it now (ours expired while we were away): the
     * batch is not ours to send; it stays pending in Redis. */
    snprintf(g->redis.lease, sizeof(g->redis.lease), "n2");
    g->now += 1001;
    rounds(g, 1);
    assert_false(srv_wh_stream_holds(&g->wh, &g->ep));
    assert_int_equal(held(g), 0);
    assert_int_equal(g->wh.held_bytes, 0);
    assert_int_equal(g->redis.g[0].np, 1);
    /* Ours again, then a clean stop gives it back at once. */
    g->redis.lease[0] = '\0';
    g->now += 1001;
    rounds(g, 3);
    assert_true(srv_wh_stream_holds(&g->wh, &g->ep));
    srv_wh_stream_ep_fini(&g->ep);
    srv_wh_stream_free(&g->wh);
    assert_int_equal(g->redis.releases, 1);
    assert_string_equal(g->redis.lease, "");
}

/* The rig's app without webhooks here (a reload removed or disabled
 * them), or with its one webhook again (a reload added it). */
static void set_hooked(struct rig *g, bool on)
{
    g->app.n_webhooks = on ? 1 : 0;
    g->wh.n_eps = on ? 1 : 0;
}

static void test_webhook_stream_reload_added_app_reads_from_the_start(
    void **state)
{
    struct rig *g = *state;

    /* The app has no webhooks on this node yet; other nodes' scripts
     * already queue its edges (they reloaded first). */
    set_hooked(g, false);
    stream_add(g, "channel_occupied", "c1");
    stream_add(g, "channel_vacated", "c1");
    rounds(g, 2);
    assert_string_equal(g->redis.lease, "");
    assert_int_equal(g->redis.ng, 0);
    /* The reload reaches this node: lease, group from id 0 (the stream
     * had no group: nothing in it was sent to anyone), both entries. */
    set_hooked(g, true);
    rounds(g, 3);
    assert_string_equal(g->redis.lease, "n1");
    assert_int_equal(g->redis.ng, 1);
    assert_int_equal(held(g), 1);
    assert_int_equal(g->ep.head->n_acks, 2);
    assert_string_equal(g->ep.head->acks[0], "1-1");
    assert_non_null(strstr(g->ep.head->body, "\"id\":\"app-id-1-2\""));
}

static void test_webhook_stream_added_endpoint_of_a_served_app_starts_at_new(
    void **state)
{
    struct rig *g = *state;
    struct group *other;
    struct hub_wh_conf conf2 = { .url = "http://127.0.0.1:9/two" };
    struct srv_wh_ep ep2 = { .wh = &g->wh, .app = &g->app, .conf = &conf2 };
    struct srv_wh_ep *eps[2] = { &g->ep, &ep2 };

    /* Another endpoint of the app, configured here too (only its group
     * matters: it is not read in this test), has read and acknowledged
     * two entries. */
    ep2.tail = &ep2.head;
    assert_int_equal(srv_wh_stream_ep_init(&g->wh, &ep2), 0);
    g->wh.eps = eps;
    g->wh.n_eps = 2;
    stream_add(g, "channel_occupied", "c1");
    stream_add(g, "channel_vacated", "c1");
    other = &g->redis.g[g->redis.ng++];
    hub_wh_stream_group(conf2.url, other->name);
    other->last = 2;
    /* Ours is new: its group starts at the stream's end ("$"), so the
     * events of before it was added are not sent to it. */
    rounds(g, 3);
    assert_int_equal(g->redis.ng, 2);
    assert_int_equal(held(g), 0);
    stream_add(g, "channel_occupied", "c2");
    rounds(g, 3);
    assert_int_equal(held(g), 1);
    assert_int_equal(g->ep.head->n_acks, 1);
    assert_string_equal(g->ep.head->acks[0], "1-3");
    assert_int_equal(g->redis.destroys, 0);
    g->wh.eps = g->eps;
    g->wh.n_eps = 1;
    srv_wh_stream_ep_fini(&ep2);
}

static void test_webhook_stream_removed_endpoint_dead_letters_and_group_goes(
    void **state)
{
    struct rig *g = *state;
    char old[HUB_WHS_GROUP_LEN];

    hub_wh_stream_group(URL, old);
    stream_add(g, "channel_occupied", "c1");
    rounds(g, 2);                            /* lease, claim, history */
    g->now += 101;                           /* one read, no batch yet */
    srv_wh_stream_round(&g->wh, g->now);
    assert_int_equal(held(g), 0);
    assert_int_equal(g->redis.g[0].np, 1);
    /* A reload removes it (server/webhook/webhook_endpoint.c,
     * srv__wh_ep_retire): what it read becomes a batch, dead-lettered
     * and acknowledged. */
    srv_wh_stream_ep_flush(&g->wh, &g->ep);
    assert_int_equal(held(g), 1);
    assert_int_equal(g->ep.head->n_acks, 1);
    deliver_head(g);
    assert_int_equal(g->redis.g[0].np, 0);
    srv_wh_stream_ep_fini(&g->ep);
    /* Its replacement (another URL): a new group from the stream's end;
     * the old one is destroyed by the holder's next trim pass. */
    g->conf.url = "http://127.0.0.1:9/other";
    assert_int_equal(srv_wh_stream_ep_init(&g->wh, &g->ep), 0);
    g->now += 1001;
    rounds(g, 2);
    assert_int_equal(g->redis.destroys, 1);
    assert_int_equal(g->redis.ng, 1);
    assert_null(group_of(&g->redis, old));
    assert_int_equal(whs_stat(g, "groups_destroyed"), 1);
    assert_int_equal(held(g), 0);            /* c1 was not its event */
    stream_add(g, "channel_vacated", "c1");
    rounds(g, 3);
    assert_int_equal(held(g), 1);
    assert_string_equal(g->ep.head->acks[0], "1-2");
    g->conf.url = URL;
}

static void test_webhook_stream_removed_app_gives_up_lease_and_keys_expire(
    void **state)
{
    struct rig *g = *state;

    stream_add(g, "channel_occupied", "c1");
    rounds(g, 3);
    assert_string_equal(g->redis.lease, "n1");
    assert_int_equal(whs_stat(g, "leases_held"), 1);
    /* What it held was dead-lettered by the reload (ep_retire). */
    deliver_head(g);
    set_hooked(g, false);
    rounds(g, 1);
    assert_string_equal(g->redis.lease, "");
    assert_true(g->redis.expiring);
    assert_int_equal(whs_stat(g, "leases_held"), 0);
    assert_int_equal(whs_stat(g, "apps_retired"), 1);
    g->now += 1001;
    rounds(g, 2);
    assert_int_equal(g->redis.retires, 1);   /* done once */
    /* Added back: the lease again, and the keys no longer expire. */
    set_hooked(g, true);
    rounds(g, 1);
    assert_string_equal(g->redis.lease, "n1");
    assert_false(g->redis.expiring);
}

static void test_webhook_stream_retire_leaves_another_nodes_lease(void **state)
{
    struct rig *g = *state;

    rounds(g, 1);                            /* seen, not held: n2 has it */
    snprintf(g->redis.lease, sizeof(g->redis.lease), "n2");
    g->now += 1001;
    rounds(g, 1);
    assert_false(srv_wh_stream_holds(&g->wh, &g->ep));
    set_hooked(g, false);
    rounds(g, 1);
    /* n2 still has the app (or will let it go itself): nothing changes. */
    assert_string_equal(g->redis.lease, "n2");
    assert_false(g->redis.expiring);
    assert_int_equal(whs_stat(g, "apps_retired"), 0);
    /* n2 went: the next try lets the keys expire. */
    g->redis.lease[0] = '\0';
    g->now += 1001;
    rounds(g, 1);
    assert_true(g->redis.expiring);
    assert_int_equal(whs_stat(g, "apps_retired"), 1);
}

/* Scripts: loaded on connect, then called by SHA. */

static void test_webhook_stream_scripts_go_as_evalsha_after_connect(
    void **state)
{
    struct rig *g = *state;

    assert_null(srv_wh_stream_take(&g->wh, client_event("private-a", "1")));
    /* Every stream script was loaded once, on the connect. */
    assert_int_equal(g->redis.loads, SRV_WHS_SCRIPT_N);
    assert_int_equal(g->redis.nscr, SRV_WHS_SCRIPT_N);
    stream_add(g, "channel_occupied", "c1");
    rounds(g, 3);                            /* lease, pump, read */
    assert_int_equal(held(g), 1);
    deliver_head(g);
    g->now += 1001;
    rounds(g, 1);                            /* trim: idle consumers */
    assert_true(g->redis.idle_drops >= 1);
    srv_wh_stream_ep_fini(&g->ep);
    srv_wh_stream_free(&g->wh);              /* release */
    assert_int_equal(g->redis.releases, 1);
    /* The XADD, lease, pump, consumers and release scripts: all EVALSHA,
     * not one EVAL with the text. */
    assert_int_equal(g->redis.xadds, 1);
    assert_int_equal(g->redis.evals, 0);
    assert_true(g->redis.evalshas >= 5);
    assert_int_equal(g->redis.noscripts, 0);
    assert_int_equal(g->redis.loads, SRV_WHS_SCRIPT_N);
}

static void test_webhook_stream_noscript_in_a_pipeline_goes_again_as_eval(
    void **state)
{
    struct rig *g = *state;
    struct hub_wh_event *l;

    assert_null(srv_wh_stream_take(&g->wh, client_event("private-a", "0")));
    /* Redis's script cache is flushed under the pipeline of three: each
     * is answered NOSCRIPT, none ran, and each goes once as EVAL. */
    g->redis.flush_once = true;
    l = client_event("private-a", "1");
    l->next = client_event("private-a", "2");
    l->next->next = client_event("private-a", "3");
    assert_null(srv_wh_stream_take(&g->wh, l));
    assert_int_equal(g->redis.noscripts, 3);
    assert_int_equal(g->redis.evals, 3);
    assert_int_equal(g->redis.xadds, 4);     /* each event once */
    assert_int_equal(g->redis.ne, 4);
    assert_string_equal(g->redis.e[1].f[9], "1");
    assert_string_equal(g->redis.e[3].f[9], "3");
    assert_int_equal(whs_stat(g, "added"), 4);
    assert_int_equal(g->wh.whs->noscript, 1);
    /* The script was loaded again: the next event goes as EVALSHA. */
    assert_int_equal(g->redis.loads, SRV_WHS_SCRIPT_N + 1);
    assert_null(srv_wh_stream_take(&g->wh, client_event("private-a", "4")));
    assert_int_equal(g->redis.evals, 3);
    assert_int_equal(g->redis.noscripts, 3);
    assert_int_equal(g->redis.xadds, 5);
}

static void test_webhook_stream_noscript_on_a_call_goes_again_as_eval(
    void **state)
{
    struct rig *g = *state;

    assert_null(srv_wh_stream_take(&g->wh, client_event("private-a", "0")));
    /* The lease script (the round's first call) meets a flushed cache:
     * sent again as EVAL, the lease is taken all the same. */
    g->redis.flush_once = true;
    srv_wh_stream_round(&g->wh, g->now);
    assert_string_equal(g->redis.lease, "n1");
    assert_true(srv_wh_stream_holds(&g->wh, &g->ep));
    assert_true(g->redis.noscripts >= 1);
    assert_int_equal(g->redis.evals, g->redis.noscripts);
    assert_int_equal(g->wh.whs->noscript, g->redis.noscripts);
    assert_non_null(g->wh.whs->rc);
    /* Each script that met NOSCRIPT was loaded again, once. */
    assert_int_equal(g->redis.loads, SRV_WHS_SCRIPT_N + g->redis.noscripts);
}

static void test_webhook_stream_script_not_loaded_goes_as_eval(void **state)
{
    struct rig *g = *state;

    /* SCRIPT LOAD refused (an ACL without it): the scripts go as EVAL. */
    g->redis.refuse_load = true;
    assert_null(srv_wh_stream_take(&g->wh, client_event("private-a", "1")));
    srv_wh_stream_round(&g->wh, g->now);
    assert_string_equal(g->redis.lease, "n1");
    assert_int_equal(g->redis.loads, SRV_WHS_SCRIPT_N);
    assert_int_equal(g->redis.xadds, 1);
    assert_int_equal(g->redis.evalshas, 0);
    assert_true(g->redis.evals >= 2);
}

#define RIG_TEST(f) cmocka_unit_test_setup_teardown(f, rig_setup, rig_teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        RIG_TEST(test_webhook_stream_take_sends_client_events_to_the_stream),
        RIG_TEST(test_webhook_stream_take_without_redis_keeps_every_event),
        RIG_TEST(test_webhook_stream_max_is_the_scripts_bound),
        RIG_TEST(test_webhook_stream_holder_reads_one_batch_acks_and_trims),
        RIG_TEST(test_webhook_stream_new_holder_claims_a_dead_ones_entries),
        RIG_TEST(test_webhook_stream_another_holder_means_no_reads),
        RIG_TEST(test_webhook_stream_filtered_entries_are_acked_at_once),
        RIG_TEST(test_webhook_stream_lost_lease_drops_batches_stop_releases),
        RIG_TEST(test_webhook_stream_reload_added_app_reads_from_the_start),
        RIG_TEST(
            test_webhook_stream_added_endpoint_of_a_served_app_starts_at_new),
        RIG_TEST(
            test_webhook_stream_removed_endpoint_dead_letters_and_group_goes),
        RIG_TEST(
            test_webhook_stream_removed_app_gives_up_lease_and_keys_expire),
        RIG_TEST(test_webhook_stream_retire_leaves_another_nodes_lease),
        RIG_TEST(test_webhook_stream_scripts_go_as_evalsha_after_connect),
        RIG_TEST(
            test_webhook_stream_noscript_in_a_pipeline_goes_again_as_eval),
        RIG_TEST(test_webhook_stream_noscript_on_a_call_goes_again_as_eval),
        RIG_TEST(test_webhook_stream_script_not_loaded_goes_as_eval),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
