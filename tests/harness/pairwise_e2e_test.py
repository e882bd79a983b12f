#!/usr/bin/python3
"""Pairwise rounds end to end on loopback where processes are the point (the schedule, auto,
never and the budget run in process: tests/harness/pairwise_run_test.cpp):

1. `launch -n 4 --pairwise --transports socket,fabric --fabric-provider tcp` when libfabric's tcp
   provider works here (skipped otherwise): both transports' phases pass with their detail
   (rounds, size x iters, time, budget, reason) and every pair of the schedule appears in rank 0's
   verdict.json with a time on BOTH sides, in the same round, no rank in two pairs of one round.
2. a rank killed (SIGKILL) or frozen (SIGSTOP) between rounds (the test hook
   NCCLSMOKE_TEST_PAUSE_AT=pairwise stops rank 2 as its second round starts), 4 `run` processes,
   --pairwise-budget 8: the others finish their rounds within the budget (no hang), rank 0
   writes verdict.json, rank 2 is named (PEER_LOST / PEER_STALLED) and no other rank is, the
   first round's pairs are there and the others' pairs with rank 2 are errors or not run. A
   killed rank is seen by the liveness watch at once, a frozen one after its silence timeout (3 s):
   a pair waiting for it ends then (the pair's store waits are cut into slices that ask the
   watch), and its later partners skip it, so the survivors end within 3 s of a kill.

Prints each case's pairwise time (the phase's duration: the slowest rank's).

    /usr/bin/python3 tests/harness/pairwise_e2e_test.py --binary build/ncclsmoke
"""

import argparse
import itertools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from loopback import free_port, poll_until, proc_state

FAILS = []
SKIPS = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what, flush=True)
    if not ok:
        FAILS.append(what)
    return ok


def launch(binary, work, n, extra, timeout=120):
    os.makedirs(work, exist_ok=True)
    args = [binary, "launch", "-n", str(n), "--out-dir", work, "--max-bytes", "2M"] + extra
    p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    v = None
    try:
        with open(os.path.join(work, "verdict.json")) as f:
            v = json.load(f)
    except (OSError, ValueError) as e:
        print(f"  no verdict.json in {work}: {e}\n{p.stdout[-2000:]}\n{p.stderr[-3000:]}")
    return p, v


def phase(v, name):
    return next((p for p in v["phases"] if p["name"] == name), None)


def samples(v, transport):
    """rank -> list of pairwise samples of that rank's identity row."""
    out = {}
    for i in v["identities"]:
        if i["transport"] == transport and i["rank"] >= 0:
            out.setdefault(i["rank"], []).extend(i["observed"].get("pairwise", []))
    return out


def check_pairs(case, v, transport, n, rounds, expect_pairs=None):
    """Every pair measured on both sides in one round; rounds are disjoint. Returns the pairs."""
    got = samples(v, transport)
    pairs = {}
    for r in range(n):
        mine = got.get(r, [])
        check(all(s.get("error") is None for s in mine),
              f"{case}: rank {r}'s {transport} pairs have no error: "
              f"{[s.get('error') for s in mine if s.get('error')]}")
        check(all(isinstance(s.get("time_us"), (int, float)) and s["time_us"] > 0 for s in mine),
              f"{case}: rank {r}'s {transport} pairs all have a time")
        check(len({s["round"] for s in mine}) == len(mine),
              f"{case}: rank {r} is in at most one pair per round")
        for s in mine:
            pairs.setdefault((min(r, s["peer"]), max(r, s["peer"])), []).append((r, s["round"]))
    if expect_pairs is None:
        expect_pairs = set(itertools.combinations(range(n), 2))
    check(set(pairs) == set(expect_pairs),
          f"{case}: {transport}: the pairs measured are the schedule's "
          f"({len(pairs)} of {len(expect_pairs)}; missing {sorted(set(expect_pairs) - set(pairs))})")
    for (a, b), seen in sorted(pairs.items()):
        sides = sorted(x[0] for x in seen)
        check(sides == [a, b] and len({x[1] for x in seen}) == 1,
              f"{case}: {transport}: pair {a}-{b} measured by both sides in one round: {seen}")
    used_rounds = {x[1] for seen in pairs.values() for x in seen}
    check(used_rounds == set(range(rounds)),
          f"{case}: {transport}: rounds 0..{rounds - 1} all used: {sorted(used_rounds)}")
    return pairs


def check_passed_phase(case, v, transport, rounds):
    ph = phase(v, f"pairwise:{transport}")
    if not check(ph is not None, f"{case}: phase pairwise:{transport} recorded"):
        return None
    check(ph["status"] == "pass", f"{case}: pairwise:{transport} passes: {ph}")
    d = ph.get("detail", "")
    check(d.startswith(f"{rounds} rounds of 1 MiB x 3 in ") and "budget 30 s" in d
          and "reason: requested (--pairwise)" in d and "0 failed" in d,
          f"{case}: pairwise:{transport} detail: {d!r}")
    print(f"  {case}: pairwise:{transport} took {ph['duration_s']:.2f} s (slowest rank)")
    return ph


