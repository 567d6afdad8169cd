-- server/redis/lua/wh_stream_lease.lua - an app's webhook lease, which says
-- which node consumes its stream (server/webhook/webhook_stream_lease.c,
-- every --node-lease / 3).
--
-- KEYS lease (P:whl:<app>) wh whd whn (the app's stream, delayed edges and
-- counters); ARGV me (this node's id) ms (--node-lease). Renews the lease
-- this node holds (PEXPIRE ms; returns 1), takes a free one (SET PX ms;
-- returns 2) and then PERSISTs wh, whd and whn, which cancels an expiry a
-- retiring holder set (wh_stream_retire.lua), or leaves another node's
-- alone (returns 0).
--
-- embed: lines joined by spaces

local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then redis.call('PEXPIRE', KEYS[1], ARGV[2]) return 1 end
if not v then redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('PERSIST', KEYS[2]) redis.call('PERSIST', KEYS[3])
  redis.call('PERSIST', KEYS[4])
  return 2 end
return 0
