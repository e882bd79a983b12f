#!/usr/bin/python3
"""End to end: `ncclsmoke publish` into a real Pushgateway, scraped by a real Prometheus.

On 127.0.0.1 with free ports, temp config and storage:
  1. start prometheus-pushgateway and prometheus (scrape_interval 1s, honor_labels: true, the
     project's alert rules loaded, with their one runbook base URL setting changed to a test URL);
  2. `ncclsmoke launch -n 4` (socket, small sizes) judged against a loose profile -> pass;
     publish with --history: exit 0, and ncclsmoke_verdict{verdict="pass"} and the last-success
     time appear in Prometheus's HTTP API (bounded wait);
  3. another run against an impossible baseline -> fail (BANDWIDTH_REGRESSION error): publish
     exits 1 and the NcclSmokeFailed and NcclSmokeBandwidthRegression alerts fire in Prometheus;
     the pass run's last-success time is still there (POST keeps it);
  3b. the same failed verdict with its finding narrowed to one rank's host (as a per-rank finding
     names it): ncclsmoke_suspect_host names that host and its node, NcclSmokeSuspectHost fires,
     and NcclSmokeFailed's summary names the host; every firing alert's runbook_url is the test
     base URL + its page and anchor (set once, in the rules file);
  2c. every panel query of the Grafana dashboard (cronjob/dashboards/ncclsmoke.json: structure
     checked, variables substituted) returns data; the panels it must have (run duration,
     ranks by status, transport status, findings of the last run) are there and return the
     pushed runs' values: the duration, the ranks per status (the narrowed verdict also has a
     missing rank and a degraded socket phase), the socket phase's status through the panel's
     value mapping, the last run's findings exactly; the runbook_base variable resolves
     to the rules' base URL; then the real failed verdict pushed again clears the host (the family
     is always pushed, so the Pushgateway's POST replaces it);
  2d. a later pass pushed for the failed profile: "Findings of the last run" no longer lists
     its BANDWIDTH_REGRESSION (a worst-of-the-range query still would), and the duration
     and transport panels show the new run;
  4. the Pushgateway stopped: a third run's publish exits 5 ("metrics not delivered", naming the
     URL) and the history still grows (3 runs).
Everything started here is stopped, even on failure. Exit 77 only when a binary is absent.
"""
import argparse
import json
import os
import re
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/
from waiting import poll_until, wait_until  # noqa: E402

WAIT_S = 60          # bounded waits for readiness, scrapes and alerts
CLUSTER = "e2e"
# The runbook base URL as the rules ship it, and what this test sets instead (trailing slash
# on purpose: the alerts and the dashboard variable drop it).
SHIPPED_RUNBOOK_BASE = "https://git.example.com/ncclsmoke/blob/main"
E2E_RUNBOOK_BASE = "https://runbooks.e2e.test/ncclsmoke/blob/v0/"
RUNBOOK = E2E_RUNBOOK_BASE.rstrip("/")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def listens_on(pid, port):
    """True when process `pid` holds the socket listening on 127.0.0.1:`port` (/proc/net/tcp's
    LISTEN entry, found among the process's descriptors)."""
    local = f"0100007F:{port:04X}"
    inodes = set()
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            fields = line.split()
            if fields[1] == local and fields[3] == "0A":  # 0A: LISTEN
                inodes.add(f"socket:[{fields[9]}]")
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") in inodes:
                return True
        except OSError:
            pass
    return False


def wait_ready(name, url, proc, log):
    last = [""]

    def ready():
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode} before it was ready:\n{tail(log)}")
        try:
            status, _ = http_get(url, timeout=2)
            return status == 200
        except (urllib.error.URLError, OSError) as e:
            last[0] = str(e)
            return False
    if not poll_until(ready, WAIT_S, 0.2):
        raise RuntimeError(f"{name} not ready at {url} after {WAIT_S}s ({last[0]}):\n{tail(log)}")
    # Ours, not another process that took the port first (ours would exit on bind): the socket
    # listening on the port is one of our process's.
    if not listens_on(proc.pid, urllib.parse.urlsplit(url).port):
        raise RuntimeError(f"{name} (pid {proc.pid}) does not hold the socket listening on {url}: "
                           f"another process answers it (exit {proc.poll()}):\n{tail(log)}")


