#!/usr/bin/env python3
"""Recovery benchmark driver for `make bench-recovery` (python3 stdlib only;
issue 35, docs/BENCHMARKS.md "Recovery").

What history per channel costs the hub, the same binary with an app config
without history ("off") and with "history": {"ttl": "120s", "size": 1000}
("on"), side by side in one run:

1. CPU per delivery. One channel, 1,000 subscribers, an open loop at a
   fixed rate that does not saturate the hub (--rate, messages/s, each to
   1,000 subscribers; the publisher in a loader process of its own, as in
   bench-fanout's half load), 32 B stamped payloads, two publishing paths:
   `rest` (the REST API, 32 keep-alive connections sharing the rate, as
   bench-cluster's open loop) and `ws` (client
   events on private-bench from one WebSocket publisher). Three peers,
   interleaved rep by rep (the order rotated every rep, reversed on odd
   ones), each started once per rep and running both paths:

     hub_off          no history: the baseline
     hub_on           history on; the subscribers are plain Pusher clients
                      that never send lubdub:resume (they must cost the
                      same: ratio ~1.0)
     hub_on_resume    history on; every subscriber sends lubdub:resume
                      ({"v":1,"channels":{}}) before subscribing
                      (bench/loadgen.c --resume), so each delivery is the
                      lubdub:id marker + event pair (~50 B more)

   Figure: the hub's CPU seconds (user + system, the whole process) per
   million deliveries; ratios on/off are medians of per-rep ratios. A
   measurement is invalid if bench-fanout's rules say so, or if a plain
   subscriber got a marker, or a resuming one got fewer markers than
   events (resume not in effect).

2. Memory per retained event. A hub with "history": {"ttl": "1h",
   "size": 100000} and --history-max-bytes 1GiB; N events of each corpus
   file (bench/corpus/laravel_1k.json, laravel_200.json: a 1,278 B and a
   222 B frame on the channel the bench subscribes to) published through
   batch_events onto one channel; the hub's VmRSS before and after, per
   event. Twice per file: with nobody subscribed (history alone: the frame
   and its entry) and with one resuming subscriber reading everything (the
   marker + event pair frame, made at the first delivery to a resuming
   session, then lives as long as the entry). Beside them the figure the
   store charges each entry against its bounds: 2 x frame + 96
   (hub/channel/history.h). Then a client resumes the channel from seq 0
   of the hub's origin: lubdub:resumed must say every event published was
   replayed (nothing evicted or lost).

3. Idle memory per session (bench/run_idle.sh, 10,000 sessions, 2 loops):
   history off against on, paired, the order alternating; and, with
   history on, sessions that sent lubdub:resume (idle_client --resume).

Tables go to bench/results/recovery.md, raw figures to recovery.json. The
last line printed is the summary (a contract):

  recovery: cpu_on_plain=R cpu_on_resume=R bytes_per_event_1k=N
  bytes_per_event_200=N idle_delta_bytes=N pair_bytes_per_event_1k=N
  pair_bytes_per_event_200=N charged_1k=N charged_200=N
  idle_resume_delta_bytes=N cpu_on_plain_ws=R cpu_on_resume_ws=R

(one line). cpu_on_plain / cpu_on_resume: hub_on / hub_off and
hub_on_resume / hub_off server CPU per delivery, REST at the fixed rate
(the `_ws` fields: client events); bytes_per_event_*: RSS growth per
retained event, nobody subscribed; pair_bytes_per_event_*: the same with a
resuming subscriber; charged_*: 2 x frame + 96; idle_delta_bytes: idle RSS
per session, history on minus off; idle_resume_delta_bytes: sessions that
sent lubdub:resume minus plain ones, history on. n/a when a side has no
valid measurement.
"""
import argparse
import hashlib
import hmac
import http.client
import json
import os
import re
import sys
import threading
import time

sys.dont_write_bytecode = True  # no bench/__pycache__ from the imports
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_fanout as rf  # noqa: E402  (Server, Peer, run_loader, ...)
import run_compression as rc  # noqa: E402  (ws_connect, ws_send, corpus)

