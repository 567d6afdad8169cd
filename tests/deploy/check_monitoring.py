#!/usr/bin/env python3
"""tests/deploy/check_monitoring.py - hold the Grafana dashboard and the
Prometheus alerts to what lubdub's /metrics really exposes.

Usage: check_monitoring.py --binary build/lubdub [--root DIR] [--metrics FILE]

It starts the real binary (127.0.0.1, port 0, two loops, an app with
webhooks and history, so every labelled family has samples), reads
/metrics once and stops it by its PID. Every family the binary declares
has a `# TYPE` line whether or not it has samples (the backplane's
without --redis too), so the names are complete; the samples give each
family's label names and the values of the enumerated labels (reason, le,
kind). --metrics FILE reads a saved exposition instead.

Then, for deploy/grafana/lubdub.json and deploy/prometheus/alerts.yml:
  - every series name any query or alert expression names is exposed
    (a histogram as NAME_bucket, NAME_sum or NAME_count; `up` and the
    scrape_* series Prometheus adds to every target), every label a
    matcher names exists on that series (or is job/instance), and every
    reason/le/kind value a matcher names is one the binary writes;
  - every dashboard expression parses (`promtool check rules` over a
    generated rule file, Grafana's $__ intervals replaced by 5m);
  - the dashboard imports: schemaVersion >= 38, a datasource variable for
    Prometheus and an instance variable, every query on ${datasource},
    unique panel ids, no overlapping panels, and the panels cover the
    series the issue names;
  - every alert has a summary, a description and a runbook_url pointing at
    a heading of docs/OPERATIONS.md, and alerts.test.yml has a case where
    it fires and one where it does not.
Last it plants mistakes (a misspelled name in a panel and in an alert, a
histogram named without _bucket, an unknown label, an unknown close
reason, a missing runbook) and fails unless each is caught: the check can
fail. Exit 0 when all is well, 1 with the findings otherwise.
"""
import argparse
import copy
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

import yaml

# Series Prometheus itself adds for every scrape target.
SCRAPE_SERIES = {"up", "scrape_duration_seconds", "scrape_samples_scraped",
                 "scrape_series_added", "scrape_samples_post_metric_relabeling"}
# Labels Prometheus attaches to every series of a target.
TARGET_LABELS = {"job", "instance"}
# Labels whose values are a fixed set the binary writes.
ENUM_LABELS = {"reason", "le", "kind"}
# Grafana's interval macros, replaced before parsing.
GRAFANA_INTERVALS = ("$__rate_interval", "$__interval", "$__range")

# What the dashboard must show (issue 36 item 3): one series per topic.
REQUIRED_IN_DASHBOARD = [
    "lubdub_sessions", "lubdub_messages_in_total", "lubdub_messages_out_total",
    "lubdub_writes_total", "lubdub_sessions_closed_total",
    "lubdub_heartbeat_scan_seconds_bucket",
    "lubdub_wheel_lateness_seconds_sum", "lubdub_queued_bytes",
    "lubdub_queue_budget_bytes", "lubdub_backplane_up",
    "lubdub_backplane_published_total",
    "lubdub_backplane_history_write_failed_total",
    "lubdub_backplane_history_read_failed_total",
    "lubdub_backplane_gaps_filled_total", "lubdub_webhook_queue_depth",
    "lubdub_webhook_sent_total", "lubdub_webhook_failed_total",
    "lubdub_webhook_dead_lettered_total", "lubdub_compressed_frames_total",
    "lubdub_compressed_bytes_in_total", "lubdub_compressed_bytes_out_total",
    "lubdub_compression_sessions_total", "lubdub_history_events",
    "lubdub_history_bytes", "lubdub_history_channels",
    "lubdub_history_evicted_total", "lubdub_history_expired_total",
    "lubdub_resumes_total", "lubdub_resumes_failed_total",
    "lubdub_replayed_events_total", "lubdub_resume_sessions",
]

PROMQL_KEYWORDS = {"by", "without", "on", "ignoring", "group_left",
                   "group_right", "bool", "and", "or", "unless", "offset",
                   "inf", "nan", "atan2"}
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}
# Aggregation operators: `sum by (x) (...)` puts their grouping before the
# parenthesis.
AGGREGATIONS = {"sum", "avg", "min", "max", "count", "stddev", "stdvar",
                "topk", "bottomk", "quantile", "count_values", "group"}


