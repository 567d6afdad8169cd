/*
 * server/webhook/webhook_store.c - the durable half of webhook delivery: pending
 * batches and dead letters in SQLite (server/webhook/webhook.h).
 *
 * DIR/webhooks.db in WAL mode with synchronous=NORMAL: a commit appends
 * to the WAL without an fsync, which a killed process (kill -9) cannot
 * lose (the bytes are in the kernel); checkpoints fsync, and only they.
 * The sender commits once per round of its loop, so many batches share a
 * commit, and it checkpoints on a timer. A power cut can lose the commits
 * since the last checkpoint; docs/WEBHOOKS.md says so.
 *
 * Thread: the sender thread (or the admin command, alone).
 */
#include "server/webhook/webhook.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

struct srv_wh_store {
    sqlite3 *db;
    sqlite3_stmt *add, *done, *dead_ins, *dead_del, *load;
    bool in_tx;
};

static const char schema[] =
    "PRAGMA journal_mode=WAL;"
    "PRAGMA synchronous=NORMAL;"
    "CREATE TABLE IF NOT EXISTS pending ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, app TEXT NOT NULL,"
    " url TEXT NOT NULL, idem TEXT NOT NULL, created_ms INTEGER NOT NULL,"
    " n_events INTEGER NOT NULL, body BLOB NOT NULL);"
    "CREATE TABLE IF NOT EXISTS dead ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, app TEXT NOT NULL,"
    " url TEXT NOT NULL, idem TEXT NOT NULL, created_ms INTEGER NOT NULL,"
    " died_ms INTEGER NOT NULL, attempts INTEGER NOT NULL,"
    " why TEXT NOT NULL, n_events INTEGER NOT NULL, body BLOB NOT NULL);"
    "CREATE TABLE IF NOT EXISTS replay ("
    " id INTEGER PRIMARY KEY AUTOINCREMENT, app TEXT NOT NULL,"
    " url TEXT NOT NULL, idem TEXT NOT NULL, n_events INTEGER NOT NULL,"
    " body BLOB NOT NULL);";

static int prep(struct srv_wh_store *ws, const char *sql, sqlite3_stmt **st)
{
    return sqlite3_prepare_v2(ws->db, sql, -1, st, NULL) == SQLITE_OK ? 0 : -1;
}

int srv_wh_store_open(const char *dir, struct srv_wh_store **out, char *err,
                      size_t errlen)
{
    struct srv_wh_store *ws = calloc(1, sizeof(*ws));
    char path[PATH_MAX];
    char *msg = NULL;

    *out = NULL;
    if (!ws) {
        snprintf(err, errlen, "webhook store: out of memory");
        return -1;
    }
    if (snprintf(path, sizeof(path), "%s/webhooks.db", dir) >=
        (int)sizeof(path)) {
        snprintf(err, errlen, "--state-dir: path too long");
        free(ws);
        return -1;
    }
    if (sqlite3_open_v2(path, &ws->db,
                        SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                            SQLITE_OPEN_NOMUTEX,
                        NULL) != SQLITE_OK) {
        snprintf(err, errlen, "webhook store %s: %s", path,
                 ws->db ? sqlite3_errmsg(ws->db) : "out of memory");
        sqlite3_close(ws->db);
        free(ws);
        return -1;
    }
    /* The admin command may run beside a live hub: wait, never fail. */
    sqlite3_busy_timeout(ws->db, 5000);
    if (sqlite3_exec(ws->db, schema, NULL, NULL, &msg) != SQLITE_OK ||
        prep(ws, "INSERT INTO pending (app, url, idem, created_ms, n_events,"
                " body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)", &ws->add) ||
        prep(ws, "DELETE FROM pending WHERE id = ?1", &ws->done) ||
        prep(ws, "INSERT INTO dead (app, url, idem, created_ms, died_ms,"
                " attempts, why, n_events, body) SELECT app, url, idem,"
                " created_ms, ?2, ?3, ?4, n_events, body FROM pending"
                " WHERE id = ?1", &ws->dead_ins) ||
        prep(ws, "DELETE FROM pending WHERE id = ?1", &ws->dead_del) ||
        prep(ws, "SELECT id, app, url, idem, created_ms, n_events, body"
                " FROM pending WHERE id > ?1 ORDER BY id", &ws->load)) {
        snprintf(err, errlen, "webhook store %s: %s", path,
                 msg ? msg : sqlite3_errmsg(ws->db));
        sqlite3_free(msg);
        srv_wh_store_close(ws);
        return -1;
    }
    *out = ws;
    return 0;
}

