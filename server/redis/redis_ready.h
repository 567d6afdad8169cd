/*
 * server/redis/redis_ready.h - the backplane's readiness: whether this node
 * has reached Redis and joined the cluster (both connections up and its
 * share of the directory in sync: the REJOIN after the connect finished),
 * since when it is not, why (the last failure, in a fixed buffer), and the
 * connect attempts that failed. /readyz answers from it
 * (srv_redis_ready_answer), /stats and /metrics show it
 * (docs/SCALING.md, "Readiness").
 *
 * The backplane thread writes it at its state changes (server/redis/redis.c:
 * a connect starts, the link goes up or down; server/redis/redis_dir_rejoin.c:
 * a REJOIN starts or ends); an HTTP thread reads a copy of it
 * (srv_redis_ready_get) under its lock, or the joined flag alone (an
 * atomic). Nothing here grows: the reason and the address are cut to
 * their buffers.
 *
 * Thread: writers on the backplane thread (init and fini on the main
 * thread, before start and after stop); readers on any thread.
 * srv_redis_ready_answer() is pure.
 */
#ifndef SRV_REDIS_READY_H
#define SRV_REDIS_READY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A reason kept, and an address "host:port", cut to these (with the NUL). */
#define SRV_REDIS_READY_REASON_MAX 160
#define SRV_REDIS_READY_TARGET_MAX 272
/* A /readyz body always fits in this (srv_redis_ready_answer). */
#define SRV_REDIS_READY_BODY_MAX 640

/* Where the node is on its way to, or back from, being joined. */
enum srv_redis_phase {
    SRV_REDIS_PHASE_CONNECTING,    /* not up yet: connecting, or retrying */
    SRV_REDIS_PHASE_SYNCING,       /* up; its REJOIN in progress */
    SRV_REDIS_PHASE_JOINED,        /* up and the directory in sync */
    SRV_REDIS_PHASE_SYNC_FAILED,   /* up; the REJOIN failed (the next
                                      reconnect rejoins again) */
    SRV_REDIS_PHASE_DOWN,          /* lost after it was up; retrying */
};

struct hub_backplane_stats;

struct srv_redis_ready {
    /* private */
    pthread_mutex_t mu;            /* guards everything but joined */
    atomic_bool joined;            /* phase == JOINED, for any thread */
    struct hub_backplane_stats *st; /* joined, connect_* rows; or NULL */
    enum srv_redis_phase phase;
    bool ever_joined;              /* joined once since start */
    unsigned attempts;             /* failed connects since the last up */
    int64_t since_ms;              /* wall clock: start, or left JOINED */
    char target[SRV_REDIS_READY_TARGET_MAX];
    char reason[SRV_REDIS_READY_REASON_MAX];
};

/* A copy for a reader, and the pure inputs of srv_redis_ready_answer(). */
struct srv_redis_ready_view {
    enum srv_redis_phase phase;
    bool ever_joined;
    unsigned attempts;
    int64_t since_ms;              /* Unix ms, UTC */
    char target[SRV_REDIS_READY_TARGET_MAX];
    char reason[SRV_REDIS_READY_REASON_MAX]; /* "" when none yet */
};

/* 0 or -errno (the lock). Phase CONNECTING since now. */
int srv_redis_ready_init(struct srv_redis_ready *rd);
void srv_redis_ready_fini(struct srv_redis_ready *rd);
/* The counters to keep (borrowed, outlives rd; NULL: none). Before start. */
void srv_redis_ready_set_stats(struct srv_redis_ready *rd,
                               struct hub_backplane_stats *st);

/* The backplane thread's side. Each takes rd NULL as nothing to do. */
/* A connect to host:port starts (the address may change between
 * attempts: Sentinel hands out another). */
void srv_redis_ready_connecting(struct srv_redis_ready *rd, const char *host,
                                int port);
/* Both connections set up. syncing: a REJOIN follows (false: nothing to
 * wait for, joined at once). */
void srv_redis_ready_up(struct srv_redis_ready *rd, bool syncing);
/* The link went, or a connect failed (was_up false: counted as a failed
 * attempt). why is cut to SRV_REDIS_READY_REASON_MAX - 1 bytes. True when
 * it differs from the reason kept before (the caller logs it again). */
bool srv_redis_ready_down(struct srv_redis_ready *rd, const char *why,
                          bool was_up);
/* A REJOIN starts: out of sync until it ends. */
void srv_redis_ready_syncing(struct srv_redis_ready *rd);
/* The REJOIN in progress ended: in sync (ok) or not, why. Ignored unless
 * a REJOIN was in progress (the link may have gone meanwhile). */
void srv_redis_ready_synced(struct srv_redis_ready *rd, bool ok,
                            const char *why);

/* Any thread's side. */
bool srv_redis_ready_joined(const struct srv_redis_ready *rd);
void srv_redis_ready_get(const struct srv_redis_ready *rd,
                         struct srv_redis_ready_view *v);
/* The phase's name in /stats: "connecting", "syncing", "joined",
 * "out_of_sync", "down". */
const char *srv_redis_ready_phase_name(enum srv_redis_phase p);
/* "2026-12-05T08:47:17Z" (UTC) into buf (at least 21 bytes). */
void srv_redis_ready_time(int64_t ms, char *buf, size_t cap);

/*
 * /readyz with --redis, for a node that is not draining: the status (200
 * or 503) and a text body of one line into body (cap at least
 * SRV_REDIS_READY_BODY_MAX). Never joined: 503, "waiting: ..." what for.
 * Joined: 200 "ready". Joined once and not now (Redis down, the directory
 * out of sync): "degraded: ...", 200, or 503 when requires_redis
 * (--ready-requires-redis).
 */
unsigned srv_redis_ready_answer(const struct srv_redis_ready_view *v,
                                bool requires_redis, char *body, size_t cap);

#endif
