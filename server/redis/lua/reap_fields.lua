-- server/redis/lua/reap_fields.lua - take, drain, sub and drop_member:
-- the prologue of the two scripts that empty a claimed share step by step,
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
-- drain(key, want, fn): those fields, each given to fn(field, value) and
-- then HDELed from key; returns how many (the caller's used grows by it).
-- sub(k, f, n): takes n from field f of hash k, HDELing it when that leaves
-- nothing (a count reaching 0 is never kept); returns what it held before
-- (0 when absent), from which the caller tells an edge (before <= n).
-- drop_member(P, a, c, u, n): takes a claimed share's n connections of
-- user u off P:gm:<a>:<c>; when that was all of them (u is gone from the
-- channel cluster-wide) drops u's P:gi info, numbers the event in P:gq:<a>
-- and PUBLISHes member_removed on P:m:<a>:<c>, and returns true.

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
local function drain(key, want, fn)
  local f = take(key, want)
  for i = 1, #f, 2 do
    fn(f[i], f[i + 1])
    redis.call('HDEL', key, f[i])
  end
  return #f / 2
end
local function sub(k, f, n)
  local before = tonumber(redis.call('HGET', k, f)) or 0
  if before > n then redis.call('HINCRBY', k, f, -n)
  else redis.call('HDEL', k, f) end
  return before
end
local function drop_member(P, a, c, u, n)
  local before = sub(P..':gm:'..a..':'..c, u, n)
  if before > 0 and before <= n then
    redis.call('HDEL', P..':gi:'..a..':'..c, u)
    local cs = cseq_remove(P..':gq:'..a, c, P..':gm:'..a..':'..c)
    redis.call('PUBLISH', P..':m:'..a..':'..c, cs..'\n-'..#u..'\n'..u)
    return true
  end
  return false
end
