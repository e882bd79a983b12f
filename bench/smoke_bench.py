#!/usr/bin/python3
"""Smoke-run benchmark: how long a healthy run takes, per phase and wall clock.

  1. The healthy 4-host case on network namespaces (one `ncclsmoke run` rank per host, as in
     tests/multihost/test_smoke_faults.py), R times: the median of each phase's duration (world,
     rendezvous, mesh) from rank 0's global verdict, and of rank 0's wall time.
  2. `ncclsmoke launch -n 8` and `-n 64` on loopback, R times each: the median wall time of the
     launcher (start to exit, process start-up included) and of the phases in its global verdict.

Goal: a healthy 8-rank run, rendezvous + mesh, in under 1 s wall.

    /usr/bin/python3 bench/smoke_bench.py [--build-dir build] [--runs 5] [--json-out FILE]

Part 1 needs root and `ip netns` (else it is skipped, with the reason). Everything is bounded:
each run has a deadline and is killed past it; every namespace is removed on exit.
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "multihost"))
import netns  # noqa: E402

PHASES = ("world", "rendezvous", "mesh")
MASTER_PORT = 29500  # inside private namespaces only


_TRANSPORTS_OFF = {}


def transports_off(binary):
    """["--transports", "none"] if the run has a transport phase (this bench times rendezvous +
    mesh only), else []."""
    if binary not in _TRANSPORTS_OFF:
        p = subprocess.run([binary, "run", "--help"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=30)
        _TRANSPORTS_OFF[binary] = ["--transports", "none"] if "--transports" in p.stdout else []
    return _TRANSPORTS_OFF[binary]


def phase_durations(doc):
    return {p["name"]: p["duration_s"] for p in doc.get("phases", [])}


def median(xs):
    return statistics.median(xs) if xs else None


def fmt(x, width=9):
    return f"{x:{width}.3f}" if isinstance(x, (int, float)) else f"{'-':>{width}}"


def netns_case(binary, runs, workdir):
    """The healthy 4-host case, `runs` times, on one testbed."""
    ok, why = netns.netns_usable()
    if not ok:
        return {"skipped": why}
    netns.sweep_stale()
    rows, verdicts, failures = [], [], []
    with netns.Testbed(4, workdir, tag="bnch") as bed:
        for i in range(runs):
            run_dir = os.path.join(workdir, f"run{i}")
            procs = []
            t0 = time.monotonic()
            for h in bed.hosts:
                out = os.path.join(run_dir, f"rank{h.index}")
                os.makedirs(out, exist_ok=True)
                argv = [binary, "run", "--launcher", "flags", "--rank", str(h.index),
                        "--world-size", "4", "--master-addr", bed.hosts[0].addr, "--master-port",
                        str(MASTER_PORT), "--connect-timeout", "10", "--join-timeout", "10",
                        "--mesh-timeout", "10", "--pair-timeout", "3", "--timeout", "30",
                        "--out-dir", out, "--quiet"] + transports_off(binary)
                procs.append(h.start(argv, os.path.join(run_dir, f"rank{h.index}")))
            deadline = t0 + 40
            wall0 = None
            while time.monotonic() < deadline and any(p.poll() is None for p in procs):
                if wall0 is None and procs[0].poll() is not None:
                    wall0 = time.monotonic() - t0
                time.sleep(0.005)
            if wall0 is None and procs[0].poll() is not None:
                wall0 = time.monotonic() - t0
            for p in procs:
                if p.poll() is None:
                    bed.kill9(p)
                    p.wait(timeout=5)
            rcs = [p.returncode for p in procs]
            try:
                with open(os.path.join(run_dir, "rank0", "verdict.json")) as f:
                    doc = json.load(f)
            except (OSError, ValueError) as e:
                failures.append(f"run {i}: no global verdict ({e}); rcs {rcs}")
                continue
            verdicts.append(doc["verdict"])
            if doc["verdict"] != "pass" or any(rcs):
                failures.append(f"run {i}: verdict {doc['verdict']}, rcs {rcs}, "
                                f"findings {[x['code'] for x in doc['findings']]}")
            d = phase_durations(doc)
            d["wall"] = wall0
            d["duration_s"] = doc["duration_s"]
            rows.append(d)
            shutil.rmtree(run_dir, ignore_errors=True)
    return {"rows": rows, "verdicts": verdicts, "failures": failures}


def launch_case(binary, n, runs, workdir, timeout_s):
    """`ncclsmoke launch -n N` on loopback, `runs` times."""
    rows, verdicts, failures = [], [], []
    for i in range(runs):
        out = os.path.join(workdir, f"launch{n}-{i}")
        os.makedirs(out, exist_ok=True)
        gen = max(10, n / 2)  # generous: n ranks share 2 cores
        argv = [binary, "launch", "-n", str(n), "--connect-timeout", str(gen), "--join-timeout",
                str(gen), "--mesh-timeout", str(gen), "--pair-timeout", str(max(3, n / 8)),
                "--timeout", str(timeout_s), "--out-dir", out, "--quiet"] + transports_off(binary)
        t0 = time.monotonic()
        try:
            p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               timeout=timeout_s + 30, start_new_session=True)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = "hung"
        wall = time.monotonic() - t0
        try:
            with open(os.path.join(out, "verdict.json")) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            failures.append(f"-n {n} run {i}: rc {rc}, no global verdict ({e})")
            continue
        verdicts.append(doc["verdict"])
        if rc != 0 or doc["verdict"] != "pass":
            failures.append(f"-n {n} run {i}: rc {rc}, verdict {doc['verdict']}, findings "
                            f"{[x['code'] for x in doc['findings']]}")
        d = phase_durations(doc)
        d["wall"] = wall
        d["duration_s"] = doc["duration_s"]
        rows.append(d)
        shutil.rmtree(out, ignore_errors=True)
    return {"rows": rows, "verdicts": verdicts, "failures": failures}


def summarize(rows):
    keys = list(PHASES) + ["rdzv+mesh", "duration_s", "wall"]
    for r in rows:
        if "rendezvous" in r and "mesh" in r:
            r["rdzv+mesh"] = r["rendezvous"] + r["mesh"]
    return {k: median([r[k] for r in rows if isinstance(r.get(k), (int, float))]) for k in keys}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default=os.path.join(ROOT, "build"))
    ap.add_argument("--binary", help="ncclsmoke executable (default BUILD_DIR/ncclsmoke)")
    ap.add_argument("--runs", type=int, default=5, help="repetitions per case (median reported)")
    ap.add_argument("--sizes", default="8,64", help="launch -n sizes on loopback")
    ap.add_argument("--launch-timeout", type=float, default=120,
                    help="--timeout given to each launch (the 64-rank case on 2 cores is slow)")
    ap.add_argument("--no-netns", action="store_true", help="skip the 4-host namespace case")
    ap.add_argument("--json-out", help="write the figures as JSON here")
    args = ap.parse_args()
    netns.exit_on_sigterm()
    binary = os.path.abspath(args.binary or os.path.join(args.build_dir, "ncclsmoke"))
    if not os.access(binary, os.X_OK):
        sys.exit(f"not executable: {binary} (build the ncclsmoke target)")
    runs = max(1, min(args.runs, 50))
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    print(f"ncclsmoke smoke bench: {binary}, {runs} runs per case, {os.cpu_count()} CPUs")
    workdir = tempfile.mkdtemp(prefix="ncclsmoke-smoke-bench-")
    results = {}
    try:
        if args.no_netns:
            results["netns 4 hosts"] = {"skipped": "--no-netns"}
        else:
            results["netns 4 hosts"] = netns_case(binary, runs, os.path.join(workdir, "netns"))
        for n in sizes:
            results[f"launch -n {n}"] = launch_case(binary, n, runs, workdir, args.launch_timeout)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print(f"\nmedians over {runs} runs, seconds (phases from rank 0's global verdict; wall: "
          f"start of the ranks/launcher to rank 0's/launcher's exit)")
    head = f"{'case':16s} {'ok':>5s}" + "".join(f" {k:>10s}" for k in
                                                  list(PHASES) + ["rdzv+mesh", "duration", "wall"])
    print(head)
    print("-" * len(head))
    figures = {}
    for name, res in results.items():
        if "skipped" in res:
            print(f"{name:16s} skipped: {res['skipped']}")
            figures[name] = {"skipped": res["skipped"]}
            continue
        med = summarize(res["rows"])
        ok = sum(1 for v in res["verdicts"] if v == "pass")
        print(f"{name:16s} {ok:>2d}/{runs:<2d}" +
              "".join(f" {fmt(med[k], 10)}" for k in
                      list(PHASES) + ["rdzv+mesh", "duration_s", "wall"]))
        figures[name] = {"median": med, "passed": ok, "runs": runs, "failures": res["failures"]}
    for name, res in results.items():
        for f in res.get("failures", []):
            print(f"  {name}: {f}")

    g = figures.get("launch -n 8", {}).get("median")
    if g and g.get("rdzv+mesh") is not None:
        verdict = "MET" if g["wall"] < 1.0 and figures["launch -n 8"]["passed"] == runs else "MISSED"
        print(f"\ngoal: 8-rank rendezvous+mesh < 1 s wall: {verdict} (launch -n 8 wall "
              f"{g['wall']:.3f}s median, of which rendezvous+mesh {g['rdzv+mesh']:.3f}s)")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"runs": runs, "cpus": os.cpu_count(), "figures": figures}, f, indent=2)
    any_fail = any(f.get("failures") for f in figures.values())
    return 1 if any_fail else 0


if __name__ == "__main__":
    sys.exit(main())
