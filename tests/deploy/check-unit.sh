#!/usr/bin/env bash
# Check deploy/lubdub.service without a running systemd: `systemd-analyze
# verify` on a copy whose ExecStart names this build's binary (verify needs
# the command to exist), then the offline security score, which must stay
# at or below 2.0 ("OK") so a later edit cannot quietly loosen the sandbox.
# Usage: check-unit.sh UNIT BINARY. Exit 77 (skipped) without systemd-analyze.
set -euo pipefail
unit=$1 binary=$2
command -v systemd-analyze >/dev/null || { echo "no systemd-analyze: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s|/usr/local/bin/lubdub|$binary|g" "$unit" >"$tmp/lubdub.service"
systemd-analyze verify "$tmp/lubdub.service"
systemd-analyze security --offline=yes --threshold=20 --no-pager \
    "$tmp/lubdub.service" | tail -1
echo "lubdub.service: verify and security passed"
