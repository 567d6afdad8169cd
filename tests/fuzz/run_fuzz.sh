#!/bin/sh
# Run a libFuzzer target for a fixed time on a scratch copy of its seed
# corpus, so the inputs it discovers never land in the repository.
# Usage: run_fuzz.sh <fuzzer> <corpus-dir> <seconds> [dict]
# Crash reproducers are written to the current directory (crash-*).
set -eu

fuzzer=$1
corpus=$2
seconds=$3
dict=${4:-}

work=$(mktemp -d "${TMPDIR:-/tmp}/lubdub-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT INT TERM
cp -R "$corpus/." "$work/"

set -- -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 \
    -print_final_stats=1
if [ -n "$dict" ]; then
    set -- "$@" -dict="$dict"
fi
"$fuzzer" "$@" "$work"