# ------------------------------------------------------------ the binary

def scrape(binary, workdir):
    """Start binary with webhooks and history on, GET /metrics, stop it."""
    cfg = os.path.join(workdir, "lubdub.json")
    with open(cfg, "w") as f:
        json.dump({"apps": [{
            "id": "app-id", "key": "app-key", "secret": "app-secret",
            "history": {"ttl": "60s", "size": 10},
            # Nothing listens on port 9: the sender only has to exist.
            "webhooks": [{"url": "http://127.0.0.1:9/hook",
                          "event_types": ["channel_occupied"]}]}]}, f)
    proc = subprocess.Popen(
        [binary, "--port", "0", "--bind", "127.0.0.1", "--loops", "2",
         "--config", cfg, "--log-level", "info", "--drain-timeout", "1s"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=workdir)
    try:
        port, out, deadline = None, b"", time.monotonic() + 120
        while port is None:
            if proc.poll() is not None:
                raise SystemExit("lubdub exited %s before listening: %s" %
                                 (proc.returncode, proc.stderr.read().decode()))
            left = deadline - time.monotonic()
            if left <= 0:
                raise SystemExit("lubdub did not print its listening line")
            ready, _, _ = select.select([proc.stdout], [], [], left)
            if ready:
                out += os.read(proc.stdout.fileno(), 4096)
                m = re.search(rb"listening on \S+:(\d+)", out)
                port = int(m.group(1)) if m else None
        url = "http://127.0.0.1:%d/metrics" % port
        with urllib.request.urlopen(url, timeout=60) as r:
            return r.read().decode()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


SAMPLE_RE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? \S+$')
LABEL_RE = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class Exposition:
    """The series names a scrape makes queryable, with their labels."""

    def __init__(self, text):
        self.types = {}     # family -> counter|gauge|histogram|...
        self.labels = {}    # series name -> {label: set(values)}
        for line in text.splitlines():
            m = re.match(r"^# TYPE (\S+) (\S+)$", line)
            if m:
                self.types[m.group(1)] = m.group(2)
                continue
            if not line or line.startswith("#"):
                continue
            m = SAMPLE_RE.match(line)
            if not m:
                raise SystemExit("unparsable /metrics line: " + line)
            labs = self.labels.setdefault(m.group(1), {})
            for k, v in LABEL_RE.findall(m.group(2) or ""):
                labs.setdefault(k, set()).add(v)
        if not self.types:
            raise SystemExit("/metrics declared no family")
        self.names = set(SCRAPE_SERIES)
        for fam, typ in self.types.items():
            if typ in ("histogram", "summary"):
                self.names.update(fam + s for s in ("_sum", "_count"))
                self.names.add(fam + ("_bucket" if typ == "histogram" else ""))
            else:
                self.names.add(fam)

    def family_of(self, name):
        for s in ("_bucket", "_sum", "_count"):
            if name.endswith(s) and self.types.get(name[:-len(s)]) in (
                    "histogram", "summary"):
                return name[:-len(s)]
        return name


# -------------------------------------------------------- PromQL reading

TOKEN_RE = re.compile(r"""
    (?P<ws>\s+|\#[^\n]*)
  | (?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
  | (?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[a-zA-Z]*)
  | (?P<ident>[a-zA-Z_:][a-zA-Z0-9_:]*)
  | (?P<op>=~|!~|!=|==|<=|>=|[-+*/%^<>=(){}\[\],@])
""", re.X)


def expand(expr):
    """expr with Grafana's interval macros replaced by 5m."""
    for macro in GRAFANA_INTERVALS:
        expr = expr.replace(macro, "5m")
    return expr


def tokens(expr):
    pos, out = 0, []
    while pos < len(expr):
        m = TOKEN_RE.match(expr, pos)
        if not m:
            raise ValueError("cannot read %r at %r" % (expr, expr[pos:pos + 20]))
        pos = m.end()
        if m.lastgroup != "ws":
            out.append((m.lastgroup, m.group()))
    return out


def unquote(s):
    return s[1:-1].encode().decode("unicode_escape") if s[0] != "`" else s[1:-1]


def selectors(expr):
    """The series an expression names: [(name, [(label, op, value)])], and
    the label names its by/without/on/ignoring/group_* clauses name."""
    toks = tokens(expand(expr))
    found, grouping, i = [], set(), 0
    while i < len(toks):
        kind, text = toks[i]
        nxt = toks[i + 1][1] if i + 1 < len(toks) else None
        if text == "[":                      # a range or subquery: skip
            while toks[i][1] != "]":
                i += 1
        elif kind == "ident" and text in GROUPING and nxt == "(":
            i += 2
            while toks[i][1] != ")":
                if toks[i][0] == "ident":
                    grouping.add(toks[i][1])
                i += 1
        elif kind == "ident" and text == "offset":
            i += 1                           # its duration
        elif kind == "ident" and (nxt == "(" or text in AGGREGATIONS):
            pass                             # a function or aggregation
        elif kind == "ident" and text.lower() in PROMQL_KEYWORDS:
            pass
        elif kind == "ident" or text == "{":
            name = None if text == "{" else text
            matchers = []
            if text != "{" and nxt == "{":
                i += 1
            if toks[i][1] == "{":
                i += 1
                while toks[i][1] != "}":
                    if toks[i][1] == ",":
                        i += 1
                        continue
                    label, op, val = toks[i][1], toks[i + 1][1], toks[i + 2][1]
                    matchers.append((label, op, unquote(val)))
                    i += 3
            for label, op, val in matchers:
                if label == "__name__" and op == "=":
                    name = val
            found.append((name, [m for m in matchers if m[0] != "__name__"]))
        i += 1
    return found, grouping


def check_expr(where, expr, expo):
    """Findings for one expression against the exposition."""
    problems = []
    try:
        found, grouping = selectors(expr)
    except (ValueError, IndexError) as e:
        return ["%s: cannot read the expression (%s): %s" % (where, e, expr)]
    if not found:
        problems.append("%s: names no series: %s" % (where, expr))
    known_labels = set(TARGET_LABELS)
    for labs in expo.labels.values():
        known_labels.update(labs)
    for name, matchers in found:
        if name is None:
            problems.append("%s: a selector without a metric name" % where)
            continue
        if name not in expo.names:
            hint = ""
            if name in expo.types and expo.types[name] == "histogram":
                hint = " (a histogram: use %s_bucket, _sum or _count)" % name
            problems.append("%s: %s is not a series lubdub's /metrics "
                            "exposes%s" % (where, name, hint))
            continue
        labs = expo.labels.get(name, {})
        for label, op, val in matchers:
            if label not in labs and label not in TARGET_LABELS:
                problems.append("%s: %s has no label %r (it has %s)" % (
                    where, name, label, sorted(set(labs) | TARGET_LABELS)))
                continue
            if label not in ENUM_LABELS or "$" in val or op.startswith("!"):
                continue
            values = [val] if op == "=" else val.split("|")
            for v in values:
                if not re.fullmatch(r"[A-Za-z0-9_.+:-]+", v):
                    continue                 # a real regex: not checked
                if v not in labs[label]:
                    problems.append("%s: %s{%s} is never %r (values: %s)" % (
                        where, name, label, v, sorted(labs[label])))
    for label in grouping - known_labels:
        problems.append("%s: groups by %r, a label no series has" % (where, label))
    return problems


def promtool_syntax(exprs, workdir):
    """`promtool check rules` over the expressions as recording rules."""
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": "dashboard:check_%d" % i, "expr": expand(e)}
        for i, (_, e) in enumerate(exprs)]}]}
    path = os.path.join(workdir, "dashboard_exprs.yml")
    with open(path, "w") as f:
        yaml.safe_dump(rules, f)
    r = subprocess.run(["promtool", "check", "rules", path],
                       capture_output=True, text=True)
    if r.returncode == 0:
        return []
    errors = [l for l in (r.stdout + r.stderr).splitlines() if "error" in l]
    return ["promtool check rules on the dashboard's expressions: " +
            "; ".join(errors or [r.stdout + r.stderr])]


