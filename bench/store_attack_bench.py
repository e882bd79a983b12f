#!/usr/bin/python3
"""Store attacks benchmark: the attacks of issue 13 (tests/rendezvous/store_attacks.py) against
`ncclsmoke store serve`, each on a fresh server, with a real torch 1.13 client
(torch.distributed.TCPStore(host, port, is_master=False), legacy dialect) doing set+get every
50 ms beside it. Prints, per attack and per server binary, the torch client's p50/p99/max latency,
the server's peak RSS (VmRSS sampled every 10 ms) and whether the attacker was stopped.

Goal: p99 < 10 ms under every attack, peak RSS within --max-total-bytes + a fixed overhead.

  /usr/bin/python3 bench/store_attack_bench.py [--before /tmp/ncclsmoke-before]
      [--after build/ncclsmoke] [--only ATTACK] [--json-out FILE]

The "before" binary (one built without the memory budget) is run without the budget flags;
"after" runs twice: with the CI suite's budget (128 MiB total, 16 MiB output, 100k keys, 1 s
request timeout) and with the defaults (8 GiB, 64 MiB, 1 Mi keys, 30 s).
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "rendezvous"))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import store_attacks as sa  # noqa: E402

CI_FLAGS = ["--max-total-bytes", str(128 << 20), "--max-output-bytes", str(16 << 20),
            "--max-keys", "100000", "--request-timeout", "1"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="/tmp/ncclsmoke-before")
    ap.add_argument("--after", default=os.path.join(ROOT, "build", "ncclsmoke"))
    ap.add_argument("--only", default=None)
    ap.add_argument("--no-defaults", action="store_true", help="skip the 'after, defaults' run")
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--observe", type=float, default=4.0,
                    help="seconds of torch set+get measured per attack, at least (default 4)")
    args = ap.parse_args()

    configs = []
    if args.before and os.path.exists(args.before):
        configs.append(("before", args.before, []))
    else:
        print("no before binary at %s: skipped" % args.before)
    configs.append(("after (CI budget)", args.after, CI_FLAGS))
    if not args.no_defaults:
        configs.append(("after (defaults)", args.after, []))

    rows = []
    print("%-14s %-18s %9s %9s %9s %10s %5s  %s" % ("attack", "server", "p50 ms", "p99 ms",
                                                    "max ms", "peak RSS", "ops", "attacker"))
    for name, attack in sa.ATTACKS:
        if args.only and name != args.only:
            continue
        for label, binary, flags in configs:
            res = sa.run_attack(binary, flags, name, attack, bystander="torch",
                                observe_s=args.observe)
            stopped = "stopped" if not res.problems else "NOT stopped: " + "; ".join(res.problems)
            if res.problems and label == "after (defaults)":
                # 300k keys, 256 MiB of values, 8 x 32 MiB buffered and an 8 s trickle all fit
                # the 16k-rank defaults (1 Mi keys, 8 GiB, 30 s): holding them is by design.
                stopped = "within the default limits (by design): " + "; ".join(res.problems)
            if res.bystander_errors:
                stopped += " | torch client errors: %s" % res.bystander_errors[:2]
            print("%-14s %-18s %9.2f %9.2f %9.2f %7.0f MiB %5d  %s"
                  % (name, label, res.p50_ms, res.p99_ms, res.max_ms, res.peak_rss / 2**20,
                     res.bystander_ops, stopped), flush=True)
            rows.append({"attack": name, "server": label, "p50_ms": res.p50_ms,
                         "p99_ms": res.p99_ms, "max_ms": res.max_ms,
                         "peak_rss_mib": res.peak_rss / 2**20, "ops": res.bystander_ops,
                         "attack_s": res.wall_s, "problems": res.problems,
                         "client_errors": res.bystander_errors})
    worst = [r for r in rows if r["server"].startswith("after") and not r["p99_ms"] < 10]
    print("goal p99 < 10 ms under every attack (after): %s"
          % ("met" if not worst else "missed by " + ", ".join(
              "%s/%s %.1f ms" % (r["attack"], r["server"], r["p99_ms"]) for r in worst)))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
