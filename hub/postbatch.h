/*
 * hub/postbatch.h - a thread's publications for the loops, held back and
 * pushed as one chain per loop.
 *
 * The backplane thread receives remote publications one at a time (one
 * Redis message each). Posting each at once lets a receiving loop wake,
 * deliver one message and write one frame per subscriber before the next
 * arrives. A thread that calls hub_post_batch_begin() instead has
 * hub_fanout_loops() / hub_fanout_terminate() (hub/publish.c) hold their
 * nodes per target loop until hub_post_batch_flush(), which pushes each
 * loop's chain with one CAS (hub_inbox_push_chain) and wakes each loop at
 * most once. The backplane flushes at the end of every event-loop pass,
 * i.e. after everything parsed from one read (server/evbatch.c), so a loop
 * delivers k messages before its subscribers are written.
 *
 * Order: a loop's held nodes keep the order they were added in and go out
 * before any later node for that loop from this thread. Exactly-once: every
 * held node is pushed (run or dropped by the loop as any other node).
 * Teardown: held chains are pushed under the hub's post_mu, and dropped
 * once hub_post_gate_close() ran, so none reaches a destroyed loop.
 * Bounds: a loop's chain is pushed at once when it reaches
 * HUB_POST_BATCH_MAX_NODES nodes or HUB_POST_BATCH_MAX_BYTES frame bytes, so
 * latency added is at most one pass of the holding thread.
 *
 * Thread: all state is the calling thread's own (thread-local); other
 * threads post directly. Loops are never batching threads.
 */
#ifndef HUB_POSTBATCH_H
#define HUB_POSTBATCH_H

#include <stdbool.h>
#include <stddef.h>

struct hub_inbox_node;
struct hub_loop;

#define HUB_POST_BATCH_MAX_NODES 64u
#define HUB_POST_BATCH_MAX_BYTES (64u * 1024u)
#define HUB_POST_BATCH_LOOPS 16u  /* loops held per thread; more post directly */

/* Start holding this thread's posts (nested calls are counted). */
void hub_post_batch_begin(void);
/* Push every loop's held chain; wake each loop whose inbox was empty. */
void hub_post_batch_flush(void);
/* Flush, and stop holding when the outermost begin is ended. */
void hub_post_batch_end(void);
/* True when this thread holds its posts. */
bool hub_post_batch_active(void);

/*
 * Post n to l: held when this thread batches (bytes counts towards the
 * bound), else pushed at once as hub_loop_post() does.
 */
void hub_post_batched(struct hub_loop *l, struct hub_inbox_node *n,
                      size_t bytes);

/*
 * Any thread, before a loop stops servicing for good (its lws context and
 * the loop go next): held chains flushed from then on are dropped (each
 * node's drop(), as hub_loop_destroy() would), never pushed. Idempotent.
 */
struct hub;
void hub_post_gate_close(struct hub *h);

/* Figures of this thread's batching since begin (tests, profiling). */
struct hub_post_batch_stats {
    unsigned long long posts;   /* nodes through hub_post_batched */
    unsigned long long pushes;  /* chains pushed */
    unsigned long long wakes;   /* pushes that woke a loop */
};
void hub_post_batch_stats(struct hub_post_batch_stats *out);

#endif
