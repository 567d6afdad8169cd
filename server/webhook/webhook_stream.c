/*
 * server/webhook/webhook_stream.c - durable webhooks in a cluster (docs/WEBHOOKS.md,
 * "In a cluster"): the sender thread's half. The join / leave / reap
 * scripts queue each app's edges in Redis (P:wh:<app>, a stream; closing
 * edges first wait out the delay in P:whd:<app>, a ZSET). Here, on the
 * sender thread, with its own synchronous hiredis connection and short
 * timeouts (never a loop thread):
 *
 * - client events and cache misses the loops saw are XADDed to the stream
 *   (the local engine takes them while Redis does not answer);
 * - per app, a lease P:whl:<app> (SET NX PX --node-lease, renewed a third
 *   of the way) says which node consumes the app's stream; only the
 *   holder moves due delayed edges to the stream (the pump) and reads;
 * - one consumer group per endpoint (hub_whs_group: named from its URL),
 *   consumer = the node id; entries read become batches in the
 *   endpoint's FIFO (webhook_send.c sends them, with its retries); an
 *   entry is XACKed for the group when its batch is delivered or
 *   dead-lettered, or at once when the endpoint's filter does not take it;
 * - taking a lease claims every pending entry of each group (XAUTOCLAIM,
 *   min-idle 0: the lease says nobody else consumes) and reads this
 *   consumer's pending list from id 0 before new entries: a dead holder's
 *   undelivered batches are sent again (receivers deduplicate by event
 *   id, "<app id>-<entry id>");
 * - entries every group has acknowledged are trimmed (XTRIM MINID);
 * - after a reload (docs/WEBHOOKS.md, "Reloads"): a missing group starts
 *   at 0 only in a stream without groups, else at $; the holder destroys
 *   the groups no configured endpoint names; an app that lost its
 *   webhooks gives its lease up and lets its keys expire (lua_retire).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

#include <hiredis/hiredis.h>

#include "hub/app/app.h"
#include "hub/base/backoff.h"
#include "hub/webhook/wh_stream.h"
#include "server/config/redis_url.h"
#include "server/redis/redis_conn.h"
#include "server/lws/srv.h"
#include "server/webhook/webhook_int.h"

#define ROUND_MS 100               /* reads and the pump, while holding */
#define RETRY_MS 500               /* reconnects: doubled up to 10 s */
#define RETRY_MAX_MS 10000
#define TRIM_MS 1000
#define IO_TIMEOUT_MS 500          /* every command; a sender, not a loop */
#define PUMP_LIMIT "200"           /* delayed edges moved per round */
#define CLAIM_ROUNDS 1000          /* XAUTOCLAIM pages per takeover */
#define MAX_STALE 16               /* groups destroyed per trim pass */
#define MAX_FIFO 2                 /* stream batches waiting per endpoint */
/* The keys of an app no node sends for any more (removed or disabled by
 * a reload) expire this long after its last holder let it go, unless a
 * node that still has it takes the lease (which PERSISTs them). */
#define RETIRE_TTL_S 3600

/* Renew (1), take (2) or not (0). KEYS lease wh whd whn; ARGV me ms.
 * Taking it cancels an expiry a retiring holder set (lua_retire). */
static const char lua_lease[] =
    "local v = redis.call('GET', KEYS[1]) "
    "if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end "
    "if not v then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2]) "
    "  redis.call('PERSIST', KEYS[2]) redis.call('PERSIST', KEYS[3]) "
    "  redis.call('PERSIST', KEYS[4]) "
    "  return 2 end "
    "return 0";

/* This node no longer has the app (a reload removed or disabled it):
 * unless another node holds the lease (it has the app, or lets it go
 * itself), drop ours and let the keys expire. 1 done, 0 another holds it.
 * KEYS lease wh whd whn; ARGV me ttl. */
static const char lua_retire[] =
    "local v = redis.call('GET', KEYS[1]) "
    "if v and v ~= ARGV[1] then return 0 end "
    "if v then redis.call('DEL', KEYS[1]) end "
    "redis.call('PEXPIRE', KEYS[2], ARGV[2]) "
    "redis.call('PEXPIRE', KEYS[3], ARGV[2]) "
    "redis.call('PEXPIRE', KEYS[4], ARGV[2]) "
    "return 1";

static const char lua_release[] =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then "
    "  redis.call('DEL', KEYS[1]) end return 0";

/* Due delayed edges to the stream. KEYS whd wh whn; ARGV bound limit. */
static const char lua_pump[] =
    "local t = redis.call('TIME') "
    "local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) "
    "local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, "
    "  'LIMIT', 0, tonumber(ARGV[2])) "
    "local n = 0 "
    "for _, m in ipairs(due) do "
    "  local kind, rest = string.sub(m, 1, 1), string.sub(m, 3) "
    "  local c, u = rest, nil "
    "  if kind == 'r' then "
    "    local a = string.find(rest, '\\31', 1, true) "
    "    if a then c = string.sub(rest, 1, a - 1); u = string.sub(rest, a + 1) "
    "    end "
    "  end "
    "  redis.call('ZREM', KEYS[1], m) "
    "  if redis.call('XLEN', KEYS[2]) >= tonumber(ARGV[1]) then "
    "    redis.call('HINCRBY', KEYS[3], 'dropped', 1) "
    "  else "
    "    if u then redis.call('XADD', KEYS[2], '*', 'name', 'member_removed', "
    "      'channel', c, 'user_id', u) "
    "    else redis.call('XADD', KEYS[2], '*', 'name', 'channel_vacated', "
    "      'channel', c) end "
    "    redis.call('HINCRBY', KEYS[3], 'queued', 1) "
    "    n = n + 1 "
    "  end "
    "end "
    "return n";

