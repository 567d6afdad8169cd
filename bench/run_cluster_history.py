#!/usr/bin/env python3
"""History's cost in a cluster: `bench/run_cluster.py --history` (python3
stdlib only; issue 35, docs/BENCHMARKS.md "Recovery in a cluster").

A node where a publication enters with history on writes it to Redis
before its PUBLISH, on the same command connection: XADD to the channel's
stream (MAXLEN ~ size), PEXPIRE ttl, HSET the origin's last seq, PEXPIRE
2 x ttl (server/redis/redis_pub.c, docs/SCALING.md "What lives in
Redis"). This driver measures what those four commands cost, on
bench-cluster's placement (redis-server and three nodes on CPU 0, --loops
1 each; the loader on CPU 1):

1. Per publication, paired. The same three nodes on one redis-server,
   started with an app config without history ("off") and with
   "history": {"ttl": "120s", "size": 1000} ("on"), the two interleaved
   rep by rep (the order alternating), each started afresh per rep and
   running three paths: `rest` (32 keep-alive REST connections spread
   over the three nodes sharing an open-loop rate, --rate, default 300
   messages/s), `ws` (one client-event publisher on n1, the same rate)
   and `sat` (bench-cluster's sat-rest: closed loop, a window of 32 over
   the 32 REST connections, where each node's writes reach Redis
   pipelined), 1,000 subscribers of one channel spread over the nodes, 32 B
   payloads. Over the loader's window (Redis read at its edges, as
   bench-cluster does): INFO commandstats calls per publication (a
   publication is one PUBLISH call: one envelope), redis-server's CPU
   (schedstat, all threads) per publication, and the three nodes' CPU
   per delivery (/proc/<pid>/stat); on/off ratios are medians of per-rep
   ratios.

2. Redis memory per retained entry. On a fresh "on" cluster, N events of
   bench/corpus/laravel_1k.json (a 1,278 B event) through batch_events on
   n1 onto a channel nobody holds: INFO memory used_memory before and
   after, divided by the stream's XLEN. Twice: 1,000 events (the stream
   holds them all) and then 4,000 more (trimmed to about the size: what
   a busy channel keeps).

Tables go to bench/results/cluster-history.md, raw figures to
cluster-history.json. The last line printed is the summary:

  recovery-cluster: redis_calls_per_pub_on=N redis_calls_per_pub_off=N
  redis_cpu_us_per_pub_on=X redis_cpu_us_per_pub_off=X
  node_cpu_on_vs_off=R redis_bytes_per_entry=N ...

(bench/README.md, "Recovery in a cluster").
"""
import json
import os
import sys
import time

sys.dont_write_bytecode = True  # no bench/__pycache__ from the imports
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_fanout as rf  # noqa: E402
import run_compression as rc  # noqa: E402  (the corpus)
import run_recovery as rr  # noqa: E402  (write_config, publish_batches)
import run_cluster as cl  # noqa: E402  (Redis, RedisMeter, measure)

SUBS = 1000
PATHS = ("rest", "ws", "sat")
VARIANTS = ("off", "on")
PREFIX = "lubdub"  # the nodes' --redis-prefix default
MEM_FIRST, MEM_MORE = 1000, 4000


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def start_nodes(redis, cfg, tag, started):
    """Three nodes on `redis` with app config `cfg`; their rf.Servers (in
    `started` too, so a failure stops them) or None."""
    url = "redis://127.0.0.1:%d/0" % redis.port
    nodes = []
    for k in range(1, cl.NODES + 1):
        n = rf.Server(rf.Peer("hist-%s-n%d" % (tag, k), "pusher", [
            rf.HUB, "--config", cfg, "--port", "{port}", "--loops", "1",
            "--bind", "127.0.0.1", "--log-level", "warn", "--redis", url,
            "--node-id", "n%d" % k]))
        started.append(n)
        if not n.ok:
            log("bench-cluster --history: node n%d did not start: %s" % (
                k, n.log_text().strip()[-200:]))
            return None
        nodes.append(n)
    end = time.monotonic() + 10
    while time.monotonic() < end and not all(
            cl.backplane(n.port).get("up") == 1 for n in nodes):
        time.sleep(0.1)
    if not all(cl.backplane(n.port).get("up") == 1 for n in nodes):
        log("bench-cluster --history: a node's backplane did not come up")
        return None
    return nodes


