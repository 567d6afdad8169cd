-- server/redis/lua/wh_stream_add.lua - one client event or cache miss
-- appended to its app's webhook stream (server/webhook/webhook_stream_add.c,
-- pipelined).
--
-- KEYS wh (P:wh:<app>, the stream) whn (P:whn:<app>, its counters); ARGV
-- bound (--webhook-stream-max), then the entry's field value pairs. At the
-- bound the entry is refused and counted in whn's "dropped" (the lease
-- holder logs and counts the drops); else XADDed and counted in "queued".
-- Returns 1 added, 0 refused.
--
-- embed: lines joined by spaces

if redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[1]) then
  redis.call('HINCRBY', KEYS[2], 'dropped', 1) return 0 end
redis.call('XADD', KEYS[1], '*', unpack(ARGV, 2))
redis.call('HINCRBY', KEYS[2], 'queued', 1)
return 1
