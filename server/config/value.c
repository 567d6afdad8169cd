/*
 * server/config/value.c - one option's value (server/config/value.h): the
 * number syntax (durations "25s", sizes "64KiB", with their units), the
 * text of every type parsed into its field by srv__set_text(), values
 * spelled back for range messages, and the frees that tell owned strings
 * from borrowed table text.
 *
 * Thread: main thread, while the configuration loads or is checked.
 */
#include "server/config/value.h"
#include "server/config/config_error.h"
#include "server/config/options.h"
#include "server/config/settings.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hub/app/app.h"
#include "hub/webhook/webhook.h"

/* A multiplier for a number's suffix; "" is the bare-number unit. */
struct srv__unit {
    const char *suffix;
    uint64_t mult;
};

static const struct srv__unit srv__duration_units[] = {
    {"", 1}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}, {NULL, 0},
};

/* Binary with "i" (KiB), decimal without (k, KB), as disks and SI do. */
static const struct srv__unit srv__size_units[] = {
    {"", 1}, {"b", 1},
    {"k", 1000}, {"kb", 1000}, {"kib", 1024},
    {"m", 1000000}, {"mb", 1000000}, {"mib", 1048576},
    {"g", 1000000000}, {"gb", 1000000000}, {"gib", 1073741824},
    {NULL, 0},
};

static const struct srv__unit srv__plain_units[] = {{"", 1}, {NULL, 0}};

void srv__free_string(char **slot)
{
    if (*slot && !srv__is_borrowed(*slot))
        free(*slot);
    *slot = NULL;
}

void *srv__field(void *base, const struct srv_option_desc *d)
{
    return (char *)base + d->offset_;
}

uint64_t srv__get_uint(const void *base, const struct srv_option_desc *d)
{
    const char *p = (const char *)base + d->offset_;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;

    switch (d->size_) {
    case sizeof(u16):
        memcpy(&u16, p, sizeof(u16));
        return u16;
    case sizeof(u32):
        memcpy(&u32, p, sizeof(u32));
        return u32;
    default:
        memcpy(&u64, p, sizeof(u64));
        return u64;
    }
}

void srv__put_uint(void *base, const struct srv_option_desc *d,
                   uint64_t v)
{
    char *p = srv__field(base, d);
    uint16_t u16 = (uint16_t)v;
    uint32_t u32 = (uint32_t)v;

    switch (d->size_) {
    case sizeof(u16):
        memcpy(p, &u16, sizeof(u16));
        break;
    case sizeof(u32):
        memcpy(p, &u32, sizeof(u32));
        break;
    default:
        memcpy(p, &v, sizeof(v));
        break;
    }
}

/*
 * Parse "<digits>[.<digits>]<unit>" into *out (value times the unit's
 * multiplier). Returns 0; -EINVAL for anything else; -ERANGE when the
 * result does not fit 64 bits; -EDOM when a fraction does not come out
 * whole in the base unit ("1.5ms"). At most six fractional digits.
 */
static int srv__parse_scaled(const char *s, const struct srv__unit *units,
                             bool fold_case, uint64_t *out)
{
    uint64_t ip = 0, fnum = 0, fden = 1, mult = 0, whole, frac;
    bool overflow = false;
    int nd = 0;
    size_t i;

    if (*s < '0' || *s > '9')
        return -EINVAL;
    for (; *s >= '0' && *s <= '9'; s++) {
        unsigned d = (unsigned)(*s - '0');

        if (ip > (UINT64_MAX - d) / 10)
            overflow = true;
        else
            ip = ip * 10 + d;
    }
    if (*s == '.') {
        s++;
        if (*s < '0' || *s > '9')
            return -EINVAL;
        for (; *s >= '0' && *s <= '9'; s++) {
            if (++nd > 6)
                return -EINVAL;
            fnum = fnum * 10 + (uint64_t)(*s - '0');
            fden *= 10;
        }
    }
    for (i = 0; units[i].suffix; i++) {
        if (fold_case ? !strcasecmp(s, units[i].suffix)
                      : !strcmp(s, units[i].suffix)) {
            mult = units[i].mult;
            break;
        }
    }
    if (!mult)
        return -EINVAL;
    if (overflow || ip > UINT64_MAX / mult)
        return -ERANGE;
    whole = ip * mult;
    /* fnum < 10^6 and mult < 2^31, so the product cannot overflow. */
    if ((fnum * mult) % fden)
        return -EDOM;
    frac = fnum * mult / fden;
    if (whole > UINT64_MAX - frac)
        return -ERANGE;
    *out = whole + frac;
    return 0;
}

