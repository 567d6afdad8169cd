-- server/redis/lua/wh_stream_consumers.lua - the consumers of other nodes
-- dropped from a webhook group once they hold nothing
-- (server/webhook/webhook_stream_trim.c: the lease holder, each trim
-- pass). A consumer is a node id (XREADGROUP and XAUTOCLAIM make it); a
-- node that stops or dies leaves its consumer behind, and node ids change
-- at every restart by default, so without this a group would keep one
-- consumer per node that ever held the lease. Taking the lease claims
-- every pending entry (XAUTOCLAIM), after which the others hold none.
--
-- KEYS wh (P:wh:<app>); ARGV group me max. Deletes at most max consumers
-- of the group other than me whose pending list is empty (one that still
-- holds entries is kept: DELCONSUMER would lose them); in one script, so
-- no read lands between the look and the delete. Returns how many.
--
-- embed: lines joined by spaces

local n, max = 0, tonumber(ARGV[3]) or 0
for _, c in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local name, pending = nil, -1
  for i = 1, #c - 1, 2 do
    if c[i] == 'name' then name = c[i + 1]
    elseif c[i] == 'pending' then pending = c[i + 1] end
  end
  if n < max and name and name ~= ARGV[2] and pending == 0 then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], name)
    n = n + 1
  end
end
return n
