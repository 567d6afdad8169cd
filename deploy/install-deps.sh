#!/usr/bin/env bash
# Install what lubdub needs from Debian's apt (and, for tests, npm), skipping
# what is already there. Usage: deploy/install-deps.sh build|test|bench|container|cluster
# (cluster: build plus redis-server and redis-sentinel, for make run-cluster
# and bench-cluster)
# (container: what tests/container needs to build and run the image without
# a registry or a Docker engine; test includes it).
# Idempotent and quiet when nothing is missing; safe under CI (no stdin).
set -euo pipefail

profile=${1:-build}
here=$(cd "$(dirname "$0")/.." && pwd)

# libcurl4-openssl-dev and libsqlite3-dev: webhook delivery and its store.
# libwslay-dev (and its libwslay1): the read bypass's frame parser.
# libsodium-dev (and its libsodium23): the tables' keyed hash (hub/base/hash.h).
# zlib1g-dev: permessage-deflate (hub/wire/deflate.c).
build_pkgs=(cmake make gcc libc6-dev pkg-config libwebsockets-dev libev-dev libjansson-dev
            libssl-dev libhiredis-dev libcurl4-openssl-dev libsqlite3-dev libwslay-dev
            libsodium-dev zlib1g-dev)
# libtsan2: gcc's ThreadSanitizer runtime (make test-tsan); faketime: the
# wall-clock jump test (tests/integration/clock.test.js) preloads it.
# python3-yaml: tests/deploy/k8s_lint.py reads deploy/k8s/ and compose.yaml.
test_pkgs=(libcmocka-dev clang libclang-rt-14-dev iproute2 nftables
           iptables chromium prometheus curl openssl procps libtsan2
           faketime libfaketime sslscan testssl.sh universal-ctags python3
           redis-server redis-sentinel strace python3-yaml)
# redis-server (with redis-tools' redis-cli): the cluster tests start
# their own (tests/integration/lib/redis.js); redis-sentinel: the Sentinel
# tests start three (lib/sentinel.js); openssl (in test_pkgs) makes the
# Redis TLS tests' CA and certificates (lib/tls_certs.js).
cluster_pkgs=(redis-server redis-sentinel)
bench_pkgs=(util-linux libdeflate-dev)
# podman-compose: tests/container/compose.test.js runs deploy/compose.yaml;
# golang-github-containernetworking-plugin-dnsname: name resolution on
# podman's CNI networks (the compose services and the played Kubernetes
# pods find each other by name); catatonit: the pause binary of the pods
# `podman kube play` makes (tests/container/k8s.test.js).
container_pkgs=(podman runc debootstrap podman-compose
                golang-github-containernetworking-plugin-dnsname catatonit)

case "$profile" in
    build) want=("${build_pkgs[@]}") ;;
    test) want=("${build_pkgs[@]}" "${test_pkgs[@]}" "${container_pkgs[@]}") ;;
    bench) want=("${build_pkgs[@]}" "${test_pkgs[@]}" "${bench_pkgs[@]}") ;;
    container) want=("${container_pkgs[@]}") ;;
    cluster) want=("${build_pkgs[@]}" "${cluster_pkgs[@]}") ;;
    *) echo "usage: $0 build|test|bench|container|cluster" >&2; exit 2 ;;
esac
if ! command -v node >/dev/null 2>&1 && [ "$profile" != build ] &&
   [ "$profile" != container ] && [ "$profile" != cluster ]; then
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
    # Wait for another apt (a parallel job, unattended-upgrades) rather than
    # failing at once on its lock.
    lock=(-o DPkg::Lock::Timeout=600)
    $sudo apt-get "${lock[@]}" update -qq
    $sudo apt-get "${lock[@]}" install -y -qq --no-install-recommends \
        "${missing[@]}" >/dev/null
fi

# Test clients come from npm, pinned by the lockfiles under tests/.
if [ "$profile" != build ] && [ "$profile" != container ] &&
   [ "$profile" != cluster ]; then
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