/* One event. KEYS wh whn; ARGV bound field value ... */
static const char lua_add[] =
    "if redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[1]) then "
    "  redis.call('HINCRBY', KEYS[2], 'dropped', 1) return 0 end "
    "redis.call('XADD', KEYS[1], '*', unpack(ARGV, 2)) "
    "redis.call('HINCRBY', KEYS[2], 'queued', 1) "
    "return 1";

struct whs_ep {
    char group[HUB_WHS_GROUP_LEN];
    bool grouped;                  /* claimed since this lease was taken */
    bool history;                  /* reading our pending list first */
    char cursor[48];
    struct hub_wh_event *ev[HUB_WHS_READ_COUNT];
    char *id[HUB_WHS_READ_COUNT];
    unsigned n;
    uint64_t first_ms;             /* monotonic, of ev[0] */
};

struct whs_app {
    char *id;                      /* once served here; NULL after retire */
    bool held;
    bool retiring;                 /* gone from the view: lua_retire due */
    const char *start;             /* where a missing group starts: "0"
                                      when the stream has no group yet,
                                      else "$" (a new endpoint) */
    uint64_t renew_ms, trim_ms;
    long long drop_seen;
    bool drop_base, dropping;
};

struct srv_whs {
    struct srv_redis_conn conn;    /* the URL, the password in force */
    char *node, *prefix;
    uint64_t lease_ms;
    char lease_txt[24];
    unsigned max_entries;          /* --webhook-stream-max */
    redisContext *rc;
    uint64_t retry_ms, round_ms;
    unsigned attempts;             /* connects failed since the last up */
    bool told_down;
    struct whs_app *apps;
    unsigned n_apps;
    /* /stats, read from any thread. */
    atomic_uint_fast64_t added, read, claimed, acked, dropped, held, destroyed,
        released;
    atomic_bool up;                /* rc is connected */
};

static uint64_t wall_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void stat_add(atomic_uint_fast64_t *v, uint64_t n)
{
    atomic_fetch_add_explicit(v, n, memory_order_relaxed);
}

int srv_whs_create(struct srv_wh *wh)
{
    const struct srv_config *cfg = wh->cfg;
    struct srv_redis_url url;
    struct srv_whs *z;
    char err[200];

    if (!cfg->redis || !wh->srv->node_id)
        return 0;
    z = calloc(1, sizeof(*z));
    if (!z)
        return -1;
    if (srv_redis_url_parse(cfg->redis, &url, err, sizeof(err)) ||
        !(z->node = strdup(wh->srv->node_id)) ||
        !(z->prefix = strdup(cfg->redis_prefix))) {
        free(z->node);
        free(z);
        return -1;
    }
    /* The password from --redis-password-file or the URL, replaced by
     * a SIGHUP; read at each connect (server/config/secret.h). */
    srv_redis_conn_init(&z->conn, &url, &wh->srv->secrets.redis_password);
    z->lease_ms = cfg->node_lease_ms ? cfg->node_lease_ms : 3000;
    z->max_entries = cfg->webhook_stream_max ? cfg->webhook_stream_max
                                             : HUB_WHS_MAX_ENTRIES;
    snprintf(z->lease_txt, sizeof(z->lease_txt), "%" PRIu64, z->lease_ms);
    wh->whs = z;
    return 0;
}

static void disconnect(struct srv_whs *z)
{
    if (z->rc)
        redisFree(z->rc);
    z->rc = NULL;
    atomic_store(&z->up, false);
}

/* The connection broke: logged once, dropped (reconnected later). The
 * leases are renewed, or found lost, after the reconnect. */
static void lost(struct srv_whs *z)
{
    if (!z->told_down)
        srv_log(HUB_LOG_WARN, 0, "webhooks: redis stream connection lost "
                                 "(%s); edges wait in redis, client events "
                                 "go to the local engine",
                z->rc->errstr[0] ? z->rc->errstr : "no reply");
    z->told_down = true;
    disconnect(z);
}

/* A command; NULL (and the connection dropped when it broke). */
static redisReply *cmd(struct srv_whs *z, int argc, const char **argv,
                       const size_t *lens)
{
    redisReply *r;

    if (!z->rc)
        return NULL;
    r = redisCommandArgv(z->rc, argc, argv, lens);
    if (!r)
        lost(z);
    return r;
}

static bool connect_now(struct srv_whs *z, uint64_t now)
{
    struct timeval tv = { IO_TIMEOUT_MS / 1000,
                          (IO_TIMEOUT_MS % 1000) * 1000 };
    char why[160];

    if (z->rc)
        return true;
    if (now < z->retry_ms)
        return false;
    /* A Redis that does not answer costs the sender at most one timeout
     * per attempt, and the attempts thin out (hub/base/backoff.h). */
    z->retry_ms = now + hub_backoff_step_ms(++z->attempts, RETRY_MS,
                                            RETRY_MAX_MS);
    /* Connected, AUTHed with the password in force now, SELECTed
     * (server/redis/redis_conn.h); a failed attempt is not logged. */
    z->rc = srv_redis_conn_sync(&z->conn, &tv, why, sizeof(why));
    if (!z->rc)
        return false;
    atomic_store(&z->up, true);
    z->attempts = 0;
    if (z->told_down)
        srv_log(HUB_LOG_INFO, 0, "webhooks: redis stream connection back");
    z->told_down = false;
    return true;
}

