/*
 * server/config/config_webhooks.c - an app's "webhooks" key: the shape soketi's
 * users already write,
 *
 *   [{"url": "https://...", "event_types": ["channel_occupied", ...],
 *     "filter": {"channel_name_starts_with": "...",
 *                "channel_name_ends_with": "..."},
 *     "headers": {"Name": "value"}}]
 *
 * checked whole here so that --check-config reports a bad one in one
 * line: the URL scheme (http or https) and host, every event type known,
 * header names HTTP tokens and values free of CR, LF and other control
 * characters, the headers lubdub sets itself not overridden, and at most
 * HUB_WH_MAX_WEBHOOKS webhooks and HUB_WH_MAX_HEADERS headers each.
 *
 * Thread: main thread, while the configuration loads.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>

#include "hub/app/app.h"
#include "hub/webhook/webhook.h"
#include "server/config/config_error.h"
#include "server/config/config_webhooks.h"

static const char *const reserved[] = {
    "content-type", "content-length", "host", "x-pusher-key",
    "x-pusher-signature", "idempotency-key", "x-lubdub-idempotency-key",
    "expect", "transfer-encoding", "connection", NULL,
};

static bool is_tchar(unsigned char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
           (c >= 'A' && c <= 'Z') || strchr("!#$%&'*+-.^_`|~", c);
}

static int check_url(const char *url, const char *label, char *err,
                     size_t errlen)
{
    const char *host;
    size_t n = strlen(url);

    if (!strncasecmp(url, "http://", 7))
        host = url + 7;
    else if (!strncasecmp(url, "https://", 8))
        host = url + 8;
    else {
        srv_config_err(err, errlen, "%s: \"%s\" must start with http:// or "
                              "https://", label, url);
        return -EINVAL;
    }
    if (n > HUB_WH_MAX_URL) {
        srv_config_err(err, errlen, "%s: longer than %d bytes", label,
                 HUB_WH_MAX_URL);
        return -EINVAL;
    }
    if (!*host || *host == '/' || *host == ':' || *host == '?') {
        srv_config_err(err, errlen, "%s: \"%s\" has no host", label, url);
        return -EINVAL;
    }
    for (const unsigned char *p = (const unsigned char *)url; *p; p++)
        if (*p <= ' ' || *p == 0x7f) {
            srv_config_err(err, errlen, "%s: must not contain spaces or control "
                                  "characters", label);
            return -EINVAL;
        }
    return 0;
}

static int dup_opt(json_t *v, char **out, const char *label, char *err,
                   size_t errlen)
{
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v)) {
        srv_config_err(err, errlen, "%s: must be a string", label);
        return -EINVAL;
    }
    if (!*json_string_value(v))
        return 0;                 /* "" filters nothing */
    *out = strdup(json_string_value(v));
    if (!*out) {
        srv_config_err(err, errlen, "%s: out of memory", label);
        return -ENOMEM;
    }
    return 0;
}

static int parse_headers(struct hub_wh_conf *w, json_t *h,
                         const char *label, char *err, size_t errlen)
{
    const char *name;
    json_t *v;

    if (!json_is_object(h)) {
        srv_config_err(err, errlen, "%s.headers: must be an object of strings",
                 label);
        return -EINVAL;
    }
    if (json_object_size(h) > HUB_WH_MAX_HEADERS) {
        srv_config_err(err, errlen, "%s.headers: %zu headers; at most %d",
                 label, json_object_size(h), HUB_WH_MAX_HEADERS);
        return -EINVAL;
    }
    w->headers = calloc(json_object_size(h) + 1, sizeof(*w->headers));
    if (!w->headers) {
        srv_config_err(err, errlen, "%s: out of memory", label);
        return -ENOMEM;
    }
    json_object_foreach(h, name, v) {
        const char *val;
        size_t len;

        if (!*name) {
            srv_config_err(err, errlen, "%s.headers: an empty header name",
                     label);
            return -EINVAL;
        }
        for (const char *p = name; *p; p++)
            if (!is_tchar((unsigned char)*p)) {
                srv_config_err(err, errlen, "%s.headers: \"%.64s\" is not a "
                                      "valid header name", label, name);
                return -EINVAL;
            }
        for (unsigned r = 0; reserved[r]; r++)
            if (!strcasecmp(name, reserved[r])) {
                srv_config_err(err, errlen, "%s.headers: \"%s\" is set by lubdub "
                                      "and cannot be overridden", label,
                         name);
                return -EINVAL;
            }
        if (!json_is_string(v)) {
            srv_config_err(err, errlen, "%s.headers.%s: must be a string", label,
                     name);
            return -EINVAL;
        }
        val = json_string_value(v);
        len = json_string_length(v);
        if (strlen(val) != len) {
            srv_config_err(err, errlen, "%s.headers.%s: must not contain NUL",
                     label, name);
            return -EINVAL;
        }
        for (const unsigned char *p = (const unsigned char *)val; *p; p++)
            if ((*p < ' ' && *p != '\t') || *p == 0x7f) {
                srv_config_err(err, errlen, "%s.headers.%s: must not contain CR, "
                                      "LF or other control characters",
                         label, name);
                return -EINVAL;
            }
        if (strlen(name) + 2 + len > HUB_WH_MAX_HEADER_BYTES) {
            srv_config_err(err, errlen, "%s.headers.%s: longer than %d bytes",
                     label, name, HUB_WH_MAX_HEADER_BYTES);
            return -EINVAL;
        }
        w->headers[w->n_headers] = malloc(strlen(name) + 2 + len + 1);
        if (!w->headers[w->n_headers]) {
            srv_config_err(err, errlen, "%s: out of memory", label);
            return -ENOMEM;
        }
        sprintf(w->headers[w->n_headers], "%s: %s", name, val);
        w->n_headers++;
    }
    return 0;
}

