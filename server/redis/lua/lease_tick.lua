-- server/redis/lua/lease_tick.lua - the lease tick (server/redis/redis_lease.c),
-- every lease/3. Runs after lease_claim.lua.
--
-- ARGV: P, me, epoch, lease ms, registered (0/1), n apps, then (app id,
-- this node's connections) n times, then may-reap (0/1; absent: 1): 0 for
-- one lease after this node reconnected, since the other nodes may be
-- reconnecting after the same outage (a Sentinel failover) and their
-- leases ran out meanwhile. Renews this node's lease, writes its
-- connections per app and reads the other nodes' sum, and claims the share
-- of every dead node (a member of P:nodes without a lease key) whose
-- election it wins, and every token whose reaper went away. Returns
-- {state, live nodes, {others' connections per app}, {dead, token, ...}}
-- with state "ok", or "reaped" (this node had been removed: it is
-- registered again now and must rejoin).
--
-- Keys (P = the prefix, docs/SCALING.md "Node death"): P:nodes,
-- P:node:<id>, P:ns|nm|ni|no:<id>, P:gs:<app>, P:gm:<app>:<ch>,
-- P:gi:<app>:<ch>, P:gq:<app>, P:nc:<app>; the reaper's own: P:reap:<dead>
-- (the election), P:reapseq (INCR), P:reaping (SET of tokens "<dead>:<n>"
-- being reaped), P:rp:<token>:ns|nm|no (the claimed share), P:reap:<token>
-- (who reaps it).
--
-- embed: lines joined by spaces

local ep, ms, reg, na = ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6])
local may_reap = ARGV[7 + 2 * na] ~= '0'
local apps, counts = {}, {}
for i = 1, na do
  apps[i] = ARGV[5 + 2 * i]; counts[i] = tonumber(ARGV[6 + 2 * i])
end
local nodes = p .. ':nodes'
local st, claimed = 'ok', {}
local member = redis.call('SISMEMBER', nodes, me)
if reg == '1' then
  if member == 0 then st = 'reaped' end
elseif member == 1 or redis.call('EXISTS', p .. ':ns:' .. me,
       p .. ':nm:' .. me, p .. ':ni:' .. me, p .. ':no:' .. me) > 0
       then
  -- An earlier run of this node id left state: reap it ourselves.
  claimed[#claimed + 1] = me
  claimed[#claimed + 1] = claim(me, apps)
end
redis.call('SET', p .. ':node:' .. me, ep, 'PX', ms)
redis.call('SADD', nodes, me)
local sums = {}
for i = 1, na do
  local k = p .. ':nc:' .. apps[i]
  if counts[i] > 0 then redis.call('HSET', k, me, counts[i])
  else redis.call('HDEL', k, me) end
  local all, s = redis.call('HGETALL', k), 0
  for j = 1, #all, 2 do
    if all[j] ~= me then s = s + (tonumber(all[j + 1]) or 0) end
  end
  sums[i] = s
end
local live = 0
for _, n in ipairs(redis.call('SMEMBERS', nodes)) do
  if redis.call('EXISTS', p .. ':node:' .. n) == 1 then
    live = live + 1
  elseif may_reap and
         redis.call('SET', p .. ':reap:' .. n, me, 'NX', 'PX', 30000) then
    claimed[#claimed + 1] = n
    claimed[#claimed + 1] = claim(n, apps)
    redis.call('DEL', p .. ':reap:' .. n)
  end
end
-- Tokens whose reaper went away before it finished.
for _, t in ipairs(redis.call('SMEMBERS', p .. ':reaping')) do
  if redis.call('SET', p .. ':reap:' .. t, me, 'NX', 'PX', 30000) then
    claimed[#claimed + 1] = string.match(t, '^(.*):%d+$') or t
    claimed[#claimed + 1] = t
  end
end
return {st, live, sums, claimed}
