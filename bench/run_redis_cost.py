#!/usr/bin/env python3
"""Redis's own cost per directory operation and per webhook edge (issue 33,
item 6; python3 stdlib only).

bench/run_cluster.py measures Redis per envelope (publications). This
driver measures the rest of what a cluster asks of its Redis, the figures
docs/SCALING.md "Capacity: what one Redis primary carries" is built on:

  idle            three nodes doing nothing: the per-node fixed cost (the
                  lease tick every third of --node-lease, a PING a second,
                  and, with webhooks, the lease holder's stream rounds)
  public-first    a client on each node subscribes to a channel nobody
                  holds, waits for subscription_succeeded, unsubscribes:
                  per join SUBSCRIBE + the join script, per leave the leave
                  script + UNSUBSCRIBE (channel_occupied / vacated edges)
  public-held     the same channel, held on every node by another session:
                  the join and leave scripts alone
  presence-first  a presence channel nobody holds, a new user each time:
                  two SUBSCRIBEs (the channel and its member events), the
                  join script with a member edge (PUBLISH +), the reverse
  presence-held   a presence channel held on every node by another member,
                  a new user each time: member_added / member_removed
                  PUBLISHed to the three nodes' member-event subscriptions

and two measurements of envelopes (publications), past the rates
bench-cluster's loader reaches on this machine:

  envelopes-rest  the nodes themselves, fed batch_events over REST (two
                  keep-alive connections a node, 10 events of 32 B a
                  request) on a channel a holder on every node subscribes
                  to: each event is one envelope (PUBLISH) to 3 nodes
  PUBLISH alone   this driver PUBLISHes 150 B payloads to 3 or 10
                  subscribing connections of its own, one at a time or 32
                  to a write: Redis woken per envelope, or batched, and
                  what each subscriber more costs

The directory scenarios (with 1 and 16 clients a node in step,
--clients) run on two clusters at once, three nodes and a redis-server
each, all pinned to CPU 0 like bench-cluster (this driver and the webhook
receiver on CPU 1): "plain" without webhooks, "wh" with a webhook to
bench/webhook_receiver.py for channel_occupied, channel_vacated,
member_added and member_removed (--webhook-delay 500ms, so that closing
edges wait in P:whd and the lease holder's pump moves them). The wh
cluster's extra cost over the plain one, divided by the events the
receiver got, is Redis's cost per webhook event: the join / leave scripts'
XADD or ZADD, the pump, XREADGROUP, XACK, XTRIM.

Measured, per scenario and rep: redis-server's CPU (all threads,
/proc/<pid>/task/*/schedstat, ns; /proc/<pid>/stat utime + stime too),
INFO stats total_net_input_bytes / total_net_output_bytes /
total_commands_processed and INFO commandstats, read before the first
operation and after the last one was answered (each client's last join is
awaited; its webhooks received). The cluster's idle rate over the same
time and the snapshot's own INFO are subtracted. Reported per operation
(a join or a leave; `cycle` = one of each) and per webhook event, median
and range over --reps.

Tables go to bench/results/redis-cost.md, raw JSON to redis-cost.json; the
last line printed is the summary (bench/README.md, "redis-cost").
"""
import argparse
import base64
import hashlib
import hmac
import json
import os
import select
import socket
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run_fanout as rf  # noqa: E402
import run_cluster as rc  # noqa: E402

APP = rf.HUB_CONFIG["apps"][0]
NODES = 3
WH_EVENTS = ["channel_occupied", "channel_vacated", "member_added",
             "member_removed"]
SCENARIOS = ["public-first", "public-held", "presence-first",
             "presence-held"]
# Webhook events each client's cycle (a join and a leave) makes, when the
# app has webhooks for WH_EVENTS.
EVENTS_PER_CYCLE = {"public-first": 2, "public-held": 0,
                    "presence-first": 4, "presence-held": 2}
IO_TIMEOUT = 10.0
# PUBLISH alone: (commands per write, subscribers).
CEILINGS = ((1, NODES), (32, NODES), (32, 10))


def log(*a):
    print(*a, file=sys.stderr, flush=True)


