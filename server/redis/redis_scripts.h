/*
 * server/redis/redis_scripts.h - the cluster-wide directory's Lua scripts
 * (docs/SCALING.md, "The cluster-wide directory"), as C string literals.
 * server/redis/redis_dir.c SCRIPT LOADs each on every connect and runs it with
 * EVALSHA (EVAL with the text until the SHA is known, and again on a
 * NOSCRIPT error).
 *
 * Keys, with P the prefix and US the byte 0x1f:
 *   P:ns:<node>  HASH app US ch -> this node's subscriptions
 *   P:nm:<node>  HASH app US ch US uid -> this node's connections
 *   P:ni:<node>  HASH app US ch US uid -> user_info ("" = none)
 *   P:gs:<app>   HASH ch -> subscriptions over all nodes
 *   P:gm:<app>:<ch> HASH uid -> connections over all nodes
 *   P:gi:<app>:<ch> HASH uid -> user_info
 *   P:gq:<app>   HASH ch -> the channel's member sequence
 *   P:rjtok:<node> STRING the reap token of a REJOIN in progress
 * Member events: PUBLISH P:m:<app>:<ch> "<cseq>\n+<n>\n<uid><info>" or
 * "<cseq>\n-<n>\n<uid>", n the uid's length in bytes (decimal): a uid may
 * hold any byte but NUL ('\n' and 0x1f included), so it is counted, never
 * delimited. Every count reaching 0 is HDELed.
 */
#ifndef SRV_REDIS_SCRIPTS_H
#define SRV_REDIS_SCRIPTS_H

#include "server/redis/redis_online_lua.h"

enum srv_script {
    SRV_SCRIPT_JOIN,
    SRV_SCRIPT_LEAVE,
    SRV_SCRIPT_INFO,
    SRV_SCRIPT_LIST,
    SRV_SCRIPT_MEMBERS,
    SRV_SCRIPT_REJOIN,
    SRV_SCRIPT_REJOIN_SWEEP,
    /* Online state and watchlists (server/redis/redis_online_lua.h). */
    SRV_SCRIPT_ONLINE_SIGNIN,
    SRV_SCRIPT_ONLINE_SIGNOUT,
    SRV_SCRIPT_ONLINE_REJOIN,
    SRV_SCRIPT_N,
};

/*
 * Durable webhooks (docs/WEBHOOKS.md, "In a cluster"), the prologue of
 * JOIN and LEAVE: with three more keys, KEYS[8] P:wh:<app> (the stream),
 * KEYS[9] P:whd:<app> (ZSET of closing edges waiting out the delay, score
 * = due ms by Redis TIME, member "v" US ch or "r" US ch US uid) and
 * KEYS[10] P:whn:<app> (HASH of counters queued / cancelled / dropped),
 * the last two ARGV are the delay in ms and the stream's bound. An
 * opening edge ZREMs its pending closing one (cancelled: nothing queued)
 * or XADDs itself; a closing edge waits in the ZSET (XADD at once with no
 * delay). Redis 7 replicates a script's effects, so TIME may be used.
 */
