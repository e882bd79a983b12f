#!/usr/bin/python3
"""The right rank blamed when one rank is frozen (SIGSTOP) or killed (SIGKILL) mid-sweep, on
loopback, 4 ranks: rank 0 (which also hosts the store) and rank 2. Every rank whose verdict is
read must name the victim (PEER_STALLED for a frozen rank, PEER_LOST for a killed one) and raise no
error finding that names any other rank (their timeouts are consequences, kept as info). Each case
must end within its deadlines (--timeout) plus 2 s.

    /usr/bin/python3 tests/harness/fault_sweep_test.py --binary build/ncclsmoke
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from loopback import free_port, poll_until

RUN_TIMEOUT = 25  # --timeout of each rank: the case must end by then + 2 s


def cpu_s(pid):
    """User + system CPU seconds of a process so far (0 once it is gone)."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def run_case(binary, sig, victim, work):
    port = free_port()
    procs = []
    for r in range(4):
        args = [binary, "run", "--launcher", "flags", "--rank", str(r), "--world-size", "4",
                "--master-addr", "127.0.0.1", "--master-port", str(port), "--store-bind",
                "127.0.0.1", "--out-dir", work, "--min-bytes", "64M", "--max-bytes", "64M",
                "--iters", "400", "--op-timeout", "4", "--mesh-timeout", "3",
                "--transport-timeout", "20", "--timeout", str(RUN_TIMEOUT), "--quiet"]
        log = open(os.path.join(work, f"rank{r}.log"), "w")
        procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT))
    # Strike once every rank is in the sweep: rendezvous and mesh take almost no CPU, the sweep
    # of 400 x 64 MiB all-reduces keeps every rank busy for far longer than this wait.
    poll_until(lambda: min(cpu_s(p.pid) for p in procs) >= 0.5, 20, 0.05)
    start = time.monotonic()
    os.kill(procs[victim].pid, sig)
    survivors = [p for i, p in enumerate(procs) if i != victim]
    ended = True
    for p in survivors:
        left = RUN_TIMEOUT + 2 - (time.monotonic() - start)
        try:
            p.wait(timeout=max(0.1, left))
        except subprocess.TimeoutExpired:
            ended = False
    took = time.monotonic() - start
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()
    return ended, took


def check(work, victim, want_code):
    problems, seen = [], []
    for r in range(4):
        if r == victim:
            continue
        path = os.path.join(work, f"verdict.rank{r}.json")
        if not os.path.exists(path):
            problems.append(f"rank {r} wrote no verdict")
            continue
        v = json.load(open(path))
        named = [f for f in v["findings"] if f["code"] == want_code and victim in f["ranks"]]
        wrong = [f for f in v["findings"] if f["severity"] == "error"
                 and any(x != victim and x != r for x in f["ranks"])]
        seen.append((r, [(f["code"], f["ranks"], f["severity"]) for f in v["findings"]]))
        if not named:
            problems.append(f"rank {r} does not name rank {victim} with {want_code}")
        for f in wrong:
            problems.append(f"rank {r} blames another rank: {f['code']} {f['ranks']}: "
                            f"{f['message'][:160]}")
    return problems, seen


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    a = ap.parse_args()
    binary = os.path.abspath(a.binary)
    failed = 0
    cases = [("SIGSTOP", signal.SIGSTOP, 0, "PEER_STALLED"),
             ("SIGSTOP", signal.SIGSTOP, 2, "PEER_STALLED"),
             ("SIGKILL", signal.SIGKILL, 0, "PEER_LOST"),
             ("SIGKILL", signal.SIGKILL, 2, "PEER_LOST")]
    for name, sig, victim, code in cases:
        with tempfile.TemporaryDirectory(prefix="ncclsmoke-fault-") as work:
            ended, took = run_case(binary, sig, victim, work)
            problems, seen = check(work, victim, code)
            if not ended:
                problems.append(f"survivors still running {RUN_TIMEOUT + 2} s after the {name}")
            status = "PASS" if not problems else "FAIL"
            failed += bool(problems)
            print(f"CASE {name} rank {victim} mid-sweep: {status} (survivors ended after "
                  f"{took:.1f} s)")
            for r, fs in seen:
                print(f"  rank {r}: {fs}")
            for p in problems:
                print(f"  problem: {p}")
    print(f"fault_sweep: {len(cases) - failed}/{len(cases)} cases passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
