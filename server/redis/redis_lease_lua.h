/*
 * server/redis/redis_lease_lua.h - the lease and reaper scripts of
 * server/redis/redis_lease.c, as C string literals (key layout: docs/SCALING.md
 * "Node death"). Included by redis_lease.c only.
 *
 * Keys (P = the prefix): P:nodes, P:node:<id>, P:ns|nm|ni:<id>,
 * P:gs:<app>, P:gm:<app>:<ch>, P:gi:<app>:<ch>, P:gq:<app>, P:nc:<app>;
 * the reaper's own: P:reap:<dead> (the election), P:reapseq (INCR),
 * P:reaping (SET of tokens "<dead>:<n>" being reaped), P:rp:<token>:ns and
 * P:rp:<token>:nm (the claimed share), P:reap:<token> (who reaps it).
 */
#ifndef SRV_REDIS_LEASE_LUA_H
#define SRV_REDIS_LEASE_LUA_H

#include "server/redis/redis_online_lua.h"

/*
 * claim(dead): move a node's share out of the way under a new token, in
 * one step, so that the node (back from a pause) can register afresh
 * while the token is reaped. ARGV[1] = P, ARGV[2] = me; apps = the app
 * ids (for P:nc:<app>).
 */
#define LEASE_LUA_CLAIM                                                       \
    "local p, me = ARGV[1], ARGV[2] "                                         \
    "local function claim(dead, apps) "                                       \
    "  local tok = dead .. ':' .. redis.call('INCR', p .. ':reapseq') "       \
    "  for _, k in ipairs({'ns', 'nm', 'no'}) do "                            \
    "    local src = p .. ':' .. k .. ':' .. dead "                           \
    "    if redis.call('EXISTS', src) == 1 then "                             \
    "      redis.call('RENAME', src, p .. ':rp:' .. tok .. ':' .. k) "        \
    "    end "                                                                \
    "  end "                                                                  \
    "  redis.call('UNLINK', p .. ':ni:' .. dead) "                            \
    "  redis.call('UNLINK', p .. ':rjtok:' .. dead) "                         \
    "  for _, a in ipairs(apps) do "                                          \
    "    redis.call('HDEL', p .. ':nc:' .. a, dead) "                         \
    "  end "                                                                  \
    "  redis.call('SREM', p .. ':nodes', dead) "                              \
    "  redis.call('SADD', p .. ':reaping', tok) "                             \
    "  redis.call('SET', p .. ':reap:' .. tok, me, 'PX', 30000) "             \
    "  return tok "                                                           \
    "end "

/*
 * The tick. ARGV: P, me, epoch, lease ms, registered (0/1), n apps, then
 * (app id, this node's connections) n times. Returns
 * {state, live nodes, {others' connections per app}, {dead, token, ...}}
 * with state "ok", or "reaped" (this node had been removed: it is
 * registered again now and must rejoin).
 */
