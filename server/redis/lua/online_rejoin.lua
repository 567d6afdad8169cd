-- server/redis/lua/online_rejoin.lua - one chunk of the online REJOIN.
-- Runs after watchlist.lua.
--
-- Sent right after the directory's REJOIN chunks (dir_rejoin.lua: the
-- first of those moved the old share, P:no:<node> included, aside under
-- the token in P:rjtok:<node>): ARGV P node n, then n times (app uid n_ids
-- ids...). Each user takes its field out of the old share (or, not there,
-- counts once more: an online edge when it is the first anywhere), goes
-- into the new share, and gets its watchlist as this node has it, unless
-- that is empty (a connection that signed in without a list here while
-- the list came with another node's signin: Redis's is kept). Then
-- (server/redis/redis_dir_rejoin.c) each user gets the full state of its
-- watched users through a SIGNIN with full, once its channel is subscribed
-- again: what it was told while Redis was away is corrected. The REJOIN
-- sweep takes the old share's rest (offline edges for users gone
-- everywhere). Returns {users, appeared}.

local P, node, n = ARGV[1], ARGV[2], tonumber(ARGV[3]) or 0
local tok = redis.call('GET', P..':rjtok:'..node) or ''
local old, no = P..':rp:'..tok..':no', P..':no:'..node
local i, added = 4, 0
for k = 1, n do
  local a, u, m = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]) or 0
  local ids = {}
  for j = 1, m do ids[j] = ARGV[i + 2 + j] end
  i = i + 3 + m
  local f = a..wl_US..u
  local had = (tok ~= '' and redis.call('HDEL', old, f) == 1) or
              redis.call('HEXISTS', no, f) == 1
  redis.call('HSET', no, f, 1)
  if m > 0 then wl_set(P, a, u, ids, 0) end
  if not had and redis.call('HINCRBY', P..':go:'..a, u, 1) == 1 then
    added = added + 1
    wl_online(P, a, node, u)
  end
end
return {n, added}
