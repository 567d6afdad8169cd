/*
 * server/redis/redis_online_lua.h - online state and watchlists in Redis
 * (docs/SCALING.md, "Watchlists and online state"), the Lua the
 * directory's scripts (server/redis/redis_scripts.h) and the reaper
 * (server/redis/redis_lease_lua.h) share, as C string literals.
 *
 * Keys, with P the prefix, a the app id and US the byte 0x1f:
 *   P:no:<node>  HASH a US uid -> 1: the users signed in on this node
 *                (the node's online share, claimed and reaped with ns/nm)
 *   P:go:<a>     HASH uid -> nodes the user is signed in on (online > 0)
 *   P:wl:<a>:<uid>  SET the users uid watches (while uid is online)
 *   P:ww:<a>:<uid>  SET the users watching uid (the reverse index)
 *   P:wq:<a>:<uid>  HASH the numbering of uid's watchlist events
 *
 * An edge (P:go's count moving 0 <-> 1) is decided by the script that
 * moves it, which PUBLISHes one pusher_internal:watchlist_events frame per
 * watcher on the watcher's own Redis channel P:<a>:#server-to-user-<w>,
 * as an envelope of kind 5 (hub/cluster/cluster_envelope.h: a script's
 * event, delivered by every node, the deciding one too). Redis's order is
 * every node's.
 */
#ifndef SRV_REDIS_ONLINE_LUA_H
#define SRV_REDIS_ONLINE_LUA_H

/*
 * wl_frame(evs): the Pusher message text of evs = {{name, {uid, ...}},
 * ...}. wl_pub(P, a, origin, w, evs): that frame to watcher w, in an
 * envelope of kind 5 (magic, kind, flags, origin, epoch, seq, app,
 * channel, no exclusion, member seq 0, data), numbered per watcher in
 * P:wq:<a>:<w> (HASH n: the last seq, e: the epoch, Redis's TIME in µs
 * when the count started; dropped when w goes offline, else kept a day
 * after the last event) so that the receiving nodes count what pub/sub
 * lost. wl_online / wl_offline: u's
 * edge to its watchers (offline also drops u's watchlist: only online
 * users watch). wl_set: u's watchlist becomes ids (its own id, repeats
 * and ids that already have maxw watchers skipped: the count of those is
 * returned). wl_state: u's watched users that are online (and, full,
 * those that are not) to u's own channel. wl_down: field "a US u" left
 * a node's share: u's count goes down, offline at 0 (true then).
 */
