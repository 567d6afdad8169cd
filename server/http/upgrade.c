/*
 * server/http/upgrade.c - a WebSocket upgrade's checks before lws answers
 * it (server/lws/srv.h): the request is on /app/{key}, the hub is not
 * draining nor at max_connections (503), and its Origin is allowed by the
 * app's or the hub-wide list (403) (srv_http_filter_upgrade()); the
 * handshake keeps RFC 6455 (426 for a version other than 13, 400 for a
 * bad key, no Host, no "Connection: upgrade", or a method other than GET;
 * 431 for a cut header) and names no subprotocol lws would bind wrongly
 * (400) (srv_http_confirm_upgrade()). Each refusal is a whole response,
 * from srv_http_refuse() (server/http/headers.c) or, for the filter's
 * 404, 503 and 403, lws_return_http_status(); all but the 404 are counted
 * in rejected_http and logged through srv_log_peer().
 *
 * Thread: the connection's loop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hub/app/apptab.h"
#include "hub/wire/pmd.h"
#include "hub/wire/ws.h"
#include "server/http/headers.h"
#include "server/lws/direct.h"

/*
 * Sec-WebSocket-Protocol, before lws reads it. lws 4.1.6 binds the upgrade
 * to the first listed name that is any protocol of the vhost
 * (lws_process_ws_upgrade in lib/roles/ws/server-ws.c), the internal raw
 * ones ("acceptor", "metrics-acceptor") included, which would make a
 * WebSocket no hub code counts, pings or drains, on any path; and it
 * closes without a status when no name is one. The same walk here, with
 * lws's tokenizer, flags and buffer sizes, answers 400 instead when lws
 * would pick no protocol or an internal one (docs/LWS.md, "Subprotocol
 * names bind to any protocol of the vhost"). No header: lws binds the
 * vhost's default, "lubdub". The internal protocols' own
 * FILTER_PROTOCOL_CONNECTION refuses too, should the two walks differ.
 */
static int confirm_subprotocol(struct srv_loop *l, struct lws *wsi)
{
    const struct lws_protocols *pcol = NULL;
    char buf[128], name[64];
    struct lws_tokenize ts;
    lws_tokenize_elem e;
    int n = lws_hdr_copy(wsi, buf, sizeof(buf) - 1, WSI_TOKEN_PROTOCOL);

    if (n == 0)
        return 0;
    if (n > 0) {
        lws_tokenize_init(&ts, buf, LWS_TOKENIZE_F_COMMA_SEP_LIST |
                                        LWS_TOKENIZE_F_MINUS_NONTERM |
                                        LWS_TOKENIZE_F_DOT_NONTERM |
                                        LWS_TOKENIZE_F_RFC7230_DELIMS);
        ts.len = (size_t)n;
        do {
            e = lws_tokenize(&ts);
            if (e == LWS_TOKZE_TOKEN) {
                if (lws_tokenize_cstr(&ts, name, sizeof(name)))
                    break;
                pcol = lws_vhost_name_to_protocol(lws_get_vhost(wsi), name);
                if (pcol)
                    break;
            } else if (e != LWS_TOKZE_DELIMITER && e != LWS_TOKZE_ENDED) {
                break;
            }
        } while (e > 0);
    }
    if (pcol && !srv_protocol_internal(pcol))
        return 0;
    srv_log_peer_event(HUB_LOG_INFO, l->id,
                       HUB_LOG_F(.event = "upgrade_refused",
                                 .status = 400, .reason = "bad_subprotocol"),
                       "upgrade refused: 400 Sec-WebSocket-Protocol \"%s\" "
                       "names no protocol the hub offers",
                       n > 0 ? buf : "(over 127 bytes)");
    return srv_http_refuse(wsi, l, 400, "Bad Request", NULL, NULL);
}

/*
 * RFC 6455 section 4.2.1 on a WebSocket upgrade, before lws answers it:
 * lws 4.1.6 accepts any Sec-WebSocket-Version as 13, any key, and closes
 * without a status when the key, Host or "Connection: upgrade" is
 * missing. 0 lets the upgrade go on.
 */
