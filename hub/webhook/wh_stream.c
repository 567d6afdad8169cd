/*
 * hub/webhook/wh_stream.c - the pure half of durable cluster webhooks
 * (hub/webhook/wh_stream.h): an endpoint's consumer group name, a Redis
 * stream entry's fields made into a webhook event, and an entry's event id.
 *
 * Thread: any (pure functions).
 */
#include "hub/webhook/wh_stream.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/webhook/webhook.h"

void hub_wh_stream_group(const char *url, char out[HUB_WHS_GROUP_LEN])
{
    uint64_t h = 14695981039346656037ull;

    for (const unsigned char *p = (const unsigned char *)url; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    snprintf(out, HUB_WHS_GROUP_LEN, "wh-%016" PRIx64, h);
}

/* A NUL-terminated copy of the value of field name, or NULL. */
static char *field(const char *const *f, const size_t *l, size_t n,
                   const char *name)
{
    size_t nl = strlen(name);

    for (size_t i = 0; i + 1 < n; i += 2)
        if (l[i] == nl && !memcmp(f[i], name, nl) &&
            !memchr(f[i + 1], '\0', l[i + 1]))
            return strndup(f[i + 1], l[i + 1]);
    return NULL;
}

struct hub_wh_event *hub_wh_stream_event(unsigned app,
                                         const char *const *fields,
                                         const size_t *lens, size_t n)
{
    char *name = field(fields, lens, n, "name");
    char *ch = field(fields, lens, n, "channel");
    char *uid = field(fields, lens, n, "user_id");
    char *ev = field(fields, lens, n, "event");
    char *data = field(fields, lens, n, "data");
    char *sid = field(fields, lens, n, "socket_id");
    struct hub_wh_event *out = NULL;
    int type = name ? hub_wh_type_parse(name) : -1;

    if (type >= 0 && ch && *ch) {
        bool member = type == HUB_WH_MEMBER_ADDED ||
                      type == HUB_WH_MEMBER_REMOVED;
        bool client = type == HUB_WH_CLIENT_EVENT;

        if ((!member || (uid && *uid)) && (!client || (ev && data && sid)))
            out = hub_wh_event_new(app, (unsigned)type, ch, strlen(ch),
                                   uid && *uid ? uid : NULL,
                                   client ? ev : NULL, client ? data : NULL,
                                   client ? sid : NULL);
    }
    free(name);
    free(ch);
    free(uid);
    free(ev);
    free(data);
    free(sid);
    return out;
}

int hub_wh_stream_event_id(const char *app_id, const char *entry_id, char *out,
                           size_t len)
{
    int n = snprintf(out, len, "%s-%s", app_id, entry_id);

    return n < 0 || (size_t)n >= len ? -1 : 0;
}