def stop_nodes(nodes, started):
    for n in reversed(nodes):
        n.stop()
        if n in started:
            started.remove(n)


def info(conn, section):
    """INFO <section> as {field: int or str}."""
    out = {}
    txt = conn.cmd("INFO", section)
    for ln in (txt if isinstance(txt, str) else "").splitlines():
        k, _, v = ln.partition(":")
        if not v:
            continue
        try:
            out[k] = int(v)
        except ValueError:
            out[k] = v
    return out


def history_keys(conn):
    """The history streams and last-seq hashes Redis holds."""
    keys, cur = [], "0"
    while True:
        r = conn.cmd("SCAN", cur, "MATCH", PREFIX + ":history*", "COUNT",
                     1000)
        if not isinstance(r, list):
            return keys
        cur, batch = r[0], r[1] or []
        keys += batch
        if cur == "0":
            return keys


def per_pub(d):
    """Redis's figures per publication (one PUBLISH) in a window."""
    r = d.get("redis")
    if not r:
        return None
    pubs = r["calls"].get("publish", 0)
    if not pubs:
        return None
    calls = sum(r["calls"].values())
    return {"pubs": pubs, "calls": calls,
            "calls_per_pub": calls / pubs,
            "by_cmd": {k: v / pubs for k, v in sorted(r["calls"].items())},
            "cpu_us_per_pub": r["cpu_s"] / pubs * 1e6,
            "in_B_per_pub": r["in_B"] / pubs}


def run_cpu(a, redis, meter, started):
    results = []
    mt = 1.5 if a.quick else 5
    for rep in range(a.reps):
        order = VARIANTS if rep % 2 == 0 else VARIANTS[::-1]
        for var in order:
            cfg = rr.write_config("cluster-" + var,
                                  rr.HISTORY_ON if var == "on" else None)
            nodes = start_nodes(redis, cfg, var, started)
            if not nodes:
                return results
            ports = [n.port for n in nodes]
            pids = [n.pid for n in nodes]
            try:
                paths = PATHS[rep % 3:] + PATHS[:rep % 3]
                for path in paths:
                    t = cl.Target("hist_%s_%s" % (var, path),
                                  "ws" if path == "ws" else "rest", ports[0],
                                  pids)
                    args = ["--subs", SUBS, "--size", 32, "--rate",
                            "%.0f" % a.rate, "--msg-timeout", mt]
                    if path == "rest":
                        args += ["--pubs", 32]
                    elif path == "sat":
                        # bench-cluster's sat-rest: closed loop, the window
                        # of 32 over 32 REST connections spread over the
                        # nodes; Redis gets the nodes' writes pipelined.
                        args = ["--subs", SUBS, "--size", 32, "--window", 32,
                                "--msg-timeout", mt]
                    d = cl.measure(t, args, a.warmup, a.duration, nodes,
                                   sub_ports=ports,
                                   pub_ports=None if path == "ws"
                                   else ports, meter=meter)
                    d.update(rep=rep, var=var, path=path,
                             per_pub=per_pub(d))
                    if not d["invalid"] and not d["per_pub"]:
                        d["invalid"] = "no Redis window (no PUBLISH seen)"
                    hist = d["per_pub"] and d["per_pub"]["by_cmd"].get(
                        "xadd", 0)
                    if not d["invalid"] and var == "on" and hist < 0.99:
                        d["invalid"] = ("history not written: %.3f XADD per "
                                        "publication" % hist)
                    if not d["invalid"] and var == "off" and hist:
                        d["invalid"] = "XADD with history off"
                    pp = d["per_pub"] or {}
                    log("bench-cluster --history: rep %d %s %s: %s" % (
                        rep + 1, var, path, d["invalid"] or (
                            "%.0f deliveries/s, nodes %.3f cpu s/M; redis "
                            "%.2f calls, %.2f us per publication" % (
                                d["deliveries_per_s"],
                                d["server_cpu_s_per_M"] or 0,
                                pp.get("calls_per_pub", 0),
                                pp.get("cpu_us_per_pub", 0)))))
                    results.append(d)
            finally:
                stop_nodes(nodes, started)
    return results


