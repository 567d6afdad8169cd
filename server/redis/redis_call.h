/*
 * server/redis/redis_call.h - the cluster-wide directory's script calls on
 * the backplane's command connection (server/redis/redis_dir*.c): a call
 * collects its arguments (kept for a NOSCRIPT retry), goes out as EVALSHA
 * once SCRIPT LOAD gave the script's SHA on this connection, else as EVAL
 * with the text (server/redis/redis_lua.h), and its reply goes to the
 * call's handler, once; then the call is freed. A call that cannot go out
 * or gets no answer reaches its handler with no reply.
 *
 * Thread: the backplane thread only.
 */
#ifndef SRV_REDIS_CALL_H
#define SRV_REDIS_CALL_H

#include <stdbool.h>
#include <stddef.h>

#include "server/redis/redis_async.h"
#include <hiredis/hiredis.h>

#include "hub/cluster/cluster.h"

enum srv_script {
    SRV_SCRIPT_JOIN,
    SRV_SCRIPT_LEAVE,
    SRV_SCRIPT_INFO,
    SRV_SCRIPT_LIST,
    SRV_SCRIPT_MEMBERS,
    SRV_SCRIPT_REJOIN,
    SRV_SCRIPT_REJOIN_SWEEP,
    SRV_SCRIPT_ONLINE_SIGNIN,
    SRV_SCRIPT_ONLINE_SIGNOUT,
    SRV_SCRIPT_ONLINE_REJOIN,
    SRV_SCRIPT_N,
};

struct srv_redis;
struct srv_redis_dir;

/* What one directory's calls share: the connection, the scripts' SHAs. */
struct srv_redis_call_ctx {
    struct srv_redis *r;
    /* The command connection while Redis is up, else NULL (redis.c's). */
    struct srv_redis_async *(*cmd_fn)(struct srv_redis *r);
    struct hub_cluster *c;
    struct hub_backplane_stats *st;
    const char *node;              /* this node's id (borrowed) */
    char sha[SRV_SCRIPT_N][41];    /* "" until SCRIPT LOAD answered */
    unsigned load_gen;             /* a load's replies after a reconnect */
};

struct srv_redis_call;
/* A call's end: rep, or NULL when it got none (not sent, no connection,
 * out of memory, an error reply). The call is freed after it returns. */
typedef void srv_redis_call_fn(struct srv_redis_call *k, const redisReply *rep);

/* One script call in flight. */
struct srv_redis_call {
    struct srv_redis_call_ctx *cx;
    struct srv_redis_dir *d;       /* the handler's */
    enum srv_script script;
    srv_redis_call_fn *done;
    struct hub_cluster_dirop *dop;
    unsigned app;                  /* a view's refresh */
    unsigned gen;                  /* REJOIN calls: the REJOIN's */
    char *name;
    size_t len;
    int argc, cap;
    char **argv;
    size_t *argvlen;
    bool retried, oom;
    int stamp_arg;                 /* JOIN: the stamp's argv index, 0 none */
};

/* The command connection, or NULL while Redis is down. */
struct srv_redis_async *
srv_redis_call_conn(const struct srv_redis_call_ctx *cx);
/* SCRIPT LOAD of every script on the connection that just came up. */
void srv_redis_call_load_all(struct srv_redis_call_ctx *cx);
/* Redis went: every SHA is unknown again. */
void srv_redis_call_forget_all(struct srv_redis_call_ctx *cx);

/* A new call of script (its arguments next); NULL when out of memory. */
struct srv_redis_call *srv_redis_call_new(struct srv_redis_call_ctx *cx,
                                          struct srv_redis_dir *d,
                                          enum srv_script script,
                                          srv_redis_call_fn *done,
                                          struct hub_cluster_dirop *dop);
void srv_redis_call_free(struct srv_redis_call *k);
/* Send k; when it cannot go, its handler gets NULL and k is freed. */
void srv_redis_call_send(struct srv_redis_call *k);
/* HKEYS key instead of the script, answered the same way. */
void srv_redis_call_hkeys(struct srv_redis_call *k, const char *key);
/* Give k up unsent: its handler gets NULL, k is freed. */
void srv_redis_call_fail(struct srv_redis_call *k);

/* Arguments, in order; out of memory marks the call (it fails when
 * sent). */
void srv_redis_call_arg_n(struct srv_redis_call *k, const char *s, size_t n);
void srv_redis_call_arg(struct srv_redis_call *k, const char *s);
void srv_redis_call_argf(struct srv_redis_call *k, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "app US ch [US uid]" (US the byte 0x1f). */
void srv_redis_call_field(struct srv_redis_call *k, const char *app,
                          const char *ch, size_t len, const char *uid);
/* P:what:<node>, P:what:<app>, P:what:<app>:<ch> (P the prefix). */
void srv_redis_call_key_node(struct srv_redis_call *k, const char *what);
void srv_redis_call_key_app(struct srv_redis_call *k, const char *what,
                            const char *app);
void srv_redis_call_key_chan(struct srv_redis_call *k, const char *what,
                             const char *app, const char *ch, size_t len);

/* Reply shapes. */
bool srv_redis_call_is_int(const redisReply *e);
bool srv_redis_call_is_bulk(const redisReply *e);

#endif