class WS:
    """A minimal Pusher client over one blocking WebSocket (RFC 6455 text
    frames, masked; no extensions): connect, subscribe, unsubscribe, wait
    for an event. Enough for a benchmark that sends one request at a
    time; the integration tests use a real client."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port), IO_TIMEOUT)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((
            "GET /app/%s?protocol=7&client=bench&version=1 HTTP/1.1\r\n"
            "Host: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade"
            "\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n"
            % (APP["key"], key)).encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            self._fill()
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n")[0]:
            raise OSError("handshake refused: %r" % head[:80])
        ev = self.wait_event("pusher:connection_established")
        self.socket_id = json.loads(ev["data"])["socket_id"]

    def _fill(self):
        b = self.sock.recv(65536)
        if not b:
            raise OSError("server closed the connection")
        self.buf += b

    def _frame(self):
        """One whole frame from the buffer, or None."""
        b = self.buf
        if len(b) < 2:
            return None
        n, off = b[1] & 0x7F, 2
        if n == 126:
            if len(b) < 4:
                return None
            n, off = int.from_bytes(b[2:4], "big"), 4
        elif n == 127:
            if len(b) < 10:
                return None
            n, off = int.from_bytes(b[2:10], "big"), 10
        if len(b) < off + n:
            return None
        self.buf = b[off + n:]
        return b[0] & 0x0F, b[off:off + n]

    def _send(self, op, payload):
        mask = os.urandom(4)
        n = len(payload)
        hdr = bytes([0x80 | op])
        if n < 126:
            hdr += bytes([0x80 | n])
        elif n < 65536:
            hdr += bytes([0x80 | 126]) + n.to_bytes(2, "big")
        else:
            hdr += bytes([0x80 | 127]) + n.to_bytes(8, "big")
        body = bytes(c ^ mask[i % 4] for i, c in enumerate(payload))
        self.sock.sendall(hdr + mask + body)

    def send(self, obj):
        self._send(1, json.dumps(obj, separators=(",", ":")).encode())

    def events(self, block):
        """The events that arrived (waiting for at least one if block)."""
        out = []
        while True:
            fr = self._frame()
            if fr:
                op, data = fr
                if op == 9:
                    self._send(10, data)
                elif op == 8:
                    raise OSError("server closed the WebSocket")
                elif op == 1:
                    ev = json.loads(data)
                    if ev.get("event") == "pusher:ping":
                        # The hub closes a client that does not answer.
                        self.send({"event": "pusher:pong", "data": {}})
                    out.append(ev)
                continue
            if out and block:
                return out
            r, _, _ = select.select([self.sock], [], [],
                                    IO_TIMEOUT if block else 0)
            if not r:
                if block:
                    raise OSError("no event within %.0f s" % IO_TIMEOUT)
                return out
            self._fill()

    def wait_event(self, name, channel=None):
        """Waits for `name` (on `channel`), dropping what comes before; a
        pusher:error or subscription_error raises."""
        while True:
            for ev in self.events(True):
                e = ev.get("event")
                if e == name and (channel is None or
                                  ev.get("channel") == channel):
                    return ev
                if e in ("pusher:error", "pusher:subscription_error"):
                    raise OSError("%s: %s" % (e, ev.get("data")))

    def drain(self):
        self.events(False)

    def subscribe(self, channel, user=None):
        data = {"channel": channel}
        if channel.startswith("presence-"):
            cd = json.dumps({"user_id": user}, separators=(",", ":"))
            sig = hmac.new(APP["secret"].encode(), ("%s:%s:%s" % (
                self.socket_id, channel, cd)).encode(),
                hashlib.sha256).hexdigest()
            data.update(auth="%s:%s" % (APP["key"], sig), channel_data=cd)
        self.send({"event": "pusher:subscribe", "data": data})

    def unsubscribe(self, channel):
        self.send({"event": "pusher:unsubscribe",
                   "data": {"channel": channel}})

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Cluster:
    """A redis-server and three nodes, pinned to CPU 0, with a meter on
    the redis-server and one churning client on each node."""

    def __init__(self, name, cfg, extra, per_node):
        self.name = name
        self.started = []
        self.redis = rc.Redis(name="redis-cost-%s-redis" % name)
        self.started.append(self.redis)
        if not self.redis.ok:
            raise RuntimeError("%s: redis-server did not start" % name)
        url = "redis://127.0.0.1:%d/0" % self.redis.port
        self.nodes = []
        for k in range(1, NODES + 1):
            n = rf.Server(rf.Peer("redis-cost-%s-n%d" % (name, k), "pusher", [
                rf.HUB, "--config", cfg, "--port", "{port}", "--loops", "1",
                "--bind", "127.0.0.1", "--log-level", "warn", "--redis", url,
                "--node-id", "n%d" % k,
                # A client here subscribes far more often than the
                # per-connection default (50/s) allows.
                "--subscribe-rate", "0",
                # Clients of a concurrency not measured sit idle for
                # minutes; this driver reads them only between
                # measurements.
                "--ping-interval", "1h"] + extra))
            self.started.append(n)
            if not n.ok:
                raise RuntimeError("%s: node n%d did not start: %s" % (
                    name, k, n.log_text().strip()[-200:]))
            self.nodes.append(n)
        end = time.monotonic() + 15
        while time.monotonic() < end and not all(
                rc.backplane(n.port).get("up") == 1 for n in self.nodes):
            time.sleep(0.1)
        if not all(rc.backplane(n.port).get("up") == 1 for n in self.nodes):
            raise RuntimeError("%s: a node's backplane did not come up" %
                               name)
        self.meter = rc.RedisMeter(self.redis.port, self.redis.pid)
        # Client j is on node j mod 3, so the first 3 * c of them are c a
        # node.
        self.clients = [WS(self.nodes[j % NODES].port)
                        for j in range(NODES * per_node)]
        self.holders = [WS(n.port) for n in self.nodes]

    def stop(self):
        for c in getattr(self, "clients", []) + getattr(self, "holders", []):
            c.close()
        if getattr(self, "meter", None):
            self.meter.close()
        for s in reversed(self.started):
            s.stop()


def sub(d, k):
    """d[k] with None for missing."""
    return d.get(k) if d else None


def minus(a, b, scale=1.0):
    """a - scale * b over the numeric fields of two RedisMeter deltas
    (calls included)."""
    out = {k: a[k] - scale * b[k] for k in ("cpu_s", "cpu_stat_s", "in_B",
                                             "out_B", "cmds")}
    out["secs"] = a["secs"]
    out["calls"] = {k: a["calls"].get(k, 0) - scale * b["calls"].get(k, 0)
                    for k in set(a["calls"]) | set(b["calls"])}
    return out


def baseline(cl, seconds):
    """The cluster's idle rate (per second) and one snapshot's own cost:
    two snapshots back to back, then two `seconds` apart."""
    m = cl.meter
    a = m.snap()
    b = m.snap()
    ovh = rc.RedisMeter.delta(a, b)
    c = m.snap()
    time.sleep(seconds)
    d = m.snap()
    idle = rc.RedisMeter.delta(c, d)
    rate = minus(idle, ovh)
    rate = {k: (v / idle["secs"] if k not in ("secs", "calls") else v)
            for k, v in rate.items()}
    rate["calls"] = {k: v / idle["secs"] for k, v in rate["calls"].items()}
    return ovh, rate


def run_scenario(cl, scen, rep, cycles, rx, quiet_s, per_node):
    """One measurement: `cycles` join + leave cycles on each of `per_node`
    clients of each node, all of them in step (each sends its join, then
    every answer is awaited, then each sends its leave), then one more join
    each, awaited (so every earlier op of that node has been answered).
    Returns the raw delta and the op counts."""
    tag = "%s-c%d-r%d" % (cl.name, per_node, rep)
    clients = cl.clients[:NODES * per_node]
    held = scen.endswith("-held")
    presence = scen.startswith("presence-")
    hch = ("presence-" if presence else "") + "held-" + tag
    if held:
        for k, h in enumerate(cl.holders):
            h.subscribe(hch, "holder-%d" % k)
        for h in cl.holders:
            h.wait_event("pusher_internal:subscription_succeeded", hch)
    # A quiet start: the holders' webhooks, and the closing edges of the
    # previous measurement's clean-up (due --webhook-delay later) sent.
    time.sleep(quiet_s)
    ev0 = rx.counts()["events"] if rx else 0
    end = time.monotonic() + 15
    still = 0
    while rx and time.monotonic() < end and still < 2:
        time.sleep(0.3)
        e = rx.counts()["events"]
        still = still + 1 if e == ev0 else 0
        ev0 = e
    # Every client answers the hub's pings, idle ones too.
    for c in cl.holders + cl.clients:
        c.drain()
    s0 = cl.meter.snap()
    t0 = time.monotonic()

    def channel(k, i):
        if held:
            return hch
        return "%sf-%s-%d-%d" % ("presence-" if presence else "", tag, k, i)

    for i in range(cycles + 1):
        for k, c in enumerate(clients):
            c.subscribe(channel(k, i), "u-%s-%d-%d" % (tag, k, i))
        for k, c in enumerate(clients):
            c.wait_event("pusher_internal:subscription_succeeded",
                         channel(k, i))
        if i == cycles:
            break
        for k, c in enumerate(clients):
            c.unsubscribe(channel(k, i))
        if held and i % 16 == 0:
            for h in cl.holders:
                h.drain()
    ops_s = time.monotonic() - t0
    expect = EVENTS_PER_CYCLE[scen] * len(clients) * cycles
    # The last joins' own opening edges (channel_occupied / member_added)
    # are in the window too; their closing ones are not.
    expect += {"public-first": 1, "public-held": 0, "presence-first": 2,
               "presence-held": 1}[scen] * len(clients)
    got = None
    if rx:
        end = time.monotonic() + 30
        while time.monotonic() < end:
            got = rx.counts()["events"] - ev0
            if got >= expect:
                break
            time.sleep(0.1)
        time.sleep(0.3)  # the XACK after the batch's 200
        got = rx.counts()["events"] - ev0
    else:
        time.sleep(0.3)  # the last UNSUBSCRIBEs on the subscriber link
    s1 = cl.meter.snap()
    # Leave the next scenario a clean cluster: the last joins and the
    # holders leave (outside the window).
    for k, c in enumerate(clients):
        c.unsubscribe(channel(k, cycles))
    if held:
        for h in cl.holders:
            h.unsubscribe(hch)
    for h in cl.holders:
        h.drain()
    return {"delta": rc.RedisMeter.delta(s0, s1), "ops_s": ops_s,
            "joins": len(clients) * (cycles + 1),
            "leaves": len(clients) * cycles,
            "events": got, "events_expected": expect if rx else 0}


def publish_ceiling(cl, n, batch, payload_len, ovh, rate, nsubs=NODES):
    """Redis alone at PUBLISH: this driver PUBLISHes n envelope-sized
    payloads on a channel that three connections of its own subscribe to
    (as three nodes would), `batch` commands per write (1: a round trip
    each, Redis woken per envelope; 32: pipelined, as a node's backplane
    thread writes when envelopes queue up), and waits until the three
    subscribers have read every message. Redis's CPU and bytes per PUBLISH,
    the cluster's idle rate and the snapshots subtracted."""
    import threading
    ch = "lubdub:app-id:ceiling"
    payload = b"x" * payload_len
    msg = b"*3\r\n$7\r\nmessage\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (
        len(ch), ch.encode(), len(payload), payload)
    subs = [rc.RedisConn(cl.redis.port) for _ in range(nsubs)]
    for sc in subs:
        sc.cmd("SUBSCRIBE", ch)
    want = n * len(msg)
    got = [0] * nsubs

    def reader(i):
        sc = subs[i]
        sc.sock.settimeout(IO_TIMEOUT)
        while got[i] < want:
            try:
                b = sc.sock.recv(1 << 20)
            except OSError:
                return
            if not b:
                return
            got[i] += len(b)
    pub = rc.RedisConn(cl.redis.port)
    cmd = b"*3\r\n$7\r\nPUBLISH\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (
        len(ch), ch.encode(), len(payload), payload)
    reply = b":%d\r\n" % nsubs
    readers = [threading.Thread(target=reader, args=(i,), daemon=True)
               for i in range(nsubs)]
    for t in readers:
        t.start()
    s0 = cl.meter.snap()
    t0 = time.monotonic()
    sent = 0
    ok = True
    while sent < n:
        k = min(batch, n - sent)
        pub.sock.sendall(cmd * k)
        if pub.f.read(len(reply) * k) != reply * k:
            ok = False
            break
        sent += k
    for t in readers:
        t.join(30)
    secs = time.monotonic() - t0
    s1 = cl.meter.snap()
    for c in subs + [pub]:
        c.close()
    d = minus(minus(rc.RedisMeter.delta(s0, s1), ovh), rate,
              s1["t"] - s0["t"])
    return {"batch": batch, "subs": nsubs, "n": sent, "secs": secs,
            "publishes_per_s": sent / secs if secs else None,
            "cpu_us_per_env": d["cpu_s"] / sent * 1e6 if sent else None,
            "in_B_per_env": d["in_B"] / sent if sent else None,
            "out_B_per_env": d["out_B"] / sent if sent else None,
            "util": (s1["cpu_ns"] - s0["cpu_ns"]) / 1e9 / secs,
            "invalid": None if ok and all(g >= want for g in got) else
            "replies or deliveries missing (%s of %d bytes)" % (got, want)}


