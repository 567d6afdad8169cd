# Prometheus for deploy/compose.yaml: Debian bookworm's prometheus package
# (2.42) on the same base as deploy/Dockerfile, so the whole stack builds
# from Debian packages and no image is pulled from a registry. From the
# repository root:
#
#   podman build -f deploy/prometheus.Dockerfile -t lubdub-prometheus deploy
#
# What it runs: prometheus as the package's "prometheus" user, its
# configuration at /etc/prometheus/prometheus.yml (compose.yaml mounts
# deploy/prometheus/prometheus.yml there; the image keeps Debian's default
# otherwise), the time series in /prometheus, the web UI and HTTP API on
# port 9090. --no-install-recommends leaves out the node exporter the
# package recommends: this image watches the hubs, not its host.

FROM debian:bookworm-slim
# The package's classic web UI loads moment-timezone-with-data.min.js; the
# 212 MB of per-zone data files beside it (libjs-moment-timezone's data/)
# are read by nothing here, so dpkg leaves them out.
RUN echo 'path-exclude=/usr/share/javascript/moment-timezone/data/*' \
        >/etc/dpkg/dpkg.cfg.d/lubdub-prometheus \
    && apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       prometheus \
    && apt-get clean && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /prometheus && chown prometheus:prometheus /prometheus
VOLUME /prometheus
WORKDIR /prometheus
USER prometheus
EXPOSE 9090
STOPSIGNAL SIGTERM
# The slim base has bash but no HTTP client: the health check asks
# /-/ready over bash's /dev/tcp, as deploy/healthcheck.sh does for the hub.
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
    CMD ["/bin/bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/9090 && printf 'GET /-/ready HTTP/1.0\\r\\n\\r\\n' >&3 && read -r -t 5 p s _ <&3 && [ \"$s\" = 200 ]"]
ENTRYPOINT ["/usr/bin/prometheus"]
CMD ["--config.file=/etc/prometheus/prometheus.yml", \
     "--storage.tsdb.path=/prometheus", \
     "--web.listen-address=:9090"]