int srv_http_confirm_upgrade(struct srv_loop *l, struct lws *wsi,
                             const char *upgrade)
{
    char v[160];
    size_t n;

    if (!upgrade || strcasecmp(upgrade, "websocket") != 0)
        return 0;
    if (srv_http_header_cut(wsi))
        return srv_http_refuse_too_big(wsi, l);
    if (lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) <= 0) {
        srv_log_peer_event(HUB_LOG_INFO, l->id,
                           HUB_LOG_F(.event = "upgrade_refused",
                                     .status = 400, .reason = "not_get"),
                           "upgrade refused: 400 not a GET");
        return srv_http_refuse(wsi, l, 400, "Bad Request", NULL, NULL);
    }
    if (!srv_http_hdr_value(wsi, WSI_TOKEN_VERSION, v, sizeof(v), &n) ||
        !hub_ws_version_ok(v, n)) {
        srv_log_peer_event(HUB_LOG_INFO, l->id,
                           HUB_LOG_F(.event = "upgrade_refused",
                                     .status = 426, .reason = "bad_version"),
                           "upgrade refused: 426 Sec-WebSocket-Version "
                           "\"%s\"",
                           n ? v : "");
        return srv_http_refuse(wsi, l, 426, "Upgrade Required",
                      "sec-websocket-version:", "13");
    }
    if (lws_hdr_total_length(wsi, WSI_TOKEN_HOST) <= 0) {
        srv_log_peer_event(HUB_LOG_INFO, l->id,
                           HUB_LOG_F(.event = "upgrade_refused",
                                     .status = 400, .reason = "no_host"),
                           "upgrade refused: 400 no Host");
        return srv_http_refuse(wsi, l, 400, "Bad Request", NULL, NULL);
    }
    if (!srv_http_hdr_value(wsi, WSI_TOKEN_CONNECTION, v, sizeof(v), &n) ||
        !hub_ws_list_has_token(v, n, "upgrade")) {
        srv_log_peer_event(HUB_LOG_INFO, l->id,
                           HUB_LOG_F(.event = "upgrade_refused",
                                     .status = 400,
                                     .reason = "no_connection_upgrade"),
                           "upgrade refused: 400 no \"Connection: upgrade\"");
        return srv_http_refuse(wsi, l, 400, "Bad Request", NULL, NULL);
    }
    if (!srv_http_hdr_value(wsi, WSI_TOKEN_KEY, v, sizeof(v), &n) ||
        !hub_ws_key_ok(v, n)) {
        srv_log_peer_event(HUB_LOG_INFO, l->id,
                           HUB_LOG_F(.event = "upgrade_refused",
                                     .status = 400, .reason = "bad_key"),
                           "upgrade refused: 400 Sec-WebSocket-Key \"%s\"",
                           n ? v : "");
        return srv_http_refuse(wsi, l, 400, "Bad Request", NULL, NULL);
    }
    return confirm_subprotocol(l, wsi);
}

/*
 * LWS_CALLBACK_ADD_HEADERS of a WebSocket upgrade: the answer to the
 * client's permessage-deflate offer (hub/wire/pmd.h), when the hub and
 * the app compress and the bypass will read the session (lws 4.1.6's own
 * extension negotiation is never used: it fails the upgrade on a repeated
 * offer and cannot add client_no_context_takeover). Repeated header lines
 * are joined with ", " (lws_hdr_copy would run them together). An offer
 * that cannot be read whole (over 1 KiB) is declined, which is always
 * allowed. 0, or -1 when the header does not fit lws's buffer.
 */
int srv_http_ws_extensions(struct srv_loop *l, struct lws *wsi,
                           struct lws_process_html_args *a)
{
    char offer[1024], answer[192], uri[256];
    const struct hub_app *app;
    size_t n = 0;
    int k, ulen;

