/*
 * hub/loop/shard.c - dense session array with a scan cursor (see shard.h).
 *
 * The assert()s state the invariants each step relies on (live in Debug
 * and sanitizer builds, free under NDEBUG); hub_shard_check() walks the
 * whole array and is for tests.
 */
#include "hub/loop/shard.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "hub/loop/session.h"

void hub_shard_init(struct hub_shard *sh)
{
    sh->slots = NULL;
    sh->count = sh->cap = sh->cursor = 0;
}

void hub_shard_fini(struct hub_shard *sh)
{
    free(sh->slots);
    hub_shard_init(sh);
}

int hub_shard_add(struct hub_shard *sh, struct hub_session *s, uint64_t now)
{
    /* Not linked already (a fresh session's index may be anything). */
    assert(s->shard_idx >= sh->count || sh->slots[s->shard_idx].s != s);
    assert(sh->cursor <= sh->count && sh->count <= sh->cap);
    if (sh->count == sh->cap) {
        uint32_t cap = sh->cap ? sh->cap * 2 : 256;
        struct hub_shard_slot *n;

        if (cap < sh->cap)
            return -ENOSPC;
        n = realloc(sh->slots, (size_t)cap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        sh->slots = n;
        sh->cap = cap;
    }
    sh->slots[sh->count].last_rx_ms = now;
    sh->slots[sh->count].s = s;
    s->shard_idx = sh->count++;
    return 0;
}

static void move_slot(struct hub_shard *sh, uint32_t from, uint32_t to)
{
    assert(from < sh->count && to < sh->count && from != to);
    sh->slots[to] = sh->slots[from];
    sh->slots[to].s->shard_idx = to;
}

void hub_shard_remove(struct hub_shard *sh, struct hub_session *s)
{
    uint32_t i = s->shard_idx, last;

    if (i >= sh->count || sh->slots[i].s != s)
        return;
    assert(sh->cursor <= sh->count);
    last = sh->count - 1;
    if (i < sh->cursor) {
        /* Fill the hole with the last scanned slot, and that one's place
         * with the last slot (unscanned), then shrink the scanned part. */
        uint32_t c = sh->cursor - 1;

        if (c != i)
            move_slot(sh, c, i);
        if (last != c)
            move_slot(sh, last, c);
        sh->cursor = c;
    } else if (i != last) {
        move_slot(sh, last, i);
    }
    sh->count = last;
    s->shard_idx = UINT32_MAX;
    assert(sh->cursor <= sh->count);
}

int hub_shard_check(const struct hub_shard *sh)
{
    if (sh->count > sh->cap || sh->cursor > sh->count)
        return -EFAULT;
    for (uint32_t i = 0; i < sh->count; i++)
        if (!sh->slots[i].s || sh->slots[i].s->shard_idx != i)
            return -EFAULT;
    return 0;
}