#define SRV_LUA_WH                                                           \
    "local wh, nargv, whd, whmax = #KEYS >= 10, #ARGV, 0, 0\n"                \
    "if wh then\n"                                                           \
    "  whd = tonumber(ARGV[nargv - 1]) or 0\n"                               \
    "  whmax = tonumber(ARGV[nargv]) or 0\n"                                 \
    "  nargv = nargv - 2\n"                                                  \
    "end\n"                                                                  \
    "local function wh_add(name, ch, uid)\n"                                 \
    "  if redis.call('XLEN', KEYS[8]) >= whmax then\n"                       \
    "    redis.call('HINCRBY', KEYS[10], 'dropped', 1); return\n"            \
    "  end\n"                                                                \
    "  if uid then\n"                                                        \
    "    redis.call('XADD', KEYS[8], '*', 'name', name, 'channel', ch,\n"     \
    "               'user_id', uid)\n"                                       \
    "  else redis.call('XADD', KEYS[8], '*', 'name', name, 'channel', ch)\n"  \
    "  end\n"                                                                \
    "  redis.call('HINCRBY', KEYS[10], 'queued', 1)\n"                       \
    "end\n"                                                                  \
    "local function wh_key(ch, uid)\n"                                       \
    "  if uid then return 'r\\31' .. ch .. '\\31' .. uid end\n"               \
    "  return 'v\\31' .. ch\n"                                                \
    "end\n"                                                                  \
    "local function wh_open(name, ch, uid)\n"                                \
    "  if not wh then return end\n"                                          \
    "  if redis.call('ZREM', KEYS[9], wh_key(ch, uid)) == 1 then\n"          \
    "    redis.call('HINCRBY', KEYS[10], 'cancelled', 1); return\n"          \
    "  end\n"                                                                \
    "  wh_add(name, ch, uid)\n"                                              \
    "end\n"                                                                  \
    "local function wh_close(name, ch, uid)\n"                               \
    "  if not wh then return end\n"                                          \
    "  if whd <= 0 then wh_add(name, ch, uid); return end\n"                 \
    "  local t = redis.call('TIME')\n"                                       \
    "  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)\n" \
    "  redis.call('ZADD', KEYS[9], now + whd, wh_key(ch, uid))\n"            \
    "end\n"

/* KEYS ns nm ni gs gm gi gq [wh whd whn]; ARGV fs ch max [uid info fm
 * mchan stamp] [delay bound]. stamp ("" without a cluster key) goes
 * before the member_added it publishes (hub_cluster_member_stamp).
 * {-1,0,0} when the presence channel already has max (> 0) members and
 * uid is not one; else {chan_first, member_first, cseq, uid, info, ...}
 * (presence: the member list after the join). */
#define SRV_LUA_JOIN                                                         \
    SRV_LUA_WH                                                               \
    "local fs, ch = ARGV[1], ARGV[2]\n"                                      \
    "local pres = nargv >= 7\n"                                              \
    "if pres then\n"                                                         \
    "  local maxm = tonumber(ARGV[3]) or 0\n"                                \
    "  if maxm > 0 and redis.call('HEXISTS', KEYS[5], ARGV[4]) == 0 and\n"   \
    "     redis.call('HLEN', KEYS[5]) >= maxm then return {-1, 0, 0} end\n"  \
    "end\n"                                                                  \
    "local cf, mf, cseq = 0, 0, 0\n"                                         \
    "redis.call('HINCRBY', KEYS[1], fs, 1)\n"                                \
    "if redis.call('HINCRBY', KEYS[4], ch, 1) == 1 then\n"                   \
    "  cf = 1; wh_open('channel_occupied', ch, nil)\n"                       \
    "end\n"                                                                  \
    "if not pres then return {cf, 0, 0} end\n"                               \
    "local uid, info, fm = ARGV[4], ARGV[5], ARGV[6]\n"                      \
    "if redis.call('HINCRBY', KEYS[2], fm, 1) == 1 then\n"                   \
    "  redis.call('HSET', KEYS[3], fm, info)\n"                              \
    "end\n"                                                                  \
    "if redis.call('HINCRBY', KEYS[5], uid, 1) == 1 then\n"                  \
    "  mf = 1; wh_open('member_added', ch, uid)\n"                           \
    "  redis.call('HSET', KEYS[6], uid, info)\n"                             \
    "  cseq = redis.call('HINCRBY', KEYS[7], ch, 1)\n"                       \
    "  redis.call('PUBLISH', ARGV[7], (ARGV[8] or '') .. cseq .. '\\n+' ..\n"\
    "             #uid .. '\\n' .. uid .. info)\n"                           \
    "else\n"                                                                 \
    "  cseq = tonumber(redis.call('HGET', KEYS[7], ch) or '0')\n"            \
    "end\n"                                                                  \
    "local r = {cf, mf, cseq}\n"                                             \
    "local all = redis.call('HGETALL', KEYS[6])\n"                           \
    "for i = 1, #all do r[#r + 1] = all[i] end\n"                            \
    "return r\n"

