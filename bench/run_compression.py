#!/usr/bin/env python3
"""Compression benchmark driver for `make bench-compression` (python3 stdlib
only; issue 34, docs/BENCHMARKS.md "Compression").

One publisher -> 1,000 subscribers, for each corpus file (bench/corpus/: the
whole Pusher event the hub sends, a Laravel broadcast event of 1,278 B and
one of 223 B), side by side in one run, paired and repeated (the order of
the peers rotates every rep):

  hub_plain         lubdub, subscribers do not offer permessage-deflate
  hub_deflate       lubdub --compression on, subscribers offer it
  uws               uWS.js 20.30 without compression (bench/peers/uws_server.js)
  uws_deflate       uWS.js 20.30 with SHARED_COMPRESSOR, every publish
                    compressed (20.30 deflates per send: per subscriber)
  raw_cork          the raw ceiling: raw_corked sending the pre-framed bytes
  raw_cork_deflate  raw_corked --deflate: one deflate per publication,
                    pre-framed, shared (the ceiling of compress-once)

The hub gets the file's event name and data string through REST on the
file's channel (the 223 B file's presence-chat.311 is subscribed to as
private-chat.311: a presence subscription needs member data, so that frame
is one byte shorter than the file); the raw peers get the file's bytes as
their message. Subscribers count the WebSocket frame bytes of every
delivery (bench/loadgen.c --payload, --deflate); they do not inflate. A
check at the start (check_frames) reads one delivery from every peer with a
Python client, inflates the compressed ones with Python's zlib (a stock
inflater) and compares them with the expected bytes.

Then a threshold sweep (hub_plain against hub_deflate with
--compression-min-size 1, frames of 64..512 B cut from the 1 KiB corpus's
data) and the idle memory per session with and without the extension
(bench/run_idle.sh, IDLE_CLIENT_ARGS=--deflate), paired, and zlib against
libdeflate on the corpus (bench_deflate, when built).

Tables go to bench/results/compression.md, raw figures to compression.json.
The last line printed is the summary (a contract, issue 34):

  compression: bytes_ratio=X cpu_vs_plain=Y cpu_vs_uws_deflate=Z idle_delta_bytes=W

bytes_ratio: hub_deflate / hub_plain wire bytes per delivery (1 KiB corpus);
cpu_vs_plain: hub_deflate / hub_plain server CPU per delivery (1 KiB);
cpu_vs_uws_deflate: uws_deflate / hub_deflate server CPU per delivery
(1 KiB); idle_delta_bytes: idle RSS per session with the extension minus
without. Ratios are medians of per-rep ratios; n/a when a side has no valid
measurement (or, for the compressed hub, when the extension was not
negotiated: a hub built before compression).
"""
import argparse
import base64
import hashlib
import hmac
import json
import os
import re
import resource
import socket
import struct
import subprocess
import sys
import time
import urllib.request
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_fanout as rf  # noqa: E402  (shares Server, run_loader, ...)

BENCH = rf.BENCH
RESULTS = rf.RESULTS
CORPUS = [("1k", os.path.join(BENCH, "corpus", "laravel_1k.json")),
          ("200", os.path.join(BENCH, "corpus", "laravel_200.json"))]
