/*
 * hub/rest/handler.c - the writers of an HTTP API answer
 * (hub/rest/handler.h): a JSON body, an {"error": ...} body, or a text
 * made beforehand. Each falls back to a 500 when out of memory, so every
 * handler answers something.
 *
 * Thread: the loop that received the request.
 */
#include "hub/rest/handler.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hub/base/json.h"

void hub_rest_reply_json(struct hub_rest_response *out, int status,
                         json_t *o)
{
    out->status = status;
    out->body = hub_json_dumps(o, JSON_COMPACT);
    out->len = out->body ? strlen(out->body) : 0;
    json_decref(o);
    if (!out->body) {
        out->status = 500;
        out->body = strdup("{\"error\":\"out of memory\"}");
        out->len = out->body ? strlen(out->body) : 0;
    }
}

void hub_rest_reply_error(struct hub_rest_response *out, int status,
                          const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    hub_rest_reply_json(out, status, json_pack("{s:s}", "error", msg));
}

void hub_rest_reply_text(struct hub_rest_response *out, char *text)
{
    out->status = 200;
    out->body = text;
    out->len = strlen(text);
}
