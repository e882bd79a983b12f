#!/usr/bin/python3
"""End to end: `ncclsmoke publish` into a real Pushgateway, scraped by a real Prometheus.

On 127.0.0.1 with free ports, temp config and storage:
  1. start prometheus-pushgateway and prometheus (scrape_interval 1s, honor_labels: true, the
     project's alert rules loaded);
  2. `ncclsmoke launch -n 4` (socket, small sizes) judged against a loose profile -> pass;
     publish with --history: exit 0, and ncclsmoke_verdict{verdict="pass"} and the last-success
     time appear in Prometheus's HTTP API (bounded wait);
  3. another run against an impossible baseline -> fail (BANDWIDTH_REGRESSION error): publish
     exits 1 and the NcclSmokeFailed and NcclSmokeBandwidthRegression alerts fire in Prometheus;
     the pass run's last-success time is still there (POST keeps it);
  4. the Pushgateway stopped: a third run's publish exits 5 ("metrics not delivered", naming the
     URL) and the history still grows (3 runs).
Everything started here is stopped, even on failure. Exit 77 only when a binary is absent.
"""
import argparse
import json
import os
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

WAIT_S = 60          # bounded waits for readiness, scrapes and alerts
CLUSTER = "e2e"


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read().decode()


def wait_ready(name, url, proc, log):
    deadline = time.monotonic() + WAIT_S
    last = ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{name} exited with {proc.returncode} before it was ready:\n{tail(log)}")
        try:
            status, _ = http_get(url, timeout=2)
            if status == 200:
                # Ours, not another process that took the port first (ours would exit on bind).
                time.sleep(0.3)
                if proc.poll() is not None:
                    raise RuntimeError(f"{name} exited with {proc.returncode}; another process answers "
                                       f"{url}:\n{tail(log)}")
                return
        except (urllib.error.URLError, OSError) as e:
            last = str(e)
        time.sleep(0.2)
    raise RuntimeError(f"{name} not ready at {url} after {WAIT_S}s ({last}):\n{tail(log)}")


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
    deadline = time.monotonic() + WAIT_S
    start = time.monotonic()
    while time.monotonic() < deadline:
        result = query(prom, expr)
        if result:
            print(f"ok: {what} after {time.monotonic() - start:.1f}s: {expr} -> "
                  f"{[(r['metric'], r['value'][1]) for r in result]}")
            return result
        time.sleep(0.5)
    raise AssertionError(f"{what}: {expr} still empty after {WAIT_S}s")


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

        rules = os.path.join(tmp, "ncclsmoke-alerts.yaml")
        shutil.copy(args.rules, rules)
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
