/*
 * server/redis/redis_ready.c - the backplane's readiness
 * (server/redis/redis_ready.h): the phase the backplane thread moves it
 * through, the reason and time kept for the readers, the connect counters
 * in the backplane's stats, and the /readyz answer made from a copy.
 *
 * Phases: CONNECTING at start; up -> SYNCING (REJOIN) -> JOINED, or
 * SYNC_FAILED when a script call of the REJOIN failed; the link lost ->
 * DOWN once the node was joined, else CONNECTING again. since_ms is when
 * the node started, or when it last left JOINED: "down since" is the
 * beginning of the outage, not of the last retry.
 *
 * Thread: as the header says. The lock is held for copies only.
 */
#include "server/redis/redis_ready.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "hub/loop/stats.h"

static int64_t wall_ms(void)
{
    struct timespec ts;

    /* Wall clock on purpose: the time is shown to people, not waited on. */
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* s into dst of cap bytes, cut, each byte outside printable ASCII a '?':
 * a reason is a peer's words (Redis's error, or whatever answered), shown
 * in a one-line body and a JSON string. */
static void copy_clean(char *dst, size_t cap, const char *s)
{
    size_t i = 0;

    for (; s && s[i] && i + 1 < cap; i++)
        dst[i] = s[i] >= 0x20 && s[i] < 0x7f ? s[i] : '?';
    dst[i] = '\0';
}

/* Under rd->mu: the new phase, and the joined flag and gauge with it. */
static void set_phase(struct srv_redis_ready *rd, enum srv_redis_phase p)
{
    bool joined = p == SRV_REDIS_PHASE_JOINED;

    if (rd->phase == SRV_REDIS_PHASE_JOINED && !joined)
        rd->since_ms = wall_ms();
    if (joined)
        rd->ever_joined = true;
    rd->phase = p;
    atomic_store(&rd->joined, joined);
    if (rd->st)
        HUB_STAT_SET(rd->st->joined, joined ? 1 : 0);
}

int srv_redis_ready_init(struct srv_redis_ready *rd)
{
    int rc;

    memset(rd, 0, sizeof(*rd));
    rc = pthread_mutex_init(&rd->mu, NULL);
    if (rc)
        return -rc;
    atomic_init(&rd->joined, false);
    rd->phase = SRV_REDIS_PHASE_CONNECTING;
    rd->since_ms = wall_ms();
    return 0;
}

void srv_redis_ready_fini(struct srv_redis_ready *rd)
{
    pthread_mutex_destroy(&rd->mu);
}

void srv_redis_ready_set_stats(struct srv_redis_ready *rd,
                               struct hub_backplane_stats *st)
{
    rd->st = st;
}

void srv_redis_ready_connecting(struct srv_redis_ready *rd, const char *host,
                                int port)
{
    char t[SRV_REDIS_READY_TARGET_MAX];

    if (!rd)
        return;
    /* An IPv6 address in brackets, as a URL spells it. */
    snprintf(t, sizeof(t),
             host && strchr(host, ':') ? "[%.256s]:%d" : "%.256s:%d",
             host ? host : "", port);
    pthread_mutex_lock(&rd->mu);
    copy_clean(rd->target, sizeof(rd->target), t);
    pthread_mutex_unlock(&rd->mu);
}

void srv_redis_ready_up(struct srv_redis_ready *rd, bool syncing)
{
    if (!rd)
        return;
    pthread_mutex_lock(&rd->mu);
    rd->attempts = 0;
    if (rd->st)
        HUB_STAT_SET(rd->st->connect_attempts, 0);
    set_phase(rd, syncing ? SRV_REDIS_PHASE_SYNCING : SRV_REDIS_PHASE_JOINED);
    pthread_mutex_unlock(&rd->mu);
}

bool srv_redis_ready_down(struct srv_redis_ready *rd, const char *why,
                          bool was_up)
{
    char cut[SRV_REDIS_READY_REASON_MAX];
    bool changed;

    if (!rd)
        return false;
    copy_clean(cut, sizeof(cut), why);
    pthread_mutex_lock(&rd->mu);
    changed = strcmp(cut, rd->reason) != 0;
    memcpy(rd->reason, cut, sizeof(cut));
    if (!was_up) {
        rd->attempts++;
        if (rd->st) {
            HUB_STAT_SET(rd->st->connect_attempts, rd->attempts);
            HUB_STAT_ADD(rd->st->connect_failures, 1);
        }
    }
    set_phase(rd, rd->ever_joined ? SRV_REDIS_PHASE_DOWN
                                  : SRV_REDIS_PHASE_CONNECTING);
    pthread_mutex_unlock(&rd->mu);
    return changed;
}

