/*
 * hub/base/why.h - the one-line reason that hub functions hand back to callers
 * (auth checks, message parsing) for logs and error replies.
 * Internal to hub/. Any thread.
 */
#ifndef HUB_WHY_H
#define HUB_WHY_H

#include <stddef.h>

/* printf into why (NUL-terminated, why_len bytes); harmless if why is NULL. */
void hub__set_why(char *why, size_t why_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
