/*
 * hub/cluster/cluster_ids.c - the app ids the cluster knows, by index
 * (hub/cluster/cluster.h): the id an app's broker channels carry, and the
 * index an id received from another node names.
 *
 * The table is append-only (a reload adds apps, hub/app/apptab.h; an index
 * keeps its id forever), so a string found here stays valid until
 * destroy. Any thread: loops and the backplane thread read it under
 * ids_mu, the main thread adds to it.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hub/cluster/cluster_int.h"

int hub_cluster_app_added(struct hub_cluster *c, unsigned index,
                          const char *id)
{
    int rc = 0;

    pthread_mutex_lock(&c->ids_mu);
    if (index >= c->n_ids) {
        char **ids = realloc(c->ids, (index + 1) * sizeof(*ids));

        if (!ids) {
            rc = -ENOMEM;
            goto out;
        }
        memset(ids + c->n_ids, 0, (index + 1 - c->n_ids) * sizeof(*ids));
        c->ids = ids;
        c->n_ids = index + 1;
    }
    if (c->ids[index] && strcmp(c->ids[index], id) != 0) {
        /* Only after a reload that told the cluster and then failed:
         * the index goes to the next table's app. */
        char **r = realloc(c->retired, (c->n_retired + 1) * sizeof(*r));
        char *copy = strdup(id);

        if (r)
            c->retired = r;
        if (!r || !copy) {
            free(copy);
            rc = -ENOMEM;
            goto out;
        }
        c->retired[c->n_retired++] = c->ids[index];
        c->ids[index] = copy;
    } else if (!c->ids[index] && !(c->ids[index] = strdup(id))) {
        rc = -ENOMEM;
    }
out:
    pthread_mutex_unlock(&c->ids_mu);
    return rc;
}

/* The id of app index (valid until destroy), or NULL. */
const char *hub_cluster_app_id(struct hub_cluster *c, unsigned index)
{
    const char *id;

    pthread_mutex_lock(&c->ids_mu);
    id = index < c->n_ids ? c->ids[index] : NULL;
    pthread_mutex_unlock(&c->ids_mu);
    return id;
}

unsigned hub_cluster_app_span(struct hub_cluster *c)
{
    unsigned n;

    pthread_mutex_lock(&c->ids_mu);
    n = c->n_ids;
    pthread_mutex_unlock(&c->ids_mu);
    return n;
}

/* A scan: the backplane thread calls it once per message received. */
int hub_cluster_app_index(struct hub_cluster *c, const char *id, size_t len)
{
    int found = -1;

    pthread_mutex_lock(&c->ids_mu);
    for (unsigned i = 0; i < c->n_ids && found < 0; i++)
        if (c->ids[i] && strlen(c->ids[i]) == len &&
            !memcmp(c->ids[i], id, len))
            found = (int)i;
    pthread_mutex_unlock(&c->ids_mu);
    return found;
}