static int key(char *out, size_t n, const struct srv_whs *z, const char *what,
               const char *app)
{
    int k = snprintf(out, n, "%s:%s:%s", z->prefix, what, app);

    return k < 0 || (size_t)k >= n ? -1 : 0;
}

static void ep_clear(struct whs_ep *x)
{
    for (unsigned i = 0; i < x->n; i++) {
        free(x->ev[i]);
        free(x->id[i]);
    }
    x->n = 0;
}

int srv_whs_ep_init(struct srv_wh *wh, struct endpoint *ep)
{
    if (!wh->whs)
        return 0;
    ep->whs = calloc(1, sizeof(*ep->whs));
    if (!ep->whs)
        return -1;
    hub_whs_group(ep->conf->url, ep->whs->group);
    return 0;
}

void srv_whs_ep_fini(struct endpoint *ep)
{
    if (!ep->whs)
        return;
    ep_clear(ep->whs);
    free(ep->whs);
    ep->whs = NULL;
}

void srv_whs_free(struct srv_wh *wh)
{
    struct srv_whs *z = wh->whs;
    char k[512];

    if (!z)
        return;
    /* A clean stop hands the apps over at once, not after the lease. */
    for (unsigned i = 0; z->rc && wh->view && i < z->n_apps &&
                         i < wh->view->n;
         i++) {
        const char *av[5] = { "EVAL", lua_release, "1", k, z->node };
        redisReply *r;

        if (!z->apps[i].held || !wh->view->apps[i].id ||
            key(k, sizeof(k), z, "whl", wh->view->apps[i].id))
            continue;
        r = cmd(z, 5, av, NULL);
        freeReplyObject(r);
    }
    disconnect(z);
    for (unsigned i = 0; i < z->n_apps; i++)
        free(z->apps[i].id);
    free(z->apps);
    free(z->node);
    free(z->prefix);
    free(z);
    wh->whs = NULL;
}

/* Client events and cache misses to the stream. */

static bool to_stream(const struct hub_wh_event *ev)
{
    return ev->type == HUB_WH_CLIENT_EVENT || ev->type == HUB_WH_CACHE_MISS;
}

/* Queue one event's XADD script on the pipeline; 0 or -1. */
static int append_one(struct srv_whs *z, const char *app,
                      const struct hub_wh_event *ev)
{
    char kw[512], kn[512], bound[16];
    const char *av[18];
    const char *sid = hub_wh_event_socket_id(ev);
    int n = 0;

    if (key(kw, sizeof(kw), z, "wh", app) || key(kn, sizeof(kn), z, "whn", app))
        return -1;
    snprintf(bound, sizeof(bound), "%u", z->max_entries);
    av[n++] = "EVAL";
    av[n++] = lua_add;
    av[n++] = "2";
    av[n++] = kw;
    av[n++] = kn;
    av[n++] = bound;
    av[n++] = "name";
    av[n++] = hub_wh_type_name(ev->type);
    av[n++] = "channel";
    av[n++] = ev->channel;
#define F(name, v)                                                             \
    if (v) {                                                                   \
        av[n++] = name;                                                        \
        av[n++] = v;                                                           \
    }
    F("user_id", ev->user_id)
    F("event", ev->event)
    F("data", ev->data)
    F("socket_id", sid)
#undef F
    /* hiredis copies the arguments into its output buffer. */
    return redisAppendCommandArgv(z->rc, n, av, NULL) == REDIS_OK ? 0 : -1;
}

#define PIPELINE 256               /* events per round trip */

struct hub_wh_event *srv_whs_take(struct srv_wh *wh, struct hub_wh_event *l)
{
    struct srv_whs *z = wh->whs;
    struct hub_wh_event *keep = NULL, **kt = &keep, *ev, *next;
    struct hub_wh_event *sent[PIPELINE];

    if (!z || !l)
        return l;
    connect_now(z, srv_now_ms());
    while (l) {
        unsigned ns = 0;

        for (ev = l; ev && ns < PIPELINE; ev = next) {
            next = ev->next;
            ev->next = NULL;
            if (z->rc && to_stream(ev) && ev->app < wh->view->n &&
                wh->view->apps[ev->app].id &&
                append_one(z, wh->view->apps[ev->app].id, ev) == 0) {
                sent[ns++] = ev;
                continue;
            }
            *kt = ev;
            kt = &ev->next;
        }
        l = ev;
        for (unsigned i = 0; i < ns; i++) {
            redisReply *r = NULL;

            if (z->rc && redisGetReply(z->rc, (void **)&r) != REDIS_OK) {
                r = NULL;
                lost(z);
            }
            if (r && r->type == REDIS_REPLY_INTEGER) {
                /* 0: refused at the bound, counted by the lease holder. */
                if (r->integer == 1)
                    stat_add(&z->added, 1);
                free(sent[i]);
            } else {
                /* No answer: the local engine sends it (if the XADD ran
                 * all the same, the receiver gets it twice). */
                *kt = sent[i];
                kt = &sent[i]->next;
            }
            freeReplyObject(r);
        }
    }
    return keep;
}

