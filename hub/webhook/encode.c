/*
 * hub/webhook/encode.c - a batch's body (hub/webhook/encode.h):
 * {"time_ms":..,"events":[..]} with the events a webhook's filter takes,
 * each with its id. Two encoders give the same bytes: a direct writer for
 * plain ASCII strings (the sender's common case) and jansson for the rest;
 * the stream's ids (hub_wh_encode_ids) always go through jansson.
 *
 * Thread: any (pure functions).
 */
#include "hub/webhook/encode.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "hub/base/json.h"
#include "hub/base/json_escape.h"

static json_t *event_json_id(const struct hub_wh_event *ev, const char *id)
{
    json_t *o = json_object();
    bool ok;

    if (!o)
        return NULL;
    ok = !json_object_set_new(o, "name",
                              json_string(hub_wh_type_name(ev->type))) &&
         !json_object_set_new(o, "channel", json_string(ev->channel));
    if (ok && ev->type == HUB_WH_CLIENT_EVENT)
        ok = !json_object_set_new(o, "event", json_string(ev->event)) &&
             !json_object_set_new(o, "data", json_string(ev->data)) &&
             !json_object_set_new(o, "socket_id",
                                  json_string(ev->socket_id));
    if (ok && ev->user_id)
        ok = !json_object_set_new(o, "user_id", json_string(ev->user_id));
    if (ok)
        ok = !json_object_set_new(o, "id", json_string(id));
    if (!ok) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *event_json(const struct hub_wh_event *ev, uint64_t boot,
                          uint64_t seq)
{
    char id[48];

    snprintf(id, sizeof(id), "%016" PRIx64 "-%" PRIu64, boot, seq);
    return event_json_id(ev, id);
}

/* The batch around m events in arr (taken): {"time_ms", "events"}; NULL
 * when none matched or an append failed (ok false). */
static char *wrap_events(json_t *arr, bool ok, unsigned m, uint64_t wall_ms,
                         unsigned *n_out, size_t *len)
{
    json_t *root;
    char *body = NULL;

    *n_out = m;
    *len = 0;
    if (!m || !ok) {
        json_decref(arr);
        return NULL;
    }
    root = json_object();
    if (root &&
        !json_object_set_new(root, "time_ms",
                             json_integer((json_int_t)wall_ms)) &&
        !json_object_set(root, "events", arr))
        body = hub_json_dumps(root, JSON_COMPACT);
    json_decref(arr);
    json_decref(root);
    if (body)
        *len = strlen(body);
    return body;
}

/* The general encoder: any UTF-8, and the reference for the one below. */
static char *encode_jansson(const struct hub_wh_event *const *evs,
                            const uint64_t *seqs, unsigned n,
                            const struct hub_wh_conf *w, uint64_t boot,
                            uint64_t wall_ms, size_t *len, unsigned *n_out)
{
    json_t *arr = json_array();
    unsigned m = 0;
    bool ok = arr != NULL;

    for (unsigned i = 0; ok && i < n; i++) {
        if (w && !hub_wh_matches(w, evs[i]->type, evs[i]->channel))
            continue;
        m++;
        ok = !json_array_append_new(arr, event_json(evs[i], boot, seqs[i]));
    }
    return wrap_events(arr, ok, m, wall_ms, n_out, len);
}

/*
 * The encoder the sender runs for nearly every batch: the same bytes as
 * encode_jansson (the same key order, jansson's compact separators and
 * escapes) written straight into one buffer, without a json_t per string
 * (half of the sender thread's CPU in a profile with a client_event per
 * message). Strings with a byte >= 0x80 (which jansson checks as UTF-8)
 * or a missing client_event field go to encode_jansson instead: *general
 * is set and NULL returned.
 */
static size_t esc_len(const char *s, bool *plain)
{
    size_t n = 2;

    if (!s) {
        *plain = false;
        return 0;
    }
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;

        if (c >= 0x80)
            *plain = false;
        n += c == '"' || c == '\\' ? 2 : c < 0x20 ? 6 : 1;
    }
    return n;
}

/* s as a JSON string, spelled as jansson spells it (hub/base/json_escape.h). */
static char *put_str(char *o, const char *s)
{
    *o++ = '"';
    o = hub_json_escape(o, s, strlen(s), HUB_JSON_ESC_JANSSON);
    *o++ = '"';
    return o;
}

