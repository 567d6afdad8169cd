/*
 * server/config/options.h - the option table: one row per option, which
 * drives the flags, the environment variables, the JSON keys, the defaults,
 * --help and the docs test (tests/unit/test_config.c against
 * docs/CONFIG.md), and the keys of one app in the file's "apps" array.
 *
 * An option named "ping_interval" is the flag --ping-interval, the variable
 * LUBDUB_PING_INTERVAL and the JSON key "ping_interval";
 * srv_config_option_name() spells them. The srv__ lookups below serve the
 * other parts of the loader (server/config/load_*.c, validate.c, help.c).
 *
 * Thread: any (the table is constant).
 */
#ifndef SRV_OPTIONS_H
#define SRV_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum srv_option_type {
    SRV_OPT_STRING,   /* text */
    SRV_OPT_UINT,     /* decimal integer */
    SRV_OPT_DURATION, /* stored in milliseconds */
    SRV_OPT_SECONDS,  /* duration syntax, stored in whole seconds */
    SRV_OPT_SIZE,     /* stored in bytes */
    SRV_OPT_BOOL,
    SRV_OPT_CHOICE,   /* one of choices, stored as a borrowed string */
    SRV_OPT_ENUM,     /* one of choices, stored as its index */
};

/* Where an option may be set (srv_option_desc.sources). */
#define SRV_SRC_FLAG 1u
#define SRV_SRC_ENV 2u
#define SRV_SRC_FILE 4u

/* srv_option_desc.flags. */
#define SRV_OPTF_NULLABLE 1u      /* an empty value means unset */
#define SRV_OPTF_DEFAULT_APP 2u   /* sets the default app; not with "apps" */
#define SRV_OPTF_BUILD_DEFAULT 4u /* the default is chosen at compile time */

struct srv_option_desc {
    const char *name;            /* JSON spelling: "ping_interval" */
    enum srv_option_type type;
    unsigned sources;            /* SRV_SRC_* */
    unsigned flags;              /* SRV_OPTF_* */
    const char *def;             /* default as text; NULL = unset */
    const char *metavar;         /* "ADDR"; NULL = derived from the type */
    const char *help;            /* one or two sentences */
    const char *const *choices;  /* NULL-terminated, CHOICE and ENUM */
    uint64_t min, max;           /* numeric range in the stored unit */
    char short_flag;             /* 'h' for -h; 0 = none */
    /* Private to the loader: where the value lives in its struct. */
    size_t offset_;
    size_t size_;
    /* The environment variable when it is not LUBDUB_<NAME>; NULL = that. */
    const char *env;
};

/* The environment variables' prefix. */
#define SRV_ENV_PREFIX "LUBDUB_"
/* The default app's secret, refused on a public bind (validate.c). */
#define SRV_DEFAULT_SECRET "app-secret"

/* *out gets the table (borrowed, static); returns the number of rows. */
size_t srv_config_options(const struct srv_option_desc **out);

/*
 * Spell d for one source (SRV_SRC_FLAG "--ping-interval", SRV_SRC_ENV
 * "LUBDUB_PING_INTERVAL", SRV_SRC_FILE "ping_interval") into buf.
 * Returns 0, -ENOENT if d cannot be set from that source, -ENOSPC if buf
 * is too small.
 */
int srv_config_option_name(const struct srv_option_desc *d, unsigned source,
                           char *buf, size_t len);

/* The row whose flag is name[0..len) ("ping-interval"), or NULL. */
const struct srv_option_desc *srv__find_flag(const char *name, size_t len);
/* The row whose short flag is c ('h'), or NULL. */
const struct srv_option_desc *srv__find_short(char c);
/* The row whose JSON key is key, or NULL. */
const struct srv_option_desc *srv__find_option_key(const char *key);
/* The key of one object in the file's "apps" array, or NULL. */
const struct srv_option_desc *srv__find_app_key(const char *key);
/* The row whose environment variable is name ("LUBDUB_PORT"), or NULL. */
const struct srv_option_desc *srv__find_env(const char *name);
/*
 * Did-you-mean (server/config/didyoumean.h) for a key or a variable that is
 * none of the table's: the nearest top-level JSON key ("apps" included),
 * the nearest key of an app object (the table's and extra's, a
 * NULL-terminated list of the keys the file's loader handles itself), each
 * NULL when none is close; and the nearest LUBDUB_* variable to name,
 * spelled into buf: 0, -ENOENT when none is close, -ENOSPC.
 */
const char *srv__near_option_key(const char *key);
const char *srv__near_app_key(const char *key, const char *const *extra);
int srv__near_env(const char *name, char *buf, size_t len);
/* The flag of the option called name ("--ping-interval" for
 * "ping_interval") in buf (len bytes), or name itself when it has none;
 * returns buf. For error lines. */
const char *srv__flag(const char *name, char *buf, size_t len);
/* True when p points at text in the table (a default or a choice), which
 * a struct srv_config borrows rather than owns. */
bool srv__is_borrowed(const char *p);

#endif
