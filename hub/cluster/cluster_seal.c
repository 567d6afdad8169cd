/*
 * hub/cluster/cluster_seal.c - the cluster key in use
 * (hub/cluster/cluster_key.h, docs/SCALING.md "The cluster key"): setting it,
 * sealing the trailer onto an envelope this node sends, opening (checking) an
 * envelope that arrives or is loaded, what a script's unsigned event may hold,
 * and counting and logging what does not verify.
 *
 * Thread: set before the backplane thread starts; the rest on the
 * backplane thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "hub/base/log.h"
#include "hub/cluster/cluster_key.h"
#include "hub/cluster/cluster_int.h"
#include "hub/cluster/cluster_envelope.h"

void hub_cluster_set_key(struct hub_cluster *c, struct hub_cluster_key *key)
{
    hub_cluster_key_destroy(c->key);
    c->key = key;
}

bool hub_cluster_has_key(const struct hub_cluster *c)
{
    return c->key != NULL;
}

uint64_t hub__cluster_be64(const unsigned char *p)
{
    uint64_t v = 0;

    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

int hub__cluster_key_seal(struct hub_cluster *c, unsigned char *out,
                          size_t n)
{
    /* The trailer: counter, time, MAC over the whole envelope
     * (docs/SCALING.md, "The cluster key"). */
    const struct hub_cluster_key_part part = { out, n };
    uint64_t ctr, ms;

    if (hub_cluster_key_sign(c->key, "env", &part, 1, &ctr, &ms, out + n + 16))
        return -ENOMEM;
    for (int i = 0; i < 8; i++) {
        out[n + i] = (unsigned char)(ctr >> (56 - 8 * i));
        out[n + 8 + i] = (unsigned char)(ms >> (56 - 8 * i));
    }
    return 0;
}

/* A dropped message counted, and said at most once per 10 s (with what
 * was dropped meanwhile): a flood of forgeries costs one line. */
void hub__cluster_key_drop(struct hub_cluster *c, int why, const char *origin,
                           size_t origin_len, const char *what)
{
    struct timespec ts;
    uint64_t now;

    if (why == -ESTALE) {
        HUB_STAT_ADD_SHARED(c->stats.replays, 1);
        c->key_log_replays++;
    } else {
        HUB_STAT_ADD_SHARED(c->stats.auth_dropped, 1);
        c->key_log_forged++;
    }
    clock_gettime(CLOCK_MONOTONIC, &ts);
    now = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
    if (c->key_log_ms && now - c->key_log_ms < 10000)
        return;
    c->key_log_ms = now;
    hub_log_event(HUB_LOG_WARN, 0,
            HUB_LOG_F(.event = "cluster_forged"),
            "backplane: dropped %" PRIu64 " messages that do not verify "
            "with the cluster key and %" PRIu64 " replays (last: %s, "
            "claiming node %.*s)",
            c->key_log_forged, c->key_log_replays, what,
            (int)(origin_len > 64 ? 64 : origin_len), origin ? origin : "");
    c->key_log_forged = c->key_log_replays = 0;
}

/* A script's event (kind 5) is not MACed (Redis builds it from its own
 * state): with a key it is taken only as what the scripts send, a
 * watchlist_events frame on a user channel, so that a forged one can at
 * most fake online or offline, never carry another event. */
static bool script_frame_ok(const struct hub_cluster_envelope *e)
{
    static const char pre[] = USER_PREFIX;
    json_t *root = NULL, *inner = NULL, *evs;
    const char *data;
    bool ok = false;
    size_t i;
    json_t *ev;

    if (e->excl_set || e->channel_len <= sizeof(pre) - 1 ||
        memcmp(e->channel, pre, sizeof(pre) - 1))
        return false;
    root = json_loadb((const char *)e->data, e->data_len, 0, NULL);
    if (!json_is_object(root) || json_object_size(root) != 2 ||
        !json_is_string(json_object_get(root, "event")) ||
        strcmp(json_string_value(json_object_get(root, "event")),
               "pusher_internal:watchlist_events") ||
        !(data = json_string_value(json_object_get(root, "data"))))
        goto out;
    inner = json_loads(data, 0, NULL);
    evs = json_object_get(inner, "events");
    if (!json_is_object(inner) || json_object_size(inner) != 1 ||
        !json_is_array(evs))
        goto out;
    json_array_foreach(evs, i, ev) {
        const char *name = json_string_value(json_object_get(ev, "name"));
        json_t *ids = json_object_get(ev, "user_ids"), *id;
        size_t j;

        if (!json_is_object(ev) || json_object_size(ev) != 2 || !name ||
            (strcmp(name, "online") && strcmp(name, "offline")) ||
            !json_is_array(ids))
            goto out;
        json_array_foreach(ids, j, id) {
            if (!json_is_string(id))
                goto out;
        }
    }
    ok = true;
out:
    json_decref(inner);
    json_decref(root);
    return ok;
}

int hub__cluster_open_env(struct hub_cluster *c,
                          struct hub_cluster_envelope *e,
                          const unsigned char *data, size_t len, bool fresh)
{
    const struct hub_cluster_key_part part = { data,
                                               len - HUB_CLUSTER_KEY_TRAILER };
    const unsigned char *t;

    if (!c->key)
        return hub_cluster_envelope_decode(e, data, len);
    if (!hub_cluster_envelope_decode(e, data, len))
        return e->kind == HUB_CLUSTER_ENV_SCRIPT && script_frame_ok(e)
                   ? 0
                   : -EACCES;
    if (len <= HUB_CLUSTER_KEY_TRAILER ||
        hub_cluster_envelope_decode(e, data, len - HUB_CLUSTER_KEY_TRAILER))
        return -EINVAL;
    t = data + len - HUB_CLUSTER_KEY_TRAILER;
    switch (hub_cluster_key_verify(
        c->key, e->origin, e->origin_len, hub__cluster_be64(t),
        hub__cluster_be64(t + 8), "env", &part, 1, t + 16, fresh)) {
    case HUB_CLUSTER_KEY_OK:
        return 0;
    case HUB_CLUSTER_KEY_REPLAY:
        return -ESTALE;
    default:
        return -EACCES;
    }
}