def signed(path, body):
    """path?query with the Pusher REST signature (docs/PROTOCOL.md)."""
    q = {"auth_key": APP["key"], "auth_timestamp": str(int(time.time())),
         "auth_version": "1.0", "body_md5": hashlib.md5(body).hexdigest()}
    qs = "&".join("%s=%s" % (k, q[k]) for k in sorted(q))
    sig = hmac.new(APP["secret"].encode(), ("POST\n%s\n%s" % (path, qs))
                   .encode(), hashlib.sha256).hexdigest()
    return "%s?%s&auth_signature=%s" % (path, qs, sig)


def envelopes_rest(cl, rep, n_req, threads, ovh, rate):
    """Envelopes from the nodes themselves, faster than bench-cluster's
    loader drives them here: `threads` keep-alive REST connections a node
    POST batch_events of 10 events (32 B each) to one channel a holder on
    every node subscribes to; each event leaves its node as one envelope
    (PUBLISH) to the 3 nodes. Redis's cost per envelope at that rate, the
    cluster's idle rate and the snapshots subtracted. The holders read
    everything in threads of their own; the window ends when each has
    every event."""
    import http.client
    import threading
    ch = "env-%s-r%d" % (cl.name, rep)
    for h in cl.holders:
        h.subscribe(ch)
    for h in cl.holders:
        h.wait_event("pusher_internal:subscription_succeeded", ch)
    path = "/apps/%s/batch_events" % APP["id"]
    body = json.dumps({"batch": [{"name": "e", "channel": ch,
                                  "data": "x" * 32}] * 10}).encode()
    want = n_req * NODES * threads * 10
    got = [0] * NODES
    stop = [False]

    def read(i):
        h = cl.holders[i]
        while got[i] < want and not stop[0]:
            r, _, _ = select.select([h.sock], [], [], 0.2)
            try:
                evs = h.events(False) if r or h.buf else []
            except OSError:
                return
            got[i] += sum(1 for e in evs if e.get("event") == "e")
    errors = []

    def post(port):
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            for _ in range(n_req):
                c.request("POST", signed(path, body), body,
                          {"Content-Type": "application/json"})
                r = c.getresponse()
                r.read()
                if r.status != 200:
                    errors.append(r.status)
                    return
            c.close()
        except OSError as e:
            errors.append(str(e))
    readers = [threading.Thread(target=read, args=(i,), daemon=True)
               for i in range(NODES)]
    posters = [threading.Thread(target=post, args=(n.port,), daemon=True)
               for n in cl.nodes for _ in range(threads)]
    for t in readers:
        t.start()
    s0 = cl.meter.snap()
    t0 = time.monotonic()
    for t in posters:
        t.start()
    for t in posters:
        t.join(120)
    end = time.monotonic() + 30
    while time.monotonic() < end and min(got) < want and not errors:
        time.sleep(0.05)
    secs = time.monotonic() - t0
    s1 = cl.meter.snap()
    stop[0] = True
    for t in readers:
        t.join(5)
    for h in cl.holders:
        h.unsubscribe(ch)
    raw = rc.RedisMeter.delta(s0, s1)
    d = minus(minus(raw, ovh), rate, raw["secs"])
    env = raw["calls"].get("publish", 0)
    return {"n": env, "secs": secs, "envelopes_per_s": env / secs,
            "util": raw["cpu_s"] / raw["secs"],
            "cpu_us_per_env": d["cpu_s"] / env * 1e6 if env else None,
            "in_B_per_env": d["in_B"] / env if env else None,
            "out_B_per_env": d["out_B"] / env if env else None,
            "invalid": ("REST errors: %s" % errors[:3]) if errors else
            None if min(got) >= want else
            "deliveries missing: %s of %d" % (got, want)}


