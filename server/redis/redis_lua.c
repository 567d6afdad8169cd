/*
 * server/redis/redis_lua.c - the scripts of server/redis/redis_lua.h put
 * together from the files of server/redis/lua/ (the SRV_LUA_TEXT_* macros
 * of the header embed.cmake generates): a prologue that defines shared
 * functions (dir_wh.lua, watchlist.lua, lease_claim.lua, cseq.lua,
 * reap_fields.lua) goes in front of each script that calls them. A node
 * loads its scripts at each connect, so a text that changes (cseq.lua in
 * front of the scripts that step a member sequence, say) costs nothing.
 *
 * Thread: any (constant text).
 */
#include "server/redis/redis_lua.h"

#include "server/redis/lua_text.h"

/* cseq.lua's lines end with newlines, like reap_fields.lua's. */
const char srv_redis_lua_dir_join[] =
    SRV_LUA_TEXT_CSEQ SRV_LUA_TEXT_DIR_WH SRV_LUA_TEXT_DIR_JOIN;
const char srv_redis_lua_dir_leave[] =
    SRV_LUA_TEXT_CSEQ SRV_LUA_TEXT_DIR_WH SRV_LUA_TEXT_DIR_LEAVE;
const char srv_redis_lua_dir_info[] = SRV_LUA_TEXT_DIR_INFO;
const char srv_redis_lua_dir_list[] = SRV_LUA_TEXT_DIR_LIST;
const char srv_redis_lua_dir_members[] = SRV_LUA_TEXT_DIR_MEMBERS;
const char srv_redis_lua_dir_rejoin[] =
    SRV_LUA_TEXT_CSEQ SRV_LUA_TEXT_DIR_REJOIN;
/* reap_fields.lua's lines end with newlines: it goes in front of a script
 * of either embed mode (dir_rejoin_sweep's newlines, lease_reap's spaces). */
const char srv_redis_lua_dir_rejoin_sweep[] =
    SRV_LUA_TEXT_WATCHLIST SRV_LUA_TEXT_CSEQ SRV_LUA_TEXT_REAP_FIELDS
        SRV_LUA_TEXT_DIR_REJOIN_SWEEP;

const char srv_redis_lua_online_signin[] =
    SRV_LUA_TEXT_WATCHLIST SRV_LUA_TEXT_ONLINE_SIGNIN;
const char srv_redis_lua_online_signout[] =
    SRV_LUA_TEXT_WATCHLIST SRV_LUA_TEXT_ONLINE_SIGNOUT;
const char srv_redis_lua_online_rejoin[] =
    SRV_LUA_TEXT_WATCHLIST SRV_LUA_TEXT_ONLINE_REJOIN;

/* lease_claim.lua's lines are joined by spaces like the scripts after it:
 * one more space between them. */
const char srv_redis_lua_lease_tick[] =
    SRV_LUA_TEXT_LEASE_CLAIM " " SRV_LUA_TEXT_LEASE_TICK;
const char srv_redis_lua_lease_leave[] =
    SRV_LUA_TEXT_LEASE_CLAIM " " SRV_LUA_TEXT_LEASE_LEAVE;
const char srv_redis_lua_lease_reap[] =
    SRV_LUA_TEXT_WATCHLIST SRV_LUA_TEXT_CSEQ SRV_LUA_TEXT_REAP_FIELDS
        SRV_LUA_TEXT_LEASE_REAP;

const char srv_redis_lua_cache_scan[] = SRV_LUA_TEXT_CACHE_SCAN;
const char srv_redis_lua_history_read[] = SRV_LUA_TEXT_HISTORY_READ;

const char srv_redis_lua_wh_stream_add[] = SRV_LUA_TEXT_WH_STREAM_ADD;
const char srv_redis_lua_wh_stream_lease[] = SRV_LUA_TEXT_WH_STREAM_LEASE;
const char srv_redis_lua_wh_stream_release[] = SRV_LUA_TEXT_WH_STREAM_RELEASE;
const char srv_redis_lua_wh_stream_retire[] = SRV_LUA_TEXT_WH_STREAM_RETIRE;
const char srv_redis_lua_wh_stream_pump[] = SRV_LUA_TEXT_WH_STREAM_PUMP;
const char srv_redis_lua_wh_stream_consumers[] =
    SRV_LUA_TEXT_WH_STREAM_CONSUMERS;