/* KEYS as JOIN; ARGV fs ch [uid fm mchan] [delay bound]. {chan_last, member_last,
 * cseq}. A count this node does not hold is not taken from the totals. */
#define SRV_LUA_LEAVE                                                        \
    SRV_LUA_WH                                                               \
    "local fs, ch = ARGV[1], ARGV[2]\n"                                      \
    "local cl, ml, cseq = 0, 0, 0\n"                                         \
    "local n = redis.call('HINCRBY', KEYS[1], fs, -1)\n"                     \
    "if n <= 0 then redis.call('HDEL', KEYS[1], fs) end\n"                   \
    "if n >= 0 then\n"                                                       \
    "  local g = redis.call('HINCRBY', KEYS[4], ch, -1)\n"                   \
    "  if g <= 0 then\n"                                                     \
    "    redis.call('HDEL', KEYS[4], ch)\n"                                  \
    "    if g == 0 then cl = 1 end\n"                                        \
    "  end\n"                                                                \
    "end\n"                                                                  \
    "if nargv >= 5 then\n"                                                   \
    "  local uid, fm = ARGV[3], ARGV[4]\n"                                   \
    "  local m = redis.call('HINCRBY', KEYS[2], fm, -1)\n"                   \
    "  if m <= 0 then\n"                                                     \
    "    redis.call('HDEL', KEYS[2], fm)\n"                                  \
    "    redis.call('HDEL', KEYS[3], fm)\n"                                  \
    "  end\n"                                                                \
    "  if m >= 0 then\n"                                                     \
    "    local g = redis.call('HINCRBY', KEYS[5], uid, -1)\n"                \
    "    if g <= 0 then\n"                                                   \
    "      redis.call('HDEL', KEYS[5], uid)\n"                               \
    "      if g == 0 then\n"                                                 \
    "        redis.call('HDEL', KEYS[6], uid)\n"                             \
    "        ml = 1; wh_close('member_removed', ch, uid)\n"                  \
    "        cseq = redis.call('HINCRBY', KEYS[7], ch, 1)\n"                 \
    "        redis.call('PUBLISH', ARGV[5], cseq .. '\\n-' .. #uid ..\n"     \
    "                   '\\n' .. uid)\n"                                      \
    "      end\n"                                                            \
    "    end\n"                                                              \
    "  end\n"                                                                \
    "end\n"                                                                  \
    "if cl == 1 then wh_close('channel_vacated', ch, nil) end\n"             \
    "return {cl, ml, cseq}\n"

/* KEYS gs gm; ARGV ch. {subscriptions, users}. */
#define SRV_LUA_INFO                                                         \
    "return {tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0'),\n"       \
    "        redis.call('HLEN', KEYS[2])}\n"

/* KEYS gs; ARGV gm-key-prefix channel-prefix user_count(0|1).
 * {ch, users, ch, users, ...} for the occupied channels. */
#define SRV_LUA_LIST                                                         \
    "local all = redis.call('HGETALL', KEYS[1])\n"                           \
    "local r, pfx = {}, ARGV[2]\n"                                           \
    "for i = 1, #all, 2 do\n"                                                \
    "  local ch = all[i]\n"                                                  \
    "  if (tonumber(all[i + 1]) or 0) > 0 and\n"                             \
    "     (pfx == '' or string.sub(ch, 1, #pfx) == pfx) then\n"              \
    "    r[#r + 1] = ch\n"                                                   \
    "    if ARGV[3] == '1' then\n"                                           \
    "      r[#r + 1] = redis.call('HLEN', ARGV[1] .. ch)\n"                  \
    "    else r[#r + 1] = 0 end\n"                                           \
    "  end\n"                                                                \
    "end\n"                                                                  \
    "return r\n"

