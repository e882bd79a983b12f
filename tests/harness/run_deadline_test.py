#!/usr/bin/python3
"""--timeout bounds the transports too: a transport that cannot finish in time, run with
--timeout 20 --transport-timeout 60, ends in RUN_TIMEOUT naming the transport phase, and every
rank's verdict (and rank 0's verdict.json) is on disk within 0.5 s of --timeout.

The transport is real: two ranks on loopback sweep 32 MiB all-reduces with far more iterations
than 20 s allow, so only the run's deadline can end it (the transport's own is 60 s, each
collective's 60 s).

    /usr/bin/python3 tests/harness/run_deadline_test.py --binary build/ncclsmoke
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from loopback import free_port

RUN_TIMEOUT = 20
SLACK = 0.5  # the verdict must be written by --timeout + this


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    a = ap.parse_args()
    problems = []
    with tempfile.TemporaryDirectory(prefix="ncclsmoke-deadline-") as work:
        port = free_port()
        procs, starts = [], []
        for r in range(2):
            args = [a.binary, "run", "--launcher", "flags", "--rank", str(r), "--world-size", "2",
                    "--master-addr", "127.0.0.1", "--master-port", str(port), "--store-bind",
                    "127.0.0.1", "--out-dir", work, "--transports", "socket",
                    "--min-bytes", "32M", "--max-bytes", "32M", "--iters", "100000",
                    "--op-timeout", "60", "--transport-timeout", "60",
                    "--timeout", str(RUN_TIMEOUT), "--quiet"]
            log = open(os.path.join(work, f"rank{r}.log"), "w")
            starts.append(time.monotonic())
            procs.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT))
        took = []
        for r, p in enumerate(procs):
            try:
                p.wait(timeout=RUN_TIMEOUT + 15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                problems.append(f"rank {r} still ran {RUN_TIMEOUT + 15} s after it started")
            took.append(time.monotonic() - starts[r])
        for r in range(2):
            print(f"rank {r}: exit {procs[r].returncode} after {took[r]:.2f} s "
                  f"(--timeout {RUN_TIMEOUT})")
            if took[r] > RUN_TIMEOUT + SLACK:
                problems.append(f"rank {r} ended {took[r]:.2f} s after its start, more than "
                                f"--timeout {RUN_TIMEOUT} + {SLACK} s")
        for name in ["verdict.rank0.json", "verdict.rank1.json", "verdict.json"]:
            path = os.path.join(work, name)
            if not os.path.exists(path):
                problems.append(f"{name} was not written")
                continue
            v = json.load(open(path))
            timeouts = [f for f in v["findings"] if f["code"] == "RUN_TIMEOUT"]
            print(f"{name}: verdict {v['verdict']}, findings "
                  f"{[f['code'] for f in v['findings']]}")
            if not timeouts:
                problems.append(f"{name}: no RUN_TIMEOUT finding: {v['findings']}")
            elif not any("transport:socket" in f["message"] for f in timeouts):
                problems.append(f"{name}: RUN_TIMEOUT does not name transport:socket: "
                                f"{[f['message'] for f in timeouts]}")
            if any(f["code"] == "TRANSPORT_TIMEOUT" for f in v["findings"]):
                problems.append(f"{name}: the run's deadline was called TRANSPORT_TIMEOUT")
            if v["verdict"] == "pass":
                problems.append(f"{name}: a run cut short by --timeout passed")
            phase = [p for p in v["phases"] if p["name"] == "transport:socket"]
            if not phase or phase[0]["status"] != "inconclusive":
                problems.append(f"{name}: transport:socket phase is {phase}, not inconclusive")
        if problems:
            for r in range(2):
                sys.stdout.write(f"--- rank{r}.log\n" + open(os.path.join(work, f"rank{r}.log")).read())
    for p in problems:
        print("FAIL:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