def tail(path, n=20):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return "(no log)"


def query(prom, expr):
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    _, body = http_get(url)
    doc = json.loads(body)
    if doc.get("status") != "success":
        raise RuntimeError(f"query {expr!r} failed: {body[:300]}")
    return doc["data"]["result"]


def wait_for(prom, expr, what):
    start = time.monotonic()
    result = wait_until(lambda: query(prom, expr), WAIT_S, f"{what}: {expr} to return data", 0.5)
    print(f"ok: {what} after {time.monotonic() - start:.1f}s: {expr} -> "
          f"{[(r['metric'], r['value'][1]) for r in result]}")
    return result


def query_range(prom, expr, seconds=60, step=5):
    now = time.time()
    url = f"{prom}/api/v1/query_range?" + urllib.parse.urlencode(
        {"query": expr, "start": f"{now - seconds:.3f}", "end": f"{now:.3f}", "step": str(step)})
    _, body = http_get(url)
    doc = json.loads(body)
    if doc.get("status") != "success":
        raise RuntimeError(f"query_range {expr!r} failed: {body[:300]}")
    return doc["data"]["result"]


def wait_alert(prom, alertname, labels, what):
    """The firing alert with these labels (from /api/v1/alerts, which has the annotations)."""
    seen = []

    def firing():
        _, body = http_get(f"{prom}/api/v1/alerts")
        seen[:] = [a for a in json.loads(body)["data"]["alerts"]
                   if a["labels"].get("alertname") == alertname]
        return next((a for a in seen if a["state"] == "firing"
                     and all(a["labels"].get(k) == v for k, v in labels.items())), None)
    a = wait_until(firing, WAIT_S, lambda: f"{what}: a firing {alertname} with {labels} (saw {seen})",
                   0.5)
    print(f"ok: {what}: {a['labels']} summary={a['annotations'].get('summary')!r}")
    return a


# Panels the dashboard must have: title -> the metric its query reads.
REQUIRED_PANELS = {
    "Run duration": "ncclsmoke_run_duration_seconds",
    "Ranks by status": "ncclsmoke_ranks",
    "Transport status over time": "ncclsmoke_transport_status",
    "Findings of the last run": "ncclsmoke_findings",
}
RUNBOOK_RULE = "ncclsmoke:runbook_base_url:info"


