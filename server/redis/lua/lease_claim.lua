-- server/redis/lua/lease_claim.lua - claim(dead, apps): the prologue of
-- lease_tick.lua and lease_leave.lua (server/redis/redis_lua.c puts it in
-- front of them, a space between).
--
-- Moves a node's share out of the way under a new token, in one step, so
-- that the node (back from a pause) can register afresh while the token is
-- reaped. ARGV[1] = P, ARGV[2] = me (as p and me); apps = the app ids (for
-- P:nc:<app>). Returns the token.
--
-- Keys (P = the prefix, docs/SCALING.md "Node death"): P:nodes,
-- P:node:<id>, P:ns|nm|ni|no:<id>, P:gs:<app>, P:gm:<app>:<ch>,
-- P:gi:<app>:<ch>, P:gq:<app>, P:nc:<app>; the reaper's own: P:reap:<dead>
-- (the election), P:reapseq (INCR), P:reaping (SET of tokens "<dead>:<n>"
-- being reaped), P:rp:<token>:ns|nm|no (the claimed share), P:reap:<token>
-- (who reaps it).
--
-- embed: lines joined by spaces

local p, me = ARGV[1], ARGV[2]
local function claim(dead, apps)
  local tok = dead .. ':' .. redis.call('INCR', p .. ':reapseq')
  for _, k in ipairs({'ns', 'nm', 'no'}) do
    local src = p .. ':' .. k .. ':' .. dead
    if redis.call('EXISTS', src) == 1 then
      redis.call('RENAME', src, p .. ':rp:' .. tok .. ':' .. k)
    end
  end
  redis.call('UNLINK', p .. ':ni:' .. dead)
  redis.call('UNLINK', p .. ':rjtok:' .. dead)
  for _, a in ipairs(apps) do
    redis.call('HDEL', p .. ':nc:' .. a, dead)
  end
  redis.call('SREM', p .. ':nodes', dead)
  redis.call('SADD', p .. ':reaping', tok)
  redis.call('SET', p .. ':reap:' .. tok, me, 'PX', 30000)
  return tok
end
