"""Synthetic run histories for the report's tests and benchmark, made from a REAL verdict.

`real_template()` runs `ncclsmoke launch -n 2 --transports socket` (judged against the
`ci-loopback` profile when the binary accepts it) and returns its global verdict; `vary()` copies
it with a new run_id, started_at, gate busbw, verdict/exit code, findings and hosts, keeping
every field the schema requires, so each generated file is a verdict the history can import.
`scenario()` lays out a history: healthy runs around the baseline, then a bandwidth regression
(degraded, then fail), an occasional SILENT_FALLBACK and inconclusive run.

Used by tests/results/report/test_report_*.py and bench/history_bench.py (/usr/bin/python3 only).
"""

import copy
import datetime
import json
import os
import random
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PROFILES = os.path.join(ROOT, "results", "judging", "profiles.example.yaml")
SCHEMA = os.path.join(ROOT, "results", "verdict", "verdict.schema.json")

BASELINE = 0.74          # GB/s at 64 MiB: the band these histories are judged against
DEGRADED_RATIO = 0.6
FAIL_RATIO = 0.25
GATE_BYTES = 64 << 20
EXIT_CODES = {"pass": 0, "fail": 1, "degraded": 3, "inconclusive": 4}


def real_template(binary, workdir, timeout=120, ranks=2):
    """The global verdict of a real `ranks`-rank socket run on loopback."""
    out = os.path.join(workdir, "template-run" if ranks == 2 else f"template-run-{ranks}")
    os.makedirs(out, exist_ok=True)
    base = [binary, "launch", "-n", str(ranks), "--transports", "socket", "--out-dir", out,
            "--quiet"]
    attempts = [base + ["--profiles", PROFILES, "--profile", "ci-loopback"], base]
    last = None
    for argv in attempts:
        p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
        path = os.path.join(out, "verdict.json")
        if os.path.exists(path):
            with open(path) as f:
                doc = json.load(f)
            if any(r.get("transport") == "socket" for r in doc.get("transports", [])):
                return doc
        last = f"{' '.join(argv)} -> exit {p.returncode}: {p.stdout[-2000:]}"
    raise RuntimeError(f"no usable verdict from a real launch: {last}")


def rfc3339(t):
    return datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def run_id_at(t, i):
    stamp = datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{stamp}-{i:08x}"


def _set_band(doc):
    """Judged against a socket band of BASELINE GB/s at 64 MiB (as if learned on this machine)."""
    band = {"busbw_gbps": BASELINE, "gate_bytes": GATE_BYTES, "degraded_ratio": DEGRADED_RATIO,
            "fail_ratio": FAIL_RATIO, "source": "learned: median of 20 passing runs"}
    b = doc.get("baseline")
    if not isinstance(b, dict) or not b.get("transports"):
        b = {"profile": "ci-loopback", "world_size": 2, "transports": []}
    b["profile"] = b.get("profile") or "ci-loopback"
    found = False
    for t in b["transports"]:
        if t.get("transport") == "socket":
            t["band"] = dict(band)
            found = True
    if not found:
        b["transports"].append({"transport": "socket", "identity": {}, "required": True,
                                "world_size_key": 2, "band": dict(band)})
    doc["baseline"] = b


def prepare(template):
    """A copy of the template judged against the test band, with its gate row flagged."""
    doc = copy.deepcopy(template)
    _set_band(doc)
    doc["findings"] = []
    for r in doc["transports"]:
        r.pop("gate", None)
        if r["transport"] == "socket" and r["bytes"] == GATE_BYTES:
            r["gate"] = True
    return doc


def finding(code, severity, message, ranks, hosts, hint, evidence=None):
    f = {"code": code, "severity": severity, "layer": "transport", "ranks": ranks,
         "hosts": hosts, "message": message, "hint": hint}
    if evidence is not None:
        f["evidence"] = evidence
    return f


