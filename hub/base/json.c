/*
 * hub/base/json.c - a json_dumps() that fails whole (hub/base/json.h).
 */
#include "hub/base/json.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct dump_buf {
    char *p;
    size_t len, cap;
    bool failed;
};

/* jansson's dump callback. Once a write failed, every later one fails
 * too, whether or not jansson looked at the first result. */
static int put(const char *s, size_t n, void *data)
{
    struct dump_buf *b = data;

    if (!b->failed && b->cap - b->len <= n) {
        size_t cap = b->cap * 2 + n + 1;
        char *np = realloc(b->p, cap);

        if (np) {
            b->p = np;
            b->cap = cap;
        } else {
            b->failed = true;
        }
    }
    if (b->failed)
        return -1;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

char *hub_json_dumps(const json_t *j, size_t flags)
{
    struct dump_buf b = { 0 };

    if (!j)
        return NULL;
    if (json_dump_callback(j, put, &b, flags) || b.failed || !b.p) {
        free(b.p);
        return NULL;
    }
    return b.p;
}