RESULTS = rf.RESULTS
SUBS = 1000
APP_ID, KEY, SECRET = "app-id", "app-key", "app-secret"
HISTORY_ON = {"ttl": "120s", "size": 1000}
HISTORY_MEM = {"ttl": "1h", "size": 100000}
ENTRY_OVERHEAD = 96  # HUB_HISTORY_ENTRY_OVERHEAD, hub/channel/history.h
PATHS = ("rest", "ws", "sat")
CPU = "server_cpu_s_per_M"  # the figure compared
PACE_AHEAD = 200  # events; 200 x 1.3 KB pairs stay far under --max-queue


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def write_config(name, history):
    """An app config like bench-fanout's (client_event_rate 0: a WebSocket
    publisher is not rate-limited), with `history` when given."""
    app = dict(rf.HUB_CONFIG["apps"][0])
    if history:
        app["history"] = history
    path = os.path.join(RESULTS, "recovery-%s.json" % name)
    with open(path, "w") as f:
        json.dump({"apps": [app]}, f)
    return path


def hub_totals(port):
    """/stats "totals", with the per-loop counters that have no totals
    entry summed over the loops."""
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/stats")
        j = json.loads(c.getresponse().read())
        c.close()
    except (OSError, ValueError):
        return {}
    t = dict(j.get("totals", {}))
    for lp in j.get("per_loop", []):
        for k, v in lp.items():
            if k not in j.get("totals", {}) and isinstance(v, (int, float)):
                t[k] = t.get(k, 0) + v
    return t


def rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return None


# ------------------------------------------------------------ 1. CPU

def make_peers(hub):
    argv = [hub, "--port", "{port}", "--loops", "1", "--bind", "127.0.0.1",
            "--log-level", "warn"]
    off = write_config("off", None)
    on = write_config("on", HISTORY_ON)
    P = rf.Peer
    return [
        P("hub_off", "pusher", argv + ["--config", off], path="/app/app-key",
          pusher=True, publish="rest"),
        P("hub_on", "pusher", argv + ["--config", on], path="/app/app-key",
          pusher=True, publish="rest"),
        P("hub_on_resume", "pusher", argv + ["--config", on],
          path="/app/app-key", pusher=True, publish="rest",
          loader_args=["--resume"]),
    ]


def measure(srv, path, rate, warmup, duration, quick):
    srv.peer.publish = "rest" if path == "sat" else path
    args = ["--subs", SUBS, "--size", 32, "--rate", rate,
            "--msg-timeout", 1.5 if quick else 5]
    if path == "sat":
        # bench-fanout's S3 1,000 x 32 B with REST (hub_rest): closed loop,
        # the window of 32 spread over 32 keep-alive connections.
        args = ["--subs", SUBS, "--size", 32, "--window", 32,
                "--msg-timeout", 1.5 if quick else 5]
    elif path == "rest":
        # 32 keep-alive connections share the rate, as bench-cluster's
        # open loop does (a backend's agent pool): one connection would
        # pipeline every request of the open loop.
        args += ["--pubs", 32]
    t0 = hub_totals(srv.port)
    d = rf.run_loader(srv, args, warmup, duration)
    t1 = hub_totals(srv.port)
    d["resume_sessions"] = t1.get("resume_sessions")
    d["publishes"] = (t1.get("publishes", 0) - t0.get("publishes", 0)
                      if "publishes" in t1 else None)
    if "error" not in d and d.get("deliveries"):
        dl = d["deliveries"]
        d["markers_per_delivery"] = d.get("markers", 0) / dl
        d["wire_per_delivery"] = (d.get("wire_bytes", 0) +
                                  d.get("marker_bytes", 0)) / dl
    return d


