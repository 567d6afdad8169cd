/*
 * hub/pusher/recover_msg.c - the messages recovery sends a session
 * (hub/pusher/recover_msg.h; docs/PROTOCOL.md 9.3), framed with jansson.
 */
#include "hub/pusher/recover_msg.h"

#include <stdlib.h>
#include <string.h>

#include "hub/base/log.h"
#include "hub/loop/loop.h"
#include "hub/loop/session.h"

/* {"event":E,"data":D} framed (D stolen); NULL when out of memory. */
struct hub_frame *hub__recover_message(const char *event, json_t *data)
{
    json_t *o = json_pack("{s:s, s:o}", "event", event, "data", data);
    struct hub_frame *f = NULL;
    char *text;

    if (!o)
        return NULL;
    text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (text) {
        f = hub_frame_create_text(text, strlen(text));
        free(text);
    }
    return f;
}

void hub__recover_send(struct hub_session *s, const char *event,
                         json_t *data)
{
    struct hub_frame *f = data ? hub__recover_message(event, data) : NULL;

    if (!f) {
        hub_session_close(s, 1011, "out of memory", HUB_CLOSE_ERROR, true);
        return;
    }
    hub_session_send(s, f);
    hub_frame_unref(f);
}

json_t *hub__recover_ids(const struct hub_history_pos *pos)
{
    json_t *ids = json_object();

    for (unsigned i = 0; ids && i < pos->n; i++)
        json_object_set_new(ids, pos->id[i].origin,
                            json_integer((json_int_t)pos->id[i].seq));
    return ids;
}

void hub__recover_failed(struct hub_session *s, const char *name, size_t len,
                        const char *reason)
{
    HUB_STAT_ADD(s->loop->stats.resumes_failed, 1);
    if (hub_log_enabled(HUB_LOG_DEBUG)) {
        char ch[HUB_LOG_FIELD_MAX + 1];

        snprintf(ch, sizeof(ch), "%.*s", (int)len, name);
        hub_log_event(HUB_LOG_DEBUG, s->loop->id,
                      HUB_LOG_F(.event = "resume_failed",
                                .socket_id = HUB_SID(s), .app = s->app->id,
                                .channel = ch, .reason = reason),
                      "socket %s: resume of %.*s failed: %s", HUB_SID(s),
                      (int)len, name, reason);
    }
    hub__recover_send(s, "lubdub:resume_failed",
                 json_pack("{s:[s%], s:s}", "channels", name, len, "reason",
                           reason));
}

