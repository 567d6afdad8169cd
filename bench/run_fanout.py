#!/usr/bin/env python3
"""Fan-out benchmark driver for `make bench-fanout` (python3 stdlib only).

Starts each server ("peer") pinned to CPU 0 and bench/loadgen pinned to CPU 1,
runs the scenarios against it, repeats with the peers interleaved, and writes
bench/results/latest.md (tables) and latest.json (every raw loader result).
The last line printed is the one-line summary:

  fanout: hub=H hub_rest=R uws=U raw_cork=C lws=L nodews=N soketi=S
          vs_uws=H/U ... cpu_vs_uws=... churn_vs_uws=...

deliveries/s medians at 1,000 subscribers and 32 B, then server CPU per
delivery ratios (bench/README.md, "The summary line"); the ratios are
medians of per-rep ratios. A peer that cannot run, or whose run is invalid (deliveries
missing, uWS fell back to its NodeJS shim), reports 0 and its ratios n/a.

Scenarios:
  S3  1 publisher -> N subscribers (100, 1000, 10000) x (32 B, 1 KiB)
  S4  2,000 rooms x 8 members, publisher round-robin over rooms
      (Pusher peers, and raw_single: rooms in the trivial raw protocol,
      one write() per delivery, bench/raw_peer.c; uws_rooms is the
      uWebSockets.js topic pub/sub anchor, bench/peers/uws_rooms.js)
  S5  churn: connect -> (subscribe) -> one round trip -> close, 64 in flight
  S3 equal work (issue 34): in S3 1,000 x 32 B the peers uws_eq and
      raw_cork_eq are uws and raw_cork sent the whole Pusher frame the hub
      sends (loadgen --raw-envelope) instead of the bare 32 B payload; the
      tables' "wire B / delivery" shows the bytes match (summary field
      cpu_vs_uws_eq)
  S7  S3 at 1,000 x 1 KiB with 1% subscribers that never read: the server
      should close them (slow-consumer policy); reported as closed/total
  S3-1000-32-half
      after the reps: the hub and raw_cork in open loop at one offered
      rate, half the slower one's median S3 1,000 x 32 B closed-loop
      message rate in this run, paired per rep: p50/p99 publish-to-receive
      (summary field p99_half_vs_raw_cork)

Publishing: the raw peers get one WebSocket publisher. The hub gets one too
by default (--hub-publish ws): client events on private-bench, relayed to
every other subscriber, with client_event_rate 0 (unlimited) from a config
file (S4: 32 such publishers, each on its share of the rooms, like the 32
REST connections). "hub_rest" is the hub published to through REST, in S3
1,000 x 32 B only, so both figures are in the table; the summary's hub= is
the hub row. The hub rows also show the hub's deliveries per write() from
its /stats over the whole measurement.
soketi is published to through REST unless --soketi-publish ws (client
events, SOKETI_DEFAULT_APP_ENABLE_CLIENT_MESSAGES=true). S5 publishes
nothing and subscribes to public channels in every mode.

A run is invalid when the loader is the bottleneck: loader CPU >= 95% of a
core while the server uses < 90% of its core. The driver checks this once
against raw_corked before the run and for every measurement.
"""
import argparse
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "bench")
BUILD = os.environ.get("BUILD", os.path.join(ROOT, "build"))
LOADGEN = os.path.join(BUILD, "bench", "loadgen")
# The hub under test; LUBDUB_BINARY or --hub point at another build.
HUB = os.environ.get("LUBDUB_BINARY", os.path.join(BUILD, "lubdub"))
RESULTS = os.path.join(BENCH, "results")
SERVER_CPU = "0"
LOADER_CPU = "1"
SRC_IPS = "8"  # 127.0.0.2-9: each source address has its own port range

SOKETI_ENV = {
    "SOKETI_HOST": "127.0.0.1",
    # Cluster discovery (node-discover) stays on loopback.
    "SOKETI_CLUSTER_HOST": "127.0.0.1",
    "SOKETI_CLUSTER_BROADCAST_ADDRESS": "127.255.255.255",
    "SOKETI_CLUSTER_UNICAST_ADDRESSES": "127.0.0.1",
    "SOKETI_ADAPTER_DRIVER": "local",
    "SOKETI_DEFAULT_APP_ID": "app-id",
    "SOKETI_DEFAULT_APP_KEY": "app-key",
    "SOKETI_DEFAULT_APP_SECRET": "app-secret",
}


def log(*a):
    print(*a, file=sys.stderr, flush=True)


class Peer:
    def __init__(self, name, mode, argv, path="/", env=None, pusher=False,
                 fallback_marker=None, publish="ws", only=None, rooms=False,
                 loader_args=None):
        self.name = name
        self.mode = mode
        self.argv = argv  # argv with "{port}" placeholders
        self.path = path
        self.env = env or {}
        self.pusher = pusher
        self.fallback_marker = fallback_marker
        # "ws": one WebSocket publisher (raw mode: the trivial protocol;
        # Pusher mode: client events); "rest": the REST API.
        self.publish = publish
        self.only = only  # scenario ids this peer runs (None: all)
        # A raw peer that speaks the raw rooms protocol (loadgen --mode raw
        # --rooms): it runs the rooms scenario (S4) too.
        self.rooms = rooms
        # Loader options of this peer's own (e.g. --raw-envelope).
        self.loader_args = loader_args or []
        self.unavailable = None  # reason string when it cannot run

    def label(self):
        if not self.pusher:
            return self.name
        return "%s (%s publish)" % (
            self.name, "REST" if self.publish == "rest" else "client-event")


# client_event_rate 0 is unlimited (hub/pusher/pusher.c take_token); the default
# 10/s per connection would make a WebSocket publisher useless here.
HUB_CONFIG = {"apps": [{"id": "app-id", "key": "app-key",
                        "secret": "app-secret", "client_event_rate": 0}]}


def write_hub_config():
    path = os.path.join(RESULTS, "hub-config.json")
    with open(path, "w") as f:
        json.dump(HUB_CONFIG, f)
    return path


def node_ok():
    return shutil.which("node") is not None


def ensure_node_modules(peers):
    """npm ci from the lockfile once; node peers are n/a if that fails."""
    if os.path.isdir(os.path.join(BENCH, "node_modules", "ws")):
        return None
    if not shutil.which("npm"):
        return "npm not found"
    log("bench-fanout: npm ci (pinned peers)")
    r = subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=BENCH,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       timeout=600)
    if r.returncode != 0:
        return "npm ci failed: " + r.stderr.decode(errors="replace")[-300:]
    return None


# Scenarios the hub_rest (and hub_base_rest) rows run.
REST_SCENARIOS = {"S3-1000-32", "S4"}
# Equal work (issue 34): uws_eq and raw_cork_eq are uws and raw_cork fed
# the very bytes the hub sends at S3 1,000 x 32 B -- the whole Pusher
# client-event frame around the stamped 32 B data (loadgen
# --raw-envelope) -- instead of the bare 32 B payload. Summary field
# cpu_vs_uws_eq.
EQ_SCENARIOS = {"S3-1000-32"}