# ------------------------------------------------------------ dashboard

def dashboard_exprs(dash):
    """[(where, expr)] of every panel query and variable query."""
    out = []

    def walk(panels):
        for p in panels:
            walk(p.get("panels", []))
            for t in p.get("targets", []):
                out.append(("panel %r target %s" % (p.get("title"), t.get("refId")),
                            t.get("expr", "")))
    walk(dash.get("panels", []))
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query", "") if isinstance(q, dict) else q or ""
        m = re.fullmatch(r"\s*label_values\((.*),\s*([a-zA-Z_]\w*)\s*\)\s*", q)
        out.append(("variable %r" % v.get("name"), m.group(1) if m else q))
    return out


def check_dashboard(dash, expo):
    problems = []
    if dash.get("schemaVersion", 0) < 38:
        problems.append("dashboard: schemaVersion %s < 38" % dash.get("schemaVersion"))
    variables = {v.get("name"): v for v in dash.get("templating", {}).get("list", [])}
    ds = variables.get("datasource", {})
    if ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        problems.append("dashboard: no datasource variable for Prometheus")
    if variables.get("instance", {}).get("type") != "query":
        problems.append("dashboard: no instance variable")
    ids, cells = set(), {}
    panels = []

    def walk(ps):
        for p in ps:
            panels.append(p)
            walk(p.get("panels", []))
    walk(dash.get("panels", []))
    for p in panels:
        title = p.get("title")
        if p.get("id") in ids:
            problems.append("dashboard: panel id %s twice" % p.get("id"))
        ids.add(p.get("id"))
        g = p.get("gridPos", {})
        if not all(k in g for k in "hwxy") or g["x"] + g["w"] > 24:
            problems.append("dashboard: panel %r has a bad gridPos %s" % (title, g))
            continue
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                if (x, y) in cells:
                    problems.append("dashboard: panels %r and %r overlap" % (
                        cells[(x, y)], title))
                    break
                cells[(x, y)] = title
            else:
                continue
            break
        if p.get("type") == "row":
            continue
        if not p.get("targets"):
            problems.append("dashboard: panel %r has no query" % title)
        for src in [p] + p.get("targets", []):
            if src.get("datasource", {}).get("uid") != "${datasource}":
                problems.append("dashboard: panel %r does not query ${datasource}" % title)
                break
    named = set()
    for where, expr in dashboard_exprs(dash):
        problems += check_expr("dashboard " + where, expr, expo)
        try:
            named.update(n for n, _ in selectors(expr)[0])
        except (ValueError, IndexError):
            pass
    for name in REQUIRED_IN_DASHBOARD:
        if name not in named:
            problems.append("dashboard: no panel shows %s" % name)
    return problems