def costs(raw, ovh, rate):
    """Per op (a join or a leave), per cycle, and the totals, with the
    snapshot overhead and the idle rate over the window subtracted."""
    d = minus(minus(raw["delta"], ovh), rate, raw["delta"]["secs"])
    ops = raw["joins"] + raw["leaves"]
    per = {k: d[k] / ops for k in ("cpu_s", "cpu_stat_s", "in_B", "out_B",
                                   "cmds")}
    return {"ops": ops, "secs": raw["delta"]["secs"],
            "ops_per_s": ops / raw["ops_s"] if raw["ops_s"] else None,
            "cpu_us_per_op": per["cpu_s"] * 1e6,
            "cpu_stat_us_per_op": per["cpu_stat_s"] * 1e6,
            "in_B_per_op": per["in_B"], "out_B_per_op": per["out_B"],
            "cmds_per_op": per["cmds"],
            "calls_per_op": {k: v / ops for k, v in d["calls"].items()
                             if abs(v / ops) >= 0.005},
            "util": raw["delta"]["cpu_s"] / raw["delta"]["secs"],
            "total": d}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cycles", type=int, default=300,
                    help="join + leave cycles per client (one client per "
                    "node) in each measurement")
    ap.add_argument("--clients", default="1,16",
                    help="clients per node, in step, as a comma list: 1 "
                    "makes each operation its own round trip (Redis woken "
                    "per operation), more let each node pipeline its "
                    "operations as under load (cycles are divided by it)")
    ap.add_argument("--idle", type=float, default=8.0,
                    help="seconds of each cluster's idle baseline")
    ap.add_argument("--ceiling-n", type=int, default=100000,
                    help="PUBLISHes of the pipelined ceiling measurement "
                    "(a tenth of them one at a time)")
    ap.add_argument("--env-requests", type=int, default=400,
                    help="batch_events requests (10 events each) per REST "
                    "connection, 2 connections a node, in the envelope "
                    "measurement")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 1 rep, 60 cycles, 3 s idle, 20,000 "
                    "PUBLISHes")
    ap.add_argument("--hub", help="lubdub binary (default: BUILD/lubdub)")
    a = ap.parse_args()
    if a.quick:
        a.reps, a.cycles, a.idle, a.ceiling_n = 1, 60, 3.0, 20000
        a.env_requests = 100
    if a.hub:
        rf.HUB = os.path.abspath(a.hub)
    for exe in (rf.HUB, rc.REDIS_SERVER):
        if not os.access(exe, os.X_OK):
            log("redis-cost: %s missing (make build; deploy/install-deps.sh "
                "cluster)" % exe)
            return 2
    os.makedirs(rf.RESULTS, exist_ok=True)
    try:
        os.sched_setaffinity(0, {int(rf.LOADER_CPU)})
    except OSError:
        pass
    t_start = time.monotonic()
    load0 = open("/proc/loadavg").read().split()[:3]
    cfg_plain = rf.write_hub_config()
    rx = rf.Receiver()
    clusters = {}
    results = {}
    base = {}
    try:
        if not rx.port:
            log("redis-cost: the webhook receiver did not start")
            return 2
        cfg_wh = os.path.join(rf.RESULTS, "hub-config-redis-cost-wh.json")
        with open(cfg_wh, "w") as f:
            json.dump({"apps": [dict(APP, webhooks=[{
                "url": "http://127.0.0.1:%d/hook" % rx.port,
                "event_types": WH_EVENTS}])]}, f)
        per = sorted({int(x) for x in a.clients.split(",")})
        clusters["plain"] = Cluster("plain", cfg_plain, [], per[-1])
        clusters["wh"] = Cluster("wh", cfg_wh,
                                 ["--webhook-delay", "500ms"], per[-1])
        for name, cl in clusters.items():
            base[name] = baseline(cl, a.idle)
            log("redis-cost: %s idle: %.3f %% of a core, %.0f B/s in, "
                "%.0f B/s out, %.1f commands/s" % (
                    name, 100 * base[name][1]["cpu_s"],
                    base[name][1]["in_B"], base[name][1]["out_B"],
                    base[name][1]["cmds"]))
        for rep in range(a.reps):
            order = ("plain", "wh") if rep % 2 == 0 else ("wh", "plain")
            for scen, pn in [(x, y) for y in per for x in SCENARIOS]:
                # The same number of operations at every concurrency.
                cyc = max(10, a.cycles // pn)
                for name in order:
                    cl = clusters[name]
                    raw = run_scenario(cl, scen, rep, cyc,
                                       rx if name == "wh" else None, 0.7, pn)
                    c = costs(raw, *base[name])
                    c["rep"], c["events"] = rep, raw["events"]
                    c["clients"] = pn
                    c["events_expected"] = raw["events_expected"]
                    c["invalid"] = (
                        "%s of %d webhook events" % (raw["events"],
                                                     raw["events_expected"])
                        if name == "wh" and raw["events"] !=
                        raw["events_expected"] else None)
                    results.setdefault((name, scen, pn), []).append(c)
                    log("redis-cost: rep %d %s %s x%d: %.0f ops/s; per op "
                        "%.1f us, %.0f B in, %.0f B out, %.2f commands%s%s" % (
                            rep + 1, name, scen, pn, c["ops_per_s"] or 0,
                            c["cpu_us_per_op"], c["in_B_per_op"],
                            c["out_B_per_op"], c["cmds_per_op"],
                            "; %s webhook events" % raw["events"]
                            if name == "wh" else "",
                            " INVALID: " + c["invalid"] if c["invalid"]
                            else ""))
        # Envelopes from the nodes at the fastest rate this driver
        # reaches, on the plain cluster.
        for rep in range(a.reps):
            c = envelopes_rest(clusters["plain"], rep, a.env_requests, 2,
                               *base["plain"])
            c["rep"] = rep
            results.setdefault(("plain", "envelopes-rest"), []).append(c)
            log("redis-cost: rep %d envelopes from the nodes: %.0f/s, Redis "
                "%.0f %% busy, %.2f us, %.0f B in, %.0f B out per envelope%s"
                % (rep + 1, c["envelopes_per_s"], 100 * c["util"],
                   c["cpu_us_per_env"] or 0, c["in_B_per_env"] or 0,
                   c["out_B_per_env"] or 0,
                   " INVALID: " + c["invalid"] if c["invalid"] else ""))
        # Redis at PUBLISH alone, on the plain cluster's Redis: an
        # envelope of the size bench-cluster's nodes send (a 32 B event's
        # PUBLISH is ~190 B on the wire, its payload ~150 B).
        for rep in range(a.reps):
            for batch, ns in CEILINGS:
                n = a.ceiling_n // (20 if batch == 1 else
                                    1 if ns == NODES else 2)
                c = publish_ceiling(clusters["plain"], n, batch, 150,
                                    *base["plain"], nsubs=ns)
                c["rep"] = rep
                results.setdefault(("plain", "ceiling-%d-%d" % (batch, ns)),
                                   []).append(c)
                log("redis-cost: rep %d PUBLISH batch %d to %d: %.0f/s, Redis "
                    "%.0f %% busy, %.2f us, %.0f B in, %.0f B out per "
                    "PUBLISH%s" % (rep + 1, batch, ns,
                                   c["publishes_per_s"] or 0,
                                   100 * c["util"], c["cpu_us_per_env"] or 0,
                                   c["in_B_per_env"] or 0,
                                   c["out_B_per_env"] or 0,
                                   " INVALID: " + c["invalid"]
                                   if c["invalid"] else ""))
    finally:
        for cl in clusters.values():
            cl.stop()
        rx.stop()
    load1 = open("/proc/loadavg").read().split()[:3]
    elapsed = time.monotonic() - t_start
    return report(a, results, base, load0, load1, elapsed)


