#!/usr/bin/env python3
"""tests/deploy/k8s_lint.py: checks deploy/k8s/ where `podman kube play`
cannot (tests/container/k8s.test.js plays the rest), and deploy/compose.yaml
where it needs no container engine.

Played by tests/container/k8s.test.js (container lane, root): configmap.yaml,
secret.yaml and the Deployments of deployment.yaml and redis.yaml.
Linted here (deploy label, normal lane): service.yaml, redis.yaml's Service,
servicemonitor.yaml, kustomization.yaml, and the Deployment fields podman
ignores: readinessProbe, lifecycle.preStop, terminationGracePeriodSeconds
against drain_timeout and close_timeout, runAsNonRoot, the securityContext;
also that every name one manifest uses another defines (ConfigMap key,
Secret keys behind each *_file, ports, selectors, the Redis Service), and
that the configuration in the ConfigMap (and compose's) passes this build's
`lubdub --check-config`.

Then it breaks copies of the manifests one way at a time (a grace period
shorter than the drain, a writable root, a liveness probe on /readyz, ...)
and expects each to be caught, so that a check cannot quietly pass.

Usage: k8s_lint.py REPO_ROOT [LUBDUB_BINARY]. Exit 0 when clean, 1 with one
line per problem. Needs python3-yaml (Debian); without the binary the
--check-config step is skipped.
"""
import copy
import json
import os
import re
import subprocess
import sys
import tempfile

import yaml

# After the drain and the close handshakes, the webhook sender keeps
# sending for up to 2 s (docs/OPERATIONS.md, "Webhooks"); and a process
# needs a moment to exit on a loaded node.
WEBHOOK_FLUSH_S = 2
SLACK_S = 3
PLAYED = ["configmap.yaml", "secret.yaml", "deployment.yaml (Deployment)",
          "redis.yaml (Deployment)"]
LINTED = ["service.yaml", "redis.yaml (Service)", "servicemonitor.yaml",
          "kustomization.yaml", "deployment.yaml: readinessProbe, preStop, "
          "terminationGracePeriodSeconds, runAsNonRoot, securityContext",
          "compose.yaml"]


def seconds(text):
    """A lubdub duration ("10s", "500ms", "2m", "1h", a bare number of
    seconds) in seconds."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)?", str(text).strip())
    if not m:
        raise ValueError(f"not a duration: {text!r}")
    n = float(m.group(1))
    return n * {"ms": 0.001, "s": 1, None: 1, "m": 60, "h": 3600}[m.group(2)]


def load(k8s_dir):
    """{file name: [documents]} for every .yaml in deploy/k8s."""
    out = {}
    for name in sorted(os.listdir(k8s_dir)):
        if name.endswith(".yaml"):
            with open(os.path.join(k8s_dir, name), encoding="utf-8") as f:
                out[name] = [d for d in yaml.safe_load_all(f) if d]
    return out


def find(files, kind, name):
    for docs in files.values():
        for d in docs:
            if d.get("kind") == kind and d.get("metadata", {}).get("name") == name:
                return d
    return None


def subset(small, big):
    return all(big.get(k) == v for k, v in (small or {}).items())


def pod_spec(dep):
    return dep["spec"]["template"]["spec"]


def volume_of(spec, mount_path):
    """The pod volume mounted at mount_path (or above it) in the first
    container, with the mount's path."""
    c = spec["containers"][0]
    best = None
    for m in c.get("volumeMounts", []):
        mp = m["mountPath"].rstrip("/")
        if mount_path == mp or mount_path.startswith(mp + "/"):
            if best is None or len(mp) > len(best[1]):
                best = (m, mp)
    if best is None:
        return None, None
    for v in spec.get("volumes", []):
        if v["name"] == best[0]["name"]:
            return v, best[1]
    return None, best[1]


def secret_keys(secret):
    return set((secret.get("stringData") or {}).keys()) | set((secret.get("data") or {}).keys())


