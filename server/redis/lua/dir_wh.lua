-- server/redis/lua/dir_wh.lua - durable webhooks (docs/WEBHOOKS.md, "In a
-- cluster"): the prologue of dir_join.lua and dir_leave.lua
-- (server/redis/redis_lua.c puts it in front of them).
--
-- With three more keys, KEYS[8] P:wh:<app> (the stream), KEYS[9]
-- P:whd:<app> (ZSET of closing edges waiting out the delay, score = due ms
-- by Redis TIME, member "v" US ch or "r" US ch US uid) and KEYS[10]
-- P:whn:<app> (HASH of counters queued / cancelled / dropped), the last two
-- ARGV are the delay in ms and the stream's bound; nargv is the count of
-- the other ARGV. An opening edge (wh_open) ZREMs its pending closing one
-- (cancelled: nothing queued) or XADDs itself; a closing edge (wh_close)
-- waits in the ZSET (XADD at once with no delay). Redis 7 replicates a
-- script's effects, so TIME may be used.

local wh, nargv, whd, whmax = #KEYS >= 10, #ARGV, 0, 0
if wh then
  whd = tonumber(ARGV[nargv - 1]) or 0
  whmax = tonumber(ARGV[nargv]) or 0
  nargv = nargv - 2
end
local function wh_add(name, ch, uid)
  if redis.call('XLEN', KEYS[8]) >= whmax then
    redis.call('HINCRBY', KEYS[10], 'dropped', 1); return
  end
  if uid then
    redis.call('XADD', KEYS[8], '*', 'name', name, 'channel', ch,
               'user_id', uid)
  else redis.call('XADD', KEYS[8], '*', 'name', name, 'channel', ch)
  end
  redis.call('HINCRBY', KEYS[10], 'queued', 1)
end
local function wh_key(ch, uid)
  if uid then return 'r\31' .. ch .. '\31' .. uid end
  return 'v\31' .. ch
end
local function wh_open(name, ch, uid)
  if not wh then return end
  if redis.call('ZREM', KEYS[9], wh_key(ch, uid)) == 1 then
    redis.call('HINCRBY', KEYS[10], 'cancelled', 1); return
  end
  wh_add(name, ch, uid)
end
local function wh_close(name, ch, uid)
  if not wh then return end
  if whd <= 0 then wh_add(name, ch, uid); return end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('ZADD', KEYS[9], now + whd, wh_key(ch, uid))
end
