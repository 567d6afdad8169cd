/*
 * server/config/config_history.c - an app's "history" key (issue 35;
 * docs/CONFIG.md "History", docs/RECOVERY.md):
 *
 *   "history": {"ttl": "120s", "size": 1000,
 *               "channels": ["orders-*", "news"], "max_bytes": "8MiB"}
 *
 * or true (on, every default) or false / null / absent (off). Checked
 * whole here so that --check-config and a SIGHUP reload refuse a bad one
 * with one line naming the file, the app and the key: ttl a duration
 * (1s..24h), size a count of events per channel (1..100000), max_bytes a
 * size (0 = no bound of the app's own), channels 1 to 64 patterns of 1 to
 * 200 bytes, each a channel name or a prefix of one followed by '*'.
 * Numbers go through the option parser (server/config/value.c), so they
 * read like every other duration and size. Unknown keys are refused.
 *
 * Thread: main thread, while the configuration loads.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "hub/app/app.h"
#include "hub/wire/protocol.h"
#include "server/config/config_error.h"
#include "server/config/config_history.h"
#include "server/config/options.h"
#include "server/config/value.h"

#define HIST_FIELD(field) offsetof(struct hub_app, field), \
    sizeof(((struct hub_app *)0)->field), NULL

/* The numeric keys, in the option table's shape so that srv__set_text()
 * parses them and words their range errors. */
static const struct srv_option_desc hist_fields[] = {
    {"ttl", SRV_OPT_DURATION, SRV_SRC_FILE, 0, NULL, NULL, NULL, NULL,
     HUB_APP_HISTORY_TTL_MIN_MS, HUB_APP_HISTORY_TTL_MAX_MS, 0,
     HIST_FIELD(history_ttl_ms)},
    {"size", SRV_OPT_UINT, SRV_SRC_FILE, 0, NULL, NULL, NULL, NULL,
     1, HUB_APP_HISTORY_SIZE_MAX, 0, HIST_FIELD(history_size)},
    {"max_bytes", SRV_OPT_SIZE, SRV_SRC_FILE, 0, NULL, NULL, NULL, NULL,
     0, UINT64_C(16) << 30, 0, HIST_FIELD(history_max_bytes)},
};

#define HIST_N_FIELDS (sizeof(hist_fields) / sizeof(hist_fields[0]))
#define HIST_KEYS "ttl, size, channels, max_bytes"

/* A number key's value: a JSON string in the option syntax ("120s") or a
 * whole JSON number (milliseconds, events, bytes). */
static int set_number(struct hub_app *app, const struct srv_option_desc *d,
                      json_t *val, const char *label, char *err,
                      size_t errlen)
{
    char text[32];

    if (json_is_string(val))
        return srv__set_text(app, d, json_string_value(val), label, false,
                             err, errlen);
    if (!json_is_integer(val)) {
        srv_config_err(err, errlen, "%s: must be a whole number or a "
                       "string (e.g. %s)", label,
                       d->type == SRV_OPT_DURATION ? "\"120s\""
                       : d->type == SRV_OPT_SIZE   ? "\"8MiB\""
                                                   : "1000");
        return -EINVAL;
    }
    snprintf(text, sizeof(text), "%" JSON_INTEGER_FORMAT,
             json_integer_value(val));
    return srv__set_text(app, d, text, label, false, err, errlen);
}

/* One pattern: a channel name, or the start of one followed by '*'
 * (alone, "*" is every channel). Never a "#" name: the hub's own
 * channels keep no history. */
static int check_pattern(const char *p, size_t n, const char *label,
                         char *err, size_t errlen)
{
    size_t stem = n && p[n - 1] == '*' ? n - 1 : n;

    if (!n || n > HUB_APP_HISTORY_PATTERN_MAX) {
        srv_config_err(err, errlen, "%s: %zu bytes; a pattern is 1 to %u",
                       label, n, HUB_APP_HISTORY_PATTERN_MAX);
        return -EINVAL;
    }
    if (p[0] == '#') {
        srv_config_err(err, errlen, "%s: \"%s\": \"#\" channels (the "
                       "hub's own) keep no history", label, p);
        return -EINVAL;
    }
    if (stem && (memchr(p, '\0', n) ||
                 hub_channel_name_check(p, stem, HUB_APP_HISTORY_PATTERN_MAX))) {
        srv_config_err(err, errlen, "%s: \"%s\" is not a channel name "
                       "(A-Z a-z 0-9 _ - = @ , . ;) nor one's prefix "
                       "followed by '*' (only a trailing '*' means a "
                       "prefix)", label, p);
        return -EINVAL;
    }
    return 0;
}

