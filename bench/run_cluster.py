#!/usr/bin/env python3
"""Scale-out benchmark driver for `make bench-cluster` (python3 stdlib only).

Three lubdub nodes on one Redis against one node serving the same
subscribers, in the same run, measured in pairs (single, cluster) whose
order alternates rep by rep. It reuses bench/run_fanout.py's pieces
(server start/stop, the loader invocation, validity and loader-saturation
rules) and bench/loadgen's --sub-ports / --pub-ports / --server-pid lists.

Placement (as in make bench-fanout): every server process (the single
node; Redis and the three nodes) is pinned to CPU 0, the loader to CPU 1,
each node with --loops 1. So both set-ups get the same CPU budget and the
cluster pays for its extra work (Redis, the envelopes, one more process
hop) out of the same core: server CPU seconds per delivery is the figure
to compare, and is what the goal is about.

Measurements, each on 1,000 subscribers (subscriber i on node i mod 3) of
one channel, 32 B payloads, subscribing first, then publishing:
  sat-rest  closed loop through REST (32 keep-alive connections, one request
            in flight on each, spread over the nodes like a load balancer
            would): deliveries/s and server CPU s per million deliveries
            (all nodes + Redis, /proc/<pid>/stat utime+stime)
  sat-ws    closed loop through client events (one WebSocket publisher on
            n1, private-bench, client_event_rate 0)
  lat-rest, lat-ws
            open loop at half load, the same offered rate for both setups:
            half the slower set-up's saturated message rate on that path
            (median of this run's sat reps): p50/p99 publish-to-receive
            latency, and CPU per delivery at equal load
  open-rest, open-ws
            open loop at --open-fraction (default 0.7) of the single node's
            saturated rate on that path, the same for both set-ups: whether
            the cluster keeps up with a rate past its own closed-loop one,
            and CPU per delivery there. The closed loop frees a window
            place only when every subscriber has the message, so with the
            subscribers on three nodes each node gets the window back in
            pieces and `sat` understates the cluster (docs/BENCHMARKS.md,
            "The closed loop understates the cluster")
  idle      (once, cluster only) subscribers on n1 and n2 only, REST
            publishers on n1 and n2, while n3 holds 100 subscribers of
            another channel: n3's CPU seconds and the growth of its
            backplane "received" counter during the measurement

The last line printed is the summary (bench/README.md, "bench-cluster").
Tables go to bench/results/cluster.md, raw loader JSON to cluster.json.

--history runs bench/run_cluster_history.py instead: the three nodes
without and with an app history, paired (what the history writes cost
Redis and the nodes per publication, and Redis's bytes per kept entry).
"""
import argparse
import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import time
import urllib.request

sys.dont_write_bytecode = True  # no bench/__pycache__ from the import below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_fanout as rf  # noqa: E402

