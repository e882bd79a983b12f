#!/usr/bin/python3
"""Random bad-node trials on namespace hosts: how often the culprit is named, how often a faulty
world passes, and how often a healthy host is named (the figure that matters most: a healthy node
named is drained for nothing).

Each trial draws a world of 2-8 hosts (one `ncclsmoke run` rank each, socket transport, 1-4 MiB,
no profile) and one fault: none; random loss of 3-35% on one or two hosts' wires; a rate limit of
100-400 Mbit/s on one host's NIC (tbf on its egress); or 5-10% loss on one link only. A host is
"named" when rank 0's suspects.txt lists it; SLOW_LINK's two ends are counted apart (candidates,
never suspects). Runs as root, on the machine's own namespaces (tests/multihost/netns.py), one
trial at a time; everything made is removed.

    /usr/bin/python3 bench/bad_node_trials.py build/ncclsmoke [--trials 40] [--seed 1]

Prints one line per trial and, last, the totals:
    trials=T faulty=F culprits=C named=N missed_runs=M healthy_named=H slow_link_pairs=L
"""

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "multihost"))
import netns  # noqa: E402
import suite  # noqa: E402
import test_bad_node_netns as bn  # noqa: E402


def link_loss(bed, a, b, p):
    for x, y in ((a, b), (b, a)):
        bed.hosts[x].iptables("-A", "INPUT", "-i", "eth0", "-s", bed.hosts[y].addr, "-m",
                              "statistic", "--mode", "random", "--probability", str(p), "-j", "DROP")


def draw(rng):
    n = rng.choice([2, 3, 4, 4, 6, 8, 8])
    kind = rng.choice(["none", "loss1", "loss1", "loss2", "rate", "link"])
    if kind == "loss2" and n < 6:
        kind = "loss1"
    if kind == "link" and n < 4:
        kind = "rate"
    hosts = rng.sample(range(n), 2)
    if kind == "none":
        return n, kind, [], None, "no fault"
    if kind == "loss1":
        p = rng.choice([rng.uniform(0.03, 0.10), rng.uniform(0.10, 0.35)])
        return n, kind, hosts[:1], p, f"{p:.0%} loss on host{hosts[0]}"
    if kind == "loss2":
        p = rng.uniform(0.03, 0.15)
        return n, kind, sorted(hosts), p, f"{p:.0%} loss on host{hosts[0]} and host{hosts[1]}"
    if kind == "rate":
        r = rng.randrange(100, 401, 50)
        return n, kind, hosts[:1], r, f"{r} Mbit/s on host{hosts[0]}'s NIC"
    p = rng.uniform(0.05, 0.10)
    return n, kind, sorted(hosts), p, f"{p:.0%} loss on the host{hosts[0]}-host{hosts[1]} link"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    ok, why = netns.netns_usable()
    if not ok:
        print(f"skipped: {why}")
        return 77
    netns.exit_on_sigterm()
    netns.sweep_stale()
    bn.BINARY = os.path.abspath(args.binary)
    rng = random.Random(args.seed)
    totals = dict(trials=0, faulty=0, culprits=0, named=0, missed_runs=0, healthy_named=0,
                  slow_link_pairs=0)
    t_all = time.monotonic()
    for t in range(args.trials):
        n, kind, bad, strength, what = draw(rng)
        tmp = tempfile.mkdtemp(prefix="ncclsmoke-trial-")
        case = suite.Scratch(tmp)
        heavy = kind in ("loss1", "loss2") and strength > 0.15
        sweep = bn.socket_args(transport_timeout=25, op_timeout=10) if heavy else bn.SOCKET
        try:
            with netns.Testbed(n, tmp, tag="tr", log=lambda *_: None) as bed:
                if kind in ("loss1", "loss2"):
                    for h in bad:
                        bn.lossy(bed, h, strength)
                elif kind == "rate":
                    bed.hosts[bad[0]].shape(rate=f"{strength}mbit")
                elif kind == "link":
                    link_loss(bed, bad[0], bad[1], strength)
                run = bn.Run(case, bed, f"trial{t}", 29500 + t % 50, sweep,
                             timeout_s=60 if heavy else 120)
            suspects, lines = [], []
            path = os.path.join(run.dir, "rank0", "suspects.txt")
            if os.path.exists(path):
                with open(path) as f:
                    lines = [line.split(" run ")[0].strip() for line in f if line.strip()]
                suspects = sorted(line.split()[0] for line in lines)
            links = [f["hosts"] for f in run.global_["findings"] if f["code"] == "SLOW_LINK"]
            verdict = run.global_["verdict"]
        except Exception as e:  # a trial that could not run is reported, not counted
            print(f"trial {t}: {n} hosts, {what}: could not run: {e}"[:400], flush=True)
            shutil.rmtree(tmp, ignore_errors=True)
            continue
        shutil.rmtree(tmp, ignore_errors=True)
        culprits = [f"host{h}" for h in bad] if kind in ("loss1", "loss2", "rate") else []
        healthy = [s for s in suspects if s not in culprits]
        totals["trials"] += 1
        if kind != "none":
            totals["faulty"] += 1
            if verdict == "pass":
                totals["missed_runs"] += 1
        totals["culprits"] += len(culprits)
        totals["named"] += len([c for c in culprits if c in suspects])
        totals["healthy_named"] += len(healthy)
        if kind == "link" and sorted(f"host{h}" for h in bad) in [sorted(l) for l in links]:
            totals["slow_link_pairs"] += 1
        print(f"trial {t}: {n} hosts, {what}: {verdict} in {run.wall_s:.0f} s, suspects "
              f"{lines or '-'}, SLOW_LINK {links or '-'}"
              + (f"  HEALTHY NAMED {healthy}" if healthy else ""), flush=True)
    print(f"{time.monotonic() - t_all:.0f} s in all")
    print(" ".join(f"{k}={v}" for k, v in totals.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