/* "channels": 1 to HUB_APP_HISTORY_CHANNELS_MAX patterns, kept as given.
 * label names the key, named the app (" (app \"x\")" or ""). */
static int set_channels(struct hub_app *app, json_t *val, const char *label,
                        const char *named, char *err, size_t errlen)
{
    size_t n = json_is_array(val) ? json_array_size(val) : 0, i;
    char sub[720];
    int rc;

    if (!json_is_array(val) || !n || n > HUB_APP_HISTORY_CHANNELS_MAX) {
        srv_config_err(err, errlen, "%s%s: must be an array of 1 to %u "
                       "channel names or prefixes (\"orders-*\"); leave it "
                       "out for every channel of the app", label, named,
                       HUB_APP_HISTORY_CHANNELS_MAX);
        return -EINVAL;
    }
    app->history_channels = calloc(n, sizeof(*app->history_channels));
    if (!app->history_channels) {
        srv_config_err(err, errlen, "%s%s: out of memory", label, named);
        return -ENOMEM;
    }
    for (i = 0; i < n; i++) {
        json_t *v = json_array_get(val, i);

        snprintf(sub, sizeof(sub), "%s[%zu]%s", label, i, named);
        if (!json_is_string(v)) {
            srv_config_err(err, errlen, "%s: must be a string", sub);
            return -EINVAL;
        }
        rc = check_pattern(json_string_value(v), json_string_length(v), sub,
                           err, errlen);
        if (rc)
            return rc;
        /* Counted as soon as made: hub_app_clear() frees a partial list. */
        app->history_channels[i] = strdup(json_string_value(v));
        if (!app->history_channels[i]) {
            srv_config_err(err, errlen, "%s: out of memory", sub);
            return -ENOMEM;
        }
        app->n_history_channels = (unsigned)i + 1;
    }
    return 0;
}

/* The history fields back to hub_app_defaults(), the list freed. */
static void history_reset(struct hub_app *app)
{
    struct hub_app d;

    for (unsigned i = 0; i < app->n_history_channels; i++)
        free(app->history_channels[i]);
    free(app->history_channels);
    app->history_channels = NULL;
    app->n_history_channels = 0;
    memset(&d, 0, sizeof(d));
    hub_app_defaults(&d);
    app->history = d.history;
    app->history_ttl_ms = d.history_ttl_ms;
    app->history_size = d.history_size;
    app->history_max_bytes = d.history_max_bytes;
}

static int parse_object(struct hub_app *app, json_t *obj, const char *label,
                        const char *named, char *err, size_t errlen)
{
    const char *key;
    json_t *val;
    char sub[700];
    size_t i;
    int rc;

    json_object_foreach(obj, key, val) {
        if (!strcmp(key, "channels")) {
            snprintf(sub, sizeof(sub), "%s.%s", label, key);
            rc = set_channels(app, val, sub, named, err, errlen);
            if (rc)
                return rc;
            continue;
        }
        snprintf(sub, sizeof(sub), "%s.%s%s", label, key, named);
        for (i = 0; i < HIST_N_FIELDS; i++)
            if (!strcmp(key, hist_fields[i].name))
                break;
        if (i == HIST_N_FIELDS) {
            srv_config_err(err, errlen, "%s: unknown key (history takes "
                           HIST_KEYS ")", sub);
            return -EINVAL;
        }
        rc = set_number(app, &hist_fields[i], val, sub, err, errlen);
        if (rc)
            return rc;
    }
    return 0;
}

int srv_config_history(struct hub_app *app, json_t *val, const char *label,
                       const char *id, char *err, size_t errlen)
{
    char named[160] = "";

    if (id)
        snprintf(named, sizeof(named), " (app \"%.100s\")", id);
    history_reset(app);
    if (json_is_null(val) || json_is_false(val))
        return 0;
    if (!json_is_true(val) && !json_is_object(val)) {
        srv_config_err(err, errlen, "%s%s: must be true, false or an object "
                       "{\"ttl\", \"size\", \"channels\", \"max_bytes\"}",
                       label, named);
        return -EINVAL;
    }
    app->history = true;
    return json_is_object(val)
               ? parse_object(app, val, label, named, err, errlen)
               : 0;
}
