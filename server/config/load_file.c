/*
 * server/config/load_file.c - the JSON configuration file
 * (server/config/load_file.h): its top-level keys are the options' JSON
 * spellings, applied through the same value parser as flags; its "apps"
 * array lists the apps, each object's keys from the table's app rows, an
 * app's "secret_file" read at once (server/config/secret.h), its "keys"
 * (key rotation, server/config/config_keys.c) and "webhooks" checked whole (server/config/config_webhooks.c) and its
 * "history" too (server/config/config_history.c).
 *
 * Thread: main thread, while the configuration loads.
 */
#include "server/config/load_file.h"
#include "server/config/apply.h"
#include "server/config/config_error.h"
#include "server/config/config_history.h"
#include "server/config/config_keys.h"
#include "server/config/config_webhooks.h"
#include "server/config/load_soketi.h"
#include "server/config/options.h"
#include "server/config/secret.h"
#include "server/config/settings.h"
#include "server/config/value.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/app/app.h"

/*
 * An app's "allowed_origins" as a JSON array of strings: joined with
 * commas into the same list the string form gives (issue 13, item 6).
 */
static int srv__apply_origin_list(struct srv__load *ld, struct hub_app *app,
                                  const struct srv_option_desc *d,
                                  json_t *val, const char *label)
{
    size_t i, total = 1;
    json_t *v;
    char *list;
    int rc;

    json_array_foreach(val, i, v) {
        if (!json_is_string(v) || !json_string_length(v) ||
            strchr(json_string_value(v), ',')) {
            srv_config_err(ld->err, ld->errlen, "%s[%zu]: must be a non-empty "
                     "string without commas", label, i);
            return -EINVAL;
        }
        total += json_string_length(v) + 1;
    }
    if (!json_array_size(val)) {
        srv_config_err(ld->err, ld->errlen, "%s: must not be empty (leave it out "
                 "for the hub-wide --allowed-origins)", label);
        return -EINVAL;
    }
    list = malloc(total);
    if (!list) {
        srv_config_err(ld->err, ld->errlen, "%s: out of memory", label);
        return -ENOMEM;
    }
    list[0] = '\0';
    json_array_foreach(val, i, v) {
        if (i)
            strcat(list, ",");
        strcat(list, json_string_value(v));
    }
    rc = srv__set_text(app, d, list, label, false, ld->err, ld->errlen);
    free(list);
    return rc;
}

/*
 * An app's "secret_file" (val) in the apps object obj: the file is read
 * now (server/config/secret.h) into the app's secret. Errors name the app by
 * its place and, when the object has one, its id.
 */
static int srv__app_secret_file(struct srv__load *ld, struct hub_app *app,
                                json_t *obj, json_t *val, const char *label)
{
    const char *id = json_string_value(json_object_get(obj, "id"));
    char why[SRV_CFG_WHY_MAX], named[160] = "";
    char *v;
    int rc;

    if (id)
        snprintf(named, sizeof(named), " (app \"%s\")", id);
    if (!json_is_string(val) || !json_string_length(val)) {
        srv_config_err(ld->err, ld->errlen, "%s%s: must be a non-empty "
                       "string (a file's path)", label, named);
        return -EINVAL;
    }
    rc = srv_secret_read_file(json_string_value(val), &v, why, sizeof(why));
    if (rc) {
        srv_config_err(ld->err, ld->errlen, "%s%s: %s", label, named, why);
        return rc == -ENOMEM ? -ENOMEM : -EINVAL;
    }
    srv__free_string(&app->secret);
    app->secret = v;
    return 0;
}

/*
 * The app keys that are not rows of the table: "secret_file", "keys",
 * "webhooks" and "history" (key, its value val, in the apps object obj,
 * apps[i]). 1 when key is none of them (the caller looks it up in the
 * table), else 0 or the error of its parser.
 */
static int srv__app_own_key(struct srv__load *ld, struct hub_app *app,
                            json_t *obj, size_t i, const char *key,
                            json_t *val, char *label, size_t labelsz)
{
    if (!strcmp(key, "secret_file"))
        return srv__app_secret_file(ld, app, obj, val, label);
    /* Key rotation (server/config/config_keys.c): the app owns the pairs. */
    if (!strcmp(key, "keys"))
        return srv_config_keys(app, val, label,
                               json_string_value(json_object_get(obj, "id")),
                               ld->err, ld->errlen);
    /* server/config/config_webhooks.c: the app owns the list. */
    if (!strcmp(key, "webhooks"))
        return srv_config_webhooks(app, val, label, ld->err, ld->errlen);
    if (strcmp(key, "history"))
        return 1;
    /* server/config/config_history.c, which names the app itself: the
     * app owns the channel list. */
    snprintf(label, labelsz, "%s: apps[%zu].history", ld->file, i);
    return srv_config_history(app, val, label,
                              json_string_value(json_object_get(obj, "id")),
                              ld->err, ld->errlen);
}

/* The app keys srv__app_own_key() handles, for the did-you-mean. */
static const char *const srv__app_own_keys[] = {
    "secret_file", "keys", "webhooks", "history", NULL,
};

/* An unknown key (label names it), with the known key it most likely
 * meant when one is close (near; NULL: none). Returns -EINVAL. */
static int srv__unknown_key(struct srv__load *ld, const char *label,
                            const char *near)
{
    if (near)
        srv_config_err(ld->err, ld->errlen, "%s: unknown key; did you mean "
                       "\"%s\"?", label, near);
    else
        srv_config_err(ld->err, ld->errlen, "%s: unknown key", label);
    return -EINVAL;
}

