-- server/redis/lua/dir_leave.lua - LEAVE: the reverse of dir_join.lua.
-- Runs after dir_wh.lua.
--
-- KEYS as JOIN; ARGV fs ch [uid fm mchan] [delay bound]. Returns
-- {chan_last, member_last, cseq}. A count this node does not hold is not
-- taken from the totals.

local fs, ch = ARGV[1], ARGV[2]
local cl, ml, cseq = 0, 0, 0
local n = redis.call('HINCRBY', KEYS[1], fs, -1)
if n <= 0 then redis.call('HDEL', KEYS[1], fs) end
if n >= 0 then
  local g = redis.call('HINCRBY', KEYS[4], ch, -1)
  if g <= 0 then
    redis.call('HDEL', KEYS[4], ch)
    if g == 0 then cl = 1 end
  end
end
if nargv >= 5 then
  local uid, fm = ARGV[3], ARGV[4]
  local m = redis.call('HINCRBY', KEYS[2], fm, -1)
  if m <= 0 then
    redis.call('HDEL', KEYS[2], fm)
    redis.call('HDEL', KEYS[3], fm)
  end
  if m >= 0 then
    local g = redis.call('HINCRBY', KEYS[5], uid, -1)
    if g <= 0 then
      redis.call('HDEL', KEYS[5], uid)
      if g == 0 then
        redis.call('HDEL', KEYS[6], uid)
        ml = 1; wh_close('member_removed', ch, uid)
        cseq = cseq_remove(KEYS[7], ch, KEYS[5])
        redis.call('PUBLISH', ARGV[5], cseq .. '\n-' .. #uid ..
                   '\n' .. uid)
      end
    end
  end
end
if cl == 1 then wh_close('channel_vacated', ch, nil) end
return {cl, ml, cseq}