def run_memory(redis, started):
    """Redis used_memory per retained entry of the 1 KiB corpus event."""
    raw, ev = rc.read_event(rc.CORPUS[0][1])
    ch = rc.subscribed_channel(ev)
    cfg = rr.write_config("cluster-mem", rr.HISTORY_ON)
    nodes = start_nodes(redis, cfg, "mem", started)
    out = {"event_B": len(raw), "channel": ch, "rows": []}
    if not nodes:
        out["error"] = "the nodes did not start"
        return out
    conn = cl.RedisConn(redis.port)
    key = "%s:history:%s:%s" % (PREFIX, rr.APP_ID, ch)
    try:
        time.sleep(1.0)  # the nodes' start-up writes settle
        m0 = info(conn, "memory")["used_memory"]
        sent = 0
        for n in (MEM_FIRST, MEM_MORE):
            rr.publish_batches(nodes[0].port, ch, ev["event"], ev["data"], n)
            sent += n
            # The writes are asynchronous: wait until the last is in (its
            # seq in the last-ids hash).
            rr.wait_for(lambda: max([int(v) for v in (conn.cmd(
                "HVALS", "%s:history-last:%s:%s" % (PREFIX, rr.APP_ID, ch))
                or [0])]) >= sent, 30, 0.05)
            time.sleep(0.5)
            m1 = info(conn, "memory")["used_memory"]
            kept = conn.cmd("XLEN", key)
            row = {"sent": sent, "kept": kept, "used0": m0, "used1": m1,
                   "per_entry": (m1 - m0) / kept if kept else None,
                   "stream_usage": conn.cmd("MEMORY", "USAGE", key,
                                            "SAMPLES", "0")}
            if isinstance(row["stream_usage"], int) and kept:
                row["usage_per_entry"] = row["stream_usage"] / kept
            out["rows"].append(row)
            log("bench-cluster --history: memory %d sent, %s kept: %s B "
                "per entry (MEMORY USAGE %s B per entry)" % (
                    sent, kept, rf.fmt(row["per_entry"]),
                    rf.fmt(row.get("usage_per_entry"))))
    except (OSError, ValueError, KeyError) as e:
        out["error"] = "error: %s" % e
    finally:
        conn.close()
        stop_nodes(nodes, started)
    return out


def median(xs):
    return rf.median(xs)


def summarise(results, mem):
    valid = [d for d in results if not d["invalid"]]

    def pick(var, path):
        return {d["rep"]: d for d in valid
                if d["var"] == var and d["path"] == path}

    def med(var, path, f):
        return median([f(d) for d in pick(var, path).values()])

    def ratio(path, f):
        on, off = pick("on", path), pick("off", path)
        rs = []
        for r in sorted(on):
            if r in off and f(on[r]) and f(off[r]):
                rs.append(f(on[r]) / f(off[r]))
        return median(rs), rs

    def nodes_cpu(d):
        return d["server_cpu_s"] / d["deliveries"]

    def all_cpu(d):
        return (d["server_cpu_s"] + d["redis"]["cpu_s"]) / d["deliveries"]

    s = {}
    for path in PATHS:
        sfx = "" if path == "rest" else "_" + path
        for var in VARIANTS:
            s["redis_calls_per_pub_%s%s" % (var, sfx)] = med(
                var, path, lambda d: d["per_pub"]["calls_per_pub"])
            s["redis_cpu_us_per_pub_%s%s" % (var, sfx)] = med(
                var, path, lambda d: d["per_pub"]["cpu_us_per_pub"])
            s["redis_in_B_per_pub_%s%s" % (var, sfx)] = med(
                var, path, lambda d: d["per_pub"]["in_B_per_pub"])
            s["node_cpu_s_per_M_%s%s" % (var, sfx)] = med(
                var, path, lambda d: d["server_cpu_s_per_M"])
        s["node_cpu_on_vs_off" + sfx], s["node_ratios" + sfx] = ratio(
            path, nodes_cpu)
        s["servers_cpu_on_vs_off" + sfx], s["servers_ratios" + sfx] = ratio(
            path, all_cpu)
        s["redis_cpu_on_vs_off" + sfx], s["redis_ratios" + sfx] = ratio(
            path, lambda d: d["per_pub"]["cpu_us_per_pub"])
    rows = mem.get("rows") or []
    s["redis_bytes_per_entry"] = rows[0]["per_entry"] if rows else None
    s["redis_bytes_per_entry_trimmed"] = (rows[1]["per_entry"]
                                          if len(rows) > 1 else None)
    s["kept_trimmed"] = rows[1]["kept"] if len(rows) > 1 else None
    return s