/* Shortest exact spelling of ms: "0", "25s", "2m", "1h" or "1500ms". */
void srv__fmt_ms(uint64_t ms, char *buf, size_t len)
{
    if (ms == 0)
        snprintf(buf, len, "0");
    else if (ms % 3600000 == 0)
        snprintf(buf, len, "%lluh", (unsigned long long)(ms / 3600000));
    else if (ms % 60000 == 0)
        snprintf(buf, len, "%llum", (unsigned long long)(ms / 60000));
    else if (ms % 1000 == 0)
        snprintf(buf, len, "%llus", (unsigned long long)(ms / 1000));
    else
        snprintf(buf, len, "%llums", (unsigned long long)ms);
}

void srv__fmt_size(uint64_t b, char *buf, size_t len)
{
    if (b && b % 1073741824 == 0)
        snprintf(buf, len, "%lluGiB", (unsigned long long)(b / 1073741824));
    else if (b && b % 1048576 == 0)
        snprintf(buf, len, "%lluMiB", (unsigned long long)(b / 1048576));
    else if (b && b % 1024 == 0)
        snprintf(buf, len, "%lluKiB", (unsigned long long)(b / 1024));
    else
        snprintf(buf, len, "%llu", (unsigned long long)b);
}

/* A value of d's type in its own syntax, for range messages. */
void srv__fmt_value(const struct srv_option_desc *d, uint64_t v,
                    char *buf, size_t len)
{
    switch (d->type) {
    case SRV_OPT_DURATION:
        srv__fmt_ms(v, buf, len);
        break;
    case SRV_OPT_SECONDS:
        srv__fmt_ms(v * 1000, buf, len);
        break;
    case SRV_OPT_SIZE:
        srv__fmt_size(v, buf, len);
        break;
    default:
        snprintf(buf, len, "%llu", (unsigned long long)v);
        break;
    }
}

int srv__range_err(const struct srv_option_desc *d, const char *label,
                   const char *shown, char *err, size_t errlen)
{
    char lo[32], hi[32];

    srv__fmt_value(d, d->min, lo, sizeof(lo));
    srv__fmt_value(d, d->max, hi, sizeof(hi));
    srv_config_err(err, errlen, "%s: %s is out of range %s..%s", label, shown, lo,
             hi);
    return -EINVAL;
}

/* Parse a numeric value of d's type into its stored unit. */
static int srv__parse_number(const struct srv_option_desc *d,
                             const char *text, const char *label,
                             uint64_t *out, char *err, size_t errlen)
{
    const struct srv__unit *units = srv__plain_units;
    const char *what = "a whole number";
    uint64_t v = 0;
    int rc;

    if (d->type == SRV_OPT_DURATION || d->type == SRV_OPT_SECONDS) {
        units = srv__duration_units;
        what = "a duration (e.g. 25s, 500ms, 2m)";
    } else if (d->type == SRV_OPT_SIZE) {
        units = srv__size_units;
        what = "a size (e.g. 64KiB, 1MiB, 10k)";
    }
    if (text[0] == '-') {
        srv_config_err(err, errlen, "%s: \"%s\" is negative", label, text);
        return -EINVAL;
    }
    rc = srv__parse_scaled(text, units, d->type == SRV_OPT_SIZE, &v);
    if (rc == -ERANGE)
        return srv__range_err(d, label, text, err, errlen);
    if (rc == -EDOM && d->type == SRV_OPT_DURATION) {
        srv_config_err(err, errlen, "%s: \"%s\" is not a whole number of "
                 "milliseconds", label, text);
        return -EINVAL;
    }
    if (rc == -EDOM && d->type == SRV_OPT_SIZE) {
        srv_config_err(err, errlen, "%s: \"%s\" is not a whole number of bytes",
                 label, text);
        return -EINVAL;
    }
    if (rc == 0 && d->type == SRV_OPT_SECONDS && v % 1000)
        rc = -EDOM;
    if (rc == -EDOM && d->type == SRV_OPT_SECONDS) {
        srv_config_err(err, errlen, "%s: \"%s\" is not a whole number of seconds "
                 "(e.g. 600s, 10m; a bare number is milliseconds)", label,
                 text);
        return -EINVAL;
    }
    if (rc) {
        srv_config_err(err, errlen, "%s: \"%s\" is not %s", label, text, what);
        return -EINVAL;
    }
    if (d->type == SRV_OPT_SECONDS)
        v /= 1000;
    if (v < d->min || v > d->max)
        return srv__range_err(d, label, text, err, errlen);
    *out = v;
    return 0;
}

