-- server/redis/lua/dir_rejoin.lua - one chunk of a REJOIN: this node's
-- share replaced by what its directory really has.
--
-- ARGV P node first(0|1) n_s (fs count)*n_s n_m (fm conns info stamp)*n_m,
-- at most SRV_REJOIN_CHUNK fields in all (stamp: as JOIN's, before a
-- member_added). The first chunk moves the node's old share (ns, nm, no)
-- aside under a reap token (P:rp:<tok>:ns|nm|no, listed in P:reaping,
-- locked by P:reap:<tok> for this node, named in P:rjtok:<node>) and drops
-- ni; every chunk then takes its fields out of the old share, applies the
-- difference to the totals (with member events for users who appear or
-- disappear cluster-wide) and writes them into the new share. What is left
-- of the old share once the last chunk ran is what the node no longer
-- has: dir_rejoin_sweep.lua removes it. Totals count the old share and the
-- new one at every step, so a node that dies in the middle leaves a token
-- the reaper finishes (its lock lapses). Returns {subscriptions, channels,
-- members, added, removed, token}. Keys are built here from the share's
-- fields (one Redis, not Redis Cluster).

local P, node, first = ARGV[1], ARGV[2], ARGV[3]
local US = '\31'
local ns, nm, ni = P..':ns:'..node, P..':nm:'..node, P..':ni:'..node
local tk = P..':rjtok:'..node
local tok
if first == '1' then
  tok = node..':'..redis.call('INCR', P..':reapseq')
  for _, k in ipairs({'ns', 'nm', 'no'}) do
    local src = P..':'..k..':'..node
    if redis.call('EXISTS', src) == 1 then
      redis.call('RENAME', src, P..':rp:'..tok..':'..k)
    end
  end
  redis.call('UNLINK', ni)
  redis.call('SADD', P..':reaping', tok)
  redis.call('SET', P..':reap:'..tok, node, 'PX', 30000)
  redis.call('SET', tk, tok)
else
  tok = redis.call('GET', tk) or ''
end
local osh, omh = P..':rp:'..tok..':ns', P..':rp:'..tok..':nm'
local function had(old, new, f)
  local v = 0
  if tok ~= '' then
    v = tonumber(redis.call('HGET', old, f)) or 0
    if v ~= 0 then redis.call('HDEL', old, f) end
  end
  return v + (tonumber(redis.call('HGET', new, f)) or 0)
end
local function cut(f)
  local a = string.find(f, US, 1, true)
  if not a then return nil end
  local app, rest = string.sub(f, 1, a - 1), string.sub(f, a + 1)
  local b = string.find(rest, US, 1, true)
  if not b then return app, rest, nil end
  return app, string.sub(rest, 1, b - 1), string.sub(rest, b + 1)
end
local nsubs, nchan, nmem, added, removed = 0, 0, 0, 0, 0
local i = 4
local n = tonumber(ARGV[i]); i = i + 1
for k = 1, n do
  local f, want = ARGV[i], tonumber(ARGV[i + 1]) or 0; i = i + 2
  local h = had(osh, ns, f)
  local app, ch = cut(f)
  if app and ch and want ~= h then
    local gs = P..':gs:'..app
    if redis.call('HINCRBY', gs, ch, want - h) <= 0 then
      redis.call('HDEL', gs, ch)
    end
  end
  if want > 0 then
    redis.call('HSET', ns, f, want)
    nsubs = nsubs + want; nchan = nchan + 1
  else redis.call('HDEL', ns, f) end
end
n = tonumber(ARGV[i]); i = i + 1
for k = 1, n do
  local f, want, info = ARGV[i], tonumber(ARGV[i + 1]) or 0,
                        ARGV[i + 2]
  local stamp = ARGV[i + 3]
  i = i + 4
  local h = had(omh, nm, f)
  local app, ch, uid = cut(f)
  if app and ch and uid and want ~= h then
    local gm = P..':gm:'..app..':'..ch
    local gi = P..':gi:'..app..':'..ch
    local mchan = P..':m:'..app..':'..ch
    local g = redis.call('HINCRBY', gm, uid, want - h)
    local before = g - (want - h)
    if g <= 0 then redis.call('HDEL', gm, uid) end
    if before > 0 and g <= 0 then
      redis.call('HDEL', gi, uid)
      local s = cseq_remove(P..':gq:'..app, ch, gm)
      redis.call('PUBLISH', mchan, s..'\n-'..#uid..'\n'..uid)
      removed = removed + 1
    elseif before <= 0 and g > 0 then
      redis.call('HSET', gi, uid, info)
      local s = cseq_add(P..':gq:'..app, ch)
      redis.call('PUBLISH', mchan, stamp..s..'\n+'..#uid..'\n'..uid..info)
      added = added + 1
    end
  end
  if want > 0 then
    redis.call('HSET', nm, f, want)
    redis.call('HSET', ni, f, info)
    nmem = nmem + 1
  else redis.call('HDEL', nm, f); redis.call('HDEL', ni, f) end
end
return {nsubs, nchan, nmem, added, removed, tok}
