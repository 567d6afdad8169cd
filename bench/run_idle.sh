#!/usr/bin/env bash
# S1 idle memory (make bench-idle): as many idle Pusher sessions as one
# process may hold here (the fd hard limit is 20,000), then user-space RSS
# per session = (RSS with N sessions - RSS with none) / N.
# Last line: idle: sessions=N rss_per_session_bytes=B
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${LUBDUB_BINARY:-$here/build/lubdub}
client=${IDLE_CLIENT:-$here/build/bench/idle_client}
n=${IDLE_SESSIONS:-19800}
loops=${IDLE_LOOPS:-2}

tmp=$(mktemp -d)
hub_pid= ; cli_pid=
cleanup() {
    [ -n "$cli_pid" ] && kill "$cli_pid" 2>/dev/null || true
    [ -n "$hub_pid" ] && kill -KILL "$hub_pid" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status"; }
stat_sessions() {
    curl -s "http://127.0.0.1:$port/stats" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["totals"]["sessions"])'
}

"$bin" --port 0 --loops "$loops" --log-level warn --ping-interval 1h ${IDLE_ARGS:-} \
    >"$tmp/out" 2>"$tmp/err" &
hub_pid=$!
for _ in $(seq 100); do
    grep -q listening "$tmp/out" 2>/dev/null && break
    sleep 0.1
done
port=$(grep -o '[0-9]*$' "$tmp/out")
stat_sessions >/dev/null
base=$(rss_kib "$hub_pid")

# IDLE_CLIENT_ARGS=--deflate: the sessions offer permessage-deflate
# (make bench-compression runs both; the client's line says how many
# negotiated it).
coproc CLI { exec "$client" ${IDLE_CLIENT_ARGS:-} 127.0.0.1 "$port" "$n"; }
cli_pid=$CLI_PID
read -r -t 300 line <&"${CLI[0]}" || { echo "idle: client did not get ready" >&2; exit 1; }
echo "client: $line"
ready=$(echo "$line" | awk '{print $2}')
for _ in $(seq 300); do
    [ "$(stat_sessions)" -ge "$ready" ] && break
    sleep 0.1
done
sessions=$(stat_sessions)
# Idle means after the connect burst has settled: the hub gives freed
# handshake buffers back once no handshake came for a second (server/base/memtrim.h).
sleep "${IDLE_SETTLE_S:-3}"
full=$(rss_kib "$hub_pid")
per=$(( (full - base) * 1024 / sessions ))
echo "hub RSS: ${base} KiB with 0 sessions, ${full} KiB with ${sessions} sessions (${loops} loops)"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
# Sessions that asked to resume (IDLE_CLIENT_ARGS=--resume, make
# bench-recovery); a hub before recovery has no such key.
curl -s "http://127.0.0.1:$port/stats" | python3 -c '
import json, sys
t = json.load(sys.stdin).get("totals", {})
if "resume_sessions" in t:
    print("stats: resume_sessions=%d" % t["resume_sessions"])' || true
echo "idle: sessions=${sessions} rss_per_session_bytes=${per}"
