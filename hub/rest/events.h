/*
 * hub/rest/events.h - POST /apps/{app_id}/events and batch_events, private
 * to hub/rest/ (the routes of hub/rest/router.c). Thread: the loop that
 * received the request.
 */
#ifndef HUB_REST_EVENTS_H
#define HUB_REST_EVENTS_H

#include "hub/rest/handler.h"

/* POST events: one event to 1..max_channels_per_event channels; with
 * info=, its channels' counts in the answer (which may wait). */
hub_rest_handler_fn hub_rest_events_post;

/* POST batch_events: up to max_batch_events events, all checked before
 * any is published. */
hub_rest_handler_fn hub_rest_events_post_batch;

#endif