def dashboard_queries(path):
    """(panels by title, [(panel title, refId, expr, instant)] for every panel target), after
    checking the JSON's shape: schemaVersion >= 36, a Prometheus datasource variable and a cluster
    variable that every query uses, unique panel ids, gridPos, datasource ${datasource} on panels
    and targets; the REQUIRED_PANELS, "Findings of the last run" an instant query on the plain
    series (the last sample: no *_over_time, no $__range); a hidden runbook_base variable read
    from the rules' base URL series, and every dashboard link under ${runbook_base}/."""
    with open(path) as f:
        d = json.load(f)
    problems = []
    if not isinstance(d.get("schemaVersion"), int) or d["schemaVersion"] < 36:
        problems.append(f"schemaVersion {d.get('schemaVersion')!r} < 36")
    for key in ("title", "uid", "panels", "templating", "time"):
        if key not in d:
            problems.append(f"no {key}")
    variables = {v.get("name"): v for v in d.get("templating", {}).get("list", [])}
    dsv = variables.get("datasource", {})
    if dsv.get("type") != "datasource" or dsv.get("query") != "prometheus":
        problems.append(f"no Prometheus datasource variable: {dsv}")
    cl = variables.get("cluster", {})
    if cl.get("type") != "query" or "cluster" not in json.dumps(cl.get("query")):
        problems.append(f"no cluster query variable: {cl}")
    ds_ref = {"type": "prometheus", "uid": "${datasource}"}
    ids, out = set(), []
    for p in d.get("panels", []):
        title = p.get("title", "?")
        if p.get("id") in ids:
            problems.append(f"panel {title}: duplicate id {p.get('id')}")
        ids.add(p.get("id"))
        if not all(k in p.get("gridPos", {}) for k in ("h", "w", "x", "y")):
            problems.append(f"panel {title}: no gridPos")
        if p.get("datasource") != ds_ref:
            problems.append(f"panel {title}: datasource {p.get('datasource')} is not ${{datasource}}")
        if not p.get("targets"):
            problems.append(f"panel {title}: no targets")
        for t in p.get("targets", []):
            if t.get("datasource") != ds_ref or not t.get("expr") or not t.get("refId"):
                problems.append(f"panel {title}: target {t.get('refId')} lacks datasource/expr/refId")
                continue
            if "$cluster" not in t["expr"]:
                problems.append(f"panel {title}: {t['refId']} ignores $cluster")
            out.append((title, t["refId"], t["expr"], bool(t.get("instant"))))
    panels = {p.get("title"): p for p in d.get("panels", [])}
    for title, metric in REQUIRED_PANELS.items():
        exprs = [t.get("expr", "") for t in panels.get(title, {}).get("targets", [])]
        if not any(metric in e for e in exprs):
            problems.append(f"no panel {title!r} querying {metric}")
    for t in panels.get("Findings of the last run", {}).get("targets", []):
        if not t.get("instant") or t.get("range") or "_over_time" in t.get("expr", "") \
                or "$__range" in t.get("expr", ""):
            problems.append(f"Findings of the last run: {t.get('refId')} must be an instant query on the "
                            f"last sample, not a range aggregate: {t.get('expr')!r}")
    rb = variables.get("runbook_base", {})
    if rb.get("type") != "query" or RUNBOOK_RULE not in json.dumps(rb.get("query")) or rb.get("hide") != 2:
        problems.append(f"no hidden runbook_base variable reading {RUNBOOK_RULE}: {rb}")
    links = d.get("links", [])
    if not links or any(not str(link.get("url", "")).startswith("${runbook_base}/") for link in links):
        problems.append(f"dashboard links must all start with ${{runbook_base}}/: {links}")
    if problems:
        raise AssertionError(f"{path}: " + "; ".join(problems))
    return panels, out


def value_text(panel, value):
    """The text a panel's value mapping gives a number (state-timeline panels)."""
    for m in panel["fieldConfig"]["defaults"].get("mappings", []):
        if m.get("type") == "value":
            key = f"{float(value):g}"
            if key in m["options"]:
                return m["options"][key]["text"]
    raise AssertionError(f"panel {panel['title']!r} maps no text to {value}")


def grafana_variable_regex(regex, value):
    """A Grafana variable's /regex/ applied to one value (its first group, as Grafana takes it)."""
    assert regex.startswith("/") and regex.endswith("/"), regex
    m = re.search(regex[1:-1], value)
    assert m, f"{regex} does not match {value!r}"
    return m.group(1) if m.groups() else m.group(0)


def by_labels(result, **labels):
    return [r for r in result if all(r["metric"].get(k) == v for k, v in labels.items())]


def last_value(series):
    return float(series["values"][-1][1] if "values" in series else series["value"][1])


def grafana_substitute(expr, cluster):
    # What Grafana would send: $cluster as a regex matching the test's cluster, fixed intervals.
    for var, val in (("${cluster}", cluster), ("$cluster", cluster), ("$__range", "1h"),
                     ("$__rate_interval", "1m"), ("$__interval", "15s")):
        expr = expr.replace(var, val)
    assert "$" not in expr, f"unsubstituted variable in {expr!r}"
    return expr


def run(cmd, **kw):
    print("+ " + " ".join(cmd), flush=True)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=180, **kw)