def container_port(c, port):
    """A probe's or Service's port (a number or a container port's name)
    as a number, or None."""
    if isinstance(port, int):
        return port
    for p in c.get("ports", []):
        if p.get("name") == port:
            return p["containerPort"]
    return None


def check_kustomization(files, errs):
    k = files.get("kustomization.yaml")
    if not k:
        errs.append("kustomization.yaml: missing")
        return
    res = k[0].get("resources", [])
    want = sorted(n for n in files if n != "kustomization.yaml")
    if sorted(res) != want:
        errs.append(f"kustomization.yaml: resources {sorted(res)} != the files {want}")


def check_labels(files, errs):
    for name, docs in files.items():
        for d in docs:
            if d.get("kind") == "Kustomization":
                continue
            if "app.kubernetes.io/name" not in d.get("metadata", {}).get("labels", {}):
                errs.append(f"{name}: {d.get('kind')} has no app.kubernetes.io/name label")


def lubdub_config(files, errs):
    cm = find(files, "ConfigMap", "lubdub-config")
    if not cm or "lubdub.json" not in cm.get("data", {}):
        errs.append("configmap.yaml: no ConfigMap lubdub-config with lubdub.json")
        return None
    try:
        return json.loads(cm["data"]["lubdub.json"])
    except ValueError as e:
        errs.append(f"configmap.yaml: lubdub.json is not JSON: {e}")
        return None


def secret_files(cfg):
    """Every secret file the configuration names: (where, path)."""
    out = [(f"apps[{i}].secret_file", a["secret_file"])
           for i, a in enumerate(cfg.get("apps", [])) if "secret_file" in a]
    for i, a in enumerate(cfg.get("apps", [])):
        for j, k in enumerate(a.get("keys", [])):
            if "secret_file" in k:
                out.append((f"apps[{i}].keys[{j}].secret_file", k["secret_file"]))
    out += [(k, v) for k, v in cfg.items() if k.endswith("_file") and isinstance(v, str)]
    return out