def vary(prepared, i, t, busbw, verdict, findings=(), hosts=None):
    """One run: `prepared` (from prepare()) with run i's time, gate busbw, verdict and findings.
    busbw None: the socket transport measured nothing (rows dropped)."""
    doc = copy.deepcopy(prepared)
    doc["run_id"] = run_id_at(t, i)
    doc["started_at"] = rfc3339(t)
    doc["verdict"] = verdict
    doc["exit_code"] = EXIT_CODES[verdict]
    doc["findings"] = [copy.deepcopy(f) for f in findings]
    if hosts:
        for r, h in zip(doc["ranks"], hosts):
            r["host"] = h
    if busbw is None:
        doc["transports"] = [r for r in doc["transports"] if r["transport"] != "socket"]
        for p in doc["phases"]:
            if p["name"] == "transport:socket":
                p["status"] = "fail"
                p["detail"] = "connect to rank 1 timed out after 10 s"
        return doc
    for r in doc["transports"]:
        if r["transport"] != "socket" or r["bytes"] != GATE_BYTES:
            continue
        bw = busbw if r.get("rank", -1) < 0 else busbw * (1.0 + 0.01 * (r["rank"] + 1))
        # two ranks: busbw == algbw; time_us from bytes / algbw
        r["busbw_gbps"] = bw
        r["algbw_gbps"] = bw
        r["time_us"] = r["bytes"] / (bw * 1e3)
    return doc


def scenario(prepared, n, t_end, span_s, seed=7, hostile=False):
    """n runs evenly spread over [t_end - span_s, t_end]: healthy, then from 85% on a bandwidth
    regression (degraded, then fail below FAIL_RATIO), with a SILENT_FALLBACK every ~97 runs and
    an inconclusive (transport failed, no number) every ~131. hostile: one finding message and
    host carry HTML/script text (the report must escape them). Returns (docs, expected) where
    expected counts verdicts and regression runs."""
    rng = random.Random(seed)
    docs, regressions = [], []
    counts = {"pass": 0, "degraded": 0, "fail": 0, "inconclusive": 0}
    step = span_s / max(1, n - 1)
    hosts = ["vm-a", "vm-b"]
    for i in range(n):
        t = t_end - span_s + i * step
        frac = i / max(1, n - 1)
        findings = []
        busbw = rng.gauss(BASELINE * 0.98, 0.025)
        verdict = "pass"
        if i % 131 == 65:
            busbw, verdict = None, "inconclusive"
            findings.append(finding("TRANSPORT_INIT_FAILED", "error",
                                    "socket: connect to rank 1 (vm-b) timed out after 10 s",
                                    [1], ["vm-b"], "Check the rank-to-rank ports."))
        elif i % 97 == 50:
            busbw, verdict = rng.uniform(0.03, 0.06), "fail"
            findings.append(finding(
                "SILENT_FALLBACK", "warning",
                f"socket: suspected fallback, identity not read and {busbw:.3f} GB/s busbw at "
                f"{GATE_BYTES} bytes vs baseline {BASELINE} GB/s ({busbw / BASELINE * 100:.1f}%)"
                " is in a slower transport class's band", [0], ["vm-a"],
                "Check which network the transport used.", {"busbw_gbps": busbw}))
        elif frac >= 0.85:
            busbw = rng.gauss(0.40 if frac < 0.93 else 0.15, 0.02)
            ratio = busbw / BASELINE
            hard = ratio < FAIL_RATIO
            verdict = "fail" if hard else "degraded" if ratio < DEGRADED_RATIO else "pass"
            if verdict != "pass":
                findings.append(finding(
                    "BANDWIDTH_REGRESSION", "error" if hard else "warning",
                    f"socket: {busbw:.3f} GB/s busbw at {GATE_BYTES} bytes vs baseline "
                    f"{BASELINE} GB/s ({ratio * 100:.1f}%), below the "
                    f"{'fail' if hard else 'degraded'} threshold "
                    f"{(FAIL_RATIO if hard else DEGRADED_RATIO) * 100:.0f}%", [], hosts,
                    "Compare with the last passing run; look for a shaped link or a busy NIC.",
                    {"busbw_gbps": busbw, "baseline_gbps": BASELINE, "ratio": ratio}))
        if hostile and i == n - 1:
            findings.append(finding("STRAGGLER", "warning", "<script>alert(1)</script>", [1],
                                    ["<img src=x onerror=alert(2)>"], "hostile text"))
        counts[verdict] += 1
        if any(f["code"] in ("BANDWIDTH_REGRESSION", "SILENT_FALLBACK") for f in findings):
            regressions.append(run_id_at(t, i))
        docs.append(vary(prepared, i, t, busbw, verdict, findings, hosts))
    return docs, {"counts": counts, "regressions": regressions,
                  "incidents": expected_incidents(docs, set(regressions))}


def _gate_busbw(doc):
    rows = [r for r in doc["transports"] if r["transport"] == "socket" and
            r["bytes"] == GATE_BYTES and r.get("rank", -1) < 0 and r.get("busbw_gbps") is not None]
    return min((r["busbw_gbps"] for r in rows), default=None)


