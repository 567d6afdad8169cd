/*
 * server/redis/redis_int.h - the state of the backplane thread
 * (server/redis/redis.h), shared by its files: redis.c (the connections,
 * the thread, the ops' dispatch), redis_pub.c (publishing, the cache
 * channels' entries) and redis_sub.c (subscriptions, receiving). Types
 * and limits only.
 *
 * Thread: the backplane thread (create and stop: the main thread).
 */
#ifndef SRV_REDIS_INT_H
#define SRV_REDIS_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <ev.h>
#include "server/redis/redis_async.h"

#include "hub/base/chantab.h"
#include "hub/cluster/cluster.h"
#include "hub/loop/stats.h"
#include "server/redis/redis_conn.h"
#include "server/redis/redis_ready.h"

#define MAX_INFLIGHT 100000     /* PUBLISHes awaiting their reply */
#define MAX_INFLIGHT_BYTES (64u * 1024 * 1024) /* and their envelope bytes */
#define MAX_TX_CHANNELS 65536   /* then the seq table restarts (new epoch) */

/* Sending side: the next seq per broker channel. */
struct txrec {
    struct hub_chan_node node;
    uint64_t seq;
    char name[];
};

/* Receiving side: a broker channel this node wants (want), is subscribed
 * to on the current connection (subscribed), or still has UNSUBSCRIBEs in
 * flight for (a SUBSCRIBE waits for their reply: hiredis drops the
 * channel's callback on it). */
struct rxrec {
    struct hub_chan_node node;
    bool want, subscribed, confirmed; /* confirmed: Redis said subscribe */
    bool member;                   /* a presence member-event channel */
    unsigned unsub_inflight;
    struct hub_cluster_rx rx;
    char name[];
};

struct srv_redis {
    struct srv_redis_conn conn;          /* the URL, the password in force,
                                            TLS, the sentinels */
    struct srv_redis_sentinel *sentinel; /* NULL: the URL's address */
    struct srv_redis_addr at;            /* with sentinels: the primary named */
    char *node_id;
    struct hub_cluster *c;
    struct hub_backplane_stats *st;
    pthread_t thread;
    bool started;
    struct ev_loop *loop;
    ev_async wake_w, stop_w;
    ev_timer retry_w, connect_w, ping_w;
    struct srv_redis_async *cmd, *sub;
    unsigned setup_left;           /* setup replies still awaited */
    bool up, ever_up, told_down;
    atomic_bool up_flag;
    unsigned attempts;             /* connects failed since the last up */
    struct srv_redis_ready ready;  /* /readyz's view (any thread reads) */
    uint64_t epoch, rng;
    struct hub_chantab tx, rx;
    /* PUBLISHes awaiting Redis's reply, oldest first: their envelope
     * sizes in a ring (replies come back in order), so that a slow Redis
     * never makes hiredis's output buffer grow past MAX_INFLIGHT_BYTES. */
    uint32_t *ring;
    size_t ring_head, inflight;
    uint64_t inflight_bytes;
    uint64_t n_confirmed;          /* rx records with confirmed set */
    uint64_t ping_at_ns;
    bool ping_out;
    uint64_t n_loaded;             /* cache entries kept by this load */
    uint64_t hist_warned_ms;       /* a refused stream read last logged */
    /* Tests only (LUBDUB_TEST_DROP_RX=n): drop every nth message received
     * on a channel, as Redis's at-most-once pub/sub may; 0: none. */
    unsigned test_drop_every;
    uint64_t test_rx_n;
    struct srv_redis_dir *dir;     /* the cluster-wide directory */
    struct srv_redis_lease *lease; /* node lease and reaper; owned, or NULL */
    /* The socket inspector across nodes (server/redis/redis_inspect.h);
     * NULL until attached. */
    struct srv_redis_inspect *insp;
};

#endif