def history_runs(db):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        return con.execute("SELECT count(*) FROM runs").fetchone()[0]
    finally:
        con.close()


def launch(ncclsmoke, out_dir, profiles, profile):
    r = run([ncclsmoke, "launch", "-n", "4", "--out-dir", out_dir, "--transports", "socket",
             "--min-bytes", "4096", "--max-bytes", "65536", "--gate-bytes", "65536",
             "--iters", "3", "--warmup-iters", "1", "--timeout", "60",
             "--profiles", profiles, "--profile", profile, "--quiet"])
    verdict = os.path.join(out_dir, "verdict.json")
    if not os.path.exists(verdict):
        raise AssertionError(f"launch wrote no verdict (exit {r.returncode}):\n{r.stdout}\n{r.stderr}")
    with open(verdict) as f:
        v = json.load(f)
    print(f"launch {profile}: exit {r.returncode}, verdict {v['verdict']}, findings "
          f"{[x['code'] + '/' + x['severity'] for x in v['findings']]}")
    return verdict, v


PROFILES = """\
profiles:
  - name: e2e-loose
    description: loopback socket, a baseline any machine meets
    transports:
      - transport: socket
        baselines:
          - {busbw_gbps: 0.000001, gate_bytes: 65536, source: "e2e test"}
  - name: e2e-tight
    description: loopback socket, a baseline no machine meets (forces BANDWIDTH_REGRESSION error)
    transports:
      - transport: socket
        baselines:
          - {busbw_gbps: 1000000, gate_bytes: 65536, source: "e2e test"}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ncclsmoke", required=True)
    ap.add_argument("--rules", required=True)
    ap.add_argument("--dashboard", required=True)
    args = ap.parse_args()
    for tool in ("prometheus", "prometheus-pushgateway"):
        if not shutil.which(tool):
            print(f"SKIP: {tool} not found (Debian packages prometheus, prometheus-pushgateway)")
            return 77
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        os.environ.pop(var, None)

    tmp = tempfile.mkdtemp(prefix="ncclsmoke-e2e-prom-")
    procs = []
    try:
        pg_port, prom_port = free_port(), free_port()
        while prom_port == pg_port:
            prom_port = free_port()
        pg_url = f"http://127.0.0.1:{pg_port}"
        prom = f"http://127.0.0.1:{prom_port}"

        pg_log = os.path.join(tmp, "pushgateway.log")
        # Debian's build defaults --persistence.file to /var/lib/prometheus/pushgateway.data:
        # keep the state in the temp dir so runs never share (or leave) it.
        pg = subprocess.Popen(["prometheus-pushgateway", f"--web.listen-address=127.0.0.1:{pg_port}",
                               f"--persistence.file={os.path.join(tmp, 'pushgateway.data')}"],
                              stdout=open(pg_log, "w"), stderr=subprocess.STDOUT)
        procs.append(pg)
        wait_ready("pushgateway", f"{pg_url}/-/ready", pg, pg_log)

        # The rules as shipped, but for their one runbook base URL setting: the line a user edits.
        rules = os.path.join(tmp, "ncclsmoke-alerts.yaml")
        with open(args.rules) as f:
            text = f.read()
        shipped = f"          url: {SHIPPED_RUNBOOK_BASE}\n"
        assert text.count(shipped) == 1, f"the rules' runbook base setting is not {shipped!r} once"
        with open(rules, "w") as f:
            f.write(text.replace(shipped, f"          url: {E2E_RUNBOOK_BASE}\n"))
        config = os.path.join(tmp, "prometheus.yml")
        with open(config, "w") as f:
            f.write(f"""\
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - {rules}
scrape_configs:
  - job_name: pushgateway
    honor_labels: true
    static_configs:
      - targets: ['127.0.0.1:{pg_port}']
