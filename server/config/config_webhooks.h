/*
 * server/config/config_webhooks.h - an app's "webhooks" key in the config
 * file, checked whole at load (server/config/config_webhooks.c).
 *
 * Thread: main thread, while the configuration loads.
 */
#ifndef SRV_CONFIG_WEBHOOKS_H
#define SRV_CONFIG_WEBHOOKS_H

#include <stddef.h>

struct hub_app;
struct json_t;

/*
 * Parse an app's "webhooks" array (val, borrowed) into app->webhooks (owned
 * by the app; hub_wh_app_free). label names the key in errors. 0, or
 * -EINVAL / -ENOMEM with one line in err (errlen bytes).
 */
int srv_config_webhooks(struct hub_app *app, struct json_t *val,
                        const char *label, char *err, size_t errlen);

#endif