def check_deployment(files, cfg, errs):
    dep = find(files, "Deployment", "lubdub")
    if not dep:
        errs.append("deployment.yaml: no Deployment lubdub")
        return
    where = "deployment.yaml"
    spec = pod_spec(dep)
    c = spec["containers"][0]
    if not subset(dep["spec"]["selector"].get("matchLabels"), dep["spec"]["template"]["metadata"]["labels"]):
        errs.append(f"{where}: selector does not match the pod template's labels")
    env = {e["name"]: e for e in c.get("env", [])}

    # The node id comes from the pod name (downward API).
    ref = env.get("LUBDUB_NODE_ID", {}).get("valueFrom", {}).get("fieldRef", {})
    if ref.get("fieldPath") != "metadata.name":
        errs.append(f"{where}: LUBDUB_NODE_ID is not the pod name (fieldRef metadata.name)")

    # The config file: LUBDUB_CONFIG names the ConfigMap's key where it is mounted.
    path = env.get("LUBDUB_CONFIG", {}).get("value", "")
    vol, mp = volume_of(spec, path)
    if not vol or vol.get("configMap", {}).get("name") != "lubdub-config" or \
            path != f"{mp}/lubdub.json":
        errs.append(f"{where}: LUBDUB_CONFIG {path!r} is not lubdub-config's lubdub.json where it is mounted")

    # Ports: the config's, named ws and metrics.
    port = cfg.get("port", 6001)
    if container_port(c, "ws") != port:
        errs.append(f"{where}: container port ws is not the config's port {port}")
    if container_port(c, "metrics") != cfg.get("metrics_port"):
        errs.append(f"{where}: container port metrics is not the config's metrics_port")

    # Probes: ready on /readyz, alive on /healthz, on the hub's port.
    rp = c.get("readinessProbe", {}).get("httpGet", {})
    if rp.get("path") != "/readyz" or container_port(c, rp.get("port")) != port:
        errs.append(f"{where}: readinessProbe is not httpGet /readyz on port {port}")
    lp = c.get("livenessProbe", {})
    if "httpGet" in lp:
        ok = lp["httpGet"].get("path") == "/healthz" and container_port(c, lp["httpGet"].get("port")) == port
    else:
        cmd = lp.get("exec", {}).get("command", [])
        ok = bool(cmd) and cmd[0].endswith("lubdub-healthcheck") and cmd[1:] in ([], ["/healthz"])
    if not ok:
        errs.append(f"{where}: livenessProbe does not ask /healthz (httpGet, or lubdub-healthcheck /healthz)")

    # Stopping: preStop, then the drain, within the grace period.
    pre = c.get("lifecycle", {}).get("preStop", {})
    pre_s = None
    if "sleep" in pre:
        pre_s = float(pre["sleep"].get("seconds", 0))
    else:
        cmd = pre.get("exec", {}).get("command", [])
        if len(cmd) == 2 and cmd[0].endswith("sleep"):
            pre_s = seconds(cmd[1])
    if not pre_s:
        errs.append(f"{where}: no preStop sleep (endpoints must drop the pod before SIGTERM)")
        pre_s = 0
    grace = spec.get("terminationGracePeriodSeconds", 30)
    drain = seconds(cfg.get("drain_timeout", "10s"))
    close = seconds(cfg.get("close_timeout", "2s"))
    need = pre_s + drain + close + WEBHOOK_FLUSH_S + SLACK_S
    if grace < need:
        errs.append(f"{where}: terminationGracePeriodSeconds {grace} < preStop {pre_s:g} + drain_timeout "
                    f"{drain:g} + close_timeout {close:g} + webhooks {WEBHOOK_FLUSH_S} + slack {SLACK_S} = {need:g}")

    # Security: non-root, read-only root, nothing to escalate to.
    psc = spec.get("securityContext", {})
    csc = c.get("securityContext", {})
    if not (csc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True):
        errs.append(f"{where}: runAsNonRoot is not true")
    uid = csc.get("runAsUser", psc.get("runAsUser"))
    if not isinstance(uid, int) or uid == 0:
        errs.append(f"{where}: runAsUser is not a non-zero uid (runAsNonRoot needs a number)")
    if csc.get("readOnlyRootFilesystem") is not True:
        errs.append(f"{where}: readOnlyRootFilesystem is not true")
    if csc.get("allowPrivilegeEscalation") is not False:
        errs.append(f"{where}: allowPrivilegeEscalation is not false")
    if "ALL" not in csc.get("capabilities", {}).get("drop", []):
        errs.append(f"{where}: capabilities do not drop ALL")

    # What the hub writes lies on a writable volume, not the root.
    for wpath in [cfg.get("state_dir") or "/var/lib/lubdub", "/tmp"]:
        v, _ = volume_of(spec, wpath)
        if not v or not ("emptyDir" in v or "persistentVolumeClaim" in v):
            errs.append(f"{where}: {wpath} is not on an emptyDir or a volume claim")

    # Every secret file is a key of the mounted Secret.
    for what, fpath in secret_files(cfg):
        v, mp = volume_of(spec, fpath)
        sec = find(files, "Secret", (v or {}).get("secret", {}).get("secretName"))
        if not sec or os.path.dirname(fpath) != mp or os.path.basename(fpath) not in secret_keys(sec):
            errs.append(f"{where}: {what} {fpath!r} is not a key of a Secret mounted at its directory")
        elif (v["secret"].get("optional") is not False):
            errs.append(f"{where}: secret volume {v['name']} lacks optional: false (podman 4.3 kube play crashes)")


