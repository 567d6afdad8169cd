/*
 * hub/base/hash.h - the keyed hash of every in-process table that a peer's
 * string indexes: SipHash-2-4 (libsodium's crypto_shorthash_siphash24,
 * 64-bit output) under one 16-byte key per process.
 *
 * Why keyed: a table picks its bucket from the low bits of a hash. With an
 * unkeyed hash (FNV-1a, as these tables had) anyone can make, offline and
 * cheaply, thousands of channel names or user ids that agree in those low
 * bits (FNV-1a's low k bits depend only on the low k bits of its state, so
 * a multicollision is a few hundred tries per doubling). Subscribing to
 * them builds one long chain in the hub-wide directory, walked under its
 * mutex by every later subscribe of any peer. Under a secret random key
 * the bucket of a name cannot be predicted, so a peer's names spread like
 * random ones (docs/RELIABILITY.md, "Hash flooding").
 *
 * Keyed (hub_hash, hub_hash_app): everything the hub only keeps in this
 * process's memory and rebuilds after a restart:
 *   - hub_chan_hash (hub/base/chantab.h), the (app, string) table under the
 *     loop-local channel index (hub/loop/chanmap.c), the hub-wide directory
 *     (hub/loop/directory.c), the cluster's channel refcounts and presence
 *     views (hub/cluster/cluster_dir.c, cluster_view.c), the online registry of signed-in and watched
 *     user ids (hub/channel/online.c), the cache channels' store (hub/channel/cache.c),
 *     the subscription_count coalescer and its choice of loop
 *     (hub/channel/subcount.c), and the backplane thread's channel tables
 *     (server/redis/redis.c);
 *   - the webhook engine's per (channel, user) state (hub/webhook/engine.c);
 *   - the app table's indexes by key and by id (hub/app/apptab.c), which the
 *     URL's /app/{key} and the REST path's app id look up.
 * No keyed value leaves the process: none is sent to another node, stored
 * in Redis or SQLite, or logged. Iteration order over these tables (a
 * REST channel list, a resync after reconnect) differs from one process to
 * the next; nothing may depend on it.
 *
 * Not keyed, on purpose: hashes that name a thing across nodes or
 * restarts, which every node and every later process must compute alike.
 * They index no table a peer fills, so flooding them buys nothing:
 *   - the webhook consumer group, FNV-1a 64 of the endpoint URL
 *     (hub_wh_stream_group, hub/webhook/wh_stream.h), an operator's URL;
 *   - the batch Idempotency-Key of cluster webhooks (server/webhook/
 *     webhook_stream_read.c), which a retry from another node must repeat;
 *   - the node tag (server/redis/cluster.c), folded from the node id.
 * jansson's own objects are seeded separately (json_object_seed(0) in
 * server/loop/threads.c).
 *
 * The key's life: hub_hash_init() draws it from libsodium's randombytes
 * (the kernel's getrandom) once, first thing in main(), before any table
 * is built or any thread started; it never changes afterwards (an app
 * reload keeps it: the tables outlive the reload). Until then the key is
 * all zeros, which unit tests rely on for a fixed layout;
 * hub_hash_set_key() gives them any other fixed key.
 *
 * Thread: hub_hash_init and hub_hash_set_key before any other thread
 * hashes (thread creation publishes the key); hub_hash and hub_hash_app
 * from any thread.
 */
#ifndef HUB_HASH_H
#define HUB_HASH_H

#include <stddef.h>
#include <stdint.h>

#define HUB_HASH_KEY_BYTES 16

/* A random key for this process: 0, or -EIO when libsodium cannot start. */
int hub_hash_init(void);

/* Tests and benches: a fixed key instead (copied). */
void hub_hash_set_key(const unsigned char key[HUB_HASH_KEY_BYTES]);

/* SipHash-2-4 of p[0..n) under the process key. */
uint64_t hub_hash(const void *p, size_t n);

/*
 * The hash of (tweak, p[0..n)): hub_hash(p, n) with the tweak (an app
 * index, or one with a flag folded in) mixed in by an odd multiplier, so
 * equal strings of different apps fall apart. Two keys of one tweak
 * collide only as their SipHash values do.
 */
uint64_t hub_hash_app(unsigned tweak, const void *p, size_t n);

#endif
