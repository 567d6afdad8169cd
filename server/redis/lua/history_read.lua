-- server/redis/lua/history_read.lua - what a node needs of a channel's
-- history to resume a client there (recovery, docs/RECOVERY.md), in one
-- round trip (server/redis/redis_hist.c).
--
-- KEYS stream last: the channel's stream (P:history:<app>:<ch>) and its
-- last-ids hash (P:history-last:<app>:<ch>). ARGV entries: '1' for the
-- stream's entries too (a resume), '0' for the last ids only (a fresh
-- start). Returns {entries, last, deleted, time}: entries as XRANGE gives
-- them (empty with '0'), last as HGETALL gives it, deleted an id no older
-- than the newest entry trimmed ('0-0' when nothing was trimmed or there
-- is no stream: Redis 7.0's max-deleted-entry-id counts XDEL only, not
-- MAXLEN, so it is the first entry's id once entries-added passed the
-- length: whatever was trimmed came before it), time as TIME gives it.
--
-- embed: lines joined by spaces

local e = {}
if ARGV[1] == '1' then e = redis.call('XRANGE', KEYS[1], '-', '+') end
local last = redis.call('HGETALL', KEYS[2])
local deleted = '0-0'
if redis.call('EXISTS', KEYS[1]) == 1 then
  local info = redis.call('XINFO', 'STREAM', KEYS[1])
  local f = {}
  for i = 1, #info, 2 do f[info[i]] = info[i + 1] end
  if tonumber(f['entries-added']) > tonumber(f['length']) then
    deleted = f['recorded-first-entry-id']
  end
end
return {e, last, deleted, redis.call('TIME')}
