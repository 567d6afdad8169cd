/*
 * hub/rest/terminate.c - POST users/{user_id}/terminate_connections
 * (hub/rest/terminate.h): the path's shape, the method, the user id
 * percent-decoded and checked against the app's max_user_id_len, then
 * hub_terminate_user() (hub/loop/backplane.h). The decoded id is held for
 * the call only; its size is bounded by the request's path.
 *
 * Thread: the loop that received the request.
 */
#include "hub/rest/terminate.h"

#include <stdlib.h>
#include <string.h>

#include "hub/app/app.h"
#include "hub/base/query.h"
#include "hub/loop/backplane.h"
#include "hub/loop/loop.h"

void hub_rest_terminate_post(const struct hub_rest_req *r,
                             struct hub_rest_response *out)
{
    const char *uid = r->param, *slash = strchr(uid, '/');
    /* As long as the app's max_user_id_len allows: decoding never
     * lengthens, so the encoded length bounds it (the request's path,
     * bounded by the HTTP layer). */
    char *user = slash ? malloc((size_t)(slash - uid) + 1) : NULL;
    int rc;

    if (!slash || strcmp(slash, "/terminate_connections") != 0) {
        free(user);
        hub_rest_reply_error(out, 404, "not found");
        return;
    }
    if (r->method != HUB_HTTP_POST) {
        free(user);
        hub_rest_reply_error(out, 405, "use POST");
        return;
    }
    if (!user) {
        hub_rest_reply_error(out, 500, "out of memory");
        return;
    }
    /* A %00 is refused by the decoder: a NUL would cut the id short and
     * terminate another user. */
    if (slash == uid ||
        hub_query_decode(user, (size_t)(slash - uid) + 1, uid,
                         (size_t)(slash - uid)) ||
        !*user || strlen(user) > r->app->max_user_id_len) {
        free(user);
        hub_rest_reply_error(out, 400, "bad user id");
        return;
    }
    rc = hub_terminate_user(r->l->hub, r->l, r->app->index, user);
    free(user);
    if (rc) {
        hub_rest_reply_error(out, 500, "out of memory");
        return;
    }
    hub_rest_reply_json(out, 200, json_object());
}
