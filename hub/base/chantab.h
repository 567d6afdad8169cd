/*
 * hub/base/chantab.h - the (app, channel name) hash table under both channel
 * indexes: the loop-local one (hub/loop/chanmap.h) and the hub-wide directory
 * (hub/loop/directory.h).
 *
 * Intrusive: the caller embeds a struct hub_chan_node in its own record,
 * fills in the key (app, name, name_len) and the hash, and owns the
 * memory; the table only links nodes. A keyed hash of (app, name)
 * (hub/base/hash.h: SipHash-2-4 under the process key, so a peer cannot choose
 * names that share a bucket) picks one of a power-of-two number of
 * buckets, which double when the count reaches the bucket count (load 1).
 * Channels are few next to messages, so the doubling on a subscribe is off
 * the hot path; if it cannot allocate, the table keeps its buckets and the
 * chains get longer, still correct.
 *
 * Invariants (hub_chantab_check): mask + 1 is a power of two; every node
 * sits in bucket hash & mask and its hash is hub_chan_hash() of its key;
 * count is the number of linked nodes; no key is linked twice.
 *
 * Thread: none of its own; each index brings its own rule (loop thread,
 * or the directory's mutex).
 */
#ifndef HUB_CHANTAB_H
#define HUB_CHANTAB_H

#include <stddef.h>
#include <stdint.h>

struct hub_chan_node {
    struct hub_chan_node *hnext;
    uint64_t hash;                 /* hub_chan_hash(app, name, name_len) */
    unsigned app;
    uint32_t name_len;
    const char *name;              /* borrowed: the record's own copy */
};

struct hub_chantab {
    struct hub_chan_node **b;
    uint32_t mask, count;
};

/* hub_hash_app(app, name, len): keyed, so only for this process's tables;
 * never send, store or log it. */
uint64_t hub_chan_hash(unsigned app, const char *name, size_t len);

/* buckets: a power of two. 0 or -ENOMEM. */
int hub_chantab_init(struct hub_chantab *t, uint32_t buckets);
/* Frees the buckets, not the nodes (unlink or free those first). */
void hub_chantab_fini(struct hub_chantab *t);

/* Borrowed; NULL when absent. hash = hub_chan_hash(app, name, len). */
struct hub_chan_node *hub_chantab_find(const struct hub_chantab *t,
                                       unsigned app, const char *name,
                                       size_t len, uint64_t hash);
/* Link n (key and hash set, key not yet present). Grows at load 1. */
void hub_chantab_insert(struct hub_chantab *t, struct hub_chan_node *n);
/* Unlink n, which must be linked. */
void hub_chantab_remove(struct hub_chantab *t, struct hub_chan_node *n);
/*
 * Iteration: the node after n (NULL: the first), NULL at the end. Take the
 * next node before unlinking or freeing n; inserting while iterating may
 * visit a node twice or not at all.
 */
struct hub_chan_node *hub_chantab_next(const struct hub_chantab *t,
                                       const struct hub_chan_node *n);

/* Walk the table and check the invariants above: 0 or -EFAULT. */
int hub_chantab_check(const struct hub_chantab *t);

#endif
