/*
 * server/config/soketi_map.h - soketi's names and what each becomes in
 * lubdub: the table server/config/load_soketi.c reads soketi's
 * environment and config.json with (docs/MIGRATING.md lists the same).
 *
 * Thread: any (the tables are constant).
 */
#ifndef SRV_SOKETI_MAP_H
#define SRV_SOKETI_MAP_H

#include <stdbool.h>
#include <stddef.h>

/* How a soketi value becomes lubdub's text. */
enum srv_sk_conv {
    SRV_SK_TEXT,     /* as written */
    SRV_SK_UINT,     /* a non-negative integer */
    SRV_SK_LIMIT,    /* soketi's -1 (no limit) is lubdub's 0 */
    SRV_SK_BOOL,     /* true, false, 1 or 0 */
    SRV_SK_DEBUG,    /* true: log_level debug; false: nothing */
    SRV_SK_MS,       /* milliseconds: lubdub's bare number */
    SRV_SK_SEC,      /* seconds: "Ns" */
    SRV_SK_KIB,      /* kilobytes of 1024 bytes (soketi allows fractions) */
    SRV_SK_WEBHOOKS, /* an app's webhooks array */
    SRV_SK_ONLY,     /* lubdub has one answer: the value must be target */
    SRV_SK_GROUP,    /* read with its group (Redis, metrics) */
};

/* Where it lands. */
enum srv_sk_scope {
    SRV_SK_HUB,  /* lubdub's option target */
    SRV_SK_APP,  /* the key target of one app (SOKETI_DEFAULT_APP_*: the first) */
    SRV_SK_APPS, /* the key target of every app (hub-wide in soketi) */
};

struct srv_sk_row {
    const char *env;    /* after SOKETI_; NULL: only in an app object */
    const char *path;   /* soketi's option path; SRV_SK_APP: its app key */
    enum srv_sk_scope scope;
    enum srv_sk_conv conv;
    const char *target; /* lubdub's name, or SRV_SK_ONLY's one value */
};

/* At least as many rows as the table holds (soketi_map.c checks it). */
#define SRV_SK_MAX_ROWS 64

/* The table (borrowed, static) in *out; returns its number of rows. */
size_t srv_soketi_map_rows(const struct srv_sk_row **out);

/* The row of the variable SOKETI_<name[0..len)>, or NULL. */
const struct srv_sk_row *srv_soketi_map_env(const char *name, size_t len);

/* The SRV_SK_APP row whose key in a soketi app object is key, or NULL. */
const struct srv_sk_row *srv_soketi_map_app_key(const char *key);

/* Is key the first part of one of soketi's option paths ("adapter",
 * "appManager", ...) that lubdub does not share? */
bool srv_soketi_map_is_root(const char *key);

/*
 * soketi's defaults where lubdub's differ, given to an app soketi's names
 * describe, as pairs of lubdub's app key and its text; returns the number
 * of pairs.
 */
size_t srv_soketi_map_app_defaults(const char *const (**out)[2]);

#endif