/* KEYS gq gi; ARGV ch. {cseq, uid, info, ...}: the list and its seq. */
#define SRV_LUA_MEMBERS                                                      \
    "local r = {tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')}\n"    \
    "local all = redis.call('HGETALL', KEYS[2])\n"                           \
    "for i = 1, #all do r[#r + 1] = all[i] end\n"                            \
    "return r\n"

/* One chunk of a REJOIN: ARGV P node first(0|1) n_s (fs count)*n_s n_m
 * (fm conns info stamp)*n_m, at most SRV_REJOIN_CHUNK fields in all (stamp:
 * as JOIN's, before a member_added). The first
 * chunk moves the node's old share (ns, nm) aside under a reap token
 * (P:rp:<tok>:ns|nm, listed in P:reaping, locked by P:reap:<tok> for this
 * node, named in P:rjtok:<node>) and drops ni; every chunk then takes its
 * fields out of the old share, applies the difference to the totals (with
 * member events for users who appear or disappear cluster-wide) and
 * writes them into the new share. What is left of the old share once the
 * last chunk ran is what the node no longer has: REJOIN_SWEEP removes it.
 * Totals count the old share and the new one at every step, so a node
 * that dies in the middle leaves a token the reaper finishes (its lock
 * lapses). {subscriptions, channels, members, added, removed, token}.
 * Keys are built here from the share's fields (one Redis, not Redis
 * Cluster). */
#define SRV_REJOIN_CHUNK 1000