def expected_incidents(docs, regressed_ids):
    """The incidents the report must show, oldest first, as [first_run, last_run, runs]:
    consecutive regressed runs; a run measured in band ends one, a run that measured nothing
    (no socket rows) neither ends nor extends it."""
    out, cur = [], None
    for d in docs:
        bw = _gate_busbw(d)
        bad = d["run_id"] in regressed_ids or (bw is not None and bw / BASELINE < DEGRADED_RATIO)
        if bad:
            if cur is None:
                cur = [d["run_id"], d["run_id"], 0]
            cur[1] = d["run_id"]
            cur[2] += 1
        elif bw is not None and cur is not None:
            out.append(cur)
            cur = None
    if cur is not None:
        out.append(cur)
    return out


def regression_finding(busbw, hosts):
    ratio = busbw / BASELINE
    hard = ratio < FAIL_RATIO
    return finding(
        "BANDWIDTH_REGRESSION", "error" if hard else "warning",
        f"socket: {busbw:.3f} GB/s busbw at {GATE_BYTES} bytes vs baseline {BASELINE} GB/s "
        f"({ratio * 100:.1f}%), below the {'fail' if hard else 'degraded'} threshold "
        f"{(FAIL_RATIO if hard else DEGRADED_RATIO) * 100:.0f}%", [], hosts,
        "Compare with the last passing run; look for a shaped link or a busy NIC.",
        {"busbw_gbps": busbw, "baseline_gbps": BASELINE, "ratio": ratio})


# Three clusters of one fleet, n runs each over the same span:
#   us-east   one step change from 60% on (degraded, 0.35 GB/s): one ongoing incident;
#   eu-west   a fail step from 20% to 35% that cleared, a degraded one from 75%, then the two
#             newest runs measure nothing (transport failed): "Now" must still say degraded;
#   ap-south  healthy; every run carries the same TRANSPORT_UNAVAILABLE once per rank.
FLEET = ("us-east", "eu-west", "ap-south")


def fleet(prepared, n, t_end, span_s, seed=11):
    """{cluster: (docs, expected)} as described above; expected as scenario()'s plus "now"
    (the state the report's Now must show) and "unmeasured_after"."""
    rng = random.Random(seed)
    step = span_s / max(1, n - 1)
    out = {}
    for ci, cluster in enumerate(FLEET):
        hosts = [f"{cluster}-node-1", f"{cluster}-node-2"]
        docs, regressions = [], []
        counts = {"pass": 0, "degraded": 0, "fail": 0, "inconclusive": 0}
        for i in range(n):
            t = t_end - span_s + i * step + ci * 7  # clusters a few seconds apart
            frac = i / max(1, n - 1)
            busbw, verdict, findings = rng.gauss(BASELINE * 0.98, 0.02), "pass", []
            if cluster == "us-east" and frac >= 0.6:
                busbw, verdict = rng.gauss(0.35, 0.01), "degraded"
            elif cluster == "eu-west" and 0.2 <= frac < 0.35:
                busbw, verdict = rng.gauss(0.12, 0.01), "fail"
            elif cluster == "eu-west" and i >= n - 2:
                busbw, verdict = None, "inconclusive"
                findings.append(finding("TRANSPORT_TIMEOUT", "error",
                                        "transport socket timed out on rank 0 (host "
                                        f"{hosts[0]}) after 60 s", [0], [hosts[0]],
                                        "Check the rank-to-rank ports."))
            elif cluster == "eu-west" and frac >= 0.75:
                busbw, verdict = rng.gauss(0.38, 0.01), "degraded"
            if verdict in ("degraded", "fail"):
                findings.append(regression_finding(busbw, hosts))
                regressions.append(run_id_at(t, i))
            if cluster == "ap-south":
                for r in (0, 1):
                    f = finding("TRANSPORT_UNAVAILABLE", "warning",
                                f"transport fabric skipped on rank {r} (host {hosts[0]}): "
                                "no efa provider",
                                [r], [hosts[0]], "Install the EFA provider or drop fabric.")
                    # As ncclsmoke writes it (schema_minor 1): what it is about, as data.
                    f["subject"] = {"reporters": [r], "reporter_host": hosts[0],
                                    "transport": "fabric", "phase": "transport:fabric",
                                    "item": "open/unavailable"}
                    f["message_template"] = "transport fabric skipped on {reporter}: no efa provider"
                    findings.append(f)
            counts[verdict] += 1
            d = vary(prepared, i, t, busbw, verdict, findings, hosts)
            d["run_id"] = d["run_id"][:-8] + f"{ci:02x}{i:06x}"
            if run_id_at(t, i) in regressions:
                regressions[-1] = d["run_id"]
            docs.append(d)
        exp = {"counts": counts, "regressions": regressions,
               "incidents": expected_incidents(docs, set(regressions)),
               "now": {"us-east": "degraded", "eu-west": "degraded", "ap-south": "ok"}[cluster],
               "unmeasured_after": 2 if cluster == "eu-west" else 0, "n": n}
        out[cluster] = (docs, exp)
    return out