# ---------------------------------------------------------------- alerts

def slug(heading):
    """GitHub's anchor for a Markdown heading."""
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def check_alerts(rules, tests, operations_md, expo):
    problems = []
    anchors = {slug(m.group(1)) for m in
               re.finditer(r"^#+\s+(.*)$", operations_md, re.M)}
    fires, quiet = set(), set()
    for t in tests.get("tests", []):
        for a in t.get("alert_rule_test", []):
            (fires if a.get("exp_alerts") else quiet).add(a.get("alertname"))
    names = []
    for group in rules.get("groups", []):
        for r in group.get("rules", []):
            name = r.get("alert") or r.get("record")
            names.append(name)
            problems += check_expr("alert %s" % name, str(r.get("expr", "")), expo)
            if "alert" not in r:
                continue
            ann = r.get("annotations", {})
            for key in ("summary", "description", "runbook_url"):
                if not ann.get(key):
                    problems.append("alert %s: no %s" % (name, key))
            m = re.fullmatch(r"docs/OPERATIONS\.md#(\S+)", ann.get("runbook_url", ""))
            if ann.get("runbook_url") and (not m or m.group(1) not in anchors):
                problems.append("alert %s: runbook_url %r is not a heading of "
                                "docs/OPERATIONS.md" % (name, ann.get("runbook_url")))
            if name not in fires:
                problems.append("alert %s: no alerts.test.yml case where it fires" % name)
            if name not in quiet:
                problems.append("alert %s: no alerts.test.yml case where it "
                                "stays quiet" % name)
    if not names:
        problems.append("alerts.yml: no rules")
    return problems


