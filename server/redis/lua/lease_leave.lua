-- server/redis/lua/lease_leave.lua - a clean stop (server/redis/redis_lease.c):
-- this node's own share claimed, its lease dropped. Runs after
-- lease_claim.lua.
--
-- ARGV: P, me, n apps, app ids. Returns the token.
--
-- Keys (P = the prefix, docs/SCALING.md "Node death"): P:nodes,
-- P:node:<id>, P:ns|nm|ni|no:<id>, P:gs:<app>, P:gm:<app>:<ch>,
-- P:gi:<app>:<ch>, P:gq:<app>, P:nc:<app>; the reaper's own: P:reap:<dead>
-- (the election), P:reapseq (INCR), P:reaping (SET of tokens "<dead>:<n>"
-- being reaped), P:rp:<token>:ns|nm|no (the claimed share), P:reap:<token>
-- (who reaps it).
--
-- embed: lines joined by spaces

local apps = {}
for i = 1, tonumber(ARGV[3]) do apps[i] = ARGV[3 + i] end
redis.call('DEL', p .. ':node:' .. me)
return claim(me, apps)