def make_peers(hub_publish="ws", soketi_publish="rest", hub_base=None):
    b = os.path.join(BUILD, "bench")
    hub_argv = [HUB, "--config", write_hub_config(), "--port", "{port}",
                "--loops", "1", "--bind", "127.0.0.1", "--log-level", "warn"]
    soketi_env = dict(SOKETI_ENV)
    if soketi_publish == "ws":
        soketi_env["SOKETI_DEFAULT_APP_ENABLE_CLIENT_MESSAGES"] = "true"
    peers = [
        Peer("hub", "pusher", hub_argv, path="/app/app-key", pusher=True,
             publish=hub_publish),
        Peer("raw_cork", "raw", [os.path.join(b, "raw_corked"), "--port",
                                 "{port}"]),
        Peer("raw_single", "raw", [os.path.join(b, "raw_single"), "--port",
                                   "{port}"], rooms=True),
        Peer("lws", "raw", [os.path.join(b, "lws_minimal"), "--port",
                            "{port}"]),
        Peer("nodews", "raw", ["node", os.path.join(BENCH, "peers",
                                                    "ws_server.js"),
                               "--port", "{port}"]),
        Peer("uws", "raw", ["node", os.path.join(BENCH, "peers",
                                                 "uws_server.js"),
                            "--port", "{port}"],
             fallback_marker="Falling back to a NodeJS implementation"),
        Peer("uws_eq", "raw", ["node", os.path.join(BENCH, "peers",
                                                    "uws_server.js"),
                               "--port", "{port}"],
             fallback_marker="Falling back to a NodeJS implementation",
             only=EQ_SCENARIOS, loader_args=["--raw-envelope"]),
        Peer("raw_cork_eq", "raw", [os.path.join(b, "raw_corked"), "--port",
                                    "{port}"],
             only=EQ_SCENARIOS, loader_args=["--raw-envelope"]),
        # The S4 anchor: uWS topic pub/sub with a Pusher-protocol subset
        # (bench/peers/uws_rooms.js), fed by the same client-event
        # publishers and Pusher subscribers as the hub.
        Peer("uws_rooms", "pusher", ["node", os.path.join(
            BENCH, "peers", "uws_rooms.js"), "--port", "{port}"],
             path="/app/app-key", pusher=True,
             fallback_marker="Falling back to a NodeJS implementation",
             publish="ws", only={"S4"}),
        Peer("soketi", "pusher",
             ["node", os.path.join(BENCH, "node_modules", "@soketi", "soketi",
                                   "bin", "server.js"), "start"],
             path="/app/app-key", pusher=True, env=soketi_env,
             fallback_marker="Falling back to a NodeJS implementation",
             publish=soketi_publish),
    ]
    if hub_publish == "ws":
        # The hub again, published to through REST on keep-alive
        # connections, in the headline scenario and in the small rooms:
        # both publish paths side by side.
        peers.insert(1, Peer("hub_rest", "pusher", hub_argv,
                             path="/app/app-key", pusher=True,
                             publish="rest", only=REST_SCENARIOS))
    if hub_base:
        # Another lubdub build (e.g. the commit before a change), same
        # config and publishers, interleaved with the hub rep by rep: the
        # before/after comparison of one run on one noisy machine.
        base_argv = [hub_base] + hub_argv[1:]
        at = 2 if hub_publish == "ws" else 1
        peers.insert(at, Peer("hub_base", "pusher", base_argv,
                              path="/app/app-key", pusher=True,
                              publish=hub_publish))
        if hub_publish == "ws":
            peers.insert(at + 1, Peer("hub_base_rest", "pusher", base_argv,
                                      path="/app/app-key", pusher=True,
                                      publish="rest", only=REST_SCENARIOS))
    for p in peers:
        exe = p.argv[0]
        if exe == "node":
            if not node_ok():
                p.unavailable = "node not installed"
            elif (p.argv[1].startswith(os.path.join(BENCH, "peers")) and
                  not os.path.exists(p.argv[1])):
                p.unavailable = "%s missing" % os.path.relpath(p.argv[1], ROOT)
        elif not os.access(exe, os.X_OK):
            p.unavailable = "%s not built" % os.path.relpath(exe, ROOT)
    for p in peers:
        if p.argv[0] == HUB and p.unavailable:
            p.unavailable += " (the hub is not there yet: skipped)"
    nm = None
    if any(p.argv[0] == "node" and not p.unavailable for p in peers):
        nm = ensure_node_modules(peers)
    for p in peers:
        if nm and p.argv[0] == "node":
            p.unavailable = nm
    return peers


_port = [7400 + (os.getpid() % 200) * 10]


def port_in_use(port):
    try:
        with socket.create_connection(("127.0.0.1", port), 0.2):
            return True
    except OSError:
        return False


def next_port():
    """A port nobody listens on. uWS listens with SO_REUSEPORT, so a stale
    server left on a port would silently take a share of the connections."""
    for _ in range(100):
        _port[0] += 1
        if not port_in_use(_port[0]):
            return _port[0]
    raise RuntimeError("no free port near %d" % _port[0])


def wait_port(port, proc, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), 0.2):
                return True
        except OSError:
            time.sleep(0.05)
    return False


class Server:
    """One peer process we started; stopped by its own process group id."""

    def __init__(self, peer):
        self.peer = peer
        self.port = next_port()
        argv = [a.replace("{port}", str(self.port)) for a in peer.argv]
        env = dict(os.environ)
        env.update(peer.env)
        if peer.name == "soketi":
            env["SOKETI_PORT"] = str(self.port)
            env["SOKETI_METRICS_SERVER_PORT"] = str(self.port + 3000)
            env["SOKETI_CLUSTER_PORT"] = str(self.port + 4000)
        self.logpath = os.path.join(RESULTS, "server-%s.log" % peer.name)
        self.logf = open(self.logpath, "wb")
        self.proc = subprocess.Popen(["taskset", "-c", SERVER_CPU] + argv,
                                     stdout=self.logf, stderr=subprocess.STDOUT,
                                     env=env, cwd=BENCH,
                                     start_new_session=True)
        self.pid = self.proc.pid  # taskset execs the server: same pid
        self.ok = wait_port(self.port, self.proc, 15)

    def log_text(self):
        self.logf.flush()
        with open(self.logpath, "rb") as f:
            return f.read().decode(errors="replace")

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait(5)
        self.logf.close()


MAX_CONNS_PER_LOADER = 19900  # per-process fd limit 20,000, minus headroom
H_SUB = 64


def hist_value(i):
    """Bucket midpoint; mirrors hist_value() in loadgen.c."""
    if i < 128:
        return i
    shift = (i - 128) // H_SUB + 1
    return (((i - 128) % H_SUB + H_SUB) << shift) + ((1 << shift) >> 1)


def hist_pct(bins, p, vmax):
    n = sum(bins.values())
    if not n:
        return 0
    want = min(int(p / 100.0 * n), n - 1)
    seen = 0
    for i in sorted(bins):
        seen += bins[i]
        if seen > want:
            return min(hist_value(i), vmax)
    return vmax


def arg_value(args, name, default):
    return int(args[args.index(name) + 1]) if name in args else default


def merge(results):
    """Adds the results of several loader processes sharing one window."""
    d = dict(results[0])
    for k in ("conn_ok", "conn_failed", "sub_closed", "slow_total",
              "slow_closed", "deliveries", "deliveries_all", "deliveries_per_s",
              "churn_cycles", "churn_failed", "churn_per_s", "loader_cpu_s",
              "bad_frames", "wire_bytes", "markers", "marker_bytes"):
        d[k] = sum(r.get(k, 0) for r in results)
    d["subs"] = sum(r["subs"] for r in results)
    bins = {}
    for r in results:
        for i, c in r.get("hist", []):
            bins[i] = bins.get(i, 0) + c
    vmax = max(r["lat_us"]["max"] for r in results) * 1000
    d["lat_us"] = {"p50": hist_pct(bins, 50, vmax) / 1e3,
                   "p99": hist_pct(bins, 99, vmax) / 1e3,
                   "p999": hist_pct(bins, 99.9, vmax) / 1e3,
                   "max": vmax / 1e3}
    # Per-port latencies come as summaries, not histograms: each port's is
    # taken from the process that had the most of its subscribers (with the
    # open loop's publisher apart, never the publisher's one subscriber).
    by = {}
    for r in results:
        for x in r.get("lat_us_by_port", []):
            if x["port"] not in by or x["n"] > by[x["port"]]["n"]:
                by[x["port"]] = x
    order = [x["port"] for x in results[0].get("lat_us_by_port", [])]
    d["lat_us_by_port"] = [by[port] for port in order if port in by]
    # CPU busy of the loader's CPU is a machine-wide figure: take the first.
    d["loader_procs"] = len(results)
    return d


