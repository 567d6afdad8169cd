# Redis for deploy/compose.yaml: Debian bookworm's redis-server on the same
# base as deploy/Dockerfile, so the whole stack builds from Debian packages
# and no image is pulled from a registry. From the repository root:
#
#   podman build -f deploy/redis.Dockerfile -t lubdub-redis .
#
# What it runs: redis-server as user "redis" (uid and gid 999, made before
# the package would pick one, so that Kubernetes' runAsNonRoot can check a
# number: deploy/k8s/redis.yaml), listening on
# every interface of the container (the compose network only; compose.yaml
# publishes no Redis port), AOF persistence in /data so that webhook streams
# and history survive a Redis restart (docs/WEBHOOKS.md, docs/SCALING.md).
#
# The password: REDIS_PASSWORD_FILE names a file holding it (a compose or
# Kubernetes secret); the nodes read the same file with
# LUBDUB_REDIS_PASSWORD_FILE. It reaches redis-server as a config line on
# its standard input ("redis-server -"), never on a command line, which
# every local user could read. It is written unquoted into that line, so
# keep it free of spaces, quotes and backslashes (openssl rand -hex 24).
# Without REDIS_PASSWORD_FILE, Redis asks for none.

FROM debian:bookworm-slim
# The package's postinst (adduser --system) keeps an existing system user.
RUN groupadd --system --gid 999 redis \
    && useradd --system --uid 999 --gid redis --no-create-home \
       --home-dir /var/lib/redis --shell /usr/sbin/nologin redis \
    && apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       redis-server \
    && apt-get clean && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /data && chown redis:redis /data
VOLUME /data
WORKDIR /data
USER 999:999
EXPOSE 6379
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=5s --retries=3 \
    CMD ["/bin/sh", "-c", "if [ -n \"${REDIS_PASSWORD_FILE:-}\" ]; then REDISCLI_AUTH=$(cat \"$REDIS_PASSWORD_FILE\"); export REDISCLI_AUTH; fi; redis-cli ping | grep -q PONG"]
# exec: redis-server becomes PID 1 and gets the SIGTERM itself (it saves
# and exits). The here-document is its configuration on standard input.
CMD ["/bin/sh", "-c", "set -eu\npass=\nif [ -n \"${REDIS_PASSWORD_FILE:-}\" ]; then pass=$(cat \"$REDIS_PASSWORD_FILE\"); fi\nexec redis-server - <<EOF\nbind * -::*\nprotected-mode no\nport 6379\ndir /data\nappendonly yes\nsave \"\"\n${pass:+requirepass $pass}\nEOF\n"]
