#!/usr/bin/env bash
# Install what lubdub needs from Debian's apt (and, for tests, npm), skipping
# what is already there. Usage: deploy/install-deps.sh build|test|bench
# Idempotent and quiet when nothing is missing; safe under CI (no stdin).
set -euo pipefail

profile=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)

build_pkgs=(cmake make gcc pkg-config libwebsockets-dev libjansson-dev
            libssl-dev)
test_pkgs=(libcmocka-dev clang libclang-rt-14-dev iproute2 nftables
           iptables chromium prometheus curl openssl procps)
bench_pkgs=(util-linux)

case "$profile" in
    build) want=("${build_pkgs[@]}") ;;
    test) want=("${build_pkgs[@]}" "${test_pkgs[@]}") ;;
    bench) want=("${build_pkgs[@]}" "${test_pkgs[@]}" "${bench_pkgs[@]}") ;;
    *) echo "usage: $0 build|test|bench" >&2; exit 2 ;;
esac
if ! command -v node >/dev/null 2>&1 && [ "$profile" != build ]; then
    want+=(nodejs npm)
fi

missing=()
for p in "${want[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed'; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -gt 0 ]; then
    echo "install-deps: installing ${missing[*]}"
    sudo=
    [ "$(id -u)" -eq 0 ] || sudo=sudo
    export DEBIAN_FRONTEND=noninteractive
    $sudo apt-get update -qq
    $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Test clients come from npm, pinned by the lockfiles under tests/.
if [ "$profile" != build ]; then
    for dir in tests/integration; do
        [ -f "$here/$dir/package-lock.json" ] || continue
        if [ ! -d "$here/$dir/node_modules" ] ||
           [ "$here/$dir/package-lock.json" -nt "$here/$dir/node_modules" ]; then
            echo "install-deps: npm ci in $dir"
            (cd "$here/$dir" && npm ci --no-audit --no-fund --loglevel=error)
            touch "$here/$dir/node_modules"
        fi
    done
fi
