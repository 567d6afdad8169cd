-- server/redis/lua/dir_rejoin_sweep.lua - the end of a REJOIN, one step.
-- Runs after watchlist.lua and reap_fields.lua (drain, sub, drop_member).
--
-- ARGV P node token max. Removes at most max fields of what is left of the
-- old share (members first, then online users, then subscriptions) from
-- the totals, with a member event for each user gone cluster-wide and an
-- offline edge for each user gone everywhere; when nothing is left the
-- token, its lock and P:rjtok go. Returns {"more"|"done"|"lost", removed};
-- "lost": the lock lapsed and another node's reaper has the token now (it
-- finishes the job).

local P, node, tok, max = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local lock = P..':reap:'..tok
if redis.call('GET', lock) ~= node then return {'lost', 0} end
redis.call('PEXPIRE', lock, 30000)
local nmk, nsk = P..':rp:'..tok..':nm', P..':rp:'..tok..':ns'
local removed, used = 0, 0
used = used + drain(nmk, max - used, function(f, v)
  local a, c, u = string.match(f, '^([^\31]*)\31([^\31]*)\31(.*)$')
  local n = tonumber(v) or 0
  if a and n > 0 and drop_member(P, a, c, u, n) then
    removed = removed + 1
  end
end)
local nok = P..':rp:'..tok..':no'
used = used + drain(nok, max - used, function(f) wl_down(P, node, f) end)
used = used + drain(nsk, max - used, function(f, v)
  local a, c = string.match(f, '^([^\31]*)\31(.*)$')
  local n = tonumber(v) or 0
  if a and n > 0 then sub(P..':gs:'..a, c, n) end
end)
if redis.call('EXISTS', nmk, nsk, nok) > 0 then
  return {'more', removed}
end
redis.call('SREM', P..':reaping', tok)
redis.call('DEL', lock)
if redis.call('GET', P..':rjtok:'..node) == tok then
  redis.call('DEL', P..':rjtok:'..node)
end
return {'done', removed}
