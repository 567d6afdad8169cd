/*
 * hub/rest/histpage.h - which entries of a read of a channel's stream in
 * Redis (struct hub_hist_read, hub/loop/backplane.h) one answer of
 * GET channels/{name}/events lists in a cluster, and whether the history
 * reaches back to what was asked (docs/PROTOCOL.md 6.2). Private to
 * hub/rest/ (hub/rest/chanhistory.c).
 *
 * Thread: any; pure (reads the read, writes only its outputs).
 */
#ifndef HUB_REST_HISTPAGE_H
#define HUB_REST_HISTPAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hub_hist_read;

/* What the request asks: after an id, since a wall-clock time, or
 * neither (the ttl back from Redis's clock). */
struct hub_histpage_args {
    bool has_since, has_after;
    uint64_t since_ms;             /* wall clock */
    const char *after_origin;      /* NUL-terminated, with has_after */
    uint64_t after_seq;
    size_t limit;                  /* >= 1 */
    uint64_t ttl_ms;               /* the app's history ttl */
};

/*
 * Pick the entries of rd (oldest first, stream order) the answer lists:
 * their indexes into rd->e in idx (room for a->limit), their count
 * returned. *complete as docs/PROTOCOL.md 6.2 says for a cluster:
 * - after=<origin>:<seq>: the entries after the stream's last entry of
 *   that origin at or under seq (anchored: then complete, streams being
 *   trimmed oldest first); none such: every entry, complete only when the
 *   last-ids hash says the origin's last seq is at or under seq and the
 *   stream lost nothing to trimming.
 * - since: the entries whose t is at or after it; complete when no entry
 *   trimmed is newer than since less HUB_HISTORY_AWAY_MARGIN_MS (the
 *   trimmed bound is Redis's clock, t the nodes'), and the stream was
 *   there since then (trimmed before since, or its first entry at or
 *   before it, or since is within the ttl, so any earlier stream expired
 *   before since).
 * - neither: since is Redis's clock less the ttl, and only trimming
 *   within that window makes it incomplete.
 */
size_t hub_histpage_select(const struct hub_hist_read *rd,
                           const struct hub_histpage_args *a, size_t *idx,
                           bool *complete);

#endif
