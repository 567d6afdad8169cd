/*
 * server/config/config_error.c - one configuration error as one line
 * (server/config/config_error.h), the formatter every part of the loader
 * reports through: the value parser, the loaders, the checks and an app's
 * webhooks.
 *
 * Thread: any (it writes only into the caller's buffer).
 */
#include <stdarg.h>
#include <stdio.h>

#include "server/config/config_error.h"

/*
 * The error is one line: keys and values come from the file, the
 * environment and the flags, and may hold newlines or other control
 * characters ({"a\nb": 1}), which are written as \xNN.
 */
void srv_config_err(char *err, size_t errlen, const char *fmt, ...)
{
    char raw[1024];
    size_t i, o = 0;
    va_list ap;

    if (!err || !errlen)
        return;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);
    for (i = 0; raw[i] && o + 1 < errlen; i++) {
        unsigned char c = (unsigned char)raw[i];

        if (c >= 0x20 && c != 0x7f) {
            err[o++] = (char)c;
        } else if (o + 4 < errlen) {
            snprintf(err + o, 5, "\\x%02x", c);
            o += 4;
        } else {
            break;
        }
    }
    err[o] = '\0';
}