# A cluster with a failing latest run, failures that are not bandwidth, and three hosts,
# next to a healthy one. gpu-east, n runs (n >= 30), on a 3-rank template:
#   runs 10-13  TRANSPORT_INIT_FAILED on socket, rank 2 on east-node-c: a failure incident of 4
#               runs, cleared by run 14;
#   run 15      RANKS_MISSING "1 of 2 ranks never joined" (that night the job ran 2 ranks): a
#               failure incident of 1 run, cleared by run 16;
#   runs 21-24  bandwidth degraded (0.40 GB/s, BANDWIDTH_REGRESSION): a bandwidth incident
#               cleared by run 25;
#   run 26      STRAGGLER on east-node-b (degraded, in band);
#   last 2 runs RANKS_MISSING "1 of 3 ranks never joined: rank 2": the latest run fails, an
#               ongoing failure incident of 2 runs; the socket key's last number (in band) is not
#               shown green over them.
#   The two RANKS_MISSING messages differ; the findings table must show one RANKS_MISSING row.
# gpu-west: n healthy runs on two hosts.
INCIDENT_FLEET = ("gpu-east", "gpu-west")


def _missing(doc, world, missing_rank):
    """The run stopped at the rendezvous: `world` ranks, `missing_rank` never joined."""
    doc["world"]["size"] = world
    doc["ranks"] = [r for r in doc["ranks"] if r["rank"] < world]
    for r in doc["ranks"]:
        if r["rank"] == missing_rank:
            for k in list(r):
                if k not in ("rank",):
                    del r[k]
            r["status"] = "missing"
            r["detail"] = "never joined"
    for p in doc["phases"]:
        if p["name"] == "rendezvous":
            p["status"] = "fail"
            p["detail"] = f"{world - 1}/{world} ranks joined"
        elif p["name"] != "world":
            p["status"] = "not_run"
            p["detail"] = "rendezvous failed"


