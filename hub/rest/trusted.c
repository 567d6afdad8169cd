/*
 * hub/rest/trusted.c - an event published for the operator console
 * (hub_rest_trusted_publish(), hub/rest/rest.h): the request the console
 * made is handed to POST events' own handler (hub/rest/events.c), so it is
 * checked, published, kept in the history and sent to the other nodes as
 * a REST trigger would be. What it skips is what the admin token stands
 * for: the app's signature and its REST rate limit.
 *
 * Thread: the loop that received the console's request.
 */
#include "hub/rest/rest.h"

#include <string.h>

#include "hub/app/app.h"
#include "hub/rest/events.h"
#include "hub/rest/handler.h"

void hub_rest_trusted_publish(struct hub_loop *l, const struct hub_app *app,
                              const char *name, const char *channel,
                              const char *data, struct hub_rest_response *out)
{
    /* Never waits: without "info" nothing asks the directory. */
    struct hub_rest_call call = { NULL, NULL, NULL, true };
    struct hub_rest_req r = { .l = l, .app = app, .method = HUB_HTTP_POST,
                              .param = "", .call = &call };
    json_t *body;

    memset(out, 0, sizeof(*out));
    if (!app->enabled) {
        hub_rest_reply_error(out, 403, "app is disabled");
        return;
    }
    body = json_pack("{s:s, s:s, s:s}", "name", name, "channel", channel,
                     "data", data);
    if (!body) {
        hub_rest_reply_error(out, 500, "out of memory");
        return;
    }
    r.body = body;
    hub_rest_events_post(&r, out);
    json_decref(body);
}
