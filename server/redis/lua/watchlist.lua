-- server/redis/lua/watchlist.lua - online state and watchlists in Redis
-- (docs/SCALING.md, "Watchlists and online state"): the functions the
-- directory's scripts (dir_rejoin_sweep.lua, online_*.lua) and the reaper
-- (lease_reap.lua) share; server/redis/redis_lua.c puts this file in front
-- of them.
--
-- Keys, with P the prefix, a the app id and US the byte 0x1f:
--   P:no:<node>  HASH a US uid -> 1: the users signed in on this node
--                (the node's online share, claimed and reaped with ns/nm)
--   P:go:<a>     HASH uid -> nodes the user is signed in on (online > 0)
--   P:wl:<a>:<uid>  SET the users uid watches (while uid is online)
--   P:ww:<a>:<uid>  SET the users watching uid (the reverse index)
--   P:wq:<a>:<uid>  HASH the numbering of uid's watchlist events
--
-- An edge (P:go's count moving 0 <-> 1) is decided by the script that
-- moves it, which PUBLISHes one pusher_internal:watchlist_events frame per
-- watcher on the watcher's own Redis channel P:<a>:#server-to-user-<w>, as
-- an envelope of kind 5 (hub/cluster/cluster_envelope.h: a script's event,
-- delivered by every node, the deciding one too). Redis's order is every
-- node's.
--
-- wl_frame(evs): the Pusher message text of evs = {{name, {uid, ...}},
-- ...}. wl_pub(P, a, origin, w, evs): that frame to watcher w, in an
-- envelope of kind 5 (magic, kind, flags, origin, epoch, seq, app,
-- channel, no exclusion, member seq 0, data), numbered per watcher in
-- P:wq:<a>:<w> (HASH n: the last seq, e: the epoch, Redis's TIME in us
-- when the count started; dropped when w goes offline, else kept a day
-- after the last event) so that the receiving nodes count what pub/sub
-- lost. wl_online / wl_offline: u's edge to its watchers (offline also
-- drops u's watchlist: only online users watch). wl_set: u's watchlist
-- becomes ids (its own id, repeats and ids that already have maxw watchers
-- skipped: the count of those is returned). wl_state: u's watched users
-- that are online (and, full, those that are not) to u's own channel.
-- wl_down: field "a US u" left a node's share: u's count goes down,
-- offline at 0 (true then).

local wl_US, wl_Z = '\31', string.char(0)
local function wl_frame(evs)
  local parts = {}
  for i, e in ipairs(evs) do
    local ids = {}
    for j, u in ipairs(e[2]) do ids[j] = cjson.encode(u) end
    parts[i] = '{"name":"'..e[1]..'","user_ids":['..
               table.concat(ids, ',')..']}'
  end
  local d = '{"events":['..table.concat(parts, ',')..']}'
  return '{"event":"pusher_internal:watchlist_events","data":'..
         cjson.encode(d)..'}'
end
local function wl_u64(x)
  return struct.pack('>I4I4', math.floor(x / 4294967296), x % 4294967296)
end
local function wl_pub(P, a, origin, w, evs)
  local ch = '#server-to-user-'..w
  local f = wl_frame(evs)
  local q = P..':wq:'..a..':'..w
  local n = redis.call('HINCRBY', q, 'n', 1)
  if n == 1 then
    local t = redis.call('TIME')
    redis.call('HSET', q, 'e', string.format('%.0f',
                                 t[1] * 1000000 + t[2]))
  end
  local ep = tonumber(redis.call('HGET', q, 'e')) or 1
  redis.call('PEXPIRE', q, 86400000)
  local env = 'LDB1'..struct.pack('>BBH', 5, 0, #origin)..origin..
    wl_u64(ep)..wl_u64(n)..struct.pack('>H', #a)..a..
    struct.pack('>H', #ch)..ch..string.rep(wl_Z, 20)..
    struct.pack('>I4', #f)..f
  redis.call('PUBLISH', P..':'..a..':'..ch, env)
end
local function wl_online(P, a, origin, u)
  for _, w in ipairs(redis.call('SMEMBERS', P..':ww:'..a..':'..u)) do
    wl_pub(P, a, origin, w, {{'online', {u}}})
  end
end
local function wl_offline(P, a, origin, u)
  for _, w in ipairs(redis.call('SMEMBERS', P..':ww:'..a..':'..u)) do
    wl_pub(P, a, origin, w, {{'offline', {u}}})
  end
  local wl = P..':wl:'..a..':'..u
  for _, x in ipairs(redis.call('SMEMBERS', wl)) do
    redis.call('SREM', P..':ww:'..a..':'..x, u)
  end
  redis.call('DEL', wl, P..':wq:'..a..':'..u)
end
local function wl_set(P, a, u, ids, maxw)
  local wl, old, new, skipped = P..':wl:'..a..':'..u, {}, {}, 0
  for _, x in ipairs(redis.call('SMEMBERS', wl)) do old[x] = true end
  for _, x in ipairs(ids) do
    if x ~= u and x ~= '' and not new[x] then
      if old[x] or maxw == 0 or
         redis.call('SCARD', P..':ww:'..a..':'..x) < maxw then
        new[x] = true
      else skipped = skipped + 1 end
    end
  end
  for x in pairs(old) do
    if not new[x] then redis.call('SREM', P..':ww:'..a..':'..x, u) end
  end
  redis.call('DEL', wl)
  for x in pairs(new) do
    redis.call('SADD', wl, x)
    redis.call('SADD', P..':ww:'..a..':'..x, u)
  end
  return skipped
end
local function wl_state(P, a, origin, u, full)
  local on, off = {}, {}
  for _, x in ipairs(redis.call('SMEMBERS', P..':wl:'..a..':'..u)) do
    if redis.call('HEXISTS', P..':go:'..a, x) == 1 then
      on[#on + 1] = x
    else off[#off + 1] = x end
  end
  table.sort(on); table.sort(off)
  local evs = {}
  if #on > 0 then evs[#evs + 1] = {'online', on} end
  if full and #off > 0 then evs[#evs + 1] = {'offline', off} end
  if #evs > 0 then wl_pub(P, a, origin, u, evs) end
  return #on
end
local function wl_down(P, origin, f)
  local a, u = string.match(f, '^([^\31]*)\31(.*)$')
  if not a then return false end
  local go = P..':go:'..a
  if redis.call('HINCRBY', go, u, -1) > 0 then return false end
  redis.call('HDEL', go, u)
  wl_offline(P, a, origin, u)
  return true
end