#define SRV_LUA_WL_PRELUDE                                                   \
    "local wl_US, wl_Z = '\\31', string.char(0)\n"                            \
    "local function wl_frame(evs)\n"                                         \
    "  local parts = {}\n"                                                   \
    "  for i, e in ipairs(evs) do\n"                                         \
    "    local ids = {}\n"                                                   \
    "    for j, u in ipairs(e[2]) do ids[j] = cjson.encode(u) end\n"         \
    "    parts[i] = '{\"name\":\"'..e[1]..'\",\"user_ids\":['..\n"           \
    "               table.concat(ids, ',')..']}'\n"                           \
    "  end\n"                                                                \
    "  local d = '{\"events\":['..table.concat(parts, ',')..']}'\n"          \
    "  return '{\"event\":\"pusher_internal:watchlist_events\",\"data\":'..\n"\
    "         cjson.encode(d)..'}'\n"                                        \
    "end\n"                                                                  \
    "local function wl_u64(x)\n"                                             \
    "  return struct.pack('>I4I4', math.floor(x / 4294967296), x % 4294967296)\n"\
    "end\n"                                                                  \
    "local function wl_pub(P, a, origin, w, evs)\n"                          \
    "  local ch = '#server-to-user-'..w\n"                                   \
    "  local f = wl_frame(evs)\n"                                            \
    "  local q = P..':wq:'..a..':'..w\n"                                     \
    "  local n = redis.call('HINCRBY', q, 'n', 1)\n"                         \
    "  if n == 1 then\n"                                                     \
    "    local t = redis.call('TIME')\n"                                     \
    "    redis.call('HSET', q, 'e', string.format('%.0f',\n"                \
    "                                 t[1] * 1000000 + t[2]))\n"             \
    "  end\n"                                                                \
    "  local ep = tonumber(redis.call('HGET', q, 'e')) or 1\n"               \
    "  redis.call('PEXPIRE', q, 86400000)\n"                                 \
    "  local env = 'LDB1'..struct.pack('>BBH', 5, 0, #origin)..origin..\n"   \
    "    wl_u64(ep)..wl_u64(n)..struct.pack('>H', #a)..a..\n"               \
    "    struct.pack('>H', #ch)..ch..string.rep(wl_Z, 20)..\n"               \
    "    struct.pack('>I4', #f)..f\n"                                        \
    "  redis.call('PUBLISH', P..':'..a..':'..ch, env)\n"                     \
    "end\n"                                                                  \
    "local function wl_online(P, a, origin, u)\n"                            \
    "  for _, w in ipairs(redis.call('SMEMBERS', P..':ww:'..a..':'..u)) do\n"\
    "    wl_pub(P, a, origin, w, {{'online', {u}}})\n"                       \
    "  end\n"                                                                \
    "end\n"                                                                  \
    "local function wl_offline(P, a, origin, u)\n"                           \
    "  for _, w in ipairs(redis.call('SMEMBERS', P..':ww:'..a..':'..u)) do\n"\
    "    wl_pub(P, a, origin, w, {{'offline', {u}}})\n"                      \
    "  end\n"                                                                \
    "  local wl = P..':wl:'..a..':'..u\n"                                    \
    "  for _, x in ipairs(redis.call('SMEMBERS', wl)) do\n"                  \
    "    redis.call('SREM', P..':ww:'..a..':'..x, u)\n"                      \
    "  end\n"                                                                \
    "  redis.call('DEL', wl, P..':wq:'..a..':'..u)\n"                       \
    "end\n"                                                                  \
    "local function wl_set(P, a, u, ids, maxw)\n"                            \
    "  local wl, old, new, skipped = P..':wl:'..a..':'..u, {}, {}, 0\n"      \
    "  for _, x in ipairs(redis.call('SMEMBERS', wl)) do old[x] = true end\n"\
    "  for _, x in ipairs(ids) do\n"                                         \
    "    if x ~= u and x ~= '' and not new[x] then\n"                        \
    "      if old[x] or maxw == 0 or\n"                                      \
    "         redis.call('SCARD', P..':ww:'..a..':'..x) < maxw then\n"       \
    "        new[x] = true\n"                                                \
    "      else skipped = skipped + 1 end\n"                                 \
    "    end\n"                                                              \
    "  end\n"                                                                \
    "  for x in pairs(old) do\n"                                             \
    "    if not new[x] then redis.call('SREM', P..':ww:'..a..':'..x, u) end\n"\
    "  end\n"                                                                \
    "  redis.call('DEL', wl)\n"                                              \
    "  for x in pairs(new) do\n"                                             \
    "    redis.call('SADD', wl, x)\n"                                        \
    "    redis.call('SADD', P..':ww:'..a..':'..x, u)\n"                      \
    "  end\n"                                                                \
    "  return skipped\n"                                                     \
    "end\n"                                                                  \
    "local function wl_state(P, a, origin, u, full)\n"                       \
    "  local on, off = {}, {}\n"                                             \
    "  for _, x in ipairs(redis.call('SMEMBERS', P..':wl:'..a..':'..u)) do\n"\
    "    if redis.call('HEXISTS', P..':go:'..a, x) == 1 then\n"              \
    "      on[#on + 1] = x\n"                                                \
    "    else off[#off + 1] = x end\n"                                       \
    "  end\n"                                                                \
    "  table.sort(on); table.sort(off)\n"                                    \
    "  local evs = {}\n"                                                     \
    "  if #on > 0 then evs[#evs + 1] = {'online', on} end\n"                 \
    "  if full and #off > 0 then evs[#evs + 1] = {'offline', off} end\n"     \
    "  if #evs > 0 then wl_pub(P, a, origin, u, evs) end\n"                  \
    "  return #on\n"                                                         \
    "end\n"                                                                  \
    "local function wl_down(P, origin, f)\n"                                 \
    "  local a, u = string.match(f, '^([^\\31]*)\\31(.*)$')\n"                \
    "  if not a then return false end\n"                                     \
    "  local go = P..':go:'..a\n"                                            \
    "  if redis.call('HINCRBY', go, u, -1) > 0 then return false end\n"      \
    "  redis.call('HDEL', go, u)\n"                                          \
    "  wl_offline(P, a, origin, u)\n"                                        \
    "  return true\n"                                                        \
    "end\n"

/*
 * SIGNIN: ARGV P node app uid first(0|1) replace(0|1) max_watchers
 * full(0|1) n ids... first: the user's first connection on this node (it joins the
 * node's share; its first anywhere is the online edge). replace: the
 * signin carried a watchlist. Then the watched users online now go to the
 * user's channel (every connection of the user gets them; an online event
 * for a user already shown online changes nothing for a client); with
 * full (the resync after a REJOIN) the offline ones too.
 * {edge(0|1), online watched users, ids skipped (max_watchers)}.
 */
