#!/usr/bin/python3
"""What the pairwise rounds and their second pass cost, on namespace hosts, and a cost model for
a larger world.

On N namespace hosts (default 8; one `ncclsmoke run` rank each, socket transport, 1-4 MiB, no
profile), three contenders, alternated in each repetition:
  never    --pairwise=never on a healthy world: no rounds (the baseline run time);
  healthy  --pairwise=always on a healthy world: the first rounds (every pair once up to 16
           hosts), and the second pass's exchange, which finds no suspect and measures nothing;
  slow     --pairwise=always with one host's NIC limited (tbf, --rate): the first rounds and the
           second pass (the suspect met again with two healthy hosts).
For each: the run's wall time and, from rank 0's verdict, the pairwise phase's time, the second
pass's rounds and its planning (posting the samples until rank 0's plan came). Medians.

The model for W hosts (--model-hosts, default 1024) takes the measured time of one round (the
first rounds' time over their count), the store's time per key rank 0 reads, and the schedule
(transports/pair_schedule.h): above 16 hosts 3 rounds, not every pair; the second pass
kSecondPassPartners = 2 rounds whatever W.

    /usr/bin/python3 bench/pairwise_cost_bench.py build/ncclsmoke [--hosts 8] [--reps 3]
        [--rate 150] [--model-hosts 1024]
"""

import argparse
import os
import re
import shutil
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "multihost"))
import netns  # noqa: E402
import suite  # noqa: E402
import test_bad_node_netns as bn  # noqa: E402

SECOND = re.compile(r"second pass: (\d+) rounds? .*?in ([0-9.]+) s, planned in ([0-9.]+) s")
FIRST = re.compile(r"^(\d+) rounds? of ")
PLANNED_ONLY = re.compile(r"no second pass: (.*)$")


def one_run(bed, case, name, port, pairwise):
    run = bn.Run(case, bed, name, port, bn.SOCKET + [f"--pairwise={pairwise}"])
    phase = next((p for p in run.global_["phases"] if p["name"] == "pairwise:socket"), None)
    out = {"wall": run.wall_s, "verdict": run.global_["verdict"],
           "named": sorted({h for f in run.global_["findings"]
                            if f["code"] in ("SLOW_HOST", "SLOW_LINK") for h in f["hosts"]})}
    if phase and phase["status"] != "not_run" and FIRST.match(phase["detail"]):
        out["pairwise"] = phase["duration_s"]
        out["rounds"] = int(FIRST.match(phase["detail"]).group(1))
        m = SECOND.search(phase["detail"])
        out["second"] = float(m.group(2)) if m else 0.0
        out["second_rounds"] = int(m.group(1)) if m else 0
        out["planned"] = float(m.group(3)) if m else None
        out["first"] = out["pairwise"] - out["second"]
    return out


def med(rows, key):
    vals = [r[key] for r in rows if r.get(key) is not None]
    return statistics.median(vals) if vals else float("nan")


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--rate", type=int, default=150, help="the slow host's NIC, Mbit/s")
    ap.add_argument("--model-hosts", type=int, default=1024)
    ap.add_argument("--key-read-ms", type=float, default=0.1,
                    help="rank 0's time per key it reads from the store (the store bench's pair "
                         "round trip is 0.075-0.1 ms at depth 1)")
    args = ap.parse_args()
    ok, why = netns.netns_usable()
    if not ok:
        print(f"skipped: {why}")
        return 77
    netns.exit_on_sigterm()
    netns.sweep_stale()
    bn.BINARY = os.path.abspath(args.binary)
    tmp = tempfile.mkdtemp(prefix="ncclsmoke-pwcost-")
    case = suite.Scratch(tmp)
    rows = {"never": [], "healthy": [], "slow": []}
    port = 29600
    try:
        with netns.Testbed(args.hosts, tmp, tag="pc", log=lambda *_: None) as bed:
            for rep in range(args.reps):
                for name in ("never", "healthy", "slow"):
                    if name == "slow":
                        bed.hosts[1].shape(rate=f"{args.rate}mbit")
                    try:
                        r = one_run(bed, case, f"{name}{rep}", port,
                                    "never" if name == "never" else "always")
                    finally:
                        if name == "slow":
                            bed.hosts[1].unshape()
                    port += 1
                    rows[name].append(r)
                    print(f"rep {rep} {name:8s} wall {r['wall']:.2f} s, verdict {r['verdict']}, "
                          f"named {r['named'] or '-'}"
                          + (f", pairwise {r['pairwise']:.2f} s ({r['rounds']} rounds "
                             f"{r['first']:.2f} s; second pass {r['second_rounds']} rounds "
                             f"{r['second']:.2f} s, planned in {r['planned']} s)"
                             if "pairwise" in r else ""), flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"\nmedians over {args.reps} reps, {args.hosts} hosts:")
    for name, rs in rows.items():
        line = f"  {name:8s} wall {med(rs, 'wall'):.2f} s"
        if name != "never":
            line += (f"; pairwise phase {med(rs, 'pairwise'):.2f} s: first rounds "
                     f"{med(rs, 'first'):.2f} s, second pass {med(rs, 'second'):.2f} s, "
                     f"planning {med(rs, 'planned'):.3f} s")
        print(line)
    added = med(rows["healthy"], "wall") - med(rows["never"], "wall")
    print(f"  rounds on a healthy world add {added:.2f} s of wall time "
          f"({med(rows['healthy'], 'wall') / med(rows['never'], 'wall'):.2f}x)")

    # The model: one round's time as measured on the healthy world (the slow one's rounds wait on
    # its slow link); rank 0 reads one key per rank to plan the second pass.
    per_round = med([r for r in rows["healthy"] if r.get("rounds")], "first") / max(
        1, statistics.median(r["rounds"] for r in rows["healthy"] if r.get("rounds")))
    w = args.model_hosts
    first_rounds = w - 1 if w <= 16 else 3
    planning = w * args.key_read_ms / 1000
    second = 2 * per_round
    print(f"\nmodel for {w} hosts: {first_rounds} first rounds x {per_round:.3f} s = "
          f"{first_rounds * per_round:.2f} s; planning {w} keys x {args.key_read_ms} ms = "
          f"{planning:.2f} s; second pass 2 rounds = {second:.2f} s; "
          f"total {first_rounds * per_round + planning + second:.2f} s")
    false_alarms = sum(1 for name in ("never", "healthy") for r in rows[name] if r["named"])
    print(f"healthy runs that named a host or link: {false_alarms} of {2 * args.reps}")
    print(f"hosts={args.hosts} reps={args.reps} per_round_s={per_round:.3f} "
          f"false_alarms={false_alarms} "
          f"healthy_added_s={added:.2f} slow_second_s={med(rows['slow'], 'second'):.2f} "
          f"model_hosts={w} model_s={first_rounds * per_round + planning + second:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