#define SRV_LUA_REJOIN                                                       \
    "local P, node, first = ARGV[1], ARGV[2], ARGV[3]\n"                     \
    "local US = '\\31'\n"                                                     \
    "local ns, nm, ni = P..':ns:'..node, P..':nm:'..node, P..':ni:'..node\n" \
    "local tk = P..':rjtok:'..node\n"                                        \
    "local tok\n"                                                            \
    "if first == '1' then\n"                                                 \
    "  tok = node..':'..redis.call('INCR', P..':reapseq')\n"                 \
    "  for _, k in ipairs({'ns', 'nm', 'no'}) do\n"                          \
    "    local src = P..':'..k..':'..node\n"                                 \
    "    if redis.call('EXISTS', src) == 1 then\n"                           \
    "      redis.call('RENAME', src, P..':rp:'..tok..':'..k)\n"              \
    "    end\n"                                                              \
    "  end\n"                                                                \
    "  redis.call('UNLINK', ni)\n"                                           \
    "  redis.call('SADD', P..':reaping', tok)\n"                             \
    "  redis.call('SET', P..':reap:'..tok, node, 'PX', 30000)\n"             \
    "  redis.call('SET', tk, tok)\n"                                         \
    "else\n"                                                                 \
    "  tok = redis.call('GET', tk) or ''\n"                                  \
    "end\n"                                                                  \
    "local osh, omh = P..':rp:'..tok..':ns', P..':rp:'..tok..':nm'\n"          \
    "local function had(old, new, f)\n"                                      \
    "  local v = 0\n"                                                        \
    "  if tok ~= '' then\n"                                                  \
    "    v = tonumber(redis.call('HGET', old, f)) or 0\n"                    \
    "    if v ~= 0 then redis.call('HDEL', old, f) end\n"                    \
    "  end\n"                                                                \
    "  return v + (tonumber(redis.call('HGET', new, f)) or 0)\n"             \
    "end\n"                                                                  \
    "local function cut(f)\n"                                                \
    "  local a = string.find(f, US, 1, true)\n"                              \
    "  if not a then return nil end\n"                                       \
    "  local app, rest = string.sub(f, 1, a - 1), string.sub(f, a + 1)\n"    \
    "  local b = string.find(rest, US, 1, true)\n"                           \
    "  if not b then return app, rest, nil end\n"                            \
    "  return app, string.sub(rest, 1, b - 1), string.sub(rest, b + 1)\n"    \
    "end\n"                                                                  \
    "local nsubs, nchan, nmem, added, removed = 0, 0, 0, 0, 0\n"             \
    "local i = 4\n"                                                          \
    "local n = tonumber(ARGV[i]); i = i + 1\n"                               \
    "for k = 1, n do\n"                                                      \
    "  local f, want = ARGV[i], tonumber(ARGV[i + 1]) or 0; i = i + 2\n"     \
    "  local h = had(osh, ns, f)\n"                                           \
    "  local app, ch = cut(f)\n"                                             \
    "  if app and ch and want ~= h then\n"                                   \
    "    local gs = P..':gs:'..app\n"                                        \
    "    if redis.call('HINCRBY', gs, ch, want - h) <= 0 then\n"             \
    "      redis.call('HDEL', gs, ch)\n"                                     \
    "    end\n"                                                              \
    "  end\n"                                                                \
    "  if want > 0 then\n"                                                   \
    "    redis.call('HSET', ns, f, want)\n"                                  \
    "    nsubs = nsubs + want; nchan = nchan + 1\n"                          \
    "  else redis.call('HDEL', ns, f) end\n"                                 \
    "end\n"                                                                  \
    "n = tonumber(ARGV[i]); i = i + 1\n"                                     \
    "for k = 1, n do\n"                                                      \
    "  local f, want, info = ARGV[i], tonumber(ARGV[i + 1]) or 0,\n"         \
    "                        ARGV[i + 2]\n"                                  \
    "  local stamp = ARGV[i + 3]\n"                                          \
    "  i = i + 4\n"                                                          \
    "  local h = had(omh, nm, f)\n"                                           \
    "  local app, ch, uid = cut(f)\n"                                        \
    "  if app and ch and uid and want ~= h then\n"                           \
    "    local gm = P..':gm:'..app..':'..ch\n"                               \
    "    local gi = P..':gi:'..app..':'..ch\n"                               \
    "    local mchan = P..':m:'..app..':'..ch\n"                             \
    "    local g = redis.call('HINCRBY', gm, uid, want - h)\n"               \
    "    local before = g - (want - h)\n"                                    \
    "    if g <= 0 then redis.call('HDEL', gm, uid) end\n"                   \
    "    if before > 0 and g <= 0 then\n"                                    \
    "      redis.call('HDEL', gi, uid)\n"                                    \
    "      local s = redis.call('HINCRBY', P..':gq:'..app, ch, 1)\n"         \
    "      redis.call('PUBLISH', mchan, s..'\\n-'..#uid..'\\n'..uid)\n"            \
    "      removed = removed + 1\n"                                          \
    "    elseif before <= 0 and g > 0 then\n"                                \
    "      redis.call('HSET', gi, uid, info)\n"                              \
    "      local s = redis.call('HINCRBY', P..':gq:'..app, ch, 1)\n"         \
    "      redis.call('PUBLISH', mchan, stamp..s..'\\n+'..#uid..'\\n'..uid..info)\n"      \
    "      added = added + 1\n"                                              \
    "    end\n"                                                              \
    "  end\n"                                                                \
    "  if want > 0 then\n"                                                   \
    "    redis.call('HSET', nm, f, want)\n"                                  \
    "    redis.call('HSET', ni, f, info)\n"                                  \
    "    nmem = nmem + 1\n"                                                  \
    "  else redis.call('HDEL', nm, f); redis.call('HDEL', ni, f) end\n"     \
    "end\n"                                                                  \
    "return {nsubs, nchan, nmem, added, removed, tok}\n"

/* The end of a REJOIN, one step: ARGV P node token max. Removes at most
 * max fields of what is left of the old share (members first, then
 * subscriptions) from the totals, with a member event for each user gone
 * cluster-wide; when nothing is left the token, its lock and P:rjtok go.
 * {"more"|"done"|"lost", removed}; "lost": the lock lapsed and another
 * node's reaper has the token now (it finishes the job). */
