/*
 * hub/pusher/recover.h - recovery's protocol on a Pusher session
 * (docs/PROTOCOL.md "Recovery", docs/RECOVERY.md): lubdub:resume from the
 * client, and what a new subscription to a channel with history gets
 * around its pusher_internal:subscription_succeeded: lubdub:pos before it
 * (a fresh start), or after it the replay of what the client missed,
 * then lubdub:resumed, or lubdub:resume_failed when history does not reach
 * back. The loop's side (markers, guards, the paced replay) is
 * hub/loop/resume.h; the history itself hub/channel/history.h.
 *
 * What a session's lubdub:resume leaves here (until its subscriptions
 * take it) is bounded: at most the app's subscription cap of channels (100
 * when it has none), each with at most HUB_HISTORY_ORIGINS ids, and at
 * most 4 earlier socket ids; further channels are ignored.
 *
 * Thread: the session's loop only.
 */
#ifndef HUB_RECOVER_H
#define HUB_RECOVER_H

#include <stdbool.h>
#include <stddef.h>

struct hub_frame;
struct hub_msg;
struct hub_session;
struct hub_sub;

/* lubdub:resume from s (any number of times: channels merge). */
void hub_recover_on_resume(struct hub_session *s, const struct hub_msg *m);

/*
 * s's new subscription sub to name was just confirmed: send ok (its
 * subscription_succeeded) with what recovery adds around it. Returns true
 * when the subscription was resumed (its replay replaces the cache
 * channel's last event, which the client already had or gets replayed).
 */
bool hub_recover_joined(struct hub_session *s, struct hub_sub *sub,
                        const char *name, size_t len, struct hub_frame *ok);

/* sub of s is leaving. */
void hub_recover_left(struct hub_session *s, struct hub_sub *sub);

#endif