/* Acks. */

static void xack(struct srv_whs *z, const char *app, const char *group,
                 char *const *ids, unsigned n)
{
    char k[512];
    const char **av;
    redisReply *r;

    if (!n || !z->rc || key(k, sizeof(k), z, "wh", app))
        return;
    av = calloc(n + 3, sizeof(*av));
    if (!av)
        return;                    /* stays pending: sent again later */
    av[0] = "XACK";
    av[1] = k;
    av[2] = group;
    for (unsigned i = 0; i < n; i++)
        av[3 + i] = ids[i];
    r = cmd(z, (int)n + 3, av, NULL);
    if (r && r->type == REDIS_REPLY_INTEGER)
        stat_add(&z->acked, (uint64_t)r->integer);
    freeReplyObject(r);
    free(av);
}

bool srv_whs_holds(const struct srv_wh *wh, const struct endpoint *ep)
{
    const struct srv_whs *z = wh->whs;

    return z && ep->app->index < z->n_apps && z->apps[ep->app->index].held;
}

void srv_whs_done(struct srv_wh *wh, struct endpoint *ep, struct batch *b)
{
    if (!wh->whs || !ep->whs || !b->acks)
        return;
    connect_now(wh->whs, srv_now_ms());
    xack(wh->whs, ep->app->id, ep->whs->group, b->acks, b->n_acks);
}

/* Batches. */

static uint64_t fnv(uint64_t h, const char *z)
{
    for (; *z; z++)
        h = (h ^ (unsigned char)*z) * 1099511628211ull;
    return (h ^ 0xff) * 1099511628211ull;
}

/* ev[from..from+n) of x become one batch of ep; they leave x. */
static void make_batch(struct srv_wh *wh, struct endpoint *ep, unsigned from,
                       unsigned n, uint64_t now)
{
    struct whs_ep *x = ep->whs;
    char ids[HUB_WHS_READ_COUNT][HUB_WH_MAX_ID];
    const char *idp[HUB_WHS_READ_COUNT];
    struct batch *b = calloc(1, sizeof(*b));
    unsigned m = 0;
    uint64_t h;

    (void)now;
    for (unsigned i = 0; i < n; i++) {
        hub_whs_event_id(ep->app->id, x->id[from + i], ids[i], sizeof(ids[i]));
        idp[i] = ids[i];
    }
    if (b)
        b->acks = calloc(n, sizeof(*b->acks));
    if (b && b->acks)
        b->body = hub_wh_encode_ids((const struct hub_wh_event *const *)
                                        &x->ev[from],
                                    idp, n, NULL, wall_now(), &b->len,
                                    &m);
    if (!b || !b->acks || !b->body) {
        /* Out of memory: the entries stay pending and are read again. */
        if (b)
            free(b->acks);
        free(b);
        x->history = true;
        snprintf(x->cursor, sizeof(x->cursor), "0");
        for (unsigned i = 0; i < n; i++) {
            free(x->ev[from + i]);
            free(x->id[from + i]);
        }
        return;
    }
    h = fnv(fnv(fnv(14695981039346656037ull, ep->app->id), x->group),
            x->id[from]);
    h = fnv(h, x->id[from + n - 1]);
    snprintf(b->idem, sizeof(b->idem), "s%016" PRIx64 "-%u", h, n);
    b->n_events = m;
    b->created_ms = wall_now();
    for (unsigned i = 0; i < n; i++) {
        free(x->ev[from + i]);
        b->acks[i] = x->id[from + i];
    }
    b->n_acks = n;
    if (!wh->push(ep, b)) {
        /* Dropped at --webhook-max-pending (counted): still pending in
         * Redis, read again from our list. */
        x->history = true;
        snprintf(x->cursor, sizeof(x->cursor), "0");
    }
}

static void flush_open(struct srv_wh *wh, struct endpoint *ep, uint64_t now,
                       bool force)
{
    struct whs_ep *x = ep->whs;

    if (!x->n)
        return;
    if (!ep->app->webhook_batching) {
        for (unsigned i = 0; i < x->n; i++)
            make_batch(wh, ep, i, 1, now);
        x->n = 0;
        return;
    }
    if (force || x->n >= HUB_WHS_READ_COUNT ||
        now - x->first_ms >= HUB_WH_BATCH_MS) {
        make_batch(wh, ep, 0, x->n, now);
        x->n = 0;
    }
}

static unsigned stream_batches(const struct endpoint *ep)
{
    unsigned n = 0;

    for (const struct batch *b = ep->head; b; b = b->next)
        if (b->acks)
            n++;
    return n;
}

/* Is id in the batch in flight (read again from our pending list)? */
static bool in_flight(const struct endpoint *ep, const char *id)
{
    if (!ep->in_flight || !ep->head || !ep->head->acks)
        return false;
    for (unsigned i = 0; i < ep->head->n_acks; i++)
        if (!strcmp(ep->head->acks[i], id))
            return true;
    return false;
}

/* Forget the stream batches ep holds but is not sending, and what is
 * open: the lease changed hands, they are pending in Redis. */
