/*
 * hub/base/json.h - JSON text from jansson values that is whole or nothing.
 *
 * jansson 2.14's json_dumps() does not check every write it makes: when
 * growing its buffer fails while an object key goes out, it carries on
 * with the value, and the text it returns lacks the key (or its quotes).
 * hub_json_dumps() latches the first failed write so the dump fails to the
 * end and returns NULL instead.
 *
 * Thread: any (no shared state).
 */
#ifndef HUB_JSON_H
#define HUB_JSON_H

#include <stddef.h>

#include <jansson.h>

/* Owned NUL-terminated text of j (flags as json_dumps), or NULL when out
 * of memory or j is NULL. */
char *hub_json_dumps(const json_t *j, size_t flags);

#endif