""")
        prom_log = os.path.join(tmp, "prometheus.log")
        p = subprocess.Popen(["prometheus", f"--config.file={config}",
                              f"--storage.tsdb.path={os.path.join(tmp, 'data')}",
                              f"--web.listen-address=127.0.0.1:{prom_port}"],
                             stdout=open(prom_log, "w"), stderr=subprocess.STDOUT)
        procs.append(p)
        wait_ready("prometheus", f"{prom}/-/ready", p, prom_log)

        profiles = os.path.join(tmp, "profiles.yaml")
        with open(profiles, "w") as f:
            f.write(PROFILES)
        db = os.path.join(tmp, "h.db")

        # --- 1. a passing run, published ---------------------------------------------------
        d1 = os.path.join(tmp, "run1")
        verdict1, v1 = launch(args.ncclsmoke, d1, profiles, "e2e-loose")
        assert v1["verdict"] == "pass", f"expected a pass against e2e-loose, got {v1['verdict']}"
        r = run([args.ncclsmoke, "publish", verdict1, "--pushgateway", pg_url, "--history", db,
                 "--cluster", CLUSTER])
        print(r.stdout + r.stderr)
        assert r.returncode == 0, f"publish of a pass exited {r.returncode}"
        assert history_runs(db) == 1
        sel = f'cluster="{CLUSTER}",profile="e2e-loose"'
        wait_for(prom, f'ncclsmoke_verdict{{{sel},verdict="pass",job="ncclsmoke"}} == 1',
                 "pass verdict scraped")
        success = wait_for(prom, f'ncclsmoke_last_success_timestamp_seconds{{{sel}}}',
                           "last success scraped")
        busbw = wait_for(prom, f'ncclsmoke_gate_busbw_bytes_per_second{{{sel},transport="socket"}} > 0',
                         "gate busbw scraped")
        wait_for(prom, f'ncclsmoke_gate_ratio{{{sel},transport="socket"}} > 1', "gate ratio scraped")
        wait_for(prom, f'ncclsmoke_findings{{{sel},code="SILENT_FALLBACK"}} == 0',
                 "zero SILENT_FALLBACK count scraped")
        # The same text passes promtool's metric lint (when promtool is installed).
        if shutil.which("promtool"):
            text = run([args.ncclsmoke, "publish", verdict1, "--cluster", CLUSTER]).stdout
            chk = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True,
                                 text=True, timeout=60)
            assert chk.returncode == 0 and not (chk.stdout + chk.stderr).strip(), \
                f"promtool check metrics: {chk.stdout}{chk.stderr}"
            print("ok: promtool check metrics on the real run's metrics")

        # Label values that need escaping in the grouping URL (base64 for '/') and the text.
        odd = dict(v1)
        odd["baseline"] = dict(v1.get("baseline") or {}, profile='team/a "b" \\ c')
        odd_path = os.path.join(tmp, "odd.json")
        with open(odd_path, "w") as f:
            json.dump(odd, f)
        r = run([args.ncclsmoke, "publish", odd_path, "--pushgateway", pg_url, "--cluster", "c/1 x"])
        print(r.stdout + r.stderr)
        assert r.returncode == 0, f"publish with odd labels exited {r.returncode}"
        wait_for(prom, 'ncclsmoke_verdict{cluster="c/1 x",profile="team/a \\"b\\" \\\\ c",verdict="pass"} == 1',
                 "odd label values round-trip through the Pushgateway")

        # --- 2. a failing run (impossible baseline): exit 1, alerts fire -----------------------
        d2 = os.path.join(tmp, "run2")
        verdict2, v2 = launch(args.ncclsmoke, d2, profiles, "e2e-tight")
        assert v2["verdict"] == "fail", f"expected a fail against e2e-tight, got {v2['verdict']}"
        r = run([args.ncclsmoke, "publish", verdict2, "--pushgateway", pg_url, "--history", db,
                 "--cluster", CLUSTER])
        print(r.stdout + r.stderr)
        assert r.returncode == 1, f"publish of a fail exited {r.returncode}, expected 1"
        assert history_runs(db) == 2
        tight = f'cluster="{CLUSTER}",profile="e2e-tight"'
        wait_for(prom, f'ncclsmoke_verdict{{{tight},verdict="fail"}} == 1', "fail verdict scraped")
        wait_for(prom, f'ALERTS{{alertname="NcclSmokeFailed",alertstate="firing",{tight}}}',
                 "NcclSmokeFailed firing")
        wait_for(prom, f'ALERTS{{alertname="NcclSmokeBandwidthRegression",alertstate="firing",{tight}}}',
                 "NcclSmokeBandwidthRegression firing")
        # Still there for the passing profile (another group), and no alert for it.
        again = query(prom, f'ncclsmoke_last_success_timestamp_seconds{{{sel}}}')
        assert again and again[0]["value"][1] == success[0]["value"][1], (again, success)
        assert not query(prom, f'ALERTS{{alertname="NcclSmokeFailed",{sel}}}')
        # The world-wide regression names no host: the suspect family is the host-less 0.
        wait_for(prom, f'ncclsmoke_suspect_host{{{tight},host=""}} == 0', "no suspect host for a world-wide finding")

        # --- 2b. the suspect host: one rank's host named by the finding -------------------
        narrowed = json.loads(json.dumps(v2))
        suspect_rank = narrowed["ranks"][1]
        host = suspect_rank["host"]
        node = suspect_rank.get("node") or host  # the finding's rank's node (local-1 under launch)
        assert host, f"rank 1 has no host in the verdict: {suspect_rank}"
        narrowed["findings"][0]["ranks"] = [suspect_rank["rank"]]
        narrowed["findings"][0]["hosts"] = [host]
        # For the dashboard's panels (2c), states other than the all-green ones: rank 3 never
        # joined, the socket phase degraded.
        narrowed["ranks"][3]["status"] = "missing"
        next(p for p in narrowed["phases"] if p["name"] == "transport:socket")["status"] = "degraded"
        narrowed_path = os.path.join(tmp, "narrowed.json")
        with open(narrowed_path, "w") as f:
            json.dump(narrowed, f)
        r = run([args.ncclsmoke, "publish", narrowed_path, "--pushgateway", pg_url, "--cluster", CLUSTER])
        print(r.stdout + r.stderr)
        assert r.returncode == 1, f"publish of the narrowed fail exited {r.returncode}, expected 1"
        code = narrowed["findings"][0]["code"]
        hq = f'{tight},code="{code}",host="{host}",node="{node}"'
        wait_for(prom, f'ncclsmoke_suspect_host{{{hq}}} == 1', "suspect host and node scraped")
        wait_alert(prom, "NcclSmokeSuspectHost", {"cluster": CLUSTER, "host": host, "node": node, "code": code},
                   "NcclSmokeSuspectHost firing for the host")
        failed = {}

        def names_host():  # the summary is re-rendered on each evaluation (1 s)
            failed["alert"] = wait_alert(prom, "NcclSmokeFailed",
                                         {"cluster": CLUSTER, "profile": "e2e-tight"},
                                         "NcclSmokeFailed firing")
            return f"suspect host(s) {host} (node {node}, {code})" in \
                failed["alert"]["annotations"]["summary"]
        wait_until(names_host, WAIT_S,
                   lambda: f"NcclSmokeFailed's summary to name {host}: {failed['alert']}", 1)
        a = failed["alert"]
        print("ok: NcclSmokeFailed's summary names the host and node")
        want = f"{RUNBOOK}/docs/findings.md#finding-codes"
        assert a["annotations"].get("runbook_url") == want, (a["annotations"], want)
        a = wait_alert(prom, "NcclSmokeSuspectHost", {"cluster": CLUSTER, "host": host, "code": code},
                       "NcclSmokeSuspectHost firing")
        want = f"{RUNBOOK}/docs/findings.md#{code.lower()}"
        assert a["annotations"].get("runbook_url") == want, (a["annotations"], want)
        a = wait_alert(prom, "NcclSmokeBandwidthRegression", {"cluster": CLUSTER, "profile": "e2e-tight"},
                       "NcclSmokeBandwidthRegression firing")
        want = f"{RUNBOOK}/docs/findings.md#bandwidth_regression"
        assert a["annotations"].get("runbook_url") == want, (a["annotations"], want)
        _, body = http_get(f"{prom}/api/v1/alerts")
        firing = [x for x in json.loads(body)["data"]["alerts"] if x["state"] == "firing"]
        assert firing and all(x["annotations"].get("runbook_url", "").startswith(RUNBOOK + "/docs/")
                              for x in firing), firing
        print(f"ok: the runbook_url of all {len(firing)} firing alerts is the one base URL set in the "
              f"rules ({RUNBOOK}) + page#anchor")

        # --- 2c. every dashboard panel's query returns data --------------------------------
        panels, queries = dashboard_queries(args.dashboard)
        for title, ref, expr, instant in queries:
            q = grafana_substitute(expr, CLUSTER)
            result = wait_until(lambda: query(prom, q) if instant else query_range(prom, q), WAIT_S,
                                f"dashboard panel {title!r} {ref}: data for {q}", 1)
            print(f"ok: dashboard {title!r} {ref}: {len(result)} series")
        print(f"ok: all {len(queries)} dashboard queries returned data")

        def panel_result(title, ref="A"):
            t = next(t for t in panels[title]["targets"] if t["refId"] == ref)
            q = grafana_substitute(t["expr"], CLUSTER)
            return query(prom, q) if t.get("instant") else query_range(prom, q)

        def findings_rows(result, profile):
            return {(r["metric"]["code"], r["metric"]["severity"]): float(r["value"][1])
                    for r in by_labels(result, cluster=CLUSTER, profile=profile)}

        def verdict_findings(v):
            counts = {}
            for x in v["findings"]:
                key = (x["code"], x["severity"])
                counts[key] = counts.get(key, 0) + 1
            return counts

        def phase_status(v, transport):
            return next(p["status"] for p in v["phases"] if p["name"] == f"transport:{transport}")

        def check_panels(profile, v, what):
            """The required panels show this verdict as the last run of (CLUSTER, profile)."""
            series = by_labels(panel_result("Run duration"), cluster=CLUSTER, profile=profile)
            assert len(series) == 1 and abs(last_value(series[0]) - v["duration_s"]) < 1e-6, \
                (what, series, v["duration_s"])
            ranks = {r["metric"]["status"]: last_value(r)
                     for r in by_labels(panel_result("Ranks by status"), cluster=CLUSTER, profile=profile)}
            want = {s: float(sum(1 for r in v["ranks"] if r["status"] == s))
                    for s in ("joined", "missing", "lost", "failed")}
            assert ranks == want and sum(ranks.values()) == v["world"]["size"], (what, ranks, want)
            ts = by_labels(panel_result("Transport status over time"), cluster=CLUSTER, profile=profile,
                           transport="socket")
            assert len(ts) == 1, (what, ts)
            text = value_text(panels["Transport status over time"], last_value(ts[0]))
            assert text == phase_status(v, "socket"), (what, text, phase_status(v, "socket"))
            rows = findings_rows(panel_result("Findings of the last run"), profile)
            assert rows == verdict_findings(v), (what, rows, verdict_findings(v))
            print(f"ok: {what}: Run duration {v['duration_s']:.3f} s, Ranks by status {ranks}, "
                  f"Transport status socket={text}, Findings of the last run {rows}")

        check_panels("e2e-loose", v1, "the pass run (e2e-loose)")
        check_panels("e2e-tight", narrowed, "the failed run (e2e-tight)")
        assert findings_rows(panel_result("Findings of the last run"), "e2e-tight").get((code, "error")), \
            f"Findings of the last run does not list the failed run's {code}"
        # The runbook_base variable: label_values(ncclsmoke:runbook_base_url:info, url), its regex.
        with open(args.dashboard) as f:
            rb = next(v for v in json.load(f)["templating"]["list"] if v["name"] == "runbook_base")
        _, body = http_get(f"{prom}/api/v1/label/url/values?" + urllib.parse.urlencode({"match[]": RUNBOOK_RULE}))
        values = json.loads(body)["data"]
        assert [grafana_variable_regex(rb["regex"], x) for x in values] == [RUNBOOK], (values, RUNBOOK)
        print(f"ok: the dashboard's runbook_base resolves to the rules' base URL {RUNBOOK}")

        # The real (host-less) verdict pushed again: the host is gone, not kept by the POST.
        r = run([args.ncclsmoke, "publish", verdict2, "--pushgateway", pg_url, "--cluster", CLUSTER])
        assert r.returncode == 1, r.stdout + r.stderr
        wait_until(lambda: not query(prom, f'ncclsmoke_suspect_host{{{hq}}}'), WAIT_S,
                   f"{host} to be no suspect any more after a push that names no host", 0.5)
        print("ok: a push naming no host clears the suspect host")

        # --- 2d. the last run, not the worst of the range ----------------------------------
        # A later run of e2e-tight passes: the real pass run, under e2e-tight's profile name.
        later = json.loads(json.dumps(v1))
        later["baseline"] = dict(v1.get("baseline") or {}, profile="e2e-tight")
        later_path = os.path.join(tmp, "later-pass.json")
        with open(later_path, "w") as f:
            json.dump(later, f)
        r = run([args.ncclsmoke, "publish", later_path, "--pushgateway", pg_url, "--cluster", CLUSTER])
        assert r.returncode == 0, r.stdout + r.stderr
        wait_for(prom, f'ncclsmoke_verdict{{{tight},verdict="pass"}} == 1', "the later pass scraped")
        wait_until(lambda: (code, "error") not in findings_rows(panel_result("Findings of the last run"),
                                                                 "e2e-tight"),
                   WAIT_S, f"Findings of the last run to drop {code} after a pass", 0.5)
        check_panels("e2e-tight", later, "the later pass (e2e-tight)")
        worst = grafana_substitute('max by (cluster, profile, code, severity) (max_over_time('
                                   'ncclsmoke_findings{cluster=~"$cluster"}[$__range])) > 0', CLUSTER)
        assert (code, "error") in findings_rows(query(prom, worst), "e2e-tight"), \
            "the old worst-of-the-range query should still list the failure: this step proves nothing"
        print(f"ok: Findings of the last run dropped {code} after a later pass (the worst-of-the-range "
              f"query still lists it)")

        # --- 3. the Pushgateway down: exit 5, history still written ------------------------
        pg.terminate()
        pg.wait(timeout=30)
        d3 = os.path.join(tmp, "run3")
        verdict3, v3 = launch(args.ncclsmoke, d3, profiles, "e2e-loose")
        assert v3["verdict"] == "pass", v3["verdict"]
        t0 = time.monotonic()
        r = run([args.ncclsmoke, "publish", verdict3, "--pushgateway", pg_url, "--history", db,
                 "--cluster", CLUSTER, "--retries", "2", "--timeout", "3"])
        print(r.stdout + r.stderr + f"(publish took {time.monotonic() - t0:.1f}s)")
        assert r.returncode == 5, f"publish with the Pushgateway down exited {r.returncode}, expected 5"
        assert "metrics not delivered" in r.stderr and pg_url in r.stderr and "3 attempts" in r.stderr, r.stderr
        assert history_runs(db) == 3, history_runs(db)
        print("ok: Pushgateway down -> exit 5, history has 3 runs")
        print(f"figures: gate busbw on loopback {float(busbw[0]['value'][1]) / 1e9:.3f} GB/s")
        return 0
    except Exception as e:  # noqa: BLE001 - report any failure with the logs
        print(f"FAIL: {e}")
        for name in ("pushgateway.log", "prometheus.log"):
            print(f"--- {name} (tail) ---\n{tail(os.path.join(tmp, name))}")
        return 1
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