static const char lease_lua_tick[] =
    LEASE_LUA_CLAIM
    "local ep, ms, reg, na = ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6]) "
    "local apps, counts = {}, {} "
    "for i = 1, na do "
    "  apps[i] = ARGV[5 + 2 * i]; counts[i] = tonumber(ARGV[6 + 2 * i]) "
    "end "
    "local nodes = p .. ':nodes' "
    "local st, claimed = 'ok', {} "
    "local member = redis.call('SISMEMBER', nodes, me) "
    "if reg == '1' then "
    "  if member == 0 then st = 'reaped' end "
    "elseif member == 1 or redis.call('EXISTS', p .. ':ns:' .. me, "
    "       p .. ':nm:' .. me, p .. ':ni:' .. me, p .. ':no:' .. me) > 0 "
    "       then "
    /* An earlier run of this node id left state: reap it ourselves. */
    "  claimed[#claimed + 1] = me "
    "  claimed[#claimed + 1] = claim(me, apps) "
    "end "
    "redis.call('SET', p .. ':node:' .. me, ep, 'PX', ms) "
    "redis.call('SADD', nodes, me) "
    "local sums = {} "
    "for i = 1, na do "
    "  local k = p .. ':nc:' .. apps[i] "
    "  if counts[i] > 0 then redis.call('HSET', k, me, counts[i]) "
    "  else redis.call('HDEL', k, me) end "
    "  local all, s = redis.call('HGETALL', k), 0 "
    "  for j = 1, #all, 2 do "
    "    if all[j] ~= me then s = s + (tonumber(all[j + 1]) or 0) end "
    "  end "
    "  sums[i] = s "
    "end "
    "local live = 0 "
    "for _, n in ipairs(redis.call('SMEMBERS', nodes)) do "
    "  if redis.call('EXISTS', p .. ':node:' .. n) == 1 then "
    "    live = live + 1 "
    "  elseif redis.call('SET', p .. ':reap:' .. n, me, 'NX', 'PX', 30000) "
    "  then "
    "    claimed[#claimed + 1] = n "
    "    claimed[#claimed + 1] = claim(n, apps) "
    "    redis.call('DEL', p .. ':reap:' .. n) "
    "  end "
    "end "
    /* Tokens whose reaper went away before it finished. */
    "for _, t in ipairs(redis.call('SMEMBERS', p .. ':reaping')) do "
    "  if redis.call('SET', p .. ':reap:' .. t, me, 'NX', 'PX', 30000) then "
    "    claimed[#claimed + 1] = string.match(t, '^(.*):%d+$') or t "
    "    claimed[#claimed + 1] = t "
    "  end "
    "end "
    "return {st, live, sums, claimed}";

/*
 * A clean stop: this node's own share claimed, its lease dropped. ARGV:
 * P, me, n apps, app ids. Returns the token.
 */
static const char lease_lua_leave[] =
    LEASE_LUA_CLAIM
    "local apps = {} "
    "for i = 1, tonumber(ARGV[3]) do apps[i] = ARGV[3 + i] end "
    "redis.call('DEL', p .. ':node:' .. me) "
    "return claim(me, apps)";

/*
 * One step of a reap. ARGV: P, me, token, max fields, then the webhook
 * delay in ms, the stream bound and the ids of the apps whose webhooks
 * go through Redis (docs/WEBHOOKS.md, "In a cluster"): their closing
 * edges wait in P:whd:<app> (or go to the stream P:wh:<app> at once with
 * no delay), as the LEAVE script does. Members first
 * (within a leave the member edge comes before the channel edge), then
 * subscriptions. Returns {"more"|"done"|"lost", subscriptions removed,
 * memberships removed, {kind, app, channel, uid, ...}} with kind "r"
 * (member_removed: the user is gone everywhere) or "v" (channel_vacated,
 * uid ""). "lost": another node took the token over.
 */