static void ep_abandon(struct srv_wh *wh, struct endpoint *ep)
{
    struct batch **pp = &ep->head, *b;

    ep_clear(ep->whs);
    ep->whs->grouped = false;
    while ((b = *pp)) {
        if (b->acks && !(b == ep->head && ep->in_flight)) {
            *pp = b->next;
            wh->held_bytes -= b->len;
            atomic_fetch_sub(&ep->depth, 1);
            for (unsigned i = 0; i < b->n_acks; i++)
                free(b->acks[i]);
            free(b->acks);
            free(b->body);
            free(b);
            continue;
        }
        pp = &b->next;
    }
    ep->tail = &ep->head;
    for (b = ep->head; b; b = b->next)
        ep->tail = &b->next;
    atomic_store_explicit(&ep->oldest_ms, ep->head ? ep->head->created_ms : 0,
                          memory_order_relaxed);
}

void srv_whs_ep_flush(struct srv_wh *wh, struct endpoint *ep)
{
    if (wh->whs && ep->whs)
        flush_open(wh, ep, srv_now_ms(), true);
}

/* Take every pending entry of ep's group (creating the group). */
static void claim(struct srv_whs *z, struct endpoint *ep, const char *k)
{
    struct whs_ep *x = ep->whs;
    char cur[48] = "0-0";
    redisReply *r;
    const struct whs_app *a = &z->apps[ep->app->index];
    const char *mk[6] = { "XGROUP", "CREATE", k, x->group,
                          a->start ? a->start : "0", "MKSTREAM" };

    /* BUSYGROUP when it exists; anything else shows in the next read. */
    freeReplyObject(cmd(z, 6, mk, NULL));
    for (unsigned round = 0; z->rc && round < CLAIM_ROUNDS; round++) {
        const char *cv[10] = { "XAUTOCLAIM", k, x->group, z->node, "0", cur,
                               "COUNT", "1000", "JUSTID" };

        r = cmd(z, 9, cv, NULL);
        if (!r || r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
            r->element[0]->type != REDIS_REPLY_STRING) {
            freeReplyObject(r);
            return;
        }
        if (r->element[1]->type == REDIS_REPLY_ARRAY)
            stat_add(&z->claimed, r->element[1]->elements);
        snprintf(cur, sizeof(cur), "%s", r->element[0]->str);
        freeReplyObject(r);
        if (!strcmp(cur, "0-0"))
            break;
    }
    if (!z->rc)
        return;
    x->grouped = true;
    x->history = true;
    snprintf(x->cursor, sizeof(x->cursor), "0");
}

/* A cache_miss of a channel already missed in the open batch: one event
 * per channel per batch, as on one node. */
static bool dup_miss(const struct whs_ep *x, const struct hub_wh_event *ev)
{
    if (ev->type != HUB_WH_CACHE_MISS)
        return false;
    for (unsigned i = 0; i < x->n; i++)
        if (x->ev[i]->type == HUB_WH_CACHE_MISS &&
            !strcmp(x->ev[i]->channel, ev->channel))
            return true;
    return false;
}

/* Read for ep (its lease held): into x, batches when due. */
static void read_ep(struct srv_wh *wh, struct endpoint *ep, const char *k,
                    uint64_t now)
{
    struct srv_whs *z = wh->whs;
    struct whs_ep *x = ep->whs;
    char count[8], *nack[HUB_WHS_READ_COUNT];
    unsigned n_nack = 0;
    redisReply *r, *list;

    if (!x->grouped)
        claim(z, ep, k);
    if (!x->grouped || !z->rc)
        return;
    flush_open(wh, ep, now, false);
    if (stream_batches(ep) >= MAX_FIFO || x->n >= HUB_WHS_READ_COUNT)
        return;
    snprintf(count, sizeof(count), "%u", HUB_WHS_READ_COUNT - x->n);
    {
        const char *av[9] = { "XREADGROUP", "GROUP", x->group, z->node,
                              "COUNT", count, "STREAMS", k,
                              x->history ? x->cursor : ">" };

        r = cmd(z, 9, av, NULL);
    }
    if (!r)
        return;
    if (r->type == REDIS_REPLY_ERROR) {
        /* NOGROUP: the stream was deleted; create it again next round. */
        x->grouped = false;
        freeReplyObject(r);
        return;
    }
    list = r->type == REDIS_REPLY_ARRAY && r->elements >= 1 &&
                   r->element[0]->type == REDIS_REPLY_ARRAY &&
                   r->element[0]->elements >= 2
               ? r->element[0]->element[1]
               : NULL;
    if (x->history && (!list || list->type != REDIS_REPLY_ARRAY ||
                       !list->elements))
        x->history = false;        /* our pending list is read: now new */
    for (size_t i = 0; list && list->type == REDIS_REPLY_ARRAY &&
                       i < list->elements;
         i++) {
        const redisReply *e = list->element[i], *id, *fv;
        const char *f[32];
        size_t fl[32], nf = 0;
        struct hub_wh_event *ev = NULL;

        if (e->type != REDIS_REPLY_ARRAY || e->elements < 2 ||
            e->element[0]->type != REDIS_REPLY_STRING)
            continue;
        id = e->element[0];
        fv = e->element[1];
        if (x->history)
            snprintf(x->cursor, sizeof(x->cursor), "%s", id->str);
        stat_add(&z->read, 1);
        if (in_flight(ep, id->str))
            continue;
        for (size_t j = 0; fv->type == REDIS_REPLY_ARRAY &&
                           j < fv->elements && nf < 32;
             j++) {
            if (fv->element[j]->type != REDIS_REPLY_STRING)
                break;
            f[nf] = fv->element[j]->str;
            fl[nf++] = fv->element[j]->len;
        }
        if (nf)
            ev = hub_whs_event(ep->app->index, f, fl, nf);
        if (!ev || !hub_webhook_matches(ep->conf, ev->type, ev->channel) ||
            dup_miss(x, ev)) {
            /* Not for this endpoint (or trimmed, or malformed, or a
             * repeated cache miss): done. */
            free(ev);
            if ((nack[n_nack] = strdup(id->str)))
                n_nack++;
            continue;
        }
        if (!(x->id[x->n] = strdup(id->str))) {
            free(ev);
            continue;
        }
        if (!x->n)
            x->first_ms = now;
        x->ev[x->n++] = ev;
        if (x->n >= HUB_WHS_READ_COUNT)
            break;
    }
    freeReplyObject(r);
    xack(z, ep->app->id, x->group, nack, n_nack);
    for (unsigned i = 0; i < n_nack; i++)
        free(nack[i]);
    flush_open(wh, ep, now, false);
}

