/*
 * server/http/dev_auth.h - the development auth endpoint (POST /auth when
 * dev_auth_endpoint is set: make run's config only), private to
 * server/http/ (server/http/dev_auth.c). Thread: the connection's loop.
 */
#ifndef SRV_HTTP_DEV_AUTH_H
#define SRV_HTTP_DEV_AUTH_H

#include "server/http/request.h"

/* Sign the form body's subscription as an app server would. 0, or -1 to
 * close (out of memory, or no app to sign with). */
int srv_http_dev_auth(struct lws *wsi, struct srv_loop *l,
                      struct http_req *p);

#endif