def case_fabric(binary, root):
    case = "n=4 socket,fabric --pairwise"
    p, v = launch(binary, os.path.join(root, "fabric"), 4,
                  ["--pairwise", "--transports", "socket,fabric", "--fabric-provider", "tcp"])
    fab = phase(v, "transport:fabric") if v else None
    if not fab or fab["status"] == "skipped":
        SKIPS.append(f"{case}: the fabric transport does not run here: "
                     f"{fab['detail'] if fab else 'no verdict'}")
        print("skip " + SKIPS[-1])
        return
    if not check(p.returncode == 0 and v["verdict"] == "pass",
                 f"{case}: exit 0 and pass (exit {p.returncode})"):
        print(p.stderr[-3000:])
        return
    for t in ("socket", "fabric"):
        check_passed_phase(case, v, t, 3)
        check_pairs(case, v, t, 4, 3)


def case_fault(binary, root, sig):
    case = f"n=4 --pairwise, rank 2 {sig} between rounds"
    work = os.path.join(root, f"fault-{sig}")
    os.makedirs(work)
    port = free_port()
    budget = 8
    procs = {}
    for r in range(4):
        env = dict(os.environ)
        env.pop("NCCLSMOKE_LOG_LEVEL", None)
        if r == 2:
            env["NCCLSMOKE_TEST_PAUSE_AT"] = "pairwise"
        args = [binary, "run", "--launcher", "flags", "--rank", str(r), "--world-size", "4",
                "--master-addr", "127.0.0.1", "--master-port", str(port), "--store-bind",
                "127.0.0.1", "--job-id", f"pairwise-{sig}", "--out-dir", work, "--max-bytes", "1M",
                "--pairwise", "--pairwise-budget", str(budget), "--op-timeout", "4",
                "--timeout", "60", "--quiet"]
        log = open(os.path.join(work, f"rank{r}.log"), "w")
        procs[r] = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env,
                                    stdin=subprocess.DEVNULL)
    victim = procs[2]
    poll_until(lambda: proc_state(victim.pid) == "T" or victim.poll() is not None, 60)
    struck = time.monotonic()
    if not check(proc_state(victim.pid) == "T", f"{case}: rank 2 stopped itself at the hook"):
        for p in procs.values():
            p.kill()
        return
    if sig == "SIGKILL":
        victim.kill()
    ends = {}

    def survivors_ended():
        for r in (0, 1, 3):
            if r not in ends and procs[r].poll() is not None:
                ends[r] = time.monotonic() - struck
        return len(ends) == 3
    poll_until(survivors_ended, struck + 45 - time.monotonic(), 0.05)
    for p in procs.values():
        if p.poll() is None:
            p.kill()
        p.wait()
    check(len(ends) == 3, f"{case}: ranks 0, 1, 3 ended ({ends})")
    # The rounds left (2 of 3) share the budget; then rank 0 waits at most 2 s more for "done",
    # and the gather's window for the victim's verdict (5 s).
    slowest = max(ends.values()) if ends else 99
    check(slowest < budget + 2 + 5 + 3, f"{case}: the survivors end {slowest:.1f} s after the fault "
          f"(budget {budget} s)")
    try:
        with open(os.path.join(work, "verdict.json")) as f:
            v = json.load(f)
    except (OSError, ValueError) as e:
        check(False, f"{case}: rank 0 wrote verdict.json ({e})")
        return
    named = {f["code"]: f.get("ranks", []) for f in v["findings"]
             if f["severity"] == "error"}
    check(any(c in named and 2 in named[c] for c in ("PEER_LOST", "PEER_STALLED")),
          f"{case}: rank 2 named lost or stalled: {named}")
    others = {c: rs for c, rs in named.items() if set(rs) - {2}}
    check(not others, f"{case}: no error finding names another rank: {others}")
    got = samples(v, "socket")
    first = {(min(r, s["peer"]), max(r, s["peer"])) for r, ss in got.items() for s in ss
             if s["round"] == 0 and not s.get("error")}
    check(len(first) == 2, f"{case}: the first round's 2 pairs measured: {sorted(first)}")
    for r, ss in got.items():
        for s in ss:
            if s["round"] > 0 and s["peer"] == 2:
                check(bool(s.get("error")), f"{case}: rank {r}'s later pair with rank 2 is an "
                      f"error: {s.get('error', '')[:120]}")
    if sig == "SIGKILL":
        # The watch sees a killed rank at once: its later partners skip it instead of waiting.
        check(slowest < 3, f"{case}: no round waited for the dead rank "
              f"({slowest:.1f} s)")
    print(f"  {case}: survivors ended {slowest:.1f} s after the fault")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    root = tempfile.mkdtemp(prefix="ncclsmoke-pairwise-")
    try:
        case_fabric(a.binary, root)
        for sig in ("SIGKILL", "SIGSTOP"):
            case_fault(a.binary, root, sig)
    finally:
        if a.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
    if FAILS:
        print(f"{len(FAILS)} check(s) failed")
        return 1
    print("ok: pairwise rounds" + (f" ({len(SKIPS)} case(s) skipped)" if SKIPS else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
