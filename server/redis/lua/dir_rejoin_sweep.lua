-- server/redis/lua/dir_rejoin_sweep.lua - the end of a REJOIN, one step.
-- Runs after watchlist.lua and reap_fields.lua (take, sub).
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
local f = take(nmk, max - used)
for i = 1, #f, 2 do
  local a, c, u = string.match(f[i], '^([^\31]*)\31([^\31]*)\31(.*)$')
  local n = tonumber(f[i + 1]) or 0
  if a and n > 0 then
    local before = sub(P..':gm:'..a..':'..c, u, n)
    if before > 0 and before <= n then
      redis.call('HDEL', P..':gi:'..a..':'..c, u)
      local cs = redis.call('HINCRBY', P..':gq:'..a, c, 1)
      redis.call('PUBLISH', P..':m:'..a..':'..c, cs..'\n-'..#u..'\n'..u)
      removed = removed + 1
    end
  end
  redis.call('HDEL', nmk, f[i])
  used = used + 1
end
local nok = P..':rp:'..tok..':no'
f = take(nok, max - used)
for i = 1, #f, 2 do
  wl_down(P, node, f[i])
  redis.call('HDEL', nok, f[i])
  used = used + 1
end
f = take(nsk, max - used)
for i = 1, #f, 2 do
  local a, c = string.match(f[i], '^([^\31]*)\31(.*)$')
  local n = tonumber(f[i + 1]) or 0
  if a and n > 0 then sub(P..':gs:'..a, c, n) end
  redis.call('HDEL', nsk, f[i])
  used = used + 1
end
if redis.call('EXISTS', nmk, nsk, nok) > 0 then
  return {'more', removed}
end
redis.call('SREM', P..':reaping', tok)
redis.call('DEL', lock)
if redis.call('GET', P..':rjtok:'..node) == tok then
  redis.call('DEL', P..':rjtok:'..node)
end
return {'done', removed}
