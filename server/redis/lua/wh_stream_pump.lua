-- server/redis/lua/wh_stream_pump.lua - the delayed closing edges that are
-- due moved to the app's webhook stream (server/webhook/webhook_stream_lease.c:
-- the lease holder, every round).
--
-- KEYS whd (P:whd:<app>, a ZSET: member "r" US ch US uid for
-- member_removed or "v" US ch for channel_vacated, score the due time in
-- ms of Redis's clock; the directory's scripts add them) wh (the stream)
-- whn (its counters); ARGV bound (--webhook-stream-max) limit (edges moved
-- at most). Each due edge, oldest first, leaves the ZSET; it is XADDed
-- (counted in whn's "queued") unless the stream holds bound entries, when
-- it is counted in "dropped". Returns the number XADDed.
--
-- embed: lines joined by spaces

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now,
  'LIMIT', 0, tonumber(ARGV[2]))
local n = 0
for _, m in ipairs(due) do
  local kind, rest = string.sub(m, 1, 1), string.sub(m, 3)
  local c, u = rest, nil
  if kind == 'r' then
    local a = string.find(rest, '\31', 1, true)
    if a then c = string.sub(rest, 1, a - 1); u = string.sub(rest, a + 1)
    end
  end
  redis.call('ZREM', KEYS[1], m)
  if redis.call('XLEN', KEYS[2]) >= tonumber(ARGV[1]) then
    redis.call('HINCRBY', KEYS[3], 'dropped', 1)
  else
    if u then redis.call('XADD', KEYS[2], '*', 'name', 'member_removed',
      'channel', c, 'user_id', u)
    else redis.call('XADD', KEYS[2], '*', 'name', 'channel_vacated',
      'channel', c) end
    redis.call('HINCRBY', KEYS[3], 'queued', 1)
    n = n + 1
  end
end
return n
