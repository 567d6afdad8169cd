/*
 * hub/loop/pending.h - the loop's list of sessions with new output (Redis's
 * clients_pending_write): a session whose queue went non-empty while open
 * joins it, and the transport writes every listed session once after the
 * read pass that queued the data (hub_loop_flush), one corked write each,
 * instead of a poll round trip per session. A leaf: it holds pointers and
 * knows nothing of what a session is.
 *
 * The first add after a flush reports 1, so the session asks the
 * transport for one flush (hub_transport_ops.flush_soon); a session is
 * listed at most once, guarded by its want_writable flag.
 *
 * Thread: the loop's own.
 */
#ifndef HUB_PENDING_H
#define HUB_PENDING_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

struct hub_session;

struct hub_pending {
    struct hub_session **v;        /* NULL entries: forgotten */
    uint32_t n, cap;
    bool armed;                    /* a flush has been asked for */
};

/* List s. 1 when the list was not armed (the caller asks for a flush),
 * 0 when a flush is already due, -ENOMEM (s not listed). */
int hub_pending_grow(struct hub_pending *p); /* 0 or -ENOMEM */

/* Inline: once per delivery of a fan-out; growth is rare. */
static inline int hub_pending_add(struct hub_pending *p, struct hub_session *s)
{
    if (p->n == p->cap && hub_pending_grow(p))
        return -ENOMEM;
    p->v[p->n++] = s;
    if (p->armed)
        return 0;
    p->armed = true;
    return 1;
}
/* s goes away: clear every entry for it. */
void hub_pending_forget(struct hub_pending *p, struct hub_session *s);
/*
 * Call write(ctx, s) for each session listed when the flush began
 * (forgotten ones skipped), then drop those entries. Sessions listed
 * while it runs stay for the next flush; their add re-armed the list.
 */
void hub_pending_flush(struct hub_pending *p,
                       void (*write)(void *ctx, struct hub_session *s),
                       void *ctx);
void hub_pending_fini(struct hub_pending *p);

#endif
