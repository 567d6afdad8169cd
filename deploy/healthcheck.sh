#!/bin/bash
# lubdub container health check: GET /healthz over bash's /dev/tcp and pass
# on "HTTP/1.x 200". The slim runtime image has bash but no curl, and this
# keeps it that way: no HTTP client (and its libraries) just for a probe.
#
# Usage: lubdub-healthcheck [PATH]. PATH is /healthz (alive) by default;
# /readyz asks for readiness instead (joined to the cluster, not draining),
# as deploy/compose.yaml does. Any other path is refused, so a typo cannot
# turn the check into a probe of some page that always answers 200.
#
# Port: LUBDUB_HEALTH_PORT, else LUBDUB_PORT, else 6001. With TLS
# (LUBDUB_TLS_CERT set) bash cannot speak https, so the check only proves
# that the port accepts connections.
set -u
path=${1:-/healthz}
case "$path" in
    /healthz | /readyz) ;;
    *) echo "usage: lubdub-healthcheck [/healthz|/readyz]" >&2; exit 2 ;;
esac
port=${LUBDUB_HEALTH_PORT:-${LUBDUB_PORT:-6001}}
exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
if [ -n "${LUBDUB_TLS_CERT:-}" ]; then
    exit 0
fi
printf 'GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' "$path" >&3
IFS=' ' read -r -t 5 proto status _ <&3 || exit 1
case "$proto $status" in
    HTTP/1.?" 200") exit 0 ;;
    *) exit 1 ;;
esac