void srv_redis_ready_syncing(struct srv_redis_ready *rd)
{
    if (!rd)
        return;
    pthread_mutex_lock(&rd->mu);
    /* Only an up link rejoins: a REJOIN asked for while down does
     * nothing (the next up starts one). */
    if (rd->phase == SRV_REDIS_PHASE_JOINED ||
        rd->phase == SRV_REDIS_PHASE_SYNC_FAILED)
        set_phase(rd, SRV_REDIS_PHASE_SYNCING);
    pthread_mutex_unlock(&rd->mu);
}

void srv_redis_ready_synced(struct srv_redis_ready *rd, bool ok,
                            const char *why)
{
    if (!rd)
        return;
    pthread_mutex_lock(&rd->mu);
    if (rd->phase == SRV_REDIS_PHASE_SYNCING) {
        if (!ok)
            copy_clean(rd->reason, sizeof(rd->reason), why);
        set_phase(rd, ok ? SRV_REDIS_PHASE_JOINED
                         : SRV_REDIS_PHASE_SYNC_FAILED);
    }
    pthread_mutex_unlock(&rd->mu);
}

bool srv_redis_ready_joined(const struct srv_redis_ready *rd)
{
    return rd && atomic_load(&rd->joined);
}

void srv_redis_ready_get(const struct srv_redis_ready *rd,
                         struct srv_redis_ready_view *v)
{
    /* The lock is not part of the value a reader sees. */
    pthread_mutex_t *mu = (pthread_mutex_t *)&rd->mu;

    pthread_mutex_lock(mu);
    v->phase = rd->phase;
    v->ever_joined = rd->ever_joined;
    v->attempts = rd->attempts;
    v->since_ms = rd->since_ms;
    memcpy(v->target, rd->target, sizeof(v->target));
    memcpy(v->reason, rd->reason, sizeof(v->reason));
    pthread_mutex_unlock(mu);
}

const char *srv_redis_ready_phase_name(enum srv_redis_phase p)
{
    switch (p) {
    case SRV_REDIS_PHASE_CONNECTING:
        return "connecting";
    case SRV_REDIS_PHASE_SYNCING:
        return "syncing";
    case SRV_REDIS_PHASE_JOINED:
        return "joined";
    case SRV_REDIS_PHASE_SYNC_FAILED:
        return "out_of_sync";
    case SRV_REDIS_PHASE_DOWN:
        return "down";
    }
    return "unknown";
}

void srv_redis_ready_time(int64_t ms, char *buf, size_t cap)
{
    time_t s = (time_t)(ms / 1000);
    struct tm tm;

    if (!gmtime_r(&s, &tm) ||
        !strftime(buf, cap, "%Y-%m-%dT%H:%M:%SZ", &tm))
        snprintf(buf, cap, "?");
}

/* Never joined: what the node waits for. */
static void waiting(const struct srv_redis_ready_view *v, char *body,
                    size_t cap)
{
    if (v->phase == SRV_REDIS_PHASE_SYNCING)
        snprintf(body, cap, "waiting: cluster directory (rejoin)\n");
    else if (v->phase == SRV_REDIS_PHASE_SYNC_FAILED)
        snprintf(body, cap,
                 "waiting: cluster directory (rejoin failed: %s; the next "
                 "reconnect rejoins again)\n", v->reason);
    else if (!v->target[0])
        snprintf(body, cap, "waiting: redis (connecting)\n"); /* not yet */
    else if (!v->attempts)
        snprintf(body, cap, "waiting: redis (connecting to %s)\n",
                 v->target);
    else
        snprintf(body, cap, "waiting: redis (connecting to %s; attempt %u "
                 "failed: %s)\n", v->target, v->attempts, v->reason);
}

unsigned srv_redis_ready_answer(const struct srv_redis_ready_view *v,
                                bool requires_redis, char *body, size_t cap)
{
    char since[32];

    if (v->phase == SRV_REDIS_PHASE_JOINED) {
        snprintf(body, cap, "ready\n");
        return 200;
    }
    if (!v->ever_joined) {
        waiting(v, body, cap);
        return 503;
    }
    srv_redis_ready_time(v->since_ms, since, sizeof(since));
    if (v->phase == SRV_REDIS_PHASE_DOWN ||
        v->phase == SRV_REDIS_PHASE_CONNECTING)
        snprintf(body, cap, "degraded: redis down since %s (%s); serving "
                 "local subscribers only\n", since, v->reason);
    else if (v->phase == SRV_REDIS_PHASE_SYNCING)
        snprintf(body, cap, "degraded: cluster directory out of sync since "
                 "%s (rejoin)\n", since);
    else
        snprintf(body, cap, "degraded: cluster directory out of sync since "
                 "%s (rejoin failed: %s; the next reconnect rejoins "
                 "again)\n", since, v->reason);
    return requires_redis ? 503 : 200;
}
