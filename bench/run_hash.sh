#!/usr/bin/env bash
# make bench-hash: the table hash on the subscribe path, old against new.
# Runs bench_hash_fnv (the unkeyed FNV-1a the tables had) and bench_hash
# (keyed SipHash-2-4) in turn, ROUNDS times each, then prints the fastest
# of each figure over the rounds and their ratios (bench/bench_hash.c says
# what each figure is, and why the fastest). Last line:
#   hash: hash_new_vs_old=… hash16_new_vs_old=… subscribe_new_vs_old=…
#         lookup_new_vs_old=… flood_old_vs_new=…   (one line)
# Usage: bench/run_hash.sh BUILD_DIR/bench [ROUNDS]
set -euo pipefail

dir=${1:?usage: run_hash.sh BUILD_DIR/bench [ROUNDS]}
rounds=${2:-3}
out=$(mktemp)
trap 'rm -f "$out"' EXIT

for ((i = 0; i < rounds; i++)); do
    for b in bench_hash_fnv bench_hash; do
        "$dir/$b" | tee -a "$out"
    done
done
awk '
function low(v, n,   i, m) {
    m = v[1]
    for (i = 2; i <= n; i++)
        if (v[i] + 0 < m + 0)
            m = v[i]
    return m
}
/^hash: variant=/ {
    split($2, kv, "="); var = kv[2]; n[var]++
    for (f = 3; f <= NF; f++) {
        split($f, kv, "="); vals[var, kv[1], n[var]] = kv[2]
    }
}
END {
    split("hash_ns hash16_ns subscribe_ns lookup_ns flood_ns", names, " ")
    for (k = 1; k <= 5; k++)
        for (var in n) {
            delete v
            for (i = 1; i <= n[var]; i++) v[i] = vals[var, names[k], i]
            m[var, names[k]] = low(v, n[var])
        }
    for (var in n) {
        printf "hash: fastest of %d %s:", n[var], var
        for (k = 1; k <= 5; k++)
            printf " %s=%s", names[k], m[var, names[k]]
        printf "\n"
    }
    printf "hash: hash_new_vs_old=%.2f hash16_new_vs_old=%.2f subscribe_new_vs_old=%.3f lookup_new_vs_old=%.2f flood_old_vs_new=%.1f\n",
        m["keyed", "hash_ns"] / m["fnv", "hash_ns"],
        m["keyed", "hash16_ns"] / m["fnv", "hash16_ns"],
        m["keyed", "subscribe_ns"] / m["fnv", "subscribe_ns"],
        m["keyed", "lookup_ns"] / m["fnv", "lookup_ns"],
        m["fnv", "flood_ns"] / m["keyed", "flood_ns"]
}' "$out"
