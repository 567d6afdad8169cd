-- server/redis/lua/history_read.lua - what a node needs of a channel's
-- history to resume a client there (recovery, docs/RECOVERY.md), or for
-- one page of the HTTP API's GET .../events (docs/PROTOCOL.md 6.2), in
-- one round trip (server/redis/redis_hist.c).
--
-- KEYS stream last: the channel's stream (P:history:<app>:<ch>) and its
-- last-ids hash (P:history-last:<app>:<ch>). ARGV entries [count page a b]:
-- entries '1' for the stream's entries too, '0' for the last ids only (a
-- fresh start). Without page (recovery): every entry. With count (a page,
-- at most count entries, scanned 500 at a time): page 'a' the entries
-- after the last entry whose o is a and s at or under b (anchored 1 when
-- there is one, else from the start); 't' the entries whose t is at or
-- after a; 'w' the same with a = Redis's clock less the ttl a, plus 1.
-- Returns {entries, last, deleted, time, first, anchored}: entries as
-- XRANGE gives them, last as HGETALL gives it, deleted a bound on the
-- newest entry the stream lost ('0-0' when it lost none or there is no
-- stream), time as TIME gives it, first the stream's first entry's id
-- ('0-0' when none). The bound: max-deleted-entry-id (XDEL), or, when
-- entries were trimmed (entries-added above length: MAXLEN trims do not
-- move max-deleted-entry-id, Redis 7.0), the first kept entry's id (every
-- trimmed one is older), or the last id when none is kept.
--
-- embed: lines joined by spaces

local time = redis.call('TIME')
local e = {}
local anchored = 0
local n = tonumber(ARGV[2] or '0') or 0
local page = ARGV[3] or ''
local function field(f, name)
  for i = 1, #f, 2 do if f[i] == name then return f[i + 1] end end
  return nil
end
local function scan(keep)
  local from = '-'
  while true do
    local c = redis.call('XRANGE', KEYS[1], from, '+', 'COUNT', 500)
    for i = 1, #c do if not keep(c[i]) then return end end
    if #c < 500 then return end
    from = '(' .. c[#c][1]
  end
end
if ARGV[1] == '1' and page == 'a' then
  local seq = tonumber(ARGV[5])
  local start = '-'
  scan(function(x)
    if field(x[2], 'o') ~= ARGV[4] then return true end
    if (tonumber(field(x[2], 's')) or 0) > seq then return false end
    anchored = 1
    start = '(' .. x[1]
    return true
  end)
  e = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', n)
elseif ARGV[1] == '1' and (page == 't' or page == 'w') then
  local since = tonumber(ARGV[4])
  if page == 'w' then
    since = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
            - since + 1
  end
  scan(function(x)
    if (tonumber(field(x[2], 't')) or 0) >= since then e[#e + 1] = x end
    return #e < n
  end)
elseif ARGV[1] == '1' then
  e = redis.call('XRANGE', KEYS[1], '-', '+')
end
local last = redis.call('HGETALL', KEYS[2])
local deleted = '0-0'
local first = '0-0'
if redis.call('EXISTS', KEYS[1]) == 1 then
  local info = redis.call('XINFO', 'STREAM', KEYS[1])
  local f = {}
  for i = 1, #info, 2 do f[info[i]] = info[i + 1] end
  if f['max-deleted-entry-id'] then deleted = f['max-deleted-entry-id'] end
  if f['length'] and f['length'] > 0 and f['recorded-first-entry-id'] then
    first = f['recorded-first-entry-id']
  end
  if f['entries-added'] and f['length'] and
     f['entries-added'] > f['length'] then
    if f['length'] > 0 then deleted = f['recorded-first-entry-id']
    else deleted = f['last-generated-id'] end
  end
end
return {e, last, deleted, time, first, anchored}