static int parse_one(struct hub_wh_conf *w, json_t *o,
                     const char *label, char *err, size_t errlen)
{
    const char *key;
    json_t *v, *types, *filter, *headers;
    char sub[700]; /* the caller's label (at most 600) and a key path */
    size_t i;
    int rc;

    if (!json_is_object(o)) {
        srv_config_err(err, errlen, "%s: must be an object", label);
        return -EINVAL;
    }
    json_object_foreach(o, key, v) {
        if (strcmp(key, "url") && strcmp(key, "event_types") &&
            strcmp(key, "filter") && strcmp(key, "headers")) {
            srv_config_err(err, errlen, "%s.%s: unknown key (a webhook has url, "
                                  "event_types, filter, headers)", label,
                     key);
            return -EINVAL;
        }
    }
    v = json_object_get(o, "url");
    if (!json_is_string(v)) {
        srv_config_err(err, errlen, "%s.url: %s", label,
                 v ? "must be a string" : "is missing");
        return -EINVAL;
    }
    snprintf(sub, sizeof(sub), "%s.url", label);
    if ((rc = check_url(json_string_value(v), sub, err, errlen)))
        return rc;
    w->url = strdup(json_string_value(v));
    if (!w->url) {
        srv_config_err(err, errlen, "%s: out of memory", label);
        return -ENOMEM;
    }
    types = json_object_get(o, "event_types");
    if (!json_is_array(types) || !json_array_size(types)) {
        srv_config_err(err, errlen, "%s.event_types: %s", label,
                 types ? "must be a non-empty array of event names"
                       : "is missing");
        return -EINVAL;
    }
    json_array_foreach(types, i, v) {
        int t = json_is_string(v) ? hub_wh_type_parse(json_string_value(v))
                                  : -1;

        if (t < 0) {
            char *d = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);

            srv_config_err(err, errlen, "%s.event_types[%zu]: %.64s is not an "
                                  "event type (channel_occupied, "
                                  "channel_vacated, member_added, "
                                  "member_removed, client_event, "
                                  "cache_miss)",
                     label, i, d ? d : "?");
            free(d);
            return -EINVAL;
        }
        w->types |= HUB_WH_BIT((unsigned)t);
    }
    filter = json_object_get(o, "filter");
    if (filter && !json_is_null(filter)) {
        if (!json_is_object(filter)) {
            srv_config_err(err, errlen, "%s.filter: must be an object", label);
            return -EINVAL;
        }
        json_object_foreach(filter, key, v) {
            if (strcmp(key, "channel_name_starts_with") &&
                strcmp(key, "channel_name_ends_with")) {
                srv_config_err(err, errlen, "%s.filter.%s: unknown key (a filter "
                                      "has channel_name_starts_with, "
                                      "channel_name_ends_with)",
                         label, key);
                return -EINVAL;
            }
        }
        snprintf(sub, sizeof(sub), "%s.filter.channel_name_starts_with",
                 label);
        rc = dup_opt(json_object_get(filter, "channel_name_starts_with"),
                     &w->starts_with, sub, err, errlen);
        if (rc)
            return rc;
        snprintf(sub, sizeof(sub), "%s.filter.channel_name_ends_with",
                 label);
        rc = dup_opt(json_object_get(filter, "channel_name_ends_with"),
                     &w->ends_with, sub, err, errlen);
        if (rc)
            return rc;
    }
    headers = json_object_get(o, "headers");
    if (headers && !json_is_null(headers))
        return parse_headers(w, headers, label, err, errlen);
    return 0;
}

int srv_config_webhooks(struct hub_app *app, json_t *val, const char *label,
                        char *err, size_t errlen)
{
    size_t n, i;
    char sub[600];
    int rc;

    hub_wh_app_free(app);
    if (json_is_null(val))
        return 0;
    if (!json_is_array(val)) {
        srv_config_err(err, errlen, "%s: must be an array of webhooks", label);
        return -EINVAL;
    }
    n = json_array_size(val);
    if (n > HUB_WH_MAX_WEBHOOKS) {
        srv_config_err(err, errlen, "%s: %zu webhooks; at most %d per app", label,
                 n, HUB_WH_MAX_WEBHOOKS);
        return -EINVAL;
    }
    if (!n)
        return 0;
    app->webhooks = calloc(n, sizeof(*app->webhooks));
    if (!app->webhooks) {
        srv_config_err(err, errlen, "%s: out of memory", label);
        return -ENOMEM;
    }
    for (i = 0; i < n; i++) {
        snprintf(sub, sizeof(sub), "%s[%zu]", label, i);
        app->n_webhooks = (unsigned)i + 1;
        rc = parse_one(&app->webhooks[i], json_array_get(val, i), sub, err,
                       errlen);
        if (rc)
            return rc;        /* the app frees what was made */
        app->webhook_types |= app->webhooks[i].types;
    }
    return 0;
}
