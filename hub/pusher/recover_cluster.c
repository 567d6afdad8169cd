/*
 * hub/pusher/recover_cluster.c - recovery's subscriptions in a cluster
 * (hub/pusher/recover_cluster.h): the read of a channel's stream, and what
 * its answer makes of the subscription.
 */
#include "hub/pusher/recover_cluster.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hub/app/app.h"
#include "hub/loop/backplane.h"
#include "hub/loop/loop.h"
#include "hub/loop/resume.h"
#include "hub/loop/session.h"
#include "hub/pusher/recover_msg.h"

/* A read for one subscription; rd first: the bus posts rd's node back. */
struct cl_read {
    struct hub_hist_read rd;
    const void *key;               /* the session's address: a key only */
    uint64_t sid_hi;
    uint32_t sid_lo;
    struct hub_sub *sub;           /* valid while its guard waits */
    bool fresh;
    struct hub_history_pos known;  /* resumed */
    struct hub_history_sockets socks;
    uint64_t away_ms;
};

static void cl_free(struct cl_read *k)
{
    hub_hist_read_free(&k->rd); /* k itself: rd is its first member */
}

/* The last seq the stream's hash holds for origin; false when none. */
static bool last_of(const struct hub_hist_read *rd, const char *origin,
                    uint64_t *seq)
{
    for (unsigned i = 0; i < rd->n_last; i++)
        if (!strcmp(rd->last[i].origin, origin)) {
            *seq = rd->last[i].seq;
            return true;
        }
    return false;
}

static const struct hub_history_id *known_of(const struct cl_read *k,
                                             const char *origin)
{
    for (unsigned i = 0; i < k->known.n; i++)
        if (!strcmp(k->known.id[i].origin, origin))
            return &k->known.id[i];
    return NULL;
}

/* Raise origin's floor to seq (added when absent; false when full). */
static bool floor_up(struct hub_resume_floor *fl, unsigned *n,
                     const char *origin, uint64_t seq)
{
    for (unsigned i = 0; i < *n; i++)
        if (!strcmp(fl[i].origin, origin)) {
            if (seq > fl[i].seq)
                fl[i].seq = seq;
            return true;
        }
    if (*n == HUB_RESUME_ORIGINS)
        return false;
    fl[*n].origin = origin;
    fl[*n].seq = seq;
    (*n)++;
    return true;
}

/* lubdub:pos of the stream's last ids, framed. */
static struct hub_frame *pos_frame(const struct cl_read *k)
{
    struct hub_history_pos pos = { 0 };

    for (unsigned i = 0; i < k->rd.n_last && i < HUB_HISTORY_ORIGINS; i++) {
        strcpy(pos.id[i].origin, k->rd.last[i].origin);
        pos.id[i].seq = k->rd.last[i].seq;
        pos.n++;
    }
    return hub__recover_message(
        "lubdub:pos", json_pack("{s:s%, s:o}", "channel", k->rd.name,
                                k->rd.len, "ids", hub__recover_ids(&pos)));
}

/* A fresh start (or the one after a failed resume): lubdub:pos, and the
 * held frames the stream's last ids do not cover. */
static void start_fresh(struct hub_session *s, struct cl_read *k,
                        struct hub_frame *failed)
{
    struct hub_resume_floor fl[HUB_RESUME_ORIGINS];
    struct hub_frame *first[2] = { failed, pos_frame(k) };
    unsigned n = 0;

    for (unsigned i = 0; i < k->rd.n_last; i++)
        floor_up(fl, &n, k->rd.last[i].origin, k->rd.last[i].seq);
    if (!first[1]) {
        if (failed)
            hub_frame_unref(failed);
        hub_session_close(s, 1011, "out of memory", HUB_CLOSE_ERROR, true);
        return;
    }
    hub_resume_guard_fill(s, k->sub, failed ? first : first + 1,
                          failed ? 2 : 1, fl, n, NULL, 0, NULL);
}

