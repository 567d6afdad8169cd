-- server/redis/lua/wh_stream_retire.lua - an app this node no longer has
-- (a reload removed it or disabled its webhooks) let go
-- (server/webhook/webhook_stream_lease.c, tried each renewal period until
-- done).
--
-- KEYS lease (P:whl:<app>) wh whd whn; ARGV me ttl (ms). Unless another
-- node holds the lease (it has the app, or lets it go itself; returns 0),
-- drops this node's lease and sets wh, whd and whn to expire in ttl ms
-- (PEXPIRE; a node that takes the lease later PERSISTs them). Returns 1.
--
-- embed: lines joined by spaces

local v = redis.call('GET', KEYS[1])
if v and v ~= ARGV[1] then return 0 end
if v then redis.call('DEL', KEYS[1]) end
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('PEXPIRE', KEYS[3], ARGV[2])
redis.call('PEXPIRE', KEYS[4], ARGV[2])
return 1