def judge(d, resume):
    why = rf.check_valid(d, "S3")
    if why:
        return why
    mk = d.get("markers_per_delivery")
    if mk is None:
        return "the loader does not count markers (rebuild bench/loadgen)"
    if not resume and d.get("markers"):
        return "%d markers to plain subscribers" % d["markers"]
    if resume and mk < 0.99:
        return "resume not in effect: %.3f markers per delivery" % mk
    return None


def run_cpu(peers, reps, rate, warmup, duration, quick):
    results = {}
    for rep in range(reps):
        for p in rf.rep_order(peers, rep):
            log("bench-recovery: cpu rep %d/%d %s" % (rep + 1, reps, p.name))
            srv = rf.Server(p)
            try:
                if not srv.ok:
                    log("bench-recovery: %s did not start: %s" % (
                        p.name, srv.log_text()[-300:]))
                    continue
                paths = PATHS[rep % 3:] + PATHS[:rep % 3]
                for path in paths:
                    d = measure(srv, path, rate, warmup, duration, quick)
                    d["rep"] = rep
                    d["invalid"] = judge(d, "--resume" in p.loader_args)
                    if d["invalid"]:
                        log("bench-recovery: %s %s invalid: %s" % (
                            p.name, path, d["invalid"]))
                    results.setdefault(path, {}).setdefault(
                        p.name, []).append(d)
                    if srv.proc.poll() is not None:
                        log("bench-recovery: %s exited" % p.name)
                        break
            finally:
                srv.stop()
    return results


valid = rc.valid  # (results, path, name): the valid measurements
per_rep_ratios = rc.per_rep_ratios  # (results, path, num, den, field)


def pooled(results, path, num, den):
    def cpu(name):
        v = valid(results, path, name)
        dl = sum(d["deliveries"] for d in v)
        return sum(d["server_cpu_s"] for d in v) / dl if dl else None
    n, d = cpu(num), cpu(den)
    return n / d if n and d else None


# --------------------------------------------------------- 2. memory

def sign_query(method, path, params, body=None):
    q = dict(params)
    q.update({"auth_key": KEY, "auth_timestamp": str(int(time.time())),
              "auth_version": "1.0"})
    if body is not None:
        q["body_md5"] = hashlib.md5(body).hexdigest()
    qs = "&".join("%s=%s" % (k, q[k]) for k in sorted(q))
    sig = hmac.new(SECRET.encode(), ("%s\n%s\n%s" % (method, path, qs))
                   .encode(), hashlib.sha256).hexdigest()
    return "%s?%s&auth_signature=%s" % (path, qs, sig)