REDIS_SERVER = os.environ.get("REDIS_SERVER", "/usr/bin/redis-server")
SUBS = 1000
IDLE_SUBS = 100  # n3's subscribers of another channel in the idle check
NODES = 3


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def redis_ping(port):
    try:
        with socket.create_connection(("127.0.0.1", port), 0.5) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class Redis:
    """redis-server on a free loopback port, no persistence, on CPU 0;
    stopped by its PID (its own session)."""

    def __init__(self, cpu=None, name="cluster-redis"):
        self.port = rf.next_port()
        self.logpath = os.path.join(rf.RESULTS, name + ".log")
        self.logf = open(self.logpath, "wb")
        self.proc = subprocess.Popen(
            ["taskset", "-c", cpu or rf.SERVER_CPU, REDIS_SERVER, "--port",
             str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--protected-mode", "no",
             "--loglevel", "warning"],
            stdout=self.logf, stderr=subprocess.STDOUT,
            start_new_session=True)
        self.pid = self.proc.pid
        end = time.monotonic() + 10
        self.ok = False
        while time.monotonic() < end and self.proc.poll() is None:
            if redis_ping(self.port):
                self.ok = True
                break
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.kill(self.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.logf.close()


def resp_read(f):
    """One RESP reply from a buffered socket file: str, int, list, None,
    or a RuntimeError for an error reply."""
    line = f.readline()
    if not line:
        raise OSError("redis closed the connection")
    t, rest = line[:1], line[1:-2]
    if t == b"+":
        return rest.decode()
    if t == b"-":
        return RuntimeError(rest.decode(errors="replace"))
    if t == b":":
        return int(rest)
    if t == b"$":
        n = int(rest)
        return None if n < 0 else f.read(n + 2)[:-2].decode(
            errors="replace")
    if t == b"*":
        n = int(rest)
        return None if n < 0 else [resp_read(f) for _ in range(n)]
    raise OSError("bad RESP reply %r" % line[:40])


class RedisConn:
    """A blocking RESP connection to the bench's Redis (the driver's own,
    for INFO and checks; its commands are counted by Redis like any
    other, and RedisMeter.overhead() measures what one snapshot adds)."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), 5)
        self.f = self.sock.makefile("rb")

    def cmd(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        self.sock.sendall(b"".join(out))
        return resp_read(self.f)

    def close(self):
        self.f.close()
        self.sock.close()


def proc_cpu_ns(pid):
    """(CPU ns of every thread from /proc/<pid>/task/*/schedstat, CPU s
    from /proc/<pid>/stat utime + stime). schedstat counts in ns where
    stat counts in 10 ms ticks: the small windows of the directory and
    webhook measurements (bench/run_redis_cost.py) need the former; both
    are reported."""
    ns = 0
    try:
        for t in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
                    ns += int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                pass
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
        x = st[st.rindex(")") + 2:].split()
        ticks = int(x[11]) + int(x[12])
    except (OSError, ValueError):
        return None, None
    return ns, ticks / float(os.sysconf("SC_CLK_TCK"))


class RedisMeter:
    """Redis's own cost over a window: redis-server's CPU (all its
    threads), INFO stats total_net_input_bytes / total_net_output_bytes /
    total_commands_processed and INFO commandstats calls per command, read
    at the window's edges. Commands that scripts run (redis.call) are in
    commandstats, not in total_commands_processed."""

    def __init__(self, port, pid):
        self.pid = pid
        self.conn = RedisConn(port)

    def snap(self):
        info = self.conn.cmd("INFO", "stats", "commandstats")
        ns, stat_s = proc_cpu_ns(self.pid)
        d = {"t": time.monotonic(), "cpu_ns": ns, "cpu_stat_s": stat_s,
             "calls": {}}
        if not isinstance(info, str):
            return None
        for ln in info.splitlines():
            k, _, v = ln.partition(":")
            if k in ("total_net_input_bytes", "total_net_output_bytes",
                     "total_commands_processed"):
                d[k] = int(v)
            elif k.startswith("cmdstat_"):
                m = re.search(r"(?:^|,)calls=(\d+)", v)
                if m:
                    d["calls"][k[8:]] = int(m.group(1))
        return d

    @staticmethod
    def delta(a, b):
        """b - a: seconds, cpu_s (schedstat), cpu_stat_s, in_B, out_B,
        cmds, calls {command: n} (only those that moved)."""
        if not a or not b or a["cpu_ns"] is None or b["cpu_ns"] is None:
            return None
        return {"secs": b["t"] - a["t"],
                "cpu_s": (b["cpu_ns"] - a["cpu_ns"]) / 1e9,
                "cpu_stat_s": b["cpu_stat_s"] - a["cpu_stat_s"],
                "in_B": b["total_net_input_bytes"] -
                a["total_net_input_bytes"],
                "out_B": b["total_net_output_bytes"] -
                a["total_net_output_bytes"],
                "cmds": b["total_commands_processed"] -
                a["total_commands_processed"],
                "calls": {k: v - a["calls"].get(k, 0)
                          for k, v in b["calls"].items()
                          if v - a["calls"].get(k, 0)}}

    def close(self):
        self.conn.close()


def redis_window(meter, t_open_ns, t_close_ns):
    """A thread that snapshots `meter` at two CLOCK_MONOTONIC instants
    (the loader's window); join() it, then read .out (a RedisMeter.delta
    or None)."""
    import threading

    class W(threading.Thread):
        out = None

        def run(self):
            snaps = []
            for t in (t_open_ns, t_close_ns):
                wait = (t - time.monotonic_ns()) / 1e9
                if wait > 0:
                    time.sleep(wait)
                try:
                    snaps.append(meter.snap())
                except (OSError, ValueError):
                    return
            self.out = RedisMeter.delta(*snaps)
    w = W(daemon=True)
    w.start()
    return w


def redis_per_envelope(r, deliveries):
    """Redis's cost per envelope (one PUBLISH a node sent) and per
    delivery, from a window's RedisMeter.delta."""
    if not r:
        return None
    env = r["calls"].get("publish", 0)
    if not env:
        return None
    return {"envelopes": env, "envelopes_per_s": env / r["secs"],
            "util": r["cpu_s"] / r["secs"],
            "cpu_us_per_env": r["cpu_s"] / env * 1e6,
            "cpu_stat_us_per_env": r["cpu_stat_s"] / env * 1e6,
            "in_B_per_env": r["in_B"] / env,
            "out_B_per_env": r["out_B"] / env,
            "cmds_per_env": r["cmds"] / env,
            "cpu_ns_per_delivery": (r["cpu_s"] / deliveries * 1e9
                                    if deliveries else None),
            "out_B_per_delivery": (r["out_B"] / deliveries
                                   if deliveries else None)}


def hub_stats(port):
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/stats" % port,
                                    timeout=5) as r:
            return json.load(r)
    except (OSError, ValueError):
        return None


def node_counters(port):
    """The backplane counters and (msgs_out, writes) of one node."""
    s = hub_stats(port) or {}
    d = dict(s.get("backplane") or {})
    t = s.get("totals") or {}
    d["msgs_out"], d["writes"] = t.get("msgs_out", 0), t.get("writes", 0)
    return d


def backplane(port):
    return node_counters(port)


class Target:
    """What run_fanout.run_loader needs of a server: a peer (mode, path,
    publish), the port the loader's --port names, and the PIDs whose CPU
    it sums. argv[0] is not the hub, so run_loader skips its one-server
    /stats reading."""

    def __init__(self, name, publish, port, pids):
        self.peer = rf.Peer(name, "pusher", ["(%s)" % name],
                            path="/app/app-key", pusher=True,
                            publish=publish)
        self.port = port
        self.pid = ",".join(str(p) for p in pids)


def tids(pid):
    try:
        return {int(t) for t in os.listdir("/proc/%d/task" % pid)}
    except OSError:
        return set()


def start_sched(sched, delay, seconds):
    """perf sched record on both CPUs for `seconds` after `delay`, in the
    background (diagnostic: --sched)."""
    outdir, name, groups = sched
    os.makedirs(outdir, exist_ok=True)
    data = os.path.join(outdir, name + ".sched.data")
    cmd = ("sleep %.1f; exec perf sched record -q -C %s,%s -o %s -- sleep "
           "%.1f" % (delay, rf.SERVER_CPU, rf.LOADER_CPU, data,
                     max(0.5, seconds)))
    return (subprocess.Popen(["sh", "-c", cmd], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL), data, groups)


# perf sched timehist lines: time [cpu] comm[tid] (or comm[tid/pid])
# wait-time sch-delay run-time, in ms.
TIMEHIST = re.compile(r"^\s*[\d.]+\s+\[(\d+)\]\s+(.*?)\[(\d+)(?:/\d+)?\]"
                      r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")


def finish_sched(prof):
    """Scheduling delay (wakeup to running, perf sched timehist's
    "sch delay") per group of threads: p50 / p99 / max in ms, how many
    times they ran, and their run time."""
    proc, data, groups = prof
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
        return None
    try:
        r = subprocess.run(["perf", "sched", "timehist", "-i", data],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                           timeout=300)
    except subprocess.TimeoutExpired:
        return None
    by = {g: [] for g in groups}
    by["loader"], by["other"] = [], []
    run = {g: 0.0 for g in by}
    for ln in r.stdout.decode(errors="replace").splitlines():
        m = TIMEHIST.match(ln)
        if not m:
            continue
        comm, tid = m.group(2), int(m.group(3))
        g = next((g for g, ts in groups.items() if tid in ts), None)
        if g is None:
            if comm.startswith("<idle>"):
                continue
            g = "loader" if comm.startswith("loadgen") else "other"
        by[g].append(float(m.group(5)))
        run[g] += float(m.group(6))
    try:
        os.unlink(data)
    except OSError:
        pass

    def pct(xs, q):
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(q / 100.0 * len(xs)))] if xs else None
    return {g: {"n": len(xs), "p50": pct(xs, 50), "p99": pct(xs, 99),
                "max": max(xs) if xs else None, "run_ms": run[g]}
            for g, xs in by.items()}


def measure(target, args, warmup, duration, nodes=(), sub_ports=None,
            pub_ports=None, profile=None, sched=None, meter=None):
    """One loader run; adds per-node backplane counter deltas and the
    servers' deliveries per write() (whole run, setup included). nodes:
    the servers whose /stats to read. profile: (outdir, name, pids) to
    perf-record those PIDs in the middle of the measurement. sched:
    (outdir, name, {group: tids}) to record the scheduler for a second
    in the middle of it (perf sched). meter: a RedisMeter read at the
    window's edges (the loader is then given its start, --t0), whose
    delta goes to d["redis"] and, per envelope, d["redis_env"]."""
    extra = []
    if sub_ports:
        extra += ["--sub-ports", ",".join(str(p) for p in sub_ports)]
    if pub_ports:
        extra += ["--pub-ports", ",".join(str(p) for p in pub_ports)]
    bp0 = [node_counters(n.port) for n in nodes]
    prof = sch = None
    if profile:
        prof = start_profile(profile, warmup + 1.5, duration - 1)
    if sched:
        # perf sched record takes about a second to start recording.
        sch = start_sched(sched, max(0.0, warmup + duration / 2 - 0.5), 1.0)
    t0 = rw = None
    if meter:
        # The loader's own setup allowance (run_fanout.run_loader).
        t0 = time.monotonic_ns() + int((3.0 + SUBS / 4000.0) * 1e9)
        rw = redis_window(meter, t0 + int(warmup * 1e9),
                          t0 + int((warmup + duration) * 1e9))
    d = rf.run_loader(target, list(args) + extra, warmup, duration,
                      t0_ns=t0)
    if rw:
        rw.join(30)
        d["redis"] = rw.out
        d["redis_env"] = redis_per_envelope(rw.out, d.get("deliveries"))
    if prof:
        finish_profile(prof)
    if sch:
        d["sched"] = finish_sched(sch)
    bp1 = [node_counters(n.port) for n in nodes]
    dw = sum(b1["writes"] - b0["writes"] for b0, b1 in zip(bp0, bp1))
    if dw > 0:
        d["hub_deliveries_per_write"] = sum(
            b1["msgs_out"] - b0["msgs_out"] for b0, b1 in zip(bp0, bp1)) / dw
    d["backplane_delta"] = [
        {k: b1.get(k, 0) - b0.get(k, 0)
         for k in ("published", "received", "own_ignored", "lost", "gaps",
                   "bad")} for b0, b1 in zip(bp0, bp1)]
    d["invalid"] = rf.check_valid(d, "S3")
    if not d["invalid"]:
        lost = sum(x["lost"] + x["gaps"] for x in d["backplane_delta"])
        if lost:
            d["invalid"] = "%d envelopes lost or gaps on the backplane" % lost
    d["msgs_per_s"] = (d["deliveries_per_s"] / SUBS
                       if d.get("deliveries_per_s") else 0)
    return d


def median(xs):
    return rf.median(xs)


def start_profile(profile, delay, seconds):
    """perf record -g of the given PIDs for `seconds`, after `delay` (the
    loader's setup and warm-up), in the background."""
    outdir, name, pids = profile
    os.makedirs(outdir, exist_ok=True)
    data = os.path.join(outdir, name + ".perf.data")
    cmd = ("sleep %.1f; exec perf record -q -g -p %s -o %s -- sleep %.1f" % (
        delay, ",".join(str(p) for p in pids), data, max(1.0, seconds)))
    return (subprocess.Popen(["sh", "-c", cmd], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL), outdir, name, data)


def finish_profile(prof):
    proc, outdir, name, data = prof
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
    for sort, suffix, n in (("comm,dso", "dso", 20), ("comm,sym", "report",
                                                      60)):
        with open(os.path.join(outdir, "%s.%s.txt" % (name, suffix)),
                  "w") as fh:
            r = subprocess.run(["perf", "report", "-i", data, "--no-children",
                                "--sort", sort, "--stdio", "-g", "none"],
                               stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, timeout=120)
            rows = [ln for ln in r.stdout.decode(errors="replace")
                    .splitlines() if "%" in ln and not ln.startswith("#")]
            fh.write("\n".join(rows[:n]) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run (~1 min): 1 rep, short measurements")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", type=float, default=4.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--rate", type=float, default=0,
                    help="fixed open-loop rate (messages/s) for the latency "
                    "measurements instead of half the slower set-up's")
    ap.add_argument("--open-fraction", type=float, default=0.7,
                    help="open-loop rate of the open-* measurements, as a "
                    "fraction of the single node's median closed-loop rate "
                    "on that path (0: skip them)")
    ap.add_argument("--hub", help="lubdub binary (default: BUILD/lubdub)")
    ap.add_argument("--cluster-key-file", metavar="PATH",
                    help="run the three nodes with this --cluster-key-file: "
                    "every envelope MACed and verified (compare cpu_ratio "
                    "with a run without it)")
    ap.add_argument("--redis-cpu", default=None,
                    help="CPU list for redis-server (default: the servers' "
                    "CPU %s; e.g. %s puts it on the loader's core)" % (
                        rf.SERVER_CPU, rf.LOADER_CPU))
    ap.add_argument("--sched", metavar="DIR",
                    help="diagnostic: perf sched record (both CPUs, 1 s in "
                    "the middle) of every half-load measurement; the "
                    "scheduling delay of the servers' threads goes to "
                    "cluster.md")
    ap.add_argument("--profile", metavar="DIR",
                    help="after the run, one more closed-loop measurement "
                    "per setup and path under perf record -g (all server "
                    "PIDs); top symbols per process in DIR/*.report.txt")
    ap.add_argument("--history", action="store_true",
                    help="instead: history's cost in the cluster, the same "
                    "three nodes without and with an app history, paired "
                    "(bench/run_cluster_history.py; --rate defaults to 300 "
                    "there); last line recovery-cluster: ...")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.duration, a.warmup = 1, 2.0, 0.5
    if a.hub:
        rf.HUB = os.path.abspath(a.hub)
    os.makedirs(rf.RESULTS, exist_ok=True)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    for exe, what in ((rf.LOADGEN, "build first (make build)"),
                      (rf.HUB, "build first (make build)"),
                      (REDIS_SERVER, "install redis-server "
                       "(deploy/install-deps.sh cluster)")):
        if not os.access(exe, os.X_OK):
            log("bench-cluster: %s missing: %s" % (exe, what))
            return 2
    if a.history:
        import run_cluster_history
        return run_cluster_history.main(a)
    t_start = time.monotonic()
    load0 = open("/proc/loadavg").read().split()[:3]
    hub_argv = [rf.HUB, "--config", rf.write_hub_config(), "--port", "{port}",
                "--loops", "1", "--bind", "127.0.0.1", "--log-level", "warn"]

    started = []
    meter = None
    try:
        single = rf.Server(rf.Peer("cluster-single", "pusher", hub_argv))
        started.append(single)
        redis = Redis(a.redis_cpu)
        started.append(redis)
        if not single.ok or not redis.ok:
            log("bench-cluster: %s did not start" % (
                "the single node" if not single.ok else "redis-server"))
            return 2
        url = "redis://127.0.0.1:%d/0" % redis.port
        nodes = []
        for k in range(1, NODES + 1):
            key = (["--cluster-key-file", os.path.abspath(a.cluster_key_file)]
                   if a.cluster_key_file else [])
            n = rf.Server(rf.Peer("cluster-n%d" % k, "pusher", hub_argv + [
                "--redis", url, "--node-id", "n%d" % k] + key))
            started.append(n)
            if not n.ok:
                log("bench-cluster: node n%d did not start: %s" % (
                    k, n.log_text().strip()[-200:]))
                return 2
            nodes.append(n)
        end = time.monotonic() + 10
        while time.monotonic() < end and not all(
                backplane(n.port).get("up") == 1 for n in nodes):
            time.sleep(0.1)
        if not all(backplane(n.port).get("up") == 1 for n in nodes):
            log("bench-cluster: a node's backplane did not come up")
            return 2
        ports = [n.port for n in nodes]
        cpids = [n.pid for n in nodes] + [redis.pid]
        meter = RedisMeter(redis.port, redis.pid)
        tgt = {
            ("single", "rest"): Target("single_rest", "rest", single.port,
                                       [single.pid]),
            ("single", "ws"): Target("single_ws", "ws", single.port,
                                     [single.pid]),
            ("cluster", "rest"): Target("cluster_rest", "rest", ports[0],
                                        cpids),
            ("cluster", "ws"): Target("cluster_ws", "ws", ports[0], cpids),
        }
        mt = 2 if a.quick else 5
        # results[(setup, path, kind)] = per-rep dicts; kind sat | lat |
        # open
        results = {}

        def run(setup, path, kind, rep, args):
            t = tgt[(setup, path)]
            sched = None
            if a.sched and kind == "lat":
                groups = ({"single": tids(single.pid)} if setup == "single"
                          else {"nodes": set().union(
                              *[tids(n.pid) for n in nodes]),
                                "redis": tids(redis.pid)})
                sched = (a.sched, "%s-%s-%d" % (setup, path, rep), groups)
            if setup == "cluster":
                d = measure(t, args, a.warmup, a.duration, nodes,
                            sub_ports=ports,
                            pub_ports=ports if path == "rest" else None,
                            sched=sched, meter=meter)
            else:
                d = measure(t, args, a.warmup, a.duration, [single],
                            sched=sched)
            d["rep"] = rep
            results.setdefault((setup, path, kind), []).append(d)
            re_ = d.get("redis_env")
            log("bench-cluster: rep %d %s %s %s: %s%s" % (
                rep + 1, kind, setup, path, d["invalid"] or
                "%.0f deliveries/s, %.3f cpu s/M, p50 %.0f p99 %.0f us%s" % (
                    d["deliveries_per_s"], d["server_cpu_s_per_M"] or 0,
                    d["lat_us"]["p50"], d["lat_us"]["p99"],
                    ", loader-bound" if d["loader_bound"] else ""),
                "; redis %.0f envelopes/s, %.2f us, %.0f B in, %.0f B out "
                "per envelope" % (re_["envelopes_per_s"],
                                  re_["cpu_us_per_env"], re_["in_B_per_env"],
                                  re_["out_B_per_env"]) if re_ else ""))

        def order(rep):
            return ("single", "cluster") if rep % 2 == 0 else \
                ("cluster", "single")

        sat_args = ["--subs", SUBS, "--size", 32, "--window", 32,
                    "--msg-timeout", mt]
        for rep in range(a.reps):
            for path in ("rest", "ws"):
                for setup in order(rep):
                    run(setup, path, "sat", rep, sat_args)

        def lat_args_for(path, r):
            args = ["--subs", SUBS, "--size", 32, "--rate", "%.0f" % r,
                    "--msg-timeout", mt]
            # REST: 32 keep-alive connections share the rate, as in sat-rest
            # (a backend's agent pool); client events: one publisher.
            return args + (["--pubs", 32] if path == "rest" else [])

        def valid(key):
            return [d for d in results.get(key, []) if not d["invalid"]]

        # Half load: half the single node's saturated message rate on that
        # path (median of this run's sat reps), offered in open loop to
        # both set-ups. Not "where the single node is half busy": a hub
        # that corks spends whatever CPU it has on more, smaller writes
        # (an open loop at a few hundred messages/s gets 2-8 deliveries per
        # write(), the closed loop 31), so its CPU share says little about
        # how far it is from saturation, and moved with the machine's
        # noise from 45 % to 100 % at one rate in trials.
        # Half of the slower set-up's rate (the cluster's, where it
        # saturates first): at half the single node's, a cluster that
        # carries less would be measured at or past its own saturation,
        # which is queueing, not the latency the Redis hop adds.
        rates = {}
        for path in ("rest", "ws"):
            ms = [median([d["msgs_per_s"] for d in valid((setup, path,
                                                          "sat"))])
                  for setup in ("single", "cluster")]
            ms = [m for m in ms if m]
            rates[path] = a.rate or (0.5 * min(ms) if ms else 0)
        for rep in range(a.reps):
            for path in ("rest", "ws"):
                if not rates[path]:
                    continue
                for setup in order(rep + 1):
                    run(setup, path, "lat", rep,
                        lat_args_for(path, rates[path]))

        # Past the cluster's closed-loop rate, in open loop: the same
        # offered rate for both set-ups, a fraction of the single node's
        # closed-loop rate (which the cluster's closed loop reaches about
        # half of). Kept up = valid (no deliveries missing, no timeouts).
        open_rates = {}
        for path in ("rest", "ws"):
            ms = median([d["msgs_per_s"] for d in valid(("single", path,
                                                         "sat"))])
            open_rates[path] = a.open_fraction * ms if ms else 0
        for rep in range(a.reps):
            for path in ("rest", "ws"):
                if not open_rates[path]:
                    continue
                for setup in order(rep):
                    run(setup, path, "open", rep,
                        lat_args_for(path, open_rates[path]))

        if a.profile:
            for path in ("rest", "ws"):
                for setup in ("single", "cluster"):
                    pids = [single.pid] if setup == "single" else cpids
                    d = measure(tgt[(setup, path)], sat_args, a.warmup,
                                max(a.duration, 4.0),
                                [single] if setup == "single" else nodes,
                                sub_ports=ports if setup == "cluster" else
                                None,
                                pub_ports=ports if setup == "cluster" and
                                path == "rest" else None,
                                profile=(a.profile, "%s-%s" % (setup, path),
                                         pids))
                    d["rep"] = 0
                    results[(setup, path, "profile")] = [d]
                    log("bench-cluster: profiled %s %s: %.3f cpu s/M, "
                        "%.2f deliveries/write -> %s" % (
                            setup, path, d["server_cpu_s_per_M"] or 0,
                            d.get("hub_deliveries_per_write") or 0,
                            a.profile))

        # Idle check: n3 has subscribers, but none of the channel published.
        holder = subprocess.Popen(
            ["taskset", "-c", rf.LOADER_CPU, rf.LOADGEN, "--mode", "pusher",
             "--port", str(ports[2]), "--subs", str(IDLE_SUBS), "--pubs", "0",
             "--channel", "idle-elsewhere", "--warmup", "0", "--duration",
             str(a.warmup + a.duration + 30), "--quiet"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        n3_sessions = 0
        try:
            end = time.monotonic() + 15
            while time.monotonic() < end and holder.poll() is None:
                t = (hub_stats(ports[2]) or {}).get("totals") or {}
                n3_sessions = t.get("sessions", 0)
                if (n3_sessions >= IDLE_SUBS and
                        t.get("subscriptions", 0) >= IDLE_SUBS):
                    break
                time.sleep(0.2)
            idle = measure(tgt[("cluster", "rest")], sat_args, a.warmup,
                           a.duration, nodes, sub_ports=ports[:2],
                           pub_ports=ports[:2])
        finally:
            holder.kill()
            holder.wait(5)
        idle["rep"] = 0
        results[("cluster", "rest", "idle")] = [idle]
    finally:
        if meter:
            meter.close()
        for s in reversed(started):
            s.stop()
    load1 = open("/proc/loadavg").read().split()[:3]
    elapsed = time.monotonic() - t_start

    def by_rep(key):
        return {d["rep"]: d for d in results.get(key, [])
                if not d["invalid"]}

    def per_rep(path, kind, f):
        s, c = by_rep(("single", path, kind)), by_rep(("cluster", path,
                                                       kind))
        return [f(c[r], s[r]) for r in sorted(s) if r in c]

    def paired(path, kind, f):
        return median(per_rep(path, kind, f))

    def med(key, f):
        return median([f(d) for d in results.get(key, [])
                       if not d["invalid"]])

    def cpu_r(c, s):
        a_, b_ = c.get("server_cpu_s_per_M"), s.get("server_cpu_s_per_M")
        return a_ / b_ if a_ and b_ else None

    # At saturation (closed loop: each setup at its own top rate) and at
    # half load (open loop: both at the same offered rate; the summary's
    # cpu_ratio_half*).
    cpu_ratio = {p: paired(p, "sat", cpu_r) for p in ("rest", "ws")}
    cpu_ratio_half = {p: paired(p, "lat", cpu_r) for p in ("rest", "ws")}
    cpu_ratio_open = {p: paired(p, "open", cpu_r) for p in ("rest", "ws")}

    def kept(path):
        """The cluster's open-* reps that kept up (valid) / all of them."""
        runs = results.get(("cluster", path, "open"), [])
        return "%d/%d" % (sum(1 for d in runs if not d["invalid"]),
                          len(runs)) if runs else "n/a"

    def p99_diff(c, s):
        return (c["lat_us"]["p99"] - s["lat_us"]["p99"]) / 1e3

    p99_added = {p: paired(p, "lat", p99_diff) for p in ("rest", "ws")}

    # Inside one cluster measurement (client events: the publisher is on
    # n1, so n1's subscribers are served locally and n2's and n3's through
    # Redis): the remote subscribers' p99 minus the local ones', both
    # measured at the same moment under the same machine noise.
    def hop(d, q="p99"):
        by = d.get("lat_us_by_port") or []
        if len(by) < 3 or not all(x["n"] for x in by):
            return None
        return ((by[1][q] + by[2][q]) / 2 - by[0][q]) / 1e3

    hop_p99 = med(("cluster", "ws", "lat"), hop)
    hop_p50 = med(("cluster", "ws", "lat"), lambda d: hop(d, "p50"))
    hops = [hop(d) for d in results.get(("cluster", "ws", "lat"), [])
            if not d["invalid"]]
    bound = sorted({"%s/%s/%s" % k for k in results for d in results[k]
                    if not d["invalid"] and d.get("loader_bound")})
    idle_ok = not idle["invalid"]
    idle_cpu = idle["server_cpu_s_each"][2] if idle_ok and len(
        idle.get("server_cpu_s_each", [])) > 2 else None
    idle_recv = idle["backplane_delta"][2]["received"] if idle_ok else None
    idle_win = idle.get("window_s") or 1

    def f(x, nd=3):
        return ("%%.%df" % nd) % x if x is not None else "n/a"

    def open_vs_sat(path):
        """The cluster's deliveries/s in open loop / in its closed loop."""
        o = med(("cluster", path, "open"), lambda d: d["deliveries_per_s"])
        c = med(("cluster", path, "sat"), lambda d: d["deliveries_per_s"])
        return o / c if o and c else None

    # Tables
    lines = ["# Cluster results (make bench-cluster%s)" % (
        " --quick" if a.quick else ""), "",
        "- date: %s; reps: %d; measurement %.1f s after %.1f s warm-up; "
        "whole run %.0f s" % (time.strftime("%Y-%m-%d %H:%M:%S %Z"), a.reps,
                              a.duration, a.warmup, elapsed),
        "- servers (single node; Redis + 3 nodes) pinned to CPU %s, loader "
        "to CPU %s, --loops 1%s; loadavg before %s, after %s" % (
            rf.SERVER_CPU, rf.LOADER_CPU,
            "; redis-server on CPU %s (--redis-cpu)" % a.redis_cpu
            if a.redis_cpu else "", " ".join(load0), " ".join(load1)),
        "- %d subscribers of one channel, 32 B; cluster: subscriber i on "
        "node i mod 3; REST publishers spread the same way, the client-event "
        "publisher on n1" % SUBS,
        "- half-load rates (messages/s): REST %s, client events %s%s" % (
            f(rates["rest"], 0), f(rates["ws"], 0),
            " (fixed by --rate)" if a.rate else
            " (half the slower set-up's median closed-loop rate in this run)"),
        "- open-loop rates past the cluster's closed loop (messages/s): "
        "REST %s, client events %s (%s of the single node's median "
        "closed-loop rate)" % (f(open_rates["rest"], 0),
                               f(open_rates["ws"], 0), a.open_fraction),
        ""]
    if bound:
        lines.append("- LOADER SATURATED its core (>= 95%% busy, servers "
                     "< 90%%) in: %s: deliveries/s there understate the "
                     "servers; judge by CPU s per M deliveries." %
                     ", ".join(bound))
        lines.append("")
    lines += ["| measurement | setup | deliveries/s | server CPU s / M "
              "deliveries | CPU s per process (nodes.., redis) | p50 µs | "
              "p99 µs | p99.9 µs | loader % | servers % | foreign % "
              "cpu0/cpu1 | deliveries / write | received per node | "
              "valid reps |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for kind in ("sat", "lat", "open", "idle", "profile"):
        for path in ("rest", "ws"):
            for setup in ("single", "cluster"):
                runs = results.get((setup, path, kind))
                if not runs:
                    continue
                v = [d for d in runs if not d["invalid"]]
                why = "; ".join(sorted({d["invalid"] for d in runs
                                        if d["invalid"]}))
                each = [median([d["server_cpu_s_each"][i] for d in v])
                        for i in range(len(v[0]["server_cpu_s_each"]))] \
                    if v else []
                recv = [median([d["backplane_delta"][i]["received"]
                                for d in v])
                        for i in range(len(v[0]["backplane_delta"]))] \
                    if v and setup == "cluster" else []
                nlb = sum(1 for d in v if d.get("loader_bound"))
                lines.append(
                    "| %s %s | %s | %s | %s | %s | %s | %s | %s | %s | %s "
                    "| %s | %s | %s | %d/%d%s%s |" % (
                        kind, "REST" if path == "rest" else "client-event",
                        setup,
                        f(med((setup, path, kind),
                              lambda d: d["deliveries_per_s"]), 0),
                        f(med((setup, path, kind),
                              lambda d: d["server_cpu_s_per_M"])),
                        " / ".join(f(x, 2) for x in each) or "-",
                        f(med((setup, path, kind),
                              lambda d: d["lat_us"]["p50"]), 0),
                        f(med((setup, path, kind),
                              lambda d: d["lat_us"]["p99"]), 0),
                        f(med((setup, path, kind),
                              lambda d: d["lat_us"]["p999"]), 0),
                        f(med((setup, path, kind),
                              lambda d: 100 * d["loader_util"]), 0),
                        f(med((setup, path, kind),
                              lambda d: 100 * d["server_util"]), 0),
                        "%s/%s" % (f(med((setup, path, kind), lambda d: 100 *
                                         d["foreign_server_cpu"]), 0),
                                   f(med((setup, path, kind), lambda d: 100 *
                                         d["foreign_loader_cpu"]), 0)),
                        f(med((setup, path, kind),
                              lambda d: d.get("hub_deliveries_per_write")),
                          1),
                        " / ".join("%d" % x for x in recv) or "-",
                        len(v), len(runs), (" (" + why + ")") if why else "",
                        (", %d loader-bound" % nlb) if nlb else ""))
    sch_rows = []
    for path in ("rest", "ws"):
        for setup in ("single", "cluster"):
            v = [d for d in results.get((setup, path, "lat"), [])
                 if d.get("sched")]
            for g in (("single",) if setup == "single" else
                      ("nodes", "redis")) + ("loader", "other"):
                xs = [d["sched"][g] for d in v if d["sched"].get(g) and
                      d["sched"][g]["n"]]
                if not xs:
                    continue
                sch_rows.append("| lat %s | %s | %s | %d | %s | %s | %s | %s |"
                                % ("REST" if path == "rest" else
                                   "client-event", setup, g,
                                   median([x["n"] for x in xs]),
                                   f(median([x["p50"] for x in xs])),
                                   f(median([x["p99"] for x in xs])),
                                   f(median([x["max"] for x in xs])),
                                   f(median([x["run_ms"] / 10.0
                                             for x in xs]), 0)))
    if sch_rows:
        lines += ["", "Scheduling delay at half load (`--sched`: perf sched "
                  "record of both CPUs for 1 s in the middle of each "
                  "measurement; `perf sched timehist` \"sch delay\", the time "
                  "a woken thread waited for a CPU; medians over reps):", "",
                  "| measurement | setup | threads | runs in 1 s | p50 ms | "
                  "p99 ms | max ms | CPU % |", "|---|---|---|---|---|---|---|"
                  "---|"] + sch_rows
    def rng(key, fn, nd):
        """median (min–max) over the valid reps, or n/a."""
        xs = [fn(d["redis_env"]) for d in results.get(key, [])
              if not d["invalid"] and d.get("redis_env")]
        xs = [x for x in xs if x is not None]
        if not xs:
            return "n/a"
        return "%s (%s–%s)" % (f(median(xs), nd), f(min(xs), nd),
                                f(max(xs), nd))
    rrows = []
    for kind in ("sat", "lat", "open"):
        for path in ("rest", "ws"):
            key = ("cluster", path, kind)
            if not results.get(key):
                continue
            rrows.append("| %s %s | %s | %s | %s | %s | %s | %s | %s | %s |"
                         % (kind, "REST" if path == "rest" else
                            "client-event",
                            rng(key, lambda r: r["envelopes_per_s"], 0),
                            rng(key, lambda r: 100 * r["util"], 1),
                            rng(key, lambda r: r["cpu_us_per_env"], 2),
                            rng(key, lambda r: r["in_B_per_env"], 0),
                            rng(key, lambda r: r["out_B_per_env"], 0),
                            rng(key, lambda r: r["cmds_per_env"], 3),
                            rng(key, lambda r: r["cpu_ns_per_delivery"], 2),
                            rng(key, lambda r: r["out_B_per_delivery"], 2)))
    if rrows:
        lines += ["", "Redis itself in the cluster's measurements (issue 33; "
                  "redis-server's CPU from /proc/<pid>/task/*/schedstat, "
                  "INFO stats and commandstats read at the loader's window "
                  "edges; an envelope is one PUBLISH a node sent, delivered "
                  "by Redis to the 3 nodes subscribed; median (min–max) "
                  "over valid reps):", "",
                  "| measurement | envelopes/s | Redis % of a core | CPU µs "
                  "/ envelope | B in / envelope | B out / envelope | "
                  "commands / envelope | CPU ns / delivery | B out / "
                  "delivery |", "|---|---|---|---|---|---|---|---|---|"] + \
            rrows
    lines += ["", "Remote minus local p99 inside each cluster client-event "
              "half-load measurement (n2/n3 subscribers through Redis, n1's "
              "local): %s ms (per rep: %s); p50 %s ms." % (
                  f(hop_p99, 2), " ".join(f(x, 1) for x in hops) or "n/a",
                  f(hop_p50, 2))]
    lines += ["", "Paired ratios (median over reps of cluster / single in "
              "the same rep): CPU per delivery at saturation REST %s, client "
              "events %s; at half load (same offered rate; 1.0 by "
              "construction where both set-ups are CPU-full, servers %% "
              "above) REST %s, client events %s; added p99 at half load REST "
              "%s ms, client events %s ms." % (
                  f(cpu_ratio["rest"]), f(cpu_ratio["ws"]),
                  f(cpu_ratio_half["rest"]), f(cpu_ratio_half["ws"]),
                  f(p99_added["rest"], 2), f(p99_added["ws"], 2)),
              "Per rep: CPU ratio at saturation REST %s, client events %s; "
              "at half load REST %s, client events %s; added p99 (ms) REST "
              "%s, client events %s." % tuple(
                  " ".join(f(x, nd) for x in per_rep(p, k, fn)) or "n/a"
                  for k, fn, nd, p in (
                      ("sat", cpu_r, 2, "rest"), ("sat", cpu_r, 2, "ws"),
                      ("lat", cpu_r, 2, "rest"), ("lat", cpu_r, 2, "ws"),
                      ("lat", p99_diff, 1, "rest"),
                      ("lat", p99_diff, 1, "ws"))),
              "In open loop at %s of the single node's closed-loop rate "
              "(the same offered rate for both): the cluster kept up in "
              "REST %s, client events %s reps; CPU per delivery cluster / "
              "single REST %s, client events %s; its deliveries/s there "
              "against its own closed loop REST %s, client events %s." % (
                  a.open_fraction, kept("rest"), kept("ws"),
                  f(cpu_ratio_open["rest"]), f(cpu_ratio_open["ws"]),
                  f(open_vs_sat("rest")), f(open_vs_sat("ws"))),
              "Idle check: n3 (%d sessions subscribed to another channel, "
              "none to the published one) used %s CPU s in the %.1f s "
              "window; its backplane received %s envelopes." % (
                  n3_sessions, f(idle_cpu), idle_win,
                  "%d" % idle_recv if idle_recv is not None else "n/a"), ""]
    with open(os.path.join(rf.RESULTS, "cluster.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    with open(os.path.join(rf.RESULTS, "cluster.json"), "w") as fh:
        json.dump({"rates": rates, "load": [load0, load1],
                   "results": {"/".join(k): v for k, v in results.items()}},
                  fh, indent=1)
    log("bench-cluster: tables in bench/results/cluster.md (%.0f s)" %
        elapsed)
    if bound:
        log("bench-cluster: the loader saturated its core in %s" %
            ", ".join(bound))

    def worst(dct):
        xs = [x for x in dct.values() if x is not None]
        return max(xs) if xs else None

    def rate(setup, path):
        return f(med((setup, path, "sat"), lambda d: d["deliveries_per_s"]),
                 0)

    def lat(setup, path, q):
        return f(med((setup, path, "lat"),
                     lambda d: d["lat_us"][q] / 1e3), 2)

    def cpu_m(setup, path, kind="sat"):
        return f(med((setup, path, kind), lambda d: d["server_cpu_s_per_M"]))

    def util_half(path):
        """cluster/single servers' CPU % of their core at the half-load
        rate: at ~100 % a set-up spent all it had (a corking hub spends
        spare CPU on smaller writes), and its CPU per delivery there is
        what keeping up took, not what the rate needs at the least."""
        return "/".join(f(med((setup, path, "lat"),
                              lambda d: 100 * d["server_util"]), 0)
                        for setup in ("cluster", "single"))

    def foreign_half():
        """Other processes' CPU on the servers' / the loader's core during
        the half-load measurements (both set-ups, median, % of a core):
        the machine's own noise in the latency figures."""
        v = [d for path in ("rest", "ws") for setup in ("single", "cluster")
             for d in results.get((setup, path, "lat"), [])
             if not d["invalid"]]
        return "/".join(f(median([100 * d[k] for d in v]), 0) for k in (
            "foreign_server_cpu", "foreign_loader_cpu"))

    def renv(path, kind, k, nd):
        """A per-envelope Redis figure of the cluster's measurements of one
        kind and path (median over reps)."""
        return f(med(("cluster", path, kind),
                     lambda d: (d.get("redis_env") or {}).get(k)), nd)

    def renv_all(k, nd):
        """The same over every cluster measurement (sat, lat, open; both
        paths): bytes and commands per envelope do not depend on the
        rate."""
        return f(median([d["redis_env"][k] for key, runs in results.items()
                         if key[0] == "cluster" and key[2] in
                         ("sat", "lat", "open") for d in runs
                         if not d["invalid"] and d.get("redis_env")]), nd)

    print("cluster: cpu_ratio=%s cpu_ratio_rest=%s cpu_ratio_ws=%s "
          "cpu_s_per_M=%s single_cpu_s_per_M=%s "
          "p99_added_ms=%s p99_added_ms_rest=%s p99_added_ms_ws=%s "
          "hop_p50_ms_ws=%s hop_p99_ms_ws=%s "
          "idle_node_cpu_s=%s idle_node_received=%s "
          "deliveries_per_s=%s single_deliveries_per_s=%s "
          "deliveries_per_s_ws=%s single_deliveries_per_s_ws=%s "
          "p50_ms_rest=%s p99_ms_rest=%s single_p50_ms_rest=%s "
          "single_p99_ms_rest=%s p50_ms_ws=%s p99_ms_ws=%s single_p50_ms_ws=%s "
          "single_p99_ms_ws=%s half_rate_rest=%s half_rate_ws=%s "
          "cpu_ratio_half=%s cpu_ratio_half_rest=%s cpu_ratio_half_ws=%s "
          "cpu_s_per_M_half=%s single_cpu_s_per_M_half=%s "
          "cpu_s_per_M_half_ws=%s single_cpu_s_per_M_half_ws=%s "
          "servers_util_half_rest=%s servers_util_half_ws=%s "
          "load1=%s loader_saturated=%s foreign_pct_half=%s "
          "open_rate_rest=%s open_rate_ws=%s open_kept_rest=%s "
          "open_kept_ws=%s cpu_ratio_open_rest=%s cpu_ratio_open_ws=%s "
          "open_vs_sat_rest=%s open_vs_sat_ws=%s "
          "redis_cpu_us_per_envelope_rest=%s redis_cpu_us_per_envelope_ws=%s "
          "redis_cpu_us_per_envelope_open_rest=%s "
          "redis_cpu_us_per_envelope_open_ws=%s redis_in_B_per_envelope=%s "
          "redis_out_B_per_envelope=%s redis_cmds_per_envelope=%s "
          "redis_cpu_ns_per_delivery_open_ws=%s" % (
              f(worst(cpu_ratio)), f(cpu_ratio["rest"]), f(cpu_ratio["ws"]),
              cpu_m("cluster", "rest"), cpu_m("single", "rest"),
              f(worst(p99_added), 2), f(p99_added["rest"], 2),
              f(p99_added["ws"], 2), f(hop_p50, 2), f(hop_p99, 2),
              f(idle_cpu),
              "%d" % idle_recv if idle_recv is not None else "n/a",
              rate("cluster", "rest"), rate("single", "rest"),
              rate("cluster", "ws"), rate("single", "ws"),
              lat("cluster", "rest", "p50"), lat("cluster", "rest", "p99"),
              lat("single", "rest", "p50"), lat("single", "rest", "p99"),
              lat("cluster", "ws", "p50"), lat("cluster", "ws", "p99"),
              lat("single", "ws", "p50"), lat("single", "ws", "p99"),
              f(rates["rest"], 0), f(rates["ws"], 0),
              f(worst(cpu_ratio_half)), f(cpu_ratio_half["rest"]),
              f(cpu_ratio_half["ws"]),
              cpu_m("cluster", "rest", "lat"), cpu_m("single", "rest", "lat"),
              cpu_m("cluster", "ws", "lat"), cpu_m("single", "ws", "lat"),
              util_half("rest"), util_half("ws"),
              "/".join(load0[:1] + load1[:1]),
              "yes" if bound else "no", foreign_half(),
              f(open_rates["rest"], 0), f(open_rates["ws"], 0),
              kept("rest"), kept("ws"), f(cpu_ratio_open["rest"]),
              f(cpu_ratio_open["ws"]), f(open_vs_sat("rest"), 2),
              f(open_vs_sat("ws"), 2),
              renv("rest", "lat", "cpu_us_per_env", 2),
              renv("ws", "lat", "cpu_us_per_env", 2),
              renv("rest", "open", "cpu_us_per_env", 2),
              renv("ws", "open", "cpu_us_per_env", 2),
              renv_all("in_B_per_env", 0), renv_all("out_B_per_env", 0),
              renv_all("cmds_per_env", 3),
              renv("ws", "open", "cpu_ns_per_delivery", 2)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