HEADLINE = "1k"
SUBS = 1000
SWEEP_SIZES = [64, 96, 128, 192, 256, 384, 512]
APP_ID, KEY, SECRET = "app-id", "app-key", "app-secret"


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def hub_has_option(hub, option):
    """True when the hub's --help names option (bytes): a feature's flag
    tells a build that has it (bench/run_recovery.py uses it too)."""
    try:
        r = subprocess.run([hub, "--help"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return option in r.stdout


def hub_supports_compression(hub):
    """True when the hub knows --compression (the lead's data path)."""
    return hub_has_option(hub, b"--compression")


# ---------------------------------------------------------------- payloads

def read_event(path):
    with open(path, "rb") as f:
        raw = f.read().rstrip(b"\r\n")
    return raw, json.loads(raw)


def subscribed_channel(ev):
    """The channel the bench subscribes to: presence-X as private-X."""
    ch = ev["channel"]
    if ch.startswith("presence-"):
        ch = "private-" + ch[len("presence-"):]
    return ch


def expected_frame(raw, ev):
    """The Pusher frame the hub sends for this file on subscribed_channel:
    the file's bytes with the channel replaced."""
    old = b'"channel":' + json.dumps(ev["channel"]).encode()
    new = b'"channel":' + json.dumps(subscribed_channel(ev)).encode()
    assert raw.count(old) == 1
    return raw.replace(old, new)


def sweep_file(size):
    """A Pusher event frame of exactly `size` bytes: the 1 KiB corpus's
    data cut short, event MessageSent on private-chat.311 (short, so 64 B
    still holds some data). Written to bench/results/sweep-SIZE.json."""
    _, ev = read_event(CORPUS[0][1])
    data = ev["data"]
    head = '{"event":"MessageSent","channel":"private-chat.311","data":'

    def frame(d):
        return head + json.dumps(d, ensure_ascii=False) + "}"
    lo = 0
    while lo < len(data) and len(frame(data[:lo + 1])) <= size:
        lo += 1
    out = frame(data[:lo])
    while len(out) < size:  # an escape did not fit: pad with spaces
        lo_d = data[:lo] + " " * (size - len(out))
        out = frame(lo_d)
    path = os.path.join(RESULTS, "sweep-%d.json" % size)
    with open(path, "w") as f:
        f.write(out)
    return path, len(out.encode())


# --------------------------------------------------- the stock-inflater check

def ws_connect(port, path, deflate, timeout=5.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    key = base64.b64encode(os.urandom(16)).decode()
    req = ("GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\n"
           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n%s"
           "Sec-WebSocket-Version: 13\r\n\r\n" % (
               path, port, key,
               "Sec-WebSocket-Extensions: permessage-deflate; "
               "client_max_window_bits\r\n" if deflate else ""))
    s.sendall(req.encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        if not d:
            raise OSError("closed during the upgrade")
        buf += d
    head, rest = buf.split(b"\r\n\r\n", 1)
    if b" 101 " not in head.split(b"\r\n")[0]:
        raise OSError("upgrade refused: %r" % head[:200])
    ext = None
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"sec-websocket-extensions":
            ext = v.strip().decode()
    return s, rest, ext


def ws_send(s, data, opcode=1):
    mask = os.urandom(4)
    n = len(data)
    if n < 126:
        h = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
    elif n < 65536:
        h = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
    else:
        h = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
    s.sendall(h + mask + bytes(b ^ mask[i & 3] for i, b in enumerate(data)))


class FrameReader:
    def __init__(self, s, rest):
        self.s, self.buf = s, rest

    def _need(self, n):
        while len(self.buf) < n:
            d = self.s.recv(65536)
            if not d:
                raise OSError("closed")
            self.buf += d

    def frame(self):
        """(first header byte, payload) of the next frame."""
        self._need(2)
        b0, b1 = self.buf[0], self.buf[1]
        n, hl = b1 & 0x7f, 2
        if n == 126:
            self._need(4)
            n, hl = struct.unpack("!H", self.buf[2:4])[0], 4
        elif n == 127:
            self._need(10)
            n, hl = struct.unpack("!Q", self.buf[2:10])[0], 10
        self._need(hl + n)
        p = self.buf[hl:hl + n]
        self.buf = self.buf[hl + n:]
        return b0, p


def inflate(payload):
    """RFC 7692 7.2.2: append 00 00 ff ff and inflate (raw deflate)."""
    d = zlib.decompressobj(-15)
    return d.decompress(payload + b"\x00\x00\xff\xff") + d.flush()


def rest_publish(port, channel, name, data):
    body = json.dumps({"name": name, "channels": [channel],
                       "data": data}).encode()
    q = "auth_key=%s&auth_timestamp=%d&auth_version=1.0&body_md5=%s" % (
        KEY, int(time.time()), hashlib.md5(body).hexdigest())
    sig = hmac.new(SECRET.encode(), ("POST\n/apps/%s/events\n%s" % (
        APP_ID, q)).encode(), hashlib.sha256).hexdigest()
    req = urllib.request.Request(
        "http://127.0.0.1:%d/apps/%s/events?%s&auth_signature=%s" % (
            port, APP_ID, q, sig), data=body,
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as r:
        r.read()


def check_one(srv, deflate, raw, ev):
    """One delivery read and judged: (ok, text)."""
    p = srv.peer
    want = expected_frame(raw, ev) if p.pusher else raw
    s, rest, ext = ws_connect(srv.port, p.path, deflate)
    pub = None
    try:
        fr = FrameReader(s, rest)
        if p.pusher:
            b0, m = fr.frame()  # pusher:connection_established
            sid = json.loads(json.loads(m)["data"])["socket_id"]
            ch = subscribed_channel(ev)
            auth = "%s:%s" % (KEY, hmac.new(SECRET.encode(), (
                "%s:%s" % (sid, ch)).encode(), hashlib.sha256).hexdigest())
            ws_send(s, json.dumps({"event": "pusher:subscribe", "data": {
                "channel": ch, "auth": auth}}).encode())
            while b"subscription_succeeded" not in m:
                b0, m = fr.frame()
            rest_publish(srv.port, ch, ev["event"], ev["data"])
        else:
            pub, prest, _ = ws_connect(srv.port, p.path, False)
            # One write or two, the server parses "pub" first.
            ws_send(pub, b"pub")
            ws_send(pub, raw)
        while True:
            b0, m = fr.frame()
            if b0 & 0x0f in (1, 2):
                break
        rsv1 = bool(b0 & 0x40)
        text = inflate(m) if rsv1 else m
        how = ("RSV1 frame, %d B payload, inflated by Python's zlib to %d B"
               % (len(m), len(text)) if rsv1 else
               "plain frame, %d B payload" % len(m))
        if deflate and not ext:
            return False, "permessage-deflate not negotiated; %s" % how
        if deflate and not rsv1:
            return False, "negotiated (%s) but the frame came plain" % ext
        if text != want:
            return False, "%s: NOT the expected %d B" % (how, len(want))
        return True, "%s%s: equal to the expected %d B%s" % (
            how, "" if not ext else " (negotiated: %s)" % ext, len(want),
            " (the file byte for byte)" if want == raw else
            " (the file with its channel renamed: %d B)" % len(raw))
    finally:
        s.close()
        if pub:
            pub.close()


# ------------------------------------------------------------------- peers

def make_peers(hub, compression, min_size=None):
    b = os.path.join(rf.BUILD, "bench")
    hub_argv = [hub, "--config", rf.write_hub_config(), "--port", "{port}",
                "--loops", "1", "--bind", "127.0.0.1", "--log-level", "warn"]
    if compression:
        hub_argv += ["--compression", "on"]
    uws = os.path.join(BENCH, "peers", "uws_server.js")
    fb = "Falling back to a NodeJS implementation"
    P = rf.Peer
    peers = [
        P("hub_plain", "pusher", hub_argv, path="/app/app-key", pusher=True,
          publish="rest"),
        P("hub_deflate", "pusher", hub_argv + (
            ["--compression-min-size", str(min_size)] if min_size is not None
            else []), path="/app/app-key", pusher=True, publish="rest"),
        P("uws", "raw", ["node", uws, "--port", "{port}"],
          fallback_marker=fb),
        P("uws_deflate", "raw", ["node", uws, "--port", "{port}",
                                 "--compress"], fallback_marker=fb),
        P("raw_cork", "raw", [os.path.join(b, "raw_corked"), "--port",
                              "{port}"]),
        P("raw_cork_deflate", "raw", [os.path.join(b, "raw_corked"),
                                      "--port", "{port}", "--deflate"]),
    ]
    for p in peers:
        p.deflate = p.name.endswith("_deflate")
        exe = p.argv[0]
        if exe == "node":
            if not rf.node_ok():
                p.unavailable = "node not installed"
        elif not os.access(exe, os.X_OK):
            p.unavailable = "%s not built" % exe
    if any(p.argv[0] == "node" and not p.unavailable for p in peers):
        nm = rf.ensure_node_modules(peers)
        for p in peers:
            if nm and p.argv[0] == "node":
                p.unavailable = nm
    return peers


COUNTERS = ("compressed_frames", "compressed_bytes_in",
            "compressed_bytes_out", "compression_sessions", "publishes")


def hub_totals(srv):
    """The hub's compression counters and publishes, summed over its
    loops (/stats per_loop: they have no "totals" entry)."""
    if srv.peer.argv[0] != rf.HUB:
        return None
    try:
        with urllib.request.urlopen("http://127.0.0.1:%d/stats" % srv.port,
                                    timeout=5) as r:
            loops = json.load(r).get("per_loop", [])
    except (OSError, ValueError):
        return None
    return {k: sum(lp.get(k, 0) for lp in loops) for k in COUNTERS
            if any(k in lp for lp in loops)}


def measure(srv, payload, deflate, warmup, duration, quick):
    args = ["--subs", SUBS, "--window", 32, "--payload", payload,
            "--msg-timeout", 1.5 if quick else 5]
    if srv.peer.pusher:
        ch = subscribed_channel(read_event(payload)[1])
        args += ["--channel", ch]
    if deflate:
        args.append("--deflate")
    t0 = hub_totals(srv)
    d = rf.run_loader(srv, args, warmup, duration)
    t1 = hub_totals(srv)
    if t0 is not None and t1 is not None:
        # Counters are totals since start: compression_sessions is a
        # gauge-like total; the others grow with the traffic.
        d["hub_counters"] = {k: t1[k] - (0 if k == "compression_sessions"
                                         else t0.get(k, 0))
                             for k in COUNTERS if k in t1}
    if "error" not in d:
        d["wire_per_delivery"] = (d["wire_bytes"] / d["deliveries"]
                                  if d["deliveries"] else None)
        d["cpu_us"] = (d["server_cpu_s"] / d["deliveries"] * 1e6
                       if d["deliveries"] and d["server_cpu_s"] > 0 else None)
        d["rsv1_share"] = (d["rsv1_deliveries"] / d["deliveries"]
                           if d["deliveries"] else None)
    return d


def judge(d, scen, deflate):
    why = rf.check_valid(d, scen)
    if why:
        return why
    if d.get("payload_mismatch"):
        return "%d deliveries not the expected bytes" % d["payload_mismatch"]
    if deflate and d.get("pmd_sessions", 0) < SUBS:
        return "permessage-deflate negotiated by %d of %d subscribers" % (
            d.get("pmd_sessions", 0), SUBS)
    return None


def run_set(peers, payloads, reps, warmup, duration, quick, results, tag):
    """Every peer x payload, reps times, the peer order rotated every rep
    and reversed on odd reps; a server is started once per peer per rep and
    runs every payload."""
    for rep in range(reps):
        for p in rf.rep_order(peers, rep):
            if p.unavailable:
                continue
            log("bench-compression: %s rep %d/%d %s" % (tag, rep + 1, reps,
                                                        p.name))
            srv = rf.Server(p)
            try:
                if not srv.ok:
                    p.unavailable = "did not start"
                    continue
                for key, path in payloads:
                    d = measure(srv, path, p.deflate, warmup, duration,
                                quick)
                    d["rep"] = rep
                    d["invalid"] = judge(d, "S3", p.deflate)
                    results.setdefault(key, {}).setdefault(
                        p.name, []).append(d)
                    if srv.proc.poll() is not None:
                        log("bench-compression: %s exited" % p.name)
                        break
                if p.fallback_marker and p.fallback_marker in srv.log_text():
                    p.unavailable = "uWS fell back to its NodeJS shim"
                    for key in results:
                        for d in results[key].get(p.name, []):
                            d["invalid"] = p.unavailable
            finally:
                srv.stop()


def valid(results, key, name):
    return [d for d in results.get(key, {}).get(name, [])
            if not d.get("invalid")]


def per_rep_ratios(results, key, num, den, field):
    by = {}
    for name, k in ((num, "n"), (den, "d")):
        for d in valid(results, key, name):
            if d.get(field):
                by.setdefault(d["rep"], {})[k] = d[field]
    return [v["n"] / v["d"] for _, v in sorted(by.items())
            if v.get("n") and v.get("d")]


def med(xs):
    return rf.median(xs)


def fmt(x, nd=0):
    return rf.fmt(x, nd)


# -------------------------------------------------------------------- idle

def idle_once(hub, sessions, hub_args, client_args):
    """One bench/run_idle.sh (bench/run_recovery.py's too): its stdout,
    "" when it timed out."""
    env = dict(os.environ)
    env.update({"LUBDUB_BINARY": hub,
                "IDLE_CLIENT": os.path.join(rf.BUILD, "bench", "idle_client"),
                "IDLE_SESSIONS": str(sessions), "IDLE_ARGS": hub_args,
                "IDLE_CLIENT_ARGS": client_args})
    try:
        r = subprocess.run(["bash", os.path.join(BENCH, "run_idle.sh")],
                           env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=400)
        return r.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired:
        return ""


def run_idle(hub, compression, reps, sessions):
    """(per-rep deltas, rows): run_idle.sh without and with --deflate
    clients, the order alternating, same hub flags."""
    rows, by = [], {}
    for rep in range(reps):
        for deflate in ((False, True) if rep % 2 == 0 else (True, False)):
            log("bench-compression: idle rep %d/%d %s" % (
                rep + 1, reps, "with the extension" if deflate
                else "without"))
            out = idle_once(hub, sessions, "--compression on" if compression
                            else "", "--deflate" if deflate else "")
            m = re.search(r"idle: sessions=(\d+) rss_per_session_bytes=(-?\d+)",
                          out)
            c = re.search(r"client: ready (\d+) failed (\d+) deflate (\d+)",
                          out)
            row = {"rep": rep, "deflate": deflate,
                   "sessions": int(m.group(1)) if m else None,
                   "per_session": int(m.group(2)) if m else None,
                   "negotiated": int(c.group(3)) if c else None,
                   "failed": int(c.group(2)) if c else None}
            rows.append(row)
            if m:
                by.setdefault(rep, {})[deflate] = row
    deltas = []
    for rep, v in sorted(by.items()):
        if True in v and False in v and v[True]["negotiated"]:
            deltas.append(v[True]["per_session"] - v[False]["per_session"])
    return deltas, rows


# -------------------------------------------------------------------- main

def prepare(hub_arg, tag):
    """A driver's start (bench/run_recovery.py's too): the hub to measure
    (--hub, else $LUBDUB_BINARY or BUILD/lubdub), bench/results/, the fd
    limit raised to the hard one; the hub's path, or None (said why) when
    it or the loader is not built."""
    if hub_arg:
        rf.HUB = os.path.abspath(hub_arg)
    os.makedirs(RESULTS, exist_ok=True)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if not os.access(rf.LOADGEN, os.X_OK) or not os.access(rf.HUB, os.X_OK):
        log("%s: %s or %s missing: build first" % (tag, rf.LOADGEN, rf.HUB))
        return None
    return rf.HUB


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 1 rep, short, no sweep reps, "
                    "2,000 idle sessions")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--warmup", type=float, default=1.0)
    ap.add_argument("--sweep-reps", type=int, default=3)
    ap.add_argument("--sweep-duration", type=float, default=2.5)
    ap.add_argument("--idle-sessions", type=int, default=10000)
    ap.add_argument("--idle-reps", type=int, default=3)
    ap.add_argument("--peers", default="", help="comma list (default: all)")
    ap.add_argument("--skip", default="",
                    help="comma list of parts to leave out: "
                    "deflate-lib,check,main,sweep,idle")
    ap.add_argument("--hub", help="lubdub binary (default: $LUBDUB_BINARY "
                    "or BUILD/lubdub)")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.duration, a.warmup = 1, 2.0, 0.5
        a.sweep_reps, a.sweep_duration = 1, 1.5
        a.idle_sessions, a.idle_reps = 2000, 1
    skip = set(x for x in a.skip.split(",") if x)
    hub = prepare(a.hub, "bench-compression")
    if not hub:
        return 2
    comp = hub_supports_compression(hub)
    if not comp:
        log("bench-compression: %s has no --compression: the compressed hub "
            "rows run without it (not negotiated, ratios n/a)" % hub)
    load0 = open("/proc/loadavg").read().split()[:3]
    t_start = time.time()
    notes = []

    # zlib against libdeflate (bench/bench_deflate.c) on the corpus.
    deflate_lib = None
    bd = os.path.join(rf.BUILD, "bench", "bench_deflate")
    if "deflate-lib" in skip:
        pass
    elif os.access(bd, os.X_OK):
        log("bench-compression: bench_deflate (zlib vs libdeflate)")
        r = subprocess.run(["taskset", "-c", rf.SERVER_CPU, bd] +
                           [p for _, p in CORPUS], stdout=subprocess.PIPE,
                           timeout=300)
        deflate_lib = r.stdout.decode(errors="replace").rstrip()
    else:
        deflate_lib = ("(bench_deflate not built: libdeflate-dev missing, "
                       "a bench prerequisite)")

    peers = make_peers(hub, comp)
    if a.peers:
        want = set(a.peers.split(","))
        peers = [p for p in peers if p.name in want]
    for p in peers:
        if p.unavailable:
            log("bench-compression: %s unavailable: %s" % (p.name,
                                                           p.unavailable))
            notes.append("%s: %s" % (p.name, p.unavailable))

    # The check: one delivery per peer and corpus file, read by Python.
    checks = []
    if "check" not in skip:
        for p in peers:
            if p.unavailable:
                continue
            srv = rf.Server(p)
            try:
                for key, path in CORPUS:
                    raw, ev = read_event(path)
                    try:
                        ok, txt = check_one(srv, p.deflate, raw, ev)
                    except (OSError, ValueError, KeyError) as e:
                        ok, txt = False, "error: %s" % e
                    checks.append((p.name, key, ok, txt))
                    log("bench-compression: check %s %s: %s %s" % (
                        p.name, key, "ok" if ok else "FAILED", txt))
            finally:
                srv.stop()

    results = {}
    if "main" not in skip:
        run_set(peers, CORPUS, a.reps, a.warmup, a.duration, a.quick,
                results, "main")

    # Threshold sweep: the hub plain against the hub compressing every
    # frame (--compression-min-size 1).
    sweep = {}
    sweep_files = []
    if "sweep" not in skip:
        sp = make_peers(hub, comp, min_size=1 if comp else None)
        sp = [p for p in sp if p.name in ("hub_plain", "hub_deflate")]
        for z in SWEEP_SIZES:
            path, n = sweep_file(z)
            sweep_files.append(("%d" % z, path))
        run_set(sp, sweep_files, a.sweep_reps, a.warmup, a.sweep_duration,
                a.quick, sweep, "sweep")

    idle_deltas, idle_rows = [], []
    if "idle" not in skip:
        idle_deltas, idle_rows = run_idle(hub, comp, a.idle_reps,
                                          a.idle_sessions)
    load1 = open("/proc/loadavg").read().split()[:3]

    # ---- summary figures (1 KiB corpus)
    def ratio(key, num, den, field, res=results):
        return med(per_rep_ratios(res, key, num, den, field))

    bytes_ratio = ratio(HEADLINE, "hub_deflate", "hub_plain",
                        "wire_per_delivery")
    cpu_vs_plain = ratio(HEADLINE, "hub_deflate", "hub_plain", "cpu_us")
    cpu_vs_uws = ratio(HEADLINE, "uws_deflate", "hub_deflate", "cpu_us")
    idle_delta = med(idle_deltas)

    # ---- tables
    L = ["# Compression (make bench-compression%s)" % (
        " --quick" if a.quick else ""), "",
        "- date: %s; %.0f s; reps %d (sweep %d); measurement %.1f s (sweep "
        "%.1f s) after %.1f s warm-up; %d subscribers, 1 publisher" % (
            time.strftime("%Y-%m-%d %H:%M:%S %Z"), time.time() - t_start,
            a.reps, a.sweep_reps, a.duration, a.sweep_duration, a.warmup,
            SUBS),
        "- server pinned to CPU %s, loader to CPU %s; loadavg before %s, "
        "after %s" % (rf.SERVER_CPU, rf.LOADER_CPU, " ".join(load0),
                      " ".join(load1)),
        "- hub: %s (%s)" % (os.path.relpath(hub, rf.ROOT) if hub.startswith(
            rf.ROOT) else hub, "--compression on for both hub rows; "
            "hub_plain's subscribers do not offer the extension" if comp else
            "NO --compression in this build: hub_deflate is not compressed"),
        "- uws_deflate: uWS.js 20.30 (pinned), SHARED_COMPRESSOR, "
        "publish(..., compress=true): 20.30 deflates per send, once for each "
        "subscriber; issue 34 says newer uWS compresses once per publish "
        "(not measured)",
        "- wire B: WebSocket frame bytes (header + payload) per delivery as "
        "the subscribers read them (TCP/IP headers left out); CPU: the "
        "server process's user+system CPU over the window / deliveries"]
    for n in notes:
        L.append("- " + n)
    L.append("")
    if checks:
        L += ["## Check: one delivery per peer, inflated by Python's zlib",
              "", "| peer | corpus | result | detail |", "|---|---|---|---|"]
        for name, key, ok, txt in checks:
            L.append("| %s | %s | %s | %s |" % (name, key,
                                                "ok" if ok else "FAILED",
                                                txt))
        L.append("")

    def table(res, keys, names, title):
        out = []
        for key in keys:
            label = dict(CORPUS).get(key) or dict(sweep_files).get(key)
            out += ["## %s: %s" % (title, os.path.relpath(label, rf.ROOT)), "",
                    "| peer | wire B / delivery | compressed deliveries | "
                    "server CPU µs / delivery | vs hub_plain | deliveries/s "
                    "| loader % | server % | hub frames deflated / "
                    "publication | valid reps |",
                    "|---|---|---|---|---|---|---|---|---|---|"]
            for name in names:
                runs = res.get(key, {}).get(name, [])
                if not runs:
                    continue
                v = valid(res, key, name)
                why = "; ".join(sorted({d["invalid"] for d in runs
                                        if d.get("invalid")}))
                nlb = sum(1 for d in v if d.get("loader_bound"))
                dpp = med([d["hub_counters"]["compressed_frames"] /
                           d["hub_counters"]["publishes"] for d in v
                           if d.get("hub_counters", {}).get(
                               "compressed_frames") is not None
                           and d["hub_counters"].get("publishes")])
                out.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | "
                           "%d/%d%s%s |" % (
                    name, fmt(med([d["wire_per_delivery"] for d in v]), 1),
                    fmt(med([100 * d["rsv1_share"] for d in v])) + " %"
                    if v else "n/a",
                    fmt(med([d["cpu_us"] for d in v]), 3),
                    fmt(med(per_rep_ratios(res, key, name, "hub_plain",
                                           "cpu_us")), 3),
                    fmt(med([d["deliveries_per_s"] for d in v])),
                    fmt(med([100 * max(d["loader_util"], d["loader_cpu_busy"])
                             for d in v])),
                    fmt(med([100 * d["server_util"] for d in v])),
                    fmt(dpp, 3) if dpp is not None else "-",
                    len(v), len(runs), (" (" + why + ")") if why else "",
                    (", %d loader-bound" % nlb) if nlb else ""))
            out.append("")
        return out

    names = [p.name for p in peers]
    if results:
        L += table(results, [k for k, _ in CORPUS], names,
                   "1 publisher -> %d subscribers" % SUBS)
        for key, _ in CORPUS:
            L.append("- %s: bytes compressed/plain %s, hub CPU compressed/"
                     "plain %s, uws_deflate/hub_deflate %s, uws_deflate/uws "
                     "%s, hub_deflate/raw_cork_deflate %s (medians of "
                     "per-rep ratios)" % (
                         key, fmt(ratio(key, "hub_deflate", "hub_plain",
                                        "wire_per_delivery"), 3),
                         fmt(ratio(key, "hub_deflate", "hub_plain",
                                   "cpu_us"), 3),
                         fmt(ratio(key, "uws_deflate", "hub_deflate",
                                   "cpu_us"), 3),
                         fmt(ratio(key, "uws_deflate", "uws", "cpu_us"), 3),
                         fmt(ratio(key, "hub_deflate", "raw_cork_deflate",
                                   "cpu_us"), 3)))
        L.append("")
    if sweep:
        L += ["## Threshold sweep: hub_plain against hub_deflate "
              "(--compression-min-size 1), %d subscribers" % SUBS, "",
              "Frames cut from the 1 KiB corpus's data (event MessageSent on "
              "private-chat.311), bench/results/sweep-SIZE.json.", "",
              "| frame B | plain wire B | compressed wire B | bytes ratio | "
              "compressed deliveries | plain CPU µs / delivery | compressed "
              "CPU µs / delivery | CPU ratio | valid reps |",
              "|---|---|---|---|---|---|---|---|---|"]
        for key, _ in sweep_files:
            vp = valid(sweep, key, "hub_plain")
            vd = valid(sweep, key, "hub_deflate")
            L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %d+%d/%d |" % (
                key, fmt(med([d["wire_per_delivery"] for d in vp]), 1),
                fmt(med([d["wire_per_delivery"] for d in vd]), 1),
                fmt(ratio(key, "hub_deflate", "hub_plain",
                          "wire_per_delivery", sweep), 3),
                (fmt(med([100 * d["rsv1_share"] for d in vd])) + " %")
                if vd else "n/a",
                fmt(med([d["cpu_us"] for d in vp]), 3),
                fmt(med([d["cpu_us"] for d in vd]), 3),
                fmt(ratio(key, "hub_deflate", "hub_plain", "cpu_us", sweep),
                    3), len(vp), len(vd),
                len(sweep.get(key, {}).get("hub_plain", [])) +
                len(sweep.get(key, {}).get("hub_deflate", []))))
        L.append("")
    if idle_rows:
        L += ["## Idle memory per session (bench/run_idle.sh, %d sessions, "
              "hub %s)" % (a.idle_sessions, "--compression on" if comp
                           else "without --compression"), "",
              "| rep | clients offer permessage-deflate | sessions | "
              "negotiated | RSS B / session |", "|---|---|---|---|---|"]
        for r in idle_rows:
            L.append("| %d | %s | %s | %s | %s |" % (
                r["rep"] + 1, "yes" if r["deflate"] else "no",
                r["sessions"], r["negotiated"], r["per_session"]))
        L += ["", "- with minus without, per rep: %s; median %s B" % (
            " ".join("%d" % x for x in idle_deltas) or "n/a",
            fmt(idle_delta)), ""]
    if deflate_lib:
        L += ["## zlib against libdeflate (bench/bench_deflate.c, CPU %s, "
              "best of 5 rounds)" % rf.SERVER_CPU, "", "```", deflate_lib,
              "```", ""]
    goals = [("bytes_ratio", bytes_ratio, "<=", 0.4),
             ("cpu_vs_plain", cpu_vs_plain, "<=", 1.15),
             ("cpu_vs_uws_deflate", cpu_vs_uws, ">=", 3),
             ("idle_delta_bytes", idle_delta, "<=", 64)]
    L.append("## Goals (issue 34)")
    L.append("")
    for name, v, op, g in goals:
        met = None if v is None else (v <= g if op == "<=" else v >= g)
        L.append("- %s = %s (goal %s %s): %s" % (
            name, "n/a" if v is None else ("%.3f" % v if name !=
                                           "idle_delta_bytes" else "%d" % v),
            op, g, "n/a" if met is None else ("met" if met else "MISSED")))
    summary = ("compression: bytes_ratio=%s cpu_vs_plain=%s "
               "cpu_vs_uws_deflate=%s idle_delta_bytes=%s" % (
                   "%.3f" % bytes_ratio if bytes_ratio else "n/a",
                   "%.3f" % cpu_vs_plain if cpu_vs_plain else "n/a",
                   "%.3f" % cpu_vs_uws if cpu_vs_uws else "n/a",
                   "%d" % round(idle_delta) if idle_delta is not None
                   else "n/a"))
    L += ["", "`" + summary + "`", ""]
    with open(os.path.join(RESULTS, "compression.md"), "w") as f:
        f.write("\n".join(L) + "\n")
    with open(os.path.join(RESULTS, "compression.json"), "w") as f:
        json.dump({"checks": checks, "results": results, "sweep": sweep,
                   "idle": idle_rows, "deflate_lib": deflate_lib}, f,
                  indent=1)
    log("bench-compression: tables in bench/results/compression.md")
    print(summary, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
