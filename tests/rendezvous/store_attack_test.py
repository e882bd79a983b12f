#!/usr/bin/python3
"""Adversarial store suite: each store attack against `ncclsmoke store serve`, each in its
own server process on loopback, with a well-behaved client doing SET+GET every 50 ms beside it.

For every attack it asserts that
  - the server's peak RSS (/proc/PID/status VmRSS, sampled every 10 ms) stays within its budget
    (--max-total-bytes) plus a fixed overhead,
  - the attacker's connection is closed with the log line naming the limit,
  - the well-behaved client got every answer, during the attack and after it.

Usage: /usr/bin/python3 store_attack_test.py path/to/ncclsmoke [--only NAME]
The benchmark bench/store_attack_bench.py runs the same attacks (store_attacks.py-style helpers
are shared by import) with a real torch client and prints latencies.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.dont_write_bytecode = True  # no __pycache__ in the source tree
import store_attacks as sa  # noqa: E402

BUDGET = 128 << 20
OVERHEAD = 64 << 20  # binary, allocator slack, kernel-side socket buffers are not in VmRSS
SERVER_FLAGS = ["--max-total-bytes", str(BUDGET), "--max-output-bytes", str(16 << 20),
                "--max-keys", "100000", "--request-timeout", "1"]


def main():
    if len(sys.argv) < 2:
        print("usage: store_attack_test.py NCCLSMOKE [--only NAME]", file=sys.stderr)
        return 2
    binary = sys.argv[1]
    only = sys.argv[sys.argv.index("--only") + 1] if "--only" in sys.argv else None
    failures = []
    for name, attack in sa.ATTACKS:
        if only and name != only:
            continue
        res = sa.run_attack(binary, SERVER_FLAGS, name, attack, bystander="raw")
        problems = list(res.problems)
        if res.peak_rss > BUDGET + OVERHEAD:
            problems.append("peak RSS %.0f MiB over budget %d MiB + overhead %d MiB"
                            % (res.peak_rss / 2**20, BUDGET >> 20, OVERHEAD >> 20))
        if res.bystander_errors:
            problems.append("well-behaved client failed: %s" % res.bystander_errors[:3])
        if res.bystander_ops < 5:
            problems.append("well-behaved client did only %d set+get" % res.bystander_ops)
        if not res.served_after:
            problems.append("well-behaved client not served after the attack")
        status = "ok  " if not problems else "FAIL"
        print("%s %-16s peak RSS %4.0f MiB  bystander %3d ops p50 %6.2f ms p99 %6.2f ms  %.1fs"
              "  longest loop turn %s ms"
              % (status, name, res.peak_rss / 2**20, res.bystander_ops, res.p50_ms, res.p99_ms,
                 res.wall_s, res.longest_turn_ms), flush=True)
        for p in problems:
            print("       " + p, flush=True)
        if problems:
            print("       server log:\n         " + "\n         ".join(res.log.splitlines()[-8:]),
                  flush=True)
            failures.append(name)
    if failures:
        print("FAILED: " + ", ".join(failures))
        return 1
    print("all attacks held")
    return 0


if __name__ == "__main__":
    sys.exit(main())
