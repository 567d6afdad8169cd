#!/usr/bin/env bash
# make run-cluster: a local Redis (loopback, no persistence) and three
# lubdub nodes on 127.0.0.1:6001-6003 sharing it, each with the demo page.
# Ctrl-C (or SIGTERM) stops all four, by the PIDs this script started.
# Usage: tools/run-cluster.sh BINARY [extra lubdub flags...]
# Environment: REDIS_PORT (default 6390), BASE_PORT (default 6001).
set -uo pipefail

bin=${1:?usage: $0 BINARY [flags...]}
shift
redis_port=${REDIS_PORT:-6390}
base=${BASE_PORT:-6001}
pids=()

stop() {
    trap - INT TERM EXIT
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null; done
    echo "run-cluster: stopped"
    exit 0
}
trap stop INT TERM EXIT

if redis-cli -h 127.0.0.1 -p "$redis_port" PING >/dev/null 2>&1; then
    echo "run-cluster: something already answers on 127.0.0.1:$redis_port;" \
         "set REDIS_PORT to a free port" >&2
    trap - EXIT
    exit 1
fi
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' \
    --appendonly no --loglevel warning &
pids+=($!)
for _ in $(seq 100); do
    redis-cli -h 127.0.0.1 -p "$redis_port" PING >/dev/null 2>&1 && break
    sleep 0.1
done
for k in 1 2 3; do
    # $! must be lubdub's own PID: its output goes through a process
    # substitution, not a pipe.
    "$bin" --port $((base + k - 1)) --redis "redis://127.0.0.1:$redis_port/0" \
        --node-id "n$k" "$@" > >(sed -u "s/^/[n$k] /") 2>&1 &
    pids+=($!)
done
echo "run-cluster: redis on 127.0.0.1:$redis_port; nodes on" \
     "http://127.0.0.1:$base, :$((base + 1)), :$((base + 2)); Ctrl-C stops all"
wait
