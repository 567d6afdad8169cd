/*
 * hub/rest/wait.c - deferred answers of the HTTP API (hub/rest/wait.h):
 * a wait's life from its queries to its answer, the refusal of a request
 * that cannot wait, and hub_rest_wait_refuse() and hub_rest_wait_cancel()
 * (hub/rest/rest.h).
 *
 * A started wait is freed exactly once: when its last query answers, or
 * at once when every query answered while being asked (the extra count
 * taken in hub_rest_wait_start() keeps it until every query was asked).
 * A held wait (hub_rest_wait_hold(): no query, one answer its handler
 * asked for itself) is freed the same way, when that answer settles it.
 * Cancelling or refusing it only forgets the requester. After -ECANCELED
 * (the loops are gone) only the wait's own memory is touched.
 *
 * Thread: the loop that received the request.
 */
#include "hub/rest/wait.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hub/app/app.h"
#include "hub/loop/loop.h"

static void reply_refused(struct hub_rest_response *out)
{
    hub_rest_reply_error(out, 400,
                         "this request waits for the cluster directory and "
                         "cannot be answered on a connection with a request "
                         "pipelined behind its body; nothing was published: "
                         "send it again and wait for each answer before the "
                         "next request");
}

bool hub_rest_can_wait(struct hub_loop *l, const struct hub_rest_call *c)
{
    return c->answer && l->hub->bp->dir->query_async;
}

bool hub_rest_cannot_wait(struct hub_loop *l, const struct hub_rest_call *c,
                          struct hub_rest_response *out)
{
    if (!c->refuse_wait || !l->hub->bp->dir->query_async)
        return false;
    reply_refused(out);
    return true;
}

static void query_done(struct hub_dir_query *q, int rc);

struct hub_rest_wait *hub_rest_wait_new(struct hub_loop *l,
                                        const struct hub_app *app,
                                        const struct hub_rest_call *c,
                                        const struct hub_rest_wait_ops *ops,
                                        size_t nq)
{
    struct hub_rest_wait *w = calloc(1, sizeof(*w) + nq * sizeof(w->q[0]));

    if (!w)
        return NULL;
    hub_app_ref(app);
    w->l = l;
    w->app = app;
    w->answer = c->answer;
    w->ctx = c->ctx;
    w->ops = ops;
    w->nq = nq;
    for (size_t i = 0; i < nq; i++) {
        w->q[i].w = w;
        w->q[i].q.kind = HUB_DIR_Q_INFO;
        w->q[i].q.app = app->index;
        w->q[i].q.loop = l;
        w->q[i].q.done = query_done;
    }
    return w;
}

void hub_rest_wait_free(struct hub_rest_wait *w)
{
    for (size_t i = 0; i < w->nq; i++)
        json_decref(w->q[i].q.json);
    if (w->ops->release)
        w->ops->release(w);
    json_decref(w->root);
    free(w->text);
    hub_app_unref(w->app);
    free(w);
}

void hub_rest_wait_refuse(struct hub_rest_wait *w,
                          struct hub_rest_response *out)
{
    memset(out, 0, sizeof(*out));
    w->answer = NULL;
    w->ctx = NULL;
    w->refused = true;
    reply_refused(out);
}

void hub_rest_wait_cancel(struct hub_rest_wait *w)
{
    if (w->answer)
        HUB_STAT_ADD(w->l->stats.rest_answers_dropped, 1);
    w->answer = NULL;
    w->ctx = NULL;
}

/* The answer of w, from its queries' results. */
static void wait_finish(struct hub_rest_wait *w, struct hub_rest_response *out)
{
    memset(out, 0, sizeof(*out));
    if (w->err) {
        if (w->err == -ENOMEM)
            hub_rest_reply_error(out, 500, "out of memory");
        else
            hub_rest_reply_error(out, 503,
                                 "channel directory unavailable: %s",
                                 strerror(-w->err));
        return;
    }
    w->ops->finish(w, out);
}

/* One query of w answered (rc as query_async's); the last one answers. */
void hub_rest_wait_settle(struct hub_rest_wait *w, int rc)
{
    struct hub_rest_response r;

    if (rc < 0 && !w->err)
        w->err = rc;
    /* -ECANCELED comes once the loops are gone (hub/loop/backplane.h): only
     * free what the wait holds, touching neither l nor the caller. */
    if (rc == -ECANCELED)
        w->gone = true;
    if (--w->outstanding)
        return;
    if (w->gone) {
        hub_rest_wait_free(w);
        return;
    }
    HUB_STAT_ADD(w->l->stats.rest_waiting, -1);
    if (w->refused) {
        hub_rest_wait_free(w);
        return;
    }
    wait_finish(w, &r);
    if (w->answer)
        w->answer(w->ctx, &r);
    else
        free(r.body);
    hub_rest_wait_free(w);
}

static void query_done(struct hub_dir_query *q, int rc)
{
    hub_rest_wait_settle(hub_container_of(q, struct hub_rest_query, q)->w,
                         rc);
}

void hub_rest_wait_hold(struct hub_rest_wait *w, struct hub_rest_call *c,
                        struct hub_rest_response *out)
{
    w->outstanding = 1;
    memset(out, 0, sizeof(*out));
    c->wait = w;
    HUB_STAT_ADD(w->l->stats.rest_waiting, 1);
}

void hub_rest_wait_start(struct hub_rest_wait *w, struct hub_rest_call *c,
                         struct hub_rest_response *out)
{
    struct hub *h = w->l->hub;

    /* The extra count keeps w until every query was asked. */
    w->outstanding = (unsigned)w->nq + 1;
    for (size_t i = 0; i < w->nq; i++) {
        int rc = hub_dir_query_async(h, &w->q[i].q);

        if (rc != HUB_DIR_PENDING) {
            if (rc < 0 && !w->err)
                w->err = rc;
            w->outstanding--;
        }
    }
    if (--w->outstanding) {
        memset(out, 0, sizeof(*out));
        c->wait = w;
        HUB_STAT_ADD(w->l->stats.rest_waiting, 1);
        return;
    }
    wait_finish(w, out);
    hub_rest_wait_free(w);
}
