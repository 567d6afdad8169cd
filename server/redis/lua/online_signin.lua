-- server/redis/lua/online_signin.lua - SIGNIN. Runs after watchlist.lua.
--
-- ARGV P node app uid first(0|1) replace(0|1) max_watchers full(0|1) n
-- ids... first: the user's first connection on this node (it joins the
-- node's share; its first anywhere is the online edge). replace: the
-- signin carried a watchlist. Then the watched users online now go to the
-- user's channel (every connection of the user gets them; an online event
-- for a user already shown online changes nothing for a client); with
-- full (the resync after a REJOIN) the offline ones too. Returns
-- {edge(0|1), online watched users, ids skipped (max_watchers)}.

local P, node, a, u = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local first, rep = ARGV[5] == '1', ARGV[6] == '1'
local maxw, full = tonumber(ARGV[7]) or 0, ARGV[8] == '1'
local n = tonumber(ARGV[9]) or 0
local skipped, edge = 0, 0
if rep then
  local ids = {}
  for i = 1, n do ids[i] = ARGV[9 + i] end
  skipped = wl_set(P, a, u, ids, maxw)
end
if first and redis.call('HSETNX', P..':no:'..node, a..wl_US..u, 1)
   == 1 then
  if redis.call('HINCRBY', P..':go:'..a, u, 1) == 1 then
    edge = 1
    wl_online(P, a, node, u)
  end
end
local on = wl_state(P, a, node, u, full)
return {edge, on, skipped}