def report(a, results, base, load0, load1, elapsed):
    med = rf.median

    def f(x, nd=1):
        return ("%%.%df" % nd) % x if x is not None else "n/a"

    def valid(name, scen, pn=None):
        key = (name, scen, pn) if pn else (name, scen)
        return [c for c in results.get(key, []) if not c["invalid"]]

    per = sorted({k[2] for k in results if len(k) == 3})

    def rng(xs, nd=1):
        xs = [x for x in xs if x is not None]
        if not xs:
            return "n/a"
        return "%s (%s–%s)" % (f(med(xs), nd), f(min(xs), nd),
                                f(max(xs), nd))

    def per_event(scen, pn, k):
        """Per rep: (wh - plain) for the same rep's measurements, per
        webhook event the receiver got."""
        p = {c["rep"]: c for c in valid("plain", scen, pn)}
        out = []
        for c in valid("wh", scen, pn):
            q = p.get(c["rep"])
            if q and c["events"]:
                out.append((c["total"][k] - q["total"][k]) / c["events"])
        return out

    lines = ["# Redis's cost per directory operation and webhook event "
             "(bench/run_redis_cost.py%s)" % (" --quick" if a.quick else ""),
             "",
             "- date: %s; reps: %d; 3 nodes; c clients per node (c = %s) "
             "in step, each doing %d / c join + leave cycles; whole run "
             "%.0f s" % (time.strftime("%Y-%m-%d %H:%M:%S %Z"), a.reps,
                         a.clients, a.cycles, elapsed),
             "- redis-server %s and the nodes pinned to CPU %s (--loops 1), "
             "the driver and the webhook receiver to CPU %s; loadavg before "
             "%s, after %s" % (rc.REDIS_SERVER, rf.SERVER_CPU, rf.LOADER_CPU,
                               " ".join(load0), " ".join(load1)),
             "- CPU: %s" % cpu_model(),
             "- per op = per join or leave (a cycle is one of each), with "
             "each cluster's idle rate over the window and the snapshots' own "
             "INFO subtracted; median (min–max) over reps", ""]
    lines += ["## Idle: the fixed cost of 3 nodes", "",
              "| cluster | Redis CPU % of a core | B/s in | B/s out | "
              "commands/s | calls/s by command |", "|---|---|---|---|---|---|"]
    for name in ("plain", "wh"):
        if name not in base:
            continue
        r = base[name][1]
        lines.append("| %s | %s | %s | %s | %s | %s |" % (
            name, f(100 * r["cpu_s"], 3), f(r["in_B"], 0), f(r["out_B"], 0),
            f(r["cmds"], 1), ", ".join("%s %.1f" % (k, v) for k, v in
                                       sorted(r["calls"].items())
                                       if abs(v) >= 0.05)))
    lines += ["", "## Per directory operation (a join or a leave)", "",
              "| scenario | clients / node | cluster | ops/s driven | Redis "
              "CPU µs / op | (stat ticks) | B in / op | B out / op | "
              "commands / op | calls / op (median rep) | valid reps |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for scen, pn, name in [(x, y, z) for y in per for x in SCENARIOS
                           for z in ("plain", "wh")]:
        if True:
            v = valid(name, scen, pn)
            runs = results.get((name, scen, pn), [])
            if not runs:
                continue
            mid = sorted(v, key=lambda c: c["cpu_us_per_op"])[len(v) // 2] \
                if v else None
            lines.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | "
                         "%s | %d/%d |" % (
                             scen, pn, name,
                             f(med([c["ops_per_s"] for c in v]), 0),
                             rng([c["cpu_us_per_op"] for c in v], 2),
                             f(med([c["cpu_stat_us_per_op"] for c in v]), 1),
                             rng([c["in_B_per_op"] for c in v], 0),
                             rng([c["out_B_per_op"] for c in v], 0),
                             rng([c["cmds_per_op"] for c in v], 2),
                             ", ".join("%s %.2f" % (k, x) for k, x in sorted(
                                 mid["calls_per_op"].items())) if mid else
                             "-", len(v), len(runs)))
    lines += ["", "## Per webhook event (the wh cluster less the plain one, "
              "same rep, / events received)", "",
              "| scenario | clients / node | events / cycle | Redis CPU µs / "
              "event | B in / event | B out / event | commands / event |",
              "|---|---|---|---|---|---|---|"]
    for scen, pn in [(x, y) for y in per for x in SCENARIOS]:
        if not EVENTS_PER_CYCLE[scen]:
            continue
        lines.append("| %s | %d | %d | %s | %s | %s | %s |" % (
            scen, pn, EVENTS_PER_CYCLE[scen],
            rng([x * 1e6 for x in per_event(scen, pn, "cpu_s")], 2),
            rng(per_event(scen, pn, "in_B"), 0),
            rng(per_event(scen, pn, "out_B"), 0),
            rng(per_event(scen, pn, "cmds"), 2)))
    v = valid("plain", "envelopes-rest")
    runs = results.get(("plain", "envelopes-rest"), [])
    if runs:
        lines += ["", "## Envelopes from the nodes: batch_events (10 x 32 B "
                  "events) on 2 REST connections a node, a holder of the "
                  "channel on each node", "",
                  "| envelopes/s | Redis % busy | Redis CPU µs / envelope | "
                  "B in / envelope | B out / envelope | valid reps |",
                  "|---|---|---|---|---|---|",
                  "| %s | %s | %s | %s | %s | %d/%d |" % (
                      rng([c["envelopes_per_s"] for c in v], 0),
                      rng([100 * c["util"] for c in v], 0),
                      rng([c["cpu_us_per_env"] for c in v], 2),
                      rng([c["in_B_per_env"] for c in v], 0),
                      rng([c["out_B_per_env"] for c in v], 0), len(v),
                      len(runs))]
    lines += ["", "## PUBLISH alone: the driver publishing on a channel its "
              "own connections subscribe to (3, as three nodes, or 10; "
              "150 B payloads, as a node's envelope)", "",
              "| writes | subscribers | PUBLISHes/s driven | Redis % busy | "
              "Redis CPU µs / PUBLISH | B in / PUBLISH | B out / PUBLISH | "
              "valid reps |",
              "|---|---|---|---|---|---|---|---|"]
    for b, ns in CEILINGS:
        v = valid("plain", "ceiling-%d-%d" % (b, ns))
        runs = results.get(("plain", "ceiling-%d-%d" % (b, ns)), [])
        if not runs:
            continue
        lines.append("| %s | %d | %s | %s | %s | %s | %s | %d/%d |" % (
            "one at a time" if b == 1 else "%d per write" % b, ns,
            f(med([c["publishes_per_s"] for c in v]), 0),
            f(med([100 * c["util"] for c in v]), 0),
            rng([c["cpu_us_per_env"] for c in v], 2),
            rng([c["in_B_per_env"] for c in v], 0),
            rng([c["out_B_per_env"] for c in v], 0), len(v), len(runs)))
    with open(os.path.join(rf.RESULTS, "redis-cost.md"), "w") as fh:
        fh.write("\n".join(lines) + "\n")
    with open(os.path.join(rf.RESULTS, "redis-cost.json"), "w") as fh:
        json.dump({"base": {k: {"snapshot": v[0], "idle_per_s": v[1]}
                            for k, v in base.items()},
                   "results": {"/".join(str(x) for x in k): v
                               for k, v in results.items()},
                   "load": [load0, load1]}, fh, indent=1)
    log("redis-cost: tables in bench/results/redis-cost.md (%.0f s)" %
        elapsed)

    def op(scen, pn, k, nd=2, scale=1.0):
        return f(med([c[k] * scale for c in valid("plain", scen, pn)]), nd)

    def ev(scen, pn, k, nd=2, scale=1.0):
        return f(med([x * scale for x in per_event(scen, pn, k)]), nd)

    idle = base.get("plain", (None, None))[1]
    idlew = base.get("wh", (None, None))[1]
    fields = [("idle_cpu_pct_per_node", f(100 * idle["cpu_s"] / NODES, 3)
               if idle else "n/a"),
              ("idle_cmds_per_s_per_node", f(idle["cmds"] / NODES, 2)
               if idle else "n/a"),
              ("idle_B_per_s_per_node", f((idle["in_B"] + idle["out_B"]) /
                                          NODES, 0) if idle else "n/a"),
              ("wh_idle_cpu_pct", f(100 * (idlew["cpu_s"] - idle["cpu_s"]),
                                    3) if idle and idlew else "n/a")]
    # Fields for one client per node keep the plain names; for more,
    # the suffix _x<c>.
    for pn in per:
        sfx = "" if pn == 1 else "_x%d" % pn
        for scen in SCENARIOS:
            s = scen.replace("-", "_") + sfx
            fields += [("%s_cpu_us_per_op" % s,
                        op(scen, pn, "cpu_us_per_op")),
                       ("%s_B_per_op" % s, f(med([
                           c["in_B_per_op"] + c["out_B_per_op"]
                           for c in valid("plain", scen, pn)]), 0)),
                       ("%s_cmds_per_op" % s, op(scen, pn, "cmds_per_op"))]
        for scen in SCENARIOS:
            if EVENTS_PER_CYCLE[scen]:
                s = scen.replace("-", "_") + sfx
                fields += [("wh_%s_cpu_us_per_event" % s,
                            ev(scen, pn, "cpu_s", 2, 1e6)),
                           ("wh_%s_B_per_event" % s, f(med([
                               x + y for x, y in zip(
                                   per_event(scen, pn, "in_B"),
                                   per_event(scen, pn, "out_B"))]), 0))]
    fields += [("envelope_rest_per_s", f(med(
        [c["envelopes_per_s"] for c in valid("plain", "envelopes-rest")]),
        0)), ("envelope_rest_cpu_us", f(med(
            [c["cpu_us_per_env"] for c in valid("plain", "envelopes-rest")]),
            2))]
    for b, ns in CEILINGS:
        fields += [("publish_batch%d_subs%d_cpu_us" % (b, ns), f(med(
            [c["cpu_us_per_env"] for c in valid("plain", "ceiling-%d-%d" %
                                                (b, ns))]), 2))]
    fields += [("load1", "/".join(load0[:1] + load1[:1]))]
    print("redis-cost: " + " ".join("%s=%s" % kv for kv in fields),
          flush=True)
    return 0


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for ln in f:
                if ln.startswith("model name"):
                    return "%s, %d CPUs" % (ln.split(":", 1)[1].strip(),
                                            os.cpu_count())
    except OSError:
        pass
    return "unknown"


if __name__ == "__main__":
    sys.exit(main())
