-- server/redis/lua/cache_scan.lua - one SCAN step over the cache channels'
-- keys (hub/cluster/cluster_cache.h) with each key's value and remaining life, in
-- one round trip (server/redis/redis_pub.c loads them on every connect).
--
-- ARGV cursor pattern. Returns {cursor, key, value, pttl, ...}: keys that
-- vanished or hold no string in between are left out.
--
-- embed: lines joined by spaces

local s = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', 200)
local r = {s[1]}
for _, k in ipairs(s[2]) do
  local v = redis.pcall('GET', k)
  local t = redis.call('PTTL', k)
  if type(v) == 'string' and t > 0 then
    r[#r + 1] = k; r[#r + 1] = v; r[#r + 1] = t
  end
end
return r
