/*
 * hub/loop/publish.c - publication of hub/loop/publish.h: local delivery under the
 * queue budget, the cross-loop fan-out and the terminate order.
 */
#include "hub/loop/publish.h"

#include <assert.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/loop/backplane.h"
#include "hub/loop/budget.h"
#include "hub/loop/chanmap.h"
#include "hub/loop/compress.h"
#include "hub/loop/resume.h"
#include "hub/loop/loop.h"
#include "hub/loop/session.h"

int hub_skip_parse(struct hub_skip *sk, const char *sid)
{
    char *end;
    unsigned long long hi, lo;

    sk->set = false;
    if (!sid || !(*sid >= '0' && *sid <= '9'))
        return -EINVAL;
    errno = 0;
    hi = strtoull(sid, &end, 10);
    if (errno || *end != '.' || !(end[1] >= '0' && end[1] <= '9'))
        return -EINVAL;
    lo = strtoull(end + 1, &end, 10);
    if (errno || *end || lo > UINT32_MAX)
        return -EINVAL;
    sk->set = true;
    sk->hi = hi;
    sk->lo = (uint32_t)lo;
    return 0;
}

/*
 * A publication for the other loops: one block with one inbox node per
 * loop, all pointing at it; the frame reference and the block go with the
 * last node run or dropped.
 */
struct hub_pub;

struct pub_node {
    struct hub_inbox_node node;
    struct hub_pub *pub;
};

struct hub_pub {
    atomic_uint refs;
    struct hub_frame *frame;
    unsigned app;
    struct hub_skip skip;
    size_t name_len;
    char *name;
    struct pub_node nodes[];
};

static void pub_unref(struct hub_pub *p)
{
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1) {
        hub_frame_unref(p->frame);
        free(p);
    }
}

/* Whether a publication skips this membership: the excluded socket, or
 * one that joined at or after a member event's sequence. skip may be NULL. */
static inline bool skipped(const struct hub_sub *sub,
                           const struct hub_skip *skip)
{
    return skip &&
           ((skip->set && sub->s->sid_hi == skip->hi &&
             sub->s->sid_lo == skip->lo) ||
            (skip->member_seq && sub->joined_seq >= skip->member_seq));
}

/*
 * Fan-out under the queue budget (hub_loop_budget). The loop's queued
 * bytes are its own, so one comparison per publish decides: when every
 * member's copy fits, deliver and account once for all; past the high
 * mark, evict the furthest behind first. When it does not fit, evict, then
 * go recipient by recipient: one behind by more than an even share, or one
 * the budget still cannot take, does not get the frame (counted in
 * queue_budget_drops) and is closed 4100 (queue_budget), since a Pusher
 * stream with a hole in it is worse than a reconnect. So a publish never
 * takes the loop past its budget.
 */
/* Before a walk that needs `need` more bytes of the loop's budget: evict
 * what it takes; true when even so they do not fit (tight: then *share is
 * each session's even share). */
static bool budget_before(struct hub_loop *l, uint64_t budget, uint64_t need,
                          uint64_t *share)
{
    uint64_t low = hub_budget_low(budget);

    if (hub_loop_queued(l) + need > budget) {
        hub_loop_evict(l, need < low ? low - need : 0, false);
        *share = budget / (l->shard.count ? l->shard.count : 1);
        return true;
    }
    if (hub_loop_queued(l) + need > hub_budget_high(budget))
        hub_loop_evict(l, low, false);
    return false;
}

