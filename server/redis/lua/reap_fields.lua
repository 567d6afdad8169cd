-- server/redis/lua/reap_fields.lua - take(key, want) and sub(k, f, n): the
-- prologue of the two scripts that empty a claimed share step by step,
-- dir_rejoin_sweep.lua (the end of a REJOIN) and lease_reap.lua (the
-- reaper of a dead node); server/redis/redis_lua.c puts it in front of
-- them, after watchlist.lua.
--
-- Its lines end with newlines, so it stands in front of a script of either
-- embed mode. A prologue runs before the script's own locals exist (and a
-- Redis script may make no global), so what a function needs comes in as
-- an argument: a step's bound is the caller's max - used.
--
-- take(key, want): up to want distinct fields of hash key (HSCAN may
-- repeat a field), as {field, value, ...}; {} when want <= 0. Each HSCAN
-- asks for want (COUNT), so a step's work stays bounded by its max.
-- sub(k, f, n): takes n from field f of hash k, HDELing it when that leaves
-- nothing (a count reaching 0 is never kept); returns what it held before
-- (0 when absent), from which the caller tells an edge (before <= n).

local function take(key, want)
  local out, seen, cur = {}, {}, '0'
  if want <= 0 then return out end
  repeat
    local r = redis.call('HSCAN', key, cur, 'COUNT', want)
    cur = r[1]
    for i = 1, #r[2], 2 do
      local f = r[2][i]
      if not seen[f] and #out < 2 * want then
        seen[f] = true; out[#out + 1] = f; out[#out + 1] = r[2][i + 1]
      end
    end
  until cur == '0' or #out >= 2 * want
  return out
end
local function sub(k, f, n)
  local before = tonumber(redis.call('HGET', k, f)) or 0
  if before > n then redis.call('HINCRBY', k, f, -n)
  else redis.call('HDEL', k, f) end
  return before
end
