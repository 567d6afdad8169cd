/*
 * hub/loop/appswap.h - replacing the hub's app table while the loops run (a
 * reload, server/reload.c).
 *
 * The rules that make it safe (docs/DESIGN.md, "Apps and reloads"):
 * - Tables and apps are immutable once published. Readers (loop threads,
 *   inside a callback) load h->apps once with acquire and use what they
 *   found until the callback returns; they never keep a table pointer.
 * - A session keeps its app (s->app) and holds a reference on it
 *   (hub/app/app.h), so an app outlives every session that can read it.
 * - Publishing swaps h->apps atomically, then posts one node to every
 *   loop's inbox. A loop runs it between callbacks, when no lookup in the
 *   old table is in flight on that loop; there it moves each open session
 *   of a changed app to the new app, and closes those of a removed app
 *   (pusher:error 4001, close 4001) or of an app now disabled (4003). The
 *   last loop to run (or drop) its node frees the old table, which drops
 *   the table's references on its apps; an old app lives on while a
 *   session (a closing one) still holds it.
 * - Only the main thread publishes, one reload at a time; two reloads in a
 *   row queue their nodes in order on each loop. A node handles only the
 *   sessions on its retiring table's apps: one that connected on a newer
 *   table's app (published before the loop drained) waits for that
 *   table's node.
 */
#ifndef HUB_APPSWAP_H
#define HUB_APPSWAP_H

#include "hub/app/apptab.h"

struct hub;

/*
 * Make next (from hub_apptab_build() on the current table; taken) the
 * hub's table. 0, or -ENOMEM (next is discarded, nothing changed).
 * Main thread.
 */
int hub_apps_publish(struct hub *h, struct hub_apptab *next);

#endif