#define SRV_LUA_REJOIN_SWEEP                                                 \
    SRV_LUA_WL_PRELUDE                                                       \
    "local P, node, tok, max = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])\n"\
    "local lock = P..':reap:'..tok\n"                                        \
    "if redis.call('GET', lock) ~= node then return {'lost', 0} end\n"       \
    "redis.call('PEXPIRE', lock, 30000)\n"                                   \
    "local nmk, nsk = P..':rp:'..tok..':nm', P..':rp:'..tok..':ns'\n"        \
    "local removed, used = 0, 0\n"                                           \
    "local function take(key)\n"                                             \
    "  local out, seen, cur, want = {}, {}, '0', max - used\n"               \
    "  if want <= 0 then return out end\n"                                   \
    "  repeat\n"                                                             \
    "    local r = redis.call('HSCAN', key, cur, 'COUNT', want)\n"           \
    "    cur = r[1]\n"                                                       \
    "    for i = 1, #r[2], 2 do\n"                                           \
    "      local f = r[2][i]\n"                                              \
    "      if not seen[f] and #out < 2 * want then\n"                        \
    "        seen[f] = true; out[#out + 1] = f; out[#out + 1] = r[2][i + 1]\n"\
    "      end\n"                                                            \
    "    end\n"                                                              \
    "  until cur == '0' or #out >= 2 * want\n"                               \
    "  return out\n"                                                         \
    "end\n"                                                                  \
    "local function sub(k, f, n)\n"                                          \
    "  local before = tonumber(redis.call('HGET', k, f)) or 0\n"             \
    "  if before > n then redis.call('HINCRBY', k, f, -n)\n"                 \
    "  else redis.call('HDEL', k, f) end\n"                                  \
    "  return before\n"                                                      \
    "end\n"                                                                  \
    "local f = take(nmk)\n"                                                  \
    "for i = 1, #f, 2 do\n"                                                  \
    "  local a, c, u = string.match(f[i], '^([^\\31]*)\\31([^\\31]*)\\31(.*)$')\n"\
    "  local n = tonumber(f[i + 1]) or 0\n"                                  \
    "  if a and n > 0 then\n"                                                \
    "    local before = sub(P..':gm:'..a..':'..c, u, n)\n"                   \
    "    if before > 0 and before <= n then\n"                               \
    "      redis.call('HDEL', P..':gi:'..a..':'..c, u)\n"                    \
    "      local cs = redis.call('HINCRBY', P..':gq:'..a, c, 1)\n"           \
    "      redis.call('PUBLISH', P..':m:'..a..':'..c, cs..'\\n-'..#u..'\\n'..u)\n"\
    "      removed = removed + 1\n"                                          \
    "    end\n"                                                              \
    "  end\n"                                                                \
    "  redis.call('HDEL', nmk, f[i])\n"                                      \
    "  used = used + 1\n"                                                    \
    "end\n"                                                                  \
    "local nok = P..':rp:'..tok..':no'\n"                                    \
    "f = take(nok)\n"                                                        \
    "for i = 1, #f, 2 do\n"                                                  \
    "  wl_down(P, node, f[i])\n"                                             \
    "  redis.call('HDEL', nok, f[i])\n"                                      \
    "  used = used + 1\n"                                                    \
    "end\n"                                                                  \
    "f = take(nsk)\n"                                                        \
    "for i = 1, #f, 2 do\n"                                                  \
    "  local a, c = string.match(f[i], '^([^\\31]*)\\31(.*)$')\n"             \
    "  local n = tonumber(f[i + 1]) or 0\n"                                  \
    "  if a and n > 0 then sub(P..':gs:'..a, c, n) end\n"                    \
    "  redis.call('HDEL', nsk, f[i])\n"                                      \
    "  used = used + 1\n"                                                    \
    "end\n"                                                                  \
    "if redis.call('EXISTS', nmk, nsk, nok) > 0 then\n"                      \
    "  return {'more', removed}\n"                                            \
    "end\n"                                                                  \
    "redis.call('SREM', P..':reaping', tok)\n"                               \
    "redis.call('DEL', lock)\n"                                              \
    "if redis.call('GET', P..':rjtok:'..node) == tok then\n"                 \
    "  redis.call('DEL', P..':rjtok:'..node)\n"                              \
    "end\n"                                                                  \
    "return {'done', removed}\n"

#endif
