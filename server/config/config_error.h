/*
 * server/config/config_error.h - one configuration error, formatted as one
 * line. Every part of the loader (the value parser, the loaders, the
 * checks, an app's webhooks) reports through it, so that an error quoting a
 * key or a value from a file, the environment or a flag never spans lines.
 *
 * Thread: any (it writes only into the caller's buffer).
 */
#ifndef SRV_CONFIG_ERROR_H
#define SRV_CONFIG_ERROR_H

#include <stddef.h>

/* Format a configuration error into err (errlen bytes, always one line):
 * control characters quoted back from keys, names or values are written
 * as \xNN. Does nothing when err is NULL or errlen is 0. */
void srv_config_err(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