/*
 * Whether what the client missed of origin (it knows up to seq: known, or
 * nothing since its start: NULL) is all in the stream read. anchored: the
 * stream still holds one of that origin's entries at or under seq, so
 * everything after it is there too (streams are trimmed oldest first).
 * Otherwise what is gone was trimmed (deleted_ms) or expired with a whole
 * stream (ttl): only an absence that began after both proves the client
 * had it.
 */
static bool reaches(const struct cl_read *k, const struct hub_history_id *known,
                    bool anchored, uint64_t ttl_ms)
{
    uint64_t last, away = k->away_ms;

    if (anchored)
        return true;
    if (known && last_of(&k->rd, known->origin, &last) && last <= known->seq)
        return true; /* nothing of it after what the client had */
    if (away == UINT64_MAX || away + HUB_HISTORY_AWAY_MARGIN_MS >= ttl_ms)
        return false;
    return !k->rd.deleted_ms ||
           k->rd.deleted_ms + away + HUB_HISTORY_AWAY_MARGIN_MS <
               k->rd.now_ms;
}

static bool sent_by(const struct hub_hist_entry *e,
                    const struct hub_history_sockets *socks)
{
    for (unsigned i = 0; e->ex && i < socks->n; i++)
        if (socks->hi[i] == e->ex_hi && socks->lo[i] == e->ex_lo)
            return true;
    return false;
}

/* Which entries of the read the client lacks (want[i]), and whether they
 * are all it lacks; *nwant counts them. */
static const char *select_replay(const struct cl_read *k, bool *want,
                                 size_t *nwant, uint64_t ttl_ms)
{
    const struct hub_hist_read *rd = &k->rd;
    bool anchored[HUB_HISTORY_ORIGINS] = { false };
    const char *fresh_origin[HUB_HIST_LAST_MAX];
    unsigned n_fresh = 0;

    *nwant = 0;
    for (size_t i = 0; i < rd->n; i++) {
        const struct hub_history_id *kn = known_of(k, rd->e[i].origin);

        want[i] = false;
        if (kn && rd->e[i].seq <= kn->seq) {
            anchored[kn - k->known.id] = true;
            continue;
        }
        if (!kn) {
            bool seen = false;

            for (unsigned j = 0; j < n_fresh; j++)
                seen |= !strcmp(fresh_origin[j], rd->e[i].origin);
            if (!seen && n_fresh == HUB_HIST_LAST_MAX)
                return "too_large";
            if (!seen)
                fresh_origin[n_fresh++] = rd->e[i].origin;
        }
        want[i] = !sent_by(&rd->e[i], &k->socks);
        *nwant += want[i];
    }
    for (unsigned i = 0; i < k->known.n; i++)
        if (!reaches(k, &k->known.id[i], anchored[i], ttl_ms))
            goto gone;
    /* An origin the client never heard of since its start: all of it is
     * new to the client, and must all be there. */
    for (unsigned i = 0; i < rd->n_last; i++)
        if (!known_of(k, rd->last[i].origin) && !reaches(k, NULL, false, ttl_ms))
            goto gone;
    return NULL;
gone:
    return k->away_ms == UINT64_MAX ||
                   k->away_ms + HUB_HISTORY_AWAY_MARGIN_MS >= ttl_ms
               ? "expired"
               : "evicted";
}

/* The frames of the entries wanted, stamped with their ids; NULL when out
 * of memory (then none is held). */
static struct hub_frame **replay_frames(struct hub_history *hh,
                                        const struct hub_hist_read *rd,
                                        const bool *want, size_t nwant)
{
    struct hub_frame **fs = calloc(nwant ? nwant : 1, sizeof(*fs));
    size_t j = 0;

    for (size_t i = 0; fs && i < rd->n; i++) {
        if (!want[i])
            continue;
        fs[j] = hub_frame_create_text(rd->e[i].data, rd->e[i].len);
        if (!fs[j]) {
            while (j)
                hub_frame_unref(fs[--j]);
            free(fs);
            return NULL;
        }
        hub_history_stamp(hh, fs[j], rd->e[i].origin, strlen(rd->e[i].origin),
                          rd->e[i].seq);
        j++;
    }
    return fs;
}

/* A resumed subscription's answer: the replay, or resume_failed and a
 * fresh start. */
