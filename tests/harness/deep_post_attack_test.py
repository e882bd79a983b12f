#!/usr/bin/python3
"""A stranger posts a verdict 100,000 levels deep under rank 1's verdict key; rank 0 must still
write verdict.json, exit with a documented code, and name the bad post (RESULTS_MISSING for rank 1,
"nested deeper than 64 levels"), and never crash: a deep post must not overflow the stack when
the global verdict is written.

Two ranks on loopback. Rank 1 stops itself mid-sweep (the test-only hook NCCLSMOKE_TEST_PAUSE_AT,
harness/run/transport_phase.h), so it never posts its own verdict; the stranger, a real
torch.distributed.TCPStore client (/usr/bin/python3's torch), reads the store's owner record for
the job's key prefix and sets <prefix>verdict/1; then rank 1 is SIGKILLed. Rank 0 looks once at a
dead rank's key, and finds the stranger's post there.

    /usr/bin/python3 tests/harness/deep_post_attack_test.py --binary build/ncclsmoke
Exit status: 0 passed, 1 failed, 77 torch is not installed (skipped).
"""

import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile

from loopback import free_port, poll_until, proc_state

DEPTH = 100_000
TIMEOUT = 40


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    a = ap.parse_args()
    a.binary = os.path.abspath(a.binary)
    try:
        import torch.distributed as dist
    except ImportError:
        print("skipped: torch is not installed")
        return 77
    problems = []
    with tempfile.TemporaryDirectory(prefix="ncclsmoke-deep-post-") as work:
        port = free_port()
        procs = []
        for r in range(2):
            env = dict(os.environ)
            env.pop("NCCLSMOKE_TEST_PAUSE_AT", None)
            if r == 1:
                env["NCCLSMOKE_TEST_PAUSE_AT"] = "sweep"
            args = [a.binary, "run", "--launcher", "flags", "--rank", str(r), "--world-size", "2",
                    "--master-addr", "127.0.0.1", "--master-port", str(port), "--store-bind",
                    "127.0.0.1", "--out-dir", work, "--job-id", "deeppost", "--transports",
                    "socket", "--min-bytes", "64M", "--max-bytes", "64M", "--iters", "400",
                    "--warmup-iters", "1", "--op-timeout", "4", "--timeout", str(TIMEOUT),
                    "--quiet"]
            log = open(os.path.join(work, f"rank{r}.log"), "w")
            procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=env))
        try:
            poll_until(lambda: proc_state(procs[1].pid) in ("T", ""), 30)
            if proc_state(procs[1].pid) != "T":
                problems.append("rank 1 never stopped itself in the sweep")
            else:
                store = dist.TCPStore("127.0.0.1", port, None, False,
                                      datetime.timedelta(seconds=10), wait_for_workers=False)
                prefix = json.loads(store.get("ncclsmoke/owner"))["key_prefix"]
                key = prefix + "verdict/1"
                store.set(key, "[" * DEPTH + "]" * DEPTH)
                print(f"stranger: set {key} ({2 * DEPTH} bytes, {DEPTH} levels)")
                os.kill(procs[1].pid, signal.SIGKILL)
            try:
                procs[0].wait(timeout=TIMEOUT + 10)
            except subprocess.TimeoutExpired:
                problems.append(f"rank 0 still ran {TIMEOUT + 10} s later")
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait(timeout=10)
        code = procs[0].returncode
        print(f"rank 0: exit {code}")
        log0 = open(os.path.join(work, "rank0.log")).read()
        if code not in (0, 1, 3, 4, 8):
            problems.append(f"rank 0 exit {code}, not a documented code: {log0[-600:]}")
        path = os.path.join(work, "verdict.json")
        if not os.path.exists(path):
            problems.append("rank 0 wrote no verdict.json")
        else:
            v = json.load(open(path))
            print(f"verdict.json: {v['verdict']}, findings {[f['code'] for f in v['findings']]}")
            named = [f for f in v["findings"] if f["code"] == "RESULTS_MISSING" and 1 in f["ranks"]
                     and "nested deeper than 64 levels" in f["message"]]
            if not named:
                problems.append(f"no RESULTS_MISSING names rank 1's bad post: "
                                f"{[(f['code'], f['message']) for f in v['findings']]}")
            if v["verdict"] == "pass":
                problems.append("a run with a lost rank and a bad post passed")
    for p in problems:
        print("FAIL " + p)
    print("passed" if not problems else f"{len(problems)} problem(s)")
    return 1 if problems else 0

if __name__ == "__main__":
    sys.exit(main())
