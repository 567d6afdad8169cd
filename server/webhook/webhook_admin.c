/*
 * server/webhook/webhook_admin.c - the operator's commands
 * (server/webhook/webhook.h): --webhook-dead-letters lists the dead
 * letters of the store under --state-dir, one JSON object a line, and
 * --webhook-replay moves them (all, or one id) back to pending, where a
 * running hub's sender picks them up. Both run instead of the hub, and
 * exit.
 *
 * Thread: the main thread.
 */
#include "server/webhook/webhook.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "server/config/config.h"

static void print_dead(void *ctx, const struct srv_wh_row *r)
{
    FILE *out = ctx;
    json_t *o = json_pack("{s:I,s:s,s:s,s:s,s:I,s:I,s:i,s:s,s:i,s:s%}", "id",
                          (json_int_t)r->id, "app", r->app, "url", r->url,
                          "idempotency_key", r->idem, "created_ms",
                          (json_int_t)r->created_ms, "died_ms",
                          (json_int_t)r->died_ms, "attempts",
                          (int)r->attempts, "last_error", r->why, "events",
                          (int)r->n_events, "body", r->body, r->len);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;

    if (text)
        fprintf(out, "%s\n", text);
    free(text);
    json_decref(o);
}

int srv_wh_admin(const struct srv_config *cfg, FILE *out)
{
    struct srv_wh_store *s;
    char err[512];
    unsigned n = 0;
    int rc = 0;

    if (!cfg->state_dir) {
        fprintf(stderr, "lubdub: --webhook-dead-letters and "
                        "--webhook-replay need --state-dir\n");
        return 2;
    }
    if (srv_wh_store_open(cfg->state_dir, &s, err, sizeof(err))) {
        fprintf(stderr, "lubdub: %s\n", err);
        return 1;
    }
    if (cfg->webhook_replay) {
        rc = srv_wh_store_replay(s, cfg->webhook_replay, &n);
        if (rc == -EINVAL)
            fprintf(stderr, "lubdub: --webhook-replay: \"%s\" is neither "
                            "\"all\" nor a dead letter id\n",
                    cfg->webhook_replay);
        else if (rc)
            fprintf(stderr, "lubdub: --webhook-replay failed\n");
        else
            fprintf(out, "lubdub: %u dead letters queued for delivery again\n",
                    n);
    } else {
        rc = srv_wh_store_list_dead(s, print_dead, out);
        if (rc)
            fprintf(stderr, "lubdub: cannot read the dead letters\n");
    }
    srv_wh_store_close(s);
    return rc ? 1 : 0;
}
