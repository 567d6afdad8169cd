/*
 * hub/rest/channels.h - the channel reads of the HTTP API, private to
 * hub/rest/ (the routes of hub/rest/router.c). Thread: the loop that
 * received the request.
 */
#ifndef HUB_REST_CHANNELS_H
#define HUB_REST_CHANNELS_H

#include "hub/rest/handler.h"

/* GET channels: the occupied channels, filter_by_prefix= and
 * info=user_count (presence- prefix only). */
hub_rest_handler_fn hub_rest_channels_get;

/* GET channels/{name} (info=user_count, subscription_count, cache),
 * GET channels/{name}/users (presence channels) and GET
 * channels/{name}/events (hub/rest/chanhistory.h); r->param is the path
 * after "channels/", the name percent-encoded. */
hub_rest_handler_fn hub_rest_channels_get_one;

#endif
