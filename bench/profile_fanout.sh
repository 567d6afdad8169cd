#!/bin/bash
# Profiles one lubdub under one bench/loadgen scenario (docs/BENCHMARKS.md,
# "Where the cycles go"): the hub pinned to CPU 0, the loader to CPU 1, as in
# make bench-fanout. After the loader's setup, perf record -g samples the
# hub for PERF_SECONDS, then perf stat counts its syscalls (all, and
# sendto/recvfrom/epoll/close/accept) for as long again; the loader's JSON gives
# the deliveries of its window.
#
#   bench/profile_fanout.sh HUB OUTDIR NAME -- LOADGEN ARGS...
#   e.g. bench/profile_fanout.sh build/lubdub /tmp/prof s3-100-1k -- \
#        --subs 100 --size 1024 --window 32 --publish ws
#
# Writes OUTDIR/NAME.perf.data, NAME.report.txt (top symbols, no children), NAME.dso.txt,
# NAME.stat.txt and NAME.loader.json. Use a build with symbols
# (RelWithDebInfo, -fno-omit-frame-pointer) for readable call chains.
set -eu
HUB=$1 OUT=$2 NAME=$3
shift 3
[ "$1" = "--" ] && shift
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
PERF_SECONDS=${PERF_SECONDS:-4}
PORT=${PORT:-$((7600 + $$ % 300))}
CFG=$OUT/$NAME.hub-config.json
mkdir -p "$OUT"
printf '%s\n' '{"apps":[{"id":"app-id","key":"app-key","secret":"app-secret","client_event_rate":0}]}' >"$CFG"
taskset -c 0 "$HUB" --config "$CFG" --port "$PORT" --loops 1 --bind 127.0.0.1 \
    --log-level warn >"$OUT/$NAME.hub.log" 2>&1 &
HPID=$!
trap 'kill $HPID 2>/dev/null || true' EXIT
i=0
while ! (exec 3<>/dev/tcp/127.0.0.1/$PORT) 2>/dev/null; do
    i=$((i + 1)); [ $i -gt 100 ] && { echo "hub did not start" >&2; exit 1; }
    sleep 0.1
done
SETUP_SECONDS=${SETUP_SECONDS:-3}
DUR=$((PERF_SECONDS * 2 + SETUP_SECONDS + 2))
taskset -c 1 "$BUILD/bench/loadgen" --port "$PORT" --server-pid "$HPID" \
    --src-ips 8 --warmup 1 --duration "$DUR" --quiet "$@" \
    >"$OUT/$NAME.loader.json" 2>"$OUT/$NAME.loader.err" &
LPID=$!
# Setup (connects, subscriptions; SETUP_SECONDS, 3 by default) and the
# warm-up.
sleep $((SETUP_SECONDS + 1))
perf record -q -g -p "$HPID" -o "$OUT/$NAME.perf.data" -- sleep "$PERF_SECONDS" \
    >/dev/null 2>&1
perf stat -p "$HPID" -e 'raw_syscalls:sys_enter,syscalls:sys_enter_sendto,syscalls:sys_enter_recvfrom,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_ctl,syscalls:sys_enter_close,syscalls:sys_enter_accept4,syscalls:sys_enter_getsockopt,syscalls:sys_enter_setsockopt' \
    -o "$OUT/$NAME.stat.txt" -- sleep "$PERF_SECONDS" >/dev/null 2>&1 || true
wait $LPID || true
perf report -i "$OUT/$NAME.perf.data" --no-children --sort sym --stdio \
    -g none 2>/dev/null | grep -v '^#' | grep '%' | head -40 >"$OUT/$NAME.report.txt"
perf report -i "$OUT/$NAME.perf.data" --no-children --sort dso --stdio \
    -g none 2>/dev/null | grep -v '^#' | grep '%' | head -12 >"$OUT/$NAME.dso.txt"
echo "$NAME: $(cat "$OUT/$NAME.loader.json" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("deliveries/s %.0f server_cpu_s %.2f window %.1f s churn/s %.0f" % (d["deliveries_per_s"], d["server_cpu_s"], d["window_s"], d["churn_per_s"]))')"
