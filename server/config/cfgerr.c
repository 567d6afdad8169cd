/*
 * server/config/cfgerr.c - the configuration loader's error formatter, shared by
 * server/config/config.c and server/config/config_webhooks.c (its own file so that
 * neither calls into the other: the call graph stays acyclic).
 *
 * Thread: main thread, while the configuration loads.
 */
#include <stdarg.h>
#include <stdio.h>

#include "server/config/config.h"

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
