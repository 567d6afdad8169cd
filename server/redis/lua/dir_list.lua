-- server/redis/lua/dir_list.lua - LIST: the occupied channels of an app.
--
-- KEYS gs; ARGV gm-key-prefix channel-prefix user_count(0|1). Returns
-- {ch, users, ch, users, ...} for the occupied channels (users 0 unless
-- user_count is 1).

local all = redis.call('HGETALL', KEYS[1])
local r, pfx = {}, ARGV[2]
for i = 1, #all, 2 do
  local ch = all[i]
  if (tonumber(all[i + 1]) or 0) > 0 and
     (pfx == '' or string.sub(ch, 1, #pfx) == pfx) then
    r[#r + 1] = ch
    if ARGV[3] == '1' then
      r[#r + 1] = redis.call('HLEN', ARGV[1] .. ch)
    else r[#r + 1] = 0 end
  end
end
return r