/* Drop the entries every group of the app has acknowledged. */
static void trim(struct srv_wh *wh, unsigned ai, const char *k)
{
    struct srv_whs *z = wh->whs;
    char min[48] = "";
    char stale[MAX_STALE][HUB_WHS_GROUP_LEN];
    long long stale_pending[MAX_STALE], stale_lag[MAX_STALE];
    unsigned n_stale = 0;
    redisReply *r;
    const char *av[3] = { "XINFO", "GROUPS", k };

    r = cmd(z, 3, av, NULL);
    if (!r || r->type != REDIS_REPLY_ARRAY || !r->elements) {
        freeReplyObject(r);
        return;
    }
    for (size_t g = 0; g < r->elements; g++) {
        const redisReply *o = r->element[g];
        const char *name = NULL, *last = NULL;
        long long pending = 0, lag = -1;
        char cand[48];
        bool ours = false;

        for (size_t j = 0; o->type == REDIS_REPLY_ARRAY && j + 1 < o->elements;
             j += 2) {
            const redisReply *f = o->element[j], *v = o->element[j + 1];

            if (f->type != REDIS_REPLY_STRING)
                continue;
            if (!strcmp(f->str, "name") && v->type == REDIS_REPLY_STRING)
                name = v->str;
            else if (!strcmp(f->str, "pending") &&
                     v->type == REDIS_REPLY_INTEGER)
                pending = v->integer;
            else if (!strcmp(f->str, "last-delivered-id") &&
                     v->type == REDIS_REPLY_STRING)
                last = v->str;
            else if (!strcmp(f->str, "lag") && v->type == REDIS_REPLY_INTEGER)
                lag = v->integer;
        }
        /* Only the groups of endpoints configured here count: a removed
         * webhook's group does not hold the stream forever. */
        for (unsigned e = 0; name && e < wh->n_eps; e++)
            if (wh->eps[e]->app->index == ai && wh->eps[e]->whs &&
                !strcmp(wh->eps[e]->whs->group, name))
                ours = true;
        if (!ours && name && !strncmp(name, "wh-", 3) &&
            strlen(name) < HUB_WHS_GROUP_LEN && n_stale < MAX_STALE) {
            /* A webhook no longer configured here (the holder's config
             * decides): its group goes, so it neither lingers nor is
             * counted by anyone's trimming. */
            snprintf(stale[n_stale], HUB_WHS_GROUP_LEN, "%s", name);
            stale_pending[n_stale] = pending;
            stale_lag[n_stale++] = lag;
        }
        if (!ours || !last)
            continue;
        snprintf(cand, sizeof(cand), "%s", last);
        if (pending > 0) {
            const char *pv[3] = { "XPENDING", k, name };
            redisReply *p = cmd(z, 3, pv, NULL);

            if (p && p->type == REDIS_REPLY_ARRAY && p->elements >= 2 &&
                p->element[1]->type == REDIS_REPLY_STRING)
                snprintf(cand, sizeof(cand), "%s", p->element[1]->str);
            else
                cand[0] = '\0';
            freeReplyObject(p);
            if (!cand[0]) {
                freeReplyObject(r);
                return;
            }
        }
        {
            unsigned long long a1 = 0, a2 = 0, b1 = 0, b2 = 0;

            sscanf(cand, "%llu-%llu", &a1, &a2);
            sscanf(min, "%llu-%llu", &b1, &b2);
            if (!min[0] || a1 < b1 || (a1 == b1 && a2 < b2))
                snprintf(min, sizeof(min), "%s", cand);
        }
    }
    freeReplyObject(r);
    for (unsigned i = 0; i < n_stale && z->rc; i++) {
        const char *dv[4] = { "XGROUP", "DESTROY", k, stale[i] };
        redisReply *d = cmd(z, 4, dv, NULL);

        if (d && d->type == REDIS_REPLY_INTEGER && d->integer > 0) {
            stat_add(&z->destroyed, 1);
            /* lag: entries it had not read (-1: Redis cannot tell). */
            srv_log(HUB_LOG_INFO, 0,
                    "webhooks: app %s: destroyed consumer group %s of a "
                    "webhook no longer configured (%lld pending, %lld unread "
                    "entries not sent to it)",
                    wh->view->apps[ai].id, stale[i], stale_pending[i],
                    stale_lag[i]);
        }
        freeReplyObject(d);
    }
    if (min[0] && z->rc) {
        const char *tv[4] = { "XTRIM", k, "MINID", min };

        freeReplyObject(cmd(z, 4, tv, NULL));
    }
}