# ------------------------------------------------------------ self-test

def planted_mistakes(dash, rules):
    """(what, dashboard, rules) with one mistake each."""
    out = []

    def first_target(d):
        for p in d["panels"]:
            for t in p.get("targets", []):
                if "lubdub_" in t.get("expr", ""):
                    return t
        raise SystemExit("dashboard has no target to plant a mistake in")

    def first_rule(r):
        return r["groups"][0]["rules"][-1]

    d = copy.deepcopy(dash)
    t = first_target(d)
    name = re.search(r"lubdub_\w+", t["expr"]).group()
    typo = name[:-3] + name[-2:]             # lubdub_sessions: lubdub_sessins
    t["expr"] = t["expr"].replace(name, typo, 1)
    out.append(("misspelled name in a panel", d, rules))
    for what, expr in [
            ("misspelled prefix in a panel",
             'sum(rate(lubdb_messages_in_total[$__rate_interval]))'),
            ("histogram named without _bucket",
             'sum(rate(lubdub_pong_rtt_seconds[5m]))'),
            ("unknown label", 'sum(lubdub_sessions{loops="0"})'),
            ("unknown close reason",
             'sum(rate(lubdub_sessions_closed_total{reason="slow"}[5m]))'),
            ("unbalanced parenthesis",
             'sum(rate(lubdub_messages_in_total[5m])')]:
        d = copy.deepcopy(dash)
        first_target(d)["expr"] = expr
        out.append((what, d, rules))
    r = copy.deepcopy(rules)
    first_rule(r)["expr"] = str(first_rule(r)["expr"]).replace(
        "lubdub_cache_nomem_total", "lubdub_cache_no_mem_total")
    out.append(("misspelled name in an alert", dash, r))
    r = copy.deepcopy(rules)
    first_rule(r)["annotations"]["runbook_url"] = "docs/OPERATIONS.md#no-such-heading"
    out.append(("runbook pointing nowhere", dash, r))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary")
    ap.add_argument("--metrics", help="a saved /metrics text instead of running --binary")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."))
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    paths = {k: os.path.join(root, v) for k, v in {
        "dash": "deploy/grafana/lubdub.json",
        "rules": "deploy/prometheus/alerts.yml",
        "tests": "deploy/prometheus/alerts.test.yml",
        "ops": "docs/OPERATIONS.md"}.items()}
    with tempfile.TemporaryDirectory(prefix="lubdub-monitoring-") as work:
        if args.metrics:
            with open(args.metrics) as f:
                text = f.read()
        elif args.binary:
            text = scrape(os.path.abspath(args.binary), work)
        else:
            ap.error("--binary or --metrics")
        expo = Exposition(text)
        with open(paths["dash"]) as f:
            dash = json.load(f)
        with open(paths["rules"]) as f:
            rules = yaml.safe_load(f)
        with open(paths["tests"]) as f:
            tests = yaml.safe_load(f)
        with open(paths["ops"]) as f:
            ops = f.read()

        def run(d, r):
            return (check_dashboard(d, expo) +
                    promtool_syntax(dashboard_exprs(d), work) +
                    check_alerts(r, tests, ops, expo))

        problems = run(dash, rules)
        n_exprs = len(dashboard_exprs(dash))
        n_alerts = sum(len(g.get("rules", [])) for g in rules.get("groups", []))
        print("exposition: %d families, %d queryable names" % (len(expo.types), len(expo.names)))
        print("dashboard: %d expressions; alerts: %d rules" % (n_exprs, n_alerts))
        for p in problems:
            print("FAIL " + p)
        for what, d, r in planted_mistakes(dash, rules):
            new = [p for p in run(d, r) if p not in problems]
            if not new:
                print("FAIL self-test: a %s went unnoticed" % what)
                problems.append("self-test: " + what)
            else:
                new = new[0]
                print("ok: a %s is caught: %s" % (
                    what, " ".join(new.splitlines()[:2])))
    if problems:
        print("%d problem(s)" % len(problems))
        return 1
    print("dashboard and alerts name only what /metrics exposes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
