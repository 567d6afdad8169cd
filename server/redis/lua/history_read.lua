-- server/redis/lua/history_read.lua - what a node needs of a channel's
-- history to resume a client there (recovery, docs/RECOVERY.md), in one
-- round trip (server/redis/redis_hist.c).
--
-- KEYS stream last: the channel's stream (P:history:<app>:<ch>) and its
-- last-ids hash (P:history-last:<app>:<ch>). ARGV entries: '1' for the
-- stream's entries too (a resume), '0' for the last ids only (a fresh
-- start). Returns {entries, last, deleted, time}: entries as XRANGE gives
-- them (empty with '0'), last as HGETALL gives it, deleted a bound on the
-- newest entry the stream lost ('0-0' when it lost none or there is no
-- stream), time as TIME gives it. The bound: max-deleted-entry-id (XDEL),
-- or, when entries were trimmed (entries-added above length: MAXLEN
-- trims do not move max-deleted-entry-id, Redis 7.0), the first kept
-- entry's id (every trimmed one is older), or the last id when none is
-- kept.
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
  if f['max-deleted-entry-id'] then deleted = f['max-deleted-entry-id'] end
  if f['entries-added'] and f['length'] and
     f['entries-added'] > f['length'] then
    if f['length'] > 0 then deleted = f['recorded-first-entry-id']
    else deleted = f['last-generated-id'] end
  end
end
return {e, last, deleted, redis.call('TIME')}