static void resume_answer(struct hub_session *s, struct cl_read *k)
{
    const struct hub_app *app = s->app;
    struct hub_hist_read *rd = &k->rd;
    struct hub_resume_floor fl[HUB_RESUME_ORIGINS];
    bool *want = calloc(rd->n ? rd->n : 1, sizeof(*want));
    const char *why = rd->rc ? "unavailable" : want ? NULL : "unavailable";
    struct hub_frame **fs = NULL, *done;
    size_t nwant = 0;
    unsigned n = 0;

    if (!why)
        why = select_replay(k, want, &nwant, app->history_ttl_ms);
    if (!why && nwant > (size_t)app->history_size * 2)
        why = "too_large";
    if (!why && !(fs = replay_frames(hub_history_of(s->loop->hub), rd, want,
                                     nwant)))
        why = "unavailable";
    free(want);
    if (why) {
        hub__recover_failed(s, rd->name, rd->len, why);
        start_fresh(s, k, NULL);
        return;
    }
    /* Live frames at or under what the read saw: the replay has them, or
     * the client did. */
    for (unsigned i = 0; i < k->known.n; i++)
        floor_up(fl, &n, k->known.id[i].origin, k->known.id[i].seq);
    for (size_t i = 0; i < rd->n; i++)
        floor_up(fl, &n, rd->e[i].origin, rd->e[i].seq);
    for (unsigned i = 0; i < rd->n_last; i++)
        floor_up(fl, &n, rd->last[i].origin, rd->last[i].seq);
    done = hub__recover_message(
        "lubdub:resumed", json_pack("{s:s%, s:I}", "channel", rd->name,
                                    rd->len, "replayed", (json_int_t)nwant));
    HUB_STAT_ADD(s->loop->stats.resumes, 1);
    hub_resume_guard_fill(s, k->sub, NULL, 0, fl, n, fs, nwant, done);
    free(fs);
}

static void read_run(struct hub_inbox_node *node, struct hub_loop *l,
                     uint64_t now_ms)
{
    struct cl_read *k = hub_container_of(node, struct cl_read, rd.node);
    struct hub_session *s = hub_resume_session(l, k->key, k->sid_hi,
                                               k->sid_lo);

    (void)now_ms;
    if (s && s->state == HUB_SESSION_OPEN && s->app &&
        hub_resume_waiting(s, k->sub)) {
        if (k->fresh)
            start_fresh(s, k, NULL);
        else
            resume_answer(s, k);
    }
    cl_free(k);
}

static void read_drop(struct hub_inbox_node *node)
{
    cl_free(hub_container_of(node, struct cl_read, rd.node));
}

static const struct hub_inbox_ops read_ops = { read_run, read_drop };

void hub__recover_cluster_join(struct hub_session *s, struct hub_sub *sub,
                               const char *name, size_t len,
                               struct hub_frame *ok,
                               const struct hub_history_pos *known,
                               const struct hub_history_sockets *socks,
                               uint64_t away_ms)
{
    struct cl_read *k = calloc(1, sizeof(*k));

    hub_session_send(s, ok);
    if (!k || !(k->rd.name = strndup(name, len)) ||
        hub_resume_guard_wait(s, sub)) {
        if (k)
            cl_free(k);
        hub_session_close(s, 1011, "out of memory", HUB_CLOSE_ERROR, true);
        return;
    }
    k->rd.node.ops = &read_ops;
    k->rd.loop = s->loop;
    k->rd.app = s->app->index;
    k->rd.len = len;
    k->rd.entries = known != NULL;
    k->key = s;
    k->sid_hi = s->sid_hi;
    k->sid_lo = s->sid_lo;
    k->sub = sub;
    k->fresh = known == NULL;
    k->away_ms = UINT64_MAX;
    if (known) {
        k->known = *known;
        if (socks)
            k->socks = *socks;
        k->away_ms = away_ms;
    }
    if (hub_bus_history_read(s->loop->hub, &k->rd)) {
        /* Not queued: answered at once, as a read that failed. */
        k->rd.rc = -EIO;
        read_run(&k->rd.node, s->loop, 0);
    }
}
