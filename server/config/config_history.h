/*
 * server/config/config_history.h - an app's "history" key in the config
 * file (issue 35, docs/CONFIG.md "History"), checked whole at load
 * (server/config/config_history.c).
 *
 * Thread: main thread, while the configuration loads.
 */
#ifndef SRV_CONFIG_HISTORY_H
#define SRV_CONFIG_HISTORY_H

#include <stddef.h>

struct hub_app;
struct json_t;

/*
 * Parse an app's "history" value (val, borrowed) into app's history
 * fields: false or null turn it off, true turns it on with the defaults
 * (hub_app_defaults), an object {"ttl", "size", "channels", "max_bytes"}
 * turns it on with the keys it gives. The channel list is owned by the app
 * (hub_app_clear frees it, a partial one too). label names the key in
 * errors ("lubdub.json: apps[0].history"), followed by the app's id when
 * id is not NULL ("lubdub.json: apps[0].history.ttl (app \"x\")"). 0, or
 * -EINVAL / -ENOMEM with one line in err (errlen bytes).
 */
int srv_config_history(struct hub_app *app, struct json_t *val,
                       const char *label, const char *id, char *err,
                       size_t errlen);

#endif
