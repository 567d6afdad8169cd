/*
 * server/config/config_keys.h - an app's "keys" in the config file (key
 * rotation, issue 36 item 8; docs/CONFIG.md "Key rotation"): 1 to
 * HUB_APP_KEYS_MAX key/secret pairs in place of "key" and "secret" /
 * "secret_file", checked whole at load (server/config/config_keys.c).
 *
 * Thread: main thread, while the configuration loads.
 */
#ifndef SRV_CONFIG_KEYS_H
#define SRV_CONFIG_KEYS_H

#include <stddef.h>

struct hub_app;
struct json_t;

/*
 * Does the apps object obj (apps[i] of file) give "keys"? 1 when it does
 * and gives none of "key", "secret" and "secret_file" beside it, 0 when it
 * gives no "keys", -EINVAL (one line in err naming the file, the app and
 * the keys given both ways) when it gives both.
 */
int srv_config_keys_given(const char *file, size_t i, struct json_t *obj,
                          char *err, size_t errlen);

/*
 * Parse "keys" (val, borrowed) into app: a non-empty array of at most
 * HUB_APP_KEYS_MAX objects {"key": ..., "secret": ...} or {"key": ...,
 * "secret_file": ...} (the file read now, by hardening's rules:
 * server/config/secret.h). The first pair becomes app->key and
 * app->secret, the others app->more_keys (owned by the app: hub_app_clear
 * frees them, a partial list too). label names the key in errors
 * ("lubdub.json: apps[0].keys"), followed by the app's id when id is not
 * NULL. Duplicate keys, within the app and across apps, are
 * server/config/validate.c's. 0, or -EINVAL / -ENOMEM with one line in err.
 */
int srv_config_keys(struct hub_app *app, struct json_t *val,
                    const char *label, const char *id, char *err,
                    size_t errlen);

#endif
