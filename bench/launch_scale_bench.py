#!/usr/bin/python3
"""Rendezvous + mesh at scale on one machine: `ncclsmoke launch -n N --transports none`.

Each repetition launches N ranks on loopback (rank 0 hosts the store), waits for the launch to
return, and reads the global verdict: wall time, verdict, exit code, finding codes and the
rendezvous / mesh phase times. With two binaries (--before OLD) the runs alternate OLD, NEW,
OLD, NEW ... so machine load hits both alike, and the medians of each are printed side by side.
Goal: N = 1024 passes with no finding in under 10 s.

Not a test: it only prints figures. Exit 1 only when a run did not pass (a time from a failed
run would mean nothing), 0 otherwise. The open-file limit is raised to the hard limit for the
launch (1024 ranks need several descriptors each in rank 0's store server).

Usage: /usr/bin/python3 bench/launch_scale_bench.py NCCLSMOKE [--before OLD_NCCLSMOKE]
           [--ranks 1024] [--reps 3] [--timeout 120] [--launch-args '--mesh-timeout 0.5']
"""
import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import tempfile
import time


def raise_nofile():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def one_run(binary, ranks, timeout, extra, workdir, tag):
    out_dir = os.path.join(workdir, tag)
    cmd = [binary, "launch", "-n", str(ranks), "--transports", "none", "--out-dir", out_dir] + extra
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
        rc, text = p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        rc, text = "killed", (e.stdout or b"").decode(errors="replace") if isinstance(
            e.stdout, bytes) else (e.stdout or "")
    wall = time.monotonic() - t0
    res = {"tag": tag, "wall_s": wall, "rc": rc, "verdict": "none", "codes": [], "phases": {}}
    try:
        with open(os.path.join(out_dir, "verdict.json")) as f:
            v = json.load(f)
        res["verdict"] = v.get("verdict", "?")
        res["codes"] = sorted({f.get("code", "?") for f in v.get("findings", [])})
        for f in v.get("findings", []):
            if f.get("code") == "MESH_BLOCKED":
                classes = {}
                for pair in (f.get("evidence") or {}).get("pairs", []):
                    c = pair.get("error_class", "?")
                    classes[c] = classes.get(c, 0) + 1
                res["blocked_classes"] = classes
            if f.get("code") in ("MESH_BLOCKED", "PEER_LOST", "RENDEZVOUS_LOST", "MESH_INCOMPLETE"):
                res.setdefault("messages", []).append(f"{f['code']}: {f.get('message', '')[:200]}")
        for ph in v.get("phases", []):
            res["phases"][ph.get("name")] = (ph.get("status"), ph.get("duration_s", 0.0),
                                             ph.get("detail", ""))
    except (OSError, ValueError) as e:
        res["error"] = f"no readable verdict.json ({e}); last output: {text[-400:]}"
    return res


def show(r):
    ph = " ".join(f"{k}={v[0]}:{v[1]:.2f}s" for k, v in r["phases"].items()
                  if k in ("rendezvous", "mesh"))
    codes = ",".join(r["codes"]) or "-"
    line = (f"  {r['tag']:<14} wall {r['wall_s']:6.2f} s  exit {r['rc']}  verdict {r['verdict']:<12}"
            f" findings {codes}  {ph}")
    if "error" in r:
        line += "\n    " + r["error"]
    if r.get("blocked_classes"):
        line += f"\n    blocked pairs by class: {r['blocked_classes']}"
    msgs = r.get("messages", [])
    for m in msgs[:4]:
        line += "\n    " + m
    if len(msgs) > 4:
        line += f"\n    ... and {len(msgs) - 4} more such findings"
    mesh = r["phases"].get("mesh")
    if mesh:
        line += "\n    mesh: " + mesh[2][:300]
    print(line, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("binary")
    ap.add_argument("--before", help="an older binary to alternate with")
    ap.add_argument("--ranks", type=int, default=1024)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--launch-args", default="",
                    help="extra launch flags, one string (e.g. '--mesh-timeout 0.5')")
    a = ap.parse_args()
    a.extra = shlex.split(a.launch_args)
    nofile = raise_nofile()
    print(f"launch -n {a.ranks} --transports none, {a.reps} reps, open-file limit {nofile}, "
          f"{os.cpu_count()} CPUs", flush=True)
    bins = [("before", a.before), ("after", a.binary)] if a.before else [("after", a.binary)]
    runs = {name: [] for name, _ in bins}
    with tempfile.TemporaryDirectory(prefix="launch-scale-") as work:
        for rep in range(a.reps):
            for name, b in bins:
                r = one_run(b, a.ranks, a.timeout, a.extra, work, f"{name}-{rep}")
                show(r)
                runs[name].append(r)
    bad = False
    for name, _ in bins:
        rs = runs[name]
        walls = [r["wall_s"] for r in rs]
        passed = sum(1 for r in rs if r["verdict"] == "pass" and r["rc"] == 0 and not r["codes"])
        bad |= passed != len(rs)
        mesh = [r["phases"]["mesh"][1] for r in rs if "mesh" in r["phases"]]
        rdzv = [r["phases"]["rendezvous"][1] for r in rs if "rendezvous" in r["phases"]]
        med = lambda xs: f"{statistics.median(xs):.2f} s" if xs else "n/a"
        print(f"{name}: median wall {med(walls)} (min {min(walls):.2f}, max {max(walls):.2f}),"
              f" rendezvous {med(rdzv)}, mesh {med(mesh)}; {passed}/{len(rs)} passed with no"
              f" finding (goal: wall < 10 s)", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
