-- server/redis/lua/dir_info.lua - INFO: a channel's cluster-wide counts.
--
-- KEYS gs gm; ARGV ch. Returns {subscriptions, users}.

return {tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0'),
        redis.call('HLEN', KEYS[2])}
