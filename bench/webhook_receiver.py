#!/usr/bin/env python3
"""Local webhook receiver for the webhook benchmark (run_fanout.py --webhooks).

Answers every POST with 200 at once (HTTP/1.1 keep-alive), counts the
requests (batches) and the events in them per second of CLOCK_MONOTONIC,
and checks nothing else (the integration tests verify signatures). A GET of
any path returns {"batches": B, "events": E, "bad": X, "names": {...},
"per_s": [[second, batches, events], ...]}. Prints its port on stdout.
"""
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
ST = {"batches": 0, "events": 0, "bad": 0, "names": {}, "per_s": {}}


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: with Nagle on, the second one
    # waits for the hub's delayed ACK (40 ms), which capped a keep-alive
    # connection at ~25 requests/s.
    disable_nagle_algorithm = True

    def log_message(self, *a):
        pass

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        try:
            evs = json.loads(body)["events"]
        except (ValueError, KeyError, TypeError):
            evs = None
        sec = int(time.monotonic())
        with LOCK:
            if evs is None:
                ST["bad"] += 1
            else:
                ST["batches"] += 1
                ST["events"] += len(evs)
                b = ST["per_s"].setdefault(sec, [0, 0])
                b[0] += 1
                b[1] += len(evs)
                for e in evs:
                    k = e.get("name", "?")
                    ST["names"][k] = ST["names"].get(k, 0) + 1
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def do_GET(self):
        with LOCK:
            out = dict(ST)
            out["names"] = dict(ST["names"])
            out["per_s"] = sorted([s, b[0], b[1]]
                                  for s, b in ST["per_s"].items())
        data = json.dumps(out).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    srv.daemon_threads = True
    print(srv.server_address[1], flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
