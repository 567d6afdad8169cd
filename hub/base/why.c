/*
 * hub/base/why.c - see why.h.
 */
#include "hub/base/why.h"

#include <stdarg.h>
#include <stdio.h>

void hub__set_why(char *why, size_t why_len, const char *fmt, ...)
{
    va_list ap;

    if (why == NULL || why_len == 0)
        return;
    va_start(ap, fmt);
    vsnprintf(why, why_len, fmt, ap);
    va_end(ap);
}