unsigned hub_deliver_local(struct hub_loop *l, unsigned app, const char *name,
                           size_t len, struct hub_frame *f,
                           const struct hub_skip *skip)
{
    struct hub_lchan *ch;
    uint64_t budget, share = 0;
    struct hub_list *pos;
    struct hub_frame *zf = NULL; /* f for compressing members, once asked */
    /* What resuming members get (hub/loop/resume.h), plain and compressed. */
    struct hub_frame *rf[2] = { NULL, NULL };
    unsigned n = 0, nz = 0, nr[2] = { 0, 0 }, sent = 0;
    bool tight = false, forced = false;

    /* Whether or not anyone here listens: where fresh subscriptions of
     * resuming sessions start (hub/loop/resume.h). */
    if (f->hseq)
        l->hist_seen = f->hseq;
    ch = hub_chanmap_find(l->chans, app, name, len);
    if (!ch)
        return 0;
    l->now_ms = hub_clock_now_ms(l->clock);
    budget = hub_loop_budget(l);
    if (budget)
        tight = budget_before(l, budget, (uint64_t)ch->n_members * f->len,
                              &share);
    hub_list_for_each(pos, &ch->members) {
        struct hub_sub *sub = hub_container_of(pos, struct hub_sub,
                                               chan_link);
        struct hub_session *s = sub->s;

        if (skipped(sub, skip))
            continue;
        if (s->resume && f->hseq) {
            /* A history frame to a session that resumes: its pair, unless
             * a guard holds it or the replay had it. */
            struct hub_frame *g;

            if (s->rguard && hub_resume_take(l, sub, f))
                continue;
            g = rf[s->zout] ? rf[s->zout]
                            : (rf[s->zout] = hub_loop_rframe(l, f, s->zout));
            if (!g) {
                hub_session_close(s, 1011, "out of memory", HUB_CLOSE_ERROR,
                                  true);
                continue;
            }
            if (!tight) {
                if (hub_session_push(s, g) == 0)
                    nr[s->zout]++;
            } else if (hub_budget_admit(l, s, share, budget, g->len,
                                        &forced) &&
                       hub_session_send(s, g) == 0) {
                sent++;
            }
            continue;
        }
        if (!tight) {
            /* Nothing in this walk drops another session's queue: the
             * references and bytes are added once, after it, for the
             * plain frame and for its compressed variant apart. */
            struct hub_frame *g = f;

            if (s->zout)
                g = zf ? zf : (zf = hub_loop_zframe(l, f));
            if (hub_session_push(s, g) == 0) {
                if (g == f)
                    n++;
                else
                    nz++;
            }
        } else if (hub_budget_admit(l, s, share, budget, f->len, &forced) &&
                   hub_session_send(s, f) == 0) {
            /* A later recipient's admission may evict (close, dropping
             * its queue) one already given f, so each copy holds its own
             * reference from the start, and its bytes are counted at once
             * for the next recipient's check. */
            sent++;
        }
    }
    if (n) {
        hub_frame_ref_n(f, n);
        hub_loop_queued_add(l, (uint64_t)n * f->len);
    }
    if (nz) {
        hub_frame_ref_n(zf, nz);
        hub_loop_queued_add(l, (uint64_t)nz * zf->len);
    }
    for (unsigned k = 0; k < 2; k++)
        if (nr[k]) {
            hub_frame_ref_n(rf[k], nr[k]);
            hub_loop_queued_add(l, (uint64_t)nr[k] * rf[k]->len);
        }
    HUB_STAT_ADD(l->stats.publishes, 1);
    return n + nz + nr[0] + nr[1] + sent;
}

/*
 * k frames to one channel's members in one walk: the batch of
 * hub_defer_flush(). Each member gets all k in order or, when they do not
 * all fit its queue, one by one as hub_deliver_local() would give them.
 * When the budget is tight the frames go through hub_deliver_local() one
 * at a time, its admission and eviction unchanged.
 */
static void deliver_batch(struct hub_loop *l, unsigned app, const char *name,
                          size_t len, struct hub_frame *const *fs, unsigned k,
                          const struct hub_skip *skip)
{
    struct hub_lchan *ch = hub_chanmap_find(l->chans, app, name, len);
    uint64_t budget, total = 0, total_z = 0;
    struct hub_list *pos;
    /* What compressing members get, made when the first one is met. */
    struct hub_frame *fz[HUB_DEFER_MAX];
    bool have_z = false;
    unsigned n = 0, nz = 0;

    if (!ch)
        return;
    for (unsigned j = 0; j < k; j++)
        total += fs[j]->len;
    l->now_ms = hub_clock_now_ms(l->clock);
    budget = hub_loop_budget(l);
    if (budget) {
        uint64_t need = (uint64_t)ch->n_members * total;

        if (hub_loop_queued(l) + need > budget) {
            for (unsigned j = 0; j < k; j++)
                hub_deliver_local(l, app, name, len, fs[j], skip);
            return;
        }
        if (hub_loop_queued(l) + need > hub_budget_high(budget))
            hub_loop_evict(l, hub_budget_low(budget), false);
    }
    hub_list_for_each(pos, &ch->members) {
        struct hub_sub *sub = hub_container_of(pos, struct hub_sub,
                                               chan_link);
        struct hub_session *s = sub->s;
        int got;

        if (skipped(sub, skip))
            continue;
        if (s->zout && !have_z) {
            for (unsigned j = 0; j < k; j++) {
                fz[j] = hub_loop_zframe(l, fs[j]);
                total_z += fz[j]->len;
            }
            have_z = true;
        }
        got = s->zout ? hub_session_push_n(s, fz, k, total_z)
                      : hub_session_push_n(s, fs, k, total);
        if (got > 0 && s->zout)
            nz++;
        else if (got > 0)
            n++;
        else if (got < 0)
            for (unsigned j = 0; j < k; j++)
                (void)hub_session_send(s, fs[j]);
    }
    if (n) {
        for (unsigned j = 0; j < k; j++)
            hub_frame_ref_n(fs[j], n);
        hub_loop_queued_add(l, (uint64_t)n * total);
    }
    if (nz) {
        for (unsigned j = 0; j < k; j++)
            hub_frame_ref_n(fz[j], nz);
        hub_loop_queued_add(l, (uint64_t)nz * total_z);
    }
    HUB_STAT_ADD(l->stats.publishes, k);
}