/* The drop counter of the app's stream: counted and logged once per
 * episode by the lease holder. */
static void drops(struct srv_wh *wh, unsigned ai, const char *app)
{
    struct srv_whs *z = wh->whs;
    struct whs_app *a = &z->apps[ai];
    char k[512];
    redisReply *r;
    long long v;

    if (key(k, sizeof(k), z, "whn", app))
        return;
    {
        const char *av[3] = { "HGET", k, "dropped" };

        r = cmd(z, 3, av, NULL);
    }
    if (!r)
        return;
    v = r->type == REDIS_REPLY_STRING ? strtoll(r->str, NULL, 10) : 0;
    freeReplyObject(r);
    if (!a->drop_base) {
        a->drop_base = true;
        a->drop_seen = v;
        return;
    }
    if (v > a->drop_seen) {
        stat_add(&z->dropped, (uint64_t)(v - a->drop_seen));
        if (!a->dropping)
            srv_log(HUB_LOG_WARN, 0,
                    "webhooks: app %s: its redis stream holds %u entries; "
                    "new events are dropped (counted in "
                    "webhook_stream_dropped_total) until it drains",
                    app, z->max_entries);
        a->dropping = true;
    } else if (a->dropping) {
        srv_log(HUB_LOG_INFO, 0, "webhooks: app %s: its redis stream takes "
                                 "events again", app);
        a->dropping = false;
    }
    a->drop_seen = v;
}

/* Has the stream k a consumer group (no: it is new, or none of its
 * endpoints has read it yet)? An error counts as none. */
static bool has_groups(struct srv_whs *z, const char *k)
{
    const char *av[3] = { "XINFO", "GROUPS", k };
    redisReply *r = cmd(z, 3, av, NULL);
    bool yes = r && r->type == REDIS_REPLY_ARRAY && r->elements > 0;

    freeReplyObject(r);
    return yes;
}

/* Slot ai of the apps no longer has webhooks in the view (a reload
 * removed or disabled the app): give its lease up and let its keys
 * expire, unless another node holds the lease. Tried each renewal
 * period until done. */
static void app_retire(struct srv_wh *wh, unsigned ai, uint64_t now)
{
    struct srv_whs *z = wh->whs;
    struct whs_app *a = &z->apps[ai];
    char kl[512], kw[512], kd[512], kn[512];
    redisReply *r;

    if (now < a->renew_ms)
        return;
    a->renew_ms = now + z->lease_ms / 3;
    /* The same id again at another index (removed, then added back):
     * that slot has the app's keys now. */
    for (unsigned i = 0; i < wh->view->n; i++)
        if (i != ai && wh->view->apps[i].id && wh->view->apps[i].n_webhooks &&
            !strcmp(wh->view->apps[i].id, a->id))
            goto forget;
    if (key(kl, sizeof(kl), z, "whl", a->id) ||
        key(kw, sizeof(kw), z, "wh", a->id) ||
        key(kd, sizeof(kd), z, "whd", a->id) ||
        key(kn, sizeof(kn), z, "whn", a->id))
        goto forget;
    {
        char ttl[24];
        const char *av[9] = { "EVAL", lua_retire, "4", kl, kw, kd, kn,
                              z->node, ttl };

        snprintf(ttl, sizeof(ttl), "%u", RETIRE_TTL_S * 1000u);

        r = cmd(z, 9, av, NULL);
    }
    if (!r)
        return;
    if (r->type != REDIS_REPLY_INTEGER || r->integer != 1) {
        freeReplyObject(r);
        return;                    /* another node holds it: later */
    }
    freeReplyObject(r);
    stat_add(&z->released, 1);
    srv_log(HUB_LOG_INFO, 0,
            "webhooks: app %s: no longer has webhooks here; %sits redis "
            "keys expire in %u s unless a node that has it takes the lease",
            a->id, a->held ? "released its webhook lease; " : "",
            RETIRE_TTL_S);
forget:
    if (a->held)
        atomic_fetch_add(&z->held, (uint64_t)-1);
    free(a->id);
    memset(a, 0, sizeof(*a));
}

