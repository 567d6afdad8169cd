/*
 * server/http/files.c - the static web pages (server/http/files.h): a
 * path of a fixed charset and without "..", a regular file under the
 * configured web root, its type from its extension, handed to lws to
 * send. Anything else is a prompt 404.
 *
 * One file is the binary's own whatever the web root holds:
 * /lubdub-resume.js, the resume helper (web/lubdub-resume.js, embedded at
 * build time by server/http/embed.cmake). It speaks this hub's side of the
 * recovery messages (docs/PROTOCOL.md), so a custom --web-root without it,
 * or with an older copy, must not change what apps import. It goes out
 * like every other answer (srv_http_respond: no-store, as lws sends the
 * web root's files, and "access-control-allow-origin: *", which a module
 * script imported from an app on another origin needs).
 *
 * Thread: the connection's loop.
 */
#include "server/http/files.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "server/http/web_text.h"

/* The Content-Type of path's extension. */
static const char *mime_of(const char *path)
{
    const char *ext = strrchr(path, '.');

    if (!ext)
        return "application/octet-stream";
    if (!strcmp(ext, ".html"))
        return "text/html; charset=utf-8";
    if (!strcmp(ext, ".js") || !strcmp(ext, ".mjs"))
        return "text/javascript; charset=utf-8";
    if (!strcmp(ext, ".css"))
        return "text/css; charset=utf-8";
    if (!strcmp(ext, ".svg"))
        return "image/svg+xml";
    if (!strcmp(ext, ".png"))
        return "image/png";
    if (!strcmp(ext, ".json"))
        return "application/json";
    if (!strcmp(ext, ".ico"))
        return "image/x-icon";
    return "application/octet-stream";
}

int srv_http_files_serve(struct lws *wsi, struct srv_loop *l,
                         struct http_req *p, const char *path)
{
    char file[1024];
    struct stat st;

    if (strcmp(path, "/lubdub-resume.js") == 0)
        return srv_http_respond(wsi, p, 200, "text/javascript; charset=utf-8",
                                (const char *)SRV_WEB_LUBDUB_RESUME,
                                sizeof(SRV_WEB_LUBDUB_RESUME));
    if (strcmp(path, "/") == 0)
        path = "/index.html";
    else if (strcmp(path, "/dashboard") == 0 || strcmp(path, "/dashboard/") == 0)
        path = "/dashboard.html";
    if (strstr(path, "..") || strspn(path + 1,
                                     "abcdefghijklmnopqrstuvwxyz"
                                     "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
                                     "._-/") != strlen(path + 1))
        return srv_http_respond_json_error(wsi, p, 404, "not found");
    snprintf(file, sizeof(file), "%s%s", l->srv->cfg->web_root, path);
    if (stat(file, &st) || !S_ISREG(st.st_mode))
        return srv_http_respond_json_error(wsi, p, 404, "not found");
    if (lws_serve_http_file(wsi, file, mime_of(path), NULL, 0))
        return -1;
    return 0;
}
