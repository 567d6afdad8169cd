/*
 * hub/webhook/encode.h - a batch's JSON body, as the engine
 * (hub/webhook/engine.c) and the cluster's stream reader
 * (server/webhook/webhook_stream_read.c) send it.
 *
 * Thread: any (pure functions).
 */
#ifndef HUB_WH_ENCODE_H
#define HUB_WH_ENCODE_H

#include <stddef.h>
#include <stdint.h>

#include "hub/webhook/webhook.h"

/*
 * Encode one body: {"time_ms":wall_ms,"events":[...]} with every event of
 * evs[0..n) that w matches (all when w is NULL), each with its "id"
 * ("<boot hex>-<seqs[i]>"). *n_out gets how many went in; NULL when none
 * matched or out of memory (*n_out is 0 for none).
 */
char *hub_wh_encode(const struct hub_wh_event *const *evs,
                    const uint64_t *seqs, unsigned n,
                    const struct hub_wh_conf *w, uint64_t boot,
                    uint64_t wall_ms, size_t *len, unsigned *n_out);

/* As hub_wh_encode, with each event's id given as a string (ids[i], at
 * most HUB_WH_MAX_ID - 1 bytes are used): the cluster's stream entries
 * (server/webhook/webhook_stream_read.c) carry ids made from their Redis
 * entry id. */
#define HUB_WH_MAX_ID 160
char *hub_wh_encode_ids(const struct hub_wh_event *const *evs,
                        const char *const *ids, unsigned n,
                        const struct hub_wh_conf *w, uint64_t wall_ms,
                        size_t *len, unsigned *n_out);

#endif
