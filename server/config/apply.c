/*
 * server/config/apply.c - one source's value applied to the configuration
 * (server/config/apply.h): the default app's options refused once the file
 * lists "apps", the secrets given as values noted, so that the same
 * secret's file can be refused once every source is read, the source of
 * each option noted for --print-config, a JSON value checked for its
 * option's type (the lubdub file's keys, and lubdub's keys in a soketi
 * file alike), and the load's warnings kept for main() to log.
 *
 * Thread: main thread, while the configuration loads.
 */
#include "server/config/apply.h"
#include "server/config/config_error.h"
#include "server/config/options.h"
#include "server/config/settings.h"
#include "server/config/value.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The secrets that also have a file option, by their value's field. */
static const size_t srv__given[] = {
    offsetof(struct srv_config, admin_token),
    offsetof(struct srv_config, metrics_token),
    offsetof(struct srv_config, app0.secret),
};

/* After a source set d: note which source set it, and whether it is a
 * secret now given as a value (an empty value unsets it, and the note
 * with it). */
void srv__note_given(struct srv__load *ld,
                     const struct srv_option_desc *d)
{
    const struct srv_option_desc *opts;
    size_t n = srv_config_options(&opts);

    /* By identity: d may be an app's key, which is no row of the table. */
    for (size_t i = 0; i < n; i++)
        if (&opts[i] == d)
            ld->cfg->src_[i] = (unsigned char)ld->source;
    for (size_t i = 0; i < sizeof(srv__given) / sizeof(srv__given[0]); i++) {
        if (d->offset_ != srv__given[i])
            continue;
        if (*(char **)srv__field(ld->cfg, d))
            ld->given |= 1u << i;
        else
            ld->given &= ~(1u << i);
    }
}

/* Set an option from a source other than the defaults, with its checks. */
int srv__apply(struct srv__load *ld, const struct srv_option_desc *d,
               const char *text, const char *label)
{
    int rc;

    if ((d->flags & SRV_OPTF_DEFAULT_APP) && ld->file_has_apps) {
        srv_config_err(ld->err, ld->errlen, "%s: cannot change the default app "
                 "when %s lists \"apps\"; set it there", label, ld->file);
        return -EINVAL;
    }
    rc = srv__set_text(ld->cfg, d, text, label, false, ld->err, ld->errlen);
    if (!rc)
        srv__note_given(ld, d);
    return rc;
}

/*
 * Set a field from a JSON value: strings and numbers go through the same
 * text parser as flags ("25s" or 25000 both work for a duration), booleans
 * must be JSON booleans and strings JSON strings (null unsets a nullable).
 */
int srv__apply_json(struct srv__load *ld, void *base,
                           const struct srv_option_desc *d, json_t *val,
                           const char *label)
{
    char *dumped;
    int rc;

    if (d->type == SRV_OPT_BOOL) {
        if (!json_is_boolean(val)) {
            srv_config_err(ld->err, ld->errlen, "%s: must be true or false",
                     label);
            return -EINVAL;
        }
        return srv__set_text(base, d, json_is_true(val) ? "true" : "false",
                             label, false, ld->err, ld->errlen);
    }
    if (json_is_null(val) && (d->flags & SRV_OPTF_NULLABLE))
        return srv__set_text(base, d, NULL, label, false, ld->err,
                             ld->errlen);
    if (json_is_string(val))
        return srv__set_text(base, d, json_string_value(val), label, false,
                             ld->err, ld->errlen);
    if (d->type == SRV_OPT_STRING || d->type == SRV_OPT_CHOICE ||
        d->type == SRV_OPT_ENUM) {
        srv_config_err(ld->err, ld->errlen, "%s: must be a string", label);
        return -EINVAL;
    }
    dumped = json_dumps(val, JSON_ENCODE_ANY | JSON_COMPACT);
    if (!dumped) {
        srv_config_err(ld->err, ld->errlen, "%s: out of memory", label);
        return -ENOMEM;
    }
    rc = srv__set_text(base, d, dumped, label, false, ld->err, ld->errlen);
    free(dumped);
    return rc;
}

void srv__warn(struct srv__load *ld, const char *fmt, ...)
{
    char raw[512], line[600];
    size_t have, add;
    va_list ap;
    char *w;

    va_start(ap, fmt);
    vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);
    /* One line whatever a variable's name holds. */
    srv_config_err(line, sizeof(line), "%s", raw);
    have = ld->cfg->warnings ? strlen(ld->cfg->warnings) : 0;
    add = strlen(line);
    w = realloc(ld->cfg->warnings, have + add + 2);
    if (!w)
        return;
    memcpy(w + have, line, add);
    memcpy(w + have + add, "\n", 2);
    ld->cfg->warnings = w;
}
