-- server/redis/lua/dir_join.lua - JOIN: a subscription (and, on a presence
-- channel, a member) of this node counted cluster-wide (docs/SCALING.md,
-- "The cluster-wide directory"). Runs after dir_wh.lua.
--
-- KEYS ns nm ni gs gm gi gq [wh whd whn]; ARGV fs ch max [uid info fm
-- mchan stamp] [delay bound]. stamp ("" without a cluster key) goes before
-- the member_added it publishes (hub_cluster_member_stamp). Returns
-- {-1, 0, 0} when the presence channel already has max (> 0) members and
-- uid is not one; else {chan_first, member_first, cseq, uid, info, ...}
-- (presence: the member list after the join).

local fs, ch = ARGV[1], ARGV[2]
local pres = nargv >= 7
if pres then
  local maxm = tonumber(ARGV[3]) or 0
  if maxm > 0 and redis.call('HEXISTS', KEYS[5], ARGV[4]) == 0 and
     redis.call('HLEN', KEYS[5]) >= maxm then return {-1, 0, 0} end
end
local cf, mf, cseq = 0, 0, 0
redis.call('HINCRBY', KEYS[1], fs, 1)
if redis.call('HINCRBY', KEYS[4], ch, 1) == 1 then
  cf = 1; wh_open('channel_occupied', ch, nil)
end
if not pres then return {cf, 0, 0} end
local uid, info, fm = ARGV[4], ARGV[5], ARGV[6]
if redis.call('HINCRBY', KEYS[2], fm, 1) == 1 then
  redis.call('HSET', KEYS[3], fm, info)
end
if redis.call('HINCRBY', KEYS[5], uid, 1) == 1 then
  mf = 1; wh_open('member_added', ch, uid)
  redis.call('HSET', KEYS[6], uid, info)
  cseq = cseq_add(KEYS[7], ch)
  redis.call('PUBLISH', ARGV[7], (ARGV[8] or '') .. cseq .. '\n+' ..
             #uid .. '\n' .. uid .. info)
else
  cseq = tonumber(redis.call('HGET', KEYS[7], ch) or '0')
end
local r = {cf, mf, cseq}
local all = redis.call('HGETALL', KEYS[6])
for i = 1, #all do r[#r + 1] = all[i] end
return r