static void app_round(struct srv_wh *wh, unsigned ai, uint64_t now)
{
    struct srv_whs *z = wh->whs;
    struct whs_app *a = &z->apps[ai];
    const struct hub_app *app = &wh->view->apps[ai];
    char kl[512], kw[512], kd[512], kn[512];
    unsigned first = wh->ep_base[ai], n = app->n_webhooks;
    redisReply *r;

    if (!a->id && !(a->id = strdup(app->id)))
        return;                    /* out of memory: next round */
    if (key(kl, sizeof(kl), z, "whl", app->id) ||
        key(kw, sizeof(kw), z, "wh", app->id) ||
        key(kd, sizeof(kd), z, "whd", app->id) ||
        key(kn, sizeof(kn), z, "whn", app->id))
        return;
    if (now >= a->renew_ms) {
        const char *av[9] = { "EVAL", lua_lease, "4", kl, kw, kd, kn, z->node,
                              z->lease_txt };
        bool had = a->held, took;

        r = cmd(z, 9, av, NULL);
        if (!r)
            return;
        a->held = r->type == REDIS_REPLY_INTEGER && r->integer > 0;
        /* 2: it was free, so another holder may have come and gone. */
        took = a->held && (!had || r->integer == 2);
        freeReplyObject(r);
        a->renew_ms = now + z->lease_ms / 3;
        if (took || a->held != had) {
            srv_log(HUB_LOG_INFO, 0,
                    a->held ? "webhooks: app %s: took its webhook lease; "
                              "this node sends its webhooks"
                            : "webhooks: app %s: lost its webhook lease; "
                              "another node sends its webhooks",
                    app->id);
            for (unsigned j = 0; j < n; j++)
                if (wh->eps[first + j]->whs)
                    ep_abandon(wh, wh->eps[first + j]);
            if (a->held != had)
                atomic_fetch_add(&z->held, a->held ? 1 : (uint64_t)-1);
            a->drop_base = false;
        }
        if (a->held)
            drops(wh, ai, app->id);
    }
    if (!a->held || !z->rc)
        return;
    for (unsigned j = 0; j < n; j++)
        if (wh->eps[first + j]->whs && !wh->eps[first + j]->whs->grouped) {
            a->start = has_groups(z, kw) ? "$" : "0";
            break;
        }
    {
        const char *av[8] = { "EVAL", lua_pump, "3", kd, kw, kn, NULL,
                              PUMP_LIMIT };
        char bound[16];

        snprintf(bound, sizeof(bound), "%u", z->max_entries);
        av[6] = bound;
        freeReplyObject(cmd(z, 8, av, NULL));
    }
    for (unsigned j = 0; z->rc && j < n; j++)
        if (wh->eps[first + j]->whs)
            read_ep(wh, wh->eps[first + j], kw, now);
    if (z->rc && now >= a->trim_ms) {
        a->trim_ms = now + TRIM_MS;
        trim(wh, ai, kw);
    }
}

uint64_t srv_whs_round(struct srv_wh *wh, uint64_t now)
{
    struct srv_whs *z = wh->whs;

    if (!z)
        return UINT64_MAX;
    if (now < z->round_ms)
        return z->round_ms - now;
    z->round_ms = now + ROUND_MS;
    if (wh->view->n > z->n_apps) {
        struct whs_app *na = realloc(z->apps, wh->view->n * sizeof(*na));

        if (!na)
            return ROUND_MS;
        memset(na + z->n_apps, 0, (wh->view->n - z->n_apps) * sizeof(*na));
        z->apps = na;
        z->n_apps = wh->view->n;
    }
    if (!connect_now(z, now))
        return ROUND_MS;
    for (unsigned i = 0; z->rc && i < wh->view->n; i++) {
        if (wh->view->apps[i].id && wh->view->apps[i].n_webhooks) {
            z->apps[i].retiring = false;
            app_round(wh, i, now);
        } else if (z->apps[i].id) {
            /* Had webhooks here before a reload. */
            if (!z->apps[i].retiring)
                z->apps[i].renew_ms = 0;
            z->apps[i].retiring = true;
            app_retire(wh, i, now);
        }
    }
    return ROUND_MS;
}

json_t *srv_whs_stats_json(struct srv_wh *wh)
{
    struct srv_whs *z = wh ? wh->whs : NULL;

#define L(x) ((json_int_t)atomic_load_explicit(&z->x, memory_order_relaxed))
    if (!z)
        return NULL;
    return json_pack("{s:b,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "connected",
                     atomic_load(&z->up), "leases_held", L(held), "added",
                     L(added), "read", L(read), "claimed", L(claimed),
                     "acked", L(acked), "dropped", L(dropped),
                     "groups_destroyed", L(destroyed), "apps_retired",
                     L(released));
#undef L
}

void srv_whs_metrics(struct srv_wh *wh, void (*put)(void *b, const char *t),
                     void *b)
{
    struct srv_whs *z = wh ? wh->whs : NULL;
    char line[512];

#define FAM(name, type, help, field)                                           \
    snprintf(line, sizeof(line), "# HELP lubdub_%s %s\n# TYPE lubdub_%s %s\n", \
             #name, help, #name, #type);                                       \
    put(b, line);                                                              \
    if (z) {                                                                   \
        snprintf(line, sizeof(line), "lubdub_%s %" PRIu64 "\n", #name,         \
                 (uint64_t)atomic_load_explicit(&z->field,                     \
                                                memory_order_relaxed));        \
        put(b, line);                                                          \
    }
    FAM(webhook_stream_added_total, counter,
        "Client events and cache misses this node added to the redis stream",
        added)
    FAM(webhook_stream_read_total, counter,
        "Redis stream entries this node read as an app's consumer", read)
    FAM(webhook_stream_claimed_total, counter,
        "Pending redis stream entries claimed when taking an app's lease",
        claimed)
    FAM(webhook_stream_dropped_total, counter,
        "Webhook events refused by a full redis stream", dropped)
    FAM(webhook_leases_held, gauge,
        "Apps whose webhook lease this node holds", held)
#undef FAM
}