static int srv__parse_bool(const char *text, bool *out)
{
    if (!strcmp(text, "true") || !strcmp(text, "1"))
        *out = true;
    else if (!strcmp(text, "false") || !strcmp(text, "0"))
        *out = false;
    else
        return -EINVAL;
    return 0;
}

/*
 * Set d's field in base (a struct srv_config or a struct hub_app) from
 * text. label names the option and its source in errors: "--port",
 * "LUBDUB_PORT" or "lubdub.json: \"port\"". When borrow is true a string
 * value is stored as is (it must be table text); otherwise it is copied.
 */
int srv__set_text(void *base, const struct srv_option_desc *d,
                  const char *text, const char *label, bool borrow,
                  char *err, size_t errlen)
{
    char **slot;
    uint64_t v = 0;
    bool b;
    size_t i;
    int rc;

    switch (d->type) {
    case SRV_OPT_STRING:
        slot = srv__field(base, d);
        if (!text || !*text) {
            if (!(d->flags & SRV_OPTF_NULLABLE)) {
                srv_config_err(err, errlen, "%s: must not be empty", label);
                return -EINVAL;
            }
            srv__free_string(slot);
            return 0;
        }
        if (borrow) {
            srv__free_string(slot);
            /* Borrowed table text; fini recognises it and won't free it. */
            *slot = (char *)text;
            return 0;
        } else {
            char *copy = strdup(text);

            if (!copy) {
                srv_config_err(err, errlen, "%s: out of memory", label);
                return -ENOMEM;
            }
            srv__free_string(slot);
            *slot = copy;
        }
        return 0;
    case SRV_OPT_BOOL:
        if (srv__parse_bool(text, &b)) {
            srv_config_err(err, errlen, "%s: \"%s\" is not a boolean (true, false, "
                     "1 or 0)", label, text);
            return -EINVAL;
        }
        memcpy(srv__field(base, d), &b, sizeof(b));
        return 0;
    case SRV_OPT_CHOICE:
    case SRV_OPT_ENUM:
        for (i = 0; d->choices[i]; i++)
            if (!strcmp(text, d->choices[i]))
                break;
        if (!d->choices[i]) {
            char list[128] = "";

            for (i = 0; d->choices[i]; i++) {
                if (i)
                    strncat(list, "|", sizeof(list) - strlen(list) - 1);
                strncat(list, d->choices[i], sizeof(list) - strlen(list) - 1);
            }
            srv_config_err(err, errlen, "%s: \"%s\" is not one of %s", label, text,
                     list);
            return -EINVAL;
        }
        if (d->type == SRV_OPT_CHOICE) {
            slot = srv__field(base, d);
            srv__free_string(slot);
            /* Borrowed from the choices list, like a default. */
            *slot = (char *)d->choices[i];
        } else {
            int idx = (int)i;

            assert(d->size_ == sizeof(idx));
            memcpy(srv__field(base, d), &idx, sizeof(idx));
        }
        return 0;
    default:
        rc = srv__parse_number(d, text, label, &v, err, errlen);
        if (rc)
            return rc;
        srv__put_uint(base, d, v);
        return 0;
    }
}

/* The default app's id, key and secret may be borrowed table text; the
 * rest of an app's owned fields go through hub/app/app.c's one free path. */
void srv__app_fini(struct hub_app *app)
{
    srv__free_string(&app->id);
    srv__free_string(&app->key);
    srv__free_string(&app->secret);
    hub_wh_app_free(app);
    hub_app_clear(app);
}

/* Drop the file's apps: the view goes back to the default app. */
void srv__file_apps_fini(struct srv_config *cfg)
{
    for (unsigned i = 0; i < cfg->n_file_apps; i++)
        srv__app_fini(&cfg->file_apps[i]);
    free(cfg->file_apps);
    cfg->file_apps = NULL;
    cfg->n_file_apps = 0;
    cfg->apps = &cfg->app0;
    cfg->n_apps = 1;
}

/* Wipe a secret read from a file, then free it. */
void srv__free_secret(char **slot)
{
    if (*slot) {
        explicit_bzero(*slot, strlen(*slot));
        free(*slot);
    }
    *slot = NULL;
}
