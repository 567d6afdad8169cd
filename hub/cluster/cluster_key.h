/*
 * hub/cluster/cluster_key.h - the cluster key (--cluster-key-file,
 * docs/SCALING.md "The cluster key"): what a node MACs into what it publishes
 * through Redis, and what a receiving node checks, so that only the cluster's
 * members can inject envelopes and member events.
 *
 * A MAC is the first HUB_CLUSTER_KEY_MAC_LEN bytes of HMAC-SHA256 (OpenSSL)
 * with the first key over: the prefix, the node id, a per-node counter, the
 * sender's wall-clock time (ms), a domain ("env", "mem") and the parts, each
 * string length-prefixed (u32) and each integer big-endian (u64), so that no
 * two inputs share an encoding. The counter is max(last + 1, now in µs): it
 * only grows, also across a restart (unless the node sent more than a message
 * a microsecond on average). Verification accepts either key (a rotation);
 * then a message is fresh when its time is within the window (--node-lease) of
 * the receiver's clock and its counter is above the last one accepted from
 * that node. The table of last counters holds only nodes whose MAC verified,
 * at most HUB_CLUSTER_KEY_MAX_NODES (entries past the window are dropped
 * first: a message that old fails the time check).
 *
 * Thread: any; one mutex (the backplane thread is the only user today).
 */
#ifndef HUB_CLUSTER_KEY_H
#define HUB_CLUSTER_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HUB_CLUSTER_KEY_MAC_LEN 16
#define HUB_CLUSTER_KEY_MIN_KEY 16
#define HUB_CLUSTER_KEY_MAX_KEY 1024
#define HUB_CLUSTER_KEY_MAX_NODES 1024
/* The trailer after a signed envelope: u64 counter, u64 time, the MAC. */
#define HUB_CLUSTER_KEY_TRAILER (8 + 8 + HUB_CLUSTER_KEY_MAC_LEN)

struct hub_cluster_key;

struct hub_cluster_key_part {
    const void *p;
    size_t n;
};

/*
 * A key set: key1 signs, key1 or key2 (len 0: none) verifies. prefix and
 * node are this node's (copied). window_ms: how far a message's time may
 * be from the receiver's clock. NULL on a bad length or out of memory.
 */
struct hub_cluster_key *hub_cluster_key_create(const void *key1, size_t len1,
                                               const void *key2, size_t len2,
                                               const char *prefix,
                                               const char *node,
                                               uint64_t window_ms);
void hub_cluster_key_destroy(struct hub_cluster_key *k);

/*
 * Read a key file: one key a line (at least HUB_CLUSTER_KEY_MIN_KEY bytes, at
 * most HUB_CLUSTER_KEY_MAX_KEY, trailing spaces and CR cut), one or two lines;
 * blank lines are skipped. 0 with the keys (owned, *len2 0 when one), or
 * -errno with a reason in why.
 */
int hub_cluster_key_read_file(const char *path, char **key1, size_t *len1,
                              char **key2, size_t *len2, char *why,
                              size_t why_len);

/* Sign parts under domain as this node: *ctr and *time_ms are the values
 * covered (stamp them into the message), mac the MAC. 0, -ENOMEM. */
int hub_cluster_key_sign(struct hub_cluster_key *k, const char *domain,
                         const struct hub_cluster_key_part *parts, size_t n,
                         uint64_t *ctr, uint64_t *time_ms,
                         unsigned char mac[HUB_CLUSTER_KEY_MAC_LEN]);

enum hub_cluster_key_verdict {
    HUB_CLUSTER_KEY_OK = 0,
    HUB_CLUSTER_KEY_FORGED = 1, /* does not verify with either key */
    HUB_CLUSTER_KEY_REPLAY = 2, /* verifies, but stale or seen */
};

/*
 * Check a message from node (its id), with its counter, time and MAC.
 * fresh: also the window and the counter (a message on the bus); false
 * for stored state (a cache entry read back from Redis). OK records the
 * counter as the node's last.
 */
enum hub_cluster_key_verdict
hub_cluster_key_verify(struct hub_cluster_key *k, const char *node,
                       size_t node_len, uint64_t ctr, uint64_t time_ms,
                       const char *domain,
                       const struct hub_cluster_key_part *parts, size_t n,
                       const unsigned char *mac, bool fresh);

#endif