def publish_batches(port, channel, name, data, n, per_batch=10, reader=None,
                    base=0):
    """n events on one keep-alive connection, per_batch at a time
    (batch_events; the app's max_batch_events is 10). Returns the count
    answered 200. With reader (a Resumer that has read `base` events
    before), never more than PACE_AHEAD events ahead of what it has read:
    a Python reader on a loaded machine would otherwise fall a --max-queue
    behind and be closed."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    ok = 0
    path = "/apps/%s/batch_events" % APP_ID
    ev = {"name": name, "channel": channel, "data": data}
    left = n
    while left > 0:
        k = min(per_batch, left)
        body = json.dumps({"batch": [ev] * k}).encode()
        c.request("POST", sign_query("POST", path, {}, body), body=body,
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        r.read()
        if r.status != 200:
            raise OSError("batch_events answered %d" % r.status)
        ok += k
        left -= k
        if reader is not None and not wait_for(
                lambda: reader.events >= base + ok - PACE_AHEAD or
                reader.closed, 60):
            raise OSError("the resuming subscriber stopped reading")
    c.close()
    return ok


class Resumer:
    """One raw WebSocket client that sends lubdub:resume (with known =
    {origin: seq} for channel when given: a resumed subscription, else a
    fresh one), subscribes to channel (private: signed) and reads everything
    in a thread, counting markers and events; it keeps the data of
    lubdub:pos, lubdub:resumed and lubdub:resume_failed."""

    def __init__(self, port, channel, known=None):
        self.s, rest, _ = rc.ws_connect(port, "/app/app-key", False,
                                        timeout=10)
        fr = rc.FrameReader(self.s, rest)
        _, m = fr.frame()
        sid = json.loads(json.loads(m)["data"])["socket_id"]
        auth = "%s:%s" % (KEY, hmac.new(SECRET.encode(), (
            "%s:%s" % (sid, channel)).encode(), hashlib.sha256).hexdigest())
        rc.ws_send(self.s, json.dumps({"event": "lubdub:resume", "data": {
            "v": 1, "away_ms": 0,
            "channels": {channel: known} if known else {}}}).encode())
        rc.ws_send(self.s, json.dumps({"event": "pusher:subscribe", "data": {
            "channel": channel, "auth": auth}}).encode())
        self.pos = self.resumed = self.failed = None
        while b"subscription_succeeded" not in m:
            _, m = fr.frame()
            self.note(m)
        self.buf = bytearray(fr.buf)
        self.markers = self.events = 0
        self.closed = False
        self.s.settimeout(None)
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def note(self, m):
        for name, attr in (("lubdub:pos", "pos"), ("lubdub:resumed",
                                                   "resumed"),
                           ("lubdub:resume_failed", "failed")):
            if m.startswith(b'{"event":"%s"' % name.encode()):
                setattr(self, attr, json.loads(m).get("data"))

    def run(self):
        buf = self.buf
        while True:
            try:
                d = self.s.recv(1 << 20)
            except OSError:
                d = b""
            if not d:
                self.closed = True
                return
            buf += d
            off = 0
            while len(buf) - off >= 2:
                n, hl = buf[off + 1] & 0x7f, 2
                if n == 126:
                    if len(buf) - off < 4:
                        break
                    n, hl = (buf[off + 2] << 8) | buf[off + 3], 4
                elif n == 127:
                    if len(buf) - off < 10:
                        break
                    n, hl = int.from_bytes(buf[off + 2:off + 10], "big"), 10
                if len(buf) - off < hl + n:
                    break
                head = bytes(buf[off + hl:off + hl + 20])
                if head == b'{"event":"lubdub:id"':
                    self.markers += 1
                elif head.startswith(b'{"event":"lubdub:'):
                    self.note(bytes(buf[off + hl:off + hl + n]))
                elif not head.startswith(b'{"event":"pusher'):
                    self.events += 1
                off += hl + n
            del buf[:off]

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass


def run_memory(hub, n_events, warm):
    """Per corpus file and case (alone, with a resuming subscriber): RSS
    bytes per retained event. Each case on a fresh hub."""
    cfg = write_config("mem", HISTORY_MEM)
    rows = []
    for key, fpath in rc.CORPUS:
        raw, ev = rc.read_event(fpath)
        ch = rc.subscribed_channel(ev)
        frame = rc.expected_frame(raw, ev)
        wire = len(frame) + (2 if len(frame) < 126 else 4)
        for case in ("alone", "resumer"):
            peer = rf.Peer("hub_mem", "pusher", [
                hub, "--port", "{port}", "--loops", "1", "--bind",
                "127.0.0.1", "--log-level", "warn", "--config", cfg,
                "--history-max-bytes", "1GiB"], pusher=True)
            srv = rf.Server(peer)
            row = {"corpus": key, "case": case, "frame": len(frame),
                   "wire": wire, "charged": 2 * wire + ENTRY_OVERHEAD,
                   "events": n_events}
            rs = None
            try:
                if not srv.ok:
                    row["error"] = "hub did not start"
                    rows.append(row)
                    continue
                if case == "resumer":
                    rs = Resumer(srv.port, ch)
                log("bench-recovery: memory %s %s: %d + %d events" % (
                    key, case, warm, n_events))
                publish_batches(srv.port, ch, ev["event"], ev["data"], warm,
                                reader=rs)
                if rs:
                    wait_for(lambda: rs.events >= warm or rs.closed, 60)
                time.sleep(0.5)
                r0 = rss_bytes(srv.pid)
                t = time.monotonic()
                publish_batches(srv.port, ch, ev["event"], ev["data"],
                                n_events, reader=rs, base=warm)
                row["publish_s"] = time.monotonic() - t
                if rs:
                    wait_for(lambda: rs.events >= warm + n_events or
                             rs.closed, 120)
                    row["resumer_events"] = rs.events
                    row["resumer_markers"] = rs.markers
                    if rs.closed or rs.events < warm + n_events:
                        row["error"] = ("the resuming subscriber read %d of "
                                        "%d events%s" % (
                                            rs.events, warm + n_events,
                                            " (closed)" if rs.closed else ""))
                time.sleep(1.0)
                r1 = rss_bytes(srv.pid)
                row["rss0"], row["rss1"] = r0, r1
                row["per_event"] = (r1 - r0) / n_events
                kept, why = replay_all(srv.port, ch)
                row["kept"] = kept
                if kept != warm + n_events and "error" not in row:
                    row["error"] = why or ("a resume from the start "
                                           "replayed %s of %d events" % (
                                               kept, warm + n_events))
                tot = hub_totals(srv.port)
                row["stats"] = {k: v for k, v in tot.items()
                                if k.startswith("history") or
                                k in ("resume_sessions", "publishes")}
            except (OSError, ValueError) as e:
                row["error"] = "error: %s" % e
            finally:
                if rs:
                    rs.close()
                srv.stop()
            log("bench-recovery: memory %s %s: %s B per event%s" % (
                key, case, rf.fmt(row.get("per_event")),
                (" (" + row["error"] + ")") if row.get("error") else ""))
            rows.append(row)
    return rows


def replay_all(port, ch):
    """(events the history holds for ch, None) or (None, why): a resuming
    client learns the origin from lubdub:pos, then a second one resumes
    from seq 0 of it (everything) and reads the replay to lubdub:resumed.
    Run after the RSS figure: the replay's queue would count in it."""
    probe = Resumer(port, ch)
    probe.close()
    ids = (probe.pos or {}).get("ids") or {}
    if len(ids) != 1:
        return None, "lubdub:pos gave %r" % (probe.pos,)
    origin = next(iter(ids))
    rs = Resumer(port, ch, known={origin: 0})
    try:
        wait_for(lambda: rs.resumed is not None or rs.failed is not None or
                 rs.closed, 120)
        if rs.resumed is None:
            return None, "no lubdub:resumed (failed: %r, closed: %s)" % (
                rs.failed, rs.closed)
        wait_for(lambda: rs.events >= rs.resumed.get("replayed", 0), 10)
        return rs.resumed.get("replayed"), None
    finally:
        rs.close()


