/*
 * hub/loop/dirdelay_harness.c - the delayed directory, a test harness
 * (hub/loop/dirdelay_harness.h says why it is in the binary). Each
 * join_async or query_async becomes a job with a wheel timer on its loop;
 * when the timer fires the job runs against the wrapped in-process
 * directory and calls done. Jobs whose loop went before they fired are answered with
 * -ECANCELED by destroy, as the contract asks.
 */
#include "hub/loop/dirdelay_harness.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "hub/loop/directory.h"
#include "hub/loop/loop.h"
#include "timer/list.h"
#include "timer/wheel.h"

struct slow_job {
    struct hub_timer timer;        /* first: the callback's container */
    struct hub_list link;          /* dirdelay.jobs */
    struct dirdelay *ds;
    struct hub_dir_join_req *jr;   /* one of the two */
    struct hub_dir_query *q;
};

struct dirdelay {
    struct hub_directory *d;
    unsigned delay_ms;
    pthread_mutex_t mu;
    struct hub_list jobs;          /* not yet answered */
};

static void job_unlink(struct slow_job *job)
{
    pthread_mutex_lock(&job->ds->mu);
    hub_list_unlink(&job->link);
    pthread_mutex_unlock(&job->ds->mu);
}

static void job_fire(struct hub_timer *t, uint64_t now_ms)
{
    struct slow_job *job = hub_container_of(t, struct slow_job, timer);
    struct hub_directory *d = job->ds->d;
    int rc = 0;

    (void)now_ms;
    job_unlink(job);
    if (job->jr) {
        struct hub_dir_join_req *r = job->jr;

        rc = hub_directory_join(d, r->app, r->name, r->len, r->j);
        free(job);
        r->done(r, rc);
        return;
    }
    switch (job->q->kind) {
    case HUB_DIR_Q_INFO:
        hub_directory_info(d, job->q->app, job->q->name, job->q->len,
                           &job->q->info);
        break;
    case HUB_DIR_Q_LIST:
        job->q->json = hub_directory_list(d, job->q->app, job->q->prefix,
                                          job->q->user_count);
        break;
    default:
        job->q->json = hub_directory_users(d, job->q->app, job->q->name,
                                           job->q->len);
        break;
    }
    {
        struct hub_dir_query *q = job->q;

        free(job);
        q->done(q, 0);
    }
}

/* A job due in delay_ms on loop l (the caller's: this is its thread). */
static int job_start(struct dirdelay *ds, struct hub_loop *l,
                     struct hub_dir_join_req *jr, struct hub_dir_query *q)
{
    struct slow_job *job = calloc(1, sizeof(*job));

    if (!job)
        return -ENOMEM;
    job->ds = ds;
    job->jr = jr;
    job->q = q;
    hub_timer_init(&job->timer, job_fire);
    if (hub_wheel_start(l->wheel, &job->timer, hub_clock_now_ms(l->clock),
                        ds->delay_ms)) {
        free(job);
        return -ENOMEM;
    }
    pthread_mutex_lock(&ds->mu);
    hub_list_link_tail(&ds->jobs, &job->link);
    pthread_mutex_unlock(&ds->mu);
    return HUB_DIR_PENDING;
}

static int slow_join_async(void *impl, struct hub_dir_join_req *req)
{
    return job_start(impl, req->loop, req, NULL);
}

static int slow_query_async(void *impl, struct hub_dir_query *q)
{
    return job_start(impl, q->loop, NULL, q);
}

static int slow_join(void *impl, unsigned app, const char *name, size_t len,
                     struct hub_presence_join *j)
{
    return hub_directory_local_ops.join(((struct dirdelay *)impl)->d, app,
                                        name, len, j);
}

static void slow_leave(void *impl, unsigned app, const char *name,
                       size_t len, const char *uid, bool *last,
                       uint64_t *seq)
{
    hub_directory_local_ops.leave(((struct dirdelay *)impl)->d, app, name,
                                  len, uid, last, seq);
}

static void slow_info(void *impl, unsigned app, const char *name, size_t len,
                      struct hub_channel_info *out)
{
    hub_directory_local_ops.info(((struct dirdelay *)impl)->d, app, name, len,
                                 out);
}

static json_t *slow_list(void *impl, unsigned app, const char *prefix,
                         bool user_count)
{
    return hub_directory_local_ops.list(((struct dirdelay *)impl)->d, app,
                                        prefix, user_count);
}

static json_t *slow_users(void *impl, unsigned app, const char *name,
                          size_t len)
{
    return hub_directory_local_ops.users(((struct dirdelay *)impl)->d, app,
                                         name, len);
}

static void slow_set_edge_hook(void *impl, hub_dir_edge_fn *fn, void *ctx)
{
    hub_directory_local_ops.set_edge_hook(((struct dirdelay *)impl)->d, fn,
                                          ctx);
}

/* After every loop is gone: their wheels never fired these. */
static void slow_destroy(void *impl)
{
    struct dirdelay *ds = impl;

    while (!hub_list_is_empty(&ds->jobs)) {
        struct slow_job *job =
            hub_container_of(ds->jobs.next, struct slow_job, link);

        hub_list_unlink(&job->link);
        if (job->jr)
            job->jr->done(job->jr, -ECANCELED);
        else
            job->q->done(job->q, -ECANCELED);
        free(job);
    }
    hub_directory_local_ops.destroy(ds->d);
    pthread_mutex_destroy(&ds->mu);
    free(ds);
}

static const struct hub_directory_ops slow_ops = {
    .join = slow_join,
    .leave = slow_leave,
    .info = slow_info,
    .list = slow_list,
    .users = slow_users,
    .set_edge_hook = slow_set_edge_hook,
    .destroy = slow_destroy,
    .join_async = slow_join_async,
    .query_async = slow_query_async,
};

int hub_dirdelay_harness_backplane(struct hub_backplane *bp, unsigned delay_ms)
{
    struct dirdelay *ds = calloc(1, sizeof(*ds));

    if (!ds || hub_backplane_local(bp)) {
        free(ds);
        return -ENOMEM;
    }
    ds->d = bp->dir_impl;
    ds->delay_ms = delay_ms;
    pthread_mutex_init(&ds->mu, NULL);
    hub_list_init(&ds->jobs);
    bp->dir = &slow_ops;
    bp->dir_impl = ds;
    return 0;
}