def by_cmd_table(results):
    """Median calls per publication of each command, per variant and path."""
    L = ["| command | " + " | ".join("%s %s" % (v, p) for p in PATHS
                                      for v in VARIANTS) + " |",
         "|---|" + "---|" * (len(PATHS) * len(VARIANTS))]
    cmds = sorted({c for d in results if not d["invalid"]
                   for c in d["per_pub"]["by_cmd"]})
    for c in cmds:
        cells = []
        for p in PATHS:
            for v in VARIANTS:
                cells.append(rf.fmt(median([
                    d["per_pub"]["by_cmd"].get(c, 0) for d in results
                    if not d["invalid"] and d["var"] == v and
                    d["path"] == p]), 3))
        L.append("| %s | %s |" % (c, " | ".join(cells)))
    return L


def report(a, results, mem, s, load0, load1, elapsed):
    f = rf.fmt
    L = ["# bench-cluster --history (recovery in a cluster)", "",
         "- hub: %s; 3 nodes + redis-server on CPU %s (--loops 1), the "
         "loader on CPU %s" % (rf.HUB, rf.SERVER_CPU, rf.LOADER_CPU),
         "- history on = app key `\"history\": %s`; %d reps, %.1f s "
         "windows; rest, ws: open loop at %.0f messages/s x %d "
         "subscribers; sat: closed loop, window 32 over 32 REST "
         "connections" % (
             json.dumps(rr.HISTORY_ON), a.reps, a.duration, a.rate, SUBS),
         "- load average %s -> %s; %.0f s" % (
             "/".join(load0), "/".join(load1), elapsed), "",
         "## Per publication (medians over reps)", "",
         "| path | history | Redis calls / pub | Redis CPU us / pub | Redis "
         "in B / pub | nodes CPU s / M deliveries |", "|---|---|---|---|---|---|"]
    for p in PATHS:
        sfx = "" if p == "rest" else "_" + p
        for v in VARIANTS:
            L.append("| %s | %s | %s | %s | %s | %s |" % (
                p, v, f(s["redis_calls_per_pub_%s%s" % (v, sfx)], 2),
                f(s["redis_cpu_us_per_pub_%s%s" % (v, sfx)], 2),
                f(s["redis_in_B_per_pub_%s%s" % (v, sfx)], 0),
                f(s["node_cpu_s_per_M_%s%s" % (v, sfx)], 3)))
    L += ["", "On / off, medians of per-rep ratios (per rep in brackets):",
          ""]
    for p in PATHS:
        sfx = "" if p == "rest" else "_" + p
        for k, what in (("node", "nodes' CPU per delivery"),
                        ("servers", "nodes' + Redis's CPU per delivery"),
                        ("redis", "Redis CPU per publication")):
            L.append("- %s, %s: %s (%s)" % (
                p, what, f(s["%s_cpu_on_vs_off%s" % (k, sfx)], 3),
                ", ".join(f(x, 3) for x in s["%s_ratios%s" % (k, sfx)])))
    L += ["", "## Redis calls per publication by command (medians)", ""]
    L += by_cmd_table(results)
    L += ["", "## Each measurement", "",
          "| rep | history | path | deliveries/s | nodes CPU s/M | Redis "
          "calls/pub | Redis us/pub | loader-bound | invalid |",
          "|---|---|---|---|---|---|---|---|---|"]
    for d in results:
        pp = d.get("per_pub") or {}
        L.append("| %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            d["rep"] + 1, d["var"], d["path"], f(d.get("deliveries_per_s")),
            f(d.get("server_cpu_s_per_M"), 3), f(pp.get("calls_per_pub"), 2),
            f(pp.get("cpu_us_per_pub"), 2),
            "yes" if d.get("loader_bound") else "no", d["invalid"] or ""))
    L += ["", "## Redis memory per retained entry (1 KiB corpus, %d B "
          "event)" % mem.get("event_B", 0), "",
          "| events sent | kept (XLEN) | used_memory delta | B per entry | "
          "MEMORY USAGE / entry |", "|---|---|---|---|---|"]
    for r in mem.get("rows", []):
        L.append("| %d | %s | %d | %s | %s |" % (
            r["sent"], r["kept"], r["used1"] - r["used0"],
            f(r["per_entry"]), f(r.get("usage_per_entry"))))
    if mem.get("error"):
        L.append("\n" + mem["error"])
    with open(os.path.join(rf.RESULTS, "cluster-history.md"), "w") as fh:
        fh.write("\n".join(L) + "\n")
    with open(os.path.join(rf.RESULTS, "cluster-history.json"), "w") as fh:
        json.dump({"results": results, "memory": mem, "summary": s}, fh,
                  indent=1, default=str)


