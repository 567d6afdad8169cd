/*
 * server/config/validate.h - the checks run on a loaded configuration: every
 * option's range again (for a struct that load did not fill), then the rules
 * across options (TLS pair, readable files, loopback-only settings, --redis
 * and its names, its TLS and Sentinel options, operator tokens, trusted proxies, tick <= ping interval,
 * queue sizes) and the apps (ids, unique keys, no default secret on a
 * public bind).
 *
 * Thread: main thread, before any loop starts, and at a reload.
 */
#ifndef SRV_VALIDATE_H
#define SRV_VALIDATE_H

#include <stddef.h>

struct srv_config;

/*
 * 0, or -EINVAL with one line in err (errlen bytes) naming the option
 * (-ENOMEM, "out of memory"). It completes cfg in one way: with
 * --redis-sentinel and no --redis, cfg->redis becomes
 * "redis://localhost:6379/0" (owned), the URL the node is clustered with
 * (the sentinels give its address); a second call keeps it.
 */
int srv_config_validate(struct srv_config *cfg, char *err, size_t errlen);

#endif