    if (!l->srv->cfg->compression || !srv_direct_would_take(l, wsi) ||
        lws_hdr_total_length(wsi, WSI_TOKEN_KEY) <= 0 ||
        lws_hdr_total_length(wsi, WSI_TOKEN_EXTENSIONS) <= 0)
        return 0;
    ulen = lws_hdr_copy(wsi, uri, sizeof(uri), WSI_TOKEN_GET_URI);
    app = ulen > 5 ? hub_apptab_by_key(hub_apps(l->srv->hub), uri + 5,
                                       (size_t)ulen - 5)
                   : NULL;
    if (!app || !app->compression)
        return 0;
    /* lws_hdr_copy_fragment() says -1 both past the last line and for a
     * line too long: the lines' lengths tell them apart. */
    for (int i = 0; (k = lws_hdr_fragment_length(wsi, WSI_TOKEN_EXTENSIONS,
                                                 i)) > 0;
         i++) {
        size_t sep = n ? 2 : 0;

        if (n + sep + (size_t)k + 1 > sizeof(offer))
            return 0;
        memcpy(offer + n, ", ", sep);
        if (lws_hdr_copy_fragment(wsi, offer + n + sep,
                                  (int)(sizeof(offer) - n - sep),
                                  WSI_TOKEN_EXTENSIONS, i) != k)
            return 0;
        n += sep + (size_t)k;
    }
    if (!hub_pmd_negotiate(offer, n, answer, sizeof(answer)))
        return 0;
    k = snprintf(a->p, (size_t)a->max_len, "Sec-WebSocket-Extensions: %s\r\n",
                 answer);
    if (k < 0 || k >= a->max_len)
        return -1;
    a->p += k;
    a->max_len -= k;
    srv_direct_note_pmd(wsi);
    return 0;
}

int srv_http_filter_upgrade(struct srv_loop *l, struct lws *wsi)
{
    const struct srv_config *cfg = l->srv->cfg;
    char uri[256], origin[256];
    int n = lws_hdr_copy(wsi, uri, sizeof(uri), WSI_TOKEN_GET_URI);
    uint32_t live = (uint32_t)atomic_load(&l->srv->hub->sessions);
    const struct hub_app *app;
    const char *list;
    bool own, draining = atomic_load(&l->srv->hub->draining);

    if (n <= 5 || strncmp(uri, "/app/", 5) != 0) {
        lws_return_http_status(wsi, HTTP_STATUS_NOT_FOUND, NULL);
        return 1;
    }
    if (draining || (cfg->max_connections && live >= cfg->max_connections)) {
        HUB_STAT_ADD(l->hub->stats.rejected_http, 1);
        srv_log_peer_event(HUB_LOG_WARN, l->id,
                           HUB_LOG_F(.event = "upgrade_refused",
                                     .status = 503,
                                     .reason = draining ? "draining"
                                                        : "max_connections"),
                           "upgrade refused: 503 (%u sessions, limit %u%s)",
                           live, cfg->max_connections,
                           draining ? ", draining" : "");
        lws_return_http_status(wsi, HTTP_STATUS_SERVICE_UNAVAILABLE, NULL);
        return 1;
    }
    /* The app's own allowed_origins, when it has one, instead of the
     * hub-wide list (issue 13 item 6); an unknown key gets the hub-wide
     * one here and 4001 once connected. */
    app = hub_apptab_by_key(hub_apps(l->srv->hub), uri + 5, (size_t)n - 5);
    own = app && app->allowed_origins;
    list = own ? app->allowed_origins : cfg->allowed_origins;
    if (list && *list) {
        const char *e;
        bool ok = false;
        size_t olen;

        n = lws_hdr_copy(wsi, origin, sizeof(origin), WSI_TOKEN_ORIGIN);
        olen = n > 0 ? (size_t)n : 0;
        while (olen && *list) {
            e = strchr(list, ',');
            size_t ilen = e ? (size_t)(e - list) : strlen(list);

            while (ilen && *list == ' ') {
                list++;
                ilen--;
            }
            if ((ilen == 1 && *list == '*') ||
                (ilen == olen && strncasecmp(list, origin, olen) == 0))
                ok = true;
            list = e ? e + 1 : list + ilen;
        }
        if (!ok) {
            HUB_STAT_ADD(l->hub->stats.rejected_http, 1);
            srv_log_peer_event(HUB_LOG_INFO, l->id,
                               HUB_LOG_F(.event = "upgrade_refused",
                                         .status = 403, .reason = "origin",
                                         .app = own ? app->id : NULL),
                               "upgrade refused: 403 origin \"%s\" not "
                               "allowed by %s list%s%s",
                               olen ? origin : "",
                               own ? "the app's" : "the hub-wide",
                               own ? " of app " : "", own ? app->id : "");
            lws_return_http_status(wsi, HTTP_STATUS_FORBIDDEN, NULL);
            return 1;
        }
    }
    return 0;
}
