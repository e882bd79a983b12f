#!/usr/bin/python3
"""Two ncclsmoke binaries side by side: the gate busbw each transport measures, old and new
alternating (OLD, NEW, NEW, OLD, ...) so the machine's load hits both alike; medians per binary
and transport, and the ratio new / old. For a change that must not cost bandwidth.

Each round is one `ncclsmoke launch -n N --transports T` on loopback with one gate size; the
figure is the verdict's world row at the gate (the lower of out-of-place and in-place, as the
judge reads it). Not a test: it prints figures; exit 1 only when a run did not pass.

    /usr/bin/python3 bench/binaries_busbw_bench.py OLD NEW [--ranks 2] [--rounds 6]
        [--transports socket,fabric] [--bytes 64M] [--iters 10]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile


def gate_busbw(verdict):
    """transport -> the gate busbw (the lower of the out-of-place and in-place world rows)."""
    out = {}
    for r in verdict.get("transports", []):
        if r.get("rank", -1) >= 0 or not r.get("gate") or r.get("busbw_gbps") is None:
            continue
        t = r["transport"]
        out[t] = min(out.get(t, float("inf")), r["busbw_gbps"])
    return out


def one_run(binary, a, work, tag):
    out_dir = os.path.join(work, tag)
    cmd = [binary, "launch", "-n", str(a.ranks), "--transports", a.transports,
           "--fabric-provider", "tcp", "--min-bytes", a.bytes, "--max-bytes", a.bytes,
           "--gate-bytes", a.bytes, "--iters", str(a.iters), "--out-dir", out_dir, "--quiet"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    path = os.path.join(out_dir, "verdict.json")
    if not os.path.exists(path):
        found = [os.path.join(d, "verdict.json") for d, _, fs in os.walk(out_dir)
                 if "verdict.json" in fs]
        path = found[0] if found else path
    try:
        v = json.load(open(path))
    except (OSError, ValueError):
        return None, f"no verdict (exit {p.returncode}): {p.stderr.strip()[-300:]}"
    if v.get("verdict") != "pass":
        return None, f"verdict {v.get('verdict')}: {[f['code'] for f in v.get('findings', [])]}"
    return gate_busbw(v), ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--transports", default="socket,fabric")
    ap.add_argument("--bytes", default="64M")
    ap.add_argument("--iters", type=int, default=10)
    a = ap.parse_args()
    figures = {"old": {}, "new": {}}
    failed = False
    with tempfile.TemporaryDirectory(prefix="ncclsmoke-binbench-") as work:
        for i in range(a.rounds):
            order = ["old", "new"] if i % 2 == 0 else ["new", "old"]
            for which in order:
                got, why = one_run(getattr(a, which), a, work, f"{which}-{i}")
                if got is None:
                    print(f"round {i} {which}: {why}")
                    failed = True
                    continue
                for t, bw in got.items():
                    figures[which].setdefault(t, []).append(bw)
                print(f"round {i} {which}: " + ", ".join(f"{t} {bw:.3f}" for t, bw in got.items()))
    print(f"\n{a.ranks} ranks, {a.bytes} gate, {a.iters} iters, {a.rounds} rounds "
          "(gate busbw GB/s, medians)")
    print(f"{'transport':10} {'old':>8} {'new':>8} {'new/old':>8}")
    for t in sorted(set(figures["old"]) | set(figures["new"])):
        o = statistics.median(figures["old"].get(t, [float("nan")]))
        n = statistics.median(figures["new"].get(t, [float("nan")]))
        print(f"{t:10} {o:8.3f} {n:8.3f} {n / o:8.3f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