def hub_write_stats(server):
    """(msgs_out, writes) from the hub's /stats, or None for other peers."""
    if server.peer.argv[0] != HUB:
        return None
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/stats" % server.port,
                                    timeout=5) as r:
            t = json.load(r)["totals"]
        return t["msgs_out"], t["writes"]
    except (OSError, ValueError, KeyError):
        return None


def run_loader(server, args, warmup, duration, timeout_extra=60, procs=0,
               t0_ns=None):
    """Runs one measurement. Subscribers beyond one process's fd budget are
    split over several loader processes that share one absolute start time
    (--t0, CLOCK_MONOTONIC); only the first one publishes, so the closed
    loop follows the first process's subscribers.

    An open loop (--rate) publishes from a process of its own: one loader
    thread that also reads the subscribers sends only between its read
    batches, so its publish times would follow the server's writes (a
    closed loop in disguise) and differently for each server -- measured:
    the hub's subscribers were read 22 us after the write (median), the
    busier raw_cork's 5.8 ms, and the hub / raw_cork p99 ratio fell from
    1.5-2.4 to a median of 1.26 over 13 pairs with the publisher apart
    (docs/BENCHMARKS.md, "The open loop's publisher apart"). The publisher
    process keeps one subscriber, so its slot timeouts still see a lost
    message; "undelivered" counts the rest.

    t0_ns (CLOCK_MONOTONIC ns, as time.monotonic_ns()) fixes the start
    even for one loader process, so that the caller knows the window,
    [t0 + warmup, t0 + warmup + duration], in advance (bench/run_cluster.py
    reads Redis's counters at its edges)."""
    p = server.peer
    subs = arg_value(args, "--subs", 1000)
    churn = arg_value(args, "--churn", 0)
    pub_apart = "--rate" in args and subs > 1 and not churn
    if procs <= 0:
        procs = max(1, -(-(subs + 1 + churn) // MAX_CONNS_PER_LOADER))
    if pub_apart:
        procs += 1
    base = ["taskset", "-c", LOADER_CPU, LOADGEN, "--mode", p.mode,
            "--port", str(server.port), "--path", p.path,
            "--server-pid", str(server.pid), "--src-ips", SRC_IPS,
            "--warmup", str(warmup), "--duration", str(duration), "--quiet"
            ] + [str(x) for x in p.loader_args]
    if p.pusher and p.publish == "ws" and "--churn" not in args:
        # WebSocket publishers sending client events on private channels.
        # One publisher with the whole window, like the raw peers' one,
        # except with rooms (S4): there the window is spread over as many
        # connections as the REST path uses, each publisher subscribed to
        # its share of the rooms (rooms p, p + 32, ...): the hub reads a
        # connection's input one rx buffer (64 B on main) per poll round,
        # and with 16,000 sessions open a round is expensive.
        args = list(args) + ["--publish", "ws"]
        if "--rooms" in args and "--window" in args:
            i = args.index("--window")
            w = int(args[i + 1])
            npub = min(32, w)
            args = args[:i] + args[i + 2:] + ["--window", max(1, w // npub),
                                              "--pubs", npub]
    elif (not p.pusher and "--rooms" in args and "--window" in args and
          "--churn" not in args):
        # Raw rooms (raw_single in S4): the same 32 WebSocket publishers
        # as the hub's client-event publishers, each on its share of the
        # rooms (p, p + 32, ...), the window spread over them.
        i = args.index("--window")
        w = int(args[i + 1])
        npub = min(32, w)
        args = args[:i] + args[i + 2:] + ["--window", max(1, w // npub),
                                          "--pubs", npub]
    elif p.pusher and "--window" in args and "--churn" not in args:
        # REST publishing: the window is spread over 32 publisher
        # connections with one request in flight on each, the way a
        # backend's HTTP agent pool publishes (no pipelining), so the same
        # number of messages is in flight as with the single ws publisher
        # of the raw peers. Each connection is kept alive and reused for
        # every request when the server allows it (the hub since REST
        # keep-alive for POST; "REST reconnects" in the tables shows it);
        # a server that answers "Connection: close" (soketi, older hubs)
        # costs a reconnect per request.
        i = args.index("--window")
        w = int(args[i + 1])
        npub = min(32, w)
        args = args[:i] + args[i + 2:] + ["--window", max(1, w // npub),
                                          "--pubs", npub,
                                          "--rest-inflight", 1]
    rest = [str(a) for a in args]
    if "--subs" in args:
        i = args.index("--subs")
        rest = [str(a) for a in args[:i] + args[i + 2:]]
    setup = 3.0 + subs / 4000.0
    ws0 = hub_write_stats(server)
    t0 = time.monotonic_ns() + int(setup * 1e9) if procs > 1 else 0
    if t0_ns:
        t0 = t0_ns
        setup = max(setup, (t0_ns - time.monotonic_ns()) / 1e9)
    running = []
    for k in range(procs):
        if pub_apart:
            # Process 0: the publisher and one subscriber; the others: the
            # rest of the subscribers.
            m = procs - 1
            n = 1 if k == 0 else ((subs - 1) // m +
                                  (1 if k - 1 < (subs - 1) % m else 0))
        else:
            n = subs // procs + (1 if k < subs % procs else 0)
        argv = base + rest + ["--subs", str(n)]
        if k > 0:
            argv += ["--pubs", "0"]
        if t0:
            argv += ["--t0", str(t0)]
        running.append(subprocess.Popen(argv, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE))
    outs = []
    err = None
    for pr in running:
        try:
            o, e = pr.communicate(timeout=warmup + duration + timeout_extra +
                                  (setup if t0 else 0))
        except subprocess.TimeoutExpired:
            pr.kill()
            pr.communicate()
            err = err or "loader timed out"
            continue
        if pr.returncode != 0:
            err = err or "loader exit %d: %s" % (
                pr.returncode, e.decode(errors="replace")[-300:])
            continue
        try:
            outs.append(json.loads(o))
        except ValueError:
            err = err or "bad loader output"
    if err:
        return {"error": err}
    d = merge(outs) if len(outs) > 1 else outs[0]
    # Deliveries never read (a subscriber outside the publisher's process
    # has no slot to time out). The last messages of the window may still
    # be in flight when the loaders stop: up to 0.25 s of them are allowed.
    if pub_apart:
        rate_v = float(args[args.index("--rate") + 1])
        d["undelivered"] = max(0, d["published"] * subs - d["deliveries_all"])
        d["undelivered_allowed"] = int(0.25 * rate_v * subs)
    ws1 = hub_write_stats(server)
    if ws0 and ws1 and ws1[1] > ws0[1]:
        # Whole run, setup included: how well the hub corks.
        d["hub_deliveries_per_write"] = (ws1[0] - ws0[0]) / (ws1[1] - ws0[1])
    d.pop("hist", None)
    w = d.get("window_s") or 1
    d["loader_util"] = d["loader_cpu_s"] / w
    d["server_util"] = d["server_cpu_s"] / w if d["server_cpu_s"] >= 0 else -1
    dl = d["deliveries"]
    d["server_cpu_s_per_M"] = (d["server_cpu_s"] / dl * 1e6) if dl else None
    busy = d.get("cpu_busy") or []
    lc, sc = int(LOADER_CPU), int(SERVER_CPU)
    d["loader_cpu_busy"] = busy[lc] if len(busy) > lc else d["loader_util"]
    d["server_cpu_busy"] = busy[sc] if len(busy) > sc else d["server_util"]
    # Time on the pinned CPUs used by processes that are not ours (this
    # machine is shared): > ~10% makes the numbers noisy.
    d["foreign_loader_cpu"] = max(0.0, d["loader_cpu_busy"] - d["loader_util"])
    d["foreign_server_cpu"] = max(0.0, d["server_cpu_busy"] - d["server_util"])
    # The loader side is the bottleneck when its CPU is full (by the loader
    # itself or by a stranger) while the server still has room.
    d["loader_bound"] = (max(d["loader_util"], d["loader_cpu_busy"]) >= 0.95
                         and 0 <= d["server_util"] < 0.90)
    return d


def check_valid(d, scen):
    """Returns None if the measurement counts, else why not."""
    if "error" in d:
        return d["error"]
    if d["conn_failed"]:
        return "%d connections failed, first: %s" % (
            d["conn_failed"], d.get("first_fail", "?"))
    if scen.startswith("S5"):
        return None if d["churn_cycles"] else "no churn cycles"
    if d["timeouts"]:
        return "%d messages not delivered to every subscriber" % d["timeouts"]
    if d.get("undelivered", 0) > d.get("undelivered_allowed", 0):
        return "%d deliveries missing" % d["undelivered"]
    if d["deliveries"] == 0:
        return "no deliveries"
    if d["http_err"]:
        return "%d REST errors" % d["http_err"]
    if d.get("pub_errors"):
        return "%d publisher errors (rate limit? closed?)" % d["pub_errors"]
    if d.get("echoes"):
        return "%d client events echoed to their sender" % d["echoes"]
    return None


def scenarios(quick):
    """(id, label, loader args, pusher-only) tuples."""
    s = []
    # A message not delivered to every reading subscriber within this long
    # makes the measurement invalid (lost deliveries are not a throughput).
    # 5 s is far above any healthy p99 here even on a busy shared machine.
    mt = 1.5 if quick else 5
    subs_list = [1000] if quick else [100, 1000, 10000]
    sizes = [32] if quick else [32, 1024]
    for n in subs_list:
        for z in sizes:
            s.append(("S3-%d-%d" % (n, z), "S3 1 pub -> %d subs, %d B" % (n, z),
                      ["--subs", n, "--size", z, "--window", 32,
                       "--msg-timeout", mt if n <= 1000 else 10], False))
    rooms = 200 if quick else 2000
    s.append(("S4", "S4 %d rooms x 8 members, 32 B" % rooms,
              ["--subs", rooms * 8, "--rooms", rooms, "--size", 32,
               "--window", 64, "--msg-timeout", 10], True))
    s.append(("S5", "S5 churn, 64 in flight",
              ["--subs", 0, "--churn", 64], False))
    # 1 KiB: at 32 B a non-reader is sent too little in a few seconds to
    # outgrow socket buffers plus a 1 MiB queue.
    s.append(("S7", "S7 1,000 subs x 1 KiB, 1% not reading",
              ["--subs", 1000, "--size", 1024, "--window", 32, "--slow-pct", 1,
               "--msg-timeout", mt], False))
    return s


def rep_order(peers, rep):
    """The peers' order in rep `rep`: rotated by one every rep, and
    backwards on odd reps, so no peer always follows the same one."""
    order = peers[rep % len(peers):] + peers[:rep % len(peers)]
    if rep % 2:
        order.reverse()
    return order


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, nd=0):
    if x is None:
        return "n/a"
    return ("%%.%df" % nd) % x


def self_check(warmup, duration):
    """Loader against the raw corked ceiling: is the loader the bottleneck?"""
    peer = Peer("raw_cork", "raw",
                [os.path.join(BUILD, "bench", "raw_corked"), "--port",
                 "{port}"])
    srv = Server(peer)
    try:
        if not srv.ok:
            return None, "raw_corked did not start"
        d = run_loader(srv, ["--subs", 1000, "--size", 32, "--window", 32],
                       warmup, duration)
    finally:
        srv.stop()
    if "error" in d:
        return d, d["error"]
    if d["loader_bound"]:
        return d, ("loader is the bottleneck (loader %.0f%% of a core, "
                   "raw_corked %.0f%%)" % (100 * d["loader_util"],
                                           100 * d["server_util"]))
    return d, None


# ---------------------------------------------------------------------------
# --webhooks (issue 12): the hub with webhooks off ("hub") and on ("hub_wh",
# a webhook to bench/webhook_receiver.py for every event type the scenarios
# make) side by side, paired per rep, order alternated.

WH_EVENTS = ["channel_occupied", "channel_vacated", "member_added",
             "member_removed", "client_event"]
# S5-edges: S5 with 64 rooms, so churn slot i cycles on its own channel
# bench-i and every cycle is an occupied and a vacated edge (with
# --webhook-delay 0 both are sent): the webhook throughput measurement.
WH_SCENARIOS = [
    ("S3-1000-32", "S3 1 pub -> 1000 subs, 32 B",
     ["--subs", 1000, "--size", 32, "--window", 32, "--msg-timeout", 5]),
    ("S5", "S5 churn, 64 in flight (one channel)",
     ["--subs", 0, "--churn", 64]),
    ("S5-edges", "S5 churn, 64 in flight, a channel per slot (2 edges a "
     "cycle)", ["--subs", 0, "--churn", 64, "--rooms", 64]),
]


class Receiver:
    """bench/webhook_receiver.py on the loader's CPU, stopped by its pid."""

    def __init__(self):
        self.proc = subprocess.Popen(
            ["taskset", "-c", LOADER_CPU, sys.executable,
             os.path.join(BENCH, "webhook_receiver.py")],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True)
        self.port = int(self.proc.stdout.readline().strip() or 0)

    def counts(self):
        with urllib.request.urlopen("http://127.0.0.1:%d/" % self.port,
                                    timeout=10) as r:
            return json.load(r)

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(5)


def wh_rates(c0, c1):
    """(events/s, batches/s): medians over the whole seconds in which the
    receiver got something during this measurement, first and last left
    out (partial seconds)."""
    before = {s: (b, e) for s, b, e in c0["per_s"]}
    secs = []
    for s, b, e in c1["per_s"]:
        b0, e0 = before.get(s, (0, 0))
        if e - e0 > 0:
            secs.append((s, b - b0, e - e0))
    secs = secs[1:-1]
    if not secs:
        return None, None
    return (median([e for _, _, e in secs]), median([b for _, b, _ in secs]))


def hub_webhook_stats(port):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/stats" % port,
                                    timeout=5) as r:
            return json.load(r).get("webhooks")
    except (OSError, ValueError):
        return None


def thread_ticks(pid):
    """(loop-thread ticks, all ticks, webhook-sender ticks) of a process:
    utime + stime of its threads from /proc; loop threads are named
    lubdub-N (server/loop/threads.c), the webhook sender wh-sender
    (server/webhook/webhook_send.c), the rest keep the process name."""
    loop = total = sender = 0
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return None
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/stat" % (pid, tid)) as f:
                st = f.read()
        except OSError:
            continue
        comm = st[st.index("(") + 1:st.rindex(")")]
        f = st[st.rindex(")") + 2:].split()
        n = int(f[11]) + int(f[12])
        total += n
        if comm.startswith("lubdub-"):
            loop += n
        elif comm == "wh-sender":
            sender += n
    return loop, total, sender


def run_webhooks(a):
    rx = Receiver()
    if not rx.port:
        log("bench-webhooks: the receiver did not start")
        return 2
    cfg_off = write_hub_config()
    wh_cfg = {"apps": [dict(HUB_CONFIG["apps"][0], webhooks=[
        {"url": "http://127.0.0.1:%d/hook" % rx.port,
         "event_types": WH_EVENTS}])]}
    cfg_on = os.path.join(RESULTS, "hub-config-webhooks.json")
    with open(cfg_on, "w") as f:
        json.dump(wh_cfg, f)
    common = ["--port", "{port}", "--loops", "1", "--bind", "127.0.0.1",
              "--log-level", "warn", "--webhook-delay", "0"]
    peers = [Peer("hub", "pusher", [HUB, "--config", cfg_off] + common,
                  path="/app/app-key", pusher=True),
             Peer("hub_wh", "pusher", [HUB, "--config", cfg_on] + common,
                  path="/app/app-key", pusher=True)]
    scens = WH_SCENARIOS
    if a.scenarios:
        keys = a.scenarios.split(",")
        scens = [s for s in scens if s[0] in keys]
    load0 = open("/proc/loadavg").read().split()[:3]
    res = {s[0]: {p.name: [] for p in peers} for s in scens}
    try:
        for rep in range(a.reps):
            order = peers if rep % 2 == 0 else peers[::-1]
            for sid, label, args in scens:
                for p in order:
                    log("bench-webhooks: rep %d/%d %s %s" % (
                        rep + 1, a.reps, sid, p.name))
                    srv = Server(p)
                    try:
                        if not srv.ok:
                            log("bench-webhooks: %s did not start: %s" % (
                                p.name, srv.log_text()[-300:]))
                            return 2
                        c0 = rx.counts()
                        tk0 = thread_ticks(srv.pid)
                        d = run_loader(srv, args, a.warmup, a.duration)
                        tk1 = thread_ticks(srv.pid)
                        if tk0 and tk1 and tk1[1] > tk0[1] and \
                                "server_cpu_s" in d:
                            # The loop threads' share of the hub's CPU over
                            # the whole run, applied to the window's CPU.
                            d["loop_share"] = ((tk1[0] - tk0[0]) /
                                               (tk1[1] - tk0[1]))
                            d["loop_cpu_s"] = d["server_cpu_s"] * \
                                d["loop_share"]
                            d["sender_share"] = ((tk1[2] - tk0[2]) /
                                                 (tk1[1] - tk0[1]))
                        d["rep"] = rep
                        d["invalid"] = check_valid(d, sid)
                        if p.name == "hub_wh":
                            # Let the last batches (250 ms) arrive.
                            end = time.monotonic() + 3
                            c1 = rx.counts()
                            while time.monotonic() < end:
                                time.sleep(0.5)
                                c2 = rx.counts()
                                if c2["events"] == c1["events"]:
                                    break
                                c1 = c2
                            d["wh_events"] = c1["events"] - c0["events"]
                            d["wh_batches"] = c1["batches"] - c0["batches"]
                            d["wh_names"] = {
                                k: v - c0["names"].get(k, 0)
                                for k, v in c1["names"].items()
                                if v - c0["names"].get(k, 0)}
                            d["wh_events_per_s"], d["wh_batches_per_s"] = \
                                wh_rates(c0, c1)
                            d["wh_hub"] = hub_webhook_stats(srv.port)
                        res[sid][p.name].append(d)
                    finally:
                        srv.stop()
    finally:
        rx.stop()
    load1 = open("/proc/loadavg").read().split()[:3]

    def valid(sid, name):
        return [d for d in res.get(sid, {}).get(name, [])
                if not d.get("invalid")]

    def per_unit(d, sid):
        """Server CPU seconds per delivery (S3) or per churn cycle (S5)."""
        n = d["churn_cycles"] if sid.startswith("S5") else d["deliveries"]
        return d["server_cpu_s"] / n if n and d["server_cpu_s"] > 0 else None

    def loop_unit(d, sid):
        """Loop threads' CPU seconds per delivery or cycle."""
        u = per_unit(d, sid)
        return u * d["loop_share"] if u and "loop_share" in d else None

    def rep_ratios(sid, f=per_unit):
        by = {}
        for name in ("hub", "hub_wh"):
            for d in valid(sid, name):
                by.setdefault(d["rep"], {})[name] = f(d, sid)
        return [v["hub_wh"] / v["hub"] for v in by.values()
                if v.get("hub") and v.get("hub_wh")]

    def cpu_ratio(sid, f=per_unit):
        return median(rep_ratios(sid, f))

    def pooled_ratio(sid):
        """All valid reps' CPU over all their units, on / off: each rep
        weighted by its length instead of one median pair."""
        k = "churn_cycles" if sid.startswith("S5") else "deliveries"
        tot = {}
        for name in ("hub", "hub_wh"):
            v = [d for d in valid(sid, name) if d["server_cpu_s"] > 0]
            cpu, n = sum(d["server_cpu_s"] for d in v), sum(d[k] for d in v)
            tot[name] = cpu / n if n and cpu else None
        return (tot["hub_wh"] / tot["hub"] if tot["hub"] and tot["hub_wh"]
                else None)

    def rate_ratio(sid):
        k = "churn_per_s" if sid.startswith("S5") else "deliveries_per_s"
        by = {}
        for name in ("hub", "hub_wh"):
            for d in valid(sid, name):
                by.setdefault(d["rep"], {})[name] = d[k]
        return median([v["hub_wh"] / v["hub"] for v in by.values()
                       if v.get("hub") and v.get("hub_wh")])

    lines = ["# Webhooks on vs off (make bench-webhooks)", "",
             "- date: %s; reps: %d; measurement %.1f s after %.1f s warm-up"
             % (time.strftime("%Y-%m-%d %H:%M:%S %Z"), a.reps, a.duration,
                a.warmup),
             "- hub on CPU %s; loader and receiver on CPU %s; loadavg "
             "before %s, after %s" % (SERVER_CPU, LOADER_CPU,
                                      " ".join(load0), " ".join(load1)),
             "- both hubs: --loops 1 --webhook-delay 0; hub_wh has one "
             "webhook (%s) to a local receiver" % ", ".join(WH_EVENTS), ""]
    for sid, label, args in scens:
        s5 = sid.startswith("S5")
        lines += ["## " + label, "",
                  "| peer | %s | server CPU µs / %s | loop threads µs / %s "
                  "| server %% | sender thread %% of server | loader %% "
                  "| loader-bound | webhook events (s) | events/s | "
                  "batches/s | valid reps |" % (
                      "cycles/s" if s5 else "deliveries/s",
                      "cycle" if s5 else "delivery",
                      "cycle" if s5 else "delivery"),
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for p in peers:
            runs = res[sid][p.name]
            v = valid(sid, p.name)
            k = "churn_per_s" if s5 else "deliveries_per_s"
            names = {}
            for d in v:
                for n, c in (d.get("wh_names") or {}).items():
                    names[n] = names.get(n, 0) + c
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %d | %s "
                         "| %s | %s | %d/%d |" % (
                p.name, fmt(median([d[k] for d in v])),
                fmt(median([per_unit(d, sid) and per_unit(d, sid) * 1e6
                            for d in v]), 3),
                fmt(median([loop_unit(d, sid) and loop_unit(d, sid) * 1e6
                            for d in v]), 3),
                fmt(median([100 * d["server_util"] for d in v])),
                fmt(median([100 * d["sender_share"] for d in v
                            if "sender_share" in d]), 1),
                fmt(median([100 * max(d["loader_util"], d["loader_cpu_busy"])
                            for d in v])),
                sum(1 for d in v if d.get("loader_bound")),
                " ".join("%s=%d" % kv for kv in sorted(names.items()))
                or "-",
                fmt(median([d.get("wh_events_per_s") for d in v])),
                fmt(median([d.get("wh_batches_per_s") for d in v]), 1),
                len(v), len(runs)))
        lines += ["", "- on/off: CPU per %s %s (loop threads %s), rate %s "
                  "(medians of per-rep ratios); per rep %s; pooled over "
                  "reps %s" % (
                      "cycle" if s5 else "delivery", fmt(cpu_ratio(sid), 3),
                      fmt(cpu_ratio(sid, loop_unit), 3),
                      fmt(rate_ratio(sid), 3),
                      " ".join("%.3f" % r for r in sorted(rep_ratios(sid)))
                      or "-", fmt(pooled_ratio(sid), 3)), ""]
    with open(os.path.join(RESULTS, "webhooks.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(RESULTS, "webhooks.json"), "w") as f:
        json.dump(res, f, indent=1)
    log("bench-webhooks: tables in bench/results/webhooks.md")

    def r3(x):
        return "%.3f" % x if x else "n/a"
    edges = [d for d in valid("S5-edges", "hub_wh")]
    ev = median([d.get("wh_events_per_s") for d in edges])
    bt = median([d.get("wh_batches_per_s") for d in edges])
    epb = median([d["wh_events"] / d["wh_batches"] for d in edges
                  if d.get("wh_batches")])
    # Per-rep ratios hub_wh / hub: CPU per delivery (S3) or per cycle (S5),
    # below 1.05 meets the goal; webhook_events_per_s etc. from S5-edges.
    print("webhooks: s3_cpu_ratio=%s s5_cpu_ratio=%s s5_edges_cpu_ratio=%s "
          "s3_loop_cpu_ratio=%s s5_loop_cpu_ratio=%s "
          "s5_edges_loop_cpu_ratio=%s "
          "s3_rate_ratio=%s s5_rate_ratio=%s webhook_events_per_s=%s "
          "batches_per_s=%s events_per_batch=%s s3_cpu_ratio_pooled=%s "
          "s3_cpu_ratios=%s s3_sender_cpu_share=%s load1=%s/%s" % (
              r3(cpu_ratio("S3-1000-32")), r3(cpu_ratio("S5")),
              r3(cpu_ratio("S5-edges")),
              r3(cpu_ratio("S3-1000-32", loop_unit)),
              r3(cpu_ratio("S5", loop_unit)),
              r3(cpu_ratio("S5-edges", loop_unit)),
              r3(rate_ratio("S3-1000-32")),
              r3(rate_ratio("S5")), "%d" % round(ev) if ev else "n/a",
              "%.1f" % bt if bt else "n/a",
              "%.1f" % epb if epb else "n/a",
              r3(pooled_ratio("S3-1000-32")),
              "/".join("%.3f" % r for r in sorted(rep_ratios("S3-1000-32")))
              or "n/a", r3(median([d["sender_share"]
                                   for d in valid("S3-1000-32", "hub_wh")
                                   if "sender_share" in d])),
              load0[0], load1[0]), flush=True)
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 1 rep, short, small scenarios")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--peers", default="",
                    help="comma list (default: all)")
    ap.add_argument("--hub", help="lubdub binary (default: BUILD/lubdub)")
    ap.add_argument("--hub-base", help="a second lubdub binary run as "
                    "peer hub_base (and hub_base_rest): before/after")
    ap.add_argument("--loader-procs", type=int, default=0,
                    help="loader processes per measurement (0: as needed "
                    "for the 19,900 connections per process limit)")
    ap.add_argument("--hub-publish", choices=("ws", "rest"), default="ws",
                    help="hub publisher: client events on one WebSocket "
                    "(default; adds a hub_rest row in S3-1000-32) or REST")
    ap.add_argument("--soketi-publish", choices=("ws", "rest"),
                    default="rest",
                    help="soketi publisher (ws: client events, enabled "
                    "through SOKETI_DEFAULT_APP_ENABLE_CLIENT_MESSAGES)")
    ap.add_argument("--webhooks", action="store_true",
                    help="issue 12: the hub with webhooks off and on to a "
                    "local receiver, paired; S3-1000-32, S5, S5-edges; ends "
                    "with a 'webhooks:' line (bench/README.md)")
    ap.add_argument("--half-rate", type=float, default=0,
                    help="S3 1,000 x 32 B half-load rate, messages/s, for "
                    "both hub and raw_cork (default: half the slower one's "
                    "median closed-loop rate in this run)")
    ap.add_argument("--scenarios", default="",
                    help="comma list of ids or prefixes, e.g. S3-1000-32,S5")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.duration, a.warmup = 1, 2.5, 0.5
    os.makedirs(RESULTS, exist_ok=True)
    if a.hub:
        global HUB
        HUB = os.path.abspath(a.hub)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if not os.access(LOADGEN, os.X_OK):
        log("bench-fanout: %s missing: build first (make build)" % LOADGEN)
        return 2
    if os.cpu_count() and os.cpu_count() < 2:
        log("bench-fanout: needs 2 CPUs (server on 0, loader on 1)")
    if a.webhooks:
        return run_webhooks(a)

    peers = make_peers(a.hub_publish, a.soketi_publish,
                       os.path.abspath(a.hub_base) if a.hub_base else None)
    if a.peers:
        want = set(a.peers.split(","))
        if "hub" in want:
            want.add("hub_rest")
        if "uws" in want:
            want |= {"uws_rooms", "uws_eq"}
        if "raw_cork" in want:
            want.add("raw_cork_eq")
        if a.hub_base:
            want |= {"hub_base", "hub_base_rest"}
        peers = [p for p in peers if p.name in want]
    for p in peers:
        if p.unavailable:
            log("bench-fanout: %s unavailable: %s" % (p.name, p.unavailable))
    scens = scenarios(a.quick)
    if a.scenarios:
        keys = a.scenarios.split(",")
        scens = [s for s in scens if any(s[0] == k or s[0].startswith(k + "-")
                                         or s[0] == k for k in keys)]
    headline = "S3-1000-32"
    HALF = "S3-1000-32-half"
    load0 = open("/proc/loadavg").read().split()[:3]

    chk, why = self_check(a.warmup, a.duration)
    run_invalid = why
    if why:
        log("bench-fanout: SELF-CHECK FAILED: %s; this run is invalid" % why)
    else:
        log("bench-fanout: self-check ok: loader %.0f%%, raw_corked %.0f%% "
            "of a core, %.0f deliveries/s" % (100 * chk["loader_util"],
                                              100 * chk["server_util"],
                                              chk["deliveries_per_s"]))

    # results[scen][peer] = list of per-rep dicts (None when skipped)
    results = {s[0]: {p.name: [] for p in peers} for s in scens}
    notes = {p.name: p.unavailable for p in peers}
    for rep in range(a.reps):
        # Interleave: rotate the peer order every rep, and run it backwards
        # on odd reps, so no peer always follows the same one. A peer's
        # figures depend on what ran just before it (a REST peer leaves
        # thousands of TIME_WAIT sockets behind): a --hub-base comparison
        # moved by ~10% when the two binaries swapped places.
        for p in rep_order(peers, rep):
            if p.unavailable:
                continue
            if p.only is not None and not any(sc[0] in p.only
                                              for sc in scens):
                continue  # none of its scenarios selected
            log("bench-fanout: rep %d/%d %s" % (rep + 1, a.reps, p.name))
            srv = Server(p)
            try:
                if not srv.ok:
                    txt = srv.log_text().strip().splitlines()
                    notes[p.name] = "did not start%s: skipped (%s)" % (
                        " (exit %s)" % srv.proc.returncode
                        if srv.proc.poll() is not None else "",
                        txt[-1][:160] if txt else "no output")
                    p.unavailable = notes[p.name]
                    continue
                for sid, label, args, pusher_only in scens:
                    if pusher_only and not (p.pusher or p.rooms):
                        continue
                    if p.only is not None and sid not in p.only:
                        continue
                    d = run_loader(srv, args, a.warmup, a.duration,
                                   procs=a.loader_procs)
                    d["rep"] = rep
                    d["invalid"] = check_valid(d, sid)
                    results[sid][p.name].append(d)
                    if srv.proc.poll() is not None:
                        log("bench-fanout: %s exited during %s" % (p.name,
                                                                  sid))
                        srv = Server(p)
                        if not srv.ok:
                            break
                if p.fallback_marker and p.fallback_marker in srv.log_text():
                    notes[p.name] = ("uWS fell back to its NodeJS "
                                     "implementation: numbers discarded")
                    for sid in results:
                        for d in results[sid][p.name]:
                            d["invalid"] = notes[p.name]
            finally:
                srv.stop()

    def valid_runs(sid, name):
        return [d for d in results.get(sid, {}).get(name, [])
                if not d.get("invalid")]

    def med_rate(sid, name):
        xs = [d["deliveries_per_s"] for d in valid_runs(sid, name)]
        return median(xs)

    def med_ratio(sid, num, den):
        by_rep = {}
        for d in valid_runs(sid, num):
            by_rep.setdefault(d["rep"], {})["n"] = d["deliveries_per_s"]
        for d in valid_runs(sid, den):
            by_rep.setdefault(d["rep"], {})["d"] = d["deliveries_per_s"]
        rs = [v["n"] / v["d"] for v in by_rep.values()
              if v.get("n") and v.get("d")]
        return median(rs)

    def med_cpu_ratio(sid, num, den):
        """Median over reps of num's server CPU per delivery / den's."""
        by_rep = {}
        for name, k in ((num, "n"), (den, "d")):
            for d in valid_runs(sid, name):
                if d.get("server_cpu_s_per_M"):
                    by_rep.setdefault(d["rep"], {})[k] = d["server_cpu_s_per_M"]
        return median([v["n"] / v["d"] for v in by_rep.values()
                       if v.get("n") and v.get("d")])

    def med_churn_ratio(num, den):
        by_rep = {}
        for name, k in ((num, "n"), (den, "d")):
            for d in valid_runs("S5", name):
                by_rep.setdefault(d["rep"], {})[k] = d["churn_per_s"]
        return median([v["n"] / v["d"] for v in by_rep.values()
                       if v.get("n") and v.get("d")])

    # Issue 14's "p99 at half load <= 1.2x raw_cork": the hub (client-event
    # publisher) and raw_cork in open loop at one offered rate, half the
    # slower one's median closed-loop message rate at S3 1,000 x 32 B in
    # this run (or --half-rate), paired per rep with the order alternating.
    half = {"rate": None, "why": None}
    hpeers = [p for p in peers if p.name in ("hub", "raw_cork")]
    if any(sc[0] == headline for sc in scens) and len(hpeers) == 2:
        sat = {}
        for p in hpeers:
            r = med_rate(headline, p.name)
            if r:
                sat[p.name] = r / 1000.0  # messages/s: 1,000 subscribers
        half["sat"] = sat
        half["sat_loader_bound"] = sorted(
            n for n in sat if any(d.get("loader_bound")
                                  for d in valid_runs(headline, n)))
        if a.half_rate > 0:
            half["rate"] = a.half_rate
        elif len(sat) == 2:
            half["rate"] = 0.5 * min(sat.values())
            half["slower"] = min(sat, key=sat.get)
        else:
            half["why"] = ("no valid S3 1,000 x 32 B measurement of %s" %
                           " and ".join(p.name for p in hpeers
                                        if p.name not in sat))
        if half["rate"] and any(p.unavailable for p in hpeers):
            half["rate"] = None
            half["why"] = "hub or raw_cork unavailable"
    if half["rate"]:
        results[HALF] = {p.name: [] for p in hpeers}
        hargs = ["--subs", 1000, "--size", 32, "--rate",
                 "%.0f" % half["rate"], "--msg-timeout",
                 1.5 if a.quick else 5]
        for rep in range(a.reps):
            for p in (hpeers if rep % 2 == 0 else hpeers[::-1]):
                log("bench-fanout: half load rep %d/%d %s (%.0f msgs/s)" % (
                    rep + 1, a.reps, p.name, half["rate"]))
                srv = Server(p)
                try:
                    if not srv.ok:
                        continue
                    d = run_loader(srv, hargs, a.warmup, a.duration)
                    d["rep"] = rep
                    d["invalid"] = check_valid(d, HALF)
                    results[HALF][p.name].append(d)
                finally:
                    srv.stop()

    def half_ratios(q="p99"):
        by_rep = {}
        for name, k in (("hub", "n"), ("raw_cork", "d")):
            for d in valid_runs(HALF, name):
                by_rep.setdefault(d["rep"], {})[k] = d["lat_us"][q]
        return [by_rep[r]["n"] / by_rep[r]["d"] for r in sorted(by_rep)
                if by_rep[r].get("n") and by_rep[r].get("d")]

    # Loader saturation: the deliveries/s ratios of such measurements
    # understate the faster server; CPU per delivery does not depend on it.
    bound = sorted({"%s/%s" % (sid, name) for sid in results
                    for name in results[sid]
                    for d in valid_runs(sid, name) if d.get("loader_bound")})

    load1 = open("/proc/loadavg").read().split()[:3]
    lines = ["# Fan-out results (make bench-fanout%s)" % (
        " --quick" if a.quick else ""), "",
        "- date: %s; reps: %d; measurement %.1f s after %.1f s warm-up" % (
            time.strftime("%Y-%m-%d %H:%M:%S %Z"), a.reps, a.duration,
            a.warmup),
        "- server pinned to CPU %s, loader to CPU %s; loadavg before %s, "
        "after %s" % (SERVER_CPU, LOADER_CPU, " ".join(load0),
                      " ".join(load1)),
        "- self-check against raw_corked: %s" % (
            ("INVALID: " + run_invalid) if run_invalid else
            "ok (loader %.0f%%, server %.0f%% of a core)" % (
                100 * chk["loader_util"], 100 * chk["server_util"])),
        ""]
    for p in peers:
        if notes.get(p.name):
            lines.append("- %s: %s" % (p.name, notes[p.name]))
    if bound:
        lines.append("- LOADER SATURATED its core (>= 95%% busy, server "
                     "< 90%%) in: %s. Deliveries/s ratios there understate "
                     "the faster server: judge by server CPU s per M "
                     "deliveries (the cpu_vs_* ratios)." % ", ".join(bound))
    lines.append("")
    for sid, label, args, pusher_only in scens:
        lines += ["## %s" % label, ""]
        if sid == "S5":
            lines.append("| peer | cycles/s | cycle p50 µs | cycle p99 µs | "
                         "server CPU % | valid reps |")
            lines.append("|---|---|---|---|---|---|")
        else:
            lines.append("| peer | deliveries/s | vs raw_cork | p50 µs | "
                         "p99 µs | p99.9 µs | server CPU s / M deliveries | "
                         "loader % | server % | foreign % cpu0/cpu1 | slow closed | "
                         "hub deliveries/write | REST reconnects / request | "
                         "wire B / delivery | valid reps |")
            lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|"
                         "---|---|---|")
        for p in peers:
            runs = results[sid].get(p.name, [])
            if not runs:
                continue
            v = valid_runs(sid, p.name)
            why = "; ".join(sorted({d["invalid"] for d in runs
                                    if d.get("invalid")}))
            vr = "%d/%d%s" % (len(v), len(runs), (" (" + why + ")") if why
                              else "")
            nlb = sum(1 for d in v if d.get("loader_bound"))
            if nlb:
                vr += ", %d loader-bound" % nlb
            if sid == "S5":
                lines.append("| %s | %s | %s | %s | %s | %s |" % (
                    p.name, fmt(median([d["churn_per_s"] for d in v])),
                    fmt(median([d["churn_lat_us"]["p50"] for d in v])),
                    fmt(median([d["churn_lat_us"]["p99"] for d in v])),
                    fmt(median([100 * d["server_util"] for d in v])), vr))
                continue
            dpw = median([d.get("hub_deliveries_per_write") for d in v])
            rpr = median([d["rest_reconnects"] / d["http_ok"] for d in v
                          if d.get("publish") == "rest" and d.get("http_ok")])
            wire = median([d["wire_bytes"] / d["deliveries"] for d in v
                           if d.get("wire_bytes") and d.get("deliveries")])
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s "
                         "| %s | %s | %s | %s | %s |" % (
                p.label(), fmt(med_rate(sid, p.name)),
                fmt(med_ratio(sid, p.name, "raw_cork"), 2),
                fmt(median([d["lat_us"]["p50"] for d in v])),
                fmt(median([d["lat_us"]["p99"] for d in v])),
                fmt(median([d["lat_us"]["p999"] for d in v])),
                fmt(median([d["server_cpu_s_per_M"] for d in v]), 3),
                fmt(median([100 * d["loader_util"] for d in v])),
                fmt(median([100 * d["server_util"] for d in v])),
                "%s/%s" % (fmt(median([100 * d["foreign_server_cpu"]
                                       for d in runs if "error" not in d])),
                           fmt(median([100 * d["foreign_loader_cpu"]
                                       for d in runs if "error" not in d]))),
                "%s/%s" % (fmt(median([d["slow_closed"] for d in runs])),
                           fmt(median([d["slow_total"] for d in runs])))
                if sid == "S7" else "-",
                fmt(dpw, 1) if dpw is not None else "-",
                fmt(rpr, 3) if rpr is not None else "-",
                fmt(wire, 1) if wire is not None else "-", vr))
        lines.append("")
    if HALF in results or half["why"]:
        lines += ["## S3 1 pub -> 1000 subs, 32 B, at half load (open loop, "
                  "hub and raw_cork at one rate)", ""]
    if half["why"]:
        lines += ["- not measured: %s" % half["why"], ""]
    if HALF in results:
        sat = half["sat"]
        lines.append(
            "- offered rate %.0f messages/s (x 1,000 subscribers), %s; "
            "closed-loop medians this run: %s%s" % (
                half["rate"], "fixed by --half-rate" if a.half_rate > 0 else
                "half of %s's" % half.get("slower"),
                ", ".join("%s %.0f msgs/s" % kv for kv in sorted(sat.items()))
                or "n/a",
                ("; LOADER SATURATED in the closed-loop measurements of %s, "
                 "so the rate is half of what the loader could drive, not "
                 "half of the server's capacity" % ", ".join(
                     half["sat_loader_bound"]))
                if half["sat_loader_bound"] else ""))
        lines += ["", "| peer | deliveries/s | p50 µs | p99 µs | p99.9 µs | "
                  "server CPU s / M deliveries | loader % | server % | "
                  "foreign % cpu0/cpu1 | valid reps |",
                  "|---|---|---|---|---|---|---|---|---|---|"]
        for p in hpeers:
            runs = results[HALF][p.name]
            v = valid_runs(HALF, p.name)
            why = "; ".join(sorted({d["invalid"] for d in runs
                                    if d.get("invalid")}))
            nlb = sum(1 for d in v if d.get("loader_bound"))
            lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s/%s | "
                         "%d/%d%s%s |" % (
                p.label(), fmt(median([d["deliveries_per_s"] for d in v])),
                fmt(median([d["lat_us"]["p50"] for d in v])),
                fmt(median([d["lat_us"]["p99"] for d in v])),
                fmt(median([d["lat_us"]["p999"] for d in v])),
                fmt(median([d["server_cpu_s_per_M"] for d in v]), 3),
                fmt(median([100 * max(d["loader_util"], d["loader_cpu_busy"])
                            for d in v])),
                fmt(median([100 * d["server_util"] for d in v])),
                fmt(median([100 * d["foreign_server_cpu"] for d in v])),
                fmt(median([100 * d["foreign_loader_cpu"] for d in v])),
                len(v), len(runs), (" (" + why + ")") if why else "",
                (", %d loader-bound" % nlb) if nlb else ""))
        lines += ["", "- hub / raw_cork per rep: p99 %s, p50 %s; "
                  "`p99_half_vs_raw_cork` (median) %s (goal <= 1.2)" % (
                      " ".join("%.2f" % r for r in half_ratios()) or "n/a",
                      " ".join("%.2f" % r for r in half_ratios("p50"))
                      or "n/a", fmt(median(half_ratios()), 3)), ""]
    with open(os.path.join(RESULTS, "latest.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    with open(os.path.join(RESULTS, "latest.json"), "w") as f:
        json.dump({"self_check": chk, "invalid": run_invalid,
                   "notes": notes, "half_load": half, "results": results},
                  f, indent=1)
    log("bench-fanout: tables in %s" % os.path.relpath(
        os.path.join(RESULTS, "latest.md"), ROOT))
    if run_invalid:
        log("bench-fanout: RUN INVALID: %s" % run_invalid)

    def rate(name):
        r = med_rate(headline, name)
        return "%d" % round(r) if r else "0"

    def ratio(num, den):
        r = med_ratio(headline, num, den)
        return "%.3f" % r if r else "n/a"

    def cpu(sid, num, den):
        r = med_cpu_ratio(sid, num, den)
        return "%.3f" % r if r else "n/a"

    churn = med_churn_ratio("hub", "uws")
    if bound:
        log("bench-fanout: the loader saturated its core in %d "
            "measurement(s) (%s): their deliveries/s ratios understate the "
            "faster server; judge by CPU per delivery (cpu_vs_*)" % (
                len(bound), ", ".join(bound)))
    # cpu_vs_X: X's server CPU per delivery / the hub's (above 1: the hub
    # spends less); rest_vs_ws: the hub's client-event CPU per delivery /
    # its REST one; churn_vs_uws: S5 cycles/s hub / uws. Medians of
    # per-rep ratios. Appended after them: p99_half_vs_raw_cork (hub p99 /
    # raw_cork p99 at one half-load rate), cpu_vs_raw_single_rooms (S4),
    # the half-load rate and whether the loader saturated there; then
    # cpu_vs_uws_eq: uws_eq's CPU per delivery / the hub's at S3 1,000 x
    # 32 B, uWS sending the hub's very bytes (issue 34).
    p99h = median(half_ratios())
    hbound = any(d.get("loader_bound") for n in ("hub", "raw_cork")
                 for d in valid_runs(HALF, n))
    print("fanout: hub=%s hub_rest=%s uws=%s raw_cork=%s lws=%s nodews=%s "
          "soketi=%s vs_uws=%s vs_raw_cork=%s vs_soketi=%s "
          "cpu_vs_uws=%s cpu_vs_raw_cork=%s cpu_vs_uws_100x1k=%s "
          "cpu_vs_uws_10k=%s cpu_vs_uws_rooms=%s rest_vs_ws=%s "
          "churn_vs_uws=%s p99_half_vs_raw_cork=%s "
          "cpu_vs_raw_single_rooms=%s half_rate=%s "
          "half_loader_saturated=%s cpu_vs_uws_eq=%s" % (
              rate("hub"), rate("hub_rest"), rate("uws"), rate("raw_cork"),
              rate("lws"), rate("nodews"), rate("soketi"), ratio("hub", "uws"),
              ratio("hub", "raw_cork"), ratio("hub", "soketi"),
              cpu(headline, "uws", "hub"), cpu(headline, "raw_cork", "hub"),
              cpu("S3-100-1024", "uws", "hub"),
              cpu("S3-10000-32", "uws", "hub"),
              cpu("S4", "uws_rooms", "hub"),
              cpu(headline, "hub", "hub_rest"),
              "%.3f" % churn if churn else "n/a",
              "%.3f" % p99h if p99h else "n/a",
              cpu("S4", "raw_single", "hub"),
              "%.0f" % half["rate"] if half["rate"] else "n/a",
              ("yes" if hbound else "no") if HALF in results else "n/a",
              cpu(headline, "uws_eq", "hub")),
          flush=True)
    if a.hub_base:
        # Before/after: deliveries/s ratio (median of per-rep ratios) and
        # server CPU s per million deliveries, per scenario.
        for sid in sorted(results):
            cpu = {}
            for name in ("hub", "hub_base", "hub_rest", "hub_base_rest"):
                v = [d["server_cpu_s_per_M"] for d in valid_runs(sid, name)
                     if d.get("server_cpu_s_per_M")]
                cpu[name] = median(v) if v else None
            if not cpu["hub"] or not cpu["hub_base"]:
                continue
            r = med_ratio(sid, "hub", "hub_base")
            line = ("fanout-base: %s hub/hub_base=%s cpu_per_M hub=%.3f "
                    "base=%.3f (%.3f)" % (sid, "%.3f" % r if r else "n/a",
                                         cpu["hub"], cpu["hub_base"],
                                         cpu["hub"] / cpu["hub_base"]))
            if cpu["hub_rest"] and cpu["hub_base_rest"]:
                line += " rest cpu_per_M hub=%.3f base=%.3f (%.3f)" % (
                    cpu["hub_rest"], cpu["hub_base_rest"],
                    cpu["hub_rest"] / cpu["hub_base_rest"])
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
