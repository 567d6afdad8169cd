-- server/redis/lua/wh_stream_release.lua - a webhook lease given up at a
-- clean stop (server/webhook/webhook_stream.c frees the stream consumer):
-- the app's stream is handed over at once, not after the lease's time.
--
-- KEYS lease (P:whl:<app>); ARGV me (this node's id). Deletes the lease
-- only while this node holds it; another holder's is left alone. Returns 0.
--
-- embed: lines joined by spaces

if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1]) end return 0