static const char lease_lua_reap[] =
    SRV_LUA_WL_PRELUDE
    "local p, me, tok, max = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4]) "
    "local lock = p .. ':reap:' .. tok "
    "if redis.call('GET', lock) ~= me then return {'lost', 0, 0, {}} end "
    "redis.call('PEXPIRE', lock, 30000) "
    "local whd, whmax, whapps = tonumber(ARGV[5]) or 0, "
    "  tonumber(ARGV[6]) or 0, {} "
    "for i = 7, #ARGV do whapps[ARGV[i]] = true end "
    "local function wh_close(a, name, c, u) "
    "  if not whapps[a] then return end "
    "  local m = u and ('r\\31' .. c .. '\\31' .. u) or ('v\\31' .. c) "
    "  if whd > 0 then "
    "    local t = redis.call('TIME') "
    "    redis.call('ZADD', p .. ':whd:' .. a, "
    "      tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + whd, m) "
    "    return "
    "  end "
    "  local sk = p .. ':wh:' .. a "
    "  if redis.call('XLEN', sk) >= whmax then "
    "    redis.call('HINCRBY', p .. ':whn:' .. a, 'dropped', 1) return "
    "  end "
    "  if u then redis.call('XADD', sk, '*', 'name', name, 'channel', c, "
    "    'user_id', u) "
    "  else redis.call('XADD', sk, '*', 'name', name, 'channel', c) end "
    "  redis.call('HINCRBY', p .. ':whn:' .. a, 'queued', 1) "
    "end "
    "local nmk = p .. ':rp:' .. tok .. ':nm' "
    "local nsk = p .. ':rp:' .. tok .. ':ns' "
    "local edges, subs, mems, used = {}, 0, 0, 0 "
    /* Up to max - used distinct fields of a hash (HSCAN may repeat). */
    "local function take(key) "
    "  local out, seen, cur, want = {}, {}, '0', max - used "
    "  if want <= 0 then return out end "
    "  repeat "
    "    local r = redis.call('HSCAN', key, cur, 'COUNT', want) "
    "    cur = r[1] "
    "    for i = 1, #r[2], 2 do "
    "      local f = r[2][i] "
    "      if not seen[f] and #out < 2 * want then "
    "        seen[f] = true; out[#out + 1] = f; out[#out + 1] = r[2][i + 1] "
    "      end "
    "    end "
    "  until cur == '0' or #out >= 2 * want "
    "  return out "
    "end "
    /* Take n from field f of hash k; returns what it held before. */
    "local function sub(k, f, n) "
    "  local before = tonumber(redis.call('HGET', k, f)) or 0 "
    "  if before > n then redis.call('HINCRBY', k, f, -n) "
    "  else redis.call('HDEL', k, f) end "
    "  return before "
    "end "
    "local f = take(nmk) "
    "for i = 1, #f, 2 do "
    "  local a, c, u = string.match(f[i], '^([^\\31]*)\\31([^\\31]*)\\31(.*)$') "
    "  local n = tonumber(f[i + 1]) or 0 "
    "  if a and n > 0 then "
    "    mems = mems + 1 "
    "    local before = sub(p .. ':gm:' .. a .. ':' .. c, u, n) "
    "    if before > 0 and before <= n then "
    "      redis.call('HDEL', p .. ':gi:' .. a .. ':' .. c, u) "
    "      local cs = redis.call('HINCRBY', p .. ':gq:' .. a, c, 1) "
    "      redis.call('PUBLISH', p .. ':m:' .. a .. ':' .. c, "
    "                 cs .. '\\n-' .. #u .. '\\n' .. u) "
    "      wh_close(a, 'member_removed', c, u) "
    "      edges[#edges + 1] = 'r'; edges[#edges + 1] = a "
    "      edges[#edges + 1] = c; edges[#edges + 1] = u "
    "    end "
    "  end "
    "  redis.call('HDEL', nmk, f[i]) "
    "  used = used + 1 "
    "end "
    "local nok = p .. ':rp:' .. tok .. ':no' "
    "f = take(nok) "
    "for i = 1, #f, 2 do "
    "  wl_down(p, me, f[i]) "
    "  redis.call('HDEL', nok, f[i]) "
    "  used = used + 1 "
    "end "
    "f = take(nsk) "
    "for i = 1, #f, 2 do "
    "  local a, c = string.match(f[i], '^([^\\31]*)\\31(.*)$') "
    "  local n = tonumber(f[i + 1]) or 0 "
    "  if a and n > 0 then "
    "    subs = subs + n "
    "    local before = sub(p .. ':gs:' .. a, c, n) "
    "    if before > 0 and before <= n then "
    "      wh_close(a, 'channel_vacated', c, nil) "
    "      edges[#edges + 1] = 'v'; edges[#edges + 1] = a "
    "      edges[#edges + 1] = c; edges[#edges + 1] = '' "
    "    end "
    "  end "
    "  redis.call('HDEL', nsk, f[i]) "
    "  used = used + 1 "
    "end "
    "if redis.call('EXISTS', nmk, nsk, nok) > 0 then "
    "  return {'more', subs, mems, edges} "
    "end "
    "redis.call('SREM', p .. ':reaping', tok) "
    "redis.call('DEL', lock) "
    "return {'done', subs, mems, edges}";

#endif