def wait_for(cond, timeout, step=0.002):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(step)
    return False


# ------------------------------------------------------------ 3. idle

def run_idle(hub, reps, sessions):
    """run_idle.sh: history off, on, and on with resuming sessions, the
    order rotated every rep; rows and per-rep deltas."""
    variants = [("off", write_config("idle-off", None), ""),
                ("on", write_config("idle-on", HISTORY_ON), ""),
                ("on_resume", write_config("idle-on", HISTORY_ON),
                 "--resume")]
    rows, by = [], {}
    for rep in range(reps):
        order = variants[rep % 3:] + variants[:rep % 3]
        if rep % 2:
            order.reverse()
        for name, cfg, cargs in order:
            log("bench-recovery: idle rep %d/%d %s" % (rep + 1, reps, name))
            out = rc.idle_once(hub, sessions, "--config %s" % cfg, cargs)
            m = re.search(r"idle: sessions=(\d+) "
                          r"rss_per_session_bytes=(-?\d+)", out)
            c = re.search(r"client: ready (\d+) failed (\d+)", out)
            rsm = re.search(r"stats: resume_sessions=(\d+)", out)
            row = {"rep": rep, "variant": name,
                   "sessions": int(m.group(1)) if m else None,
                   "per_session": int(m.group(2)) if m else None,
                   "failed": int(c.group(2)) if c else None,
                   "resume_sessions": int(rsm.group(1)) if rsm else None}
            rows.append(row)
            if m:
                by.setdefault(rep, {})[name] = row["per_session"]
    d_on = [v["on"] - v["off"] for _, v in sorted(by.items())
            if "on" in v and "off" in v]
    d_res = [v["on_resume"] - v["on"] for _, v in sorted(by.items())
             if "on_resume" in v and "on" in v]
    return rows, d_on, d_res