void srv_wh_store_close(struct srv_wh_store *ws)
{
    if (!ws)
        return;
    if (ws->in_tx)
        srv_wh_store_commit(ws);
    sqlite3_finalize(ws->add);
    sqlite3_finalize(ws->done);
    sqlite3_finalize(ws->dead_ins);
    sqlite3_finalize(ws->dead_del);
    sqlite3_finalize(ws->load);
    sqlite3_close(ws->db);
    free(ws);
}

int srv_wh_store_begin(struct srv_wh_store *ws)
{
    if (ws->in_tx)
        return 0;
    if (sqlite3_exec(ws->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) !=
        SQLITE_OK)
        return -1;
    ws->in_tx = true;
    return 0;
}

int srv_wh_store_commit(struct srv_wh_store *ws)
{
    if (!ws->in_tx)
        return 0;
    ws->in_tx = false;
    return sqlite3_exec(ws->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK ? 0
                                                                      : -1;
}

static int step_done(sqlite3_stmt *st)
{
    int rc = sqlite3_step(st);

    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

int64_t srv_wh_store_add(struct srv_wh_store *ws, const struct srv_wh_row *r)
{
    sqlite3_stmt *st = ws->add;

    sqlite3_bind_text(st, 1, r->app, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, r->url, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, r->idem, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, (sqlite3_int64)r->created_ms);
    sqlite3_bind_int(st, 5, (int)r->n_events);
    sqlite3_bind_blob(st, 6, r->body, (int)r->len, SQLITE_STATIC);
    if (step_done(st))
        return -1;
    return sqlite3_last_insert_rowid(ws->db);
}

int srv_wh_store_done(struct srv_wh_store *ws, int64_t id)
{
    sqlite3_bind_int64(ws->done, 1, id);
    return step_done(ws->done);
}

int srv_wh_store_dead(struct srv_wh_store *ws, int64_t id, uint64_t died_ms,
                      unsigned attempts, const char *why)
{
    sqlite3_bind_int64(ws->dead_ins, 1, id);
    sqlite3_bind_int64(ws->dead_ins, 2, (sqlite3_int64)died_ms);
    sqlite3_bind_int(ws->dead_ins, 3, (int)attempts);
    sqlite3_bind_text(ws->dead_ins, 4, why, -1, SQLITE_STATIC);
    if (step_done(ws->dead_ins))
        return -1;
    sqlite3_bind_int64(ws->dead_del, 1, id);
    if (step_done(ws->dead_del))
        return -1;
    /* Bounded: the oldest dead letters go past SRV_WH_MAX_DEAD. */
    return sqlite3_exec(ws->db,
                        "DELETE FROM dead WHERE id <= (SELECT MAX(id) FROM "
                        "dead) - " SRV_WH_MAX_DEAD_TEXT, NULL, NULL,
                        NULL) == SQLITE_OK ? 0 : -1;
}

/* The columns a queued row and a dead letter share, selected first in
 * this order by both (id, app, url, idem, created_ms); the rest zero. */
static struct srv_wh_row row_head(sqlite3_stmt *st)
{
    struct srv_wh_row r = {
            .id = sqlite3_column_int64(st, 0),
            .app = (const char *)sqlite3_column_text(st, 1),
            .url = (const char *)sqlite3_column_text(st, 2),
            .idem = (const char *)sqlite3_column_text(st, 3),
            .created_ms = (uint64_t)sqlite3_column_int64(st, 4),
    };

    return r;
}

int srv_wh_store_load(struct srv_wh_store *ws, int64_t after,
                      srv_wh_row_fn *fn, void *ctx)
{
    sqlite3_stmt *st = ws->load;
    int rc;

    sqlite3_bind_int64(st, 1, after);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct srv_wh_row r = row_head(st);

        r.n_events = (unsigned)sqlite3_column_int(st, 5);
        r.body = sqlite3_column_blob(st, 6);
        r.len = (size_t)sqlite3_column_bytes(st, 6);

        if (r.app && r.url && r.idem && r.body)
            fn(ctx, &r);
    }
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

int srv_wh_store_list_dead(struct srv_wh_store *ws, srv_wh_row_fn *fn,
                           void *ctx)
{
    sqlite3_stmt *st;
    int rc;

    if (prep(ws, "SELECT id, app, url, idem, created_ms, died_ms, attempts,"
                " why, n_events, body FROM dead ORDER BY id", &st))
        return -1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct srv_wh_row r = row_head(st);

        r.died_ms = (uint64_t)sqlite3_column_int64(st, 5);
        r.attempts = (unsigned)sqlite3_column_int(st, 6);
        r.why = (const char *)sqlite3_column_text(st, 7);
        r.n_events = (unsigned)sqlite3_column_int(st, 8);
        r.body = sqlite3_column_blob(st, 9);
        r.len = (size_t)sqlite3_column_bytes(st, 9);

        if (r.app && r.url && r.idem && r.why && r.body)
            fn(ctx, &r);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

int srv_wh_store_replay(struct srv_wh_store *ws, const char *which,
                        unsigned *n)
{
    bool all = !strcmp(which, "all");
    char *end = NULL;
    long long id = all ? 0 : strtoll(which, &end, 10);
    sqlite3_stmt *ins = NULL, *del = NULL;
    int rc = -1;

    *n = 0;
    if (!all && (*which == '\0' || *end != '\0' || id <= 0))
        return -EINVAL;
    /* Into the replay table: the hub (running or at its next start)
     * moves them to pending itself, so only it writes pending rows. The
     * idempotency key and body stay, so a receiver that did get a batch
     * once can tell. */
    if (prep(ws, "INSERT INTO replay (app, url, idem, n_events, body)"
                " SELECT app, url, idem, n_events, body FROM dead"
                " WHERE ?1 = 0 OR id = ?1 ORDER BY id", &ins) ||
        prep(ws, "DELETE FROM dead WHERE ?1 = 0 OR id = ?1", &del))
        goto out;
    if (sqlite3_exec(ws->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
        goto out;
    sqlite3_bind_int64(ins, 1, id);
    sqlite3_bind_int64(del, 1, id);
    if (sqlite3_step(ins) != SQLITE_DONE) {
        sqlite3_exec(ws->db, "ROLLBACK", NULL, NULL, NULL);
        goto out;
    }
    *n = (unsigned)sqlite3_changes(ws->db);
    if (sqlite3_step(del) != SQLITE_DONE) {
        sqlite3_exec(ws->db, "ROLLBACK", NULL, NULL, NULL);
        *n = 0;
        goto out;
    }
    rc = sqlite3_exec(ws->db, "COMMIT", NULL, NULL, NULL) == SQLITE_OK ? 0
                                                                     : -1;
out:
    sqlite3_finalize(ins);
    sqlite3_finalize(del);
    return rc;
}

int srv_wh_store_take_replays(struct srv_wh_store *ws, uint64_t now_wall,
                              srv_wh_row_fn *fn, void *ctx)
{
    sqlite3_stmt *st;
    int64_t max = 0;
    int rc;

    if (prep(ws, "SELECT id, app, url, idem, n_events, body FROM replay"
                " ORDER BY id", &st))
        return -1;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        struct srv_wh_row r = {
            .app = (const char *)sqlite3_column_text(st, 1),
            .url = (const char *)sqlite3_column_text(st, 2),
            .idem = (const char *)sqlite3_column_text(st, 3),
            .created_ms = now_wall,
            .n_events = (unsigned)sqlite3_column_int(st, 4),
            .body = sqlite3_column_blob(st, 5),
            .len = (size_t)sqlite3_column_bytes(st, 5),
        };

        max = sqlite3_column_int64(st, 0);
        if (!r.app || !r.url || !r.idem || !r.body)
            continue;
        /* A new retry window from now. */
        r.id = srv_wh_store_add(ws, &r);
        if (r.id > 0)
            fn(ctx, &r);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE)
        return -1;
    if (!max)
        return 0;
    if (prep(ws, "DELETE FROM replay WHERE id <= ?1", &st))
        return -1;
    sqlite3_bind_int64(st, 1, max);
    rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

static int count(struct srv_wh_store *ws, const char *sql, uint64_t *out)
{
    sqlite3_stmt *st;
    int rc;

    *out = 0;
    if (prep(ws, sql, &st))
        return -1;
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        *out = (uint64_t)sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return rc == SQLITE_ROW ? 0 : -1;
}

int srv_wh_store_counts(struct srv_wh_store *ws, uint64_t *pending,
                        uint64_t *dead)
{
    return count(ws, "SELECT COUNT(*) FROM pending", pending) |
           count(ws, "SELECT COUNT(*) FROM dead", dead);
}

void srv_wh_store_checkpoint(struct srv_wh_store *ws)
{
    sqlite3_wal_checkpoint_v2(ws->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL,
                              NULL);
}