#define SRV_LUA_ONLINE_SIGNIN                                                \
    SRV_LUA_WL_PRELUDE                                                       \
    "local P, node, a, u = ARGV[1], ARGV[2], ARGV[3], ARGV[4]\n"             \
    "local first, rep = ARGV[5] == '1', ARGV[6] == '1'\n"                    \
    "local maxw, full = tonumber(ARGV[7]) or 0, ARGV[8] == '1'\n"            \
    "local n = tonumber(ARGV[9]) or 0\n"                                     \
    "local skipped, edge = 0, 0\n"                                           \
    "if rep then\n"                                                          \
    "  local ids = {}\n"                                                     \
    "  for i = 1, n do ids[i] = ARGV[9 + i] end\n"                           \
    "  skipped = wl_set(P, a, u, ids, maxw)\n"                               \
    "end\n"                                                                  \
    "if first and redis.call('HSETNX', P..':no:'..node, a..wl_US..u, 1)\n"   \
    "   == 1 then\n"                                                         \
    "  if redis.call('HINCRBY', P..':go:'..a, u, 1) == 1 then\n"             \
    "    edge = 1\n"                                                         \
    "    wl_online(P, a, node, u)\n"                                         \
    "  end\n"                                                                \
    "end\n"                                                                  \
    "local on = wl_state(P, a, node, u, full)\n"                             \
    "return {edge, on, skipped}\n"

/*
 * SIGNOUT: ARGV P node app uid: the user's last connection on this node
 * ended. Its last anywhere is the offline edge (and its watchlist goes).
 * {edge(0|1)}.
 */
#define SRV_LUA_ONLINE_SIGNOUT                                               \
    SRV_LUA_WL_PRELUDE                                                       \
    "local P, node, a, u = ARGV[1], ARGV[2], ARGV[3], ARGV[4]\n"             \
    "local f = a..wl_US..u\n"                                                \
    "if redis.call('HDEL', P..':no:'..node, f) == 1 then\n"                  \
    "  if wl_down(P, node, f) then return {1} end\n"                         \
    "elseif redis.call('HEXISTS', P..':go:'..a, u) == 0 then\n"              \
    "  wl_offline(P, a, node, u)\n"                                          \
    "end\n"                                                                  \
    "return {0}\n"

/*
 * One chunk of the online REJOIN, sent right after the directory's REJOIN
 * chunks (server/redis/redis_scripts.h: the first of those moved the old share,
 * P:no:<node> included, aside under the token in P:rjtok:<node>): ARGV P
 * node n, then n times (app uid n_ids ids...). Each user takes its field
 * out of the old share (or, not there, counts once more: an online edge
 * when it is the first anywhere), goes into the new share, and gets its
 * watchlist as this node has it, unless that is empty (a connection that
 * signed in without a list here while the list came with another node's
 * signin: Redis's is kept). Then (server/redis/redis_dir.c) each user gets
 * the full state of its watched users through a SIGNIN with full, once
 * its channel is subscribed again: what it was told while Redis was away
 * is corrected. The REJOIN sweep takes the old share's rest
 * (offline edges for users gone everywhere). {users, appeared}.
 */
#define SRV_LUA_ONLINE_REJOIN                                                \
    SRV_LUA_WL_PRELUDE                                                       \
    "local P, node, n = ARGV[1], ARGV[2], tonumber(ARGV[3]) or 0\n"          \
    "local tok = redis.call('GET', P..':rjtok:'..node) or ''\n"              \
    "local old, no = P..':rp:'..tok..':no', P..':no:'..node\n"               \
    "local i, added = 4, 0\n"                                                \
    "for k = 1, n do\n"                                                      \
    "  local a, u, m = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]) or 0\n"   \
    "  local ids = {}\n"                                                     \
    "  for j = 1, m do ids[j] = ARGV[i + 2 + j] end\n"                       \
    "  i = i + 3 + m\n"                                                      \
    "  local f = a..wl_US..u\n"                                              \
    "  local had = (tok ~= '' and redis.call('HDEL', old, f) == 1) or\n"     \
    "              redis.call('HEXISTS', no, f) == 1\n"                      \
    "  redis.call('HSET', no, f, 1)\n"                                       \
    "  if m > 0 then wl_set(P, a, u, ids, 0) end\n"                          \
    "  if not had and redis.call('HINCRBY', P..':go:'..a, u, 1) == 1 then\n" \
    "    added = added + 1\n"                                                \
    "    wl_online(P, a, node, u)\n"                                         \
    "  end\n"                                                                \
    "end\n"                                                                  \
    "return {n, added}\n"

#endif