void hub_defer_begin(struct hub_loop *l)
{
    l->defer.open = true;
}

void hub_defer_flush(struct hub_loop *l)
{
    struct hub_defer *d = &l->defer;
    unsigned k = d->k;

    if (!k)
        return;
    d->k = 0; /* first: nothing below defers again, but stay exact */
    if (k == 1)
        hub_deliver_local(l, d->app, d->name, d->len, d->f[0], &d->skip);
    else
        deliver_batch(l, d->app, d->name, d->len, d->f, k, &d->skip);
    for (unsigned j = 0; j < k; j++)
        hub_frame_unref(d->f[j]);
}

void hub_defer_end(struct hub_loop *l)
{
    hub_defer_flush(l);
    l->defer.open = false;
}

static bool skip_eq(const struct hub_skip *a, const struct hub_skip *b)
{
    return a->set == b->set && a->hi == b->hi && a->lo == b->lo &&
           a->member_seq == b->member_seq;
}

/* Join r to l's batch: 0, or -ENOMEM (nothing held; deliver it now). */
static int defer_add(struct hub_loop *l, const struct hub_pub_req *r)
{
    struct hub_defer *d = &l->defer;
    struct hub_skip ex = r->skip ? *r->skip : (struct hub_skip){ 0 };

    if (d->k && (d->k == HUB_DEFER_MAX || d->app != r->app ||
                 d->len != r->len || memcmp(d->name, r->name, r->len) ||
                 !skip_eq(&d->skip, &ex)))
        hub_defer_flush(l);
    if (!d->k) {
        if (r->len + 1 > d->cap) {
            char *name = realloc(d->name, r->len + 1);

            if (!name)
                return -ENOMEM;
            d->name = name;
            d->cap = r->len + 1;
        }
        memcpy(d->name, r->name, r->len);
        d->name[r->len] = '\0';
        d->len = r->len;
        d->app = r->app;
        d->skip = ex;
    }
    d->f[d->k++] = hub_frame_ref(r->f);
    return 0;
}

/* Close this loop's sessions on the user's #server-to-user- channel. */
static void terminate_local(struct hub_loop *l, unsigned app, const char *name,
                            size_t len)
{
    struct hub_lchan *ch = hub_chanmap_find(l->chans, app, name, len);
    struct hub_list *pos;

    if (!ch)
        return;
    /* Closing only marks the session; it leaves its channels at fini. */
    hub_list_for_each(pos, &ch->members) {
        struct hub_sub *sub = hub_container_of(pos, struct hub_sub,
                                               chan_link);

        hub_session_send_error(sub->s, 4009,
                               "You got disconnected by the app.", true);
    }
}

static void pub_run(struct hub_inbox_node *n, struct hub_loop *l,
                    uint64_t now_ms)
{
    struct hub_pub *p = hub_container_of(n, struct pub_node, node)->pub;

    (void)now_ms;
    hub_defer_flush(l); /* never held outside a read pass: a guard */
    hub_deliver_local(l, p->app, p->name, p->name_len, p->frame, &p->skip);
    pub_unref(p);
}

static void pub_drop(struct hub_inbox_node *n)
{
    pub_unref(hub_container_of(n, struct pub_node, node)->pub);
}

static const struct hub_inbox_ops pub_ops = {
    .run = pub_run,
    .drop = pub_drop,
};

