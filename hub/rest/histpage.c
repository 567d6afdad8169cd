/*
 * hub/rest/histpage.c - one page of a channel's stream read from Redis
 * for GET channels/{name}/events in a cluster (hub/rest/histpage.h): the
 * entries listed and the completeness rule of docs/PROTOCOL.md 6.2.
 *
 * The read holds the stream oldest first, or (a page read, rd->page) the
 * part of it after= or since= starts at, already cut to the limit, which
 * this cuts again to the same effect; one origin's entries are in the
 * order of its seqs (its node writes them on one connection, in order).
 * rd->deleted_ms bounds the newest entry the stream lost to trimming
 * (server/redis/lua/history_read.lua), 0 when it lost none.
 *
 * Thread: any; pure.
 */
#include "hub/rest/histpage.h"

#include <string.h>

#include "hub/channel/history.h"
#include "hub/loop/backplane.h"

/* The last seq the last-ids hash holds for origin; false when none. */
static bool last_seq(const struct hub_hist_read *rd, const char *origin,
                     uint64_t *seq)
{
    for (unsigned i = 0; i < rd->n_last; i++)
        if (!strcmp(rd->last[i].origin, origin)) {
            *seq = rd->last[i].seq;
            return true;
        }
    return false;
}

/* after=: the index the page starts at; *complete as the header says. */
static size_t after_start(const struct hub_hist_read *rd,
                          const struct hub_histpage_args *a, bool *complete)
{
    size_t from = 0;
    bool anchored = rd->anchored; /* a page read cut before the anchor */
    uint64_t last;

    for (size_t i = 0; i < rd->n; i++)
        if (!strcmp(rd->e[i].origin, a->after_origin) &&
            rd->e[i].seq <= a->after_seq) {
            anchored = true;
            from = i + 1;
        }
    *complete = anchored ||
                (last_seq(rd, a->after_origin, &last) &&
                 last <= a->after_seq && !rd->deleted_ms);
    return from;
}

/* since= (wall clock, told by the client): see the header. */
static bool since_complete(const struct hub_hist_read *rd, uint64_t since,
                           uint64_t ttl_ms)
{
    const uint64_t m = HUB_HISTORY_AWAY_MARGIN_MS;

    if (rd->deleted_ms)
        return rd->deleted_ms + m < since;
    if (rd->n && rd->first_ms + m <= since)
        return true;
    return since + ttl_ms > rd->now_ms + m;
}

size_t hub_histpage_select(const struct hub_hist_read *rd,
                           const struct hub_histpage_args *a, size_t *idx,
                           bool *complete)
{
    size_t from = 0, n = 0;
    uint64_t since = 0;
    bool by_time = !a->has_after;

    if (a->has_after) {
        from = after_start(rd, a, complete);
    } else if (a->has_since) {
        since = a->since_ms;
        *complete = since_complete(rd, since, a->ttl_ms);
    } else {
        /* The window and the trimmed bound are both Redis's clock; an
         * earlier stream expired a ttl after its last write, so before
         * the window. */
        since = rd->now_ms > a->ttl_ms ? rd->now_ms - a->ttl_ms + 1 : 0;
        *complete = !rd->deleted_ms || rd->deleted_ms < since;
    }
    for (size_t i = from; i < rd->n && n < a->limit; i++)
        if (!by_time || rd->e[i].time_ms >= since)
            idx[n++] = i;
    return n;
}
