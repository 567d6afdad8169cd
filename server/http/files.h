/*
 * server/http/files.h - the static web pages under --web-root, private to
 * server/http/ (server/http/files.c). Thread: the connection's loop.
 */
#ifndef SRV_HTTP_FILES_H
#define SRV_HTTP_FILES_H

#include "server/http/request.h"

/* Serve path ("/" is index.html, "/dashboard" dashboard.html) from the
 * web root, or 404; "/lubdub-resume.js" from the binary itself, whatever
 * the web root holds. 0, or -1 to close. */
int srv_http_files_serve(struct lws *wsi, struct srv_loop *l,
                         struct http_req *p, const char *path);

#endif