int hub_fanout_loops(struct hub *h, struct hub_loop *from,
                     const struct hub_pub_req *r)
{
    unsigned others = h->n_loops - (from ? 1 : 0);
    const char *name = r->name;
    size_t len = r->len;
    struct hub_pub *p;
    unsigned k = 0;

    assert(r->f);
    if (atomic_load_explicit(&h->stopping, memory_order_relaxed))
        return 0;
    /* The features that watch publications (hub/loop/feature.h). */
    for (unsigned i = 0; i < h->n_features; i++)
        if (h->features[i]->published)
            h->features[i]->published(h, r);
    if (others) {
        p = malloc(sizeof(*p) + others * sizeof(p->nodes[0]) + len + 1);
        if (!p)
            return -ENOMEM;
        atomic_init(&p->refs, others);
        p->frame = hub_frame_ref(r->f);
        p->app = r->app;
        p->skip = r->skip ? *r->skip : (struct hub_skip){ 0 };
        p->name_len = len;
        p->name = (char *)&p->nodes[others];
        memcpy(p->name, name, len);
        p->name[len] = '\0';
        for (unsigned i = 0; i < h->n_loops; i++) {
            if (h->loops[i] == from)
                continue;
            p->nodes[k].node.ops = &pub_ops;
            p->nodes[k].pub = p;
            hub_loop_post(h->loops[i], &p->nodes[k].node);
            k++;
        }
    }
    if (from) {
        if (r->batch && from->defer.open && defer_add(from, r) == 0)
            return 0;
        /* Publications leave a loop in the order they were made. */
        hub_defer_flush(from);
        hub_deliver_local(from, r->app, name, len, r->f, r->skip);
    }
    return 0;
}

/*
 * A terminate order: the user's channel name and one node per loop, in one
 * block. It carries no frame: each loop closes its own sessions.
 */
struct hub_term;

struct term_node {
    struct hub_inbox_node node;
    struct hub_term *term;
};

struct hub_term {
    atomic_uint refs;
    unsigned app;
    size_t name_len;
    char *name;
    struct term_node nodes[];
};

static void term_unref(struct hub_term *t)
{
    if (atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1)
        free(t);
}

static void term_run(struct hub_inbox_node *n, struct hub_loop *l,
                     uint64_t now_ms)
{
    struct hub_term *t = hub_container_of(n, struct term_node, node)->term;

    (void)now_ms;
    terminate_local(l, t->app, t->name, t->name_len);
    term_unref(t);
}

static void term_drop(struct hub_inbox_node *n)
{
    term_unref(hub_container_of(n, struct term_node, node)->term);
}

static const struct hub_inbox_ops term_ops = {
    .run = term_run,
    .drop = term_drop,
};

#define USER_CHANNEL_PREFIX "#server-to-user-"

int hub_fanout_terminate(struct hub *h, struct hub_loop *from, unsigned app,
                         const char *user_id)
{
    unsigned others = h->n_loops - (from ? 1 : 0);
    size_t len = sizeof(USER_CHANNEL_PREFIX) - 1 + strlen(user_id);
    struct hub_term *t;
    unsigned k = 0;

    if (atomic_load_explicit(&h->stopping, memory_order_relaxed))
        return 0;
    t = malloc(sizeof(*t) + others * sizeof(t->nodes[0]) + len + 1);
    if (!t)
        return -ENOMEM;
    /* One reference per node, and the caller's while it acts on from. */
    atomic_init(&t->refs, others + 1);
    t->app = app;
    t->name_len = len;
    t->name = (char *)&t->nodes[others];
    snprintf(t->name, len + 1, "%s%s", USER_CHANNEL_PREFIX, user_id);
    for (unsigned i = 0; i < h->n_loops; i++) {
        if (h->loops[i] == from)
            continue;
        t->nodes[k].node.ops = &term_ops;
        t->nodes[k].term = t;
        hub_loop_post(h->loops[i], &t->nodes[k].node);
        k++;
    }
    if (from) {
        hub_defer_flush(from); /* what was published before goes first */
        terminate_local(from, app, t->name, len);
    }
    term_unref(t);
    return 0;
}

/* The in-process backplane's bus. */

static int local_publish(void *b, struct hub *h, struct hub_loop *from,
                         const struct hub_pub_req *r)
{
    (void)b;
    return hub_fanout_loops(h, from, r);
}

static int local_terminate(void *b, struct hub *h, struct hub_loop *from,
                           unsigned app, const char *uid)
{
    (void)b;
    return hub_fanout_terminate(h, from, app, uid);
}

const struct hub_bus_ops hub_bus_local_ops = {
    .publish = local_publish,
    .terminate_user = local_terminate,
    .destroy = NULL,
};