def main(a):
    """a: run_cluster.py's parsed arguments (reps, duration, warmup,
    quick, rate, redis_cpu)."""
    if not a.rate:
        a.rate = 300.0
    t_start = time.monotonic()
    load0 = open("/proc/loadavg").read().split()[:3]
    started, meter = [], None
    results, mem = [], {}
    try:
        redis = cl.Redis(a.redis_cpu, name="cluster-history-redis")
        started.append(redis)
        if not redis.ok:
            log("bench-cluster --history: redis-server did not start")
            return 2
        meter = cl.RedisMeter(redis.port, redis.pid)
        results = run_cpu(a, redis, meter, started)
        mem = run_memory(redis, started)
    finally:
        if meter:
            meter.close()
        for srv in reversed(started):
            srv.stop()
    load1 = open("/proc/loadavg").read().split()[:3]
    s = summarise(results, mem)
    report(a, results, mem, s, load0, load1, time.monotonic() - t_start)
    f = rf.fmt
    print("recovery-cluster: redis_calls_per_pub_on=%s "
          "redis_calls_per_pub_off=%s redis_cpu_us_per_pub_on=%s "
          "redis_cpu_us_per_pub_off=%s node_cpu_on_vs_off=%s "
          "redis_bytes_per_entry=%s redis_bytes_per_entry_trimmed=%s "
          "servers_cpu_on_vs_off=%s redis_calls_per_pub_on_ws=%s "
          "redis_calls_per_pub_off_ws=%s redis_cpu_us_per_pub_on_ws=%s "
          "redis_cpu_us_per_pub_off_ws=%s node_cpu_on_vs_off_ws=%s "
          "servers_cpu_on_vs_off_ws=%s redis_cpu_us_per_pub_on_sat=%s "
          "redis_cpu_us_per_pub_off_sat=%s node_cpu_on_vs_off_sat=%s "
          "servers_cpu_on_vs_off_sat=%s load1=%s/%s" % (
              f(s["redis_calls_per_pub_on"], 2),
              f(s["redis_calls_per_pub_off"], 2),
              f(s["redis_cpu_us_per_pub_on"], 2),
              f(s["redis_cpu_us_per_pub_off"], 2),
              f(s["node_cpu_on_vs_off"], 3),
              f(s["redis_bytes_per_entry"]),
              f(s["redis_bytes_per_entry_trimmed"]),
              f(s["servers_cpu_on_vs_off"], 3),
              f(s["redis_calls_per_pub_on_ws"], 2),
              f(s["redis_calls_per_pub_off_ws"], 2),
              f(s["redis_cpu_us_per_pub_on_ws"], 2),
              f(s["redis_cpu_us_per_pub_off_ws"], 2),
              f(s["node_cpu_on_vs_off_ws"], 3),
              f(s["servers_cpu_on_vs_off_ws"], 3),
              f(s["redis_cpu_us_per_pub_on_sat"], 2),
              f(s["redis_cpu_us_per_pub_off_sat"], 2),
              f(s["node_cpu_on_vs_off_sat"], 3),
              f(s["servers_cpu_on_vs_off_sat"], 3), load0[0], load1[0]),
          flush=True)
    return 0
