-- server/redis/lua/online_signout.lua - SIGNOUT. Runs after watchlist.lua.
--
-- ARGV P node app uid: the user's last connection on this node ended. Its
-- last anywhere is the offline edge (and its watchlist goes). Returns
-- {edge(0|1)}.

local P, node, a, u = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local f = a..wl_US..u
if redis.call('HDEL', P..':no:'..node, f) == 1 then
  if wl_down(P, node, f) then return {1} end
elseif redis.call('HEXISTS', P..':go:'..a, u) == 0 then
  wl_offline(P, a, node, u)
end
return {0}