def check_service(files, errs):
    dep = find(files, "Deployment", "lubdub")
    svc = find(files, "Service", "lubdub")
    if not dep or not svc:
        errs.append("service.yaml: no Service lubdub")
        return None
    c = pod_spec(dep)["containers"][0]
    if not subset(svc["spec"].get("selector"), dep["spec"]["template"]["metadata"]["labels"]):
        errs.append("service.yaml: selector does not match the lubdub pods")
    for p in svc["spec"].get("ports", []):
        if container_port(c, p.get("targetPort", p["port"])) is None:
            errs.append(f"service.yaml: port {p.get('name')} targets {p.get('targetPort')!r}, not a container port")
    return svc


def check_servicemonitor(files, cfg, svc, errs):
    sm = find(files, "ServiceMonitor", "lubdub")
    if not sm:
        errs.append("servicemonitor.yaml: no ServiceMonitor lubdub")
        return
    if sm.get("apiVersion") != "monitoring.coreos.com/v1":
        errs.append("servicemonitor.yaml: apiVersion is not monitoring.coreos.com/v1")
    if svc and not subset(sm["spec"]["selector"].get("matchLabels"), svc["metadata"].get("labels", {})):
        errs.append("servicemonitor.yaml: selector does not match the Service's labels")
    names = {p.get("name"): p for p in (svc or {}).get("spec", {}).get("ports", [])}
    for ep in sm["spec"].get("endpoints", []):
        if ep.get("port") not in names:
            errs.append(f"servicemonitor.yaml: endpoint port {ep.get('port')!r} is not a Service port")
        if ep.get("path", "/metrics") != "/metrics":
            errs.append("servicemonitor.yaml: path is not /metrics")
        if cfg.get("metrics_token_file") or cfg.get("metrics_token"):
            cred = ep.get("authorization", {}).get("credentials", {})
            sec = find(files, "Secret", cred.get("name"))
            want = os.path.basename(cfg.get("metrics_token_file", ""))
            if not sec or cred.get("key") != want or want not in secret_keys(sec):
                errs.append(f"servicemonitor.yaml: authorization does not carry the metrics token (Secret key {want!r})")


def check_redis(files, cfg, errs):
    url = cfg.get("redis")
    if not url:
        return
    m = re.match(r"rediss?://(?:[^@/]*@)?([^:/]+)(?::(\d+))?", url)
    host, port = m.group(1), int(m.group(2) or 6379)
    svc = find(files, "Service", host)
    dep = find(files, "Deployment", host)
    if not svc or not dep:
        errs.append(f"redis.yaml: the config's Redis {host!r} is not a Service and Deployment here")
        return
    c = pod_spec(dep)["containers"][0]
    if not subset(svc["spec"].get("selector"), dep["spec"]["template"]["metadata"]["labels"]):
        errs.append("redis.yaml: the Service does not select the Redis pod")
    if not any(p["port"] == port and container_port(c, p.get("targetPort", port)) == 6379
               for p in svc["spec"]["ports"]):
        errs.append(f"redis.yaml: the Service has no port {port} to the Redis container's 6379")
    pw = {e["name"]: e.get("value") for e in c.get("env", [])}.get("REDIS_PASSWORD_FILE")
    if os.path.basename(pw or "") != os.path.basename(cfg.get("redis_password_file", "")):
        errs.append("redis.yaml: REDIS_PASSWORD_FILE is not the Secret key the nodes read")
    csc = c.get("securityContext", {})
    if not isinstance(csc.get("runAsUser"), int) or csc.get("readOnlyRootFilesystem") is not True:
        errs.append("redis.yaml: Redis does not run as a numeric non-root user on a read-only root")


