-- server/redis/lua/dir_members.lua - MEMBERS: a presence channel's member
-- list and its sequence.
--
-- KEYS gq gi; ARGV ch. Returns {cseq, uid, info, ...}.

local r = {tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')}
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all do r[#r + 1] = all[i] end
return r
