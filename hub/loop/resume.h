/*
 * hub/loop/resume.h - recovery on a loop (docs/RECOVERY.md): what a session
 * that asked to resume (lubdub:resume, docs/PROTOCOL.md) gets instead of a
 * history channel's frames, and the replay of what it missed.
 *
 * Markers. A frame whose publication has an id in its channel's history
 * (struct hub_frame's hseq) goes to such a session as its pair: the
 * lubdub:id marker and the frame in one buffer (hub_loop_rframe), made
 * once per publication by the first loop that needs it and shared like the
 * frame. Other sessions get the frame itself: a session that never asked
 * costs nothing more.
 *
 * Guards. A resumed subscription starts with the replay of what the client
 * missed (frames the history store kept, taken at the subscription) and a
 * floor per origin: the last seq the client knows once the replay is
 * through. Until its queue of replay frames has gone out, every live frame
 * for it is held at the queue's tail (or dropped when at or under the
 * floor: the replay has it); then live frames at or under the floor are
 * dropped and the first one above it ends the guard (one origin's frames
 * reach a loop in seq order, so none at or under it can follow). The replay
 * is paced by the session's queue: frames go while it is under the low
 * mark (HUB_RX_LOW), the rest as it drains, never past max_queue. A guard
 * holds at most max_queue bytes of live frames beyond its replay (the
 * replay itself is bounded by the history's size per channel, and holds
 * references to frames the history keeps anyway): past that the session
 * is a slow consumer and closes 4100.
 *
 * State lives in a per-loop table keyed by session, made when a session
 * enables resume: struct hub_session holds only two bits (resume, rguard),
 * so idle sessions cost nothing more. The protocol layer (hub/pusher/
 * recover.c) keeps its own state for the session here too (proto).
 *
 * Thread: the loop's own (hub_loop_rframe may race other loops on one
 * frame: the compare-and-swap keeps one pair).
 */
#ifndef HUB_RESUME_H
#define HUB_RESUME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hub/wire/frame.h"

struct hub_loop;
struct hub_session;
struct hub_sub;

/* Origins one floor tracks. */
#define HUB_RESUME_ORIGINS 16

struct hub_resume_floor {
    const char *origin;            /* compared by content; copied */
    uint64_t seq;
};

/*
 * The frame a resuming session gets for f (f->hseq set): the marker and f,
 * or with z the marker and f's compressed variant (hub/loop/compress.h).
 * Borrowed (f holds it); NULL when out of memory.
 */
struct hub_frame *hub_loop_rframe(struct hub_loop *l, struct hub_frame *f,
                                  bool z);

/* s asked to resume: markers from now on. 0 or -ENOMEM. */
int hub_resume_enable(struct hub_session *s);
bool hub_resume_enabled(const struct hub_session *s);

/* The protocol layer's own state for s (NULL until set); set replaces
 * (and frees with the old free function) what was there. */
void *hub_resume_proto(const struct hub_session *s);
void hub_resume_set_proto(struct hub_session *s, void *proto,
                          void (*proto_free)(void *));

/*
 * Guard sub (a subscription of s just made, resume enabled): takes the
 * references in replay[0..n) (history frames, oldest first; the array
 * stays the caller's) and done (sent once the replay is out: lubdub:resumed;
 * may be NULL), floors as above, then sends what the queue takes now.
 * 0, or -ENOMEM (then s is closing with 1011 and the references were
 * dropped).
 */
int hub_resume_guard(struct hub_session *s, struct hub_sub *sub,
                     const struct hub_resume_floor *floor, unsigned n_floor,
                     struct hub_frame *const *replay, size_t n,
                     struct hub_frame *done);

/*
 * A cluster (hub/pusher/recover.c): guard sub before what it gets is
 * known (a read of the channel's stream is on its way): every live frame
 * for it is held, none dropped, nothing sent. 0, or -ENOMEM (s closing).
 */
int hub_resume_guard_wait(struct hub_session *s, struct hub_sub *sub);
/*
 * The read came back: first[0..n_first) (references taken: what goes
 * before anything else, e.g. lubdub:pos and subscription_succeeded, or
 * lubdub:resume_failed), then replay[0..n) (references taken) with done
 * after it, then the held frames above floor; then the guard goes on as
 * hub_resume_guard()'s. When sub has no waiting guard (it left) the
 * references are dropped. 0, or -ENOMEM (s closing).
 */
int hub_resume_guard_fill(struct hub_session *s, struct hub_sub *sub,
                          struct hub_frame *const *first, size_t n_first,
                          const struct hub_resume_floor *floor,
                          unsigned n_floor, struct hub_frame *const *replay,
                          size_t n, struct hub_frame *done);
/* Whether sub of s still waits for its read (hub_resume_guard_wait). */
bool hub_resume_waiting(struct hub_session *s, const struct hub_sub *sub);
/*
 * The session of l whose address was key and whose socket id is
 * (sid_hi, sid_lo), if it still lives and resumes; else NULL. For an
 * answer that comes back to l after the session may have gone.
 */
struct hub_session *hub_resume_session(struct hub_loop *l, const void *key,
                                       uint64_t sid_hi, uint32_t sid_lo);

/*
 * The fan-out's question for a guarded session (s->rguard) about a live
 * history frame f for sub: true when it must not go now (held for after
 * the replay, or one the replay had); false to deliver it as usual.
 */
bool hub_resume_take(struct hub_loop *l, struct hub_sub *sub,
                     struct hub_frame *f);

/* s's queue drained under the low mark: send more of its replays. */
void hub_resume_pump(struct hub_session *s);

/* sub is going (an unsubscribe, the session's end): drop its guard. */
void hub_resume_sub_gone(struct hub_session *s, struct hub_sub *sub);
/* s ends: drop its state (after its subscriptions went). */
void hub_resume_session_gone(struct hub_session *s);

/* Free the loop's table (hub_loop_destroy; sessions are gone). */
void hub_loop_resume_fini(struct hub_loop *l);

#endif