def check_compose(root, errs):
    """deploy/compose.yaml: three nodes with distinct ids and host ports,
    the Prometheus targets are those nodes' metrics port, health on /readyz,
    the secret files are there."""
    where = "compose.yaml"
    with open(os.path.join(root, "deploy", "compose.yaml"), encoding="utf-8") as f:
        comp = yaml.safe_load(f)
    with open(os.path.join(root, "deploy", "compose", "lubdub.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    nodes = {n: s for n, s in comp["services"].items() if n.startswith("lubdub")}
    ids = [s["command"][s["command"].index("--node-id") + 1] for s in nodes.values()]
    if len(nodes) != 3 or len(set(ids)) != 3:
        errs.append(f"{where}: not three nodes with distinct --node-id: {ids}")
    # "${PUBLISH_ADDR:-127.0.0.1}:${NODE1_PORT:-6001}:6001", with the
    # defaults compose would use.
    hostports = [re.sub(r"\$\{\w+:-([^}]*)\}", r"\1", s["ports"][0]).split(":")[1]
                 for s in nodes.values()]
    if len(set(hostports)) != 3:
        errs.append(f"{where}: the nodes do not publish distinct host ports: {hostports}")
    for n, s in nodes.items():
        if s.get("healthcheck", {}).get("test", [])[-1:] != ["/readyz"]:
            errs.append(f"{where}: {n}'s health check is not /readyz")
        if s.get("read_only") is not True:
            errs.append(f"{where}: {n} is not read_only")
    with open(os.path.join(root, "deploy", "prometheus", "prometheus.yml"), encoding="utf-8") as f:
        prom = yaml.safe_load(f)
    job = [j for j in prom["scrape_configs"] if j["job_name"] == "lubdub"][0]
    targets = sorted(t for sc in job["static_configs"] for t in sc["targets"])
    want = sorted(f"{n}:{cfg['metrics_port']}" for n in nodes)
    if targets != want:
        errs.append(f"prometheus.yml: targets {targets} != the nodes' metrics ports {want}")
    tok = os.path.basename(job.get("authorization", {}).get("credentials_file", ""))
    if tok != os.path.basename(cfg.get("metrics_token_file", "")):
        errs.append("prometheus.yml: the scrape does not carry the nodes' metrics token file")
    for name, sec in comp.get("secrets", {}).items():
        if not os.path.isfile(os.path.join(root, "deploy", sec["file"])):
            errs.append(f"{where}: secret {name}: no file {sec['file']}")
    return cfg


def check_config(binary, cfg, secrets, label, errs):
    """`lubdub --check-config` on the configuration, its secret files
    written to a temporary directory."""
    with tempfile.TemporaryDirectory() as tmp:
        data = json.loads(json.dumps(cfg))

        def relocate(p):
            dst = os.path.join(tmp, "files", p.lstrip("/"))
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            with open(dst, "w", encoding="utf-8") as f:
                f.write(secrets.get(os.path.basename(p), "x" * 24) + "\n")
            return dst
        for a in data.get("apps", []):
            if "secret_file" in a:
                a["secret_file"] = relocate(a["secret_file"])
        for k in list(data):
            if k.endswith("_file") and isinstance(data[k], str):
                data[k] = relocate(data[k])
        if data.get("state_dir"):
            data["state_dir"] = os.path.join(tmp, "state")
            os.makedirs(data["state_dir"])
        path = os.path.join(tmp, "lubdub.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LUBDUB_", "SOKETI_"))}
        env["LUBDUB_BIND"] = "0.0.0.0"  # as the image sets it
        r = subprocess.run([binary, "--config", path, "--check-config"], env=env,
                           capture_output=True, text=True, timeout=60, check=False)
        if r.returncode != 0:
            errs.append(f"{label}: lubdub --check-config refused it: {(r.stderr or r.stdout).strip()}")


