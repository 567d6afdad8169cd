-- server/redis/lua/lease_reap.lua - one step of a reap
-- (server/redis/redis_lease.c). Runs after watchlist.lua and
-- reap_fields.lua (drain, sub, drop_member).
--
-- ARGV: P, me, token, max fields, then the webhook delay in ms, the stream
-- bound and the ids of the apps whose webhooks go through Redis
-- (docs/WEBHOOKS.md, "In a cluster"): their closing edges wait in
-- P:whd:<app> (or go to the stream P:wh:<app> at once with no delay), as
-- dir_leave.lua does. Members first (within a leave the member edge comes
-- before the channel edge), then online users, then subscriptions. Returns
-- {"more"|"done"|"lost", subscriptions removed, memberships removed,
-- {kind, app, channel, uid, ...}} with kind "r" (member_removed: the user
-- is gone everywhere) or "v" (channel_vacated, uid ""). "lost": another
-- node took the token over.
--
-- Keys (P = the prefix, docs/SCALING.md "Node death"): P:nodes,
-- P:node:<id>, P:ns|nm|ni|no:<id>, P:gs:<app>, P:gm:<app>:<ch>,
-- P:gi:<app>:<ch>, P:gq:<app>, P:nc:<app>; the reaper's own: P:reap:<dead>
-- (the election), P:reapseq (INCR), P:reaping (SET of tokens "<dead>:<n>"
-- being reaped), P:rp:<token>:ns|nm|no (the claimed share), P:reap:<token>
-- (who reaps it).
--
-- embed: lines joined by spaces

local p, me, tok, max = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local lock = p .. ':reap:' .. tok
if redis.call('GET', lock) ~= me then return {'lost', 0, 0, {}} end
redis.call('PEXPIRE', lock, 30000)
local whd, whmax, whapps = tonumber(ARGV[5]) or 0,
  tonumber(ARGV[6]) or 0, {}
for i = 7, #ARGV do whapps[ARGV[i]] = true end
local function wh_close(a, name, c, u)
  if not whapps[a] then return end
  local m = u and ('r\31' .. c .. '\31' .. u) or ('v\31' .. c)
  if whd > 0 then
    local t = redis.call('TIME')
    redis.call('ZADD', p .. ':whd:' .. a,
      tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + whd, m)
    return
  end
  local sk = p .. ':wh:' .. a
  if redis.call('XLEN', sk) >= whmax then
    redis.call('HINCRBY', p .. ':whn:' .. a, 'dropped', 1) return
  end
  if u then redis.call('XADD', sk, '*', 'name', name, 'channel', c,
    'user_id', u)
  else redis.call('XADD', sk, '*', 'name', name, 'channel', c) end
  redis.call('HINCRBY', p .. ':whn:' .. a, 'queued', 1)
end
local nmk = p .. ':rp:' .. tok .. ':nm'
local nsk = p .. ':rp:' .. tok .. ':ns'
local edges, subs, mems, used = {}, 0, 0, 0
used = used + drain(nmk, max - used, function(f, v)
  local a, c, u = string.match(f, '^([^\31]*)\31([^\31]*)\31(.*)$')
  local n = tonumber(v) or 0
  if a and n > 0 then
    mems = mems + 1
    if drop_member(p, a, c, u, n) then
      wh_close(a, 'member_removed', c, u)
      edges[#edges + 1] = 'r'; edges[#edges + 1] = a
      edges[#edges + 1] = c; edges[#edges + 1] = u
    end
  end
end)
local nok = p .. ':rp:' .. tok .. ':no'
used = used + drain(nok, max - used, function(f) wl_down(p, me, f) end)
used = used + drain(nsk, max - used, function(f, v)
  local a, c = string.match(f, '^([^\31]*)\31(.*)$')
  local n = tonumber(v) or 0
  if a and n > 0 then
    subs = subs + n
    local before = sub(p .. ':gs:' .. a, c, n)
    if before > 0 and before <= n then
      wh_close(a, 'channel_vacated', c, nil)
      edges[#edges + 1] = 'v'; edges[#edges + 1] = a
      edges[#edges + 1] = c; edges[#edges + 1] = ''
    end
  end
end)
if redis.call('EXISTS', nmk, nsk, nok) > 0 then
  return {'more', subs, mems, edges}
end
redis.call('SREM', p .. ':reaping', tok)
redis.call('DEL', lock)
return {'done', subs, mems, edges}