# -------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 1 rep, short, 10,000 events, 2,000 "
                    "idle sessions, 1 idle rep")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rate", type=float, default=300,
                    help="messages/s (each to 1,000 subscribers); default "
                    "300: far under the hub's saturation, and a loader on "
                    "a loaded machine keeps up")
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--mem-events", type=int, default=99000)
    ap.add_argument("--mem-warm", type=int, default=1000)
    ap.add_argument("--idle-sessions", type=int, default=10000)
    ap.add_argument("--idle-reps", type=int, default=3)
    ap.add_argument("--skip", default="",
                    help="comma list of parts to leave out: cpu,memory,idle")
    ap.add_argument("--hub", help="lubdub binary (default: $LUBDUB_BINARY "
                    "or BUILD/lubdub)")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.duration, a.warmup = 1, 2.0, 0.5
        a.mem_events, a.mem_warm = 10000, 200
        a.idle_sessions, a.idle_reps = 2000, 1
    if a.mem_events + a.mem_warm > HISTORY_MEM["size"]:
        log("bench-recovery: --mem-events + --mem-warm must be <= %d" %
            HISTORY_MEM["size"])
        return 2
    skip = set(x for x in a.skip.split(",") if x)
    hub = rc.prepare(a.hub, "bench-recovery")
    if not hub:
        return 2
    if not rc.hub_has_option(hub, b"--history-max-bytes"):
        log("bench-recovery: %s has no --history-max-bytes: a hub before "
            "recovery (issue 35)" % hub)
        return 2
    load0 = open("/proc/loadavg").read().split()[:3]
    t_start = time.time()

    cpu = {}
    if "cpu" not in skip:
        cpu = run_cpu(make_peers(hub), a.reps, a.rate, a.warmup, a.duration,
                      a.quick)
    mem = []
    if "memory" not in skip:
        mem = run_memory(hub, a.mem_events, a.mem_warm)
    idle_rows, d_on, d_res = [], [], []
    if "idle" not in skip:
        idle_rows, d_on, d_res = run_idle(hub, a.idle_reps, a.idle_sessions)
    load1 = open("/proc/loadavg").read().split()[:3]

    med, fmt = rf.median, rf.fmt

    def r(path, num):
        return med(per_rep_ratios(cpu, path, num, "hub_off", CPU))

    def mem_fig(key, case, field="per_event"):
        for row in mem:
            if (row["corpus"], row["case"]) == (key, case) and \
                    not row.get("error"):
                return row.get(field)
        return None

    def charged(key):
        for row in mem:
            if row["corpus"] == key:
                return row["charged"]
        return None

    f = {
        "cpu_on_plain": r("rest", "hub_on"),
        "cpu_on_resume": r("rest", "hub_on_resume"),
        "bytes_per_event_1k": mem_fig("1k", "alone"),
        "bytes_per_event_200": mem_fig("200", "alone"),
        "idle_delta_bytes": med(d_on),
        "pair_bytes_per_event_1k": mem_fig("1k", "resumer"),
        "pair_bytes_per_event_200": mem_fig("200", "resumer"),
        "charged_1k": charged("1k"),
        "charged_200": charged("200"),
        "idle_resume_delta_bytes": med(d_res),
        "cpu_on_plain_ws": r("ws", "hub_on"),
        "cpu_on_resume_ws": r("ws", "hub_on_resume"),
        "cpu_on_plain_sat": r("sat", "hub_on"),
        "cpu_on_resume_sat": r("sat", "hub_on_resume"),
    }

    def sv(k):
        v = f[k]
        if v is None:
            return "n/a"
        return "%.3f" % v if k.startswith("cpu") else "%d" % round(v)

    summary = "recovery: " + " ".join("%s=%s" % (k, sv(k)) for k in f)

    # ---- tables
    L = ["# Recovery (make bench-recovery%s)" % (
        " --quick" if a.quick else ""), "",
        "- date: %s; %.0f s; reps %d; measurement %.1f s after %.1f s "
        "warm-up; %d subscribers of one channel, open loop at %g "
        "messages/s, 32 B payloads" % (
            time.strftime("%Y-%m-%d %H:%M:%S %Z"), time.time() - t_start,
            a.reps, a.duration, a.warmup, SUBS, a.rate),
        "- server pinned to CPU %s, loader to CPU %s; loadavg before %s, "
        "after %s" % (rf.SERVER_CPU, rf.LOADER_CPU, " ".join(load0),
                      " ".join(load1)),
        "- hub: %s, --loops 1; history on = app key `\"history\": %s`" % (
            os.path.relpath(hub, rf.ROOT) if hub.startswith(rf.ROOT)
            else hub, json.dumps(HISTORY_ON)),
        "- CPU: the hub process's user+system CPU over the window / "
        "deliveries (the marker of a pair is not a delivery); wire B: "
        "WebSocket frame bytes per delivery, markers included", ""]
    if cpu:
        for path in PATHS:
            L += ["## CPU per delivery, %s x %d subscribers" % (
                {"rest": "REST publisher, %g messages/s" % a.rate,
                 "ws": "client events (one WebSocket publisher), %g "
                 "messages/s" % a.rate,
                 "sat": "closed loop (window 32), REST on 32 keep-alive "
                 "connections (bench-fanout's hub_rest at S3)"}[path],
                SUBS), "",
                  "| peer | server CPU-s / M deliveries | vs hub_off "
                  "(per rep) | vs hub_off, pooled | wire B / delivery | "
                  "markers / delivery | deliveries/s | p50 / p99 ms | "
                  "server % | loader % | foreign % server/loader | "
                  "valid reps |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
            for name in ("hub_off", "hub_on", "hub_on_resume"):
                runs = cpu.get(path, {}).get(name, [])
                if not runs:
                    continue
                v = valid(cpu, path, name)
                why = "; ".join(sorted({d["invalid"] for d in runs
                                        if d.get("invalid")}))
                rr = per_rep_ratios(cpu, path, name, "hub_off", CPU)
                L.append("| %s | %s | %s | %s | %s | %s | %s | %s / %s | %s |"
                         " %s | %s / %s | %d/%d%s |" % (
                    name, fmt(med([d["server_cpu_s_per_M"] for d in v]), 3),
                    "%s (%s)" % (fmt(med(rr), 3), ", ".join(
                        "%.3f" % x for x in rr)) if rr else "n/a",
                    fmt(pooled(cpu, path, name, "hub_off"), 3),
                    fmt(med([d["wire_per_delivery"] for d in v]), 1),
                    fmt(med([d["markers_per_delivery"] for d in v]), 3),
                    fmt(med([d["deliveries_per_s"] for d in v])),
                    fmt(med([d["lat_us"]["p50"] / 1e3 for d in v]), 2),
                    fmt(med([d["lat_us"]["p99"] / 1e3 for d in v]), 2),
                    fmt(med([100 * d["server_util"] for d in v])),
                    fmt(med([100 * max(d["loader_util"],
                                       d["loader_cpu_busy"]) for d in v])),
                    fmt(med([100 * d["foreign_server_cpu"] for d in v])),
                    fmt(med([100 * d["foreign_loader_cpu"] for d in v])),
                    len(v), len(runs), (" (" + why + ")") if why else ""))
            L.append("")
        L += ["Per rep, server CPU-s per M deliveries (rest / ws / sat):",
              "",
              "| rep | hub_off | hub_on | hub_on_resume |",
              "|---|---|---|---|"]
        for rep in range(a.reps):
            cells = []
            for name in ("hub_off", "hub_on", "hub_on_resume"):
                x = []
                for path in PATHS:
                    ds = [d for d in cpu.get(path, {}).get(name, [])
                          if d["rep"] == rep]
                    x.append(fmt(ds[0]["server_cpu_s_per_M"], 3)
                             if ds and not ds[0].get("invalid") else "inv")
                cells.append(" / ".join(x))
            L.append("| %d | %s |" % (rep + 1, " | ".join(cells)))
        L.append("")
    if mem:
        L += ["## Memory per retained event (history size 100,000, "
              "--history-max-bytes 1GiB, one channel)", "",
              "| corpus | case | frame B (wire) | events | RSS before MiB | "
              "RSS after MiB | RSS B / event | charged B / event (2 x wire "
              "+ 96) | RSS / charged | replayed from seq 0 | note |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
        for row in mem:
            pe = row.get("per_event")
            L.append("| %s | %s | %d (%d) | %d | %s | %s | %s | %d | %s | %s"
                     " | %s |" % (
                row["corpus"], "nobody subscribed" if row["case"] == "alone"
                else "one resuming subscriber", row["frame"], row["wire"],
                row["events"],
                fmt(row["rss0"] / 2**20, 1) if row.get("rss0") else "n/a",
                fmt(row["rss1"] / 2**20, 1) if row.get("rss1") else "n/a",
                fmt(pe), row["charged"],
                fmt(pe / row["charged"], 3) if pe else "n/a",
                row.get("kept"), row.get("error", "")))
        L.append("")
    if idle_rows:
        L += ["## Idle memory per session (bench/run_idle.sh, %d sessions, "
              "2 loops)" % a.idle_sessions, "",
              "| rep | variant | sessions | resume_sessions | RSS B / "
              "session |", "|---|---|---|---|---|"]
        for row in idle_rows:
            L.append("| %d | %s | %s | %s | %s |" % (
                row["rep"] + 1, {"off": "history off", "on": "history on",
                                 "on_resume": "history on, sessions sent "
                                 "lubdub:resume"}[row["variant"]],
                row["sessions"], row["resume_sessions"], row["per_session"]))
        L += ["", "- on minus off, per rep: %s; median %s B" % (
            " ".join("%d" % x for x in d_on) or "n/a", fmt(med(d_on))),
            "- resuming minus plain (history on), per rep: %s; median %s B"
            % (" ".join("%d" % x for x in d_res) or "n/a", fmt(med(d_res))),
            ""]
    L += ["## Goals (issue 35)", ""]
    for k, g in (("cpu_on_plain", 1.1), ("cpu_on_resume", 1.1),
                 ("cpu_on_plain_ws", 1.1), ("cpu_on_resume_ws", 1.1),
                 ("cpu_on_plain_sat", 1.1), ("cpu_on_resume_sat", 1.1)):
        v = f[k]
        L.append("- %s = %s (history on: CPU per delivery <= %.1f x off): "
                 "%s" % (k, sv(k), g, "n/a" if v is None else
                         ("met" if v <= g else "MISSED")))
    v = f["idle_delta_bytes"]
    L.append("- idle_delta_bytes = %s (idle sessions cost nothing more; "
             "the measurement's noise is about +-6 B): %s" % (
                 sv("idle_delta_bytes"), "n/a" if v is None else
                 ("met" if abs(v) <= 8 else "MISSED")))
    L += ["", "`" + summary + "`", ""]
    with open(os.path.join(RESULTS, "recovery.md"), "w") as fh:
        fh.write("\n".join(L) + "\n")
    with open(os.path.join(RESULTS, "recovery.json"), "w") as fh:
        json.dump({"cpu": cpu, "memory": mem, "idle": idle_rows,
                   "args": vars(a)}, fh, indent=1)
    log("bench-recovery: tables in bench/results/recovery.md")
    print(summary, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
