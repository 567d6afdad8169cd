-- server/redis/lua/history_read.lua - what a node needs of a channel's
-- history to resume a client there (recovery, docs/RECOVERY.md), in one
-- round trip (server/redis/redis_hist.c).
--
-- KEYS stream last: the channel's stream (P:history:<app>:<ch>) and its
-- last-ids hash (P:history-last:<app>:<ch>). ARGV entries: '1' for the
-- stream's entries too (a resume), '0' for the last ids only (a fresh
-- start). Returns {entries, last, deleted, time}: entries as XRANGE gives
-- them (empty with '0'), last as HGETALL gives it, deleted the stream's
-- max-deleted-entry-id ('0-0' when nothing was trimmed or there is no
-- stream), time as TIME gives it.
--
-- embed: lines joined by spaces

local e = {}
if ARGV[1] == '1' then e = redis.call('XRANGE', KEYS[1], '-', '+') end
local last = redis.call('HGETALL', KEYS[2])
local deleted = '0-0'
if redis.call('EXISTS', KEYS[1]) == 1 then
  local info = redis.call('XINFO', 'STREAM', KEYS[1])
  for i = 1, #info, 2 do
    if info[i] == 'max-deleted-entry-id' then deleted = info[i + 1] end
  end
end
return {e, last, deleted, redis.call('TIME')}
