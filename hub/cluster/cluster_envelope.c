/*
 * hub/cluster/cluster_envelope.c - the node-to-node envelope of
 * hub/cluster/cluster_envelope.h. Decoding trusts nothing: every field is read
 * through a cursor that refuses to go past the end.
 */
#include "hub/cluster/cluster_envelope.h"

#include <errno.h>
#include <string.h>

static const unsigned char magic[4] = { 'L', 'D', 'B', '1' };

/* Fixed part: magic, kind, flags, origin_len, epoch, seq, app_len,
 * chan_len, excl_hi, excl_lo, member_seq, data_len. */
#define FIXED (4 + 1 + 1 + 2 + 8 + 8 + 2 + 2 + 8 + 4 + 8 + 4)

static bool in_bounds(const struct hub_cluster_envelope *e)
{
    if (e->kind != HUB_CLUSTER_ENV_EVENT &&
        e->kind != HUB_CLUSTER_ENV_TERMINATE &&
        e->kind != HUB_CLUSTER_ENV_CACHE && e->kind != HUB_CLUSTER_ENV_COUNT &&
        e->kind != HUB_CLUSTER_ENV_SCRIPT)
        return false;
    if ((e->kind == HUB_CLUSTER_ENV_CACHE) != (e->ttl_ms != 0) ||
        e->ttl_ms > HUB_CLUSTER_ENV_MAX_TTL)
        return false;
    if (!e->origin_len || e->origin_len > HUB_CLUSTER_ENV_MAX_ORIGIN ||
        !e->app_len || e->app_len > HUB_CLUSTER_ENV_MAX_APP ||
        !e->channel_len || e->channel_len > HUB_CLUSTER_ENV_MAX_CHANNEL ||
        e->data_len > HUB_CLUSTER_ENV_MAX_DATA)
        return false;
    if (e->hist_seq &&
        ((e->kind != HUB_CLUSTER_ENV_EVENT && e->kind != HUB_CLUSTER_ENV_CACHE) ||
         !e->hist_origin_len ||
         e->hist_origin_len > HUB_CLUSTER_ENV_MAX_HIST_ORIGIN))
        return false;
    if ((e->kind == HUB_CLUSTER_ENV_TERMINATE ||
         e->kind == HUB_CLUSTER_ENV_COUNT) &&
        e->data_len)
        return false;
    return true;
}

size_t hub_cluster_envelope_size(const struct hub_cluster_envelope *e)
{
    if (!in_bounds(e))
        return 0;
    return FIXED + e->origin_len + e->app_len + e->channel_len + e->data_len +
           (e->kind == HUB_CLUSTER_ENV_CACHE ? 4 : 0) +
           (e->hist_seq ? 1 + e->hist_origin_len + 16 : 0);
}

static unsigned char *put_be(unsigned char *p, uint64_t v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        p[i] = (unsigned char)(v >> (8 * (n - 1 - i)));
    return p + n;
}

static unsigned char *put_bytes(unsigned char *p, const void *s, size_t n)
{
    if (n)
        memcpy(p, s, n);
    return p + n;
}

size_t hub_cluster_envelope_encode(const struct hub_cluster_envelope *e,
                                   unsigned char *out, size_t cap)
{
    size_t need = hub_cluster_envelope_size(e);
    unsigned char *p = out;

    if (!need || need > cap)
        return 0;
    p = put_bytes(p, magic, sizeof(magic));
    p = put_be(p, e->kind, 1);
    p = put_be(p, (e->excl_set ? 1 : 0) | (e->hist_seq ? 2 : 0), 1);
    p = put_be(p, e->origin_len, 2);
    p = put_bytes(p, e->origin, e->origin_len);
    p = put_be(p, e->epoch, 8);
    p = put_be(p, e->seq, 8);
    p = put_be(p, e->app_len, 2);
    p = put_bytes(p, e->app, e->app_len);
    p = put_be(p, e->channel_len, 2);
    p = put_bytes(p, e->channel, e->channel_len);
    p = put_be(p, e->excl_set ? e->excl_hi : 0, 8);
    p = put_be(p, e->excl_set ? e->excl_lo : 0, 4);
    p = put_be(p, e->member_seq, 8);
    p = put_be(p, e->data_len, 4);
    p = put_bytes(p, e->data, e->data_len);
    if (e->kind == HUB_CLUSTER_ENV_CACHE)
        p = put_be(p, e->ttl_ms, 4);
    if (e->hist_seq) {
        p = put_be(p, e->hist_origin_len, 1);
        p = put_bytes(p, e->hist_origin, e->hist_origin_len);
        p = put_be(p, e->hist_seq, 8);
        p = put_be(p, e->hist_time_ms, 8);
    }
    return (size_t)(p - out);
}

struct cursor {
    const unsigned char *p;
    size_t left;
    bool bad;
};

static uint64_t get_be(struct cursor *c, unsigned n)
{
    uint64_t v = 0;

    if (c->bad || c->left < n) {
        c->bad = true;
        return 0;
    }
    for (unsigned i = 0; i < n; i++)
        v = v << 8 | c->p[i];
    c->p += n;
    c->left -= n;
    return v;
}

static const unsigned char *get_bytes(struct cursor *c, size_t n)
{
    const unsigned char *s = c->p;

    if (c->bad || c->left < n) {
        c->bad = true;
        return NULL;
    }
    c->p += n;
    c->left -= n;
    return s;
}

int hub_cluster_envelope_decode(struct hub_cluster_envelope *e, const void *p,
                                size_t len)
{
    struct cursor c = { p, len, false };
    const unsigned char *m;
    uint64_t flags;

    memset(e, 0, sizeof(*e));
    if (!p)
        return -EINVAL;
    m = get_bytes(&c, sizeof(magic));
    if (!m || memcmp(m, magic, sizeof(magic)))
        return -EINVAL;
    e->kind = (uint8_t)get_be(&c, 1);
    flags = get_be(&c, 1);
    e->origin_len = (size_t)get_be(&c, 2);
    e->origin = (const char *)get_bytes(&c, e->origin_len);
    e->epoch = get_be(&c, 8);
    e->seq = get_be(&c, 8);
    e->app_len = (size_t)get_be(&c, 2);
    e->app = (const char *)get_bytes(&c, e->app_len);
    e->channel_len = (size_t)get_be(&c, 2);
    e->channel = (const char *)get_bytes(&c, e->channel_len);
    e->excl_hi = get_be(&c, 8);
    e->excl_lo = (uint32_t)get_be(&c, 4);
    e->member_seq = get_be(&c, 8);
    e->data_len = (size_t)get_be(&c, 4);
    if (c.bad || e->data_len > HUB_CLUSTER_ENV_MAX_DATA)
        goto bad;
    e->data = get_bytes(&c, e->data_len);
    if (e->kind == HUB_CLUSTER_ENV_CACHE)
        e->ttl_ms = (uint32_t)get_be(&c, 4);
    if (flags & 2) {
        e->hist_origin_len = (size_t)get_be(&c, 1);
        e->hist_origin = (const char *)get_bytes(&c, e->hist_origin_len);
        e->hist_seq = get_be(&c, 8);
        e->hist_time_ms = get_be(&c, 8);
        if (!e->hist_seq)
            goto bad;
    }
    if (c.bad || c.left || (flags & ~3ull))
        goto bad;
    e->excl_set = flags & 1;
    if (!e->excl_set && (e->excl_hi || e->excl_lo))
        goto bad;
    if (!in_bounds(e))
        goto bad;
    return 0;
bad:
    memset(e, 0, sizeof(*e));
    return -EINVAL;
}
