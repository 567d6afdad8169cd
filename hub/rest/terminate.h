/*
 * hub/rest/terminate.h - POST users/{user_id}/terminate_connections,
 * private to hub/rest/ (a route of hub/rest/router.c). Thread: the loop
 * that received the request.
 */
#ifndef HUB_REST_TERMINATE_H
#define HUB_REST_TERMINATE_H

#include "hub/rest/handler.h"

/* Closes every connection signed in as the user, on every loop (and every
 * node: hub_terminate_user()); r->param is the path after "users/". Any
 * method is routed here: a path of another shape is a 404 before a GET
 * is a 405. */
hub_rest_handler_fn hub_rest_terminate_post;

#endif
