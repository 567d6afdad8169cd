/*
 * hub/cluster/cluster_envelope.h - what one node sends another through the
 * broker: a publication (a sealed frame's payload) or a terminate order, with
 * what the receiver needs to deliver it exactly as the origin would have. Kind
 * 5 is built by Lua in Redis (server/redis/lua/watchlist.lua) in this same
 * layout.
 *
 * Wire layout (all integers big-endian, every length checked on decode):
 *   "LDB1"            magic and version (4 bytes)
 *   u8  kind          1 = event, 2 = terminate, 3 = cache event (an
 *                     event on a cache channel that every node keeps as
 *                     the channel's last event,
 *                     hub/cluster/cluster_cache.h), 4 = count notice (the
 *                     channel's subscription count changed on the origin;
 *                     no payload, hub/channel/subcount.h),
 *                     5 = script event (an event a Redis script published,
 *                     server/redis/lua/watchlist.lua: delivered by every node,
 *                     the origin's too; numbered by Redis per watcher,
 *                     whichever node's script sent it; seq 0: not
 *                     numbered)
 *   u8  flags         bit 0: excl socket id set
 *   u16 origin_len    then origin bytes (the node id, 1..255)
 *   u64 epoch         the origin's run (changes on restart or seq reset)
 *   u64 seq           per (origin, epoch, channel), from 1
 *   u16 app_len       then the app id bytes (1..255)
 *   u16 chan_len      then the channel name bytes (1..65535)
 *   u64 excl_hi, u32 excl_lo   the excluded socket id ("hi.lo")
 *   u64 member_seq    the origin's member_seq (0 = none)
 *   u32 data_len      then data_len payload bytes (kinds 1, 3); 0 (2, 4)
 *   u32 ttl_ms        kind 3 only: the cached event's remaining life, in
 *                     ms (1..HUB_CLUSTER_ENV_MAX_TTL), when the origin sent it
 *   when flags bit 1 (kinds 1 and 3: recovery's history id, hub/channel/
 *   history.h; the entry node also wrote it to the channel's stream):
 *   u8  hist_origin_len  then the id's origin (1..64 bytes)
 *   u64 hist_seq         the id's seq (not 0)
 *   u64 hist_time_ms     when the entry node kept it (its wall clock)
 * Nothing may follow. A node of an earlier version refuses flags bit 1
 * (docs/SCALING.md: turn history on once every node runs this one). Decoding borrows pointers into the input.
 *
 * Thread: none (pure functions).
 */
#ifndef HUB_ENVELOPE_H
#define HUB_ENVELOPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HUB_CLUSTER_ENV_EVENT 1
#define HUB_CLUSTER_ENV_TERMINATE 2
#define HUB_CLUSTER_ENV_CACHE 3
#define HUB_CLUSTER_ENV_COUNT 4
#define HUB_CLUSTER_ENV_SCRIPT 5

#define HUB_CLUSTER_ENV_MAX_ORIGIN 255
#define HUB_CLUSTER_ENV_MAX_APP 255
/* A user's channel "#server-to-user-<id>" carries the user id, whose bound
 * is the app's max_user_id_len: the channel may use all of its u16. */
#define HUB_CLUSTER_ENV_MAX_CHANNEL 65535
#define HUB_CLUSTER_ENV_MAX_DATA (16u * 1024 * 1024)
#define HUB_CLUSTER_ENV_MAX_TTL (24u * 3600 * 1000)

struct hub_cluster_envelope {
    uint8_t kind;
    const char *origin;
    size_t origin_len;
    uint64_t epoch, seq;
    const char *app;
    size_t app_len;
    const char *channel;
    size_t channel_len;
    bool excl_set;
    uint64_t excl_hi;
    uint32_t excl_lo;
    uint64_t member_seq;
    const unsigned char *data;
    size_t data_len;
    uint32_t ttl_ms; /* kind 3: 1..HUB_CLUSTER_ENV_MAX_TTL */
    /* Recovery's id (hist_seq 0: none). */
    const char *hist_origin;
    size_t hist_origin_len;
    uint64_t hist_seq, hist_time_ms;
};

#define HUB_CLUSTER_ENV_MAX_HIST_ORIGIN 64

/* Bytes hub_cluster_envelope_encode() writes for e, 0 when e is out of
 * bounds. */
size_t hub_cluster_envelope_size(const struct hub_cluster_envelope *e);
/* Write e into out (cap bytes); the length written, 0 when it does not
 * fit or e is out of bounds. */
size_t hub_cluster_envelope_encode(const struct hub_cluster_envelope *e,
                                   unsigned char *out, size_t cap);
/* Parse p[0..len) into e (pointers into p). 0, or -EINVAL for anything
 * malformed: wrong magic, unknown kind, a length out of bounds or past
 * the end, trailing bytes. */
int hub_cluster_envelope_decode(struct hub_cluster_envelope *e, const void *p,
                                size_t len);

#endif
