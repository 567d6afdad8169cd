-- server/redis/lua/cseq.lua - cseq_add and cseq_remove: a presence
-- channel's member sequence (P:gq:<app>, field channel), stepped by every
-- script that moves a member's total (dir_join.lua, dir_leave.lua,
-- dir_rejoin.lua, and reap_fields.lua's drop_member for the reaper and the
-- rejoin sweep); server/redis/redis_lua.c puts it in front of them. Its
-- lines end with newlines, so it stands in front of a script of either
-- embed mode.
--
-- The field lives while the channel has members (P:gm:<app>:<channel>
-- exists): the last member_removed (cseq_remove) deletes it, so P:gq:<app>
-- holds one field per presence channel with members, not one per channel
-- ever used. A view on a node (hub/cluster/cluster_view.c) may outlive the
-- channel's life (a local subscriber back before its UNSUB ran) and takes
-- only a list newer than what it applied, so the next life must go on
-- above every number the last one used: field "#" (no channel name holds
-- '#') keeps the highest cseq of a life that ended, and the first
-- member_added of a life (cseq_add finds no field) starts at "#" + 1.
--
-- cseq_add(gq, ch): the cseq of a member_added. cseq_remove(gq, ch, gm):
-- the cseq of a member_removed, the field dropped (and "#" raised) when gm
-- is empty after it.

local function cseq_add(gq, ch)
  local s = redis.call('HINCRBY', gq, ch, 1)
  if s == 1 then
    local hw = tonumber(redis.call('HGET', gq, '#')) or 0
    if hw > 0 then s = redis.call('HINCRBY', gq, ch, hw) end
  end
  return s
end
local function cseq_remove(gq, ch, gm)
  local s = redis.call('HINCRBY', gq, ch, 1)
  if redis.call('EXISTS', gm) == 0 then
    if s > (tonumber(redis.call('HGET', gq, '#')) or 0) then
      redis.call('HSET', gq, '#', s)
    end
    redis.call('HDEL', gq, ch)
  end
  return s
end