def lint(files, root=None, binary=None):
    errs = []
    check_kustomization(files, errs)
    check_labels(files, errs)
    cfg = lubdub_config(files, errs)
    if cfg is None:
        return errs
    check_deployment(files, cfg, errs)
    svc = check_service(files, errs)
    check_servicemonitor(files, cfg, svc, errs)
    check_redis(files, cfg, errs)
    if binary:
        sec = find(files, "Secret", "lubdub-secrets") or {}
        check_config(binary, cfg, dict(sec.get("stringData") or {}), "configmap.yaml", errs)
    if root:
        ccfg = check_compose(root, errs)
        if binary:
            csec = {}
            for name in os.listdir(os.path.join(root, "deploy", "compose", "secrets")):
                with open(os.path.join(root, "deploy", "compose", "secrets", name), encoding="utf-8") as f:
                    csec[name] = f.read().rstrip("\n")
            check_config(binary, ccfg, csec, "compose/lubdub.json", errs)
    return errs


def breakages():
    """(what, change) pairs: each change must make lint() complain."""
    def dep(f):
        return pod_spec(find(f, "Deployment", "lubdub"))

    def ctr(f):
        return dep(f)["containers"][0]

    def cm_set(f, key, value):
        cm = find(f, "ConfigMap", "lubdub-config")
        data = json.loads(cm["data"]["lubdub.json"])
        data[key] = value
        cm["data"]["lubdub.json"] = json.dumps(data)

    return [
        ("a grace period shorter than the drain",
         lambda f: dep(f).__setitem__("terminationGracePeriodSeconds", 12)),
        ("a drain_timeout the grace period does not cover",
         lambda f: cm_set(f, "drain_timeout", "60s")),
        ("no preStop", lambda f: ctr(f).pop("lifecycle")),
        ("a writable root", lambda f: ctr(f)["securityContext"].__setitem__("readOnlyRootFilesystem", False)),
        ("root allowed", lambda f: dep(f)["securityContext"].pop("runAsNonRoot")),
        ("readiness on /healthz", lambda f: ctr(f)["readinessProbe"]["httpGet"].__setitem__("path", "/healthz")),
        ("liveness on /readyz", lambda f: ctr(f)["livenessProbe"]["exec"].__setitem__(
            "command", ["/usr/local/bin/lubdub-healthcheck", "/readyz"])),
        ("a node id not from the pod name",
         lambda f: [e for e in ctr(f)["env"] if e["name"] == "LUBDUB_NODE_ID"][0]
         .__setitem__("valueFrom", {"fieldRef": {"fieldPath": "metadata.namespace"}})),
        ("a secret file the Secret lacks", lambda f: cm_set(f, "metrics_token_file", "/run/secrets/lubdub/nope")),
        ("a ServiceMonitor on a missing port",
         lambda f: find(f, "ServiceMonitor", "lubdub")["spec"]["endpoints"][0].__setitem__("port", "http")),
        ("a ServiceMonitor without the token",
         lambda f: find(f, "ServiceMonitor", "lubdub")["spec"]["endpoints"][0].pop("authorization")),
        ("a Service selecting nothing",
         lambda f: find(f, "Service", "lubdub")["spec"].__setitem__("selector", {"app": "other"})),
        ("the state directory on the root", lambda f: dep(f).__setitem__(
            "volumes", [v for v in dep(f)["volumes"] if v["name"] != "state"])),
    ]


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = argv[1]
    binary = argv[2] if len(argv) > 2 else None
    files = load(os.path.join(root, "deploy", "k8s"))
    print("played by tests/container/k8s.test.js (podman kube play): " + ", ".join(PLAYED))
    print("linted here: " + ", ".join(LINTED))
    errs = lint(files, root, binary)
    if not binary:
        print("no lubdub binary given: --check-config of the configurations skipped")
    missed = []
    for what, change in breakages():
        broken = copy.deepcopy(files)
        change(broken)
        if not lint(broken):
            missed.append(what)
    for e in errs:
        print(f"k8s_lint: {e}")
    for m in missed:
        print(f"k8s_lint: self-check: {m} went unnoticed")
    if errs or missed:
        return 1
    print(f"k8s_lint: deploy/k8s and deploy/compose.yaml clean; {len(breakages())} breakages caught")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