static char *put_lit(char *o, const char *lit)
{
    size_t n = strlen(lit);

    memcpy(o, lit, n);
    return o + n;
}

static char *encode_fast(const struct hub_wh_event *const *evs,
                         const uint64_t *seqs, unsigned n,
                         const struct hub_wh_conf *w, uint64_t boot,
                         uint64_t wall_ms, size_t *len, unsigned *n_out,
                         bool *general)
{
    size_t need = 64;
    unsigned m = 0;
    bool plain = true;
    char *body, *o;

    for (unsigned i = 0; i < n; i++) {
        const struct hub_wh_event *ev = evs[i];

        if (w && !hub_wh_matches(w, ev->type, ev->channel))
            continue;
        m++;
        /* Keys, separators and the id (boot hex - seq) at most. */
        need += 160 + strlen(hub_wh_type_name(ev->type)) +
                esc_len(ev->channel, &plain);
        if (ev->type == HUB_WH_CLIENT_EVENT)
            need += esc_len(ev->event, &plain) + esc_len(ev->data, &plain) +
                    esc_len(ev->socket_id, &plain);
        if (ev->user_id)
            need += esc_len(ev->user_id, &plain);
    }
    *n_out = m;
    *len = 0;
    if (!m)
        return NULL;
    if (!plain) {
        *general = true;
        return NULL;
    }
    body = malloc(need);
    if (!body)
        return NULL;
    o = body + snprintf(body, 64, "{\"time_ms\":%" JSON_INTEGER_FORMAT
                                  ",\"events\":[",
                        (json_int_t)wall_ms);
    m = 0;
    for (unsigned i = 0; i < n; i++) {
        const struct hub_wh_event *ev = evs[i];

        if (w && !hub_wh_matches(w, ev->type, ev->channel))
            continue;
        o = put_lit(o, m++ ? ",{\"name\":\"" : "{\"name\":\"");
        o = put_lit(o, hub_wh_type_name(ev->type));
        o = put_lit(o, "\",\"channel\":");
        o = put_str(o, ev->channel);
        if (ev->type == HUB_WH_CLIENT_EVENT) {
            o = put_lit(o, ",\"event\":");
            o = put_str(o, ev->event);
            o = put_lit(o, ",\"data\":");
            o = put_str(o, ev->data);
            o = put_lit(o, ",\"socket_id\":");
            o = put_str(o, ev->socket_id);
        }
        if (ev->user_id) {
            o = put_lit(o, ",\"user_id\":");
            o = put_str(o, ev->user_id);
        }
        o += snprintf(o, 64, ",\"id\":\"%016" PRIx64 "-%" PRIu64 "\"}", boot,
                      seqs[i]);
    }
    o = put_lit(o, "]}");
    *o = '\0';
    *len = (size_t)(o - body);
    return body;
}

char *hub_wh_encode(const struct hub_wh_event *const *evs,
                    const uint64_t *seqs, unsigned n,
                    const struct hub_wh_conf *w, uint64_t boot,
                    uint64_t wall_ms, size_t *len, unsigned *n_out)
{
    bool general = false;
    char *body = encode_fast(evs, seqs, n, w, boot, wall_ms, len, n_out,
                             &general);

    return general ? encode_jansson(evs, seqs, n, w, boot, wall_ms, len,
                                    n_out)
                   : body;
}

char *hub_wh_encode_ids(const struct hub_wh_event *const *evs,
                        const char *const *ids, unsigned n,
                        const struct hub_wh_conf *w, uint64_t wall_ms,
                        size_t *len, unsigned *n_out)
{
    json_t *arr = json_array();
    unsigned m = 0;
    bool ok = arr != NULL;

    for (unsigned i = 0; ok && i < n; i++) {
        char id[HUB_WH_MAX_ID];

        if (w && !hub_wh_matches(w, evs[i]->type, evs[i]->channel))
            continue;
        m++;
        snprintf(id, sizeof(id), "%s", ids[i]);
        ok = !json_array_append_new(arr, event_json_id(evs[i], id));
    }
    return wrap_events(arr, ok, m, wall_ms, n_out, len);
}