def incident_fleet(prepared3, n, t_end, span_s, seed=5):
    """{cluster: (docs, expected)} as described above."""
    assert n >= 30
    rng = random.Random(seed)
    step = span_s / max(1, n - 1)
    out = {}
    for ci, cluster in enumerate(INCIDENT_FLEET):
        hosts = [f"{cluster.split('-')[1]}-node-{x}" for x in "abc"]
        docs = []
        for i in range(n):
            t = t_end - span_s + i * step + ci * 11
            busbw, verdict, findings = rng.gauss(BASELINE * 0.98, 0.02), "pass", []
            missing = None
            if cluster == "gpu-east":
                if 10 <= i <= 13:
                    busbw, verdict = None, "fail"
                    f = finding("TRANSPORT_INIT_FAILED", "error",
                                f"socket: rank 2 (host {hosts[2]}) could not connect to rank 0 "
                                f"(host {hosts[0]}): connection refused after 3 tries", [2],
                                [hosts[2]], f"Open the socket transport's ports on {hosts[2]}; "
                                "check its NetworkPolicy and the interface chosen (lo).")
                    f["subject"] = {"reporters": [2], "reporter_host": hosts[2],
                                    "transport": "socket", "phase": "transport:socket",
                                    "item": "open"}
                    f["message_template"] = (f"socket: {{reporter}} could not connect to rank 0 "
                                             f"(host {hosts[0]}): connection refused after 3 tries")
                    findings.append(f)
                elif i == 15:
                    busbw, verdict, missing = None, "fail", (2, 1)
                elif 21 <= i <= 24:
                    busbw, verdict = rng.gauss(0.40, 0.01), "degraded"
                    findings.append(regression_finding(busbw, hosts))
                elif i == 26:
                    verdict = "degraded"
                    findings.append(finding("STRAGGLER", "warning",
                                            f"rank 1 (host {hosts[1]}) took 2.4x the median "
                                            "all-reduce time", [1], [hosts[1]],
                                            f"Look at {hosts[1]}: CPU steal, a throttled NIC."))
                elif i >= n - 2:
                    busbw, verdict, missing = None, "fail", (3, 2)
            if missing:
                world, rank = missing
                findings.append(finding("RANKS_MISSING", "error",
                                        f"1 of {world} ranks never joined within 30 s: rank {rank}",
                                        [rank], [], "Check that those pods/processes started "
                                        "(pending pods, crash loops, wrong WORLD_SIZE), and that "
                                        "they reach MASTER_ADDR (their own verdicts say why)."))
                findings[-1]["layer"] = "rendezvous"
            d = vary(prepared3, i, t, busbw, verdict, findings,
                     hosts if cluster == "gpu-east" else hosts[:2] + [hosts[1]])
            if missing:
                _missing(d, *missing)
            d["run_id"] = d["run_id"][:-8] + f"{ci:02x}{i:06x}"
            docs.append(d)
        ids = [d["run_id"] for d in docs]
        if cluster == "gpu-east":
            exp = {"now": "fail", "latest_run": ids[-1],
                   "failure_incidents": [[ids[10], ids[13], 4, ids[14]],
                                         [ids[15], ids[15], 1, ids[16]],
                                         [ids[n - 2], ids[n - 1], 2, None]],
                   "bandwidth_incidents": [[ids[21], ids[24], 4, ids[25]]],
                   "hosts": {hosts[2]: {"TRANSPORT_INIT_FAILED": 4, "BANDWIDTH_REGRESSION": 4},
                             hosts[1]: {"BANDWIDTH_REGRESSION": 4, "STRAGGLER": 1},
                             hosts[0]: {"BANDWIDTH_REGRESSION": 4},
                             "": {"RANKS_MISSING": 3}},
                   "ranks_missing_runs": 3}
        else:
            exp = {"now": "pass", "latest_run": ids[-1], "failure_incidents": [],
                   "bandwidth_incidents": [], "hosts": {}}
        exp["run_ids"] = ids
        out[cluster] = (docs, exp)
    return out


def write_run_tree(docs, root):
    """The docs as launch leaves them: root/ncclsmoke-runs/launch-<hex>/verdict.json and one
    verdict.rank<N>.json per rank (the rank's local view), plus its log. Returns the tree's root
    and {run_id: path of its verdict.json}."""
    paths = {}
    tree = os.path.join(root, "ncclsmoke-runs")
    for i, d in enumerate(docs):
        run_dir = os.path.join(tree, f"launch-{i:04x}{abs(hash(d['run_id'])) % (1 << 40):010x}")
        os.makedirs(run_dir, exist_ok=True)
        p = os.path.join(run_dir, "verdict.json")
        with open(p, "w") as f:
            json.dump(d, f, separators=(",", ":"))
        paths[d["run_id"]] = p
        for r in d["ranks"]:
            if r.get("status") != "joined":
                continue
            local = copy.deepcopy(d)
            local["scope"] = "local"
            local["reporting_rank"] = r["rank"]
            with open(os.path.join(run_dir, f"verdict.rank{r['rank']}.json"), "w") as f:
                json.dump(local, f, separators=(",", ":"))
            with open(os.path.join(run_dir, f"rank{r['rank']}.log"), "w") as f:
                f.write("rank log\n")
    return tree, paths


def write_all(docs, directory):
    os.makedirs(directory, exist_ok=True)
    paths = []
    for d in docs:
        p = os.path.join(directory, d["run_id"] + ".json")
        with open(p, "w") as f:
            json.dump(d, f, separators=(",", ":"))
        paths.append(p)
    return paths


def validate(docs):
    """Validates docs against results/verdict/verdict.schema.json with python3-jsonschema; returns the
    number validated, or None when jsonschema is absent."""
    try:
        import jsonschema
    except ImportError:
        return None
    with open(SCHEMA) as f:
        schema = json.load(f)
    cls = jsonschema.validators.validator_for(schema)
    v = cls(schema)
    for d in docs:
        errors = sorted(v.iter_errors(d), key=lambda e: list(e.path))
        if errors:
            raise ValueError(f"{d['run_id']}: {errors[0].message} at {list(errors[0].path)}")
    return len(docs)
