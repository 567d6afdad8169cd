/*
 * server/redis/redis_lua.h - the Lua scripts of the Redis backplane and of
 * the webhook sender's stream, each as the one text sent to Redis (the
 * backplane: SCRIPT LOAD, then EVALSHA; EVAL with the text until the SHA
 * is known, and again on a NOSCRIPT error; the webhook sender the same on
 * its own synchronous connection: SCRIPT LOAD at connect, EVALSHA, EVAL
 * again on NOSCRIPT or when the load was refused). The scripts are written in
 * server/redis/lua/, one .lua file a script, whose opening comment gives
 * its KEYS, ARGV and reply; server/redis/lua/embed.cmake embeds them at
 * build time and server/redis/redis_lua.c puts a shared prologue's
 * functions in front of the scripts that call them.
 * tests/unit/test_redis_lua.c runs each against fixture keys in a test
 * redis-server.
 *
 * The cluster-wide directory's keys (docs/SCALING.md, "The cluster-wide
 * directory"), with P the prefix and US the byte 0x1f:
 *   P:ns:<node>  HASH app US ch -> this node's subscriptions
 *   P:nm:<node>  HASH app US ch US uid -> this node's connections
 *   P:ni:<node>  HASH app US ch US uid -> user_info ("" = none)
 *   P:gs:<app>   HASH ch -> subscriptions over all nodes
 *   P:gm:<app>:<ch> HASH uid -> connections over all nodes
 *   P:gi:<app>:<ch> HASH uid -> user_info
 *   P:gq:<app>   HASH ch -> the channel's member sequence, while it has
 *                members; "#" -> the highest of a life that ended
 *                (server/redis/lua/cseq.lua)
 *   P:rjtok:<node> STRING the reap token of a REJOIN in progress
 * Member events: PUBLISH P:m:<app>:<ch> "<cseq>\n+<n>\n<uid><info>" or
 * "<cseq>\n-<n>\n<uid>", n the uid's length in bytes (decimal): a uid may
 * hold any byte but NUL ('\n' and 0x1f included), so it is counted, never
 * delimited. Every count reaching 0 is HDELed. Online state and
 * watchlists: server/redis/lua/watchlist.lua; the lease and the reaper:
 * server/redis/lua/lease_*.lua (docs/SCALING.md, "Node death"); the
 * webhook stream's keys P:wh|whd|whn|whl:<app> (docs/WEBHOOKS.md, "In a
 * cluster"): server/redis/lua/wh_stream_*.lua.
 *
 * Thread: any (constant text).
 */
#ifndef SRV_REDIS_LUA_H
#define SRV_REDIS_LUA_H

/* The directory (server/redis/redis_dir*.c). */
extern const char srv_redis_lua_dir_join[];
extern const char srv_redis_lua_dir_leave[];
extern const char srv_redis_lua_dir_info[];
extern const char srv_redis_lua_dir_list[];
extern const char srv_redis_lua_dir_members[];
extern const char srv_redis_lua_dir_rejoin[];
extern const char srv_redis_lua_dir_rejoin_sweep[];
/* Online state and watchlists (server/redis/redis_dir*.c). */
extern const char srv_redis_lua_online_signin[];
extern const char srv_redis_lua_online_signout[];
extern const char srv_redis_lua_online_rejoin[];
/* The node lease and the reaper (server/redis/redis_lease.c). */
extern const char srv_redis_lua_lease_tick[];
extern const char srv_redis_lua_lease_leave[];
extern const char srv_redis_lua_lease_reap[];
/* The cache entries loaded on connect (server/redis/redis_pub.c). */
extern const char srv_redis_lua_cache_scan[];
/* A channel's history stream read for a resume (server/redis/redis_hist.c). */
extern const char srv_redis_lua_history_read[];
/* The webhook sender's stream (server/webhook/webhook_stream*.c): an
 * event appended, the per-app lease taken, renewed, released at a clean
 * stop or retired after a reload, the delayed edges pumped, and the
 * consumers of nodes gone dropped from a group. */
extern const char srv_redis_lua_wh_stream_add[];
extern const char srv_redis_lua_wh_stream_lease[];
extern const char srv_redis_lua_wh_stream_release[];
extern const char srv_redis_lua_wh_stream_retire[];
extern const char srv_redis_lua_wh_stream_pump[];
extern const char srv_redis_lua_wh_stream_consumers[];

#endif