static int srv__load_apps(struct srv__load *ld, json_t *apps)
{
    struct srv_config *cfg = ld->cfg;
    size_t i, n;
    char label[512];
    int rc;

    if (!json_is_array(apps) || !json_array_size(apps)) {
        srv_config_err(ld->err, ld->errlen, "%s: \"apps\" must be a non-empty "
                 "array of objects", ld->file);
        return -EINVAL;
    }
    n = json_array_size(apps);
    if (n > UINT32_MAX / 2) {
        srv_config_err(ld->err, ld->errlen, "%s: \"apps\" lists %zu apps", ld->file,
                 n);
        return -EINVAL;
    }
    srv__file_apps_fini(cfg);
    cfg->file_apps = calloc(n, sizeof(*cfg->file_apps));
    if (!cfg->file_apps) {
        srv_config_err(ld->err, ld->errlen, "%s: out of memory", ld->file);
        return -ENOMEM;
    }
    cfg->apps = cfg->file_apps;
    cfg->n_apps = 0;
    ld->file_has_apps = true;

    for (i = 0; i < n; i++) {
        struct hub_app *app = &cfg->file_apps[i];
        json_t *obj = json_array_get(apps, i), *val, *secret_file;
        const char *key;
        static const char *const required[] = {"id", "key", "secret"};
        size_t r;
        int keys;

        hub_app_defaults(app);
        app->index = (unsigned)i;
        cfg->n_apps = cfg->n_file_apps = (unsigned)i + 1;
        if (!json_is_object(obj)) {
            srv_config_err(ld->err, ld->errlen, "%s: apps[%zu] must be an object",
                     ld->file, i);
            return -EINVAL;
        }
        secret_file = json_object_get(obj, "secret_file");
        if (secret_file && json_object_get(obj, "secret")) {
            srv_config_err(ld->err, ld->errlen, "%s: apps[%zu]: \"secret\" "
                           "and \"secret_file\" are both given; give one",
                           ld->file, i);
            return -EINVAL;
        }
        /* "keys" stands for "key" and "secret" (never beside them). */
        keys = srv_config_keys_given(ld->file, i, obj, ld->err, ld->errlen);
        if (keys < 0)
            return keys;
        for (r = 0; r < (keys ? 1u : 3u); r++) {
            if (!json_object_get(obj, required[r]) &&
                !(r == 2 && secret_file)) {
                srv_config_err(ld->err, ld->errlen, "%s: apps[%zu]: \"%s\" is "
                         "missing", ld->file, i, required[r]);
                return -EINVAL;
            }
        }
        json_object_foreach(obj, key, val) {
            const struct srv_option_desc *d =
                srv__find_app_key(key);

            snprintf(label, sizeof(label), "%s: apps[%zu].%s", ld->file, i,
                     key);
            rc = srv__app_own_key(ld, app, obj, i, key, val, label,
                                  sizeof(label));
            if (rc <= 0) {
                if (rc)
                    return rc;
                continue;
            }
            if (!d)
                return srv__unknown_key(ld, label,
                                        srv__near_app_key(key,
                                                          srv__app_own_keys));
            if (json_is_array(val) &&
                d->offset_ == offsetof(struct hub_app, allowed_origins))
                rc = srv__apply_origin_list(ld, app, d, val, label);
            else
                rc = srv__apply_json(ld, app, d, val, label);
            if (rc)
                return rc;
        }
    }
    return 0;
}

/* Apply a parsed file (root, owned: released here) named path. */
int srv__load_root(struct srv__load *ld, json_t *root,
                   const json_error_t *jerr, const char *path)
{
    json_t *val;
    const char *key;
    char label[512];
    int rc = 0;

    ld->file = path;
    /* jansson 2.14 reports some allocation failures with their code, and
     * the one before parsing starts (its read buffer) with no text at all:
     * every parse or I/O error has a text. */
    if (!root && (json_error_code(jerr) == json_error_out_of_memory ||
                  !jerr->text[0])) {
        srv_config_err(ld->err, ld->errlen, "%s: out of memory", path);
        return -ENOMEM;
    }
    if (!root) {
        if (jerr->line > 0)
            srv_config_err(ld->err, ld->errlen, "%s:%d:%d: %s", path, jerr->line,
                     jerr->column, jerr->text);
        else
            srv_config_err(ld->err, ld->errlen, "%s: %s", path, jerr->text);
        return -EINVAL;
    }
    if (!json_is_object(root)) {
        srv_config_err(ld->err, ld->errlen, "%s: the top level must be a JSON "
                 "object", path);
        json_decref(root);
        return -EINVAL;
    }
    /* soketi's config.json: its options applied, its apps made lubdub's. */
    rc = srv_soketi_file(ld, &root);
    if (rc) {
        json_decref(root);
        return rc;
    }
    json_object_foreach(root, key, val) {
        const struct srv_option_desc *d;

        if (!strcmp(key, "apps")) {
            rc = srv__load_apps(ld, val);
            if (rc)
                break;
            continue;
        }
        snprintf(label, sizeof(label), "%s: \"%s\"", path, key);
        d = srv__find_option_key(key);
        if (!d) {
            rc = srv__unknown_key(ld, label, srv__near_option_key(key));
            break;
        }
        rc = srv__apply_json(ld, ld->cfg, d, val, label);
        if (rc)
            break;
        srv__note_given(ld, d);
    }
    json_decref(root);
    return rc;
}

int srv__load_file(struct srv__load *ld, const char *path)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);

    return srv__load_root(ld, root, &jerr, path);
}
