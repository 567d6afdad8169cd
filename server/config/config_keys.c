/*
 * server/config/config_keys.c - an app's "keys" (key rotation; docs/
 * CONFIG.md "Key rotation"):
 *
 *   "keys": [{"key": "new-key", "secret_file": "/run/secrets/new"},
 *            {"key": "old-key", "secret": "..."}]
 *
 * instead of "key" and "secret" / "secret_file", never beside them (which
 * pair was meant would be a guess). Each pair is an object with "key" (a
 * non-empty string) and exactly one of "secret" (a non-empty string) and
 * "secret_file" (read at once, and on every SIGHUP, by the same rules as
 * every secret file: server/config/secret.h). At most HUB_APP_KEYS_MAX
 * pairs (hub/app/app.h says why). The first pair is the one the hub signs
 * with (webhooks, the development /auth); hub/app/app.h keeps it in the
 * app's key and secret, so everything that reads one pair reads it.
 *
 * Thread: main thread, while the configuration loads.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "hub/app/app.h"
#include "server/config/config_error.h"
#include "server/config/config_keys.h"
#include "server/config/secret.h"
#include "server/config/settings.h"
#include "server/config/value.h"

int srv_config_keys_given(const char *file, size_t i, json_t *obj,
                          char *err, size_t errlen)
{
    static const char *const single[] = { "key", "secret", "secret_file" };
    const char *id = json_string_value(json_object_get(obj, "id"));
    char named[160] = "";

    if (!json_object_get(obj, "keys"))
        return 0;
    if (id)
        snprintf(named, sizeof(named), " (app \"%s\")", id);
    for (size_t k = 0; k < sizeof(single) / sizeof(single[0]); k++) {
        if (!json_object_get(obj, single[k]))
            continue;
        srv_config_err(err, errlen, "%s: apps[%zu]%s: \"keys\" and \"%s\" "
                       "are both given; give the key/secret pairs in "
                       "\"keys\" alone (its first pair signs webhooks)",
                       file, i, named, single[k]);
        return -EINVAL;
    }
    return 1;
}

/* A pair's "secret" or "secret_file" (its object p) into *out (owned). */
static int pair_secret(json_t *p, char **out, const char *label,
                       char *err, size_t errlen)
{
    json_t *s = json_object_get(p, "secret");
    json_t *f = json_object_get(p, "secret_file");
    char why[SRV_CFG_WHY_MAX];
    int rc;

    if (!s == !f) {
        srv_config_err(err, errlen, "%s: give one of \"secret\" and "
                       "\"secret_file\"%s", label, s ? ", not both" : "");
        return -EINVAL;
    }
    if (!json_is_string(s ? s : f) || !json_string_length(s ? s : f)) {
        srv_config_err(err, errlen, "%s.%s: must be a non-empty string%s",
                       label, s ? "secret" : "secret_file",
                       s ? "" : " (a file's path)");
        return -EINVAL;
    }
    if (s) {
        *out = strdup(json_string_value(s));
        rc = *out ? 0 : -ENOMEM;
    } else {
        rc = srv_secret_read_file(json_string_value(f), out, why,
                                  sizeof(why));
        if (rc && rc != -ENOMEM) {
            srv_config_err(err, errlen, "%s.secret_file: %s", label, why);
            return -EINVAL;
        }
    }
    if (rc)
        srv_config_err(err, errlen, "%s: out of memory", label);
    return rc;
}

/* One pair object p into *key and *secret (owned; both NULL on error). */
static int one_pair(json_t *p, char **key, char **secret, const char *label,
                    char *err, size_t errlen)
{
    const char *name;
    json_t *v;
    int rc;

    *key = *secret = NULL;
    if (!json_is_object(p)) {
        srv_config_err(err, errlen, "%s: must be an object {\"key\": ..., "
                       "\"secret\": ...} or {\"key\": ..., \"secret_file\": "
                       "...}", label);
        return -EINVAL;
    }
    json_object_foreach(p, name, v) {
        if (strcmp(name, "key") && strcmp(name, "secret") &&
            strcmp(name, "secret_file")) {
            srv_config_err(err, errlen, "%s.%s: unknown key (a pair holds "
                           "key, and secret or secret_file)", label, name);
            return -EINVAL;
        }
    }
    v = json_object_get(p, "key");
    if (!json_is_string(v) || !json_string_length(v)) {
        srv_config_err(err, errlen, "%s.key: %s", label,
                       v ? "must be a non-empty string" : "is missing");
        return -EINVAL;
    }
    rc = pair_secret(p, secret, label, err, errlen);
    if (rc)
        return rc;
    *key = strdup(json_string_value(v));
    if (!*key) {
        srv__free_secret(secret);
        srv_config_err(err, errlen, "%s: out of memory", label);
        return -ENOMEM;
    }
    return 0;
}

int srv_config_keys(struct hub_app *app, json_t *val, const char *label,
                    const char *id, char *err, size_t errlen)
{
    char named[160] = "", at[640];
    size_t n = json_array_size(val);
    char *key, *secret;
    int rc;

    if (id)
        snprintf(named, sizeof(named), " (app \"%s\")", id);
    if (!json_is_array(val) || !n || n > HUB_APP_KEYS_MAX) {
        srv_config_err(err, errlen, "%s%s: must be an array of 1 to %u "
                       "key/secret pairs%s", label, named,
                       (unsigned)HUB_APP_KEYS_MAX,
                       json_is_array(val) ? "" : " (objects)");
        return -EINVAL;
    }
    app->more_keys = n > 1 ? calloc(n - 1, sizeof(*app->more_keys)) : NULL;
    if (n > 1 && !app->more_keys) {
        srv_config_err(err, errlen, "%s%s: out of memory", label, named);
        return -ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(at, sizeof(at), "%s[%zu]%s", label, i, named);
        rc = one_pair(json_array_get(val, i), &key, &secret, at, err,
                      errlen);
        if (rc)
            return rc;
        if (i == 0) {
            srv__free_string(&app->key);
            srv__free_string(&app->secret);
            app->key = key;
            app->secret = secret;
            continue;
        }
        app->more_keys[i - 1].key = key;
        app->more_keys[i - 1].secret = secret;
        /* Counted as filled, so that hub_app_clear() frees a partial list. */
        app->n_more_keys = (unsigned)i;
    }
    return 0;
}
