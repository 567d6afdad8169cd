/*
 * hub/rest/wait.h - deferred answers of the HTTP API, private to
 * hub/rest/ (hub_rest_handle_async(), hub/rest/rest.h). With a directory
 * whose reads answer later (query_async, hub/loop/backplane.h: a cluster
 * directory), a request that reads it keeps here what its answer is made
 * from: its queries (one per channel asked about) and what its handler
 * left for the answer (for events, the checked body). The answer is made
 * when the last query is answered, by the handler's finish function
 * (struct hub_rest_wait_ops), exactly as the handler's synchronous path
 * makes it from the same reads; hub/rest/wait.c knows no route.
 *
 * A wait holds one reference to its app, one directory query per channel
 * asked about (at most max_channels_per_event per event, times
 * max_batch_events), and the request's checked body: all freed when the
 * last query answers, whether or not the requester is still there.
 *
 * Thread: the loop that received the request; its queries answer there.
 */
#ifndef HUB_REST_WAIT_H
#define HUB_REST_WAIT_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#include "hub/loop/backplane.h"
#include "hub/rest/handler.h"

struct hub_rest_event;

/* One directory query of a wait. */
struct hub_rest_query {
    struct hub_dir_query q;
    struct hub_rest_wait *w;
};

/* The answer of w from its queries' results, once none failed (out is
 * zeroed). */
typedef void hub_rest_finish_fn(struct hub_rest_wait *w,
                                struct hub_rest_response *out);
/* Frees what the handler gave w beyond root and text (its events). */
typedef void hub_rest_release_fn(struct hub_rest_wait *w);

/* What a kind of request makes of its waiting: one static table per
 * kind, in the handler's file. */
struct hub_rest_wait_ops {
    hub_rest_finish_fn *finish;
    hub_rest_release_fn *release;  /* NULL: nothing beyond root, text */
};

struct hub_rest_wait {
    struct hub_loop *l;
    const struct hub_app *app;     /* a reference */
    hub_rest_answer_fn *answer;    /* NULL once cancelled */
    void *ctx;
    const struct hub_rest_wait_ops *ops;
    unsigned outstanding;          /* queries not answered (+1 at start) */
    int err;                       /* the first failed query's rc */
    bool gone;                     /* a query got -ECANCELED: l is gone */
    bool refused;                  /* hub_rest_wait_refuse(): no publish */
    /* What the handler keeps for its answer (ops->finish reads it). */
    bool want_users, want_subs, want_cache;   /* channel info */
    json_t *root;                  /* events: the body; reqs borrow it */
    struct hub_rest_event *reqs;   /* events: owned, n_reqs of them */
    size_t n_reqs;
    bool any_info;                 /* batch_events */
    char *text;                    /* channels: prefix; channel: name */
    void *priv;                    /* events of a channel: the history
                                      read (ops->release frees it) */
    size_t text_len;
    size_t nq;
    struct hub_rest_query q[];
};

/* Whether the request can wait: a caller that answers later, and a
 * directory that answers later. */
bool hub_rest_can_wait(struct hub_loop *l, const struct hub_rest_call *c);

/* A request that would wait for a directory answering later, from a
 * caller that cannot wait (hub_rest_handle_nowait()): true, with a 400 in
 * out, before anything is published or counted. */
bool hub_rest_cannot_wait(struct hub_loop *l, const struct hub_rest_call *c,
                          struct hub_rest_response *out);

/* A wait with nq INFO queries (the caller sets kinds and names), or NULL
 * when out of memory. */
struct hub_rest_wait *hub_rest_wait_new(struct hub_loop *l,
                                        const struct hub_app *app,
                                        const struct hub_rest_call *c,
                                        const struct hub_rest_wait_ops *ops,
                                        size_t nq);

/* Free w and all it holds (before hub_rest_wait_start() only: after it,
 * the last query's answer frees w). */
void hub_rest_wait_free(struct hub_rest_wait *w);

/* A wait with no directory query (nq 0) for one answer its handler asked
 * for itself (a history read): c->wait set, out->status 0; the handler
 * calls hub_rest_wait_settle(w, 0) when that answer is in (w->priv), or
 * -ECANCELED when it is dropped with the loops. */
void hub_rest_wait_hold(struct hub_rest_wait *w, struct hub_rest_call *c,
                        struct hub_rest_response *out);

/* One awaited answer of w is in (rc < 0: it failed; the wait answers 503
 * then, or 500 for -ENOMEM); the last one makes the answer and frees w. */
void hub_rest_wait_settle(struct hub_rest_wait *w, int rc);

/* Ask w's queries: answered now (in out, w freed) or later (c->wait set,
 * out->status 0). */
void hub_rest_wait_start(struct hub_rest_wait *w, struct hub_rest_call *c,
                         struct hub_rest_response *out);

#endif
