/*
 * server/config/validate.h - the checks run on a loaded configuration: every
 * option's range again (for a struct that load did not fill), then the rules
 * across options (TLS pair, readable files, loopback-only settings, --redis
 * and its names, operator tokens, trusted proxies, tick <= ping interval,
 * queue sizes) and the apps (ids, unique keys, no default secret on a
 * public bind).
 *
 * Thread: main thread, before any loop starts, and at a reload.
 */
#ifndef SRV_VALIDATE_H
#define SRV_VALIDATE_H

#include <stddef.h>

struct srv_config;

/* 0, or -EINVAL with one line in err (errlen bytes) naming the option. */
int srv_config_validate(const struct srv_config *cfg, char *err, size_t errlen);

#endif
