/*
 * server/http/dev_auth.c - the development auth endpoint
 * (server/http/dev_auth.h): POST /auth, only when dev_auth_endpoint is set
 * (make run's config), signs private and presence subscriptions with the
 * first app's first key/secret pair (its key and secret; with key rotation
 * the hub accepts any pair's signature on a connection of any of the
 * app's keys: hub/app/auth.h), as an app server would, so that the demo
 * pages need no app server. Form fields: socket_id, channel_name, optional
 * user_id, user_name. Not for production: anyone who reaches it gets signatures.
 *
 * Thread: the connection's loop.
 */
#include "server/http/dev_auth.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "hub/app/apptab.h"
#include "hub/app/auth.h"
#include "hub/base/query.h"
#include "hub/wire/protocol.h"

int srv_http_dev_auth(struct lws *wsi, struct srv_loop *l, struct http_req *p)
{
    const struct hub_apptab *tab = hub_apps(l->srv->hub);
    const struct hub_app *app = NULL;
    struct hub_query *q;

    /* The first app of the current table (a reload may remove apps). */
    for (unsigned i = 0; !app && i < tab->n; i++)
        app = tab->apps[i];
    q = app ? malloc(sizeof(*q)) : NULL;
    const char *sid, *ch, *uid, *uname;
    char sig[HUB_SHA256_HEX_LEN + 1], *tosign = NULL, *cd = NULL;
    json_t *resp;
    char *text;
    int rc;

    if (!q)
        return -1;
    if (hub_query_parse(q, p->body ? p->body : "", p->body_len)) {
        free(q);
        return srv_http_respond_json_error(wsi, p, 400, "bad form body");
    }
    sid = hub_query_find(q, "socket_id");
    ch = hub_query_find(q, "channel_name");
    if (!sid || !ch || hub_channel_name_check(ch, strlen(ch), 200)) {
        free(q);
        return srv_http_respond_json_error(
            wsi, p, 400, "socket_id and channel_name are required");
    }
    if (hub_channel_classify(ch, strlen(ch)) == HUB_CHANNEL_PRESENCE) {
        char gen[32];
        json_t *o;

        uid = hub_query_find(q, "user_id");
        uname = hub_query_find(q, "user_name");
        if (!uid || !*uid) {
            snprintf(gen, sizeof(gen), "user-%s", sid);
            uid = gen;
        }
        o = json_pack("{s:s,s:{s:s}}", "user_id", uid, "user_info", "name",
                      uname && *uname ? uname : uid);
        cd = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!cd) {
            free(q);
            return -1;
        }
        rc = asprintf(&tosign, "%s:%s:%s", sid, ch, cd);
    } else {
        rc = asprintf(&tosign, "%s:%s", sid, ch);
    }
    if (rc < 0) {
        free(cd);
        free(q);
        return -1;
    }
    hub_auth_hmac_hex(app->secret, strlen(app->secret), tosign, strlen(tosign),
                      sig);
    free(tosign);
    free(q);
    resp = json_object();
    {
        char auth[512];

        snprintf(auth, sizeof(auth), "%s:%s", app->key, sig);
        json_object_set_new(resp, "auth", json_string(auth));
    }
    if (cd)
        json_object_set_new(resp, "channel_data", json_string(cd));
    free(cd);
    text = json_dumps(resp, JSON_COMPACT);
    json_decref(resp);
    if (!text)
        return -1;
    rc = srv_http_respond(wsi, p, 200, "application/json", text,
                          strlen(text));
    free(text);
    return rc;
}
